"""Hooks: Python callables that observe or steer the session, like Pi's extension events.

A :class:`Hooks` object is a plain registry, passed explicitly to whatever fires events
(there is no global registry). Handlers run in registration order and receive one event:
a notification is the typed event of :mod:`pi_nb.events` (the object Session listeners
get too); an event whose handlers steer the operation (``session_before_compact``,
``session_before_tree``, ``context``, ``before_agent_start``) is an :class:`Event` — a dict
with a ``type`` key plus the payload. Both are readable as attributes and as a mapping,
with snake_case keys::

    hooks = Hooks()

    def audit(event):
        if event.reason == "manual" and not event.preparation.messages_to_summarize:
            return {"cancel": True}

    off = hooks.on(SESSION_BEFORE_COMPACT, audit)
    ...
    off()  # unsubscribe

A handler that raises is reported as a ``hook_error`` event (and kept in
:attr:`Hooks.errors`); it never breaks the operation that fired it.

Payloads (snake_case keys) of the events pi_nb fires itself. Handler *return values*
mirror Pi's extension API, so their keys are Pi's camelCase (``firstKeptEntryId``,
``tokensBefore``, ``systemPrompt``, ``customInstructions``); the snake_case spelling is
accepted as an alias where noted:

- ``session_before_compact``: preparation, branch_entries, custom_instructions, reason,
  will_retry → ``{"cancel": True}`` or ``{"compaction": {summary, firstKeptEntryId,
  tokensBefore, details?, usage?}}``
- ``session_compact``: compaction_entry, from_extension, reason, will_retry
- ``compaction_start``: reason; ``compaction_end``: reason, result, aborted, will_retry,
  error_message?; ``session_compact_failed``: reason, error_message, aborted, will_retry,
  from_extension
- ``session_before_tree``: preparation → ``{"cancel": True}`` / ``{"summary": {summary,
  details?}}`` / customInstructions / replaceInstructions / label;
  ``session_tree``: new_leaf_id, old_leaf_id, summary_entry, from_extension
- ``context``: messages → a new list, ``{"messages": [...]}`` or None
- ``before_agent_start``: prompt, images, system_prompt → ``{"message": {...},
  "systemPrompt": str}`` (``system_prompt`` accepted too)
- ``hook_error``: event, handler, error (text), exception
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .entries import Message
from .events import EVENT_TYPES, HookErrorEvent, PiEvent, event_of
from .messages import current_system_message

__all__ = [
    "AGENT_END",
    "AGENT_START",
    "BEFORE_AGENT_START",
    "BEFORE_PROVIDER_REQUEST",
    "COMPACTION_END",
    "COMPACTION_START",
    "CONTEXT",
    "HOOK_ERROR",
    "KNOWN_EVENTS",
    "SESSION_BEFORE_COMPACT",
    "SESSION_BEFORE_TREE",
    "SESSION_COMPACT",
    "SESSION_COMPACT_FAILED",
    "SESSION_TREE",
    "Event",
    "HookError",
    "Hooks",
]

log = logging.getLogger(__name__)

# Events that can steer what happens (their handlers' results are used).
SESSION_BEFORE_COMPACT = "session_before_compact"
SESSION_BEFORE_TREE = "session_before_tree"
CONTEXT = "context"
BEFORE_AGENT_START = "before_agent_start"
BEFORE_PROVIDER_REQUEST = "before_provider_request"
# Notifications.
SESSION_COMPACT = "session_compact"
SESSION_COMPACT_FAILED = "session_compact_failed"
SESSION_TREE = "session_tree"
COMPACTION_START = "compaction_start"
COMPACTION_END = "compaction_end"
AGENT_START = "agent_start"
AGENT_END = "agent_end"
HOOK_ERROR = "hook_error"

#: Every event name :meth:`Hooks.on` accepts: the steering events, the typed vocabulary
#: (:mod:`pi_nb.events`, but ``error``, which only Session listeners get) and Pi's other
#: extension events.
KNOWN_EVENTS = frozenset(
    {
        SESSION_BEFORE_COMPACT,
        SESSION_BEFORE_TREE,
        CONTEXT,
        BEFORE_AGENT_START,
        BEFORE_PROVIDER_REQUEST,
        *(set(EVENT_TYPES) - {"error"}),
        "session_start",
        "session_shutdown",
        "session_before_fork",
        "session_fork",
        "session_before_switch",
        "session_switch",
        "tool_execution_update",
        "tool_call",
        "tool_result",
        "input",
        "queue_update",
    }
)

#: A handler gets a typed notification (:class:`~pi_nb.events.PiEvent`) or an :class:`Event`.
Handler = Callable[[Any], Any]


class Event(dict):  # type: ignore[type-arg]
    """An event: ``{"type": name, **payload}``; keys also readable as attributes."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def type(self) -> str:
        return self["type"]


@dataclass
class HookError:
    """A handler that raised: which event, which handler, the exception."""

    event: str
    handler: Handler
    error: BaseException

    @property
    def message(self) -> str:
        return f"{type(self.error).__name__}: {self.error}"


def _same_items(left: Sequence[Any], right: Sequence[Any]) -> bool:
    return len(left) == len(right) and all(a is b for a, b in zip(left, right, strict=True))


class Hooks:
    """A registry of handlers per event name; see the module docstring."""

    def __init__(self) -> None:
        self._handlers: dict[str, list[Handler]] = {}
        #: Every handler failure so far, oldest first.
        self.errors: list[HookError] = []

    # --- registration ---------------------------------------------------------------------

    def on(self, event: str, fn: Handler) -> Callable[[], None]:
        """Register ``fn`` for ``event``; returns a function that unregisters it."""
        if event not in KNOWN_EVENTS:
            raise ValueError(f"unknown hook event {event!r}; known: {sorted(KNOWN_EVENTS)}")
        if not callable(fn):
            raise TypeError(f"hook handler for {event!r} must be callable, not {type(fn).__name__}")
        handlers = self._handlers.setdefault(event, [])
        handlers.append(fn)

        def off() -> None:
            if fn in handlers:
                handlers.remove(fn)

        return off

    def handlers(self, event: str) -> list[Handler]:
        """The handlers of an event, in registration order (a copy)."""
        return list(self._handlers.get(event, ()))

    def has_handlers(self, event: str) -> bool:
        return bool(self._handlers.get(event))

    def clear(self, event: str | None = None) -> None:
        """Drop every handler (of one event, or of all)."""
        if event is None:
            self._handlers.clear()
        else:
            self._handlers.pop(event, None)

    # --- running --------------------------------------------------------------------------

    def _report(self, event: str, fn: Handler, error: BaseException) -> None:
        record = HookError(event, fn, error)
        self.errors.append(record)
        log.warning("hook %r for %s raised %s", fn, event, record.message)
        if event == HOOK_ERROR:
            return  # a failing error listener is logged, never re-reported
        for listener in self.handlers(HOOK_ERROR):
            try:
                listener(HookErrorEvent(event=event, handler=fn, error=record.message, exception=error))
            except Exception as exc:
                self.errors.append(HookError(HOOK_ERROR, listener, exc))
                log.warning("hook_error listener %r raised %s", listener, exc)

    def _call(self, event: str, fn: Handler, payload: Mapping[str, Any]) -> tuple[bool, Any]:
        try:
            return True, fn(payload)
        except Exception as exc:
            self._report(event, fn, exc)
            return False, None

    def emit(self, event: PiEvent | str, /, **payload: Any) -> None:
        """Notify every handler of ``event``; results are ignored, errors reported.

        ``event`` is a typed event (:mod:`pi_nb.events`), or a name plus its payload: a name
        of the vocabulary builds its typed event (a wrong field raises TypeError), another
        known name (``session_start`` …) an :class:`Event`.
        """
        if isinstance(event, PiEvent):
            if payload:
                raise TypeError("emit(event) takes no payload besides the typed event")
            name, value = event.type, event
        else:
            name = event
            value = event_of(name, **payload) or Event(type=name, **payload)
        for fn in self.handlers(name):
            self._call(name, fn, value)

    def _steer(self, event: str, fn: Handler, payload: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """Run a steering handler: its dict result, or None (no opinion, it raised, or it
        returned something else than a dict, which is reported)."""
        ok, value = self._call(event, fn, payload)
        if not ok or not value:
            return None
        if not isinstance(value, Mapping):
            self._report(event, fn, TypeError(f"{event} handler returned {type(value).__name__}, not a dict"))
            return None
        return value

    def _run_before(self, event: str, payload: Mapping[str, Any]) -> dict[str, Any] | None:
        result: dict[str, Any] | None = None
        for fn in self.handlers(event):
            value = self._steer(event, fn, Event(type=event, **payload))
            if value is None:
                continue
            result = dict(value)
            if result.get("cancel"):
                return result
        return result

    def run_before_compact(self, payload: Mapping[str, Any]) -> dict[str, Any] | None:
        """Fire ``session_before_compact``.

        Handlers may return ``{"cancel": True}`` (stops at once) or ``{"compaction":
        {summary, firstKeptEntryId, tokensBefore, details?, usage?}}``; a later handler's
        result overwrites an earlier one. Returns the winning result or None.
        """
        return self._run_before(SESSION_BEFORE_COMPACT, payload)

    def run_before_tree(self, payload: Mapping[str, Any]) -> dict[str, Any] | None:
        """Fire ``session_before_tree``: ``{"cancel": True}``, or ``{"summary": {summary,
        details?}, "customInstructions"?, "replaceInstructions"?, "label"?}``; later wins."""
        return self._run_before(SESSION_BEFORE_TREE, payload)

    def run_context(self, messages: Sequence[Message]) -> list[Message]:
        """Fire ``context`` (Pi's transformContext) and return the messages to send.

        Each handler gets a deep copy of the previous result without its system messages
        (``event.messages``) and may return a new list (or ``{"messages": [...]}``), edit
        the list in place, or return None. When the conversation changed, the system
        prompt state is put back as one leading system message; otherwise system
        messages stay where they were.
        """
        current = list(messages)
        for fn in self.handlers(CONTEXT):
            work = copy.deepcopy(current)
            visible = [m for m in work if m.get("role") != "system"]
            snapshot = list(visible)
            ok, value = self._call(CONTEXT, fn, Event(type=CONTEXT, messages=visible))
            if not ok:
                continue
            if isinstance(value, Mapping):
                value = value.get("messages")
            returned = list(value) if isinstance(value, (list, tuple)) else visible
            if _same_items(returned, snapshot):
                current = work  # unchanged list (message dicts may have been edited in place)
                continue
            head = current_system_message(work)
            current = [head, *returned] if head is not None else returned
        return current

    def run_before_agent_start(
        self, prompt: str, system_prompt: str, images: Sequence[dict[str, Any]] | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """Fire ``before_agent_start`` once per user prompt.

        Each handler sees ``prompt``, ``images`` and the current ``system_prompt`` and may
        return ``{"message": {customType, content, display?, details?}, "systemPrompt":
        str}`` (``system_prompt`` is accepted too). Returns (custom messages to append after
        the user message, in order; the final system prompt — prompts chain).
        """
        extra: list[dict[str, Any]] = []
        current = system_prompt
        for fn in self.handlers(BEFORE_AGENT_START):
            event = Event(
                type=BEFORE_AGENT_START,
                prompt=prompt,
                images=list(images or []),
                system_prompt=current,
            )
            value = self._steer(BEFORE_AGENT_START, fn, event)
            if value is None:
                continue
            message = value.get("message")
            if message is not None:
                if not isinstance(message, Mapping) or "content" not in message:
                    self._report(
                        BEFORE_AGENT_START,
                        fn,
                        ValueError("before_agent_start message needs 'customType' and 'content'"),
                    )
                else:
                    out = {
                        "customType": message.get("customType", "hook"),
                        "content": message["content"],
                        "display": message.get("display", True),
                    }
                    if message.get("details") is not None:
                        out["details"] = message["details"]
                    extra.append(out)
            new_prompt = value.get("systemPrompt", value.get("system_prompt"))
            if isinstance(new_prompt, str):
                current = new_prompt
        return extra, current

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={len(v)}" for k, v in self._handlers.items() if v)
        return f"<Hooks {counts or 'empty'}>"
