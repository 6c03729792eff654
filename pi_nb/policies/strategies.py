"""The policies as strategies of the research comparison (:mod:`pi_nb.research.strategies`).

Both follow the ``Compactor`` protocol — ``compact(tree, *, model, settings, prompts, fork_id,
completion, window) -> StrategyResult`` — and work on their own branch from ``fork_id``, so
:func:`~pi_nb.research.compare.compare_strategies` measures them side by side with plain
summarization and masking:

- :class:`PinnedSummary` (``"pinned"``) — Pi's summary through :class:`~.pins.PinPolicy`:
  the pins already on the branch, the ``facts`` given, and (``auto_constraints``) the user's
  constraint sentences in the span being summarized (must / never / always / only …) are
  pinned first, as ``custom`` entries on the strategy's branch. Constraint probes then
  survive by construction — protecting them is the policy's point; the other categories show
  what it costs or changes.
- :class:`RelevancePruning` (``"prune"``) — :func:`~.pruning.prune_messages` on the context
  at the fork, recorded as ``context_edit`` entries (``record=True``), so the strategy's
  projection is exactly the pruned request. No model call.

Register them with :func:`register` (or add :data:`STRATEGY_SPECS` to
``pi_nb.research.strategies.STRATEGIES``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..messages import content_text
from ..session.entries import Message

if TYPE_CHECKING:
    from ..compaction import CompactionSettings, PromptSet
    from ..research.strategies import StrategyResult, StrategyRun
    from ..session.tree import SessionTree

__all__ = [
    "STRATEGY_SPECS",
    "PinnedSummary",
    "RelevancePruning",
    "constraint_sentences",
    "register",
]

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


def _run(name: str, tree: SessionTree, fork_id: str | None) -> StrategyRun:
    """Fork bookkeeping of the research toolkit; a result counts as compacted when the
    branch got a compaction or a context edit."""
    from ..research.strategies import StrategyRun

    return StrategyRun(name, tree, fork_id, changes=("compaction", "context_edit"))


@dataclass
class PinnedSummary:
    """Pi's summary with pins guaranteed to survive (:class:`~.pins.PinPolicy`).

    Args:
        auto_constraints: pin the user's constraint sentences of the span being summarized.
        restore: ``"append"`` or ``"focused"`` (see :class:`~.pins.PinPolicy`).
        facts: more facts to pin.
    """

    auto_constraints: bool = True
    restore: str = "append"
    facts: tuple[str, ...] = ()
    name: str = field(default="pinned", init=False)

    def compact(
        self,
        tree: SessionTree,
        *,
        model: str,
        settings: CompactionSettings | None = None,
        prompts: PromptSet | None = None,
        fork_id: str | None = None,
        completion: Callable[..., Message] | None = None,
        window: int | None = None,
    ) -> StrategyResult:
        from ..compaction import CompactionError, compact
        from ..hooks import Hooks
        from ..research.strategies import prepare_branch, strategy_settings, summarized_span
        from .pins import PinPolicy, pin

        run = _run(self.name, tree, fork_id)
        settings = strategy_settings(settings, model)
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
            model=model,
            prompts=prompts,
            window=window,
            completion=completion,
            restore=self.restore,  # type: ignore[arg-type]
        ).install(hooks)
        try:
            done = compact(
                tree,
                model,
                settings=settings,
                prompts=prompts,
                hooks=hooks,
                window=window,
                completion=completion,
            )
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
class RelevancePruning:
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

    def compact(
        self,
        tree: SessionTree,
        *,
        model: str = "",
        settings: CompactionSettings | None = None,
        prompts: PromptSet | None = None,
        fork_id: str | None = None,
        completion: Callable[..., Message] | None = None,
        window: int | None = None,
    ) -> StrategyResult:
        from ..hooks import CONTEXT, Event
        from .pruning import RelevancePruner

        run = _run(self.name, tree, fork_id)
        pruner = RelevancePruner(
            tree,
            budget=self.budget,
            ratio=self.ratio,
            keep_last=self.keep_last,
            include_assistant=self.include_assistant,
            ranker=self.ranker,
            record=True,
        )
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


#: Spec name → (class, fixed keyword arguments), in the shape of ``STRATEGIES``.
STRATEGY_SPECS: dict[str, tuple[type, dict[str, Any]]] = {
    "pinned": (PinnedSummary, {}),
    "prune": (RelevancePruning, {}),
}


def register(table: dict[str, tuple[type, dict[str, Any]]] | None = None) -> None:
    """Add ``"pinned"`` and ``"prune"`` to ``table`` (default: the research toolkit's
    ``STRATEGIES``, so ``get_strategy("prune:4000")`` works); existing names are kept."""
    if table is None:
        from ..research.strategies import STRATEGIES

        table = STRATEGIES
    for key, spec in STRATEGY_SPECS.items():
        table.setdefault(key, spec)
