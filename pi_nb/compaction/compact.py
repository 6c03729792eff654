"""Compact a session, preview a compaction, summarize a branch when moving the leaf.

:func:`compact` follows Pi's manual/automatic compaction (1.3.0 and 1.6.0 alike; the
summary requests per :attr:`CompactionSettings.pi_release`): prepare the cut, let
``session_before_compact`` hooks cancel or supply the result, summarize (history, plus the
opening of a split turn), append the file lists, write the ``compaction`` entry, then
notify ``session_compact``. :func:`preview_compaction` does the same without writing.
:func:`navigate` moves the leaf like Pi's ``/tree``, optionally summarizing the branch
being left.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from ..entries import Entry, Message, iso_to_ms
from ..events import (
    CompactionEnd,
    CompactionStart,
    SessionCompact,
    SessionCompactFailed,
    SessionTreeEvent,
)
from ..hooks import (
    SESSION_BEFORE_COMPACT,
    SESSION_BEFORE_TREE,
    Hooks,
)
from ..messages import content_text
from ..options import keyword_options
from ..projection import (
    apply_edit,
    build_session_projection,
    compaction_summary_message,
    entry_messages,
)
from ..session.tree import EntryNotFoundError
from ..tokens import estimate_tokens
from .prepare import (
    CompactionPreparation,
    FileOps,
    file_ops_from_message,
    format_file_operations,
    prepare_compaction,
)
from .prompts import DEFAULT_PROMPTS, PromptSet
from .settings import (
    DEFAULT_BRANCH_SUMMARY_RESERVE,
    CompactionSettings,
    PiRelease,
    resolve_window,
)
from .summarize import Completion, SummaryKind, SummaryResult, combine_usage, generate_summary

if TYPE_CHECKING:
    from ..projection import Projection
    from ..session.tree import SessionTree

__all__ = [
    "NO_BRANCH_CONTENT",
    "NO_PRIOR_HISTORY",
    "AlreadyCompacted",
    "BranchPreparation",
    "CompactOptions",
    "CompactionCancelled",
    "CompactionError",
    "CompactionResult",
    "ContextChange",
    "NavigateOptions",
    "NavigateResult",
    "NothingToCompact",
    "PreviewOptions",
    "TreePreparation",
    "collect_branch_entries",
    "compact",
    "context_change",
    "failure_events",
    "hook_warnings",
    "navigate",
    "prepare_branch_entries",
    "preview_compaction",
    "result_figures",
    "result_warnings",
]

#: History text of a split-turn compaction that has no earlier history and no previous summary.
NO_PRIOR_HISTORY = "No prior history."
#: Branch summary text when the abandoned branch has nothing to summarize.
NO_BRANCH_CONTENT = "No content to summarize"
_FAILED = "Compaction failed"
_FAILURE_PREFIX = {
    "overflow": "Context overflow recovery failed",
    "threshold": "Auto-compaction failed",
}
_TURN_CONTEXT_RULE = "\n\n---\n\n**Turn Context (split turn):**\n\n"


class CompactionError(RuntimeError):
    """A compaction that could not be made."""


class NothingToCompact(CompactionError):
    """The branch has nothing to summarize (everything fits in the kept part)."""


class AlreadyCompacted(CompactionError):
    """The branch already ends with a compaction."""


class CompactionCancelled(CompactionError):
    """A ``session_before_compact`` hook cancelled the compaction."""


# --- figures and warnings ---------------------------------------------------------------

#: The basis of :class:`ContextChange` figures, as shown next to them.
CHANGE_BASIS = "estimated context tokens (messages, chars/4)"


@dataclass(frozen=True)
class ContextChange:
    """The context before and after a compaction, both on one basis: the summed chars/4
    estimates of the projection's messages (what ``%pi diff`` totals too). Pi's
    ``tokensBefore`` (provider usage when known) is a different basis and is not compared
    with these.

    Attributes:
        before: estimate of the projection just before the compaction.
        after: estimate of the projection right after it.
    """

    before: int
    after: int

    @property
    def delta(self) -> int:
        """after − before (positive when the context grew)."""
        return self.after - self.before

    @property
    def grew(self) -> bool:
        return self.after > self.before

    def figures(self) -> str:
        """``"866 → 1,051 tokens (estimated)"``: the before/after every surface shows."""
        return f"{self.before:,} → {self.after:,} tokens (estimated)"

    def warning(self) -> str | None:
        """The line shown when the compaction made the context larger; None otherwise."""
        if not self.grew:
            return None
        return (
            f"the compaction grew the context: {self.figures()} (+{self.delta:,}); the summary "
            "is longer than the history it replaced"
        )


def context_change(before: Sequence[Message], after: Sequence[Message]) -> ContextChange:
    """:class:`ContextChange` of two message lists (projections before and after)."""
    return ContextChange(_messages_tokens(before), _messages_tokens(after))


_FAILURE_EFFECT = {
    SESSION_BEFORE_COMPACT: "this compaction was made without it",
    SESSION_BEFORE_TREE: "the branch move was made without it",
}


def result_warnings(result: CompactionResult | NavigateResult | None) -> list[str]:
    """The ``warnings`` of a compaction / navigate result, one line each — what the magics,
    the widget and the CLI print after it."""
    return [" ".join(str(w).split()) for w in getattr(result, "warnings", None) or []]


def result_figures(result: CompactionResult) -> str:
    """The before → after line of a compaction result: :meth:`CompactionResult.figures`
    (both sides on one basis)."""
    return result.figures()


def _handler_name(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn))


def hook_warnings(hooks: Hooks | None, start: int = 0) -> list[str]:
    """One line per handler failure recorded on ``hooks`` since ``hooks.errors[start]``.

    A failing ``session_before_*`` handler means its change (pins, a custom summary …) was
    not made; a policy may say what that costs with a ``failure_effect`` attribute.
    """
    errors = hooks.errors if hooks is not None else []
    out: list[str] = []
    for record in list(errors or [])[start:]:
        event = getattr(record, "event", "?")
        handler = getattr(record, "handler", None)
        owner = getattr(handler, "__self__", None)
        effect = getattr(owner, "failure_effect", None)
        if effect is None:
            effect = _FAILURE_EFFECT.get(str(event), "only its notification was lost")
        out.append(
            f"{event} hook {_handler_name(handler)} failed ({getattr(record, 'message', record)}); "
            f"{effect}"
        )
    return out


def _error_count(hooks: Hooks | None) -> int:
    return len(hooks.errors) if hooks is not None else 0


# --- compaction -------------------------------------------------------------------------


@dataclass
class CompactionResult:
    """A compaction (written, or previewed) and how it came about.

    Attributes:
        summary: the summary text (file lists included).
        first_kept_entry_id: the first entry kept verbatim.
        tokens_before: Pi's ``tokensBefore`` (the context estimate written into the entry:
            provider usage when known, else the estimate).
        tokens_after: estimate of the projection after (sum of message estimates).
        change: before/after on one basis (estimates of the projection's messages); what
            every surface shows.
        warnings: things the user must know although the compaction was made: a hook or
            policy that failed (e.g. pins not applied), a context that grew.
        details: ``{"readFiles", "modifiedFiles"}`` (or what a hook supplied).
        usage: tokens spent on the summary calls (combined), if any.
        entry: the compaction entry (for a preview: the entry that would be written).
        preparation: the plan it was made from.
        from_hook: the result was supplied by a ``session_before_compact`` hook.
        calls: summary model calls made; chunks: conversation chunks summarized.
        budget_rule: how the summary calls' output budget was chosen
            (:attr:`~.summarize.SummaryResult.budget_rule`; "" for a hook's result).
        reason: ``"manual"``, ``"threshold"`` or ``"overflow"``.
        committed: False for a preview.
        projection: the projection after the compaction (would-be, for a preview).
    """

    summary: str
    first_kept_entry_id: str
    tokens_before: int
    tokens_after: int
    details: Any
    usage: dict[str, Any] | None
    entry: Entry
    preparation: CompactionPreparation
    from_hook: bool = False
    calls: int = 0
    chunks: int = 0
    budget_rule: str = ""
    reason: str = "manual"
    committed: bool = True
    projection: Projection | None = field(default=None, repr=False)
    change: ContextChange | None = None
    warnings: list[str] = field(default_factory=list)

    def figures(self) -> str:
        """The before → after line (:meth:`ContextChange.figures`)."""
        if self.change is None:
            return f"{self.tokens_before:,} → {self.tokens_after:,} tokens"
        return self.change.figures()

    @property
    def read_files(self) -> list[str]:
        files = self.details.get("readFiles") if isinstance(self.details, Mapping) else None
        return list(files) if isinstance(files, list) else []

    @property
    def modified_files(self) -> list[str]:
        files = self.details.get("modifiedFiles") if isinstance(self.details, Mapping) else None
        return list(files) if isinstance(files, list) else []

    def to_dict(self) -> dict[str, Any]:
        """Pi's CompactionResult fields plus pi_nb's extras (camelCase)."""
        return {
            "summary": self.summary,
            "firstKeptEntryId": self.first_kept_entry_id,
            "tokensBefore": self.tokens_before,
            "estimatedTokensAfter": self.tokens_after,
            "estimatedTokensBeforeMessages": self.change.before if self.change else None,
            "warnings": list(self.warnings),
            "details": self.details,
            "usage": self.usage,
            "fromHook": self.from_hook,
            "calls": self.calls,
            "chunks": self.chunks,
            "budgetRule": self.budget_rule,
            "reason": self.reason,
            "committed": self.committed,
        }

    def _repr_html_(self) -> str:
        esc = html.escape
        title = "Compaction" if self.committed else "Compaction preview (not written)"
        cost = ""
        if isinstance(self.usage, Mapping):
            cost = f"{self.usage.get('input', 0)} in / {self.usage.get('output', 0)} out"
        rows = [
            ("context", self.figures()),
            ("tokensBefore (Pi)", f"{self.tokens_before:,}"),
            ("first kept", self.first_kept_entry_id),
            ("split turn", "yes" if self.preparation.is_split_turn else "no"),
            (
                "source",
                "hook" if self.from_hook else f"{self.calls} call(s), {self.chunks} chunk(s)",
            ),
            ("summary usage", cost or "—"),
            ("summary budget", self.budget_rule or "—"),
            ("files read", ", ".join(self.read_files) or "—"),
            ("files modified", ", ".join(self.modified_files) or "—"),
        ]
        body = "".join(
            f"<tr><th style='text-align:left'>{esc(k)}</th><td>{esc(str(v))}</td></tr>"
            for k, v in rows
        )
        warned = "".join(
            f"<div class='pi-nb-warning' style='color:#b35900'>⚠ {esc(w)}</div>"
            for w in self.warnings
        )
        return (
            f"<div class='pi-nb-compaction'><b>{esc(title)}</b> ({esc(self.reason)})"
            f"{warned}<table>{body}</table><details><summary>summary</summary>"
            f"<pre style='white-space:pre-wrap'>{esc(self.summary)}</pre></details></div>"
        )

    def __repr__(self) -> str:
        state = "" if self.committed else " preview"
        warned = "".join(f"\n⚠ {w}" for w in self.warnings)
        return (
            f"<CompactionResult{state} {self.figures()}, "
            f"first kept {self.first_kept_entry_id}, calls={self.calls}, from_hook={self.from_hook}>"
            f"{warned}"
        )


@dataclass
class _Plan:
    summary: str
    first_kept_entry_id: str | None
    tokens_before: int
    details: Any
    usage: dict[str, Any] | None
    from_hook: bool
    preparation: CompactionPreparation
    calls: int = 0
    chunks: int = 0
    budget_rule: str = ""


def _budget_rule(results: Sequence[SummaryResult]) -> str:
    """The distinct budget rules of several summary results, in call order."""
    return ", ".join(dict.fromkeys(r.budget_rule for r in results if r.budget_rule))


def _prepare(
    tree: SessionTree, settings: CompactionSettings
) -> tuple[list[Entry], CompactionPreparation]:
    branch = tree.get_branch()
    preparation = prepare_compaction(branch, settings)
    if preparation is None:
        if branch and branch[-1].get("type") == "compaction":
            raise AlreadyCompacted("Already compacted")
        raise NothingToCompact("Nothing to compact (session too small)")
    return branch, preparation


def _supplied(value: Any, preparation: CompactionPreparation) -> _Plan:
    """A compaction a hook supplied, used verbatim."""
    if not isinstance(value, Mapping):
        raise CompactionError("session_before_compact returned a 'compaction' that is not a dict")
    summary = value.get("summary")
    first_kept = value.get("firstKeptEntryId", value.get("first_kept_entry_id"))
    tokens_before = value.get("tokensBefore", value.get("tokens_before"))
    if not isinstance(summary, str):
        raise CompactionError("session_before_compact compaction needs a string 'summary'")
    if not summary.strip():  # would drop everything before the cut from the context
        raise CompactionError("session_before_compact compaction has an empty 'summary'")
    if first_kept is not None and not isinstance(first_kept, str):
        raise CompactionError(
            "session_before_compact compaction 'firstKeptEntryId' must be a string"
        )
    if isinstance(tokens_before, bool) or not isinstance(tokens_before, int):
        raise CompactionError("session_before_compact compaction needs an integer 'tokensBefore'")
    return _Plan(
        summary=summary,
        first_kept_entry_id=first_kept,
        tokens_before=tokens_before,
        details=value.get("details"),
        usage=value.get("usage"),
        from_hook=True,
        preparation=preparation,
    )


def _summarize(
    preparation: CompactionPreparation,
    model: str,
    prompts: PromptSet,
    focus: str | None,
    window: int | None,
    completion: Completion | None,
) -> _Plan:
    """The built-in summary: history (+ turn prefix), then the file lists."""
    settings = preparation.settings
    results: list[SummaryResult] = []

    def summarize(
        messages: list[Message], kind: SummaryKind, previous: str | None = None
    ) -> SummaryResult:
        # focus is used for a turn prefix under Pi 1.6.0 only (generate_summary drops it for 1.3)
        result = generate_summary(
            messages,
            model,
            kind=kind,
            previous_summary=previous,
            reserve_tokens=settings.reserve_tokens,
            prompts=prompts,
            focus=focus,
            accept_truncated=settings.accept_truncated,
            window=window,
            completion=completion,
            pi_release=settings.pi_release,
        )
        results.append(result)
        return result

    if preparation.is_split_turn and preparation.turn_prefix_messages:
        previous = preparation.previous_summary
        history = previous if previous is not None else NO_PRIOR_HISTORY
        if preparation.messages_to_summarize:
            history = summarize(preparation.messages_to_summarize, "history", previous).text
        prefix = summarize(preparation.turn_prefix_messages, "turn_prefix")
        summary = history + _TURN_CONTEXT_RULE + prefix.text
    else:
        summary = summarize(
            preparation.messages_to_summarize, "history", preparation.previous_summary
        ).text
    details = preparation.file_ops.details()
    summary += format_file_operations(details["readFiles"], details["modifiedFiles"])
    return _Plan(
        summary=summary,
        first_kept_entry_id=preparation.first_kept_entry_id,
        tokens_before=preparation.tokens_before,
        details=details,
        usage=combine_usage(*(r.usage for r in results)),
        from_hook=False,
        preparation=preparation,
        calls=sum(r.calls for r in results),
        chunks=sum(r.chunks for r in results),
        budget_rule=_budget_rule(results),
    )


def _decide(
    branch: list[Entry], preparation: CompactionPreparation, model: str, options: Mapping[str, Any]
) -> _Plan:
    """Ask the hooks, then summarize unless a hook cancelled or supplied the result
    (``options``: a call's :class:`CompactOptions`, defaults filled)."""
    hooks: Hooks | None = options["hooks"]
    focus: str | None = options["focus"]
    if hooks is not None:
        answer = hooks.run_before_compact(
            {
                "preparation": preparation,
                "branch_entries": branch,
                "custom_instructions": focus,
                "reason": options["reason"],
                "will_retry": options["will_retry"],
            }
        )
        if answer and answer.get("cancel"):
            raise CompactionCancelled("Compaction cancelled")
        if answer and answer.get("compaction") is not None:
            return _supplied(answer["compaction"], preparation)
    prompts = options["prompts"] or DEFAULT_PROMPTS
    return _summarize(preparation, model, prompts, focus, options["window"], options["completion"])


def _entry_fields(plan: _Plan) -> tuple[str, str | None, int, Any, bool, dict[str, Any] | None]:
    """The arguments of :meth:`SessionTree.compaction_entry` for ``plan`` (written by
    :func:`compact`, drafted by :func:`preview_compaction`)."""
    return (
        plan.summary,
        plan.first_kept_entry_id,
        plan.tokens_before,
        plan.details,
        plan.from_hook,
        plan.usage,
    )


def _messages_tokens(messages: Sequence[Message]) -> int:
    return sum(estimate_tokens(m) for m in messages)


def _result(
    plan: _Plan, entry: Entry, projection: Projection, reason: str, committed: bool = True
) -> CompactionResult:
    """The result of ``plan`` written (or, ``committed=False``, to be written) as ``entry``."""
    change = context_change(plan.preparation.context_messages, projection.messages)
    grew = change.warning()
    return CompactionResult(
        summary=plan.summary,
        first_kept_entry_id=entry["firstKeptEntryId"],
        tokens_before=plan.tokens_before,
        tokens_after=_messages_tokens(projection.messages),
        details=plan.details,
        usage=plan.usage,
        entry=entry,
        preparation=plan.preparation,
        from_hook=plan.from_hook,
        calls=plan.calls,
        chunks=plan.chunks,
        budget_rule=plan.budget_rule,
        reason=reason,
        committed=committed,
        projection=projection,
        change=change,
        warnings=[grew] if grew else [],
    )


class PreviewOptions(TypedDict, total=False):
    """The keywords of :func:`preview_compaction` (see :func:`compact` for each)."""

    settings: CompactionSettings | None
    prompts: PromptSet | None
    focus: str | None
    hooks: Hooks | None
    reason: str
    window: int | None
    completion: Completion | None


class CompactOptions(PreviewOptions, total=False):
    """The keywords of :func:`compact`: a preview's, and ``will_retry`` (nothing is retried
    after a preview)."""

    will_retry: bool


#: What an option not given means (every other option: None).
_OPTION_DEFAULTS: dict[str, Any] = {"reason": "manual", "will_retry": False}


def _compact_options(function: str, options: Mapping[str, Any], family: type) -> dict[str, Any]:
    """A call's compaction options checked against ``family``, defaults filled; ``settings``
    resolved for the model later (:meth:`CompactionSettings.for_model`)."""
    keyword_options(function, options, family)  # refuses what family lacks (a preview: will_retry)
    return keyword_options(function, options, CompactOptions, _OPTION_DEFAULTS)


def compact(tree: SessionTree, model: str, **options: Unpack[CompactOptions]) -> CompactionResult:
    """Compact the current branch of ``tree`` and write the ``compaction`` entry.

    Every option is a keyword (:class:`CompactOptions`); an unknown one raises TypeError.

    Args:
        tree: the session.
        model: litellm name of the summarizing model (also selects per-model settings).
        settings: budgets (default :class:`CompactionSettings`).
        prompts: prompt texts (default :data:`~pi_nb.compaction.prompts.DEFAULT_PROMPTS`).
        focus: extra instructions for the summary ("Additional focus: …").
        hooks: ``session_before_compact`` may cancel or supply the result;
            ``session_compact`` is told about the written entry; ``compaction_start`` /
            ``compaction_end`` / ``session_compact_failed`` are emitted (for an automatic
            compaction only once there is something to compact, as in Pi).
        reason: ``"manual"``, ``"threshold"`` or ``"overflow"`` (passed to hooks).
        will_retry: passed to hooks (an overflow recovery will retry the request).
        window: the summarizing model's context window (default: litellm's table).
        completion: the model call (see :func:`~pi_nb.compaction.summarize.generate_summary`).

    Raises:
        AlreadyCompacted, NothingToCompact, CompactionCancelled, SummarizationError.
    """
    opts = _compact_options("compact", options, CompactOptions)
    settings = (opts["settings"] or CompactionSettings()).for_model(model)
    hooks: Hooks | None = opts["hooks"]
    reason: str = opts["reason"]
    mark = _error_count(hooks)
    started = False
    if reason == "manual" and hooks is not None:  # Pi: manual start precedes the checks
        hooks.emit(CompactionStart(reason=reason))
        started = True
    from_hook = False
    try:
        branch, preparation = _prepare(tree, settings)
        if not started and hooks is not None:  # automatic: only when there is work
            hooks.emit(CompactionStart(reason=reason))
            started = True
        plan = _decide(branch, preparation, model, opts)
        from_hook = plan.from_hook
        entry = tree.append_compaction(*_entry_fields(plan))
        projection = tree.projection()
        result = _result(plan, entry, projection, reason)
        # Hook failures so far (a policy that did not run): on the result before
        # compaction_end listeners see it.
        result.warnings[:0] = hook_warnings(hooks, mark)
        mark = _error_count(hooks)
    except Exception as exc:
        if hooks is not None and started:
            aborted = isinstance(exc, CompactionCancelled)
            message = None if aborted else f"{_FAILURE_PREFIX.get(reason, _FAILED)}: {exc}"
            for event in failure_events(reason, message, aborted=aborted, from_extension=from_hook):
                hooks.emit(event)
        raise
    if hooks is not None:
        hooks.emit(
            SessionCompact(
                compaction_entry=entry,
                from_extension=plan.from_hook,
                reason=reason,
                will_retry=opts["will_retry"],
            )
        )
        hooks.emit(CompactionEnd(reason=reason, result=result, will_retry=opts["will_retry"]))
        result.warnings += hook_warnings(hooks, mark)
    return result


def failure_events(
    reason: str, error_message: str | None, *, aborted: bool = False, from_extension: bool = False
) -> tuple[CompactionEnd, SessionCompactFailed]:
    """The ``compaction_end`` and ``session_compact_failed`` of a compaction that did not
    happen (nothing is retried after it): from :func:`compact`, and from a session whose
    overflow recovery gives up without compacting."""
    return (
        CompactionEnd(reason=reason, aborted=aborted, error_message=error_message),
        SessionCompactFailed(
            reason=reason,
            error_message=error_message,
            aborted=aborted,
            will_retry=False,
            from_extension=from_extension,
        ),
    )


def preview_compaction(
    tree: SessionTree, model: str, **options: Unpack[PreviewOptions]
) -> CompactionResult:
    """Everything :func:`compact` does except writing: the summary calls are made and
    ``session_before_compact`` hooks run, but nothing is appended and no notification is
    emitted. ``result.entry`` is the entry that would be written and ``result.projection``
    the projection it would give (``result.committed`` is False). The keywords are
    :func:`compact`'s but ``will_retry``.
    """
    opts = _compact_options("preview_compaction", options, PreviewOptions)
    settings = (opts["settings"] or CompactionSettings()).for_model(model)
    hooks: Hooks | None = opts["hooks"]
    reason: str = opts["reason"]
    mark = _error_count(hooks)
    branch, preparation = _prepare(tree, settings)
    plan = _decide(branch, preparation, model, opts)
    try:
        entry = tree.compaction_entry(*_entry_fields(plan), draft=True)
    except EntryNotFoundError as exc:  # a hook's firstKeptEntryId: a compaction error here
        raise CompactionError(str(exc)) from exc
    entries = [*branch, entry]
    projection = build_session_projection(entries, entry["id"])
    result = _result(plan, entry, projection, reason, committed=False)
    result.warnings[:0] = hook_warnings(hooks, mark)
    return result


# --- branch summaries -------------------------------------------------------------------


def collect_branch_entries(
    tree: SessionTree, old_leaf_id: str | None, target_id: str
) -> tuple[list[Entry], str | None]:
    """Entries of the branch being left: from the old leaf back to (not including) the
    deepest entry shared with the target's path, oldest first; plus that common ancestor."""
    if not old_leaf_id:
        return [], None
    old_path = {e["id"] for e in tree.get_branch(old_leaf_id)}
    common: str | None = None
    for entry in reversed(tree.get_branch(target_id)):
        if entry["id"] in old_path:
            common = entry["id"]
            break
    entries: list[Entry] = []
    current: str | None = old_leaf_id
    seen: set[str] = set()
    while current and current != common and current not in seen:
        seen.add(current)
        entry = tree.get(current)
        if entry is None:
            break
        entries.append(entry)
        parent = entry.get("parentId")
        current = parent if isinstance(parent, str) else None
    entries.reverse()
    return entries, common


@dataclass
class BranchPreparation:
    """What a branch summary reads: messages (oldest first), file ops, estimated tokens."""

    messages: list[Message]
    file_ops: FileOps
    total_tokens: int


def _branch_message(entry: Entry, edit: Entry | None = None) -> Message | None:
    """The message a branch summary reads for ``entry``, with its context ``edit`` (Pi 1.6.0:
    a null replacement drops it, a replacement swaps its content)."""
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        if not isinstance(message, dict) or message.get("role") == "toolResult":
            return None
        if edit is None:
            return message
    if edit is not None and kind in ("message", "custom_message"):
        edited = apply_edit(entry_messages(entry), edit)
        return edited[0] if edited else None
    if kind == "custom_message":
        content = entry.get("content")
        message = {
            "role": "custom",
            "customType": entry.get("customType"),
            "content": [] if content is None else content,
            "display": entry.get("display"),
            "timestamp": iso_to_ms(entry.get("timestamp")),
        }
        if "details" in entry:
            message["details"] = entry["details"]
        return message
    if kind == "branch_summary":
        return {
            "role": "branchSummary",
            "summary": entry.get("summary") or "",
            "fromId": entry.get("fromId"),
            "timestamp": iso_to_ms(entry.get("timestamp")),
        }
    if kind == "compaction":
        return compaction_summary_message(entry)
    return None


def prepare_branch_entries(
    entries: Sequence[Entry], budget: int = 0, *, pi_release: PiRelease = "1.6"
) -> BranchPreparation:
    """Pick what a branch summary reads, newest first, within ``budget`` tokens (0 = all).

    Tool results are skipped (their call says what happened); compaction and branch
    summaries become their summary messages and may still be taken past the budget while
    the total is under 90 % of it. File ops come from every earlier (non-hook) branch
    summary's details and from the tool calls of the messages walked. Under
    ``pi_release="1.6"`` the latest ``context_edit`` per target among ``entries`` is
    applied to message and custom_message entries (a null replacement drops the entry), as
    in Pi 1.6.0; Pi 1.3.0 summarized the unedited messages.
    """
    ops = FileOps()
    for entry in entries:
        if entry.get("type") == "branch_summary" and not entry.get("fromHook"):
            ops.add_details(entry.get("details"))
    edits: dict[str, Entry] = {}
    if pi_release == "1.6":
        for entry in entries:
            if entry.get("type") == "context_edit" and isinstance(entry.get("targetId"), str):
                edits[entry["targetId"]] = entry
    messages: list[Message] = []
    total = 0
    for entry in reversed(entries):
        message = _branch_message(entry, edits.get(str(entry.get("id"))))
        if message is None:
            continue
        file_ops_from_message(message, ops)
        tokens = estimate_tokens(message)
        if budget > 0 and total + tokens > budget:
            if entry.get("type") in ("compaction", "branch_summary") and total < budget * 0.9:
                messages.insert(0, message)
                total += tokens
            break
        messages.insert(0, message)
        total += tokens
    return BranchPreparation(messages, ops, total)


@dataclass
class TreePreparation:
    """The ``session_before_tree`` payload's ``preparation``."""

    target_id: str
    old_leaf_id: str | None
    common_ancestor_id: str | None
    entries_to_summarize: list[Entry]
    user_wants_summary: bool
    custom_instructions: str | None
    replace_instructions: bool
    label: str | None


@dataclass
class NavigateResult:
    """What :func:`navigate` did.

    Attributes:
        cancelled: a hook cancelled (nothing changed).
        editor_text: the text of a user / custom message target (to edit and resend).
        summary_entry: the ``branch_summary`` entry written, if any.
        old_leaf_id / new_leaf_id: the leaf before and after.
        from_hook: the summary came from a ``session_before_tree`` hook.
        usage, calls, chunks: cost of the summary calls.
        truncated: summary calls whose reply hit the cap and was kept (``accept_truncated``).
        budget_rule: how the summary's output budget was chosen (see
            :attr:`~.summarize.SummaryResult.budget_rule`).
        warnings: hook failures the user must know about (see :func:`hook_warnings`).
    """

    cancelled: bool = False
    editor_text: str | None = None
    summary_entry: Entry | None = None
    old_leaf_id: str | None = None
    new_leaf_id: str | None = None
    from_hook: bool | None = None
    usage: dict[str, Any] | None = None
    calls: int = 0
    chunks: int = 0
    truncated: int = 0
    budget_rule: str = ""
    warnings: list[str] = field(default_factory=list)


class NavigateOptions(TypedDict, total=False):
    """The keywords of :func:`navigate` (see it for each)."""

    summarize: bool
    model: str | None
    focus: str | None
    replace_instructions: bool
    hooks: Hooks | None
    label: str | None
    prompts: PromptSet | None
    window: int | None
    reserve_tokens: int
    completion: Completion | None
    accept_truncated: bool
    pi_release: PiRelease


#: What a navigate option not given means (every other option: None).
_NAVIGATE_DEFAULTS: dict[str, Any] = {
    "summarize": False,
    "replace_instructions": False,
    "reserve_tokens": DEFAULT_BRANCH_SUMMARY_RESERVE,
    "accept_truncated": False,
    "pi_release": "1.6",
}


def navigate(
    tree: SessionTree, target_id: str, **options: Unpack[NavigateOptions]
) -> NavigateResult:
    """Move the leaf to ``target_id`` like Pi's ``/tree``, optionally summarizing the branch left.

    A user message or custom_message target puts the leaf on its parent (its text comes
    back as ``editor_text``); any other target becomes the leaf. With ``summarize`` the
    abandoned entries (old leaf back to the common ancestor) are summarized into a
    ``branch_summary`` child of the new leaf (``fromId`` = the abandoned leaf).
    ``session_before_tree`` hooks may cancel or supply the summary; ``session_tree`` is
    notified afterwards. Navigating to the current leaf does nothing.

    Every option is a keyword (:class:`NavigateOptions`); an unknown one raises TypeError.

    Args:
        summarize: summarize the branch left (default False; needs ``model``).
        model: litellm name of the summarizing model.
        focus: extra instructions for the summary.
        replace_instructions: ``focus`` replaces the default branch instructions.
        hooks: ``session_before_tree`` / ``session_tree`` (may change ``focus``,
            ``replace_instructions`` and ``label``).
        label: a label for the new leaf's entry (the summary entry when one is written).
        prompts: prompt texts (default :data:`~pi_nb.compaction.prompts.DEFAULT_PROMPTS`).
        window: the summarizing model's context window (default: litellm's table).
        reserve_tokens: kept free of the window for the summary (default
            :data:`~pi_nb.compaction.settings.DEFAULT_BRANCH_SUMMARY_RESERVE`).
        completion: the model call (see :func:`~pi_nb.compaction.summarize.generate_summary`).
        accept_truncated: keep a branch summary that hit its token cap (as
            :attr:`CompactionSettings.accept_truncated` does for compactions).
        pi_release: ``"1.6"`` (default) or ``"1.3"`` (:attr:`CompactionSettings.pi_release`):
            the summary's output budget and whether context edits apply to the summarized
            entries.

    Raises:
        SummarizationError: the branch summary failed (nothing is written, the leaf stays).
    """
    opts = keyword_options("navigate", options, NavigateOptions, _NAVIGATE_DEFAULTS)
    hooks: Hooks | None = opts["hooks"]
    summarize: bool = opts["summarize"]
    model: str | None = opts["model"]
    # a session_before_tree hook may change these three
    focus, replace_instructions, label = opts["focus"], opts["replace_instructions"], opts["label"]
    old_leaf = tree.leaf_id
    mark = _error_count(hooks)
    if target_id == old_leaf:
        return NavigateResult(old_leaf_id=old_leaf, new_leaf_id=old_leaf)
    if summarize and not model:
        raise ValueError("No model available for summarization")
    target = tree.entry(target_id)
    entries, common = collect_branch_entries(tree, old_leaf, target_id)
    preparation = TreePreparation(
        target_id, old_leaf, common, entries, summarize, focus, replace_instructions, label
    )

    supplied: Mapping[str, Any] | None = None
    if hooks is not None:
        answer = hooks.run_before_tree({"preparation": preparation})
        if answer and answer.get("cancel"):
            return NavigateResult(
                cancelled=True,
                old_leaf_id=old_leaf,
                new_leaf_id=old_leaf,
                warnings=hook_warnings(hooks, mark),
            )
        if answer:
            if answer.get("summary") and summarize:
                supplied = answer["summary"]
            for key, alt in (("customInstructions", "custom_instructions"),):
                if key in answer or alt in answer:
                    focus = answer.get(key, answer.get(alt))
            if "replaceInstructions" in answer or "replace_instructions" in answer:
                replace_instructions = bool(
                    answer.get("replaceInstructions", answer.get("replace_instructions"))
                )
            if "label" in answer:
                label = answer["label"]

    result = NavigateResult(old_leaf_id=old_leaf)
    summary_text: str | None = None
    details: Any = None
    usage: dict[str, Any] | None = None
    from_hook = False
    if supplied is not None:
        if not isinstance(supplied, Mapping) or not isinstance(supplied.get("summary"), str):
            raise CompactionError("session_before_tree 'summary' needs a string 'summary'")
        if not supplied["summary"].strip():
            raise CompactionError("session_before_tree 'summary' is empty")
        summary_text = supplied["summary"]
        details = supplied.get("details")
        usage = supplied.get("usage")
        from_hook = True
    elif summarize and entries:
        assert model is not None
        summarizer_window = resolve_window(model, opts["window"])
        prepared = prepare_branch_entries(
            entries, summarizer_window - opts["reserve_tokens"], pi_release=opts["pi_release"]
        )
        details = prepared.file_ops.details()
        if not prepared.messages:
            summary_text = NO_BRANCH_CONTENT
        else:
            prompts = opts["prompts"] or DEFAULT_PROMPTS
            generated = generate_summary(
                prepared.messages,
                model,
                prompts=prompts,
                focus=focus,
                kind="branch",
                window=summarizer_window,
                replace_instructions=replace_instructions,
                completion=opts["completion"],
                accept_truncated=opts["accept_truncated"],
                pi_release=opts["pi_release"],
            )
            summary_text = (
                prompts.branch_preamble
                + generated.text
                + format_file_operations(details["readFiles"], details["modifiedFiles"])
            )
            usage = generated.usage
            result.calls, result.chunks = generated.calls, generated.chunks
            result.truncated = generated.truncated
            result.budget_rule = generated.budget_rule

    new_leaf: str | None
    if (
        target.get("type") == "message"
        and isinstance(target.get("message"), dict)
        and (target["message"].get("role") == "user")
    ):
        new_leaf = target.get("parentId")
        result.editor_text = content_text(target["message"].get("content"), "")
    elif target.get("type") == "custom_message":
        new_leaf = target.get("parentId")
        result.editor_text = content_text(target.get("content"), "")
    else:
        new_leaf = target_id

    if summary_text:
        entry = tree.branch_with_summary(new_leaf, summary_text, details, from_hook, usage)
        result.summary_entry = entry
        if label:
            tree.append_label(entry["id"], label)
    elif new_leaf is None:
        tree.reset_leaf()
    else:
        tree.branch(new_leaf)
    if label and not summary_text:
        tree.append_label(target_id, label)

    result.new_leaf_id = tree.leaf_id
    result.usage = usage
    result.from_hook = from_hook if summary_text else None
    if hooks is not None:
        hooks.emit(
            SessionTreeEvent(
                new_leaf_id=tree.leaf_id,
                old_leaf_id=old_leaf,
                summary_entry=result.summary_entry,
                from_extension=result.from_hook,
            )
        )
    result.warnings = hook_warnings(hooks, mark)
    return result
