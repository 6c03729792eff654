"""Where Pi keeps session files, and listing them."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..entries import iso_to_ms
from .jsonl import SessionError

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
    """One session file found by :func:`list_sessions`."""

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


def session_info(path: str) -> SessionInfo | None:
    """Summary of one file, or None when it is not a session."""
    from .jsonl import NotASessionError, load_file

    try:
        loaded = load_file(path, warn=False)
    except (OSError, NotASessionError):
        return None
    header = loaded.header
    name = None
    count = 0
    first = ""
    texts: list[str] = []
    modified: int | None = None
    for entry in loaded.entries:
        kind = entry.get("type")
        if kind == "session_info":
            value = entry.get("name")
            name = (value.strip() or None) if isinstance(value, str) else None
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


def list_sessions(cwd: str | None = None, session_dir: str | None = None) -> list[SessionInfo]:
    """Sessions of a working folder (Pi's default layout), most recently active first.

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
