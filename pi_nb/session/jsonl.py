"""Reading, migrating and appending Pi session JSONL files.

Reading follows Pi 1.3's rules (split on newlines, skip blank and undecodable lines, the
first parsed object must be a `session` header) but never silently: every skipped or
repaired line is recorded in a :class:`LoadReport` and raised as a warning.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .entries import CURRENT_SESSION_VERSION, Entry, dumps_line, new_entry_id


class SessionError(Exception):
    """Base class for session problems shown to users as one line."""


class NotASessionError(SessionError):
    """The file exists and is not empty, but does not start with a Pi session header."""


class SessionLoadWarning(UserWarning):
    """Lines were skipped or repaired while loading a session file."""


@dataclass(frozen=True)
class SkippedLine:
    """One line Pi would ignore (or repair), with where and why."""

    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


@dataclass
class LoadReport:
    """What loading a file skipped or changed."""

    skipped: list[SkippedLine] = field(default_factory=list)
    missing_final_newline: bool = False
    migrated_from: int | None = None

    @property
    def clean(self) -> bool:
        return not self.skipped and not self.missing_final_newline and self.migrated_from is None


@dataclass
class LoadedFile:
    header: dict[str, Any]
    entries: list[Entry]
    report: LoadReport


def _parse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _iter_lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    start = 0
    number = 0
    while True:
        number += 1
        end = data.find(b"\n", start)
        if end == -1:
            yield number, data[start:]
            return
        yield number, data[start:end]
        start = end + 1


def _loads(raw: str) -> Any:
    return json.loads(raw, parse_constant=_parse_constant)


def parse_bytes(data: bytes, file: str = "<memory>") -> LoadedFile:
    """Parse a session file's bytes. Raises NotASessionError when there is no valid header."""
    report = LoadReport()
    parsed: list[tuple[int, Any]] = []
    if data and not data.endswith(b"\n"):
        report.missing_final_newline = True
    for number, raw in _iter_lines(data):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            # Pi's streaming decoder substitutes U+FFFD and keeps the line.
            text = raw.decode("utf-8", "replace")
            report.skipped.append(
                SkippedLine(file, number, "invalid UTF-8 replaced by U+FFFD (line kept)")
            )
        try:
            value = _loads(text)
        except (ValueError, RecursionError) as exc:
            report.skipped.append(SkippedLine(file, number, f"not valid JSON ({_short(exc)})"))
            continue
        if not isinstance(value, dict):
            if value is not None and value is not False and value != 0 and value != "":
                report.skipped.append(
                    SkippedLine(file, number, f"a JSON {type(value).__name__}, not an object")
                )
            else:
                report.skipped.append(SkippedLine(file, number, "a falsy JSON value"))
            continue
        parsed.append((number, value))
    if not parsed:
        if data.strip():
            raise NotASessionError(f"{file}: not a Pi session file (no parsable lines)")
        raise NotASessionError(f"{file}: empty file")
    first_line, header = parsed[0]
    if header.get("type") != "session" or not isinstance(header.get("id"), str):
        raise NotASessionError(
            f"{file}:{first_line}: not a Pi session file (first line is not a session header)"
        )
    entries: list[Entry] = []
    for number, value in parsed[1:]:
        if value.get("type") == "session":
            report.skipped.append(SkippedLine(file, number, "a second session header"))
            continue
        entries.append(value)
    version = header.get("version")
    if not isinstance(version, int) or version < CURRENT_SESSION_VERSION:
        report.migrated_from = version if isinstance(version, int) else 1
        migrate(header, entries)
    # Pi indexes whatever it parsed; entries without a usable id cannot be found or linked.
    kept: list[Entry] = []
    line_of = {id(v): n for n, v in parsed}
    for entry in entries:
        if not isinstance(entry.get("id"), str):
            report.skipped.append(
                SkippedLine(file, line_of.get(id(entry), 0), "entry has no string id")
            )
            continue
        kept.append(entry)
    return LoadedFile(header, kept, report)


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) < 80 else text[:77] + "..."


def migrate(header: dict[str, Any], entries: list[Entry]) -> None:
    """Bring v1/v2 entries to v3 in place, as Pi does on load."""
    version = header.get("version")
    if not isinstance(version, int):
        version = 1
    if version < 2:
        ids: set[str] = set()
        previous: str | None = None
        everything = [header, *entries]
        for entry in entries:
            entry["id"] = new_entry_id(ids)
            entry["parentId"] = previous
            previous = entry["id"]
            if entry.get("type") == "compaction":
                index = entry.get("firstKeptEntryIndex")
                if isinstance(index, int) and not isinstance(index, bool):
                    target = everything[index] if 0 <= index < len(everything) else None
                    if target is not None and target.get("type") != "session":
                        if "id" in target:
                            entry["firstKeptEntryId"] = target["id"]
                    del entry["firstKeptEntryIndex"]
    if version < 3:
        for entry in entries:
            message = entry.get("message")
            if (
                entry.get("type") == "message"
                and isinstance(message, dict)
                and message.get("role") == "hookMessage"
            ):
                message["role"] = "custom"
    header["version"] = CURRENT_SESSION_VERSION


def load_file(path: str | os.PathLike[str], warn: bool = True) -> LoadedFile:
    """Load a session file. Raises FileNotFoundError or NotASessionError.

    Skipped lines are reported on the result and, with ``warn``, as one warning.
    A migrated file is rewritten in full, like Pi does.
    """
    file = os.fspath(path)
    data = Path(file).read_bytes()
    loaded = parse_bytes(data, file)
    if warn and loaded.report.skipped:
        lines = "; ".join(str(s) for s in loaded.report.skipped[:5])
        more = len(loaded.report.skipped) - 5
        suffix = f" (+{more} more)" if more > 0 else ""
        warnings.warn(
            f"{len(loaded.report.skipped)} line(s) skipped or repaired: {lines}{suffix}",
            SessionLoadWarning,
            stacklevel=3,
        )
    if loaded.report.migrated_from is not None:
        rewrite(file, loaded.header, loaded.entries)
        loaded.report.missing_final_newline = False
    return loaded


def rewrite(path: str, header: dict[str, Any], entries: list[Entry]) -> None:
    """Write a whole file atomically (used only for migration, like Pi)."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(dumps_line(header) + "\n")
        for entry in entries:
            fh.write(dumps_line(entry) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class Appender:
    """Appends entries to one session file, one flushed line each.

    The file is created with exclusive create on first write (as Pi 1.3 does); a file whose
    last line lacks its newline is repaired before the first append.
    """

    def __init__(self, path: str, fsync: bool = False) -> None:
        self.path = path
        self.fsync = fsync
        self._fh: IO[str] | None = None

    def create(self, lines: list[Any]) -> None:
        """Create the file (must not exist) with these entries."""
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "x", encoding="utf-8", newline="\n") as fh:
            fh.write("".join(dumps_line(e) + "\n" for e in lines))
            fh.flush()
            if self.fsync:
                os.fsync(fh.fileno())

    def append(self, entry: Any) -> None:
        fh = self._open()
        fh.write(dumps_line(entry) + "\n")
        fh.flush()
        if self.fsync:
            os.fsync(fh.fileno())

    def _open(self) -> IO[str]:
        if self._fh is None or self._fh.closed:
            needs_newline = False
            try:
                with open(self.path, "rb") as probe:
                    probe.seek(0, os.SEEK_END)
                    if probe.tell() > 0:
                        probe.seek(-1, os.SEEK_END)
                        needs_newline = probe.read(1) != b"\n"
            except FileNotFoundError:
                pass
            self._fh = open(self.path, "a", encoding="utf-8", newline="\n")  # noqa: SIM115
            if needs_newline:
                self._fh.write("\n")
        return self._fh

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
