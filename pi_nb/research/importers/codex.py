"""Codex CLI rollout files (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``) → Pi sessions.

A rollout line is ``{"timestamp", "type", "payload"}``. Codex has no parent links: the
session is one chain in file order. The mapping:

- ``response_item`` ``message`` → user / assistant messages (``developer`` and ``system``
  roles → Pi ``system`` messages); ``reasoning`` → a ``thinking`` block (summary text;
  ``encrypted_content`` kept as the signature); ``function_call`` / ``custom_tool_call`` /
  ``local_shell_call`` / ``tool_search_call`` → ``toolCall`` blocks (``tool_search_call`` as
  tool ``tool_search``, its ``arguments`` parsed). Consecutive assistant-side items (one
  model response) form one Pi assistant message.
- ``function_call_output`` / ``custom_tool_call_output`` / ``tool_search_output`` →
  ``toolResult``, paired by ``call_id`` (the ``output`` text; a non-zero ``exit_code`` →
  ``isError``; ``metadata`` → ``details``; for ``tool_search_output`` the ``tools`` found,
  as JSON text). A call or output without ``call_id`` gets a generated id (counted as
  unmatched in the report).
- ``web_search_call`` (a search the server ran; no output item follows) → a ``toolCall``
  ``web_search`` (``action`` as arguments) and a *derived* ``toolResult`` stating its
  status (the results themselves are not in the rollout; the record is in ``details``).
- ``event_msg`` ``token_count`` → the usage of the latest assistant message (``last_token_usage``;
  cached input → ``cacheRead``). Every ``event_msg`` is also kept as a custom entry.
- ``turn_context`` → ``model_change`` / ``thinking_level_change`` when the model or effort
  changes; the record itself is kept as a custom entry.
- ``compacted`` (Codex's own compaction) → a Pi ``compaction`` entry on the chain: summary =
  its ``message`` (or, when empty, the text of ``replacement_history``; the record is kept
  in ``details``), ``tokensBefore`` = the context of the last ``token_count`` (input +
  output of the last turn) or, without one, Pi's estimate; ``firstKeptEntryId`` = the first
  entry after it (derived: Codex keeps nothing verbatim). The projection at the leaf is
  [summary, messages after].
- the model of assistant messages comes from ``turn_context.model``, else the
  ``session_meta`` (or legacy first-line) ``model``; messages before the first model is
  known get that first model (noted); a rollout naming no model leaves ``""`` (warned).
- ``session_meta`` (header cwd / id) and anything else → ``custom`` entries ``import:<type>``.

The older layout without the ``payload`` envelope (a bare metadata first line, then bare
items) is read too.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...entries import Entry, Message
from ._base import (
    ImportReport,
    TranscriptImportError,
    TreeBuilder,
    finish_compactions,
    image_block,
    pi_usage,
    read_records,
    text_blocks,
    transcript_importer,
)

__all__ = ["import_codex"]

_ASSISTANT_ITEMS = (
    "reasoning",
    "function_call",
    "custom_tool_call",
    "local_shell_call",
    "tool_search_call",
    "web_search_call",
)
_OUTPUT_ITEMS = ("function_call_output", "custom_tool_call_output", "tool_search_output")
_ITEM_TYPES = (*_ASSISTANT_ITEMS, *_OUTPUT_ITEMS, "message")
_EFFORT = {"none": "off", "minimal": "minimal", "low": "low", "medium": "medium", "high": "high"}
_EXIT_CODE = re.compile(r"^Exit code: (-?\d+)", re.M)
#: Legacy rollouts name the working directory only in the first user message.
_ENV_CWD = re.compile(r"<environment_context>.*?<cwd>([^<]+)</cwd>", re.S)


def _envelope(record: dict[str, Any], first: bool) -> tuple[str, Any]:
    """(type, payload) of a record in either layout."""
    if "payload" in record and isinstance(record.get("type"), str):
        return record["type"], record["payload"]
    if first and "type" not in record and "id" in record:
        return "session_meta", record
    if record.get("type") in _ITEM_TYPES:
        return "response_item", record
    return str(record.get("type") or record.get("record_type") or "unknown"), record


def _kind(kind: str, payload: Any) -> str:
    if kind in ("response_item", "event_msg") and isinstance(payload, dict):
        return f"{kind}:{payload.get('type')}"
    return kind


def _message_blocks(content: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else text_blocks(content):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in ("input_text", "output_text", "text"):
            out.append({"type": "text", "text": block.get("text", "")})
        elif kind == "input_image":
            url = str(block.get("image_url") or "")
            out.append(image_block(url))
        else:
            out.append(block)
    return out


def _arguments(raw: Any) -> dict[str, Any]:
    """A call's arguments as a dict: JSON text parsed; anything else under ``input``."""
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {"input": raw}
    if value is None:
        return {}
    return value if isinstance(value, dict) else {"input": value}


def _parse_output(raw: Any) -> tuple[str, bool, Any]:
    """(text, is_error, details) of a tool output in any of Codex's layouts."""
    if isinstance(raw, dict):
        text = raw.get("content") if isinstance(raw.get("content"), str) else json.dumps(raw)
        return text, raw.get("success") is False, raw
    text = raw if isinstance(raw, str) else json.dumps(raw)
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict) and "output" in value:
        metadata = value.get("metadata")
        code = metadata.get("exit_code") if isinstance(metadata, dict) else None
        return str(value["output"]), code not in (None, 0), metadata
    match = _EXIT_CODE.search(text)
    return text, bool(match and int(match.group(1)) != 0), None


class _Importer:
    def __init__(self, builder: TreeBuilder, costs: bool) -> None:
        self.b = builder
        self.costs = costs
        self.last: str | None = None
        self.open: Entry | None = None  # the assistant message items are merged into
        self.unpriced: list[Entry] = []  # assistant messages still without usage
        self.tool_names: dict[str, str] = {}
        self.provider = "openai"
        self.model = ""
        self.effort: str | None = None
        self.context_tokens = 0
        self.cwd: str | None = None
        self.session_id: str | None = None
        self.compactions: list[Entry] = []
        self.unnamed: list[Entry] = []  # assistant messages made before a model was known

    def chain(self, entry: Entry) -> Entry:
        self.last = entry["id"]
        return entry

    def custom(self, kind: str, record: Any, stamp: str) -> None:
        self.chain(self.b.custom(kind, record, self.last, stamp))

    # -- records -------------------------------------------------------------------------

    def record(self, kind: str, payload: Any, record: dict[str, Any], stamp: str) -> None:
        if kind == "session_meta" and isinstance(payload, dict):
            self.cwd = payload.get("cwd") or self.cwd
            self.session_id = payload.get("id") or self.session_id
            self.provider = payload.get("model_provider") or self.provider
            self._set_model(payload.get("model"))
            self.custom("session_meta", record, stamp)
        elif kind == "turn_context" and isinstance(payload, dict):
            self.custom("turn_context", record, stamp)
            self._turn_context(payload, stamp)
        elif kind == "event_msg" and isinstance(payload, dict):
            if payload.get("type") == "token_count":
                self._token_count(payload)
            self.custom("event_msg", record, stamp)
        elif kind == "compacted" and isinstance(payload, dict):
            self._compacted(payload, record, stamp)
        elif kind == "response_item" and isinstance(payload, dict):
            self._item(payload, record, stamp)
        else:
            self.custom(kind, record, stamp)

    def _set_model(self, model: Any) -> bool:
        """Take ``model`` as the current model; True when it changed."""
        if not isinstance(model, str) or not model or model == self.model:
            return False
        self.model = model
        for entry in self.unnamed:  # made before any model was named: the first one known
            entry["message"]["model"] = model
        if self.unnamed:
            self.b.report.notes.append(
                f"{len(self.unnamed)} assistant message(s) before the first model record "
                f"got model {model!r}"
            )
        self.unnamed.clear()
        return True

    def _turn_context(self, payload: dict[str, Any], stamp: str) -> None:
        model = payload.get("model")
        if self._set_model(model):
            self.chain(
                self.b.add("model_change", self.last, stamp, provider=self.provider, modelId=model)
            )
        effort = payload.get("effort")
        level = _EFFORT.get(str(effort)) if effort is not None else None
        if level is not None and level != self.effort:
            self.effort = level
            self.chain(self.b.add("thinking_level_change", self.last, stamp, thinkingLevel=level))

    def _token_count(self, payload: dict[str, Any]) -> None:
        info = payload.get("info")
        last = info.get("last_token_usage") if isinstance(info, dict) else None
        if not isinstance(last, dict) or not self.unpriced:
            return
        cached = int(last.get("cached_input_tokens") or 0)
        total_input = int(last.get("input_tokens") or 0)
        usage = pi_usage(
            max(total_input - cached, 0),
            int(last.get("output_tokens") or 0),
            cached,
            0,
            model=self.unpriced[-1]["message"].get("model"),
            costs=self.costs,
            report=self.b.report,
        )
        if last.get("reasoning_output_tokens"):
            usage["reasoning"] = int(last["reasoning_output_tokens"])
        self.unpriced[-1]["message"]["usage"] = usage
        self.unpriced.clear()
        self.context_tokens = total_input + int(last.get("output_tokens") or 0)

    def _compacted(self, payload: dict[str, Any], record: dict[str, Any], stamp: str) -> None:
        self.open = None
        summary = payload.get("message")
        if not isinstance(summary, str) or not summary.strip():
            history = payload.get("replacement_history")
            items = history if isinstance(history, list) else []
            texts = [
                b.get("text", "")
                for item in items
                if isinstance(item, dict)
                for b in _message_blocks(item.get("content"))
                if b.get("type") == "text" and b.get("text")
            ]
            summary = "\n\n".join(texts)
            if not summary:
                self.b.report.warnings.append(
                    "a compacted record has neither a message nor replacement_history text "
                    "(its compaction has an empty summary)"
                )
        # firstKeptEntryId (and tokensBefore without a token_count) come from
        # finish_compactions.
        entry = self.b.add(
            "compaction",
            self.last,
            stamp,
            summary=summary,
            firstKeptEntryId="",
            tokensBefore=self.context_tokens or None,
            details={"source": "codex", "record": record},
            fromHook=True,
        )
        self.compactions.append(entry)
        self.chain(entry)

    def _assistant(self, stamp: str) -> Entry:
        if self.open is None:
            message: Message = {
                "role": "assistant",
                "content": [],
                "api": "openai-responses",
                "provider": self.provider,
                "model": self.model,
                "usage": pi_usage(),
                "stopReason": "stop",
            }
            self.open = self.chain(self.b.message(message, self.last, stamp))
            self.unpriced.append(self.open)
            if not self.model:
                self.unnamed.append(self.open)
        return self.open

    def _tool_call(self, call_id: Any, name: str, arguments: dict[str, Any], stamp: str) -> None:
        entry = self._assistant(stamp)
        call_id = self.b.tool_id(call_id, "call")
        self.tool_names[call_id] = name
        entry["message"]["content"].append(
            {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}
        )
        entry["message"]["stopReason"] = "toolUse"

    def _item(self, payload: dict[str, Any], record: dict[str, Any], stamp: str) -> None:
        kind = payload.get("type")
        if kind == "message":
            role = payload.get("role")
            blocks = _message_blocks(payload.get("content"))
            if role == "assistant":
                self._assistant(stamp)["message"]["content"].extend(blocks)
                return
            self.open = None
            if role == "user" and self.cwd is None:
                text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
                found = _ENV_CWD.search(text)
                if found:
                    self.cwd = found.group(1).strip()
                    self.b.report.notes.append("cwd taken from the first <environment_context>")
            if role == "user":
                self.chain(self.b.message({"role": "user", "content": blocks}, self.last, stamp))
            elif role in ("developer", "system"):
                text = "\n".join(b.get("text", "") for b in blocks if b.get("type") == "text")
                self.chain(self.b.message({"role": "system", "content": text}, self.last, stamp))
            else:
                self.custom(f"response_item:message:{role}", record, stamp)
        elif kind == "reasoning":
            summary = payload.get("summary") or []
            texts = [s.get("text", "") for s in summary if isinstance(s, dict)]
            content = payload.get("content")
            if isinstance(content, list):
                raw = [c.get("text", "") for c in content if isinstance(c, dict) and c.get("text")]
                texts = raw or texts
            block: dict[str, Any] = {"type": "thinking", "thinking": "\n\n".join(texts)}
            if payload.get("encrypted_content"):
                block["thinkingSignature"] = payload["encrypted_content"]
            self._assistant(stamp)["message"]["content"].append(block)
        elif kind == "function_call":
            arguments = _arguments(payload.get("arguments"))
            self._tool_call(payload.get("call_id"), str(payload.get("name", "")), arguments, stamp)
        elif kind == "custom_tool_call":
            arguments = {"input": payload.get("input")}
            self._tool_call(payload.get("call_id"), str(payload.get("name", "")), arguments, stamp)
        elif kind == "local_shell_call":
            action = payload.get("action") if isinstance(payload.get("action"), dict) else {}
            self._tool_call(
                payload.get("call_id") or payload.get("id"), "local_shell", dict(action), stamp
            )
        elif kind == "tool_search_call":
            arguments = _arguments(payload.get("arguments"))
            self._tool_call(payload.get("call_id"), "tool_search", arguments, stamp)
        elif kind == "web_search_call":
            self._web_search(payload, stamp)
        elif kind in _OUTPUT_ITEMS:
            self.open = None
            call_id = self.b.tool_id(payload.get("call_id"), "result")
            if kind == "tool_search_output":
                tools = payload.get("tools")
                text, is_error = json.dumps(tools, ensure_ascii=False), False
                details: Any = {k: v for k, v in payload.items() if k != "tools"}
            else:
                text, is_error, details = _parse_output(payload.get("output"))
            result: Message = {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": self.tool_names.get(call_id, "unknown"),
                "content": text_blocks(text),
                "isError": is_error,
            }
            if details is not None:
                result["details"] = details
            self.chain(self.b.message(result, self.last, stamp))
        else:
            self.custom(f"response_item:{kind}", record, stamp)

    def _web_search(self, payload: dict[str, Any], stamp: str) -> None:
        """A server-run search: the call, and a result saying what is known of it."""
        action = payload.get("action") if isinstance(payload.get("action"), dict) else {}
        call_id = payload.get("call_id") or payload.get("id")
        self._tool_call(call_id, "web_search", dict(action), stamp)
        call_id = self.open["message"]["content"][-1]["id"] if self.open else str(call_id)
        self.open = None
        status = payload.get("status") or "unknown"
        what = action.get("query") or action.get("url") or ""
        text = f"web search {status}" + (f": {what}" if what else "")
        text += " (run by the server; its results are not in the rollout)"
        result: Message = {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": "web_search",
            "content": text_blocks(text),
            "isError": status not in ("completed", "unknown"),
            "details": payload,
        }
        self.chain(self.b.message(result, self.last, stamp))


@transcript_importer("codex", _Importer)
def import_codex(source: str, report: ImportReport, importer: _Importer) -> dict[str, Any]:
    """Import the Codex CLI rollout JSONL file ``src`` as a Pi session (the arguments are
    every importer's: see :func:`~pi_nb.research.importers.import_transcript`)."""
    builder = importer.b
    seen_item = False
    first = True
    rows = read_records(source, report)
    first_time = next(
        (v["timestamp"] for _, v, _ in rows if isinstance(v, dict) and v.get("timestamp")), None
    )
    builder.origin("codex", first_time)
    for number, value, raw in rows:
        if not isinstance(value, dict):
            report.records["invalid-line"] += 1
            importer.chain(builder.invalid_line(number, raw, importer.last))
            continue
        kind, payload = _envelope(value, first)
        if first and kind == "session_meta" and "payload" not in value:
            report.notes.append("legacy rollout (no payload envelope)")
        first = False
        report.records[_kind(kind, payload)] += 1
        seen_item = seen_item or kind in ("response_item", "session_meta")
        importer.record(kind, payload, value, builder.time(value.get("timestamp")))
    if not seen_item:
        raise TranscriptImportError(
            f"{source}: no session_meta or response_item records (not a Codex rollout?)"
        )
    if importer.unnamed:
        report.warnings.append(
            f"the rollout names no model: {len(importer.unnamed)} assistant message(s) have "
            'model ""'
        )
    finish_compactions(builder, importer.compactions, "Codex")
    if importer.cwd is None:
        report.warnings.append("the rollout names no working directory: cwd is the current one")
    return {"cwd": importer.cwd, "session_id": importer.session_id, "leaf": importer.last}
