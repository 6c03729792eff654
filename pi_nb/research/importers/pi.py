"""Pi session files (native): validate, report and copy.

Pi's own reader rules apply (:func:`pi_nb.session.load_file`). Entry types Pi does not know
are kept verbatim — Pi itself keeps them on a round trip — and listed in the report; lines
that are not JSON objects are kept as ``custom`` entries ``import:invalid-line`` so the copy
loses nothing (the original file is never changed).
"""

from __future__ import annotations

import json
from typing import Any

from ...entries import ENTRY_TYPES, Entry
from ._base import ImportResult, StrPath, TranscriptImportError, start_import

__all__ = ["import_pi"]

_ROLES = ("user", "assistant", "toolResult", "bashExecution", "system", "custom")


def _kind(entry: Entry) -> str:
    if entry.get("type") == "message" and isinstance(entry.get("message"), dict):
        return f"message:{entry['message'].get('role')}"
    return str(entry.get("type"))


def import_pi(
    src: StrPath, out: StrPath | None = None, *, costs: bool = False, overwrite: bool = False
) -> ImportResult:
    """Validate a Pi session file and copy it to ``out`` (or load it in memory).

    The report counts entries by type and role, lists unknown entry types and message
    roles, parent links that point nowhere, and tool calls without results. ``costs`` is
    accepted like every importer's, but a Pi file's usage already carries Pi's own costs:
    they are copied, not re-priced (the report warns when it is asked for).
    """
    import warnings

    from ...session.jsonl import SessionError, SessionLoadWarning
    from ...session.tree import SessionTree

    source, report, builder = start_import(src, "pi")
    if costs:
        report.warnings.append("costs not re-priced: a Pi file keeps the costs Pi recorded")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SessionLoadWarning)
            original = SessionTree.open(source)
    except SessionError as exc:
        raise TranscriptImportError(str(exc)) from exc
    entries = [dict(e) for e in original.entries]
    ids = {e["id"] for e in entries}
    for entry in entries:
        report.records[_kind(entry)] += 1
        kind = entry.get("type")
        if kind not in ENTRY_TYPES:
            report.notes.append(f"entry {entry['id']}: unknown type {kind!r} kept verbatim")
        elif kind == "message":
            role = entry.get("message", {}).get("role")
            if role not in _ROLES:
                report.notes.append(f"entry {entry['id']}: unknown role {role!r} kept verbatim")
        parent = entry.get("parentId")
        if parent is not None and parent not in ids:
            report.orphans += 1
    skipped = original.report.skipped
    for line in skipped:
        report.notes.append(f"line {line.line}: {line.reason}")
    raw_lines = _raw_lines(source, [s.line for s in skipped])
    # Keep the original entries (ids, order, payload) and add the unreadable lines as
    # custom entries under the leaf, so the leaf stays where Pi would put it.
    leaf = original.leaf_id
    for entry in entries:
        builder.entries.append(entry)
        builder.by_id[entry["id"]] = entry
    builder._last_time = entries[-1]["timestamp"] if entries else None
    for number, text in raw_lines:
        extra = builder.invalid_line(number, text, leaf)
        leaf = extra["id"]
    report.id_map = {e["id"]: e["id"] for e in entries}
    tree = builder.write(
        out,
        cwd=original.header.get("cwd"),
        session_id=original.header.get("id"),
        leaf=leaf,
        overwrite=overwrite,
        header=original.header,
    )
    if original.header.get("parentSession") and out is not None:
        report.notes.append(f"parent session: {original.header['parentSession']}")
    return ImportResult(tree, report)


def _raw_lines(path: str, numbers: list[int]) -> list[tuple[int, str]]:
    """The text of the given (1-based) lines that are not JSON objects."""
    if not numbers:
        return []
    wanted = set(numbers)
    out: list[tuple[int, str]] = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            if number in wanted:
                text = line.rstrip("\n")
                try:
                    value: Any = json.loads(text)
                except ValueError:
                    value = None
                if not isinstance(value, dict) or value.get("type") != "session":
                    out.append((number, text))
    return out
