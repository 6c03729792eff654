"""Claude Code transcripts (``~/.claude/projects/<project>/<session>.jsonl``) → Pi sessions.

Claude Code writes one JSON record per line. Conversation records (``user``, ``assistant``,
``system``) carry ``uuid`` / ``parentUuid``, which form a tree (a "redo" makes a branch;
sub-agent ``isSidechain`` records start their own roots); the tree is kept as is. The mapping:

- ``assistant`` records → Pi assistant messages: ``text``, ``thinking`` (signature kept),
  ``tool_use`` → ``toolCall``; ``usage`` → Pi usage; ``stop_reason`` → ``stopReason``.
  Claude Code writes one record per content block of a streamed reply; consecutive records
  of the same API message (same ``message.id``, chained) are merged into one message.
- ``user`` records → ``toolResult`` messages for their ``tool_result`` blocks (``toolName``
  from the matching call, ``is_error`` → ``isError``, ``toolUseResult`` → ``details``),
  then a user message for the remaining text / image blocks.
- Claude Code's own compactions → Pi ``compaction`` entries on the branch they ended, so
  the history before stays reachable from the leaf and the projection at the leaf is
  [summary, messages after]. A ``system`` record with subtype ``compact_boundary`` (which
  starts a new chain: ``parentUuid`` null, ``logicalParentUuid`` = the last record before)
  becomes the compaction, parented to ``logicalParentUuid``; ``tokensBefore`` =
  ``compactMetadata.preTokens`` (``trigger`` and the record kept in ``details``); the
  ``isCompactSummary`` user record after it becomes its ``summary``. An
  ``isCompactSummary`` record with no boundary before it (older Claude Code) becomes a
  compaction itself, under its ``logicalParentUuid`` / parent / the main chain's last
  record. Derived: ``firstKeptEntryId`` = the first entry after the compaction (Claude
  Code keeps nothing verbatim) and, without ``preTokens``, ``tokensBefore`` = Pi's
  estimate of the context before it (see :func:`._base.finish_compactions`).
- everything else (other ``system`` records, ``summary``, ``file-history-snapshot``,
  ``queue-operation`` … and any kind added later) → ``custom`` entries ``import:<type>``
  holding the record, in the tree when they have a ``uuid``, as roots otherwise.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ...entries import Entry, Message
from ._base import (
    ImportReport,
    TranscriptImportError,
    TreeBuilder,
    finish_compactions,
    pi_usage,
    read_records,
    text_blocks,
    transcript_importer,
)

__all__ = ["import_claude_code"]

_STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "toolUse",
    "max_tokens": "length",
    "refusal": "stop",
}
_NO_SUMMARY = "(Claude Code compacted the conversation here; no summary was recorded.)"


def _record_kind(record: dict[str, Any]) -> str:
    kind = str(record.get("type"))
    if kind == "system" and record.get("subtype"):
        return f"system:{record['subtype']}"
    return kind


def _image(block: dict[str, Any]) -> dict[str, Any]:
    source = block.get("source") if isinstance(block.get("source"), dict) else {}
    if source.get("type") == "base64":
        return {
            "type": "image",
            "data": source.get("data", ""),
            "mimeType": source.get("media_type", "image/png"),
        }
    return {
        "type": "text",
        "text": f"[image: {source.get('url') or source.get('type') or 'unknown'}]",
    }


def _result_content(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return text_blocks(content)
    out: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            out.append({"type": "text", "text": block.get("text", "")})
        elif block.get("type") == "image":
            out.append(_image(block))
        else:
            out.append(block)
    return out


def _assistant_blocks(content: Any, builder: TreeBuilder) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else text_blocks(content):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            blocks.append({"type": "text", "text": block.get("text", "")})
        elif kind == "thinking":
            thinking: dict[str, Any] = {"type": "thinking", "thinking": block.get("thinking", "")}
            if block.get("signature"):
                thinking["thinkingSignature"] = block["signature"]
            blocks.append(thinking)
        elif kind == "redacted_thinking":
            blocks.append(
                {
                    "type": "thinking",
                    "thinking": "",
                    "thinkingSignature": block.get("data", ""),
                    "redacted": True,
                }
            )
        elif kind == "tool_use":
            arguments = block.get("input")
            blocks.append(
                {
                    "type": "toolCall",
                    "id": builder.tool_id(block.get("id"), "call"),
                    "name": block.get("name", ""),
                    "arguments": arguments if isinstance(arguments, dict) else {"input": arguments},
                }
            )
        else:  # server tools, future block types: kept as they are
            blocks.append(block)
    return blocks


def _stop_reason(raw: Any, content: list[dict[str, Any]], error: bool) -> str:
    if error:
        return "error"
    if raw in _STOP:
        return _STOP[raw]
    return "toolUse" if any(b.get("type") == "toolCall" for b in content) else "stop"


class _Importer:
    def __init__(self, builder: TreeBuilder, costs: bool) -> None:
        self.b = builder
        self.costs = costs
        self.entry_of: dict[str, str] = {}  # record uuid → entry id children attach to
        self.record_of: dict[str, dict[str, Any]] = {}
        self.tool_names: dict[str, str] = {}
        self.open_assistant: dict[str, tuple[Entry, str]] = {}  # uuid → (entry, message id)
        self.compactions: dict[str, Entry] = {}  # boundary uuid → compaction entry
        self.all_compactions: list[Entry] = []
        self.main_leaf: str | None = None

    # -- one record ----------------------------------------------------------------------

    def record(self, record: dict[str, Any], parent: str | None) -> None:
        kind = record.get("type")
        uuid = record.get("uuid")
        stamp = self.b.time(record.get("timestamp"))
        if kind == "assistant" and isinstance(record.get("message"), dict):
            last = self._assistant(record, parent, stamp)
        elif kind == "user" and isinstance(record.get("message"), dict):
            last = self._user(record, parent, stamp)
        elif kind == "system" and record.get("subtype") == "compact_boundary":
            last = self._boundary(record, parent, stamp)
        else:
            last = self.b.custom(str(kind), record, parent if uuid else None, stamp)["id"]
        if isinstance(uuid, str):
            self.entry_of[uuid] = last
            self.b.report.id_map[uuid] = last
            if not record.get("isSidechain"):
                self.main_leaf = last

    def _assistant(self, record: dict[str, Any], parent: str | None, stamp: str) -> str:
        message = record["message"]
        blocks = _assistant_blocks(message.get("content"), self.b)
        for block in blocks:
            if block.get("type") == "toolCall" and block.get("id"):
                self.tool_names[str(block["id"])] = str(block.get("name"))
        message_id = message.get("id")
        previous = self.open_assistant.get(str(record.get("parentUuid")))
        raw_usage = message.get("usage") if isinstance(message.get("usage"), dict) else {}
        model = str(message.get("model") or "")
        usage = pi_usage(
            raw_usage.get("input_tokens", 0),
            raw_usage.get("output_tokens", 0),
            raw_usage.get("cache_read_input_tokens", 0),
            raw_usage.get("cache_creation_input_tokens", 0),
            model=model,
            costs=self.costs,
            report=self.b.report,
        )
        error = bool(record.get("isApiErrorMessage"))
        if previous is not None and message_id and previous[1] == message_id:
            entry = previous[0]
            pi_message = entry["message"]
            pi_message["content"].extend(blocks)
            pi_message["usage"] = usage
            pi_message["stopReason"] = _stop_reason(
                message.get("stop_reason"), pi_message["content"], error
            )
        else:
            pi_message = {
                "role": "assistant",
                "content": blocks,
                "api": "anthropic-messages",
                "provider": "anthropic",
                "model": model,
                "usage": usage,
                "stopReason": _stop_reason(message.get("stop_reason"), blocks, error),
            }
            if message_id:
                pi_message["responseId"] = message_id
            entry = self.b.message(pi_message, parent, stamp)
        if error:
            pi_message["errorMessage"] = " ".join(
                b.get("text", "") for b in blocks if b.get("type") == "text"
            ).strip()
        if isinstance(record.get("uuid"), str) and message_id:
            self.open_assistant[record["uuid"]] = (entry, message_id)
        return entry["id"]

    def _user(self, record: dict[str, Any], parent: str | None, stamp: str) -> str:
        content = record["message"].get("content")
        if record.get("isCompactSummary"):
            text = (
                content
                if isinstance(content, str)
                else "\n".join(
                    b.get("text", "")
                    for b in content or []
                    if isinstance(b, dict) and b.get("type") == "text"
                )
            )
            boundary = self.compactions.get(str(record.get("parentUuid")))
            if boundary is None:  # no compact_boundary record: the summary is the compaction
                logical = record.get("logicalParentUuid")
                if isinstance(logical, str) and logical in self.entry_of:
                    parent = self.entry_of[logical]
                elif parent is None and not record.get("isSidechain"):
                    parent = self.main_leaf
                boundary = self._compaction(parent, stamp, None, None, record)
            boundary["summary"] = text
            self.b.report.notes.append(
                f"compact summary {record.get('uuid')} became the summary of compaction "
                f"{boundary['id']}"
            )
            return boundary["id"]
        last = parent
        if isinstance(content, str):
            return self.b.message({"role": "user", "content": content}, last, stamp)["id"]
        rest: list[dict[str, Any]] = []
        details_left = True
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result":
                call_id = self.b.tool_id(block.get("tool_use_id"), "result")
                result: Message = {
                    "role": "toolResult",
                    "toolCallId": call_id,
                    "toolName": self.tool_names.get(call_id, "unknown"),
                    "content": _result_content(block.get("content")),
                    "isError": bool(block.get("is_error")),
                }
                if details_left and "toolUseResult" in record:
                    result["details"] = record["toolUseResult"]
                    details_left = False
                last = self.b.message(result, last, stamp)["id"]
            elif block.get("type") == "image":
                rest.append(_image(block))
            else:
                rest.append(block)
        if rest or last == parent:
            last = self.b.message({"role": "user", "content": rest}, last, stamp)["id"]
        assert last is not None
        return last

    def _boundary(self, record: dict[str, Any], parent: str | None, stamp: str) -> str:
        logical = record.get("logicalParentUuid")
        if isinstance(logical, str) and logical in self.entry_of:
            parent = self.entry_of[logical]
        meta = (
            record.get("compactMetadata") if isinstance(record.get("compactMetadata"), dict) else {}
        )
        pre = meta.get("preTokens")
        tokens = int(pre) if isinstance(pre, (int, float)) and not isinstance(pre, bool) else None
        entry = self._compaction(parent, stamp, tokens, meta.get("trigger"), record)
        if isinstance(record.get("uuid"), str):
            self.compactions[record["uuid"]] = entry
        return entry["id"]

    def _compaction(
        self,
        parent: str | None,
        stamp: str,
        tokens: int | None,
        trigger: Any,
        record: dict[str, Any],
    ) -> Entry:
        # firstKeptEntryId and a missing tokensBefore are filled by finish_compactions.
        entry = self.b.add(
            "compaction",
            parent,
            stamp,
            summary=_NO_SUMMARY,
            firstKeptEntryId="",
            tokensBefore=tokens,
            details={"source": "claude-code", "trigger": trigger, "record": record},
            fromHook=True,
        )
        self.all_compactions.append(entry)
        return entry


@transcript_importer("claude-code", _Importer)
def import_claude_code(source: str, report: ImportReport, importer: _Importer) -> dict[str, Any]:
    """Import the Claude Code JSONL transcript ``src`` as a Pi session (the arguments are
    every importer's: see :func:`~pi_nb.research.importers.import_transcript`)."""
    builder = importer.b
    lines = read_records(source, report)
    records: list[tuple[int, dict[str, Any]]] = []
    for number, value, raw in lines:
        if isinstance(value, dict):
            records.append((number, value))
            report.records[_record_kind(value)] += 1
        else:
            report.records["invalid-line"] += 1
            records.append((number, {"__invalid__": raw}))
    if not any("__invalid__" not in r for _, r in records):
        raise TranscriptImportError(f"{source}: no JSON records (not a Claude Code transcript?)")
    if not any(r.get("type") in ("user", "assistant") for _, r in records):
        raise TranscriptImportError(
            f"{source}: no user or assistant records (not a Claude Code transcript?)"
        )
    builder.origin(
        "claude-code", next((r["timestamp"] for _, r in records if r.get("timestamp")), None)
    )
    known = {r["uuid"] for _, r in records if isinstance(r.get("uuid"), str)}
    cwd = next((r["cwd"] for _, r in records if isinstance(r.get("cwd"), str)), None)
    session_id = next(
        (r["sessionId"] for _, r in records if isinstance(r.get("sessionId"), str)), None
    )

    # Parents first: a record whose parent comes later in the file waits for it.
    waiting: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)

    def run(number: int, record: dict[str, Any]) -> None:
        if "__invalid__" in record:
            builder.invalid_line(number, record["__invalid__"], None)
            return
        parent_uuid = record.get("parentUuid")
        parent: str | None = None
        if isinstance(parent_uuid, str):
            parent = importer.entry_of.get(parent_uuid)
            if parent is None and parent_uuid not in known:
                report.orphans += 1
        importer.record(record, parent)
        uuid = record.get("uuid")
        for child in waiting.pop(uuid, []) if isinstance(uuid, str) else []:
            run(*child)

    for number, record in records:
        parent_uuid = record.get("parentUuid")
        if (
            isinstance(parent_uuid, str)
            and parent_uuid in known
            and parent_uuid not in importer.entry_of
        ):
            waiting[parent_uuid].append((number, record))
            continue
        run(number, record)
    for pending in list(waiting.values()):  # parent cycles: import them as roots
        for _number, record in pending:
            report.orphans += 1
            importer.record({**record, "parentUuid": None}, None)
    finish_compactions(builder, importer.all_compactions, "Claude Code")
    unsummarized = sum(e["summary"] == _NO_SUMMARY for e in importer.all_compactions)
    if unsummarized:
        report.warnings.append(
            f"{unsummarized} compact_boundary record(s) without the summary record after them "
            "(the compaction's summary says so)"
        )
    return {"cwd": cwd, "session_id": session_id, "leaf": importer.main_leaf}
