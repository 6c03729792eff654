"""The session tree: append-only entries, a leaf pointer, branches, labels and forks.

Pi's SessionManager semantics (1.3): appending makes the new entry a child of the leaf and
moves the leaf there; moving the leaf and appending again makes a branch; nothing already
written is ever changed.
"""

from __future__ import annotations

import functools
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, cast

from ..display import to_html
from ..entries import (
    CURRENT_SESSION_VERSION,
    BranchSummaryEntry,
    CompactionEntry,
    ContextEditEntry,
    CustomEntry,
    CustomMessageEntry,
    Entry,
    LabelEntry,
    Message,
    MessageEntry,
    ModelChangeEntry,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    UsageEntry,
    iso_to_ms,
    message_role,
    new_entry_id,
    new_session_id,
    now_iso,
    path_to,
)
from ..messages import current_system_message
from ..projection import Projection, build_session_projection, extend_projection
from ..redact import redact_obj
from ..tokens import (
    ContextTokens,
    TokenCache,
    estimate_projected_context_tokens,
    extend_context_tokens,
)
from .jsonl import (
    Appender,
    FileMark,
    LoadReport,
    SessionError,
    complete_size,
    encode_for_write,
    file_digest,
    load_file,
    parse_entry_line,
    rewrite,
)
from .lock import LockMode, SessionLock, append_mutex


class EntryNotFoundError(SessionError, KeyError):
    """An entry id that the session does not contain."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "entry not found"


class ContextEditError(SessionError, ValueError):
    """A context edit that Pi 1.3 would refuse."""


def _serialized(method: Callable[..., Any]) -> Callable[..., Any]:
    """Run a tree operation that reads the leaf and appends as one step, under the append
    mutex of its file (one per file and process: see :func:`~pi_nb.session.lock.append_mutex`)."""

    @functools.wraps(method)
    def run(self: SessionTree, *args: Any, **kwargs: Any) -> Any:
        with self._mutex:
            return method(self, *args, **kwargs)

    return run


@dataclass
class TreeNode:
    """One node of :meth:`SessionTree.tree`: the entry, its label and its children."""

    entry: Entry
    children: list[TreeNode] = field(default_factory=list)
    label: str | None = None
    label_timestamp: str | None = None

    @property
    def id(self) -> str:
        return self.entry["id"]


class SessionTree:
    """A Pi session: header + entries in file order, an id index, labels and the leaf.

    Create one with :meth:`create` (new file, written lazily), :meth:`open` (existing file)
    or :meth:`in_memory`. Every ``append_*`` returns the new entry dict.
    """

    def __init__(
        self,
        header: dict[str, Any],
        entries: list[Entry] | None = None,
        path: str | None = None,
        *,
        persisted: bool = False,
        report: LoadReport | None = None,
        clock: Callable[[], str] = now_iso,
        id_source: Callable[[], str] | None = None,
        fsync: bool = False,
        raw: dict[int, int] | None = None,
        line: Callable[[int], bytes | memoryview] | None = None,
        lock: LockMode = None,
    ) -> None:
        self.header = header
        # Entries in file order. Loaded message entries may be light skeletons whose line
        # is kept in _raw and parsed on first use (see _full): public accessors always
        # return full entries, internal structure walks use the skeletons.
        self._list: list[Entry] = []
        self._raw: dict[int, int] = raw or {}  # id(light entry) -> its position in _list
        self._line = line  # position -> the light entry's source line
        self.path = path
        self.report = report or LoadReport()
        self._clock = clock
        self._id_source = id_source
        self._by_id: dict[str, Entry] = {}
        self._labels: dict[str, tuple[str, str]] = {}
        self._leaf_id: str | None = None
        self._flushed = persisted
        self._has_conversation = False
        self._appender = Appender(path, fsync=fsync) if path else None
        self._mutex: threading.RLock = append_mutex(path) if path else threading.RLock()  # type: ignore[assignment]
        # An old-version file read and migrated in memory: (size, digest) of the bytes read.
        # The file itself is rewritten at the first write, under the writer lock.
        self._pending_migration: tuple[int, bytes] | None = None
        # Writer state: the OS lock (taken on the first write, see lock.py) and how much of
        # the file this tree has seen, to pick up what another writer appended meanwhile.
        self._lock_mode = lock
        self._writer: SessionLock | None = None
        self._writer_finalizer: weakref.finalize | None = None
        # Which file this tree read and how far (see FileMark): appends by another process
        # are read from mark.size on (refresh, or before this tree's next append).
        self._mark: FileMark | None = None
        self._lines_seen = (0, 0)  # (offset, newlines before it): line numbers of appends
        #: Why the last :meth:`refresh` re-read the whole file (None: it did not).
        self.reloaded: str | None = None
        self._listeners: list[Callable[[Entry], None]] = []
        self._projection_cache: Projection | None = None
        self._token_cache: TokenCache | None = None
        self._children: dict[str | None, list[str]] | None = None  # built on first use
        if entries:
            self._load(entries)

    def _load(self, entries: list[Entry]) -> None:
        """Index loaded entries in bulk (Pi's rules: later duplicate ids win in the index)."""
        self._list = list(entries)
        self._by_id = dict(zip(map(itemgetter("id"), self._list), self._list, strict=True))
        self._leaf_id = self._list[-1]["id"]
        for entry in self._list:
            if entry.get("type") == "label":
                self._track_label(entry)
        self._has_conversation = any(
            e.get("type") == "message" and message_role(e) in ("user", "assistant")
            for e in self._list
        )

    # --- construction -------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str] | None = None,
        cwd: str | None = None,
        *,
        session_id: str | None = None,
        parent_session: str | None = None,
        session_dir: str | None = None,
        **kwargs: Any,
    ) -> SessionTree:
        """A new session. The file is created on the first user or assistant message.

        Without ``path`` the file goes to Pi's default folder for ``cwd`` (or
        ``session_dir``), named ``<time>_<id>.jsonl`` like Pi's.
        """
        from .listing import default_session_dir, validate_session_id

        cwd = os.path.abspath(cwd or os.getcwd())
        sid = session_id or new_session_id()
        if session_id is not None:
            validate_session_id(session_id)
        timestamp = kwargs.get("clock", now_iso)()
        header: dict[str, Any] = {
            "type": "session",
            "version": CURRENT_SESSION_VERSION,
            "id": sid,
            "timestamp": timestamp,
            "cwd": cwd,
        }
        if parent_session is not None:
            header["parentSession"] = parent_session
        if path is None:
            folder = session_dir or default_session_dir(cwd)
            file_ts = timestamp.replace(":", "-").replace(".", "-")
            path = os.path.join(folder, f"{file_ts}_{sid}.jsonl")
        path = os.path.abspath(os.fspath(path))
        if os.path.exists(path) and os.path.getsize(path) > 0:
            raise SessionError(f"{path}: file already exists (use SessionTree.open)")
        return cls(header, [], path, **kwargs)

    @classmethod
    def open(cls, path: str | os.PathLike[str], **kwargs: Any) -> SessionTree:
        """Open an existing Pi session file (leaf = last entry in file order).

        An empty file gets a fresh header like Pi 1.3; a non-empty file that is not a
        session raises NotASessionError; skipped lines are on ``tree.report``.
        """
        file = os.path.abspath(os.fspath(path))
        if not os.path.exists(file):
            raise FileNotFoundError(f"{file}: no such session file")
        if os.path.getsize(file) == 0:
            tree = cls.create(None, session_dir=os.path.dirname(file), **kwargs)
            tree.path = file
            tree._appender = Appender(file, fsync=kwargs.get("fsync", False))
            tree._mutex = append_mutex(file)
            os.remove(file)
            tree._write_all()
            return tree
        loaded = load_file(file, lazy=True)
        tree = cls(
            loaded.header,
            loaded.entries,
            file,
            persisted=True,
            report=loaded.report,
            raw=loaded.raw,
            line=loaded.line,
            **kwargs,
        )
        tree._mark = loaded.mark
        if loaded.digest is not None:
            tree._pending_migration = (loaded.size, loaded.digest)
        return tree

    @classmethod
    def in_memory(cls, cwd: str | None = None, entries: list[Entry] | None = None) -> SessionTree:
        """A session that is never written to disk."""
        header = {
            "type": "session",
            "version": CURRENT_SESSION_VERSION,
            "id": new_session_id(),
            "timestamp": now_iso(),
            "cwd": os.path.abspath(cwd or os.getcwd()),
        }
        return cls(header, entries or [], None)

    # --- index --------------------------------------------------------------------------

    def _track_label(self, entry: Entry) -> None:
        target = entry.get("targetId")
        if isinstance(target, str):
            if entry.get("label"):
                self._labels[target] = (entry["label"], entry.get("timestamp", ""))
            else:
                self._labels.pop(target, None)

    def _children_index(self) -> dict[str | None, list[str]]:
        if self._children is None:
            children: dict[str | None, list[str]] = {}
            for entry in self._list:
                children.setdefault(_parent_key(entry), []).append(entry["id"])
            self._children = children
        return self._children

    def _index(self, entry: Entry, move_leaf: bool = True) -> None:
        self._list.append(entry)
        eid = entry["id"]
        self._by_id[eid] = entry
        if self._children is not None:
            self._children.setdefault(_parent_key(entry), []).append(eid)
        if move_leaf:
            self._leaf_id = eid
        kind = entry.get("type")
        if kind == "label":
            self._track_label(entry)
        elif kind == "message" and not self._has_conversation:
            message = entry.get("message")
            if isinstance(message, dict) and message.get("role") in ("user", "assistant"):
                self._has_conversation = True

    def _full(self, entry: Entry) -> Entry:
        """The full entry for a possibly light one. A light entry is filled in place, so
        whoever holds it (the index, a projection) sees the full entry from then on."""
        position = self._raw.pop(id(entry), None)
        if position is None:
            return entry
        full = parse_entry_line(self._line(position))
        if not self._raw:
            self._line = None  # every entry is parsed: let go of the file's bytes
        if list(full)[: len(entry)] != list(entry):  # unknown fields between known ones
            entry.clear()  # rebuilt to keep the file's key order
        # A single update (atomic under the GIL) when the keys line up: a reader in another
        # thread sees the light entry or the full one, never an empty dict.
        entry.update(full)
        return entry

    def _materialize_all(self) -> None:
        if self._raw:
            for entry in list(self._list):
                self._full(entry)

    # --- reading ------------------------------------------------------------------------

    @property
    def entries(self) -> list[Entry]:
        """Every entry in file order (full dicts; do not mutate)."""
        self._materialize_all()
        return self._list

    @property
    def session_id(self) -> str:
        return self.header["id"]

    @property
    def cwd(self) -> str:
        cwd = self.header.get("cwd")
        return cwd if isinstance(cwd, str) and cwd else os.getcwd()

    @property
    def leaf_id(self) -> str | None:
        """The current leaf (None before the first entry, or after :meth:`reset_leaf`)."""
        return self._leaf_id

    @property
    def leaf(self) -> Entry | None:
        found = self._by_id.get(self._leaf_id) if self._leaf_id else None
        return self._full(found) if found is not None else None

    def __len__(self) -> int:
        return len(self._list)

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self._by_id

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries)

    def get(self, entry_id: str) -> Entry | None:
        found = self._by_id.get(entry_id) if isinstance(entry_id, str) else None
        return self._full(found) if found is not None else None

    def entry(self, entry_id: str) -> Entry:
        """The entry with this id; EntryNotFoundError otherwise."""
        found = self.get(entry_id)
        if found is None:
            raise EntryNotFoundError(f"Entry {entry_id} not found")
        return found

    @property
    def by_id(self) -> dict[str, Entry]:
        """Entries by id (full dicts; do not mutate)."""
        self._materialize_all()
        return self._by_id

    def children(self, entry_id: str | None) -> list[Entry]:
        """Direct children of an entry (roots for None), in file order."""
        if entry_id is not None and not isinstance(entry_id, str):
            return []
        return [self._full(self._by_id[c]) for c in self._children_index().get(entry_id, [])]

    def label(self, entry_id: str) -> str | None:
        found = self._labels.get(entry_id)
        return found[0] if found else None

    @property
    def labels(self) -> dict[str, str]:
        """Current labels by target id (last label wins; empty clears)."""
        return {k: v[0] for k, v in self._labels.items()}

    def find_label(self, label: str) -> str | None:
        """The id of the entry currently carrying this label, if any."""
        for target, (text, _) in self._labels.items():
            if text == label:
                return target
        return None

    def get_branch(self, leaf_id: str | object | None = ...) -> list[Entry]:
        """Entries root→leaf (the current leaf by default). A missing parent ends the walk."""
        return [self._full(e) for e in self._light_branch(leaf_id)]

    def _light_branch(self, leaf_id: str | object | None = ...) -> list[Entry]:
        start = self._leaf_id if leaf_id is ... else leaf_id
        current = self._by_id.get(start) if isinstance(start, str) else None
        return path_to(current, self._by_id)

    def tree(self) -> list[TreeNode]:
        """The whole tree: roots (parent null, self or unknown) with children sorted by time."""
        # One node per id: with duplicate ids (hand-edited files) the entry the index
        # resolves (the last one) stands for the id, so the result is always a forest.
        by_id = self.by_id
        nodes: dict[str, TreeNode] = {}
        winners: list[Entry] = []
        for entry in self.entries:
            if by_id.get(entry["id"]) is not entry:
                continue
            winners.append(entry)
            found = self._labels.get(entry["id"])
            nodes[entry["id"]] = TreeNode(
                entry, label=found[0] if found else None, label_timestamp=found[1] if found else None
            )
        roots: list[TreeNode] = []
        for entry in winners:
            node = nodes[entry["id"]]
            parent = entry.get("parentId")
            if not isinstance(parent, str) or parent == entry["id"] or parent not in nodes:
                roots.append(node)
            else:
                nodes[parent].children.append(node)
        for node in nodes.values():
            if len(node.children) > 1:
                node.children.sort(key=lambda n: iso_to_ms(n.entry.get("timestamp")) or 0)
        return roots

    def projection(self, leaf_id: str | object | None = ...) -> Projection:
        """C = P(H) for a leaf (the current one by default); cached and extended on append."""
        if leaf_id is not ... and leaf_id != self._leaf_id:
            return build_session_projection(
                self._list, leaf_id, self._by_id, self._full, self._raw
            )
        cached = self._projection_cache
        if cached is not None and cached.leaf_id == self._leaf_id:
            return cached
        leaf = self.leaf
        if cached is not None and leaf is not None and leaf.get("parentId") == cached.leaf_id:
            before = cached.message_count
            extended = extend_projection(cached, leaf)
            if extended is not None:
                if cached.tokens is not None:
                    extended.tokens = extend_context_tokens(
                        cached.tokens, extended.entries[-1].messages, before, self.token_cache
                    )
                self._projection_cache = extended
                return extended
        self._projection_cache = build_session_projection(
            self._list, self._leaf_id, self._by_id, self._full, self._raw
        )
        return self._projection_cache

    def context_tokens(self, leaf_id: str | object | None = ...) -> ContextTokens:
        """Pi 1.3's projected context estimate for a leaf (kept current in O(1) per append)."""
        projection = self.projection(leaf_id)
        if projection.tokens is None:
            projection.tokens = estimate_projected_context_tokens(
                projection, projection.light_path, self.token_cache
            )
        return projection.tokens

    @property
    def token_cache(self) -> TokenCache:
        """Per-message token estimates, shared by every projection of this tree."""
        if self._token_cache is None:
            self._token_cache = TokenCache()
        return self._token_cache

    # --- moving the leaf ----------------------------------------------------------------

    @_serialized
    def branch(self, entry_id: str) -> None:
        """Move the leaf to an existing entry; the next append starts a new branch there."""
        self.entry(entry_id)
        self._leaf_id = entry_id

    @_serialized
    def reset_leaf(self) -> None:
        """Leaf := None; the next append becomes a new root."""
        self._leaf_id = None

    # --- appending ----------------------------------------------------------------------

    def on_append(self, listener: Callable[[Entry], None]) -> Callable[[], None]:
        """Call ``listener(entry)`` after each append; returns a function that unsubscribes."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def _new_id(self) -> str:
        return new_entry_id(self._by_id, self._id_source)

    def _base(self, kind: str, parent: str | object | None = ...) -> Entry:
        return {
            "type": kind,
            "id": self._new_id(),
            "parentId": self._leaf_id if parent is ... else parent,
            "timestamp": self._clock(),
        }

    def _append(self, entry_type: str, /, **fields: Any) -> Entry:
        """Append an entry of ``entry_type`` (child of the leaf, stamped now) with ``fields``
        after the common keys, in the order given: what every typed ``append_*`` writes."""
        entry = self._base(entry_type)
        entry.update(fields)
        return self.append_entry(entry)

    @_serialized
    def append_entry(self, entry: Entry) -> Entry:
        """Append a ready-made entry dict (any type, unknown ones too) and move the leaf.

        Credentials in it are redacted first, in place (:func:`pi_nb.redact.redact_obj`):
        no live key is ever written. A failed write (:class:`SessionWriteError`: disk
        full…) leaves the tree as it was: the entry is not kept and the leaf does not move,
        so no later entry can point at a parent that was never written. Appends from
        several threads (or several trees of one file in this process) are serialized.
        """
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or entry["id"] in self._by_id:
            raise SessionError("entry needs a fresh string id")
        if self._appender is None:
            from ..redact import redact_obj

            redact_obj(entry, in_place=True)
            self._index(entry)
        else:
            data = encode_for_write(entry)  # not writable as JSON: fails before anything changes
            if self._flushed:
                self._write_line(data)
                self._index(entry)
            else:
                undo = self._undo_point(entry)
                self._index(entry)
                try:
                    self._persist(entry)
                except BaseException:
                    self._unindex(entry, *undo)
                    raise
        for listener in list(self._listeners):
            listener(entry)
        return entry

    def _undo_point(self, entry: Entry) -> tuple[str | None, bool, tuple[str, str] | None]:
        """What :meth:`_index` of ``entry`` changes besides appending: leaf, conversation
        flag, and the label of the target it relabels."""
        target = entry.get("targetId") if entry.get("type") == "label" else None
        label = self._labels.get(target) if isinstance(target, str) else None
        return self._leaf_id, self._has_conversation, label

    def _unindex(
        self, entry: Entry, leaf: str | None, conversation: bool, label: tuple[str, str] | None
    ) -> None:
        """Undo :meth:`_index` of the last entry (its write failed)."""
        if self._list and self._list[-1] is entry:
            self._list.pop()
        eid = entry["id"]
        if self._by_id.get(eid) is entry:
            del self._by_id[eid]
        if self._children is not None:
            siblings = self._children.get(_parent_key(entry), [])
            if siblings and siblings[-1] == eid:
                siblings.pop()
        target = entry.get("targetId") if entry.get("type") == "label" else None
        if isinstance(target, str):
            if label is None:
                self._labels.pop(target, None)
            else:
                self._labels[target] = label
        self._leaf_id = leaf
        self._has_conversation = conversation
        self._projection_cache = None

    def _persist(self, entry: Entry) -> None:
        if self._appender is None:
            return
        if not self._flushed:
            if not self._has_conversation:
                return
            self._write_all()
            return
        self._write_line(encode_for_write(entry))

    def _ensure_writer(self) -> None:
        """Hold the session's writer lock (taken on the first write; see lock.py)."""
        assert self.path is not None
        if self._writer is None:
            self._writer = SessionLock(self.path, self._lock_mode)
            self._writer_finalizer = weakref.finalize(self, self._writer.release)
        self._writer.acquire()

    def _write_line(self, data: bytes) -> None:
        assert self._appender is not None
        self._ensure_writer()
        if self._pending_migration is not None:
            self._migrate_on_disk()
        size = self._appender.size()
        if self._mark is not None and size != self._mark.size:
            self._catch_up(size)
        after = self._appender.append_encoded(data, size)
        written = data if after - size == len(data) else b"\n" + data  # a torn line closed
        if self._lines_seen[0] == size:
            self._lines_seen = (after, self._lines_seen[1] + written.count(b"\n"))
        self._mark = self._mark.advanced(written) if self._mark is not None else self._mark_on_disk()

    def _migrate_on_disk(self) -> None:
        """Rewrite an old-version file in the current format before the first append, as
        Pi does on load, but only now: under the writer lock, and only if the file is still
        the one that was read (else another writer changed it and this tree's migrated
        ids may not match: re-open)."""
        assert self.path is not None and self._pending_migration is not None
        if file_digest(self.path) != self._pending_migration:
            raise SessionError(
                f"{self.path}: the file changed since it was opened (another writer); re-open "
                "it before writing"
            )
        if self._appender is not None:
            self._appender.close()  # the descriptor of the file being replaced
        rewrite(self.path, self.header, self.entries)
        self._mark = self._mark_on_disk()
        self._pending_migration = None

    def _catch_up(self, size: int) -> None:
        """Index entries another writer appended since this tree last read or wrote the file
        (the leaf stays where it is: the next append branches from this tree's position).
        The whole rest is read, a torn last line too: this tree's append closes it."""
        assert self.path is not None and self._mark is not None
        with open(self.path, "rb") as fh:
            why = self._mark.changed(fh.fileno())
            if why is not None:
                raise SessionError(f"{self.path}: the file {why} since it was read; re-open it")
            fh.seek(self._mark.size)
            tail = fh.read(size - self._mark.size)
        self._take_appended(tail, follow=False)

    def _take_appended(self, data: bytes, follow: bool) -> int:
        """Index the entries in ``data`` (bytes appended at ``mark.size``) as a load would:
        skipped lines reported, later duplicate ids win. With ``follow`` the leaf moves to
        the last entry. Keeps the projection cache only where it is still right."""
        from .jsonl import parse_appended

        assert self._mark is not None
        first_line = self._lines_before(self._mark.size) + 1
        entries, skipped = parse_appended(data, self.path or "", first_line, self.header)
        self.report.skipped.extend(skipped)
        old_leaf = self._leaf_id
        cached = self._projection_cache
        # A new entry changes the cached projection when it takes over an id already indexed
        # (duplicate ids: the later one wins) or when it is the missing parent the cached
        # path stopped at; otherwise the cached leaf's path is unchanged.
        stale = False
        if cached is not None:
            top = cached.light_path[0].get("parentId") if cached.light_path else None
            stale = any(e["id"] in self._by_id or e["id"] == top for e in entries)
        for entry in entries:
            self._index(entry, move_leaf=follow)
        self._mark = self._mark.advanced(data)
        self._lines_seen = (self._mark.size, first_line - 1 + data.count(b"\n"))
        if stale:
            self._projection_cache = None
        elif follow and cached is not None and cached.leaf_id == old_leaf and entries:
            self._extend_cache(old_leaf)
        return len(entries)

    def _extend_cache(self, old_leaf: str | None) -> None:
        """After following appended entries: extend the cached projection (and its token
        figure) step by step along the new path, when it grew from the old leaf."""
        steps: list[str] = []
        current = self._by_id.get(self._leaf_id) if self._leaf_id else None
        while current is not None and current["id"] != old_leaf and len(steps) <= len(self._list):
            steps.append(current["id"])
            parent = current.get("parentId")
            current = self._by_id.get(parent) if isinstance(parent, str) else None
        if current is None:
            return  # not a descendant of the old leaf: projection() rebuilds when asked
        leaf = self._leaf_id
        try:
            for eid in reversed(steps):
                self._leaf_id = eid
                self.projection()  # extends by one entry (rebuilds at a compaction)
        finally:
            self._leaf_id = leaf

    def _lines_before(self, offset: int) -> int:
        """Newlines in the file before ``offset`` (for line numbers in skip reports)."""
        seen_at, lines = self._lines_seen
        if seen_at != offset:
            with open(self.path or "", "rb") as fh:
                lines, remaining = 0, offset
                while remaining > 0:
                    chunk = fh.read(min(remaining, 1 << 24))
                    if not chunk:
                        break
                    lines += chunk.count(b"\n")
                    remaining -= len(chunk)
        return lines

    def _mark_on_disk(self) -> FileMark:
        """The mark of the file as it is now (called under the writer lock, after this tree
        wrote the whole file)."""
        assert self.path is not None
        with open(self.path, "rb") as fh:
            st = os.fstat(fh.fileno())
            head = fh.read(4096)
            end = head.find(b"\n")
            fh.seek(max(0, st.st_size - 256))
            tail = fh.read()
        mark = FileMark.of(st, head[: end + 1] if end >= 0 else head)
        return FileMark(mark.dev, mark.ino, st.st_size, mark.head, tail)

    # --- following another process ------------------------------------------------------

    @_serialized
    def refresh(self) -> int:
        """Read what another process appended to the file since this tree last read it;
        returns how many entries were added.

        Afterwards entries, leaf, projection, token figures and :meth:`tree` equal a fresh
        :meth:`open` of the file, except for the leaf when it was moved: a leaf at the
        file's last entry (where open puts it) follows the new last entry, a leaf moved
        elsewhere (:meth:`branch`) stays, and so does the leaf of a tree that holds the
        writer lock (it wrote: its next append continues its own branch). A last line still being written (no newline, not
        yet a JSON object) is left for the next refresh. When the file is no longer this
        file grown by appends (replaced, truncated, rewritten in place, as Pi does when it
        migrates an old file on load), the whole file is read again: ``reloaded`` says why,
        the leaf stays only if it was moved and its id still exists, and the return value
        counts the entries whose ids are new. A deleted file raises SessionError.
        """
        self.reloaded = None
        if self.path is None or not self._flushed or self._mark is None:
            return 0  # in memory, or not written yet: nobody else can have appended
        try:
            with open(self.path, "rb") as fh:
                why = self._mark.changed(fh.fileno())
                if why is None:
                    size = os.fstat(fh.fileno()).st_size
                    if size == self._mark.size:
                        return 0
                    fh.seek(self._mark.size)
                    tail = fh.read(size - self._mark.size)
        except FileNotFoundError:
            raise SessionError(
                f"{self.path}: the session file is gone (deleted or renamed by another process)"
            ) from None
        if why is not None:
            return self._reload(why)
        tail = tail[: complete_size(tail)]
        if tail and self._pending_migration is not None:
            # An old-version file is migrated as a whole (v1 ids are numbered through the
            # file): what was appended is only read right together with the rest.
            return self._reload("grew (an old-version file is migrated whole)")
        return self._take_appended(tail, follow=self._follows_file()) if tail else 0

    def _follows_file(self) -> bool:
        """Is the leaf where a fresh open would put it (the last entry in file order), and
        is this tree not a writer? A tree holding the writer lock keeps its leaf on its own
        conversation, as before its appends (see :meth:`_catch_up`)."""
        if self._writer is not None and self._writer.held:
            return False
        last = self._list[-1]["id"] if self._list else None
        return self._leaf_id == last

    def _reload(self, why: str) -> int:
        """Read the whole file again (it was replaced or rewritten); see :meth:`refresh`."""
        assert self.path is not None
        follow, leaf, known = self._follows_file(), self._leaf_id, set(self._by_id)
        loaded = load_file(self.path, lazy=True)
        if self._appender is not None:
            self._appender.close()  # its descriptor may be the replaced file's
        self.header = loaded.header
        self.report = loaded.report
        self._raw, self._line = loaded.raw, loaded.line
        self._labels, self._children = {}, None
        self._projection_cache = None
        self._list, self._by_id, self._leaf_id = [], {}, None
        if loaded.entries:
            self._load(loaded.entries)
        else:
            self._has_conversation = False
        self._mark = loaded.mark
        self._lines_seen = (0, 0)
        self._pending_migration = (
            (loaded.size, loaded.digest) if loaded.digest is not None else None
        )
        note = f"{self.path}: the file {why}; read it again"
        if not follow and leaf is not None and leaf in self._by_id:
            self._leaf_id = leaf
        elif not follow:
            note += f" (leaf {leaf} is not in it any more: the leaf is now its last entry)"
        self.reloaded = note
        return sum(1 for eid in self._by_id if eid not in known)

    def _write_all(self) -> None:
        assert self._appender is not None
        self._ensure_writer()
        self._appender.create([self.header, *self.entries])
        self._mark = self._mark_on_disk()
        self._flushed = True

    @_serialized
    def flush(self) -> None:
        """Write the file now even without a conversation yet (Pi would wait)."""
        if self._appender is not None and not self._flushed:
            self._write_all()

    @_serialized
    def migrate(self) -> bool:
        """Rewrite an old-version file (v1, v2) in the current format now, as Pi does on
        load. Reads never do this; it happens under the writer lock, at the first write or
        here. Returns whether the file was rewritten."""
        if self.path is None or self._pending_migration is None:
            return False
        self._ensure_writer()
        self._migrate_on_disk()
        return True

    @_serialized
    def close(self) -> None:
        """Close the file and release the writer lock (a later append takes them again)."""
        if self._appender is not None:
            self._appender.close()
        if self._writer is not None:
            self._writer.release()

    @property
    def lock(self) -> SessionLock | None:
        """The writer lock handle (None before the first write)."""
        return self._writer

    @property
    def is_persisted(self) -> bool:
        """True once the file exists on disk."""
        return self._flushed

    @_serialized
    def append_message(self, message: Message) -> MessageEntry:
        """Append a user / assistant / toolResult / bashExecution / system / custom message."""
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise SessionError("a message is a dict with a string 'role'")
        return cast(MessageEntry, self._append("message", message=message))

    @_serialized
    def append_thinking_level_change(self, level: str) -> ThinkingLevelChangeEntry:
        entry = self._append("thinking_level_change", thinkingLevel=level)
        return cast(ThinkingLevelChangeEntry, entry)

    @_serialized
    def append_model_change(self, provider: str, model_id: str) -> ModelChangeEntry:
        entry = self._append("model_change", provider=provider, modelId=model_id)
        return cast(ModelChangeEntry, entry)

    @_serialized
    def append_usage(
        self, kind: str, provider: str, model: str, usage: dict[str, Any], note: str | None = None
    ) -> UsageEntry:
        noted = {"note": note} if note else {}
        entry = self._append("usage", kind=kind, provider=provider, model=model, usage=usage, **noted)
        return cast(UsageEntry, entry)

    @_serialized
    def append_compaction(
        self,
        summary: str,
        first_kept_entry_id: str | None,
        tokens_before: int,
        details: Any = None,
        from_hook: bool | None = None,
        usage: dict[str, Any] | None = None,
    ) -> CompactionEntry:
        """Append a compaction checkpoint; ``first_kept_entry_id=None`` keeps nothing."""
        entry = self.compaction_entry(summary, first_kept_entry_id, tokens_before, details, from_hook, usage)
        return cast(CompactionEntry, self.append_entry(cast(Entry, entry)))

    @_serialized
    def compaction_entry(
        self,
        summary: str,
        first_kept_entry_id: str | None,
        tokens_before: int,
        details: Any,
        from_hook: bool | None,
        usage: dict[str, Any] | None,
        *,
        draft: bool = False,
    ) -> CompactionEntry:
        """The compaction entry :meth:`append_compaction` writes, child of the leaf (not
        appended). ``draft=True`` (a preview): a fresh random id and the wall-clock time,
        so that drafting draws nothing from the tree's own id source and clock.

        Raises:
            EntryNotFoundError: ``first_kept_entry_id`` is not in the tree.
        """
        if first_kept_entry_id is not None and first_kept_entry_id not in self._by_id:
            raise EntryNotFoundError(f"Entry {first_kept_entry_id} not found")
        system = current_system_message(self.projection().messages)
        if draft:
            entry: Entry = {
                "type": "compaction",
                "id": new_entry_id(self._by_id),
                "parentId": self._leaf_id,
                "timestamp": now_iso(),
            }
        else:
            entry = self._base("compaction")
        entry["summary"] = summary
        entry["firstKeptEntryId"] = first_kept_entry_id or entry["id"]
        entry["tokensBefore"] = tokens_before
        entry.update(_present(details=details, usage=usage, fromHook=from_hook))
        if system is not None:
            entry["systemMessage"] = {**system, "timestamp": iso_to_ms(entry["timestamp"])}
        return cast(CompactionEntry, entry)

    @_serialized
    def append_custom(self, custom_type: str, data: Any = None) -> CustomEntry:
        """Extension state that never enters the context."""
        entry: Entry = {"type": "custom", "customType": custom_type}
        if data is not None:
            entry["data"] = data
        entry.update(self._base("custom"))
        return cast(CustomEntry, self.append_entry(entry))

    @_serialized
    def append_custom_message(
        self, custom_type: str, content: Any, display: bool = True, details: Any = None
    ) -> CustomMessageEntry:
        """A message from an extension that enters the context as a user message."""
        entry: Entry = {
            "type": "custom_message",
            "customType": custom_type,
            "content": content,
            "display": display,
        }
        if details is not None:
            entry["details"] = details
        entry.update(self._base("custom_message"))
        return cast(CustomMessageEntry, self.append_entry(entry))

    @_serialized
    def append_session_info(self, name: str) -> SessionInfoEntry:
        return cast(SessionInfoEntry, self._append("session_info", name=_collapse_newlines(name)))

    @property
    def name(self) -> str | None:
        """The display name from the latest session_info entry (empty clears)."""
        for entry in reversed(self._list):
            if entry.get("type") == "session_info":
                name = entry.get("name")
                return name.strip() or None if isinstance(name, str) else None
        return None

    @_serialized
    def append_label(self, target_id: str, label: str | None) -> LabelEntry:
        """Set (or with None / "" clear) the label of an entry; the last label wins."""
        self.entry(target_id)
        return cast(LabelEntry, self._append("label", targetId=target_id, **_present(label=label)))

    @_serialized
    def append_context_edit(
        self, target_id: str, replacement: dict[str, Any] | None
    ) -> ContextEditEntry:
        """Replace (``{"content": ...}``) or omit (None) one earlier message in the context.

        Validated like Pi 1.3: the target exists, is on the active branch, and is a
        user / assistant / toolResult message or a custom_message.
        """
        if replacement is not None and (
            not isinstance(replacement, dict)
            or "content" not in replacement
            or not isinstance(replacement["content"], (str, list))
        ):
            raise ContextEditError(
                "Context edit replacement must be None or a dict with string/list 'content'"
            )
        target = self.entry(target_id)
        if not any(e["id"] == target_id for e in self._light_branch()):
            raise ContextEditError(f"Entry {target_id} is not on the active branch")
        kind = target.get("type")
        message = target.get("message") if kind == "message" else None
        role = message.get("role") if isinstance(message, dict) else None
        if not (kind == "custom_message" or role in ("user", "assistant", "toolResult")):
            raise ContextEditError(f"Entry {target_id} does not contribute editable model content")
        if (
            replacement is not None
            and role in ("assistant", "toolResult")
            and isinstance(replacement["content"], str)
        ):
            replacement = {"content": [{"type": "text", "text": replacement["content"]}]}
        entry = self._append("context_edit", targetId=target_id, replacement=replacement)
        return cast(ContextEditEntry, entry)

    @_serialized
    def branch_with_summary(
        self,
        target_id: str | None,
        summary: str,
        details: Any = None,
        from_hook: bool | None = None,
        usage: dict[str, Any] | None = None,
    ) -> BranchSummaryEntry:
        """Move the leaf to ``target_id`` (None = before the root) and append a branch summary.

        ``fromId`` records the abandoned leaf (Pi 1.3), or "root".
        """
        if target_id is not None:
            self.entry(target_id)
        from_id = self._leaf_id or "root"
        self._leaf_id = target_id
        optional = _present(details=details, usage=usage, fromHook=from_hook)
        entry = self._append("branch_summary", fromId=from_id, summary=summary, **optional)
        return cast(BranchSummaryEntry, entry)

    # --- forks --------------------------------------------------------------------------

    @_serialized
    def fork(self, leaf_id: str | None = None, path: str | os.PathLike[str] | None = None) -> SessionTree:
        """A new session file holding only the path root→leaf, with its labels carried.

        Label entries are dropped from the path (parents re-linked) and fresh label entries
        for the path's current labels are appended, as Pi's createBranchedSession does.
        """
        leaf = self._leaf_id if leaf_id is None else leaf_id
        branch = self.get_branch(leaf)
        if not branch:
            raise EntryNotFoundError(f"Entry {leaf} not found")
        kept: list[Entry] = []
        replaced: dict[str, str] = {}
        pending: list[str] = []
        parent: str | None = None
        for entry in branch:
            if entry.get("type") == "label":
                pending.append(entry["id"])
                continue
            for label_id in pending:
                replaced[label_id] = entry["id"]
            pending.clear()
            copy = redact_obj({**entry, "parentId": parent})
            if entry.get("type") == "compaction" and entry.get("firstKeptEntryId") != entry["id"]:
                first = entry.get("firstKeptEntryId")
                if isinstance(first, str):
                    copy["firstKeptEntryId"] = replaced.get(first, first)
            kept.append(copy)
            parent = entry["id"]
        ids = {e["id"] for e in kept}
        folder = os.path.dirname(self.path) if self.path else None
        new = SessionTree.create(
            path,
            self.cwd,
            parent_session=self.path if self.path and self._flushed else None,
            session_dir=folder,
        ) if (path is not None or folder) else SessionTree.in_memory(self.cwd)
        for entry in kept:
            new._index(entry)
        tail = kept[-1]["id"] if kept else None
        for target, (text, stamp) in self._labels.items():
            if target in ids:
                # Label text can hold a key too (a file written elsewhere): a fork copies none.
                label_entry = redact_obj({
                    "type": "label",
                    "id": new_entry_id(ids),
                    "parentId": tail,
                    "timestamp": stamp,
                    "targetId": target,
                    "label": text,
                })
                ids.add(label_entry["id"])
                new._index(label_entry)
                tail = label_entry["id"]
        if new._appender is not None and new._has_conversation:
            new._write_all()
        return new

    def _repr_html_(self) -> str | None:
        # The renderer lives in the notebook layer, which registers it (pi_nb.display).
        return to_html(self)

    def __repr__(self) -> str:
        where = self.path or "in memory"
        return f"<SessionTree {self.session_id[:8]} {len(self._list)} entries leaf={self._leaf_id} {where}>"


_BAD_PARENT = object()  # children-index key for entries whose parentId is not a string


def _present(**fields: Any) -> dict[str, Any]:
    """The optional ``fields`` of an entry that have a value (Pi writes no ``null`` for
    them), in the order given."""
    return {key: value for key, value in fields.items() if value is not None}


def _parent_key(entry: Entry) -> Any:
    parent = entry.get("parentId")
    return parent if parent is None or isinstance(parent, str) else _BAD_PARENT


def _collapse_newlines(name: str) -> str:
    import re

    return re.sub(r"[\r\n]+", " ", name).strip()
