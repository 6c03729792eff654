"""Reading, migrating and appending Pi session JSONL files.

Reading follows Pi 1.3's rules (split on newlines, skip blank and undecodable lines, the
first parsed object must be a `session` header) but never silently: every skipped or
repaired line is recorded in a :class:`LoadReport` and raised as a warning.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypedDict

import msgspec

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
    """A parsed file. ``entries`` holds full dicts, except for message entries listed in
    ``raw``: those are light skeletons (type, id, parentId, timestamp and the message's
    role/provider/model) whose full text is parsed from ``raw`` only when needed."""

    header: dict[str, Any]
    entries: list[Entry]
    report: LoadReport
    raw: dict[int, bytes] = field(default_factory=dict)  # id(skeleton) -> line bytes


class _MessageHead(msgspec.Struct):
    role: Any = None
    provider: Any = None
    model: Any = None


class _Skeleton(msgspec.Struct):
    type: Any = None
    id: Any = None
    parentId: Any = msgspec.UNSET
    timestamp: Any = msgspec.UNSET
    message: _MessageHead | msgspec.UnsetType | None = msgspec.UNSET


_SKELETON = msgspec.json.Decoder(_Skeleton)
_FULL = msgspec.json.Decoder()


class _HeadDict(TypedDict, total=False):
    role: Any
    provider: Any
    model: Any


class _LightDict(TypedDict, total=False):
    type: Any
    id: Any
    parentId: Any
    timestamp: Any
    message: _HeadDict


# Decodes a whole JSON array of entries into light dicts in one call; message bodies are
# validated but not materialized.
_LIGHT_ARRAY = msgspec.json.Decoder(list[_LightDict])


def _parse_clean(lines: list[bytes], file: str, report: LoadReport) -> LoadedFile | None:
    """Fast path for a well-formed current-version file: one decoder call validates every
    line and yields light entries. None when anything needs the careful path."""
    body = [line for line in lines if line]
    if not body:
        return None
    try:
        header = _FULL.decode(body[0])
        if (
            not isinstance(header, dict)
            or header.get("type") != "session"
            or not isinstance(header.get("id"), str)
            or header.get("version") != CURRENT_SESSION_VERSION
        ):
            return None
        light = _LIGHT_ARRAY.decode(b"[" + b",".join(body[1:]) + b"]")
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    entries: list[Entry] = []
    raw: dict[int, bytes] = {}
    for entry, line in zip(light, body[1:], strict=False):
        kind = entry.get("type")
        if kind == "message" and "message" in entry:
            raw[id(entry)] = line
            entries.append(entry)
        elif kind == "session":
            return None
        else:
            entries.append(_FULL.decode(line))
    for entry in entries:
        if type(entry.get("id")) is not str:
            return None
    return LoadedFile(header, entries, report, raw)


def _parse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _loads(raw: str | bytes) -> Any:
    return json.loads(raw, parse_constant=_parse_constant)


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) < 80 else text[:77] + "..."


def parse_bytes(data: bytes, file: str = "<memory>", lazy: bool = False) -> LoadedFile:
    """Parse a session file's bytes (Pi 1.3's reading rules, every skip reported).

    Every line is validated as JSON. With ``lazy``, message entries stay unparsed
    (beyond a light skeleton) until someone asks for them: projections only need the
    entries in context. Raises NotASessionError when there is no valid header.
    """
    report = LoadReport()
    if data and not data.endswith(b"\n"):
        report.missing_final_newline = True
    utf8_ok = data.isascii()
    if not utf8_ok:
        try:
            data.decode("utf-8")
            utf8_ok = True
        except UnicodeDecodeError:
            pass
    lines = data.split(b"\n")
    if lazy and utf8_ok:
        fast = _parse_clean(lines, file, report)
        if fast is not None:
            return fast
    header: dict[str, Any] | None = None
    header_line = 0
    entries: list[Entry] = []
    raw_of: dict[int, bytes] = {}
    line_of: dict[int, int] = {}
    number = 0
    for line in lines:
        number += 1
        if not line.strip():
            continue
        if not utf8_ok:
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                # Pi's streaming decoder substitutes U+FFFD and keeps the line.
                line = line.decode("utf-8", "replace").encode("utf-8")
                report.skipped.append(
                    SkippedLine(file, number, "invalid UTF-8 replaced by U+FFFD (line kept)")
                )
        skeleton: _Skeleton | None = None
        value: Any = None
        try:
            skeleton = _SKELETON.decode(line)
        except msgspec.ValidationError:
            pass  # valid JSON of another shape: parsed in full below
        except (msgspec.DecodeError, RecursionError) as exc:
            report.skipped.append(SkippedLine(file, number, f"not valid JSON ({_short(exc)})"))
            continue
        if (
            lazy
            and header is not None
            and skeleton is not None
            and skeleton.type == "message"
            and isinstance(skeleton.message, _MessageHead)
        ):
            light: Entry = {"type": "message", "id": skeleton.id}
            if skeleton.parentId is not msgspec.UNSET:
                light["parentId"] = skeleton.parentId
            if skeleton.timestamp is not msgspec.UNSET:
                light["timestamp"] = skeleton.timestamp
            head = skeleton.message
            light["message"] = {"role": head.role, "provider": head.provider, "model": head.model}
            raw_of[id(light)] = line
            value = light
        else:
            try:
                value = _FULL.decode(line)
            except (msgspec.DecodeError, RecursionError, ValueError) as exc:
                try:  # msgspec and Python disagree on a few edge cases (huge numbers)
                    value = _loads(line)
                except (ValueError, RecursionError):
                    report.skipped.append(
                        SkippedLine(file, number, f"not valid JSON ({_short(exc)})")
                    )
                    continue
        if not isinstance(value, dict):
            kind = "null" if value is None else type(value).__name__
            report.skipped.append(SkippedLine(file, number, f"a JSON {kind}, not an object"))
            continue
        if header is None:
            if value.get("type") != "session" or not isinstance(value.get("id"), str):
                raise NotASessionError(
                    f"{file}:{number}: not a Pi session file (first line is not a session header)"
                )
            header, header_line = value, number
            continue
        if value.get("type") == "session":
            report.skipped.append(SkippedLine(file, number, "a second session header"))
            continue
        line_of[id(value)] = number
        entries.append(value)
    if header is None:
        if data.strip():
            raise NotASessionError(f"{file}: not a Pi session file (no parsable lines)")
        raise NotASessionError(f"{file}: empty file")
    version = header.get("version")
    if not isinstance(version, int) or version < CURRENT_SESSION_VERSION:
        report.migrated_from = version if isinstance(version, int) else 1
        for index, entry in enumerate(entries):  # migration rewrites everything: parse all
            line = raw_of.pop(id(entry), None)
            if line is not None:
                entries[index] = _FULL.decode(line)
                line_of[id(entries[index])] = line_of.get(id(entry), 0)
        migrate(header, entries)
    kept: list[Entry] = []
    for entry in entries:
        if not isinstance(entry.get("id"), str):
            report.skipped.append(
                SkippedLine(file, line_of.get(id(entry), 0), "entry has no string id")
            )
            raw_of.pop(id(entry), None)
            continue
        kept.append(entry)
    del header_line
    return LoadedFile(header, kept, report, raw_of)


def parse_entry_line(line: bytes) -> Entry:
    """Parse one line that was already validated at load time."""
    try:
        return _FULL.decode(line)
    except (msgspec.DecodeError, ValueError):
        return _loads(line)


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
                    if target is not None and target.get("type") != "session" and "id" in target:
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


def load_file(path: str | os.PathLike[str], warn: bool = True, lazy: bool = False) -> LoadedFile:
    """Load a session file. Raises FileNotFoundError or NotASessionError.

    Skipped lines are reported on the result and, with ``warn``, as one warning.
    A migrated file is rewritten in full, like Pi does.
    """
    file = os.fspath(path)
    data = Path(file).read_bytes()
    loaded = parse_bytes(data, file, lazy=lazy)
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
