"""Reading, migrating and appending Pi session JSONL files.

Reading follows Pi 1.3's rules (split on newlines, skip blank and undecodable lines, the
first parsed object must be a `session` header) but never silently: every skipped or
repaired line is recorded in a :class:`LoadReport` and raised as a warning.
"""

from __future__ import annotations

import contextlib
import errno as errno_mod
import hashlib
import json
import math
import os
import re
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import msgspec

from ..entries import CURRENT_SESSION_VERSION, Entry, LightHead, js_stringify, new_entry_id


class SessionError(Exception):
    """Base class for session problems shown to users as one line."""


class NotASessionError(SessionError):
    """The file exists and is not empty, but does not start with a Pi session header."""


class SessionLoadWarning(UserWarning):
    """Lines were skipped or repaired while loading a session file."""


class SessionWriteError(SessionError, OSError):
    """Writing a session file failed (disk full, quota, read-only…); nothing was written.

    One line for the user; ``errno`` is the operating system's error number.
    """

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(errno, message)
        self.message = message

    def __str__(self) -> str:
        return self.message

    @classmethod
    def from_os(cls, path: str, exc: OSError, what: str = "write") -> SessionWriteError:
        if exc.errno == errno_mod.ENOSPC:
            reason = "disk full (no space left on device)"
        elif exc.errno == getattr(errno_mod, "EDQUOT", -1):
            reason = "disk quota exceeded"
        else:
            reason = exc.strerror or type(exc).__name__
        return cls(f"{path}: cannot {what} the session file: {reason}; nothing was written", exc.errno)


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


def _no_lines(position: int) -> bytes:
    raise KeyError(position)


@dataclass
class LoadedFile:
    """A parsed file. ``entries`` holds full dicts, except for the light message entries
    listed in ``raw`` (``id(entry)`` → position in ``entries``): those hold only type, id,
    parentId, timestamp and a :class:`LightHead` for the message, and ``line(position)``
    gives the source line to parse them in full when needed."""

    header: dict[str, Any]
    entries: list[Entry]
    report: LoadReport
    raw: dict[int, int] = field(default_factory=dict)
    line: Callable[[int], bytes | memoryview] = _no_lines
    size: int = -1  # bytes read (load_file), so a writer can tell what was appended since
    digest: bytes | None = None  # SHA-256 of the bytes read, when migrated (see load_file)
    mark: FileMark | None = None  # which file, and what it held (load_file; see FileMark)


_MARK_HEAD = 4096  # bytes of the first line kept in a FileMark
_MARK_TAIL = 256  # bytes before the end of what was read


@dataclass(frozen=True)
class FileMark:
    """What a reader knows of the file it read: its identity (device, inode), its first line
    (up to 4 KiB) and the last bytes it read. :meth:`changed` tells whether the file on disk
    is still that file, grown only by appends; anything else (replaced, truncated, rewritten
    in place, as Pi's migration on load does) means what was read is stale."""

    dev: int
    ino: int
    size: int
    head: bytes
    tail: bytes

    @classmethod
    def of(cls, st: os.stat_result, data: bytes) -> FileMark:
        """The mark of a file whose whole content ``data`` was just read (``st``: its fstat)."""
        end = data.find(b"\n")
        head = data[: min(end + 1 if end >= 0 else len(data), _MARK_HEAD)]
        return cls(st.st_dev, st.st_ino, len(data), head, data[-_MARK_TAIL:])

    def advanced(self, appended: bytes) -> FileMark:
        """The mark after ``appended`` was read (or written) at the end of the file."""
        if not appended:
            return self
        head = self.head
        if self.size < _MARK_HEAD and b"\n" not in head:  # the first line was still short
            head = (head + appended)[:_MARK_HEAD]
            end = head.find(b"\n")
            head = head[: end + 1] if end >= 0 else head
        tail = (self.tail + appended)[-_MARK_TAIL:]
        return FileMark(self.dev, self.ino, self.size + len(appended), head, tail)

    def changed(self, fd: int) -> str | None:
        """Why the open file ``fd`` is no longer this file grown by appends; None if it is."""
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (self.dev, self.ino):
            return "was replaced by another file"
        if st.st_size < self.size:
            return f"shrank ({self.size} -> {st.st_size} bytes)"
        if _pread(fd, len(self.head), 0) != self.head:
            return "was rewritten (its header line changed)"
        if _pread(fd, len(self.tail), self.size - len(self.tail)) != self.tail:
            return f"was rewritten (the bytes before offset {self.size} changed)"
        return None


def _pread(fd: int, n: int, offset: int) -> bytes:
    if hasattr(os, "pread"):
        return os.pread(fd, n, offset)
    os.lseek(fd, offset, os.SEEK_SET)  # pragma: no cover - Windows
    return os.read(fd, n)


class _MessageHead(msgspec.Struct):
    role: Any = None


class _Skeleton(msgspec.Struct):
    type: Any = None
    id: Any = None
    parentId: Any = msgspec.UNSET
    timestamp: Any = msgspec.UNSET
    message: _MessageHead | msgspec.UnsetType | None = msgspec.UNSET


_SKELETON = msgspec.json.Decoder(_Skeleton)
_FULL = msgspec.json.Decoder()


class _LightDict(TypedDict, total=False):
    type: Any
    id: str
    parentId: Any
    timestamp: Any
    message: LightHead


# One line into a light entry: the structural fields and the message's role. The rest of
# the line is validated as JSON but not materialized. Light entries hold only strings and
# untracked LightHeads, so they are not tracked by the garbage collector either.
_LIGHT = msgspec.json.Decoder(_LightDict)


def _line_spans(data: bytes) -> tuple[list[int], list[int]]:
    """(start, end) offsets of every line; a final line without newline included."""
    find = data.find
    starts: list[int] = []
    append = starts.append
    pos = 0
    while True:
        end = find(b"\n", pos)
        if end < 0:
            break
        append(pos)
        pos = end + 1
    ends = [start - 1 for start in starts[1:]]
    if starts:
        ends.append(pos - 1)
    if pos < len(data):
        starts.append(pos)
        ends.append(len(data))
    return starts, ends


def _parse_clean(data: bytes, file: str, report: LoadReport) -> LoadedFile | None:
    """Fast path for a well-formed current-version file: msgspec validates every line and
    decodes it into a light entry; only non-message entries are parsed in full. None when
    anything (a blank or bad line, an old version, a non-object message) needs the careful
    path."""
    starts, ends = _line_spans(data)
    if not starts:
        return None
    view = memoryview(data)
    decode = _LIGHT.decode
    try:
        header = _FULL.decode(view[starts[0] : ends[0]])
        if (
            not isinstance(header, dict)
            or header.get("type") != "session"
            or not isinstance(header.get("id"), str)
            or header.get("version") != CURRENT_SESSION_VERSION
        ):
            return None
        del starts[0], ends[0]
        light: list[Entry] = [decode(view[a:b]) for a, b in zip(starts, ends, strict=True)]
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    # The light decoder checks that an id is a string, not that there is one: an entry
    # without an id takes the careful path, which reports it like any invalid line.
    if not all("id" in entry for entry in light):
        return None

    def line(position: int) -> memoryview:
        return view[starts[position] : ends[position]]

    raw: dict[int, int] = {}
    for index, entry in enumerate(light):
        kind = entry.get("type")
        if kind == "message" and "message" in entry:
            raw[id(entry)] = index
        elif kind == "session":
            return None
        else:
            light[index] = _decode_line(line(index))
    return LoadedFile(header, light, report, raw, line)


def _parse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _loads(raw: str | bytes) -> Any:
    if not isinstance(raw, str):  # never let json guess UTF-16/32 from NUL bytes
        raw = bytes(raw).decode("utf-8")
    return json.loads(raw, parse_constant=_parse_constant)


def _short_repr(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) < 40 else text[:37] + "..."


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
    if lazy and utf8_ok:
        fast = _parse_clean(data, file, report)
        if fast is not None:
            return fast
    lines = data.split(b"\n")
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
            # JSON.parse accepts a few things msgspec refuses (lone surrogate escapes such
            # as "\ud83d", which JSON.stringify writes; numbers beyond 64 bits); deep
            # nesting is retried where the stack is shallow, so the limit does not depend
            # on the caller.
            try:
                value = _decode_line(line)
            except (ValueError, RecursionError):
                report.skipped.append(SkippedLine(file, number, f"not valid JSON ({_short(exc)})"))
                continue
        if value is not None:
            pass  # parsed by the fallback above
        elif (
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
            light["message"] = LightHead(head.role)
            raw_of[id(light)] = line
            value = light
        else:
            try:
                value = _decode_line(line)
            except (ValueError, RecursionError) as exc:
                report.skipped.append(SkippedLine(file, number, f"not valid JSON ({_short(exc)})"))
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
    version = _js_version(header.get("version", None))
    if version != version:
        # Not a number ("3.0.0"): Pi's migration steps all compare false, so Pi migrates
        # nothing and reads the entries as they are. So does pi_nb, and it says so; the
        # file is not rewritten (a rewrite would change nothing and would be needed again
        # on every load).
        report.skipped.append(
            SkippedLine(
                file,
                header_line,
                f"header version {_short_repr(header.get('version'))} is not a number: "
                "entries read as the current version, nothing migrated (line kept)",
            )
        )
    elif version < CURRENT_SESSION_VERSION:
        report.migrated_from = int(version) if math.isfinite(version) else 1
        for index, entry in enumerate(entries):  # migration rewrites everything: parse all
            line = raw_of.pop(id(entry), None)
            if line is not None:
                entries[index] = _decode_line(line)
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
    positions: dict[int, int] = {}
    lines: dict[int, bytes] = {}
    for index, entry in enumerate(kept):
        line = raw_of.get(id(entry))
        if line is not None:
            positions[id(entry)] = index
            lines[index] = line
    return LoadedFile(header, kept, report, positions, lines.__getitem__)


def parse_entry_line(line: bytes) -> Entry:
    """Parse one line that was already validated at load time."""
    return _decode_line(line)


def _decode_line(line: bytes, fresh: bool = False) -> Any:
    """One JSON line, as JSON.parse reads it. Raises ValueError or RecursionError.

    msgspec first; Python's json where they disagree (huge numbers, lone surrogate
    escapes). Deeply nested values are decoded in a fresh thread, where the stack is
    shallow, so whether a line loads never depends on how deep the caller is.
    """
    try:
        try:
            return _FULL.decode(line)
        except ValueError:  # msgspec.DecodeError included
            return _loads(line)
    except RecursionError:
        if fresh:
            raise
        return _in_fresh_thread(_decode_line, line, True)


def _in_fresh_thread(fn: Any, *args: Any) -> Any:
    import threading

    out: list[Any] = []

    def run() -> None:
        try:
            out.append((True, fn(*args)))
        except BaseException as exc:
            out.append((False, exc))

    thread = threading.Thread(target=run, name="pi_nb-parse")
    thread.start()
    thread.join()
    ok, value = out[0]
    if not ok:
        raise value
    return value


def migrate(header: dict[str, Any], entries: list[Entry]) -> None:
    """Bring v1/v2 entries to v3 in place, as Pi does on load.

    The version is compared as JavaScript does (``"3"`` is 3, a missing or null version is
    1, a non-numeric one migrates nothing)."""
    version = _js_version(header.get("version"))
    if version >= CURRENT_SESSION_VERSION or version != version:
        return  # current, or NaN: Pi leaves such a header as it is
    if version < 2:
        ids: set[str] = set()
        previous: str | None = None
        everything = [header, *entries]
        draw = _v1_ids(header)
        for entry in entries:
            entry["id"] = new_entry_id(ids, draw)
            ids.add(entry["id"])
            entry["parentId"] = previous
            previous = entry["id"]
            if entry.get("type") == "compaction":
                index = entry.get("firstKeptEntryIndex")
                if isinstance(index, (int, float)) and not isinstance(index, bool):
                    whole = isinstance(index, int) or index.is_integer()
                    position = int(index) if whole else -1
                    target = everything[position] if 0 <= position < len(everything) else None
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


def _v1_ids(header: dict[str, Any]) -> Callable[[], str]:
    """Entry ids for a v1 file, derived from its header: a file that is read (and migrated
    in memory) twice before it is rewritten gets the same ids both times, so an id shown
    by one command can be given to the next."""
    seed = json.dumps([header.get("id"), header.get("timestamp")], default=str)
    counter = 0

    def draw() -> str:
        nonlocal counter
        counter += 1
        return hashlib.sha256(f"{seed}\0{counter}".encode()).hexdigest()[:8]

    return draw


def _js_version(value: Any) -> float:
    """A header's ``version`` as JavaScript compares it (``version ?? 1``, then ToNumber)."""
    if value is None:
        return 1.0
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    if isinstance(value, list):  # ToPrimitive joins the elements with ","
        if not value:
            return 0.0
        if len(value) == 1 and not isinstance(value[0], (list, dict)):
            inner = value[0]
            if inner is None:
                return 0.0
            return _js_version("true" if inner is True else "false" if inner is False else inner)
        return math.nan
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return 0.0
        if _JS_DECIMAL.match(text):
            return float(text)
        if text in ("Infinity", "+Infinity", "-Infinity"):
            return -math.inf if text[0] == "-" else math.inf
        if _JS_RADIX.match(text):
            return _js_version(int(text, 0))
    return math.nan


_JS_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z")
_JS_RADIX = re.compile(r"0(?:[xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)\Z")


def load_file(path: str | os.PathLike[str], warn: bool = True, lazy: bool = False) -> LoadedFile:
    """Load a session file. Raises FileNotFoundError or NotASessionError.

    Skipped lines are reported on the result and, with ``warn``, as one warning.
    Reading never changes the file: an old version is migrated in memory
    (``report.migrated_from``); the file is rewritten in the new format only by a writer,
    under its lock (:meth:`SessionTree._migrate_on_disk`), because replacing a file that
    another process is appending to would lose that process's entries.
    """
    file = os.fspath(path)
    with open(file, "rb") as fh:
        st = os.fstat(fh.fileno())
        data = fh.read()
    loaded = parse_bytes(data, file, lazy=lazy)
    loaded.size = len(data)
    loaded.mark = FileMark.of(st, data[: complete_size(data)])
    if loaded.report.migrated_from is not None:
        loaded.digest = hashlib.sha256(data).digest()
    if warn and loaded.report.skipped:
        lines = "; ".join(str(s) for s in loaded.report.skipped[:5])
        more = len(loaded.report.skipped) - 5
        suffix = f" (+{more} more)" if more > 0 else ""
        warnings.warn(
            f"{len(loaded.report.skipped)} line(s) skipped or repaired: {lines}{suffix}",
            SessionLoadWarning,
            stacklevel=3,
        )
    return loaded


def complete_size(data: bytes) -> int:
    """How much of ``data`` a follower has read for good: everything, unless it ends in an
    unterminated line that is not yet a JSON object (a line another process is still
    writing), which is left out so that :meth:`SessionTree.refresh` reads it once it is
    whole. Reading it now would skip half a line and lose the entry."""
    if not data or data.endswith(b"\n"):
        return len(data)
    start = data.rfind(b"\n") + 1
    try:
        whole = isinstance(_decode_line(data[start:]), dict)
    except (ValueError, RecursionError):
        whole = False
    return len(data) if whole else start


def file_digest(path: str) -> tuple[int, bytes]:
    """(size, SHA-256) of a file's bytes: did it change since it was loaded?"""
    data = Path(path).read_bytes()
    return len(data), hashlib.sha256(data).digest()


def parse_appended(
    data: bytes, file: str, first_line: int, header: dict[str, Any]
) -> tuple[list[Entry], list[SkippedLine]]:
    """Entries in bytes another writer appended to a loaded file (same reading rules).

    ``data`` starts where the loaded file ended; its first segment continues line
    ``first_line``. Returns full entries and the lines skipped (numbered in the file).
    """
    head = encode_line({**header, "version": CURRENT_SESSION_VERSION})
    loaded = parse_bytes(head + data, file, lazy=False)
    shift = first_line - 2  # line 2 of the synthetic buffer is line `first_line` of the file
    skipped = [SkippedLine(s.file, s.line + shift, s.reason) for s in loaded.report.skipped]
    return loaded.entries, skipped


def rewrite(path: str, header: dict[str, Any], entries: list[Entry]) -> int:
    """Replace a whole file atomically (migration only, like Pi); returns its size.

    The caller holds the writer lock and has checked that nobody appended since the file
    was read. Entries are redacted like every written line; the file is created 0600.
    """
    data = encode_lines([header, *entries])
    tmp = temp_path(path)
    _remove_stale_temps(os.path.dirname(path) or ".")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_CLOEXEC | _O_BINARY, 0o600)
        try:
            _write_fully(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise SessionWriteError.from_os(path, exc, "rewrite") from exc
    return len(data)


# Temporary files of a create or rewrite: ".<name>.pinb-<pid>-<token>.tmp" next to the
# target. A process killed while writing one leaves it behind; the next create or rewrite
# in that folder removes those whose process is gone.
# Also the names earlier versions used: ".<name>.jsonl.<pid>.<hex>.tmp" (create) and
# "<name>.jsonl.tmp-<pid>" (migration).
_TEMP = re.compile(
    r"\..+\.pinb-(\d+)-[0-9a-f]+\.tmp\Z|\..+\.jsonl\.(\d+)\.[0-9a-f]+\.tmp\Z|.+\.jsonl\.tmp-(\d+)\Z"
)


def temp_path(path: str) -> str:
    """A fresh temporary file name for writing ``path``."""
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.pinb-{os.getpid()}-{os.urandom(4).hex()}.tmp")


def _process_gone(pid: int) -> bool:
    if pid == os.getpid():
        return False  # our own temp files are removed by the code that made them
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OSError):
        return False  # alive (another user's), or we cannot tell: keep the file
    try:  # a killed child its parent has not reaped yet is a zombie: gone too
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


def _remove_stale_temps(folder: str) -> int:
    """Remove temporary files left in ``folder`` by killed pi_nb writers; how many."""
    removed = 0
    try:
        names = [e.name for e in os.scandir(folder) if ".tmp" in e.name]
    except OSError:
        return 0
    for name in names:
        found = _TEMP.match(name)
        if found and _process_gone(int(next(g for g in found.groups() if g))):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, name))
                removed += 1
    return removed


class EntryEncodeError(SessionError, ValueError):
    """An entry that cannot be written as a JSON line (not JSON data, circular, too deep)."""


_SURROGATE = re.compile("[\ud800-\udfff]")


def _finite(value: Any) -> Any:
    """A copy with NaN and ±Infinity replaced by None (JSON.stringify writes them as null)."""
    if isinstance(value, float) and (value != value or value in (math.inf, -math.inf)):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _dumps(entry: Any) -> str:
    try:
        return json.dumps(entry, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError as exc:
        if "ircular" in str(exc):
            raise
        return json.dumps(_finite(entry), separators=(",", ":"), ensure_ascii=False, allow_nan=False)


_SAFE_INT = 2**53


def _prints_unlike_javascript(value: Any) -> bool:
    """Whether json.dumps prints a number in ``value`` differently from JavaScript: an
    integral float (``1.0``, ``-0.0``), an exponent form (``5e-06``, ``1e+16``) or an
    integer beyond 2**53 (a double in JavaScript). NaN / ±Infinity are already null. Iterative;
    looks only at numbers, so long texts cost nothing."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        # Exact types first (what parsed JSON holds), subclasses after.
        if kind is str or kind is bool or item is None:
            continue
        if kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind is int:
            if not -_SAFE_INT <= item <= _SAFE_INT:
                return True
        elif kind is float:
            if item.is_integer() or "e" in repr(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, (bool, str)):
            continue
        elif isinstance(item, int):
            if not -_SAFE_INT <= item <= _SAFE_INT:
                return True
        elif isinstance(item, float) and (item.is_integer() or "e" in repr(item)):
            return True
    return False


def encode_line(entry: Any) -> bytes:
    """One entry as the UTF-8 bytes of a JSON line, newline included (Pi's JSON.stringify).

    Identical to ``dumps_line(entry) + "\n"`` for ordinary entries. Numbers are printed as
    JavaScript prints them (``0.000005``, not ``5e-06``; ``1``, not ``1.0``), so a file
    pi_nb migrates or appends to has Pi's bytes. Where ``dumps_line`` would write something
    neither Pi nor pi_nb can read back, it writes what JSON.stringify does: NaN and
    ±Infinity as null, lone surrogates as ``\\uXXXX`` escapes. Values that are not JSON data,
    circular or nested too deeply raise EntryEncodeError (nothing is written).
    """
    try:
        try:
            text = _dumps(entry)
        except RecursionError:  # deep but maybe fine where the stack is shallow
            text = _in_fresh_thread(_dumps, entry)
    except RecursionError as exc:
        raise EntryEncodeError("entry is nested too deeply to be written as JSON") from exc
    except (TypeError, ValueError) as exc:
        raise EntryEncodeError(f"entry cannot be written as JSON: {_short(exc)}") from exc
    if _prints_unlike_javascript(entry):
        # json.dumps has no hook for number text; js_stringify (iterative) prints them the
        # JavaScript way and everything else exactly like json.dumps above.
        with contextlib.suppress(OverflowError):  # an int beyond any double: kept exact
            text = js_stringify(entry)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        # Surrogate pairs become their character; lone surrogates are escaped.
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        text = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
        return text.encode("utf-8") + b"\n"


def encode_for_write(entry: Any) -> bytes:
    """An entry as the line pi_nb writes: :func:`encode_line` after redaction.

    Every writer of a session file encodes through here, so no live credential is ever
    written, whatever the path (append, create, fork, import, migration). Credentials are
    redacted in the entry itself (in place), so what is in memory is what is on disk.
    """
    from ..redact import needs_redaction, redact_obj

    data = encode_line(entry)  # not writable as JSON: fails before anything is redacted
    if needs_redaction(data):  # one scan of the line; the walk only when needed
        redact_obj(entry, in_place=True)
        data = encode_line(entry)
    return data


def encode_lines(entries: list[Any]) -> bytes:
    """Several entries as written (see :func:`encode_for_write`)."""
    return b"".join(encode_for_write(e) for e in entries)


_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)


def _write_fully(fd: int, data: bytes) -> None:
    """Write all of ``data``: one write() call, more only after a short write."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _last_byte(fd: int, size: int) -> bytes:
    if hasattr(os, "pread"):
        return os.pread(fd, 1, size - 1)
    os.lseek(fd, size - 1, os.SEEK_SET)  # pragma: no cover - Windows
    return os.read(fd, 1)


def _close_fd(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


class Appender:
    """Appends entries to one session file: the one low-level writer of session files.

    Every line is written with a single ``write()`` of its complete bytes on an ``O_APPEND``
    descriptor, so a crash (even SIGKILL) can leave at most the line being written
    incomplete. Before each line the file's last byte is checked: an unterminated last line
    (a torn write, or a file whose final newline is missing) is closed with a newline in
    the same write, so two entries are never glued together. The file is created
    atomically with exclusive create (as Pi 1.3 does): it never exists half-written.

    Every line goes through :func:`encode_for_write` (credentials redacted). Files are
    created 0600 (they hold whole conversations). A failed write (disk full…) raises
    :class:`SessionWriteError` and leaves the file as it was: an append that wrote part of
    its line is cut back, a create that failed leaves neither the file nor a temp file.

    The caller serializes writers (:class:`~pi_nb.session.lock.SessionLock`).
    """

    def __init__(self, path: str, fsync: bool = False) -> None:
        self.path = path
        self.fsync = fsync
        self.repaired = 0  # line endings added before an append
        self._fd: int | None = None
        self._finalizer: weakref.finalize | None = None

    def create(self, lines: list[Any]) -> int:
        """Create the file (must not exist, or be empty) holding these entries; its size.

        Raises FileExistsError when a non-empty file is there, SessionWriteError when the
        write fails (nothing is left behind)."""
        data = encode_lines(lines)
        folder = os.path.dirname(self.path) or "."
        try:
            Path(folder).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SessionWriteError.from_os(self.path, exc, "create") from exc
        _remove_stale_temps(folder)
        if os.path.exists(self.path) and os.path.getsize(self.path) == 0:
            # An empty file is not a session yet: Pi 1.3 gives it a header in place.
            self._write_new(self.path, data, os.O_WRONLY | os.O_TRUNC, created=False)
            return len(data)
        tmp = temp_path(self.path)
        self._write_new(tmp, data, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            os.link(tmp, self.path)  # atomic and exclusive: complete or absent
        except FileExistsError:
            raise
        except OSError:  # no hard links here: exclusive create, then write
            self._write_new(self.path, data, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        return len(data)

    def _write_new(self, path: str, data: bytes, flags: int, created: bool = True) -> None:
        """Write ``data`` as the whole content of ``path``. On failure a file this call
        created is removed, an existing (empty) one is emptied again."""
        try:
            fd = os.open(path, flags | _O_CLOEXEC | _O_BINARY, 0o600)
        except FileExistsError:
            raise
        except OSError as exc:
            raise SessionWriteError.from_os(self.path, exc, "create") from exc
        try:
            if not created:
                with contextlib.suppress(OSError):
                    os.fchmod(fd, 0o600)
            _write_fully(fd, data)
            if self.fsync:
                os.fsync(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            _close_fd(fd)
            if created:
                with contextlib.suppress(OSError):
                    os.unlink(path)
            raise SessionWriteError.from_os(self.path, exc, "create") from exc
        os.close(fd)

    def size(self) -> int:
        """The file's current size in bytes."""
        if self._fd is not None:
            return os.fstat(self._fd).st_size
        return os.path.getsize(self.path)

    def append(self, entry: Any, size: int | None = None) -> int:
        """Append one entry (redacted first, see :func:`encode_for_write`); returns the file
        size after it. ``size``: the current size, when the caller just read it (under the
        lock)."""
        return self.append_encoded(encode_for_write(entry), size)

    def append_encoded(self, data: bytes, size: int | None = None) -> int:
        """Append one line made by :func:`encode_for_write` (only such bytes: they are
        redacted); returns the file size after it."""
        try:
            fd = self._open()
            if size is None:
                size = os.fstat(fd).st_size
            if size and _last_byte(fd, size) != b"\n":
                data = b"\n" + data
                repaired = 1
            else:
                repaired = 0
        except OSError as exc:
            raise SessionWriteError.from_os(self.path, exc) from exc
        try:
            _write_fully(fd, data)
            if self.fsync:
                os.fsync(fd)
        except OSError as exc:
            # Cut back what this call wrote (a part of its line), unless someone else
            # appended meanwhile: then the partial line stays, reported on the next load.
            with contextlib.suppress(OSError):
                if os.fstat(fd).st_size <= size + len(data):
                    os.ftruncate(fd, size)
            raise SessionWriteError.from_os(self.path, exc) from exc
        self.repaired += repaired
        return size + len(data)

    def _open(self) -> int:
        if self._fd is None:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | _O_CLOEXEC | _O_BINARY)
            self._fd = fd
            self._finalizer = weakref.finalize(self, _close_fd, fd)
        return self._fd

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
        self._fd = None
        self._finalizer = None
