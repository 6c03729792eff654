"""Continuation replay: replies without a tool call are compared by a judge model (0–5,
kept for audit), and without a judge the agreement is None with its reason."""

from __future__ import annotations

import ast
import inspect
import json
from typing import Any

from pinb_testkit import assistant, new_tree, tool_call, tool_result, user

from pi_nb.research import replay
from pi_nb.research.compare import compare_strategies
from pi_nb.research.replay import AGREES_AT, replay_continuation

MODEL = "openai/gpt-4o-mini"  # never reached: every call below is answered by mock_response


def _tree():
    tree = new_tree()
    ids = [
        tree.append_message(m)["id"]
        for m in [
            user("Rename load_cfg to load_config in app/config.py."),
            assistant("", tokens=0, calls=[tool_call("c1", "read", path="app/config.py")]),
            tool_result("c1", "def load_cfg(path):\n    ...\n", "read"),
            assistant("Renamed. Shall I also update the callers?", tokens=0),
        ]
    ]
    return tree, ids


def by_context(model: str, messages: list[dict[str, Any]], **options: Any) -> dict:
    """A replayed model whose reply names the context it saw (no tool call)."""
    seen = "Shall I also update" in json.dumps(messages)
    text = "Next I update the callers." if seen else "Next I ask the user."
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def test_without_a_judge_the_agreement_is_none_and_says_why() -> None:
    tree, ids = _tree()
    out = replay_continuation(
        tree, ids[-1], ids[1], MODEL, mock_response="I will update the callers next."
    )
    assert out["next_full"] == out["next_compacted"] == "(no tool call)"
    assert out["continuation_agreement"] is None and out["agreement_basis"] is None
    assert out["agreement_note"].startswith("neither reply made a tool call and no judge")
    assert out["agreement_log"] is None and out["agreement_score"] is None


def _judged(judge_reply: str) -> dict[str, Any]:
    """The replay of ``_tree`` with ``by_context`` replies, judged by a mocked judge."""
    tree, ids = _tree()
    return replay_continuation(
        tree,
        ids[-1],
        ids[1],
        MODEL,
        completion=by_context,
        judge_model="openai/judge-x",
        judge_options={"mock_response": judge_reply},
    )


def test_the_judge_grades_replies_without_a_tool_call() -> None:
    agree = _judged("GRADE: 4 - both go on with the callers")
    assert agree["continuation_agreement"] is True and agree["agreement_score"] == 4.0
    assert agree["agreement_basis"] == "judge openai/judge-x" and agree["agreement_note"] is None
    log = agree["agreement_log"]
    # The raw exchange is kept: the judge saw both replies, each under its own label.
    assert (
        log["reply"] == "GRADE: 4 - both go on with the callers"
        and log["model"] == "openai/judge-x"
    )
    full_at = log["prompt"].index("Reply A (full context):\nNext I update the callers.")
    assert log["prompt"].index("Reply B (compacted context):\nNext I ask the user.") > full_at
    assert "GRADE: <0-5>" in log["prompt"]
    # The grade maps to agreement at AGREES_AT: one below disagrees.
    below = _judged(f"GRADE: {AGREES_AT - 1} - a different step")
    assert below["continuation_agreement"] is False and below["agreement_score"] == AGREES_AT - 1
    # A reply without a grade is no verdict: None, with the reply in the note and the log.
    vague = _judged("They look similar to me.")
    assert vague["continuation_agreement"] is None and vague["agreement_basis"] is None
    assert vague["agreement_note"] == "judge: unparseable reply 'They look similar to me.'"
    assert vague["agreement_log"]["reply"] == "They look similar to me."


def test_tool_calls_are_still_compared_without_the_judge() -> None:
    tree, ids = _tree()

    def reads(model: str, messages: list[dict[str, Any]], **options: Any) -> dict:
        call = {"type": "toolCall", "id": "r", "name": "read", "arguments": {"path": "a.py"}}
        return {"role": "assistant", "content": [call]}

    def no_judge(*args: Any, **kwargs: Any) -> dict:
        raise AssertionError("the judge is not asked when a reply made a tool call")

    out = replay_continuation(
        tree,
        ids[-1],
        ids[1],
        MODEL,
        completion=reads,
        judge_model="openai/j",
        judge_completion=no_judge,
    )
    assert out["continuation_agreement"] is True and out["agreement_basis"] == "tool call"
    assert out["agreement_log"] is None


def test_compare_passes_its_judge_to_the_replay_and_keeps_the_exchange() -> None:
    tree, ids = _tree()
    tree.append_message(user("Yes, update them."))
    judge = {
        "judge_model": "openai/judge-x",
        "judge_grader": "match",
        "judge_options": {"mock_response": "GRADE: 5 - the same next step"},
    }
    study = {"model": MODEL, "at": ids[-1], "replay": True, "replay_completion": by_context}
    frame = compare_strategies({"s": tree}, ["window:10"], **study, **judge, progress=False)
    row = frame.iloc[0]
    assert row["error"] is None and row["continuation_agreement"] == True  # noqa: E712
    assert row["agreement_basis"] == "judge openai/judge-x" and row["agreement_score"] == 5.0
    [entry] = frame.attrs["replay_log"]
    assert entry["session"] == "s" and entry["reply"] == "GRADE: 5 - the same next step"
    # Without a judge the table says why the agreement is empty.
    plain = compare_strategies({"s": tree}, ["window:10"], **study, progress=False)
    assert plain["continuation_agreement"][0] is None
    assert plain["agreement_note"][0].startswith("neither reply made a tool call")
    assert plain.attrs["replay_log"] == []


def test_the_replay_judge_shares_nothing_with_the_strategies() -> None:
    """The judge sees only the two replies: replay.py imports no strategy, no summarizer and
    no probe heuristic."""
    imported = set()
    for node in ast.walk(ast.parse(inspect.getsource(replay))):
        if isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").lstrip("."))
            imported.update(alias.name for alias in node.names)
    assert not imported & {"strategies", "compaction", "models.extractive", "probes", "policies"}
