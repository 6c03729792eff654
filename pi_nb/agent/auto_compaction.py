"""The compaction driver of a session: Pi 1.3's threshold / overflow trigger carried out,
manual ``/compact``, and the one place a session's ``compaction_end`` is built.

*What* to do after a reply is decided by :mod:`pi_nb.agent.recovery`; this module does it
(omit, compact, give up) against the session it serves, and keeps the run's compactions
and its error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..entries import Message
from ..events import CompactionEnd, CompactionStart, EntryAppended, ErrorEvent
from . import recovery
from .overflow import ErrorKind
from .recovery import Compact, GiveUp

__all__ = ["CompactionDriver"]


class CompactionDriver:
    """Compactions of one session (``session``: a :class:`~pi_nb.agent.session.Session`,
    read for its tree, model, settings, hooks, queues and event bus at each use)."""

    def __init__(self, session: Any) -> None:
        self.session = session
        #: The compactions of the current run, and the error that ended it (or None).
        self.compactions: list[Any] = []
        self.run_error: str | None = None

    def start_run(self) -> None:
        self.compactions = []
        self.run_error = None

    # --- the automatic trigger ----------------------------------------------------------------

    def check(
        self,
        message: Message,
        entry_id: str | None,
        *,
        skip_aborted: bool,
        tool_results: Sequence[str],
        error_kind: ErrorKind | None = None,
    ) -> bool:
        """Pi 1.3's ``_checkCompaction`` (rules in :mod:`pi_nb.agent.recovery`); True when
        the loop should continue."""
        s = self.session
        decision = recovery.check_compaction(
            s.tree,
            message,
            entry_id,
            s._limits(),
            s._recovery,
            skip_aborted=skip_aborted,
            tool_results=tool_results,
            error_kind=error_kind,
            overhead=s._run_overhead,
        )
        return self.carry_out(decision)

    def between_turns(self) -> None:
        """Between turns of a run: compact when the projected estimate crosses W − R."""
        s = self.session
        decision: Compact | None = recovery.between_turns(s.tree, s._limits(), s._run_overhead)
        self.carry_out(decision)

    def carry_out(self, decision: recovery.Decision) -> bool:
        """Do what the rules decided; True when the loop should continue."""
        if decision is None:
            return False
        if isinstance(decision, GiveUp):
            from ..compaction import failure_events

            bus = self.session._bus
            end, failed = failure_events("overflow", decision.error)
            bus.emit(end)  # no compaction told the hooks: they hear both here
            bus.notify_hooks(end)
            bus.notify_hooks(failed)
            self.run_error = decision.error
            return False
        if decision.omit:
            self.omit(decision.omit)
        return self.auto_compact(decision.reason, will_retry=decision.will_retry)

    def omit(self, entry_ids: Iterable[str]) -> None:
        """Append ``context_edit(null)`` for entries still visible in the context."""
        tree = self.session.tree
        visible = {pe.id for pe in tree.projection().entries if pe.messages}
        for entry_id in entry_ids:
            if entry_id in visible:
                self.session._bus.emit(EntryAppended(entry=tree.append_context_edit(entry_id, None)))

    def auto_compact(self, reason: str, *, will_retry: bool) -> bool:
        """Run an automatic compaction; True when the loop should continue afterwards."""
        from .. import compaction as comp
        from ..redact import redact

        s = self.session
        s._bus.emit(CompactionStart(reason=reason))
        recovering = reason == "overflow" and will_retry
        try:
            result = comp.compact(s.tree, s._model, reason=reason, will_retry=will_retry, **self.options(None))
        except (comp.NothingToCompact, comp.AlreadyCompacted) as exc:
            self.ended(reason, skipped=str(exc))
            if recovering:
                self.run_error = f"Context overflow recovery failed: {exc}"
            return False
        except comp.CompactionCancelled:
            self.ended(reason, aborted=True)
            if recovering:
                self.run_error = "Context overflow recovery failed: compaction cancelled"
            return False
        except Exception as exc:
            prefix = "Context overflow recovery failed" if reason == "overflow" else "Auto-compaction failed"
            error = redact(f"{prefix}: {exc}")
            self.ended(reason, error_message=error)
            if recovering:
                self.run_error = error
            else:
                s._bus.emit(ErrorEvent(message=error, source="compaction"))
            return False
        self.compactions.append(result)
        self.ended(reason, result=result, will_retry=will_retry)
        if will_retry:
            return True
        return bool(s.steering or s.follow_ups)

    # --- manual ---------------------------------------------------------------------------------

    def manual(self, focus: str | None, preview: bool) -> Any:
        """Pi's ``/compact [focus]`` (``preview``: what would be summarized, nothing written)."""
        from .. import compaction as comp

        s = self.session
        options = self.options(focus)
        if preview:
            return comp.preview_compaction(s.tree, s._model, **options)
        s._bus.emit(CompactionStart(reason="manual"))
        try:
            result = comp.compact(s.tree, s._model, reason="manual", will_retry=False, **options)
        except BaseException as exc:
            aborted = isinstance(exc, comp.CompactionCancelled)
            self.ended("manual", aborted=aborted, error_message=str(exc))
            raise
        self.ended("manual", result=result)
        return result

    def navigate(self, target_id: str, summarize: bool, focus: str | None, label: str | None) -> Any:
        """Pi's ``/tree`` to ``target_id``, summarizing the branch left with this session's
        model, prompts, hooks and settings (:func:`pi_nb.compaction.navigate`)."""
        from .. import compaction as comp
        from ..compaction.settings import DEFAULT_BRANCH_SUMMARY_RESERVE

        s = self.session
        return comp.navigate(
            s.tree,
            target_id,
            summarize=summarize,
            model=s._model,
            focus=focus,
            hooks=s.hooks,
            label=label,
            prompts=s.prompts,
            window=s.window if summarize else None,
            reserve_tokens=min(DEFAULT_BRANCH_SUMMARY_RESERVE, s.reserve),
            completion=self.summary_completion(),
            accept_truncated=s.settings.accept_truncated,
            pi_release=s.settings.pi_release,
        )

    # --- shared -----------------------------------------------------------------------------------

    def ended(self, reason: str, **fields: Any) -> None:
        """Tell the listeners a compaction ended (hooks heard it from
        :func:`pi_nb.compaction.compact`). ``fields``: those of
        :class:`~pi_nb.events.CompactionEnd`; ``threshold`` is added to a result."""
        threshold = self.session.threshold if fields.get("result") is not None else None
        self.session._bus.emit(CompactionEnd(reason=reason, threshold=threshold, **fields))

    def options(self, focus: str | None) -> dict[str, Any]:
        """What every compaction of this session passes to :func:`pi_nb.compaction.compact`."""
        s = self.session
        return {
            "settings": s.settings,
            "prompts": s.prompts,
            "focus": focus,
            "hooks": s.hooks,
            "window": s.window,
            "completion": self.summary_completion(),
        }

    def summary_completion(self) -> Callable[..., Message]:
        """The model call compaction uses for summaries: same model, same extra kwargs."""
        from ..llm import call_options

        complete = self.session._complete
        kwargs = dict(self.session.llm_kwargs)

        def call(model: str, messages: Sequence[dict[str, Any]], **options: Any) -> Message:
            nonlocal complete
            if complete is None:
                from ..llm import complete
            return complete(model, messages, **call_options(kwargs, **{"stream": False, **options}))

        return call
