"""An LLM judge for probes: answers from the compacted context, graded against the facts.

:func:`judge_probes` runs Factory.ai's probe evaluation with a model:

1. **answer** — the judge model reads only the compacted context (the summary and what was
   kept) and answers each probe question (one call per distinct question);
2. **grade** — the judge then grades each answer against the expected fact taken from the
   full history, on a 0–5 rubric (one call per probe).

Every question, answer, grading reply and grade is kept (the returned frame is the audit
log). A failure — the call raised, the answer or the grading reply was empty, the grade
could not be read — is written in the ``error`` column and the grade is NaN: it is never
counted as a 0. :func:`judge_scores` turns the log into ``judge_score`` (0–5) and per
category scores, over the graded probes only.

``grader="match"`` is the cheap offline alternative: the answers are checked by the string
match of :func:`~pi_nb.research.probes.match_probe` instead of being graded by the judge
(``grader`` column: ``"string match"``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..messages import content_text
from .probes import CATEGORIES, Probe, context_text, match_probe

if TYPE_CHECKING:
    import pandas as pd

    from ..entries import Message

__all__ = [
    "GRADERS",
    "JUDGE_COLUMNS",
    "RUBRIC",
    "STRING_MATCH",
    "ask_model",
    "failure_text",
    "grade_of",
    "judge_probes",
    "judge_scores",
]

#: Value of the ``grader`` column when answers are string-matched, not graded by a model.
STRING_MATCH = "string match"
#: Accepted ``grader`` arguments.
GRADERS = ("judge", "match")

#: Columns of the audit log :func:`judge_probes` returns.
JUDGE_COLUMNS = (
    "probe_id",
    "category",
    "kind",
    "fact",
    "question",
    "answer",
    "grade_reply",
    "grade",
    "score",
    "grader",
    "error",
)

_ANSWER_SYSTEM = (
    "You answer questions about a coding session using only the notes given. Quote names, "
    "paths, values and messages exactly. If the notes do not say, answer 'unknown'."
)
#: The 0–5 grading rubric the judge is given.
RUBRIC = """5 - the answer states the expected fact exactly (names, paths, values verbatim)
4 - the fact is there with a small slip (a path prefix, quoting, case)
3 - the fact is there but vague or partly wrong
2 - only a hint of the fact
1 - related to the fact but the fact itself is missing
0 - absent, wrong or 'unknown'"""
_GRADE_PROMPT = (
    "You grade an answer about a coding session against the fact it should contain.\n\n"
    "Probe type: {category}\nQuestion: {question}\n\nExpected fact (from the full history):\n"
    "{fact}\n\nAnswer given (from the compacted context only):\n{answer}\n\nRubric:\n{rubric}"
    "\n\nReply with one line: GRADE: <0-5> - <short reason>"
)
_GRADE = re.compile(r"grade\s*[:=]?\s*([0-5](?:\.\d+)?)\b", re.I)
_BARE = re.compile(r"^\s*([0-5](?:\.\d+)?)\s*(?:/\s*5)?\s*(?:$|[-–:,.)\s])")


def grade_of(reply: str) -> float | None:
    """The 0–5 grade in a judge's reply (``GRADE: 4 - …`` or a bare ``4``), else None."""
    match = _GRADE.search(reply) or _BARE.match(reply)
    if match is None:
        return None
    value = float(match.group(1))
    return value if 0 <= value <= 5 else None


def failure_text(exc: BaseException) -> str:
    """A failed call as one short line (``Type: message``), for an ``error`` field."""
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:200]


def ask_model(
    model: str,
    messages: list[dict[str, Any]],
    completion: Callable[..., Message] | None = None,
    **call_options: Any,
) -> str:
    """One judge call: the reply's text, stripped (``completion`` or litellm; raises on a
    failed call — the callers record the failure)."""
    if completion is not None:
        reply = completion(model, messages, **call_options)
    else:
        from ..llm import complete

        reply = complete(model, messages, stream=False, **call_options)
    return content_text(reply.get("content")).strip()


def judge_probes(
    probes: Sequence[Probe],
    context: str | Sequence[Message],
    model: str,
    *,
    grader: str = "judge",
    completion: Callable[..., Message] | None = None,
    **call_options: Any,
) -> pd.DataFrame:
    """Ask ``model`` the probe questions about ``context`` and grade its answers.

    Args:
        probes: the facts (from the full history) to ask about.
        context: the compacted context (text, or Pi messages).
        model: the judge (a litellm name; ``pinb/scripted`` or ``mock_response=`` offline).
        grader: ``"judge"`` (the model grades each answer on :data:`RUBRIC`) or ``"match"``
            (string match of the answer, no grading call: grade 5 or 0).
        completion: a custom model call ``fn(model, messages, **options) -> message``.
        call_options: passed to every model call (``mock_response=…``, ``script=…``).

    Returns:
        The audit log, one row per probe with :data:`JUDGE_COLUMNS`: ``grade`` 0–5 (NaN on
        a failure, explained in ``error``), ``score`` = grade / 5.
    """
    import pandas as pd

    if grader == "llm":  # the earlier name
        grader = "judge"
    if grader not in GRADERS:
        raise ValueError(f"grader must be 'judge' or 'match', not {grader!r}")
    text = context if isinstance(context, str) else context_text(context)
    grader_label = STRING_MATCH if grader == "match" else f"judge {model}"

    def ask(messages: list[dict[str, Any]]) -> str:
        return ask_model(model, messages, completion, **call_options)

    answers: dict[str, tuple[str, str | None]] = {}
    for question in dict.fromkeys(p.question for p in probes):
        prompt = f"<notes>\n{text}\n</notes>\n\nQuestion: {question}"
        try:
            answer = ask(
                [{"role": "system", "content": _ANSWER_SYSTEM}, {"role": "user", "content": prompt}]
            )
            answers[question] = (answer, None if answer else "answer: empty reply")
        except Exception as exc:  # a failed call is a row with its error, not a crash
            answers[question] = ("", f"answer: {failure_text(exc)}")
    rows = []
    for probe in probes:
        answer, error = answers[probe.question]
        reply, grade = "", math.nan
        if error is None and grader == "match":
            grade = 5.0 if match_probe(probe, answer)[1] else 0.0
        elif error is None:
            prompt = _GRADE_PROMPT.format(
                category=probe.category,
                question=probe.question,
                fact=probe.fact,
                answer=answer,
                rubric=RUBRIC,
            )
            try:
                reply = ask([{"role": "user", "content": prompt}])
            except Exception as exc:
                error = f"grade: {failure_text(exc)}"
            else:
                value = grade_of(reply)
                if not reply:
                    error = "grade: empty reply"
                elif value is None:
                    error = f"grade: unparseable reply {reply[:80]!r}"
                else:
                    grade = value
        rows.append(
            {
                "probe_id": probe.id,
                "category": probe.category,
                "kind": probe.kind,
                "fact": probe.fact,
                "question": probe.question,
                "answer": answer,
                "grade_reply": reply,
                "grade": grade,
                "score": grade / 5,
                "grader": grader_label,
                "error": error,
            }
        )
    return pd.DataFrame(rows, columns=list(JUDGE_COLUMNS))


def judge_scores(judged: pd.DataFrame) -> dict[str, Any]:
    """``judge_score`` (mean grade 0–5 over the graded probes), ``judge_<category>`` per
    category (NaN without a graded probe), ``judge_grader``, ``judge_failures`` (probes not
    graded) and ``judge_error`` (the distinct failures, or None)."""
    ok = judged[judged["error"].isna()]
    out: dict[str, Any] = {
        "judge_score": float(ok["grade"].mean()) if len(ok) else math.nan,
    }
    for category in CATEGORIES:
        part = ok[ok["category"] == category]["grade"]
        out[f"judge_{category}"] = float(part.mean()) if len(part) else math.nan
    graders = list(dict.fromkeys(judged["grader"]))
    out["judge_grader"] = graders[0] if graders else None
    out["judge_failures"] = int(judged["error"].notna().sum())
    errors = list(dict.fromkeys(e for e in judged["error"] if isinstance(e, str)))
    out["judge_error"] = "; ".join(errors)[:300] if errors else None
    return out
