"""The LLM judge: it answers from the compacted context only, its answers are graded on the
0–5 rubric, scores come from the grades, the audit log is complete, and every failure is
visible (an error, never a silent 0)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from test_probes import MESSAGES

from pi_nb.models.scripted import Script
from pi_nb.research.judge import JUDGE_COLUMNS, STRING_MATCH, judge_probes, judge_scores
from pi_nb.research.probes import extract_probes

PROBES = extract_probes(MESSAGES)
COMPACTED = "Summary: we edited shop/pricing.py; NameError: name 'Decimal' is not defined."


def _reply(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


class Judge:
    """A judge keyed on the prompt: answers a question by quoting the notes' lines that
    share a word with it, and grades 5 when the expected fact is in the answer, else 1."""

    def __init__(self, fail: dict[str, Any] | None = None) -> None:
        self.calls: list[list[dict[str, Any]]] = []
        self.fail = fail or {}

    def __call__(self, model: str, messages: list[dict[str, Any]], **_: Any) -> dict[str, Any]:
        self.calls.append(messages)
        prompt = messages[-1]["content"]
        for marker, outcome in self.fail.items():
            if marker in prompt:
                if isinstance(outcome, BaseException):
                    raise outcome
                return _reply(outcome)
        if prompt.startswith("<notes>"):  # an answer: from the notes only
            notes = prompt.split("<notes>\n", 1)[1].split("\n</notes>", 1)[0]
            return _reply(notes)
        fact = prompt.split("(from the full history):\n", 1)[1].split("\n\nAnswer given", 1)[0]
        answer = prompt.split("(from the compacted context only):\n", 1)[1].split("\n\nRubric")[0]
        return _reply("GRADE: 5 - exact" if fact in answer else "GRADE: 1 - the fact is missing")


def test_answers_come_from_the_compacted_context_and_are_graded() -> None:
    judge = Judge()
    log = judge_probes(PROBES, COMPACTED, "judge-model", completion=judge)
    assert list(log.columns) == list(JUDGE_COLUMNS)
    assert len(log) == len(PROBES) and log["error"].isna().all()
    # Every answer call saw the compacted context and nothing of the full history.
    answers = [m for m in judge.calls if m[-1]["content"].startswith("<notes>")]
    assert len(answers) == len({p.question for p in PROBES})
    assert all(
        COMPACTED in m[-1]["content"] and "docs/money.md" not in m[-1]["content"] for m in answers
    )
    # One grading call per probe, against the fact from the full history.
    assert len(judge.calls) == len(answers) + len(PROBES)
    grades = dict(zip(log["probe_id"], log["grade"], strict=True))
    assert grades["file_modified-1"] == 5.0 and grades["error-1"] == 5.0
    assert grades["file_read-1"] == 1.0 and grades["decision-1"] == 1.0
    assert (log["answer"] == COMPACTED).all() and log["grade_reply"].str.startswith("GRADE:").all()
    assert (log["grader"] == "judge judge-model").all()
    assert list(log["score"]) == [g / 5 for g in log["grade"]]
    scores = judge_scores(log)
    assert scores["judge_score"] == pytest.approx(log["grade"].mean())
    assert scores["judge_artifact"] == pytest.approx(3.0)  # 5 (modified) and 1 (read)
    assert scores["judge_decision"] == 1.0 and math.isnan(scores["judge_needed_later"])
    assert scores["judge_failures"] == 0 and scores["judge_error"] is None


def test_failures_are_errors_not_zeros() -> None:
    judge = Judge(
        fail={
            "Which error messages": RuntimeError("judge down"),  # the answer call raises
            "What is the user's current request?": "",  # empty answer
            "Where did the work stand": "   ",  # a blank answer is empty too
            "Expected fact (from the full history):\ndocs/money.md": "looks fine to me",
            "Expected fact (from the full history):\n500": "",  # empty grading reply
        }
    )
    log = judge_probes(PROBES, COMPACTED, "judge-model", completion=judge).set_index("probe_id")
    assert log.loc["error-1", "error"] == "answer: RuntimeError: judge down"
    assert log.loc["task-1", "error"] == "answer: empty reply"
    assert log.loc["file_read-1", "error"] == "grade: unparseable reply 'looks fine to me'"
    assert log.loc["value-1", "error"] == "grade: empty reply"
    failed = log["error"].notna()
    assert log.loc["next_step-1", "error"] == "answer: empty reply"
    assert failed.sum() == 5 and log.loc[failed, "grade"].isna().all()
    scores = judge_scores(log.reset_index())
    assert scores["judge_failures"] == 5
    assert scores["judge_score"] == pytest.approx(log.loc[~failed, "grade"].mean())  # not diluted
    assert math.isnan(scores["judge_continuation"])  # its only probes failed: unknown, not 0
    assert "judge down" in scores["judge_error"] and "unparseable" in scores["judge_error"]


def test_string_match_is_the_named_offline_grader() -> None:
    judge = Judge()
    log = judge_probes(PROBES, COMPACTED, "judge-model", grader="match", completion=judge)
    assert (log["grader"] == STRING_MATCH).all() and (log["grade_reply"] == "").all()
    assert len(judge.calls) == len({p.question for p in PROBES})  # no grading calls
    grades = dict(zip(log["probe_id"], log["grade"], strict=True))
    assert grades["file_modified-1"] == 5.0 and grades["file_read-1"] == 0.0
    with pytest.raises(ValueError, match="grader"):
        judge_probes(PROBES, "x", "pinb/scripted", grader="vibes")


def test_through_litellm_mock_response_and_the_scripted_model() -> None:
    graded = judge_probes(PROBES[:2], "notes", "gpt-4o-mini", mock_response="GRADE: 4 - close")
    assert list(graded["grade"]) == [4.0, 4.0] and list(graded["score"]) == [0.8, 0.8]
    # pinb/scripted with a stateful script: the answers (one per question), then the grades.
    script = Script(["We edited shop/pricing.py.", "We read docs/money.md.", "GRADE: 5", "3/5"])
    scripted = judge_probes(PROBES[:2], "notes", "pinb/scripted", script=script)
    assert list(scripted["answer"]) == ["We edited shop/pricing.py.", "We read docs/money.md."]
    assert scripted["grade"][0] == 5.0 and scripted["grade"][1] == 3.0
    # Past the end of a list script the model says "(script finished)": not a grade.
    finished = judge_probes(PROBES[:1], "notes", "pinb/scripted")
    assert finished["error"][0].startswith("grade: unparseable reply")
    assert math.isnan(finished["grade"][0])
