"""Strategies × sessions: the comparison table, run in batch with a cache and resume.

:func:`compare_strategies` runs every strategy on every session — each on its own branch of
an in-memory copy, from the same fork point (the session's leaf) — and returns one row per
(session, strategy): tokens before / after, compression ratio, summary tokens, model calls,
tokens and cost spent, probe recall per category, wall time.

What a row means:

- ``source``: ``"synthetic"`` (a :func:`~pi_nb.research.synthetic.generate_session`
  session) or ``"real"`` (a transcript) — report them apart;
- ``summarizer``: what wrote the summary — the model's name, ``"extractive stand-in"``
  when the model was ``pinb/scripted`` (which answers every summary request with the
  extractive summarizer: offline, ``pi`` and ``extractive`` are then one algorithm),
  ``"extractive (no model)"`` for the extractive strategy, ``"none"`` when nothing was
  summarized;
- the compaction point (``at``): by default the session's own last ``compaction`` entry
  when it has one (an agent's real compaction), else its leaf. When the session goes on
  after the point and uses facts of the compacted span again, ``probe_all`` is the recall
  of those **needed-later** probes — else of the heuristic probes (``probe_basis`` says
  which; ``probe_heuristic`` is always there; ``needed_later_note`` says why a row has no
  needed-later probes: no continuation, nothing cut, or a continuation that reuses nothing);
- ``cost``: priced from the token counts with litellm's table (cached input at the cache
  rate); NaN with a ``cost_note`` when the model has no price — never a made-up 0.0;
- ``judge_model``: an LLM judge answers the probe questions from the compacted context and
  grades the answers 0–5 (``judge_score``, ``judge_<category>``, failures in
  ``judge_error``); the questions, answers and grades are in ``frame.attrs["judge_log"]``;
- ``replay``: the next step with the full and with the compacted context
  (``continuation_agreement``) and against what the agent actually did (``matches_actual``);
  replies without a tool call are compared by the ``judge_model`` (``agreement_basis``,
  ``agreement_score`` 0–5, the exchange in ``frame.attrs["replay_log"]``), else
  ``agreement_note`` says why the agreement is None;

At scale:

- ``executor``: a Dask ``distributed.Client`` (the jobs go out in one batch) or any
  ``concurrent.futures``-style executor (``ThreadPoolExecutor``, ``ProcessPoolExecutor``,
  ``client.get_executor()`` …) runs the jobs;
  jobs and results are plain picklable data. A job carries the session's content (its
  bytes), not a path: workers on other machines need no access to the caller's files.
- ``cache_dir``: each result is stored as ``<key>.json``, keyed by the session's hash,
  the strategy and its parameters, the model, the prompts and the settings; a rerun reads it
  instead of calling any model. Every model call (summaries, judge, replay) is cached too,
  in ``cache_dir/calls``, keyed by the request's content (:mod:`pi_nb.research.cache`):
  a study that changes only what is asked afterwards (another judge, replay on) reuses the
  summaries already paid for. ``model_calls_cached`` / ``model_calls_sent`` count, per
  row and this run, the calls answered from the cache and those sent to a model (a row read
  whole from the result cache sent nothing: all its calls count as cached).
- ``dry_run=True``: no model call at all — one row per (session, strategy) with the planned
  calls, their estimated input tokens and the estimated cost (:func:`plan_study`).
- ``results_path`` (default ``cache_dir/results.jsonl``): every result is appended as soon
  as it is known, so an interrupted study loses nothing and resumes where it stopped.
- ``progress``: a progress bar (tqdm on stderr, or plain lines without tqdm).

Offline and deterministic with ``pinb/scripted`` (every column but ``wall_time_s``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .probes import CATEGORIES

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from ..compaction import CompactionSettings, PromptSet
    from ..entries import Message
    from .strategies import Compactor

__all__ = [
    "COLUMNS",
    "EXTRACTIVE_STAND_IN",
    "PLAN_COLUMNS",
    "SIZE_COLUMNS",
    "compare_strategies",
    "plan_study",
    "plot_comparison",
    "run_job",
]

#: Bump when a change makes cached rows stale.
CACHE_VERSION = 4

#: ``summarizer`` of a summary written by ``pinb/scripted`` (the extractive summarizer).
EXTRACTIVE_STAND_IN = "extractive stand-in"

#: What the compaction did to the context's size (:meth:`StrategyResult.to_dict`'s names):
#: every view of a comparison shows them, in this order.
SIZE_COLUMNS = ("tokens_before", "tokens_after", "compression_ratio", "summary_tokens")

#: Columns of the comparison table, in order.
COLUMNS = (
    "session",
    "source",
    "strategy",
    "model",
    "summarizer",
    "compacted",
    *SIZE_COLUMNS,
    "model_calls",
    "model_calls_cached",
    "model_calls_sent",
    "input_tokens",
    "output_tokens",
    "cost",
    "cost_note",
    "compaction_point",
    "probe_basis",
    "needed_later_note",
    "probes",
    *(f"probe_{c}" for c in CATEGORIES),
    "probe_all",
    "probe_all_exact",
    "probe_heuristic",
    "summary_recall",
    "judge_score",
    *(f"judge_{c}" for c in CATEGORIES),
    "judge_grader",
    "judge_error",
    "continuation_agreement",
    "agreement_basis",
    "agreement_score",
    "agreement_note",
    "matches_actual",
    "next_full",
    "next_compacted",
    "next_actual",
    "replay_error",
    "wall_time_s",
    "cached",
    "error",
    "note",
    "session_hash",
    "key",
)


@dataclass
class _Job:
    """One (session, strategy) run: plain data, picklable for process pools and remote
    workers (the session travels as its bytes, never as a path)."""

    session_data: bytes
    session: str
    session_hash: str
    strategy: Any
    strategy_key: str
    model: str
    settings: Any
    prompts: Any
    completion: Any
    window: int | None
    price_model: str | None
    judge_model: str | None
    at: Any = None
    judge_grader: str = "judge"
    judge_completion: Any = None
    judge_options: Any = None
    replay: bool = False
    replay_model: str | None = None
    replay_completion: Any = None
    replay_options: Any = None
    call_cache: str | None = None
    #: The result cache's key: :func:`_job_key` of the fields above (computed when not given).
    key: str = ""

    def __post_init__(self) -> None:
        if not self.key:
            self.key = _job_key(self)


def _job_key(job: _Job) -> str:
    """What a job's result depends on, hashed: the session's content, the strategy and its
    parameters, the models, prompts, settings and the study's options (not the session's
    label nor where the call cache lives)."""
    parts = [
        CACHE_VERSION,
        job.session_hash,
        job.strategy_key,
        job.model,
        job.prompts.to_dict(),
        job.settings.to_dict(),
        job.window,
        job.price_model,
        job.judge_model,
        _callable_name(job.completion),
        job.at,
        job.judge_grader,
        _callable_name(job.judge_completion),
        dict(job.judge_options or {}),
        job.replay,
        job.replay_model,
        _callable_name(job.replay_completion),
        dict(job.replay_options or {}),
    ]
    text = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def summarizer_label(compactor: Any, result: Any, model: str, completion: Any) -> str:
    """What wrote ``result``'s summary (the ``summarizer`` column)."""
    from .strategies import CallableStrategy, Extractive, SlidingWindow

    if not result.compacted:
        return "none"
    if isinstance(compactor, Extractive):
        return "extractive (no model)"
    if isinstance(compactor, CallableStrategy):
        return f"function {compactor.label}"
    if isinstance(compactor, SlidingWindow):
        return "none (truncation note)"
    if not result.calls:
        return "none"
    if completion is not None:
        return f"{model} via {_callable_name(completion)}"
    if model.split("/")[:2] == ["pinb", "scripted"]:
        return EXTRACTIVE_STAND_IN
    return model


def run_job(job: _Job) -> dict[str, Any]:
    """Run one (session, strategy) pair and return its row (never raises for a failed
    compaction: the error goes in the ``error`` column)."""
    from ._sessions import tree_from_bytes
    from .cache import CachedCompletion, CallCount
    from .probes import (
        compacted_span,
        compaction_point,
        context_text,
        extract_probes,
        needed_later_note,
        needed_later_probes,
        probe_recall,
        recall_columns,
        score_probes,
    )
    from .synthetic import session_source

    row: dict[str, Any] = {
        "session": job.session,
        "strategy": getattr(job.strategy, "name", str(job.strategy)),
        "model": job.model,
        "session_hash": job.session_hash,
        "key": job.key,
        "cached": False,
        "error": None,
    }
    started = time.perf_counter()
    # Every model call of the job goes through one counter (and the disk cache if any).
    count = CallCount()

    def wrap(fn: Any) -> CachedCompletion:
        return CachedCompletion(job.call_cache, fn, count)

    try:
        tree = tree_from_bytes(job.session_data, job.session)
        row["source"] = session_source(tree)
        point = compaction_point(tree, job.at)
        fork = point.fork_id
        row["compaction_point"] = point.compaction_id or fork
        span = compacted_span(tree, job.settings, fork)
        probes = extract_probes(span)
        later = needed_later_probes(span, point.continuation) if point.has_continuation else []
        row["needed_later_note"] = needed_later_note(point, span, later)
        result = job.strategy.compact(
            tree,
            model=job.model,
            settings=job.settings,
            prompts=job.prompts,
            fork_id=fork,
            completion=wrap(job.completion),
            window=job.window,
        )
        facts = result.to_dict()
        for name in (
            "compacted",
            *SIZE_COLUMNS,
            "model_calls",
            "input_tokens",
            "output_tokens",
            "note",
        ):
            row[name] = facts[name]
        row["summarizer"] = summarizer_label(job.strategy, result, job.model, job.completion)
        if result.calls:
            from .costs import usage_cost

            row["cost"], row["cost_note"] = usage_cost(job.price_model or job.model, result.usage)
        else:
            row["cost"], row["cost_note"] = 0.0, None  # no model call: nothing spent
        text = context_text(tree.projection(result.leaf_id).messages)
        everything = [*probes, *later]
        row.update(recall_columns(score_probes(everything, text)))
        row["summary_recall"] = (
            probe_recall(score_probes(everything, result.summary))["all"]
            if result.summary
            else None
        )
        if job.judge_model:
            from .judge import judge_probes, judge_scores

            judged = judge_probes(
                everything,
                text,
                job.judge_model,
                grader=job.judge_grader,
                completion=wrap(job.judge_completion),
                **(job.judge_options or {}),
            )
            row.update(judge_scores(judged))
            row["judge_log"] = judged.to_dict(orient="records")
        if job.replay:
            from .replay import replay_continuation

            replayed = replay_continuation(
                tree,
                fork,
                result.leaf_id or fork,
                job.replay_model or job.model,
                continuation=point.continuation,
                completion=wrap(job.replay_completion),
                judge_model=job.judge_model,
                judge_completion=wrap(job.judge_completion),
                judge_options=job.judge_options,
                **(job.replay_options or {}),
            )
            replayed.pop("replay_steps", None)
            row["replay_log"] = replayed.pop("agreement_log")
            row.update(replayed)
    except Exception as exc:  # a failed run is a row, not a crash of the study
        row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    row["model_calls_cached"], row["model_calls_sent"] = count.cached, count.sent
    row["wall_time_s"] = time.perf_counter() - started
    return row


# --- dry run ----------------------------------------------------------------------------------

#: Columns of the plan ``compare_strategies(..., dry_run=True)`` returns.
PLAN_COLUMNS = (
    "session",
    "strategy",
    "model_calls",
    "summary_calls",
    "judge_calls",
    "replay_calls",
    "input_tokens",
    "output_tokens_max",
    "cost",
    "cost_note",
    "error",
)

#: What the planner answers every request with (no model is asked anything).
_PLAN_REPLY = "GRADE: 0 - dry run, no model was called"


class _Planner:
    """A stand-in model call that records each request instead of sending it."""

    def __init__(self, role: str, calls: list[dict[str, Any]]) -> None:
        self.role, self.calls = role, calls

    def __call__(self, model: str, messages: Sequence[dict[str, Any]], **options: Any) -> Message:
        from ..messages import content_text

        chars = sum(len(content_text(m.get("content")) or "") for m in messages)
        chars += len(json.dumps(options.get("tools") or [], ensure_ascii=False))
        self.calls.append(
            {
                "role": self.role,
                "model": model,
                "input": -(-chars // 4),  # the project's estimate: 4 characters a token
                "max_tokens": options.get("max_tokens"),
            }
        )
        return {"role": "assistant", "content": [{"type": "text", "text": _PLAN_REPLY}]}


def _plan_row(job: _Job) -> dict[str, Any]:
    """The planned calls of one job: the job run offline with every model call recorded."""
    import dataclasses
    import math

    from .costs import usage_cost

    calls: list[dict[str, Any]] = []
    planned = dataclasses.replace(
        job,
        completion=_Planner("summary", calls),
        judge_completion=_Planner("judge", calls),
        replay_completion=_Planner("replay", calls),
        call_cache=None,
    )
    result = run_job(planned)
    row: dict[str, Any] = {
        "session": job.session,
        "strategy": result["strategy"],
        "model_calls": len(calls),
        **{f"{r}_calls": sum(c["role"] == r for c in calls) for r in ("summary", "judge", "replay")},
        "input_tokens": sum(c["input"] for c in calls),
        "output_tokens_max": sum(c["max_tokens"] or 0 for c in calls),
        "error": result.get("error"),
    }
    # Priced per model (summarizer, judge, replay may differ); output at the max_tokens cap.
    cost, notes = 0.0, []
    by_model: dict[str, dict[str, int]] = {}
    for call in calls:
        price_as = job.price_model if call["role"] == "summary" and job.price_model else None
        usage = by_model.setdefault(price_as or call["model"], {"input": 0, "output": 0})
        usage["input"] += call["input"]
        usage["output"] += call["max_tokens"] or 0
    for name, usage in by_model.items():
        value, note = usage_cost(name, usage)
        cost += value
        if note:
            notes.append(note)
    uncapped = sum(1 for c in calls if not c["max_tokens"])
    if uncapped:
        notes.append(f"{uncapped} call(s) without a max_tokens cap: their output is not priced")
    if by_model and not math.isnan(cost):
        notes.insert(0, "estimate: input at 4 characters a token, output at the max_tokens cap")
    row["cost"], row["cost_note"] = cost, "; ".join(notes) or None
    return row


def plan_study(jobs: Sequence[_Job]) -> pd.DataFrame:
    """The plan of a study (``compare_strategies(..., dry_run=True)``): per job the model
    calls it would make, their estimated input tokens (4 characters a token), the output
    cap, and the estimated cost (NaN with a ``cost_note`` when a model has no price).

    Each job runs offline with every model call replaced by a recorder: nothing is sent,
    nothing is cached. The summaries are then placeholders, so the requests that depend on
    a previous reply (the running summary of a chunked summary, the judge's grading of an
    answer) are estimated with a short one. The placeholder replies make no tool call, so
    with a judge each replay also plans the judge's comparison of the two replies (an upper
    bound: replies that make a tool call are compared without it).
    """
    import pandas as pd

    frame = pd.DataFrame([_plan_row(job) for job in jobs], columns=list(PLAN_COLUMNS))
    frame.attrs["notes"] = list(dict.fromkeys(n for n in frame["cost_note"] if isinstance(n, str)))
    return frame


# --- inputs ---------------------------------------------------------------------------------


def _session_inputs(sessions: Any) -> list[tuple[str, bytes, str]]:
    """[(label, content, sha256)] for paths and SessionTrees: the jobs carry the bytes
    (read here, once), so no worker needs the caller's files."""
    from ..session.tree import SessionTree
    from ._sessions import session_label, tree_bytes

    if isinstance(sessions, Mapping):
        named: list[tuple[str | None, Any]] = [(str(k), v) for k, v in sessions.items()]
    elif isinstance(sessions, (str, os.PathLike, SessionTree)):
        named = [(None, sessions)]
    else:
        named = [(None, item) for item in sessions]
    out: list[tuple[str, bytes, str]] = []
    labels: dict[str, int] = {}
    for given, item in named:
        if isinstance(item, SessionTree) and (item.path is None or not item.is_persisted):
            data = tree_bytes(item)
        else:
            path = os.fspath(item.path if isinstance(item, SessionTree) else item)
            if not os.path.isfile(path):
                raise FileNotFoundError(f"{path}: no such session file")
            with open(path, "rb") as handle:
                data = handle.read()
        digest = hashlib.sha256(data).hexdigest()
        label = given or session_label(item)
        labels[label] = labels.get(label, 0) + 1
        if labels[label] > 1:
            label = f"{label}#{labels[label]}"
        out.append((label, data, digest))
    return out


def _callable_name(fn: Any) -> str | None:
    if fn is None:
        return None
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


# --- cache and log ----------------------------------------------------------------------------


class _Store:
    """Per-key JSON files plus an append-only JSONL log of results."""

    def __init__(self, cache_dir: str | os.PathLike[str] | None, results_path: Any) -> None:
        self.dir = Path(cache_dir) if cache_dir is not None else None
        if results_path is None and self.dir is not None:
            results_path = self.dir / "results.jsonl"
        self.log = Path(results_path) if results_path is not None else None
        self.logged: dict[str, dict[str, Any]] = {}
        if self.dir is not None:
            self.dir.mkdir(parents=True, exist_ok=True)
        if self.log is not None and self.log.is_file():
            with open(self.log, encoding="utf-8") as handle:
                for line in handle:
                    try:
                        row = json.loads(line)
                    except ValueError:
                        continue  # a line cut short by an interruption
                    if isinstance(row, dict) and row.get("key") and not row.get("error"):
                        self.logged[row["key"]] = row

    def get(self, key: str) -> dict[str, Any] | None:
        if self.dir is not None:
            path = self.dir / f"{key}.json"
            if path.is_file():
                try:
                    return json.loads(path.read_text(encoding="utf-8"))
                except ValueError:
                    pass
        return self.logged.get(key)

    def put(self, row: dict[str, Any]) -> None:
        # Failed runs are logged but not cached: a rerun tries them again.
        if not row.get("error") and self.dir is not None:
            path = self.dir / f"{row['key']}.json"
            fd, tmp = tempfile.mkstemp(dir=self.dir, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(row, handle, ensure_ascii=False, sort_keys=True)
            os.replace(tmp, path)
        if self.log is not None:
            self.log.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")


# --- progress ----------------------------------------------------------------------------------


class _Progress:
    """tqdm on stderr when installed, else a plain line per update; or nothing."""

    def __init__(self, total: int, enabled: bool, desc: str = "compare") -> None:
        self.total, self.done, self.cached, self.desc = total, 0, 0, desc
        self.bar: Any = None
        self.enabled = enabled
        if enabled:
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, desc=desc, file=sys.stderr, unit="run")
            except ImportError:
                self.bar = None

    def update(self, cached: bool, label: str) -> None:
        self.done += 1
        self.cached += int(cached)
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.set_postfix_str(f"{label}, {self.cached} cached", refresh=False)
            self.bar.update(1)
        else:
            sys.stderr.write(
                f"{self.desc}: {self.done}/{self.total} ({self.cached} cached) {label}\n"
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# --- the runner --------------------------------------------------------------------------------


def compare_strategies(
    sessions: Any,
    strategies: Iterable[str | Compactor] | None = None,
    model: str = "pinb/scripted",
    *,
    settings: CompactionSettings | None = None,
    prompts: PromptSet | None = None,
    executor: Any = None,
    cache_dir: str | os.PathLike[str] | None = None,
    results_path: str | os.PathLike[str] | None = None,
    progress: bool = True,
    completion: Callable[..., Message] | None = None,
    window: int | None = None,
    price_model: str | None = None,
    judge_model: str | None = None,
    judge_grader: str = "judge",
    judge_completion: Callable[..., Message] | None = None,
    judge_options: Mapping[str, Any] | None = None,
    at: str | int | None = None,
    replay: bool = False,
    replay_model: str | None = None,
    replay_completion: Callable[..., Message] | None = None,
    replay_options: Mapping[str, Any] | None = None,
    dry_run: bool = False,
) -> pd.DataFrame:
    """Run ``strategies`` on ``sessions`` and return the comparison table.

    Args:
        sessions: a session (path or SessionTree), a list of them, or a dict label →
            session. Inputs are never modified: each run works on an in-memory copy.
        strategies: strategies or specs (default
            :data:`~pi_nb.research.strategies.DEFAULT_STRATEGIES`).
        model: litellm name of the summarizing model.
        settings: compaction settings (``keep_recent_tokens`` decides the cut).
        prompts: the prompt set of Pi's summarizer.
        executor: a Dask ``distributed.Client``, or a ``concurrent.futures``-style executor
            (``submit`` returning futures); None runs in this process, one job after another.
        cache_dir: where results are cached (one JSON file per job key), and every model
            call (``cache_dir/calls``, keyed by the request's content).
        results_path: JSONL file every finished row is appended to (default
            ``cache_dir/results.jsonl``); rows already there are not run again.
        progress: show a progress bar on stderr.
        completion: custom model call for the summarizer (picklable for process pools).
        window: the summarizer's context window (default: litellm's table).
        price_model: price the summary calls as if made with this model (litellm's table),
            e.g. to estimate what a study would cost while running it offline.
        judge_model: an LLM judge (:func:`~pi_nb.research.judge.judge_probes`): it answers
            the probe questions from the compacted context and grades the answers 0–5
            (``judge_score``, ``judge_<category>``; failures in ``judge_error``).
        judge_grader: ``"judge"`` (graded by ``judge_model``) or ``"match"`` (the answers
            string-matched: cheap, offline; ``judge_grader`` = ``"string match"``).
        judge_completion, judge_options: a custom model call / call options for the judge
            (``{"mock_response": …}``, ``{"script": …}``).
        at: the compaction point of every session (entry id, or branch index; negative
            from the end); default: the session's last ``compaction`` entry, else its leaf.
        replay: also ask ``replay_model`` (default ``model``) for the next step with the
            full and the compacted context (``continuation_agreement``, ``matches_actual``);
            two replies without a tool call are compared by ``judge_model`` when given
            (``agreement_basis``, ``agreement_score``, ``frame.attrs["replay_log"]``), else
            ``agreement_note`` says why the agreement is None.
        replay_completion, replay_options: custom model call / options for the replay.
        dry_run: make no model call and return the plan instead (:func:`plan_study`): per
            (session, strategy) the planned calls, estimated input tokens and cost.

    Returns:
        One row per (session, strategy) with the columns of :data:`COLUMNS`, in input
        order whatever order the jobs finished in. ``frame.attrs["judge_log"]``: every
        judge question, answer and grade (with ``session`` and ``strategy``);
        ``frame.attrs["notes"]``: one-line notices (unknown prices, the extractive
        stand-in) for the caller to show — the CLI prints them on stderr.
    """
    import pandas as pd

    from ..compaction import DEFAULT_PROMPTS, CompactionSettings
    from .strategies import DEFAULT_STRATEGIES, get_strategy, strategy_key

    settings = settings or CompactionSettings()
    prompts = prompts or DEFAULT_PROMPTS
    compactors = [get_strategy(s) for s in (strategies or DEFAULT_STRATEGIES)]
    inputs = _session_inputs(sessions)
    call_cache = str(Path(cache_dir) / "calls") if cache_dir is not None and not dry_run else None
    jobs: list[_Job] = []
    for label, data, digest in inputs:
        for compactor in compactors:
            jobs.append(
                _Job(
                    session_data=data,
                    session=label,
                    session_hash=digest,
                    strategy=compactor,
                    strategy_key=strategy_key(compactor),
                    model=model,
                    settings=settings,
                    prompts=prompts,
                    completion=completion,
                    window=window,
                    price_model=price_model,
                    judge_model=judge_model,
                    at=at,
                    judge_grader=judge_grader,
                    judge_completion=judge_completion,
                    judge_options=dict(judge_options or {}),
                    replay=replay,
                    replay_model=replay_model,
                    replay_completion=replay_completion,
                    replay_options=dict(replay_options or {}),
                    call_cache=call_cache,
                )
            )
    if dry_run:
        return plan_study(jobs)
    store = _Store(cache_dir, results_path)
    rows: dict[int, dict[str, Any]] = {}
    bar = _Progress(len(jobs), progress)
    pending: list[int] = []
    for index, job in enumerate(jobs):
        cached = store.get(job.key)
        if cached is not None:
            # Nothing was sent this run: every call of the row was answered from the cache.
            calls = int(cached.get("model_calls_cached") or 0) + int(
                cached.get("model_calls_sent") or 0
            )
            rows[index] = {
                **cached,
                "session": job.session,
                "cached": True,
                "model_calls_cached": calls,
                "model_calls_sent": 0,
            }
            bar.update(True, f"{job.session}/{rows[index]['strategy']}")
        else:
            pending.append(index)

    def finish(index: int, row: dict[str, Any]) -> None:
        rows[index] = row
        store.put(row)
        bar.update(False, f"{row['session']}/{row['strategy']}")

    try:
        if executor is None:
            for index in pending:
                finish(index, run_job(jobs[index]))
        else:
            futures, done = _submit_all(executor, [jobs[i] for i in pending], pending)
            try:
                for index, row in done:
                    finish(index, row)
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
    finally:
        bar.close()
    ordered = [rows[i] for i in sorted(rows)]
    frame = pd.DataFrame(ordered)
    for column in COLUMNS:
        if column not in frame.columns:
            frame[column] = None
    frame = frame[list(COLUMNS)].copy()
    frame.attrs["judge_log"] = _judge_log(ordered)
    # The replay judge's exchanges (replies without a tool call), plain records like above.
    frame.attrs["replay_log"] = [
        {"session": row["session"], "strategy": row["strategy"], **row["replay_log"]}
        for row in ordered
        if row.get("replay_log")
    ]
    frame.attrs["notes"] = study_notes(frame)
    return frame


def _submit_all(
    executor: Any, batch: Sequence[_Job], indexes: Sequence[int]
) -> tuple[list[Any], Iterator[tuple[int, dict[str, Any]]]]:
    """Submit every job; return the futures and ``(index, row)`` in completion order.

    A Dask ``Client`` gets the whole batch in one ``map`` (a few jobs per task) and its
    results come back in batches through Dask's own ``as_completed``: its ``get_executor()`` wrapper fetches
    each result from a callback one at a time, which measured slower than running
    serially (bench/bench_study.py).
    """
    if _is_dask_client(executor):
        from distributed import as_completed as dask_as_completed

        # A few jobs per task: a task costs the scheduler milliseconds, which on a small
        # machine it takes from the workers. Four tasks per worker thread keep the load balanced
        # and the results coming back (and logged) as they finish.
        slots = max(1, sum(executor.nthreads().values()))  # worker threads, cluster-wide
        size = max(1, len(batch) // (4 * slots))
        chunks = [list(range(start, min(start + size, len(batch)))) for start in range(0, len(batch), size)]
        submitted = executor.map(
            run_jobs, [[batch[k] for k in chunk] for chunk in chunks], pure=False
        )
        chunk_of = {future.key: chunk for future, chunk in zip(submitted, chunks, strict=True)}
        pairs = dask_as_completed(submitted, with_results=True)
        return submitted, (
            (indexes[k], row)
            for future, rows in pairs
            for k, row in zip(chunk_of[future.key], rows, strict=True)
        )
    futures = {executor.submit(run_job, job): i for job, i in zip(batch, indexes, strict=True)}
    if all(isinstance(f, Future) for f in futures):
        done: Iterable[Any] = as_completed(futures)
    else:  # other future types: wait in submission order
        done = list(futures)
    return list(futures), ((futures[future], future.result()) for future in done)


def run_jobs(jobs: Sequence[_Job]) -> list[dict[str, Any]]:
    """:func:`run_job` for each job, in order (one task of a Dask batch)."""
    return [run_job(job) for job in jobs]


def _is_dask_client(executor: Any) -> bool:
    # By type, not duck typing: a plain executor may well have a ``map`` too.
    return any(
        cls.__name__ == "Client" and cls.__module__.startswith("distributed")
        for cls in type(executor).__mro__
    )


def _judge_log(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The audit log as plain records (``pd.DataFrame(frame.attrs["judge_log"])`` is the
    table): a DataFrame in ``attrs`` would make ``pd.concat`` of two comparison tables fail,
    since pandas compares the inputs' attrs with ``==``."""
    from .judge import JUDGE_COLUMNS

    columns = ["session", "strategy", *JUDGE_COLUMNS]
    return [
        {column: record.get(column) for column in columns}
        for record in (
            {"session": row["session"], "strategy": row["strategy"], **entry}
            for row in rows
            for entry in row.get("judge_log") or []
        )
    ]


def study_notes(frame: pd.DataFrame) -> list[str]:
    """One-line notices about a comparison table: unknown prices (by model), judge
    failures, and rows whose summary came from the extractive stand-in."""
    notes = list(dict.fromkeys(n for n in frame["cost_note"] if isinstance(n, str)))
    failed = frame[frame["judge_error"].notna()]
    if len(failed):
        notes.append(
            f"judge: {len(failed)} run(s) with ungraded probes (see the judge_error column)"
        )
    stand_in = sorted(set(frame.loc[frame["summarizer"] == EXTRACTIVE_STAND_IN, "strategy"]))
    if stand_in:
        notes.append(
            f"summaries of {', '.join(stand_in)} came from the extractive stand-in "
            "(pinb/scripted), not a language model: offline they are the extractive "
            "summarizer, not independent algorithms"
        )
    return notes


# --- plots ----------------------------------------------------------------------------------


def plot_comparison(
    frame: pd.DataFrame, figsize: tuple[float, float] = (13, 3.8), *, source: str | None = None
) -> Figure:
    """Three panels: compression ratio per strategy, probe recall per category and
    strategy, and context size after compaction against overall recall (one point per
    session × strategy). Means are over sessions; failed runs are left out.

    Synthetic and real sessions are never averaged together: a frame with both needs
    ``source="synthetic"`` or ``source="real"`` (ValueError otherwise).
    """
    import matplotlib.pyplot as plt

    data = frame[frame["error"].isna()] if "error" in frame else frame
    sources = sorted(set(data["source"].dropna())) if "source" in data else []
    if source is not None:
        data = data[data["source"] == source]
    elif len(sources) > 1:
        raise ValueError(
            "the table mixes synthetic and real sessions: plot them apart "
            "(plot_comparison(frame, source='synthetic') or source='real')"
        )
    label = f" — {source or sources[0]} sessions" if (source or sources) else ""
    fig, axes = plt.subplots(1, 3, figsize=figsize)
    order = list(dict.fromkeys(data["strategy"]))
    means = data.groupby("strategy", sort=False).mean(numeric_only=True).reindex(order)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    color_of = {name: colors[i % len(colors)] for i, name in enumerate(order)}

    ax = axes[0]
    ax.bar(order, means["compression_ratio"], color=[color_of[s] for s in order])
    ax.set_title(f"compression (tokens before / after){label}")
    ax.tick_params(axis="x", rotation=30)

    ax = axes[1]
    width = 0.8 / max(len(order), 1)
    for i, name in enumerate(order):
        values = [means.loc[name, f"probe_{c}"] for c in CATEGORIES]
        positions = [j + i * width for j in range(len(CATEGORIES))]
        ax.bar(positions, values, width=width, label=name, color=color_of[name])
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(CATEGORIES))])
    ax.set_xticklabels(CATEGORIES)
    ax.set_ylim(0, 1.05)
    ax.set_title("probe recall by category")
    ax.legend(fontsize="x-small")

    ax = axes[2]
    for name in order:
        part = data[data["strategy"] == name]
        ax.scatter(part["tokens_after"], part["probe_all"], label=name, color=color_of[name])
    ax.set_xlabel("tokens after compaction")
    ax.set_ylabel("probe recall (all)")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title("cost of context vs. what survives")
    fig.tight_layout()
    return fig
