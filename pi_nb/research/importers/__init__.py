"""Importers: other agents' transcripts → Pi session trees, so their histories can be studied.

- :func:`import_pi` — Pi session files (validate and copy);
- :func:`import_claude_code` — Claude Code JSONL transcripts;
- :func:`import_codex` — Codex CLI rollout JSONL files;
- :func:`import_openai` — a plain OpenAI-style ``messages`` list.

:func:`import_transcript` picks one by name (or guesses with :func:`detect_format`). Each
returns an :class:`ImportResult` (the tree and an :class:`ImportReport`). Nothing is dropped:
record kinds an importer does not map are kept as ``custom`` entries ``import:<kind>``.
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


def detect_format(path: str | os.PathLike[str]) -> str:
    """Guess a transcript's format from its first records.

    Raises TranscriptImportError when nothing matches.
    """
    first: list[Any] = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        head = handle.read(1 << 16)
    stripped = head.lstrip()
    for line in head.splitlines()[:20]:
        try:
            first.append(json.loads(line))
        except ValueError:
            continue
    records = [r for r in first if isinstance(r, dict)]
    if records and records[0].get("type") == "session" and "version" in records[0]:
        return "pi"
    for record in records:
        kind = record.get("type")
        if kind in ("session_meta", "response_item", "turn_context", "event_msg"):
            return "codex"
        if "parentUuid" in record or kind in ("summary", "file-history-snapshot"):
            return "claude-code"
    if stripped.startswith("[") or (stripped.startswith("{") and '"messages"' in head):
        return "openai"
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

    Extra keyword arguments (``costs``, ``overwrite`` …) go to the importer.
    """
    existing_source(src)
    name = detect_format(src) if kind == "auto" else kind
    if name not in FORMATS:
        known = ", ".join(FORMATS)
        raise TranscriptImportError(f"unknown transcript format {kind!r} (known: {known})")
    return FORMATS[name](src, out, **options)
