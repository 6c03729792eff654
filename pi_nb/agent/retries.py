"""After each agent-loop run of a session: retry a transient error first, then hand the
reply to the compaction driver (Pi 1.3's post-run order). The rules are
:mod:`pi_nb.agent.recovery`'s; this module waits, omits and announces."""

from __future__ import annotations

from typing import Any

from ..entries import Message
from .loop import LoopResult

__all__ = ["RetryDriver"]


class RetryDriver:
    """Retries of one session (``session``: a :class:`~pi_nb.agent.session.Session`, read
    for its retry policy, recovery state, queues, abort flag, bus and compaction driver)."""

    def __init__(self, session: Any) -> None:
        self.session = session

    def after_run(self, result: LoopResult) -> bool:
        """Pi's post-run handling: retry first, then the compaction check; True when the
        loop should continue."""
        s = self.session
        message = result.last_assistant
        if message is None:
            return bool(s.steering or s.follow_ups)
        entry_id = result.last_assistant_entry["id"] if result.last_assistant_entry else None
        state = s._recovery
        if state.should_retry(message, result.error_kind, s.retry, s.window) and self.retry(message, entry_id):
            return not s._abort.is_set()
        if s._abort.is_set():
            self.finish_cancelled()
            return False
        if message.get("stopReason") == "error":
            s._bus.emit_if(state.end_retry(success=False, final_error=message.get("errorMessage")))
        tool_ids = [entry["id"] for _, entry in result.tool_results]
        if s._compactor.check(
            message, entry_id, skip_aborted=True, tool_results=tool_ids, error_kind=result.error_kind
        ):
            return not s._abort.is_set()
        return not s._abort.is_set() and bool(s.steering or s.follow_ups)

    def retry(self, message: Message, entry_id: str | None) -> bool:
        """Announce and wait out one retry (the failed attempt omitted); False when the
        retries are spent or the wait was aborted."""
        s = self.session
        start = s._recovery.next_retry(message, s.retry)
        if start is None:
            return False
        s._bus.emit(start)
        if entry_id is not None:
            s._compactor.omit([entry_id])
        if not s.retry.wait(start.delay_ms / 1000, s._abort):
            self.finish_cancelled()
            return False
        return True

    def finish_cancelled(self) -> None:
        """Close an open retry sequence of a cancelled run (``auto_retry_end``, if any)."""
        s = self.session
        s._bus.emit_if(s._recovery.end_retry(success=False, final_error="Retry cancelled"))
