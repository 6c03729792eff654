"""A session's event bus: the run's ``on_event``, the subscribed listeners and the hooks.

Every typed event (:mod:`pi_nb.events`) a session produces goes through :meth:`EventBus.emit`:
a broken listener or hook is reported as a RuntimeWarning and never breaks the run.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

from ..events import LOOP_EVENTS, AutoRetryEnd, AutoRetryStart, EntryAppended, PiEvent
from ..hooks import Hooks

__all__ = ["HOOK_EVENTS", "EventBus", "Listener"]

#: A listener gets every typed event (:mod:`pi_nb.events`).
Listener = Callable[[PiEvent], None]

# Agent events forwarded to hooks (extensions see them like Pi's).
HOOK_EVENTS = frozenset(cls.type for cls in (*LOOP_EVENTS, AutoRetryStart, AutoRetryEnd, EntryAppended))
# compaction_start / compaction_end reach hooks from pi_nb.compaction.compact itself (and
# from the session's compaction driver when recovery gives up without compacting).


class EventBus:
    """Delivers events to the run's ``on_event``, the listeners and (for agent events) the
    hooks; ``observe`` then sees each event and may answer with one to emit next (the
    recovery state closing a retry sequence)."""

    def __init__(self, hooks: Callable[[], Hooks], observe: Callable[[PiEvent], PiEvent | None]) -> None:
        self._hooks = hooks  # read at emit time: a session's hooks may be replaced
        self._observe = observe
        self.listeners: list[Listener] = []
        #: The running prompt's own listener (``Session.prompt(on_event=…)``), else None.
        self.on_event: Listener | None = None

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` for every event of every run; returns an unsubscribe function."""
        self.listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self.listeners:
                self.listeners.remove(listener)

        return unsubscribe

    def emit(self, event: PiEvent) -> None:
        """Deliver ``event`` to the run's ``on_event``, the listeners and the hooks, then
        let the recovery state see it (which may close a retry sequence)."""
        targets = ([self.on_event] if self.on_event is not None else []) + list(self.listeners)
        for listener in targets:
            try:
                listener(event)
            except Exception as exc:  # a broken listener must not break the run
                warnings.warn(
                    f"pi_nb: event listener failed on {event.type}: {exc!r}", RuntimeWarning, stacklevel=2
                )
        if event.type in HOOK_EVENTS:
            self.notify_hooks(event)
        ended = self._observe(event)
        if ended is not None:
            self.emit(ended)

    def emit_if(self, event: PiEvent | None) -> None:
        if event is not None:
            self.emit(event)

    def emit_to(self, on_event: Listener | None, event: PiEvent) -> None:
        """Emit ``event`` with ``on_event`` as the run's listener (after a run has ended)."""
        previous = self.on_event
        self.on_event = on_event
        try:
            self.emit(event)
        finally:
            self.on_event = previous

    def notify_hooks(self, event: PiEvent) -> None:
        try:
            self._hooks().emit(event)
        except Exception as exc:  # Hooks reports handler errors itself; this is a last guard
            warnings.warn(f"pi_nb: hook failed on {event.type}: {exc!r}", RuntimeWarning, stacklevel=2)
