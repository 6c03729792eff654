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
from .listing import SessionInfo, agent_dir, default_session_dir, list_sessions
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
    "list_sessions",
    "load_file",
]
