"""Importers: other agents' transcripts → Pi session trees, so their histories can be studied.

- :func:`import_pi` — Pi session files (validate and copy);
- :func:`import_claude_code` — Claude Code JSONL transcripts;
- :func:`import_codex` — Codex CLI rollout JSONL files;
- :func:`import_openai` — a plain OpenAI-style ``messages`` list.

:func:`import_transcript` picks one by name (or guesses with :func:`detect_format`). Each
returns an :class:`ImportResult` (the tree and an :class:`ImportReport`). Nothing is dropped:
record kinds an importer does not map are kept as ``custom`` entries ``import:<kind>``.

Every importer reads JSONL, pretty-printed or concatenated JSON (said in the report). The
Claude Code and Codex importers start the tree with a ``custom`` ``import:origin`` entry
(``data.fileTools``: whose file tools compaction file lists count, see
:func:`pi_nb.compaction.prepare.file_tools_of`), and turn the agent's own compactions into
Pi ``compaction`` entries (``firstKeptEntryId`` derived: the first entry after it). The
report's :meth:`~ImportReport.summary` names tool results without their call, calls without
a result, generated ids and anything the user may expect but did not get.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from ._base import (
    IMPORT_PREFIX,
    ImportReport,
    ImportResult,
    TranscriptImportError,
    existing_source,
    one_record_per_line,
)
from .claude_code import import_claude_code
from .codex import import_codex
from .openai import import_openai
from .pi import import_pi

__all__ = [
    "FORMATS",
    "IMPORT_PREFIX",
    "ImportReport",
    "ImportResult",
    "TranscriptImportError",
    "detect_format",
    "import_claude_code",
    "import_codex",
    "import_openai",
    "import_pi",
    "import_transcript",
]

#: Importer per format name (the names of ``pi-nb import``).
FORMATS: dict[str, Callable[..., ImportResult]] = {
    "pi": import_pi,
    "claude-code": import_claude_code,
    "codex": import_codex,
    "openai": import_openai,
}


#: Record types of Codex rollouts: the envelope's, and the bare items of legacy rollouts.
_CODEX_ENVELOPE = ("session_meta", "response_item", "turn_context", "event_msg", "compacted")
_CODEX_ITEMS = (
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "tool_search_call",
    "tool_search_output",
    "web_search_call",
)


def _head_values(path: str | os.PathLike[str], limit: int = 50) -> list[Any]:
    """The first JSON values of a file: one per line, or (when the first line is not JSON on
    its own, e.g. pretty-printed) as concatenated values; top-level arrays give their items."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        head = handle.read(1 << 20)
        more = bool(handle.read(1))
    lines = [line.strip() for line in head.splitlines() if line.strip()]
    if not lines:
        return []
    values: list[Any] = []
    if one_record_per_line(lines[:limit]):
        for line in lines[:limit]:
            try:
                values.append(json.loads(line))
            except ValueError:
                continue
    else:
        if more:  # the first value may be longer than the head: read it all
            with open(path, encoding="utf-8", errors="replace") as handle:
                head = handle.read()
        decoder, position = json.JSONDecoder(), 0
        while len(values) < limit:
            while position < len(head) and head[position].isspace():
                position += 1
            if position >= len(head):
                break
            try:
                value, position = decoder.raw_decode(head, position)
            except ValueError:
                break
            values.append(value)
    out: list[Any] = []
    for value in values:
        out.extend(value if isinstance(value, list) else [value])
    return out


def detect_format(path: str | os.PathLike[str]) -> str:
    """Guess a transcript's format from its first records (any layout the importers read:
    JSONL, pretty-printed or concatenated JSON; legacy Codex rollouts included).

    Raises TranscriptImportError when nothing matches.
    """
    records = [r for r in _head_values(path) if isinstance(r, dict)]
    if records and records[0].get("type") == "session" and "version" in records[0]:
        return "pi"
    if any(isinstance(r.get("messages"), list) and "type" not in r for r in records):
        return "openai"
    # A legacy rollout starts with bare metadata: {"id", "timestamp", "instructions"...}.
    head = records[0] if records else {}
    if "type" not in head and "role" not in head and "id" in head and "timestamp" in head:
        return "codex"
    for record in records:
        kind = record.get("type")
        if kind in _CODEX_ENVELOPE and "payload" in record:
            return "codex"
        if "parentUuid" in record or kind in ("summary", "file-history-snapshot"):
            return "claude-code"
        if record.get("record_type") == "state":
            return "codex"
        if kind in _CODEX_ITEMS and "uuid" not in record and "sessionId" not in record:
            return "codex"
        if kind in _CODEX_ENVELOPE:
            return "codex"
    if records and all("role" in r for r in records):
        return "openai"
    raise TranscriptImportError(f"{path}: cannot tell the transcript format; pass it explicitly")


def import_transcript(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    kind: str = "auto",
    **options: Any,
) -> ImportResult:
    """Import ``src`` with the importer for ``kind`` (``"auto"`` guesses it).

    Extra keyword arguments go to the importer; every importer takes:

    Args:
        src: the transcript file.
        out: the Pi session file to write; None builds the session in memory.
        costs: price assistant usage with litellm's bundled table (imports litellm).
        overwrite: replace an existing ``out``.
    """
    existing_source(src)
    name = detect_format(src) if kind == "auto" else kind
    if name not in FORMATS:
        known = ", ".join(FORMATS)
        raise TranscriptImportError(f"unknown transcript format {kind!r} (known: {known})")
    return FORMATS[name](src, out, **options)
