"""C = P(H): the model-visible context derived from the session tree (Pi 1.3 semantics).

Walk the branch root→leaf; the latest compaction on it contributes its summary, then the
entries it kept (from ``firstKeptEntryId``), then everything after it; context edits
replace or omit single messages. Every message keeps a link to the entry that produced it.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from typing import Any

from .display import to_html
from .entries import Entry, Message, iso_to_ms, message_role, path_to

# Roles a context edit's replacement applies to.
_EDITABLE_ROLES = ("user", "assistant", "toolResult", "custom")


class ProjectedEntry:
    """One context entry and the messages it contributes (possibly none).

    An entry loaded lazily from a file is parsed on first access to ``entry`` or
    ``messages``; ``id``, ``type``, ``message_count`` and ``status`` never parse it.
    """

    __slots__ = ("_entry", "_messages", "_resolve", "edit", "message_count")

    def __init__(
        self,
        entry: Entry,
        messages: list[Message] | None = None,
        edit: Entry | None = None,
        resolve: Callable[[Entry], Entry] | None = None,
    ) -> None:
        self._entry = entry
        self.edit = edit
        self._resolve = resolve
        if messages is None and resolve is None:
            messages = apply_edit(entry_messages(entry), edit)
        self._messages = messages
        if messages is not None:
            self.message_count = len(messages)
        else:
            # A light entry is a message entry whose message is an object: one message,
            # unless an edit omits it.
            omitted = edit is not None and edit.get("replacement") is None
            self.message_count = 0 if omitted else 1

    @property
    def entry(self) -> Entry:
        """The full entry."""
        if self._resolve is not None:
            self._entry = self._resolve(self._entry)
            self._resolve = None
        return self._entry

    @property
    def messages(self) -> list[Message]:
        """The messages this entry puts in context, edits applied."""
        if self._messages is None:
            self._messages = apply_edit(entry_messages(self.entry), self.edit)
        return self._messages

    @property
    def id(self) -> str:
        return self._entry["id"]

    @property
    def type(self) -> str | None:
        return self._entry.get("type")

    @property
    def status(self) -> str:
        """summary | kept | edited | omitted | invisible — how the entry shows in context."""
        if self.edit is not None:
            return "omitted" if self.edit.get("replacement") is None else "edited"
        if self.type == "compaction":
            return "summary" if self.message_count else "invisible"
        return "kept" if self.message_count else "invisible"

    def __repr__(self) -> str:
        return f"<ProjectedEntry {self.id} {self.type} {self.status}, {self.message_count} message(s)>"


class Projection:
    """The projection of one branch: context entries, messages and settings in force.

    Projections made by appending share their lists with the one they extend (so keeping
    the current projection up to date costs O(1) per append); each object only ever
    shows its own prefix of them. Message bodies of entries loaded lazily are parsed
    when ``messages`` is first read; ``message_count`` never parses them.
    """

    def __init__(
        self,
        leaf_id: str | None,
        path: list[Entry],
        entries: list[ProjectedEntry],
        thinking_level: str = "off",
        model: dict[str, Any] | None = None,
        compaction: Entry | None = None,
        edits: dict[str, Entry] | None = None,
        messages: list[Message] | None = None,
        resolve: Callable[[Entry], Entry] | None = None,
        message_count: int | None = None,
    ) -> None:
        self.leaf_id = leaf_id
        self.thinking_level = thinking_level
        self.model = model
        self.compaction = compaction
        self.edits = edits or {}
        self._path = path
        self._resolve = resolve
        self._entries = entries
        self._messages = messages  # built on first access when None
        if message_count is None:
            message_count = sum(pe.message_count for pe in entries)
        self._n = (len(path), len(entries), message_count)
        self.tokens: Any = None  # ContextTokens, filled by whoever computes them first

    @property
    def path(self) -> list[Entry]:
        """Entries root→leaf (all types)."""
        light = self.light_path
        if self._resolve is None:
            return light
        return [self._resolve(e) for e in light]

    @property
    def light_path(self) -> list[Entry]:
        """Root→leaf, possibly as light skeletons of large message entries: only the
        structural fields (type, id, parentId, timestamp, message role) are reliable."""
        store = self._path
        return store if len(store) == self._n[0] else store[: self._n[0]]

    @property
    def entries(self) -> list[ProjectedEntry]:
        """Context entries with the messages each contributes."""
        store = self._entries
        return store if len(store) == self._n[1] else store[: self._n[1]]

    @property
    def messages(self) -> list[Message]:
        """All messages the model sees next, in order (Pi's AgentMessage objects)."""
        store = self._messages
        if store is None:
            store = self._messages = [m for pe in self.entries for m in pe.messages]
        return store if len(store) == self._n[2] else store[: self._n[2]]

    @property
    def message_count(self) -> int:
        """``len(messages)``, without parsing any message."""
        return self._n[2]

    def source_of(self, message_index: int) -> ProjectedEntry:
        """The context entry that produced ``messages[message_index]``."""
        if message_index >= 0:
            seen = 0
            for pe in self.entries:
                seen += pe.message_count
                if message_index < seen:
                    return pe
        raise IndexError(message_index)

    def to_context(self) -> dict[str, Any]:
        """`{messages, thinkingLevel, model}` like Pi's buildSessionContext()."""
        return {"messages": self.messages, "thinkingLevel": self.thinking_level, "model": self.model}

    def _repr_html_(self) -> str | None:
        # The renderer lives in the notebook layer, which registers it (pi_nb.display).
        return to_html(self)

    def __repr__(self) -> str:
        return (
            f"<Projection leaf={self.leaf_id} {len(self.entries)} entries, "
            f"{self.message_count} messages>"
        )


# --- entry → messages ---------------------------------------------------------------------


def compaction_summary_message(entry: Entry) -> Message:
    return {
        "role": "compactionSummary",
        "summary": entry.get("summary"),
        "tokensBefore": entry.get("tokensBefore"),
        "timestamp": iso_to_ms(entry.get("timestamp")),
    }


def entry_messages(entry: Entry) -> list[Message]:
    """The messages one entry contributes when it is in context (before edits)."""
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        if not isinstance(message, dict):
            return []
        role = message.get("role")
        if role == "system" and message.get("content") is None:
            return [{**message, "content": ""}]
        if role in ("user", "assistant", "toolResult") and message.get("content") is None:
            return [{**message, "content": []}]
        return [message]
    if kind == "custom_message":
        content = entry.get("content")
        message: Message = {
            "role": "custom",
            "customType": entry.get("customType"),
            "content": [] if content is None else content,
            "display": entry.get("display"),
        }
        if "details" in entry:
            message["details"] = entry["details"]
        message["timestamp"] = iso_to_ms(entry.get("timestamp"))
        return [message]
    if kind == "branch_summary" and entry.get("summary"):
        return [
            {
                "role": "branchSummary",
                "summary": entry["summary"],
                "fromId": entry.get("fromId"),
                "timestamp": iso_to_ms(entry.get("timestamp")),
            }
        ]
    if kind == "compaction":
        summary = compaction_summary_message(entry)
        system = entry.get("systemMessage")
        # Pi keeps any truthy value here; only a dict is a message (hostile files).
        return [system, summary] if system and isinstance(system, dict) else [summary]
    return []


def apply_edit(messages: list[Message], edit: Entry | None) -> list[Message]:
    """Apply one context edit to an entry's messages (null omits; content replaces)."""
    if edit is None:
        return messages
    replacement = edit.get("replacement")
    if replacement is None:
        return []
    if not isinstance(replacement, dict):
        return messages
    content = replacement.get("content")
    out = []
    for message in messages:
        role = message.get("role")
        if role not in _EDITABLE_ROLES:
            out.append(message)
            continue
        new_content = (
            [{"type": "text", "text": content}]
            if role in ("assistant", "toolResult") and isinstance(content, str)
            else content
        )
        out.append({**message, "content": new_content})
    return out


# --- the projection -------------------------------------------------------------------------


def session_path(
    entries: Sequence[Entry], leaf_id: str | object | None, by_id: Mapping[str, Entry]
) -> list[Entry]:
    """Root→leaf. ``None`` = empty; an unknown or missing leaf falls back to the last entry."""
    if leaf_id is None:
        return []
    leaf = by_id.get(leaf_id) if isinstance(leaf_id, str) else None
    if leaf is None:
        leaf = entries[-1] if entries else None
    return path_to(leaf, by_id)


def settings_on_path(
    path: Sequence[Entry], resolve: Callable[[Entry], Entry] | None = None
) -> tuple[str, dict[str, Any] | None]:
    """(thinking level, model) in force at the end of the path; assistants set the model.

    ``resolve`` turns a light entry into the full one (only the deciding reply is parsed).
    """
    # The last writer wins, so scan backwards and stop once both are known.
    thinking: Any = None
    model: dict[str, Any] | None = None
    found_model = False
    for index in range(len(path) - 1, -1, -1):
        entry = path[index]
        kind = entry.get("type")
        if kind == "thinking_level_change":
            if thinking is None:
                thinking = entry.get("thinkingLevel")
        elif not found_model and kind == "model_change":
            model = {"provider": entry.get("provider"), "modelId": entry.get("modelId")}
            found_model = True
        elif not found_model and kind == "message" and message_role(entry) == "assistant":
            message = (resolve(entry) if resolve is not None else entry).get("message")
            if isinstance(message, dict):
                model = {"provider": message.get("provider"), "modelId": message.get("model")}
                found_model = True
        if found_model and thinking is not None:
            break
    return ("off" if thinking is None else thinking), model


def context_entries(path: Sequence[Entry]) -> tuple[list[Entry], Entry | None]:
    """Pi's buildContextEntries: [C, kept…, after…] or the whole path; plus C."""
    compaction_index = -1
    for index in range(len(path) - 1, -1, -1):
        if path[index].get("type") == "compaction":
            compaction_index = index
            break
    if compaction_index < 0:
        return list(path), None
    compaction = path[compaction_index]
    first_kept = compaction.get("firstKeptEntryId")
    # Ids on a path are unique, so scanning back from C finds the kept range's start.
    start = compaction_index
    for index in range(compaction_index - 1, -1, -1):
        if path[index].get("id") == first_kept:
            start = index
            break
    out = [compaction]
    out.extend(e for e in path[start:compaction_index] if not _is_system_message(e))
    out.extend(path[compaction_index + 1 :])
    return out, compaction


def _is_system_message(entry: Entry) -> bool:
    return entry.get("type") == "message" and message_role(entry) == "system"


def build_session_projection(
    entries: Sequence[Entry],
    leaf_id: str | object | None = ...,
    by_id: Mapping[str, Entry] | None = None,
    resolve: Callable[[Entry], Entry] | None = None,
    light: Container[int] | None = None,
) -> Projection:
    """Project a branch, as Pi 1.3's buildSessionProjection (leaf defaults to the last entry).

    ``light`` holds the ``id()`` of light message entries (structural fields and role only)
    and ``resolve`` turns one into the full entry. The walk reads structural fields only,
    and the projection parses a light entry when its content is first asked for.
    """
    if by_id is None:
        by_id = {e["id"]: e for e in entries if isinstance(e.get("id"), str)}
    path = session_path(entries, leaf_id if leaf_id is not ... else "", by_id)
    thinking, model = settings_on_path(path, resolve)
    chosen, compaction = context_entries(path)
    lazy = light if resolve is not None and light else ()
    edits: dict[str, Entry] = {}
    for entry in chosen:
        if entry.get("type") == "context_edit" and isinstance(entry.get("targetId"), str):
            edits[entry["targetId"]] = entry
    projected = []
    for index, entry in enumerate(chosen):
        if entry.get("type") == "compaction" and index > 0:
            projected.append(ProjectedEntry(entry, []))
            continue
        edit = edits.get(entry.get("id"))
        projected.append(ProjectedEntry(entry, None, edit, resolve if id(entry) in lazy else None))
    return Projection(
        leaf_id=path[-1]["id"] if path else None,
        path=path,
        entries=projected,
        thinking_level=thinking,
        model=model,
        compaction=compaction,
        edits=edits,
        resolve=resolve,
    )


def extend_projection(previous: Projection, entry: Entry) -> Projection | None:
    """The projection after appending ``entry`` as a child of ``previous``'s leaf.

    O(1): the new projection shares (and appends to) ``previous``'s lists. None when the
    entry changes earlier parts of the projection (a compaction or a context edit), or
    when ``previous`` is not the newest user of its lists; the caller then rebuilds.
    """
    kind = entry.get("type")
    if kind in ("compaction", "context_edit"):
        return None
    n_path, n_entries, n_messages = previous._n
    shared = previous._messages
    if (
        len(previous._path) != n_path
        or len(previous._entries) != n_entries
        or (shared is not None and len(shared) != n_messages)
    ):
        return None
    thinking, model = previous.thinking_level, previous.model
    if kind == "thinking_level_change":
        thinking = entry.get("thinkingLevel")
    elif kind == "model_change":
        model = {"provider": entry.get("provider"), "modelId": entry.get("modelId")}
    elif kind == "message":
        message = entry.get("message")
        if isinstance(message, dict) and message.get("role") == "assistant":
            model = {"provider": message.get("provider"), "modelId": message.get("model")}
    added = ProjectedEntry(entry)
    previous._path.append(entry)
    previous._entries.append(added)
    if shared is not None:
        shared.extend(added.messages)
    return Projection(
        leaf_id=entry["id"],
        path=previous._path,
        entries=previous._entries,
        thinking_level=thinking,
        model=model,
        compaction=previous.compaction,
        edits=previous.edits,
        messages=shared,
        resolve=previous._resolve,
        message_count=n_messages + added.message_count,
    )
