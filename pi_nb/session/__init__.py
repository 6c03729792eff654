"""The session store: Pi-compatible JSONL files as an append-only tree of entries."""

from ..entries import CURRENT_SESSION_VERSION, Entry, Message, js_len, js_stringify
from .jsonl import (
    LoadReport,
    NotASessionError,
    SessionError,
    SessionLoadWarning,
    SkippedLine,
    load_file,
)
from .listing import (
    SessionFile,
    SessionInfo,
    agent_dir,
    default_session_dir,
    list_session_infos,
    list_sessions,
    scan_session_files,
)
from .lock import SessionLockedError
from .tree import ContextEditError, EntryNotFoundError, SessionTree, TreeNode

__all__ = [
    "CURRENT_SESSION_VERSION",
    "ContextEditError",
    "Entry",
    "EntryNotFoundError",
    "LoadReport",
    "Message",
    "NotASessionError",
    "SessionError",
    "SessionFile",
    "SessionInfo",
    "SessionLoadWarning",
    "SessionLockedError",
    "SessionTree",
    "SkippedLine",
    "TreeNode",
    "agent_dir",
    "default_session_dir",
    "js_len",
    "js_stringify",
    "list_session_infos",
    "list_sessions",
    "load_file",
    "scan_session_files",
]
