"""A plain OpenAI-style ``messages`` list → a Pi session.

Accepted inputs: a JSON list of messages; a JSON object with ``messages`` (a chat request,
optionally with ``model``); JSONL with one message per line; or JSONL with one
``{"messages": [...]}`` conversation per line (each becomes its own root in the tree). The
mapping:

- ``system`` / ``developer`` → Pi ``system`` messages; ``user`` → user messages (text parts,
  ``image_url`` data URLs → image blocks);
- ``assistant`` → assistant messages: ``reasoning_content`` → thinking, text, ``tool_calls``
  (and the legacy ``function_call``) → ``toolCall`` blocks; a ``usage`` field, when present,
  becomes Pi usage;
- ``tool`` (and legacy ``function``) → ``toolResult`` (``toolName`` from the matching call);
- any other role → ``custom`` entries ``import:message:<role>``.

The format has no timestamps and no tree: messages get consecutive timestamps from a fixed
base, and each conversation is one chain.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ...entries import Message
from ._base import (
    ImportReport,
    ImportResult,
    TranscriptImportError,
    TreeBuilder,
    existing_source,
    file_seed,
    image_block,
    pi_usage,
    read_records,
    text_blocks,
)

#: Roles of an OpenAI-style messages list (anything else is kept as ``custom``).
_ROLES = ("system", "developer", "user", "assistant", "tool", "function")

__all__ = ["import_openai", "load_conversations"]


def load_conversations(path: str | os.PathLike[str]) -> tuple[list[list[Any]], str | None]:
    """The conversations in a file (lists of message dicts) and the model named, if any."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    try:
        doc: Any = json.loads(text)
    except ValueError:
        doc = None
    if isinstance(doc, list):
        return [doc], None
    if isinstance(doc, dict):
        if isinstance(doc.get("messages"), list):
            model = doc.get("model")
            return [doc["messages"]], model if isinstance(model, str) else None
        raise TranscriptImportError(f"{path}: a JSON object without a 'messages' list")
    rows = [value for _, value, _ in read_records(path)]
    if not rows or any(not isinstance(r, dict) for r in rows):
        raise TranscriptImportError(
            f"{path}: not a JSON messages list nor JSONL of messages{_other_format(str(path))}"
        )
    if all(isinstance(r.get("messages"), list) for r in rows):
        model = next((r["model"] for r in rows if isinstance(r.get("model"), str)), None)
        return [r["messages"] for r in rows], model
    return [rows], None


def _other_format(path: str) -> str:
    """``"; it looks like a X transcript (…)"`` when another importer recognises the file."""
    from . import detect_format

    try:
        kind = detect_format(path)
    except TranscriptImportError:
        return ""
    if kind == "openai":
        return ""
    return f"; it looks like a {kind} transcript (pi-nb import {kind} …)"


def _parts(content: Any) -> list[dict[str, Any]] | str:
    if content is None:
        return []
    if isinstance(content, str):
        return content
    out: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, str):
            out.append({"type": "text", "text": part})
        elif not isinstance(part, dict):
            continue
        elif part.get("type") in ("text", "input_text", "output_text"):
            out.append({"type": "text", "text": part.get("text", "")})
        elif part.get("type") == "refusal":
            out.append({"type": "text", "text": part.get("refusal", "")})
        elif part.get("type") == "image_url":
            image = part.get("image_url")
            url = image.get("url", "") if isinstance(image, dict) else str(image or "")
            out.append(image_block(url))
        else:
            out.append(part)
    return out


def _text(content: Any) -> str:
    parts = _parts(content)
    if isinstance(parts, str):
        return parts
    return "\n".join(p.get("text", "") for p in parts if p.get("type") == "text")


class _Importer:
    def __init__(self, builder: TreeBuilder, model: str | None, costs: bool) -> None:
        from ...llm import split_model

        self.b = builder
        self.costs = costs
        self.model_name = model or "unknown"
        self.provider, self.model = split_model(model) if model else ("openai", "unknown")
        self.tool_names: dict[str, str] = {}
        self.pending_functions: list[tuple[str, str]] = []  # legacy (id, name)

    def assistant(self, raw: dict[str, Any]) -> Message:
        content: list[dict[str, Any]] = []
        reasoning = raw.get("reasoning_content") or raw.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            content.append({"type": "thinking", "thinking": reasoning})
        parts = _parts(raw.get("content"))
        content += text_blocks(parts) if isinstance(parts, str) else parts
        if isinstance(raw.get("refusal"), str) and raw["refusal"]:
            content.append({"type": "text", "text": raw["refusal"]})
        calls = list(raw.get("tool_calls") or [])
        if isinstance(raw.get("function_call"), dict):
            call_id = f"function_call_{len(self.pending_functions) + len(self.tool_names)}"
            calls.append({"id": call_id, "function": raw["function_call"], "legacy": True})
        for call in calls:
            if not isinstance(call, dict):
                continue
            function = call.get("function") if isinstance(call.get("function"), dict) else {}
            name = str(function.get("name", ""))
            call_id = self.b.tool_id(call.get("id"), "call")
            block: dict[str, Any] = {"type": "toolCall", "id": call_id, "name": name}
            arguments = function.get("arguments")
            try:
                parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
            except ValueError:
                parsed = None
                block["argumentsError"] = "tool call arguments are not valid JSON"
            block["arguments"] = parsed if isinstance(parsed, dict) else {}
            if parsed is not None and not isinstance(parsed, dict):
                block["argumentsError"] = "tool call arguments are not a JSON object"
            content.append(block)
            self.tool_names[call_id] = name
            if call.get("legacy"):
                self.pending_functions.append((call_id, name))
        raw_usage = raw.get("usage") if isinstance(raw.get("usage"), dict) else {}
        message: Message = {
            "role": "assistant",
            "content": content,
            "api": "openai-completions",
            "provider": self.provider,
            "model": self.model,
            "usage": pi_usage(
                raw_usage.get("prompt_tokens", 0),
                raw_usage.get("completion_tokens", 0),
                model=self.model_name,
                costs=self.costs and bool(raw_usage),
                report=self.b.report,
            ),
            "stopReason": "toolUse" if calls else "stop",
        }
        return message

    def tool(self, raw: dict[str, Any]) -> Message:
        if raw.get("role") == "function":
            name = str(raw.get("name", ""))
            match = next((p for p in self.pending_functions if p[1] == name), None)
            if match is not None:
                self.pending_functions.remove(match)
                call_id = match[0]
            else:
                call_id = f"function_{name}"
        else:
            call_id = self.b.tool_id(raw.get("tool_call_id"), "result")
            name = self.tool_names.get(call_id, str(raw.get("name") or "unknown"))
        parts = _parts(raw.get("content"))
        return {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": name,
            "content": text_blocks(parts) if isinstance(parts, str) else parts,
            "isError": bool(raw.get("is_error")),
        }


def import_openai(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    *,
    model: str | None = None,
    costs: bool = False,
    overwrite: bool = False,
) -> ImportResult:
    """Import an OpenAI-style messages list (JSON or JSONL) as a Pi session.

    Args:
        src: the file.
        out: the Pi session file to write; None builds the session in memory.
        model: the model to record on assistant messages (default: the file's ``model``).
        costs: price assistant ``usage`` fields with litellm's table (imports litellm).
        overwrite: replace an existing ``out``.
    """
    source = existing_source(src)
    conversations, file_model = load_conversations(source)
    rows = [m for c in conversations for m in c]
    foreign = [m for m in rows if not (isinstance(m, dict) and m.get("role") in _ROLES)]
    other = _other_format(source) if foreign else ""
    if len(foreign) == len(rows) or other:
        # Another agent's transcript read as "messages" would import (mostly) as custom
        # entries, and Pi would see few or no messages: refuse instead.
        raise TranscriptImportError(
            f"{source}: no OpenAI-style messages in {len(foreign)} of {len(rows)} records "
            f"(a message has a role among {', '.join(_ROLES)}){other}"
        )
    report = ImportReport("openai", os.path.abspath(source))
    builder = TreeBuilder(report, file_seed(source, "openai"))
    importer = _Importer(builder, model or file_model, costs)
    last: str | None = None
    for conversation in conversations:
        last = None
        for raw in conversation:
            stamp = builder.time()
            role = raw.get("role") if isinstance(raw, dict) else None
            report.records[f"message:{role}" if role else "invalid-message"] += 1
            if not isinstance(raw, dict):
                last = builder.custom("invalid-message", raw, last, stamp)["id"]
            elif role in ("system", "developer"):
                message = {"role": "system", "content": _text(raw.get("content"))}
                last = builder.message(message, last, stamp)["id"]
            elif role == "user":
                message = {"role": "user", "content": _parts(raw.get("content"))}
                last = builder.message(message, last, stamp)["id"]
            elif role == "assistant":
                last = builder.message(importer.assistant(raw), last, stamp)["id"]
            elif role in ("tool", "function"):
                last = builder.message(importer.tool(raw), last, stamp)["id"]
            else:
                last = builder.custom(f"message:{role}", raw, last, stamp)["id"]
    if not report.records:
        raise TranscriptImportError(f"{source}: no messages")
    tree = builder.write(out, cwd=None, leaf=last, overwrite=overwrite)
    return ImportResult(tree, report)
