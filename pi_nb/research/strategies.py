"""Compaction strategies behind one interface, each on its own branch from the same fork.

A :class:`Compactor` turns the current branch of a session into entries appended on a new
branch that starts at a fork point (the current leaf by default). Running several
strategies with the same ``fork_id`` therefore compares them on identical history, in one
file, without any of them seeing the others' entries.

Strategies:

- :class:`PiSummary` — Pi's structured summary (the default engine, :func:`pi_nb.compaction
  .compact`): incremental (``S_t = Update(S_{t-1}, ΔH_t)``), or ``incremental=False`` to
  summarize the whole original history from scratch every time;
- :class:`ObservationMasking` — old tool results replaced by short placeholders through
  context edits, the last ``keep_last`` kept verbatim (no model call);
- :class:`SlidingWindow` — truncation: a compaction entry with a one-line note that keeps
  the most recent ``keep_tokens`` tokens;
- :class:`Hybrid` — mask first, then summarize only when the context is still over budget;
- :class:`Extractive` — the non-LLM extractive summary of :mod:`pi_nb.models.extractive`;
- :func:`callable_strategy` — any ``fn(messages, previous_summary, instructions) -> summary``;
- :class:`PinnedSummary` (``"pinned"``) and :class:`RelevancePruning` (``"prune"``) — the
  context policies of :mod:`pi_nb.policies` (pins, relevance pruning) as strategies.

:func:`get_strategy` builds one from a short spec (``"mask:5"``, ``"window:keep_tokens=4000"``).
"""

from __future__ import annotations

import html
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypedDict, Unpack, runtime_checkable

from ..compaction import (
    DEFAULT_PROMPTS,
    CompactionError,
    CompactionPreparation,
    CompactionSettings,
    FileOps,
    PromptSet,
    compact,
    format_file_operations,
    generate_summary,
    prepare_compaction,
    resolve_window,
    serialize_conversation,
)
from ..compaction.prepare import file_ops_from_message
from ..entries import Entry, Message, js_len
from ..hooks import CONTEXT, Event, Hooks
from ..messages import content_text, convert_to_llm
from ..models.extractive import extractive_summary
from ..options import keyword_options
from ..policies.pins import PinPolicy, pin
from ..policies.pruning import RelevancePruner
from ..projection import Projection, apply_edit, entry_messages
from ..tokens import estimate_tokens

if TYPE_CHECKING:
    from ..session.tree import SessionTree

__all__ = [
    "DEFAULT_STRATEGIES",
    "STRATEGIES",
    "CallableStrategy",
    "Compactor",
    "Extractive",
    "Hybrid",
    "ObservationMasking",
    "PiSummary",
    "PinnedSummary",
    "RelevancePruning",
    "SlidingWindow",
    "Strategy",
    "StrategyOptions",
    "StrategyRequest",
    "StrategyResult",
    "StrategyRun",
    "callable_strategy",
    "constraint_sentences",
    "context_size",
    "get_strategy",
    "prepare_branch",
    "strategy_key",
    "strategy_settings",
    "summarized_span",
]

#: Summarize-with-this-function signature accepted by :func:`callable_strategy`.
SummaryFn = Callable[[list[Message], "str | None", str], Any]


# --- results ------------------------------------------------------------------------------


def _check_count(owner: str, name: str, value: Any, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{owner}: {name} must be a non-negative integer, not {value!r}")


def context_size(tree: SessionTree, leaf_id: str | None) -> int:
    """Estimated tokens of the projection at ``leaf_id``: the sum of Pi's per-message
    ``ceil(chars / 4)`` (no provider usage, so every strategy is measured the same way)."""
    if leaf_id is None:
        return 0
    cache = tree.token_cache
    return sum(cache.estimate(m) for m in tree.projection(leaf_id).messages)


def text_tokens(text: str | None) -> int:
    """``ceil(chars / 4)`` of a text (0 for None)."""
    return math.ceil(js_len(text) / 4) if text else 0


@dataclass
class StrategyResult:
    """What one strategy did to one session.

    Attributes:
        strategy: the strategy's name.
        fork_id: the entry the strategy's branch starts from.
        leaf_id: the leaf of the strategy's branch (``fork_id`` when nothing was done).
        entries: the entries the strategy appended, in order.
        compacted: False when there was nothing to do.
        tokens_before / tokens_after: :func:`context_size` at the fork and at the leaf.
        summary: the summary text written, if any.
        calls: model calls made; usage: their combined usage (Pi's shape, cost included).
        wall_time: seconds spent.
        details: strategy-specific facts (masked entry ids, first kept id, …).
        note: why nothing was done, when nothing was.
        tree: the session the branch lives in.
        model: the model the calls were made with (what :attr:`cost` prices them as).
    """

    strategy: str
    fork_id: str | None
    leaf_id: str | None
    entries: list[Entry] = field(default_factory=list)
    compacted: bool = False
    tokens_before: int = 0
    tokens_after: int = 0
    summary: str | None = None
    calls: int = 0
    usage: dict[str, Any] | None = None
    wall_time: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)
    note: str | None = None
    tree: SessionTree | None = field(default=None, repr=False, compare=False)
    model: str | None = None

    @property
    def summary_tokens(self) -> int:
        return text_tokens(self.summary)

    @property
    def compression_ratio(self) -> float:
        """tokens_before / tokens_after (1.0 when nothing changed)."""
        return self.tokens_before / self.tokens_after if self.tokens_after else math.inf

    @property
    def cost(self) -> float:
        """USD the calls cost (:func:`~pi_nb.llm.usage_cost` of :attr:`usage` as
        :attr:`model`): 0.0 when no call was made, NaN when the price is unknown
        (:attr:`cost_note` says why) — never a made-up 0.0."""
        return self._priced()[0]

    @property
    def cost_note(self) -> str | None:
        """Why :attr:`cost` is NaN (or how cached input was priced); None otherwise."""
        return self._priced()[1]

    def _priced(self) -> tuple[float, str | None]:
        if not self.calls:
            return 0.0, None  # no model call: nothing spent
        if not self.model:
            return math.nan, "the result names no model: cost unknown (NaN)"
        from ..llm import usage_cost

        return usage_cost(self.model, self.usage)

    @property
    def projection(self) -> Projection:
        """The context after the strategy (the projection at ``leaf_id``)."""
        if self.tree is None:
            raise ValueError("this result has no tree attached")
        return self.tree.projection(self.leaf_id)

    def to_dict(self) -> dict[str, Any]:
        usage = self.usage or {}
        cost, cost_note = self._priced()  # one price lookup for both fields
        return {
            "strategy": self.strategy,
            "compacted": self.compacted,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "compression_ratio": self.compression_ratio,
            "summary_tokens": self.summary_tokens,
            "model_calls": self.calls,
            "input_tokens": int(usage.get("input", 0) or 0) + int(usage.get("cacheRead", 0) or 0),
            "output_tokens": int(usage.get("output", 0) or 0),
            "cost": cost,
            "cost_note": cost_note,
            "wall_time_s": self.wall_time,
            "fork_id": self.fork_id,
            "leaf_id": self.leaf_id,
            "note": self.note,
        }

    def _repr_html_(self) -> str:
        esc = html.escape
        rows = "".join(
            f"<tr><th style='text-align:left'>{esc(k)}</th><td>{esc(str(v))}</td></tr>"
            for k, v in self.to_dict().items()
        )
        summary = (
            f"<details><summary>summary</summary><pre style='white-space:pre-wrap'>"
            f"{esc(self.summary)}</pre></details>"
            if self.summary
            else ""
        )
        return f"<div class='pi-nb-strategy'><b>{esc(self.strategy)}</b><table>{rows}</table>{summary}</div>"


# --- the protocol ---------------------------------------------------------------------------


class StrategyOptions(TypedDict, total=False):
    """The keywords of :meth:`Compactor.compact` besides ``fork_id``: the summarizing
    ``model`` (required unless the strategy calls none), its ``settings`` (default
    :class:`CompactionSettings`), ``prompts``, ``completion`` (the model call) and
    ``window``. A built-in strategy receives them as a :class:`StrategyRequest`."""

    model: str | None
    settings: CompactionSettings | None
    prompts: PromptSet | None
    completion: Callable[..., Message] | None
    window: int | None


@dataclass(frozen=True)
class StrategyRequest:
    """The keyword arguments of one :meth:`Compactor.compact` call (:class:`StrategyOptions`,
    defaults filled), as the built-in strategies receive them (:meth:`Strategy.apply`)."""

    model: str
    settings: CompactionSettings | None = None
    prompts: PromptSet | None = None
    completion: Callable[..., Message] | None = None
    window: int | None = None

    @property
    def model_settings(self) -> CompactionSettings:
        """``settings`` (default :class:`CompactionSettings`) for ``model``."""
        return strategy_settings(self.settings, self.model)

    def summarizer(self) -> dict[str, Any]:
        """The summarizing model's keywords (``model``, ``prompts``, ``window``,
        ``completion``), as :func:`~pi_nb.compaction.compact`, :func:`generate_summary`,
        :class:`~pi_nb.policies.pins.PinPolicy` and :meth:`Compactor.compact` take them."""
        return {
            "model": self.model,
            "prompts": self.prompts,
            "window": self.window,
            "completion": self.completion,
        }


@runtime_checkable
class Compactor(Protocol):
    """A compaction strategy: appends its entries on its own branch from ``fork_id``.

    ``compact`` moves the tree's leaf to ``fork_id`` (default: the current leaf), appends,
    and leaves the leaf at the end of its branch (``result.leaf_id``).
    """

    name: str

    def compact(
        self, tree: SessionTree, *, fork_id: str | None = None, **request: Unpack[StrategyOptions]
    ) -> StrategyResult: ...


class Strategy(Compactor):
    """The base of the built-in strategies: :meth:`compact` starts the :class:`StrategyRun`
    at the fork and hands the call's keywords, as a :class:`StrategyRequest`, to
    :meth:`apply`, which each strategy implements."""

    #: Entry types that make the result ``compacted`` (None: any appended entry does).
    changes: ClassVar[tuple[str, ...] | None] = None
    #: Whether ``compact`` requires ``model=`` (the strategies that call no model do not).
    needs_model: ClassVar[bool] = True

    def compact(
        self, tree: SessionTree, *, fork_id: str | None = None, **request: Unpack[StrategyOptions]
    ) -> StrategyResult:
        function = f"{type(self).__name__}.compact"
        options = keyword_options(function, request, StrategyOptions)
        model = options["model"]
        if model is None:
            if self.needs_model:  # as when ``model`` was a required keyword
                raise TypeError(f"{function}() missing required keyword argument: 'model'")
            model = options["model"] = ""
        run = StrategyRun(self.name, tree, fork_id, changes=self.changes)
        result = self.apply(run, StrategyRequest(**options))
        if result.model is None and model:
            result.model = model  # the built-in strategies call request.model
        return result

    def apply(self, run: StrategyRun, request: StrategyRequest) -> StrategyResult:
        """Do the strategy on ``run.tree`` (already at the fork); return ``run.result(…)``."""
        raise NotImplementedError


def strategy_key(strategy: Any) -> str:
    """A stable text identifying a strategy and its parameters (for caches)."""
    parts = [str(getattr(strategy, "name", type(strategy).__name__))]
    if hasattr(strategy, "__dataclass_fields__"):
        for f in fields(strategy):
            value = getattr(strategy, f.name)
            if callable(value):
                value = (
                    f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', value)}"
                )
            parts.append(f"{f.name}={value!r}")
    return "|".join(parts)


class StrategyRun:
    """Book-keeping shared by the strategies: fork, timing, appended entries.

    ``changes``: the entry types that make the result ``compacted`` when the caller does not
    say (None: any appended entry does).
    """

    def __init__(
        self,
        name: str,
        tree: SessionTree,
        fork_id: str | None,
        changes: tuple[str, ...] | None = None,
    ) -> None:
        fork = fork_id if fork_id is not None else tree.leaf_id
        if fork is None:
            raise ValueError("the session is empty: nothing to compact")
        tree.branch(fork)
        self.name = name
        self.tree = tree
        self.fork = fork
        self.changes = changes
        self.start = len(tree)
        self.started = time.perf_counter()
        self.tokens_before = context_size(tree, fork)

    def result(self, **kwargs: Any) -> StrategyResult:
        tree = self.tree
        entries = list(tree.entries[self.start :])
        leaf = tree.leaf_id
        compacted = kwargs.pop("compacted", None)
        if compacted is None:
            if self.changes is None:
                compacted = bool(entries)
            else:
                compacted = any(e.get("type") in self.changes for e in entries)
        return StrategyResult(
            strategy=self.name,
            fork_id=self.fork,
            leaf_id=leaf,
            entries=entries,
            compacted=compacted,
            tokens_before=self.tokens_before,
            tokens_after=context_size(tree, leaf),
            wall_time=time.perf_counter() - self.started,
            tree=tree,
            **kwargs,
        )


def strategy_settings(settings: CompactionSettings | None, model: str) -> CompactionSettings:
    return (settings or CompactionSettings()).for_model(model)


def prepare_branch(tree: SessionTree, settings: CompactionSettings) -> CompactionPreparation | None:
    return prepare_compaction(tree.get_branch(), settings)


def _file_lists(preparation: CompactionPreparation) -> tuple[dict[str, list[str]], str]:
    details = preparation.file_ops.details()
    return details, format_file_operations(details["readFiles"], details["modifiedFiles"])


def summarized_span(preparation: CompactionPreparation) -> list[Message]:
    """Everything the preparation would summarize (history, then a split turn's prefix)."""
    return [*preparation.messages_to_summarize, *preparation.turn_prefix_messages]


# --- Pi's structured summary -------------------------------------------------------------------


@dataclass
class PiSummary(Strategy):
    """Pi's structured six-section summary (the default compaction engine).

    Args:
        incremental: update the previous summary with the new history (Pi's behaviour);
            False summarizes the whole original history before the cut from scratch
            (ignoring earlier summaries) at every compaction.
        focus: extra instructions ("Additional focus: …").
    """

    incremental: bool = True
    focus: str | None = None

    @property
    def name(self) -> str:
        return "pi" if self.incremental else "pi-scratch"

    def apply(self, run: StrategyRun, request: StrategyRequest) -> StrategyResult:
        settings = request.model_settings
        if not self.incremental:
            return self._scratch(run, request, settings)
        try:
            done = compact(run.tree, settings=settings, focus=self.focus, **request.summarizer())
        except CompactionError as exc:  # nothing to compact, already compacted
            return run.result(note=str(exc))
        return run.result(
            summary=done.summary,
            calls=done.calls,
            usage=done.usage,
            details={"firstKeptEntryId": done.first_kept_entry_id, "chunks": done.chunks},
        )

    def _scratch(
        self, run: StrategyRun, request: StrategyRequest, settings: CompactionSettings
    ) -> StrategyResult:
        tree = run.tree
        preparation = prepare_branch(tree, settings)
        if preparation is None:
            return run.result(note="Nothing to compact")
        messages = original_history(tree.get_branch(), preparation.first_kept_entry_id)
        ops = FileOps(tools=preparation.file_ops.tools)  # an imported tree's file tools too
        for message in messages:
            file_ops_from_message(message, ops)
        generated = generate_summary(
            messages,
            reserve_tokens=settings.reserve_tokens,
            focus=self.focus,
            pi_release=settings.pi_release,
            **request.summarizer(),
        )
        details = ops.details()
        summary = generated.text + format_file_operations(
            details["readFiles"], details["modifiedFiles"]
        )
        return _summary_at_cut(run, preparation, summary, generated.usage, generated.calls, details)


def _summary_at_cut(
    run: StrategyRun,
    preparation: CompactionPreparation,
    summary: str,
    usage: dict[str, Any] | None,
    calls: int,
    details: dict[str, Any],
) -> StrategyResult:
    """Append the compaction entry with ``summary`` at Pi's cut (``details`` plus the
    strategy's name) and return the run's result."""
    run.tree.append_compaction(
        summary,
        preparation.first_kept_entry_id,
        preparation.tokens_before,
        {**details, "strategy": run.name},
        None,
        usage,
    )
    return run.result(
        summary=summary,
        calls=calls,
        usage=usage,
        details={"firstKeptEntryId": preparation.first_kept_entry_id},
    )


def original_history(branch: Sequence[Entry], first_kept_id: str) -> list[Message]:
    """The messages of a branch before ``first_kept_id`` as first written — compaction
    summaries left out, the latest context edit of each message applied, no system
    messages: what a from-scratch summary reads."""
    edits = {
        e["targetId"]: e
        for e in branch
        if e.get("type") == "context_edit" and isinstance(e.get("targetId"), str)
    }
    out: list[Message] = []
    for entry in branch:
        if entry["id"] == first_kept_id:
            break
        if entry.get("type") in ("compaction", "context_edit"):
            continue
        for message in apply_edit(entry_messages(entry), edits.get(entry["id"])):
            if message.get("role") != "system":
                out.append(message)
    return out


# --- observation masking ------------------------------------------------------------------------


MASK_PLACEHOLDER = (
    "[{tool} output omitted to save context ({tokens} tokens); run it again if needed]"
)


@dataclass
class ObservationMasking(Strategy):
    """Replace old tool results by placeholders (context edits); keep the last ``keep_last``.

    Assistant reasoning and tool calls stay; only observations are masked (JetBrains'
    "observation masking"). A result already edited is left alone, and a result shorter
    than its placeholder is not masked. No model call.

    Args:
        keep_last: how many of the most recent tool results stay verbatim.
        placeholder: the replacement text (``{tool}`` and ``{tokens}`` are filled in).
    """

    keep_last: int = 3
    placeholder: str = MASK_PLACEHOLDER
    name: str = field(default="mask", init=False)
    needs_model = False

    def __post_init__(self) -> None:
        _check_count("mask", "keep_last", self.keep_last)

    def apply(self, run: StrategyRun, request: StrategyRequest) -> StrategyResult:
        masked, kept = mask_tool_results(run.tree, self.keep_last, self.placeholder)
        return run.result(details={"masked": masked, "kept": kept})


def mask_tool_results(
    tree: SessionTree, keep_last: int, placeholder: str = MASK_PLACEHOLDER
) -> tuple[list[str], list[str]]:
    """Mask every visible tool result but the last ``keep_last`` on the current branch.

    Returns (masked entry ids, ids of results kept verbatim).
    """
    results = [
        pe
        for pe in tree.projection().entries
        if pe.messages
        and pe.entry.get("type") == "message"
        and pe.messages[0].get("role") == "toolResult"
    ]
    keep = results[len(results) - keep_last :] if keep_last > 0 else []
    kept = [pe.id for pe in keep]
    masked: list[str] = []
    for pe in results[: len(results) - len(keep)]:
        if pe.edit is not None:
            continue
        message = pe.messages[0]
        tokens = estimate_tokens(message)
        text = placeholder.format(tool=message.get("toolName") or "tool", tokens=tokens)
        if text_tokens(text) >= tokens:
            kept.append(pe.id)
            continue
        tree.append_context_edit(pe.id, {"content": text})
        masked.append(pe.id)
    return masked, kept


# --- truncation ------------------------------------------------------------------------------


@dataclass
class SlidingWindow(Strategy):
    """Truncation: keep the most recent ``keep_tokens`` tokens, drop the rest.

    Written as a compaction entry whose summary is one line saying what was dropped (no
    model call); the cut follows Pi's rules (never between a tool call and its result).
    """

    keep_tokens: int = 2000
    name: str = field(default="window", init=False)
    needs_model = False

    def __post_init__(self) -> None:
        _check_count("window", "keep_tokens", self.keep_tokens)

    def apply(self, run: StrategyRun, request: StrategyRequest) -> StrategyResult:
        tree = run.tree
        settings = replace(request.model_settings, keep_recent_tokens=self.keep_tokens)
        preparation = prepare_branch(tree, settings)
        if preparation is None:
            return run.result(note="Nothing to compact")
        dropped = summarized_span(preparation)
        tokens = sum(estimate_tokens(m) for m in dropped)
        summary = (
            f"[{len(dropped)} earlier messages (about {tokens} tokens) were dropped to fit "
            f"the context window; only the most recent ~{self.keep_tokens} tokens are kept.]"
        )
        tree.append_compaction(
            summary,
            preparation.first_kept_entry_id,
            preparation.tokens_before,
            {"strategy": self.name, "droppedMessages": len(dropped), "droppedTokens": tokens},
            True,
        )
        return run.result(
            summary=summary,
            details={
                "firstKeptEntryId": preparation.first_kept_entry_id,
                "droppedMessages": len(dropped),
            },
        )


# --- hybrid ------------------------------------------------------------------------------------


@dataclass
class Hybrid(Strategy):
    """Mask old observations first; summarize (Pi's engine) only if still over budget.

    Args:
        keep_last: tool results kept verbatim by the masking step.
        budget: context size (tokens, :func:`context_size`) to get under; default
            ``window − reserve_tokens`` of the model.
        incremental: passed to :class:`PiSummary`.
    """

    keep_last: int = 3
    budget: int | None = None
    incremental: bool = True
    name: str = field(default="hybrid", init=False)

    def __post_init__(self) -> None:
        _check_count("hybrid", "keep_last", self.keep_last)
        _check_count("hybrid", "budget", self.budget, optional=True)

    def apply(self, run: StrategyRun, request: StrategyRequest) -> StrategyResult:
        tree = run.tree
        masked, kept = mask_tool_results(tree, self.keep_last)
        settings = request.model_settings
        budget = self.budget
        if budget is None:
            budget = resolve_window(request.model, request.window) - settings.reserve_tokens
        after_mask = context_size(tree, tree.leaf_id)
        details: dict[str, Any] = {"masked": masked, "kept": kept, "tokensAfterMask": after_mask}
        if after_mask <= budget:
            return run.result(details={**details, "summarized": False})
        summary = PiSummary(self.incremental).compact(
            tree, settings=settings, **request.summarizer()
        )
        return run.result(
            summary=summary.summary,
            calls=summary.calls,
            usage=summary.usage,
            note=summary.note,
            details={**details, **summary.details, "summarized": summary.compacted},
        )


# --- summaries without Pi's engine ----------------------------------------------------------------


@dataclass(frozen=True)
class SummaryInput:
    """What a :class:`_SummaryStrategy` summarizes: the messages, the summary being updated
    (None the first time or from scratch), the preparation and the prompts."""

    messages: list[Message]
    previous: str | None
    preparation: CompactionPreparation
    prompts: PromptSet


@dataclass
class _SummaryStrategy(Strategy):
    """A compaction at Pi's cut whose summary comes from :meth:`summarize`."""

    incremental: bool = True
    file_lists: bool = True

    name = "summary"
    needs_model = False

    def summarize(self, span: SummaryInput) -> tuple[str, dict[str, Any] | None, int]:
        """(summary, usage or None, model calls) of ``span``."""
        raise NotImplementedError

    def apply(self, run: StrategyRun, request: StrategyRequest) -> StrategyResult:
        tree = run.tree
        preparation = prepare_branch(tree, request.model_settings)
        if preparation is None:
            return run.result(note="Nothing to compact")
        if self.incremental:
            messages = summarized_span(preparation)
            previous = preparation.previous_summary
        else:
            messages = original_history(tree.get_branch(), preparation.first_kept_entry_id)
            previous = None
        summary, usage, calls = self.summarize(
            SummaryInput(messages, previous, preparation, request.prompts or DEFAULT_PROMPTS)
        )
        details, lists = _file_lists(preparation)
        if self.file_lists:
            summary += lists
        return _summary_at_cut(run, preparation, summary, usage, calls, details)


@dataclass
class Extractive(_SummaryStrategy):
    """The non-LLM baseline: :func:`pi_nb.models.extractive.extractive_summary` (every line
    copied from the conversation; merges into the previous summary when incremental)."""

    name = "extractive"

    def summarize(self, span: SummaryInput) -> tuple[str, dict[str, Any] | None, int]:
        conversation = serialize_conversation(convert_to_llm(span.messages))
        budget = math.floor(0.8 * span.preparation.settings.reserve_tokens)
        return extractive_summary(conversation, span.previous, max(budget, 1)), None, 0


@dataclass
class CallableStrategy(_SummaryStrategy):
    """Any ``fn(messages, previous_summary, instructions) -> summary`` as a strategy.

    ``messages`` are Pi AgentMessages (what Pi would summarize), ``previous_summary`` the
    summary being updated (None the first time, or always when ``incremental=False``) and
    ``instructions`` Pi's initial or update prompt. ``fn`` may return the summary text, or
    a dict ``{"summary": str, "usage": PiUsage, "calls": int}``. With ``file_lists`` the
    ``<read-files>`` / ``<modified-files>`` blocks are appended, as Pi does.
    """

    fn: SummaryFn | None = None
    label: str = "callable"

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.label

    def summarize(self, span: SummaryInput) -> tuple[str, dict[str, Any] | None, int]:
        if self.fn is None:
            raise ValueError("CallableStrategy needs a function")
        instructions = span.prompts.update if span.previous else span.prompts.initial
        out = self.fn(list(span.messages), span.previous, instructions)
        if isinstance(out, Mapping):
            return str(out.get("summary", "")), out.get("usage"), int(out.get("calls", 0) or 0)
        if not isinstance(out, str):
            raise TypeError(f"strategy {self.label!r} returned {type(out).__name__}, not str")
        return out, None, 0


def callable_strategy(
    fn: SummaryFn, name: str | None = None, *, incremental: bool = True, file_lists: bool = True
) -> CallableStrategy:
    """Wrap ``fn(messages, previous_summary, instructions) -> summary`` as a strategy.

    For process-pool runs ``fn`` must be picklable (a module-level function).
    """
    label = name or getattr(fn, "__name__", "callable")
    return CallableStrategy(incremental=incremental, file_lists=file_lists, fn=fn, label=label)


# --- the context policies as strategies ---------------------------------------------------
# PinnedSummary ("pinned") runs Pi's summary through PinPolicy: the pins on the branch, the
# facts given and (auto_constraints) the user's constraint sentences of the summarized span
# are pinned first (picked by keywords; the probes pick constraints by position, so pinning
# them is not scored by construction) and the other categories show what that costs. RelevancePruning ("prune") records prune_messages' choice at the
# fork as context_edit entries, so the strategy's projection is exactly the pruned request.

_CONSTRAINT = re.compile(
    r"\b(must|never|always|don't|don’t|do not|should|prefer|prefers|only|required?)\b", re.I
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def constraint_sentences(messages: Sequence[Message], limit: int = 8) -> list[str]:
    """User sentences stating a constraint (must / never / always / only …), first ``limit``,
    deduplicated, in order."""
    out: list[str] = []
    seen: set[str] = set()
    for message in messages:
        if message.get("role") != "user":
            continue
        for sentence in _SENTENCE_END.split(content_text(message.get("content"), "\n")):
            sentence = " ".join(sentence.split())
            if len(sentence) > 3 and _CONSTRAINT.search(sentence) and sentence not in seen:
                seen.add(sentence)
                out.append(sentence)
                if len(out) >= limit:
                    return out
    return out


#: A policy's result counts as compacted when its branch got a compaction or a context edit.
_POLICY_CHANGES = ("compaction", "context_edit")


@dataclass
class PinnedSummary(Strategy):
    """Pi's summary with pins guaranteed to survive (:class:`~pi_nb.policies.pins.PinPolicy`).

    Args:
        auto_constraints: pin the user's constraint sentences of the span being summarized.
        restore: ``"append"`` or ``"focused"`` (see :class:`~pi_nb.policies.pins.PinPolicy`).
        facts: more facts to pin.
    """

    auto_constraints: bool = True
    restore: str = "append"
    facts: tuple[str, ...] = ()
    name: str = field(default="pinned", init=False)
    changes = _POLICY_CHANGES

    def apply(self, run: StrategyRun, request: StrategyRequest) -> StrategyResult:
        tree = run.tree
        settings = request.model_settings
        preparation = prepare_branch(tree, settings)
        if preparation is None:
            return run.result(note="Nothing to compact")
        wanted = list(self.facts)
        if self.auto_constraints:
            wanted += constraint_sentences(summarized_span(preparation))
        for fact in wanted:
            pin(tree, text=fact)
        hooks = Hooks()
        policy = PinPolicy(
            restore=self.restore,  # type: ignore[arg-type]
            **request.summarizer(),
        ).install(hooks)
        try:
            done = compact(tree, settings=settings, hooks=hooks, **request.summarizer())
        except CompactionError as exc:
            return run.result(note=str(exc))
        finally:
            policy.remove()
        outcome = policy.outcomes[-1] if policy.outcomes else None
        pins_details = (done.details.get("pins") if isinstance(done.details, dict) else None) or {}
        return run.result(
            summary=done.summary,
            calls=outcome.calls if outcome is not None else done.calls,
            usage=done.usage,
            details={
                "firstKeptEntryId": done.first_kept_entry_id,
                "pinned": len(pins_details.get("facts", [])),
                "restored": len(pins_details.get("restored", [])),
                "verbatim": len(pins_details.get("verbatim", [])),
            },
        )


@dataclass
class RelevancePruning(Strategy):
    """Relevance pruning of the context at the fork, recorded as context edits.

    Args:
        budget: token budget of the context's messages (default: ``ratio`` of their size).
        ratio: the budget as a share of the current size when ``budget`` is None.
        keep_last: most recent tool results never pruned.
        include_assistant: also prune older assistant texts.
        ranker: ``"bm25"`` or ``"semantic"``.
    """

    budget: int | None = None
    ratio: float = 0.5
    keep_last: int = 3
    include_assistant: bool = False
    ranker: str = "bm25"
    name: str = field(default="prune", init=False)
    changes = _POLICY_CHANGES
    needs_model = False

    def apply(self, run: StrategyRun, request: StrategyRequest) -> StrategyResult:
        tree = run.tree
        # This strategy's parameters are the pruner's options of the same names.
        options = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        pruner = RelevancePruner(tree, record=True, **options)
        messages = [m for m in tree.projection().messages if m.get("role") != "system"]
        pruner.on_context(Event(type=CONTEXT, messages=messages))
        report = pruner.reports[-1]
        return run.result(
            note=None if report.pruned else "Nothing to prune",
            details={
                "pruned": [p.entry_id for p in report.pruned],
                "budget": report.budget,
                "metBudget": report.met_budget,
                "candidates": len(report.candidates),
                "query": report.query[:200],
            },
        )


# --- by name -----------------------------------------------------------------------------------

#: Spec name → (class, fixed keyword arguments).
STRATEGIES: dict[str, tuple[type, dict[str, Any]]] = {
    "pi": (PiSummary, {"incremental": True}),
    "pi-scratch": (PiSummary, {"incremental": False}),
    "mask": (ObservationMasking, {}),
    "window": (SlidingWindow, {}),
    "hybrid": (Hybrid, {}),
    "extractive": (Extractive, {}),
    "pinned": (PinnedSummary, {}),
    "prune": (RelevancePruning, {}),
}

#: What a comparison runs when not told otherwise.
DEFAULT_STRATEGIES = ("pi", "pi-scratch", "mask", "window", "hybrid", "extractive")


def _value(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    try:
        return int(text)
    except ValueError:
        return text


def get_strategy(spec: str | Compactor) -> Compactor:
    """A strategy from a spec: ``"mask"``, ``"mask:5"`` (first parameter) or
    ``"hybrid:keep_last=2,budget=6000"``; a Compactor is returned as is."""
    if not isinstance(spec, str):
        if not isinstance(spec, Compactor):
            raise TypeError(f"not a strategy: {spec!r}")
        return spec
    name, _, args = spec.strip().partition(":")
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r} (known: {', '.join(STRATEGIES)})")
    cls, fixed = STRATEGIES[name]
    params = [f.name for f in fields(cls) if f.init and f.name not in fixed]
    kwargs: dict[str, Any] = dict(fixed)
    for position, item in enumerate(a for a in args.split(",") if a.strip()):
        key, eq, value = item.partition("=")
        if not eq:
            if position > 0 or not params:
                raise ValueError(f"strategy {spec!r}: only the first parameter may be unnamed")
            key, value = params[0], item
        key = key.strip()
        if key not in params:
            raise ValueError(
                f"strategy {name!r} has no parameter {key!r} (parameters: {', '.join(params)})"
            )
        kwargs[key] = _value(value.strip())
    return cls(**kwargs)
