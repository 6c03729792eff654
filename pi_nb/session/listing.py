"""Where Pi keeps session files, and listing them.

Two listings: :func:`list_session_infos` is Pi 1.3's ``SessionManager.list()`` (every
message read, for its search text); :func:`scan_session_files` / :func:`list_sessions` is the
session browser behind ``pi-nb sessions`` and ``%pi sessions``: one cheap pass over each
file with the store's light-entry reader, every unreadable file listed with its reason.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..entries import Entry, iso_to_ms
from .jsonl import SessionError

if TYPE_CHECKING:
    import pandas as pd

_SESSION_ID = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")


def validate_session_id(session_id: str) -> None:
    """Pi 1.3's rule for custom session ids."""
    if not isinstance(session_id, str) or not _SESSION_ID.fullmatch(session_id):
        raise SessionError(
            "Session id must be non-empty, use only letters, digits, '.', '_' and '-', "
            "and start and end with a letter or digit"
        )


def agent_dir() -> str:
    """`PI_CODING_AGENT_DIR` (a leading ~ expanded) or ~/.pi/agent."""
    configured = os.environ.get("PI_CODING_AGENT_DIR")
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    return os.path.join(os.path.expanduser("~"), ".pi", "agent")


def encode_cwd(cwd: str) -> str:
    """`/home/u/proj` → `--home-u-proj--`, as Pi names a project's session folder."""
    resolved = os.path.abspath(os.path.expanduser(cwd))
    stripped = re.sub(r"^[/\\]", "", resolved)
    return "--" + re.sub(r"[/\\:]", "-", stripped) + "--"


def default_session_dir(cwd: str, root: str | None = None) -> str:
    """`<agentDir>/sessions/--<encoded cwd>--` for a working folder."""
    return os.path.join(root or agent_dir(), "sessions", encode_cwd(cwd))


@dataclass
class SessionInfo:
    """One session file found by :func:`list_session_infos`."""

    path: str
    id: str
    cwd: str
    name: str | None
    parent_session: str | None
    created: str
    modified_ms: int
    message_count: int
    first_message: str
    all_messages_text: str = ""


def _text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def _display_name(entries: list[Entry]) -> str | None:
    """The name from the latest session_info entry (an empty one clears it), as Pi shows it."""
    for entry in reversed(entries):
        if entry.get("type") == "session_info":
            value = entry.get("name")
            return (value.strip() or None) if isinstance(value, str) else None
    return None


def session_info(path: str) -> SessionInfo | None:
    """Summary of one file, or None when it is not a session."""
    from .jsonl import NotASessionError, load_file

    try:
        loaded = load_file(path, warn=False)
    except (OSError, NotASessionError):
        return None
    header = loaded.header
    name = _display_name(loaded.entries)
    count = 0
    first = ""
    texts: list[str] = []
    modified: int | None = None
    for entry in loaded.entries:
        kind = entry.get("type")
        if kind != "message":
            continue
        count += 1  # Pi counts every message entry
        message = entry.get("message")
        if not isinstance(message, dict) or "content" not in message:
            continue
        if message.get("role") not in ("user", "assistant"):
            continue
        stamp = message.get("timestamp")
        when = (
            stamp
            if isinstance(stamp, (int, float)) and not isinstance(stamp, bool)
            else iso_to_ms(entry.get("timestamp"))
        )
        if when is not None:
            modified = max(modified or 0, int(when))
        text = _text(message)
        if text:
            texts.append(text)
            if not first and message.get("role") == "user":
                first = text
    if modified is not None and modified <= 0:
        modified = None
    if modified is None:
        modified = iso_to_ms(header.get("timestamp")) or int(os.path.getmtime(path) * 1000)
    return SessionInfo(
        path=path,
        id=header["id"],
        cwd=header.get("cwd", "") if isinstance(header.get("cwd"), str) else "",
        name=name,
        parent_session=header.get("parentSession"),
        created=header.get("timestamp", ""),
        modified_ms=modified,
        message_count=count,
        first_message=first or "(no messages)",
        all_messages_text=" ".join(texts),
    )


def list_session_infos(
    cwd: str | None = None, session_dir: str | None = None
) -> list[SessionInfo]:
    """Pi's ``SessionManager.list()``: sessions of a working folder, most recently active
    first (files that are not sessions left out, as Pi does).

    With neither argument, every project folder under ``<agentDir>/sessions`` is listed.
    """
    if session_dir is not None:
        folders = [Path(session_dir)]
    elif cwd is not None:
        folders = [Path(default_session_dir(cwd))]
    else:
        root = Path(agent_dir()) / "sessions"
        folders = [p for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
    found: list[SessionInfo] = []
    for folder in folders:
        if not folder.is_dir():
            continue
        for file in folder.glob("*.jsonl"):
            info = session_info(str(file))
            if info is not None:
                found.append(info)
    found.sort(key=lambda i: i.modified_ms, reverse=True)
    return found


def most_recent_session(cwd: str, session_dir: str | None = None) -> str | None:
    """The most recently modified valid session file of a folder, like Pi's continueRecent."""
    folder = Path(session_dir or default_session_dir(cwd))
    if not folder.is_dir():
        return None
    from .jsonl import NotASessionError, load_file

    for file in sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            load_file(str(file), warn=False)
        except (OSError, NotASessionError, SessionError):
            continue
        return str(file)
    return None


# --- the session browser ------------------------------------------------------------------


@dataclass(frozen=True)
class SessionFile:
    """One row of the session browser: a ``*.jsonl`` file and what a cheap read found.

    When the file cannot be read as a session, ``error`` says why and the counts are None;
    a session with skipped (torn, garbage) lines has its counts *and* an ``error`` naming
    the skipped lines.
    """

    path: str
    file: str
    id: str | None = None
    name: str | None = None
    cwd: str | None = None
    entries: int | None = None
    messages: int | None = None
    compactions: int | None = None
    size: int | None = None
    last_activity_ms: int | None = None
    error: str | None = None

    @property
    def readable(self) -> bool:
        """Whether the file holds a session (possibly with skipped lines)."""
        return self.entries is not None


#: Columns of :func:`list_sessions`, in order.
SESSION_COLUMNS = (
    "name",
    "cwd",
    "entries",
    "messages",
    "compactions",
    "size",
    "last_activity",
    "error",
    "file",
    "path",
    "id",
)


def sessions_root() -> str:
    """``<agentDir>/sessions``: Pi's own session folder, one subfolder per working folder."""
    return os.path.join(agent_dir(), "sessions")


def _candidates(folder: str) -> list[tuple[str, str | None]]:
    """``*.jsonl`` in the folder and in its subfolders (Pi's one-folder-per-cwd layout),
    each with None or the reason it cannot be listed (an unreadable subfolder).

    Anything named ``*.jsonl`` counts, a directory or a dangling symlink too, so that it
    is listed with its reason instead of silently missing.
    """
    found: list[tuple[str, str | None]] = []
    with os.scandir(folder) as it:
        children = sorted(it, key=lambda e: e.name)
    for child in children:
        if child.name.endswith(".jsonl"):
            found.append((child.path, None))
        elif child.is_dir():  # follows symlinks, like Pi's readdir of the sessions folder
            try:
                with os.scandir(child.path) as inner:
                    names = sorted(e.path for e in inner if e.name.endswith(".jsonl"))
            except OSError as exc:
                found.append((child.path, f"folder not readable ({_os_reason(exc, child.path)})"))
                continue
            found.extend((name, None) for name in names)
    return found


def _os_reason(exc: OSError, path: str) -> str:
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, IsADirectoryError):
        return "a directory, not a file"
    if isinstance(exc, FileNotFoundError):
        return "broken symlink" if os.path.islink(path) else "vanished while listing"
    return exc.strerror or type(exc).__name__


def _short_reason(text: str, path: str) -> str:
    # Load errors start with the file's path; the row already names the file.
    for prefix in (f"{path}:", f"{os.path.abspath(path)}:"):
        if text.startswith(prefix):
            text = text[len(prefix) :].lstrip()
            text = re.sub(r"^\d+: ", "", text)
    return text


def read_session_file(path: str) -> SessionFile:
    """One browser row for ``path``; never raises for a bad file (the reason is in ``error``).

    Reads the file once with the store's light-entry reader (:func:`parse_bytes` with
    ``lazy``): every line is validated, only the structural fields are decoded. Nothing is
    written, not even the migration Pi would do for an old-version file.
    """
    from .jsonl import NotASessionError, parse_bytes

    file = os.path.basename(path.rstrip(os.sep)) or path
    size: int | None = None
    try:
        if os.path.isdir(path):
            return SessionFile(path, file, error="a directory, not a file")
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            data = handle.read()
        if not data:
            return SessionFile(path, file, size=0, error="empty file (no session header)")
        loaded = parse_bytes(data, path, lazy=True)
    except OSError as exc:
        return SessionFile(path, file, size=size, error=_os_reason(exc, path))
    except NotASessionError as exc:
        return SessionFile(path, file, size=size, error=_short_reason(str(exc), path))
    except Exception as exc:  # a listing never crashes on one file: say what happened
        reason = str(exc).splitlines()[0] if str(exc) else ""
        return SessionFile(path, file, size=size, error=f"unreadable ({type(exc).__name__}: {reason})")
    header = loaded.header
    entries = loaded.entries
    messages = compactions = 0
    for entry in entries:
        kind = entry.get("type")
        if kind == "message":
            messages += 1
        elif kind == "compaction":
            compactions += 1
    # Entries are appended in time order: the last one with a valid time is the activity.
    last: int | None = None
    for entry in reversed(entries):
        last = iso_to_ms(entry.get("timestamp"))
        if last is not None:
            break
    if last is None:
        last = iso_to_ms(header.get("timestamp"))
    if last is None:
        try:
            last = int(os.path.getmtime(path) * 1000)
        except OSError:
            last = None
    error = None
    skipped = loaded.report.skipped
    if skipped:
        first = skipped[0]
        more = f" (+{len(skipped) - 1} more)" if len(skipped) > 1 else ""
        error = f"{len(skipped)} line(s) skipped: line {first.line}: {first.reason}{more}"
    cwd = header.get("cwd")
    return SessionFile(
        path=path,
        file=file,
        id=header.get("id"),
        name=_display_name(entries),
        cwd=cwd if isinstance(cwd, str) else None,
        entries=len(entries),
        messages=messages,
        compactions=compactions,
        size=size,
        last_activity_ms=last,
        error=error,
    )


def scan_session_files(directory: str | os.PathLike[str] | None = None) -> list[SessionFile]:
    """Every ``*.jsonl`` file in ``directory`` (default :func:`sessions_root`) and its
    subfolders, newest activity first; unreadable ones (no activity known) last.

    Raises FileNotFoundError / NotADirectoryError when an explicit ``directory`` is not a
    folder; a missing default folder is an empty listing (Pi has not run here yet).
    """
    if directory is None:
        folder = sessions_root()
        if not os.path.isdir(folder):
            return []
    else:
        folder = os.path.abspath(os.path.expanduser(os.fspath(directory)))
        if not os.path.exists(folder):
            raise FileNotFoundError(f"{folder}: no such folder")
        if not os.path.isdir(folder):
            raise NotADirectoryError(f"{folder}: not a folder (give the folder holding the sessions)")
    rows = [
        read_session_file(path)
        if reason is None
        else SessionFile(path, os.path.basename(path), error=reason)
        for path, reason in _candidates(folder)
    ]
    rows.sort(key=lambda r: (r.last_activity_ms is None, -(r.last_activity_ms or 0), r.path))
    return rows


def sessions_frame(rows: list[SessionFile]) -> pd.DataFrame:
    """The browser rows as a DataFrame (index 1…n, as ``%pi open N`` numbers them)."""
    import pandas as pd

    columns: dict[str, Any] = {
        "name": [r.name for r in rows],
        "cwd": [r.cwd for r in rows],
        "entries": pd.array([r.entries for r in rows], dtype="Int64"),
        "messages": pd.array([r.messages for r in rows], dtype="Int64"),
        "compactions": pd.array([r.compactions for r in rows], dtype="Int64"),
        "size": pd.array([r.size for r in rows], dtype="Int64"),
        "last_activity": pd.to_datetime(
            pd.array([r.last_activity_ms for r in rows], dtype="Int64"), unit="ms", utc=True
        ),
        "error": [r.error for r in rows],
        "file": [r.file for r in rows],
        "path": [r.path for r in rows],
        "id": [r.id for r in rows],
    }
    frame = pd.DataFrame(columns, columns=list(SESSION_COLUMNS))
    frame.index = pd.RangeIndex(1, len(rows) + 1, name="#")
    return frame


def list_sessions(directory: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """The session browser as a DataFrame: one row per ``*.jsonl`` file under ``directory``
    (default Pi's ``<agentDir>/sessions``, ``PI_CODING_AGENT_DIR`` respected), newest first.

    Columns: name, cwd, entries, messages, compactions, size (bytes), last_activity (UTC),
    error (why a file could not be read, or which lines were skipped), file, path, id.
    pandas is imported on first use.
    """
    return sessions_frame(scan_session_files(directory))
