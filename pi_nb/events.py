"""pi_nb's event vocabulary: one typed dataclass per event, snake_case fields.

The same objects reach :meth:`pi_nb.agent.Session.subscribe` listeners, a run's
``on_event`` callback and :class:`pi_nb.hooks.Hooks` handlers, so an event is spelled once.
The names (``type``) are Pi's agent and extension event names; the fields are Pi's payload
fields in Python spelling (Pi's ``willRetry`` is ``will_retry`` here). Pi's camelCase stays
where Pi's file format requires it: the ``message`` / ``entry`` dicts an event carries are
session-file objects and keep their keys (``stopReason``, ``errorMessage``).

Events are read as attributes (``event.will_retry``) or, for code written against the
earlier dict events, as a read-only mapping (``event["will_retry"]``, ``event.get("type")``).
A camelCase key raises ``KeyError`` naming the snake_case field instead of reading as None,
so a consumer written for the old spelling fails loudly rather than seeing nothing.

This module sits at the bottom of the package (it imports nothing from pi_nb but the entry
types), so every layer can build and read events.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, dataclass_transform

from .entries import Entry, Message

__all__ = [
    "EVENT_TYPES",
    "LOOP_EVENTS",
    "AgentEnd",
    "AgentStart",
    "AutoRetryEnd",
    "AutoRetryStart",
    "CompactionEnd",
    "CompactionStart",
    "EntryAppended",
    "ErrorEvent",
    "HookErrorEvent",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "PiEvent",
    "SessionCompact",
    "SessionCompactFailed",
    "SessionTreeEvent",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "TurnEnd",
    "TurnStart",
    "event_of",
]

#: Event name → its class (every subclass of :class:`PiEvent` registers itself).
EVENT_TYPES: dict[str, type[PiEvent]] = {}

_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")


def _snake(name: str) -> str:
    return _CAMEL.sub(lambda m: "_" + m.group(1).lower(), name)


@dataclass_transform(frozen_default=True)
class PiEvent(Mapping[str, Any]):
    """Base of every event: ``type`` (Pi's event name) plus typed fields.

    A subclass names its event (``class TurnStart(PiEvent, name="turn_start")``) and becomes
    a frozen dataclass; equality is the Mapping's (type and fields), so an event also equals
    the plain dict of the earlier API. A read-only mapping over ``type`` and the fields, for
    dict-style consumers.
    """

    type: ClassVar[str] = ""

    def __init_subclass__(cls, *, name: str, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.type = name
        dataclass(frozen=True, eq=False)(cls)
        EVENT_TYPES[name] = cls

    def _names(self) -> tuple[str, ...]:
        return ("type", *(f.name for f in fields(self)))  # type: ignore[arg-type]

    def __getitem__(self, key: str) -> Any:
        if key == "type":
            return self.type
        names = self._names()
        if key in names:
            return getattr(self, key)
        snake = _snake(key)
        if snake != key and snake in names:
            raise KeyError(f"{key!r}: pi_nb events are snake_case, read {snake!r}")
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        """Like ``dict.get``, except that a camelCase spelling of a field raises KeyError."""
        try:
            return self[key]
        except KeyError as exc:
            if "snake_case" in str(exc):
                raise
            return default

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __contains__(self, key: object) -> bool:
        return key in self._names()

    def to_dict(self) -> dict[str, Any]:
        """``{"type": …, **fields}`` (shallow)."""
        return {name: self[name] for name in self._names()}


# --- the agent loop ---------------------------------------------------------------------------


class AgentStart(PiEvent, name="agent_start"):
    """A run of the agent loop begins."""


class AgentEnd(PiEvent, name="agent_end"):
    messages: list[Message] = field(default_factory=list)


class TurnStart(PiEvent, name="turn_start"):
    """A turn (one model request and its tool calls) begins."""


class TurnEnd(PiEvent, name="turn_end"):
    message: Message | None = None
    tool_results: list[Message] = field(default_factory=list)


class MessageStart(PiEvent, name="message_start"):
    message: Message


class MessageUpdate(PiEvent, name="message_update"):
    """A streamed delta of the reply being written (``kind``: ``"text"`` or ``"thinking"``)."""

    delta: str
    kind: str = "text"


class MessageEnd(PiEvent, name="message_end"):
    message: Message
    entry_id: str | None = None


class ToolExecutionStart(PiEvent, name="tool_execution_start"):
    tool_call_id: str | None
    tool_name: str | None
    args: Any = None


class ToolExecutionEnd(PiEvent, name="tool_execution_end"):
    tool_call_id: str | None
    tool_name: str | None
    result: dict[str, Any]
    is_error: bool
    duration_ms: int | None = None


# --- the session: retries, compaction, appended entries, errors -------------------------------


class AutoRetryStart(PiEvent, name="auto_retry_start"):
    attempt: int
    max_attempts: int
    delay_ms: int
    error_message: str


class AutoRetryEnd(PiEvent, name="auto_retry_end"):
    success: bool
    attempt: int
    final_error: str | None = None


class CompactionStart(PiEvent, name="compaction_start"):
    reason: str


class CompactionEnd(PiEvent, name="compaction_end"):
    """A compaction finished: ``result`` (a CompactionResult) or why not.

    ``error_message`` — it failed; ``skipped`` — there was nothing to compact (not an
    error); ``aborted`` — a hook cancelled it; ``threshold`` — W − R when it ran, so a
    display can tell whether the context still exceeds it.
    """

    reason: str
    result: Any = None
    aborted: bool = False
    will_retry: bool = False
    error_message: str | None = None
    skipped: str | None = None
    threshold: int | None = None


class SessionCompact(PiEvent, name="session_compact"):
    compaction_entry: Entry
    from_extension: bool
    reason: str
    will_retry: bool


class SessionCompactFailed(PiEvent, name="session_compact_failed"):
    reason: str
    error_message: str | None
    aborted: bool
    will_retry: bool
    from_extension: bool


class SessionTreeEvent(PiEvent, name="session_tree"):
    new_leaf_id: str | None
    old_leaf_id: str | None
    summary_entry: Entry | None
    from_extension: bool | None  # None: no summary written


class EntryAppended(PiEvent, name="entry_appended"):
    entry: Entry


class ErrorEvent(PiEvent, name="error"):
    """A run ended with an error (``source``: ``"run"`` or ``"compaction"``)."""

    message: str
    source: str = "run"


class HookErrorEvent(PiEvent, name="hook_error"):
    """A hook handler raised (``error`` is its one-line text)."""

    event: str
    handler: Any
    error: str
    exception: BaseException | None = None


#: The agent loop's events (Session forwards them, with the retry events and
#: ``entry_appended``, to hooks).
LOOP_EVENTS: tuple[type[PiEvent], ...] = (
    AgentStart,
    AgentEnd,
    TurnStart,
    TurnEnd,
    MessageStart,
    MessageUpdate,
    MessageEnd,
    ToolExecutionStart,
    ToolExecutionEnd,
)


def event_of(name: str, **payload: Any) -> PiEvent | None:
    """The typed event ``name`` with ``payload`` (snake_case keys), or None for a name
    outside the vocabulary. A wrong field raises TypeError (a misspelt payload is a bug)."""
    cls = EVENT_TYPES.get(name)
    return cls(**payload) if cls is not None else None
