"""Loading study inputs: in-memory copies of sessions, so a study never writes to its input."""

from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..entries import dumps_line

if TYPE_CHECKING:
    from ..session.tree import SessionTree

__all__ = [
    "copy_tree",
    "file_hash",
    "load_session",
    "session_label",
    "tree_bytes",
    "tree_from_bytes",
]


def copy_tree(tree: SessionTree) -> SessionTree:
    """An in-memory copy of ``tree`` (same header, entries and leaf); appends never reach
    the original or its file."""
    from ..session.tree import SessionTree

    copy = SessionTree(dict(tree.header), [dict(e) for e in tree.entries], None)
    if tree.leaf_id is not None and tree.leaf_id in copy:
        copy.branch(tree.leaf_id)
    return copy


def load_session(source: Any) -> SessionTree:
    """An in-memory copy of a session given as a path, a SessionTree, or a session file's
    bytes (what a job sends to a worker that cannot read the caller's files)."""
    from ..session.jsonl import SessionLoadWarning
    from ..session.tree import SessionTree

    if isinstance(source, SessionTree):
        return copy_tree(source)
    if isinstance(source, (bytes, bytearray, memoryview)):
        return tree_from_bytes(bytes(source))
    path = os.fspath(source)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SessionLoadWarning)
        return copy_tree(SessionTree.open(path))


def tree_from_bytes(data: bytes, name: str = "<memory>") -> SessionTree:
    """An in-memory session parsed from a session file's bytes (``name`` in errors)."""
    from ..session.jsonl import SessionLoadWarning, parse_bytes
    from ..session.tree import SessionTree

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SessionLoadWarning)
        loaded = parse_bytes(data, name)
    return copy_tree(SessionTree(loaded.header, loaded.entries, None, report=loaded.report))


def tree_bytes(tree: SessionTree) -> bytes:
    """The session as JSONL bytes (header, entries in file order)."""
    lines = [dumps_line(tree.header), *(dumps_line(e) for e in tree.entries)]
    return ("\n".join(lines) + "\n").encode()


def file_hash(path: str | os.PathLike[str]) -> str:
    """sha256 of a file's bytes (hex)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def session_label(source: Any) -> str:
    """A short name for a session: the file's stem, or the session name / id."""
    from ..session.tree import SessionTree

    if isinstance(source, SessionTree):
        if source.path:
            return Path(source.path).stem
        return source.name or source.session_id[:8]
    return Path(os.fspath(source)).stem
