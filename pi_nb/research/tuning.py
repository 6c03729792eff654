"""Prompt tuning: rerun one compaction on a frozen history with prompt variants, side by side.

:func:`tune` previews the compaction of a session once per :class:`~pi_nb.compaction.PromptSet`
variant (:func:`~pi_nb.compaction.preview_compaction`: the summary calls are made, nothing is
written), scores every summary against the same probes and returns a :class:`TuningResult`:
a DataFrame (one row per variant), the summaries, their diffs against the baseline, and an
HTML view with the summaries side by side. :func:`prompt_editor` is a small text-area editor
for the prompts in a notebook.

The compaction point is chosen as in :func:`~pi_nb.research.compare.compare_strategies`
(``at``; by default the session's own last compaction, else its leaf). Where the session
goes on after the point, the **needed-later** probes (the span's facts the continuation used
again) are the basis of ``probe_all``; with a ``judge_model`` an LLM judge also answers the
probe questions from each summary and grades them 0–5 (``judge_score``, the exchange in
:attr:`TuningResult.judge_log`).
"""

from __future__ import annotations

import difflib
import html
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from .probes import CATEGORIES, Probe

if TYPE_CHECKING:
    import pandas as pd

    from ..compaction import CompactionSettings, PromptSet
    from ..entries import Message

__all__ = ["PromptEditor", "TuningResult", "follow_layout", "prompt_editor", "tune"]


@dataclass
class TuningResult:
    """Summaries of one history under several prompt variants.

    Attributes:
        frame: one row per variant — ``variant, changed, summary_tokens, tokens_after,
            calls, calls_cached, calls_sent, summarizer, cost, cost_note, probes,
            probe_<category>, probe_heuristic, probe_basis, probe_all, probe_all_exact,
            needed_later_note`` (recall of the probes in the summary; ``probe_all`` is the
            needed-later recall when there are needed-later probes; ``calls_cached`` /
            ``calls_sent``: calls answered from ``cache_dir`` / sent to a model;
            ``summarizer`` is ``"extractive stand-in"`` for ``pinb/scripted``; ``cost`` NaN
            with a ``cost_note`` when the price is unknown), and with a judge
            ``judge_score, judge_<category>, judge_grader, judge_error``.
        summaries: variant → summary text.
        prompts: variant → PromptSet.
        probes: the probes every summary was scored against (heuristic and needed-later).
        scores: variant → per-probe scores (``exact``, ``normalized``).
        baseline: the variant diffs are made against.
        judge_log: the judge's questions, answers and grades (plain records with a
            ``variant`` key; empty without a judge).
    """

    frame: pd.DataFrame
    summaries: dict[str, str]
    prompts: dict[str, PromptSet]
    probes: list[Probe]
    scores: dict[str, pd.DataFrame] = field(repr=False)
    baseline: str = ""
    judge_log: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def __repr__(self) -> str:
        return f"<TuningResult {len(self.summaries)} variants, baseline {self.baseline!r}>"

    def diff(self, variant: str, against: str | None = None) -> str:
        """Unified diff of a variant's summary against the baseline (or ``against``)."""
        base = against or self.baseline
        return "".join(
            difflib.unified_diff(
                self.summaries[base].splitlines(keepends=True),
                self.summaries[variant].splitlines(keepends=True),
                fromfile=base,
                tofile=variant,
            )
        )

    def missed(self, variant: str) -> pd.DataFrame:
        """The probes a variant's summary does not recall (normalized match)."""
        scored = self.scores[variant]
        return scored[~scored["normalized"]].reset_index(drop=True)

    def _repr_html_(self) -> str:
        esc = html.escape
        names = list(self.summaries)
        head = "".join(f"<th>{esc(n)}</th>" for n in names)
        stats = []
        judged = ("judge_score",) if "judge_score" in self.frame else ()
        for column in (
            "summary_tokens",
            "calls",
            *(f"probe_{c}" for c in CATEGORIES),
            "probe_all",
            *judged,
        ):
            cells = "".join(f"<td>{_fmt(v)}</td>" for v in self.frame[column])
            stats.append(f"<tr><th style='text-align:left'>{esc(column)}</th>{cells}</tr>")
        cells = "".join(
            "<td style='vertical-align:top'><pre style='white-space:pre-wrap;font-size:11px;"
            f"max-width:40em'>{_diff_html(self.summaries[self.baseline], self.summaries[n])}"
            "</pre></td>"
            for n in names
        )
        return (
            "<div class='pi-nb-tuning'><b>Prompt variants</b> (lines added against "
            f"<i>{esc(self.baseline)}</i> in green, removed in red)"
            f"<table><tr><th></th>{head}</tr>{''.join(stats)}"
            f"<tr><th style='vertical-align:top'>summary</th>{cells}</tr></table></div>"
        )


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return "—" if value != value else f"{value:.2f}"
    return html.escape(str(value))


def _diff_html(base: str, text: str) -> str:
    """``text`` with lines not in ``base`` green and lines of ``base`` missing here red."""
    out = []
    for line in difflib.ndiff(base.splitlines(), text.splitlines()):
        tag, body = line[:2], html.escape(line[2:])
        if tag == "+ ":
            out.append(f"<span style='background:#e6ffec'>{body}</span>")
        elif tag == "- ":
            out.append(
                f"<span style='background:#ffebe9;text-decoration:line-through'>{body}</span>"
            )
        elif tag == "  ":
            out.append(body)
    return "\n".join(out)


def _variant_names(variants: Sequence[PromptSet] | Mapping[str, PromptSet]) -> dict[str, PromptSet]:
    from ..compaction import DEFAULT_PROMPTS, PromptSet

    if isinstance(variants, Mapping):
        named = dict(variants)
    else:
        named = {}
        for index, prompts in enumerate(variants):
            name = "default" if prompts == DEFAULT_PROMPTS else f"variant {index}"
            if name in named:
                name = f"{name} ({index})"
            named[name] = prompts
    for name, prompts in named.items():
        if not isinstance(prompts, PromptSet):
            raise TypeError(f"variant {name!r} is a {type(prompts).__name__}, not a PromptSet")
    if not named:
        raise ValueError("no prompt variants given")
    return named


def tune(
    session: Any,
    variants: Sequence[PromptSet] | Mapping[str, PromptSet],
    model: str = "pinb/scripted",
    *,
    settings: CompactionSettings | None = None,
    focus: str | None = None,
    completion: Callable[..., Message] | None = None,
    window: int | None = None,
    baseline: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    at: str | int | None = None,
    judge_model: str | None = None,
    judge_grader: str = "judge",
    judge_completion: Callable[..., Message] | None = None,
    judge_options: Mapping[str, Any] | None = None,
) -> TuningResult:
    """Preview the compaction of ``session`` once per prompt variant and compare.

    Args:
        session: a path, a SessionTree or a session file's bytes (never modified: previews
            write nothing; bytes travel to a Dask worker on another machine).
        variants: PromptSets (named ``default`` / ``variant i``) or a dict name → PromptSet.
        model: the summarizing model.
        settings: compaction settings (where the cut falls).
        focus, completion, window: passed to :func:`~pi_nb.compaction.preview_compaction`.
        baseline: the variant the others are diffed against (default: the first).
        cache_dir: cache every model call (summaries, judge) here, keyed by the request's
            content (:mod:`pi_nb.research.cache`): a rerun sends nothing; per variant
            ``calls_cached`` / ``calls_sent`` count the calls answered from the cache / sent.
        at: the compaction point (an entry id or a branch index, see
            :func:`~pi_nb.research.probes.compaction_point`); the continuation after it gives
            the needed-later probes.
        judge_model, judge_grader, judge_completion, judge_options: an LLM judge answers
            the probe questions from each summary (see
            :func:`~pi_nb.research.judge.judge_probes`).

    Raises:
        NothingToCompact / AlreadyCompacted when the session has nothing to summarize.
    """
    import pandas as pd

    from ..compaction import CompactionSettings, preview_compaction
    from ._sessions import load_session
    from .cache import CachedCompletion, CallCount
    from .costs import usage_cost
    from .probes import (
        compacted_span,
        compaction_point,
        extract_probes,
        needed_later_note,
        needed_later_probes,
        recall_columns,
        score_probes,
    )
    from .strategies import text_tokens

    named = _variant_names(variants)
    tree = load_session(session)  # an in-memory copy: moving its leaf writes nothing
    settings = settings or CompactionSettings()
    point = compaction_point(tree, at)
    tree.branch(point.fork_id)
    span = compacted_span(tree, settings)
    later = needed_later_probes(span, point.continuation) if point.has_continuation else []
    probes = [*extract_probes(span), *later]
    note = needed_later_note(point, span, later)
    base_name = baseline or next(iter(named))
    if base_name not in named:
        raise ValueError(f"baseline {base_name!r} is not one of the variants {list(named)}")
    summarizer = "extractive stand-in" if model.split("/")[:2] == ["pinb", "scripted"] else model
    if completion is not None:  # the call may not be the model's own
        summarizer += " (custom completion)"
    rows = []
    summaries: dict[str, str] = {}
    scores: dict[str, pd.DataFrame] = {}
    judge_log: list[dict[str, Any]] = []
    for name, prompts in named.items():
        count = CallCount()
        result = preview_compaction(
            tree,
            model,
            settings=settings,
            prompts=prompts,
            focus=focus,
            completion=CachedCompletion(cache_dir, completion, count),
            window=window,
        )
        summaries[name] = result.summary
        scored = score_probes(probes, result.summary)
        scores[name] = scored
        judged: dict[str, Any] = {}
        if judge_model:
            from .judge import judge_probes, judge_scores

            log = judge_probes(
                probes,
                result.summary,
                judge_model,
                grader=judge_grader,
                completion=CachedCompletion(cache_dir, judge_completion, count),
                **(judge_options or {}),
            )
            judged = judge_scores(log)
            judged.pop("judge_failures")  # judge_error names them
            judge_log += [{"variant": name, **r} for r in log.to_dict(orient="records")]
        # Priced from the token counts; NaN with a note when litellm has no price.
        cost, cost_note = usage_cost(model, result.usage) if result.calls else (0.0, None)
        changed = [
            f.name
            for f in fields(prompts)
            if getattr(prompts, f.name) != getattr(named[base_name], f.name)
        ]
        rows.append(
            {
                "variant": name,
                "changed": ", ".join(changed) or "—",
                "summary_tokens": text_tokens(result.summary),
                "tokens_after": result.tokens_after,
                "calls": result.calls,
                "calls_cached": count.cached,
                "calls_sent": count.sent,
                "summarizer": summarizer,
                "cost": cost,
                "cost_note": cost_note,
                **recall_columns(scored),
                "needed_later_note": note,
                **judged,
            }
        )
    return TuningResult(
        frame=pd.DataFrame(rows),
        summaries=summaries,
        prompts=named,
        probes=probes,
        scores=scores,
        baseline=base_name,
        judge_log=judge_log,
    )


def follow_layout(completion: Callable[..., Message] | None = None) -> Callable[..., Message]:
    """A model call that keeps only the summary sections the prompt asks for.

    The offline ``pinb/scripted`` summarizer writes its six sections whatever the prompt
    says; wrapped in ``follow_layout`` it behaves like a model that follows the requested
    layout: ``## Heading`` sections whose heading does not appear in the request are
    dropped. Use it to try prompt edits offline (``tune(..., completion=follow_layout())``).
    """
    import re

    from ..messages import content_text

    def call(model: str, messages: Sequence[dict[str, Any]], **options: Any) -> Message:
        if completion is not None:
            reply = completion(model, messages, **options)
        else:
            from ..llm import complete

            reply = complete(model, messages, stream=False, **options)
        request = "\n".join(content_text(m.get("content")) for m in messages)
        text = content_text(reply.get("content"))
        instructions = request.split("</conversation>")[-1]
        instructions = re.sub(
            r"<previous-summary>.*?</previous-summary>", "", instructions, flags=re.S
        )
        wanted = set(re.findall(r"^#{2,3}\s+(.+?)\s*$", instructions, re.M))
        kept: list[str] = []
        keep = True
        for line in text.splitlines():
            heading = re.match(r"^#{2,3}\s+(.+?)\s*$", line)
            if heading:
                keep = heading.group(1) in wanted
            if keep:
                kept.append(line)
        return {**reply, "content": [{"type": "text", "text": "\n".join(kept).strip()}]}

    return call


class PromptEditor:
    """Text areas for some fields of a PromptSet; :attr:`prompts` is the edited set.

    Displays as its ipywidgets box. Edit in the notebook, then pass ``editor.prompts`` to
    :func:`tune` or ``compact(..., prompts=...)``.
    """

    def __init__(self, prompts: PromptSet, names: Sequence[str], rows: int = 14) -> None:
        import ipywidgets as widgets

        known = {f.name for f in fields(prompts)}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"unknown prompt fields {unknown}; known: {sorted(known)}")
        self.base = prompts
        self.areas = {
            name: widgets.Textarea(
                value=getattr(prompts, name),
                description=name,
                layout=widgets.Layout(width="100%", height=f"{rows * 1.3:.0f}em"),
            )
            for name in names
        }
        reset = widgets.Button(description="Reset", tooltip="Back to the original prompts")
        reset.on_click(lambda _: self.reset())
        self.widget = widgets.VBox(
            [
                widgets.HTML("<b>Summary prompts</b> (read with <code>editor.prompts</code>)"),
                *self.areas.values(),
                reset,
            ]
        )

    @property
    def prompts(self) -> PromptSet:
        """The PromptSet with the text areas' current contents."""
        return replace(self.base, **{name: area.value for name, area in self.areas.items()})

    @property
    def value(self) -> PromptSet:
        return self.prompts

    def reset(self) -> None:
        for name, area in self.areas.items():
            area.value = getattr(self.base, name)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


def prompt_editor(
    prompts: PromptSet | None = None, fields: Sequence[str] = ("initial", "update"), rows: int = 14
) -> PromptEditor:
    """An ipywidgets editor for ``prompts`` (default: Pi's); read ``.prompts`` after editing."""
    from ..compaction import DEFAULT_PROMPTS

    return PromptEditor(prompts or DEFAULT_PROMPTS, list(fields), rows)
