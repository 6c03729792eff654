"""Fact survival: which facts are still recoverable after k repeated compactions.

Summaries are lossy, and an incremental summary is a summary of a summary: exact
constraints and values can fade a little more at every compaction. :func:`fact_survival`
measures it: it takes the probes of the span the first compaction removes (the *original*
facts), then compacts ``k`` times with one strategy — appending generated turns between
compactions so that each one has new history to fold in — and scores the original probes
against the context after each compaction. Round 0 is the uncompacted context.

With ``judge_model`` an LLM judge also answers the probe questions from each round's
context and grades the answers 0–5 (:func:`pi_nb.research.judge.judge_probes`): the
``judge_score`` column, failures in ``judge_error``, the audit log in
``frame.attrs["judge_log"]``. With ``cache_dir`` every model call (summaries, judge) is
cached on disk by request content (:mod:`pi_nb.research.cache`): a rerun sends nothing and
gives the same frame; ``model_calls_cached`` / ``model_calls_sent`` count each round's
calls answered from the cache and sent to a model. The ``source`` column says whether the session was generated
(``"synthetic"``) or a real transcript (``"real"``); the turns appended between
compactions are generated either way.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..compaction import CompactionSettings
from ._sessions import copy_tree, load_session
from .probes import CATEGORIES, Probe, compacted_span, context_text, extract_probes, score_probes
from .strategies import Compactor, context_size, get_strategy, text_tokens
from .synthetic import append_turns, session_source

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes

    from ..compaction import PromptSet
    from ..entries import Message
    from ..session.tree import SessionTree

__all__ = ["fact_survival", "plot_survival"]

SURVIVAL_COLUMNS = (
    "source",
    "strategy",
    "round",
    "category",
    "recall",
    "recall_exact",
    "probes",
    "tokens",
    "summary_tokens",
    "compacted",
    "judge_score",
    "judge_error",
    "model_calls_cached",
    "model_calls_sent",
)


def fact_survival(
    tree: SessionTree | bytes | str | os.PathLike[str],
    strategy: str | Compactor,
    k: int = 5,
    *,
    model: str = "pinb/scripted",
    settings: CompactionSettings | None = None,
    prompts: PromptSet | None = None,
    turns_between: int = 3,
    seed: int = 0,
    probes: Sequence[Probe] | None = None,
    fork_id: str | None = None,
    completion: Callable[..., Message] | None = None,
    window: int | None = None,
    per_probe: bool = False,
    copy: bool = True,
    judge_model: str | None = None,
    judge_grader: str = "judge",
    judge_completion: Callable[..., Message] | None = None,
    judge_options: Mapping[str, Any] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> pd.DataFrame:
    """Compact ``k`` times and track the recall of the original facts after each round.

    Args:
        tree: the session (copied first unless ``copy=False``: then the rounds are appended
            to it, on a branch from ``fork_id``); or a session file's path or bytes (bytes
            travel to a Dask worker on another machine: ``client.submit(fact_survival,
            data, "pi")``).
        strategy: a strategy or a spec (``"pi"``, ``"mask:3"`` …).
        k: number of compactions.
        model, settings, prompts, completion, window: passed to the strategy.
        turns_between: generated turns (:func:`pi_nb.research.synthetic.append_turns`)
            appended between two compactions.
        seed: seed of the generated turns.
        probes: the facts to track (default: probes of the span the first compaction removes).
        per_probe: one row per (round, probe) with ``survived`` instead of per category.
        judge_model, judge_grader, judge_completion, judge_options: grade each round with
            an LLM judge (see :func:`pi_nb.research.judge.judge_probes`).
        cache_dir: cache every model call here, keyed by the request's content.

    Returns:
        Rows per round and category (plus ``"all"``): ``strategy, round, category, recall,
        recall_exact, probes, tokens, summary_tokens, compacted, judge_score, judge_error``
        (plus ``source``) — ``recall`` is the normalized-match recall against the whole
        post-compaction context; ``judge_score`` the judge's mean grade (0–5; NaN without
        a judge); ``model_calls_cached`` / ``model_calls_sent``: the round's model calls
        answered from ``cache_dir`` / sent to a model.
    """
    import pandas as pd

    from .cache import CachedCompletion, CallCount

    compactor = get_strategy(strategy)
    settings = settings or CompactionSettings()
    from ..session.tree import SessionTree

    if not isinstance(tree, SessionTree):
        tree = load_session(tree)  # an in-memory copy already
    work = copy_tree(tree) if copy else tree
    leaf = fork_id if fork_id is not None else work.leaf_id
    if leaf is None:
        raise ValueError("the session is empty")
    facts = (
        list(probes) if probes is not None else extract_probes(compacted_span(work, settings, leaf))
    )
    rows: list[dict[str, Any]] = []
    detail: list[pd.DataFrame] = []
    logs: list[pd.DataFrame] = []
    source = session_source(tree)
    # Every call of the study through one counter (and the disk cache when asked).
    count = CallCount()
    summary_call = CachedCompletion(cache_dir, completion, count)
    judge_call = CachedCompletion(cache_dir, judge_completion, count)
    seen = CallCount()  # the counts at the start of the current round

    def record(round_: int, leaf_id: str, summary: str | None, compacted: bool) -> None:
        text = context_text(work.projection(leaf_id).messages)
        scored = score_probes(facts, text)
        tokens = context_size(work, leaf_id)
        judged = None
        if judge_model:
            from .judge import judge_probes

            judged = judge_probes(
                facts,
                text,
                judge_model,
                grader=judge_grader,
                completion=judge_call,
                **dict(judge_options or {}),
            )
            judged.insert(0, "round", round_)
            judged.insert(0, "strategy", compactor.name)
            logs.append(judged)
        cached, sent = count.cached - seen.cached, count.sent - seen.sent
        seen.cached, seen.sent = count.cached, count.sent
        if per_probe:
            frame = scored.rename(columns={"normalized": "survived"})
            frame.insert(0, "round", round_)
            frame.insert(0, "strategy", compactor.name)
            detail.append(frame)
            return
        for category in (*CATEGORIES, "all"):
            part = scored if category == "all" else scored[scored["category"] == category]
            score, error = float("nan"), None
            if judged is not None:
                mine = judged if category == "all" else judged[judged["category"] == category]
                graded = mine[mine["error"].isna()]["grade"]
                score = float(graded.mean()) if len(graded) else float("nan")
                errors = list(dict.fromkeys(e for e in mine["error"] if isinstance(e, str)))
                error = "; ".join(errors)[:300] or None
            rows.append(
                {
                    "source": source,
                    "strategy": compactor.name,
                    "round": round_,
                    "category": category,
                    "recall": float(part["normalized"].mean()) if len(part) else float("nan"),
                    "recall_exact": float(part["exact"].mean()) if len(part) else float("nan"),
                    "probes": len(part),
                    "tokens": tokens,
                    "summary_tokens": text_tokens(summary),
                    "compacted": compacted,
                    "judge_score": score,
                    "judge_error": error,
                    "model_calls_cached": cached,
                    "model_calls_sent": sent,
                }
            )

    record(0, leaf, None, False)
    for round_ in range(1, k + 1):
        result = compactor.compact(
            work,
            model=model,
            settings=settings,
            prompts=prompts,
            fork_id=leaf,
            completion=summary_call,
            window=window,
        )
        leaf = result.leaf_id or leaf
        record(round_, leaf, result.summary, result.compacted)
        if round_ < k and turns_between > 0:
            work.branch(leaf)
            append_turns(work, turns_between, seed=seed, start=1000 * round_)
            leaf = work.leaf_id or leaf
    out = (
        pd.concat(detail, ignore_index=True)
        if per_probe
        else pd.DataFrame(rows, columns=list(SURVIVAL_COLUMNS))
    )
    if per_probe:
        out.insert(0, "source", source)
    # plain records, not a DataFrame: pandas compares attrs with == when concatenating
    out.attrs["judge_log"] = (
        pd.concat(logs, ignore_index=True).to_dict(orient="records") if logs else None
    )
    return out


def plot_survival(
    frame: pd.DataFrame, category: str = "all", ax: Axes | None = None, exact: bool = False
) -> Axes:
    """Recall of the original facts against the number of compactions, one line per
    strategy (concatenate several :func:`fact_survival` frames to compare)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    column = "recall_exact" if exact else "recall"
    part = frame[frame["category"] == category]
    for name, group in part.groupby("strategy", sort=False):
        ax.plot(group["round"], group[column], marker="o", label=str(name))
    ax.set_xlabel("compactions")
    ax.set_ylabel(f"{'exact' if exact else 'normalized'} recall ({category})")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xticks(sorted(part["round"].unique()))
    ax.set_title("Fact survival over repeated compaction")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return ax
