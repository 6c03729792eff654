"""The task-state note: explicit edits, persisted as custom entries, injected into every
request through the ``context`` hook, never produced by summarization."""

from __future__ import annotations

import json

from policy_helpers import add_turn

from pi_nb.agent import Session
from pi_nb.models.scripted import Script
from pi_nb.policies import (
    TASK_STATE_TYPE,
    enable_task_state,
    task_state,
    update_task_state,
)
from pi_nb.policies.task_state import (
    TASK_STATE_TOOL,
    clear_task_state,
    disable_task_state,
)
from pi_nb.session import SessionTree


def make(tmp_path, turns, **opts):
    script = Script(turns)
    session = Session.new(
        tmp_path / "s.jsonl", cwd=tmp_path, window=32768, tools=[], script=script, **opts
    )
    return session, script


def request_texts(request: dict) -> list[str]:
    out = []
    for m in request["messages"]:
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
        out.append(str(content or ""))
    return out


def test_edits_are_explicit_persisted_and_branch_scoped(tree, tmp_path):
    assert task_state(tree).empty
    tree.append_message({"role": "user", "content": "hi", "timestamp": 1})
    root_leaf = tree.leaf_id
    state = update_task_state(
        tree, goal="Port pricing to Decimal", add_constraints=["Money is never a float"]
    )
    assert state.by == "user" and state.entry_id is not None
    state = update_task_state(tree, add_decisions="Import Decimal at module level", by="agent")
    assert state.constraints == ["Money is never a float"]
    assert state.decisions == ["Import Decimal at module level"]
    assert state.by == "agent"
    unchanged = update_task_state(tree, add_constraints=["money is NEVER a float."])
    assert unchanged.entry_id == state.entry_id  # no-op: no entry written
    state = update_task_state(tree, remove_constraints=["Money is never a float"])
    assert state.constraints == []
    tree.flush()
    reopened = SessionTree.open(tmp_path / "session.jsonl")
    assert task_state(reopened).goal == "Port pricing to Decimal"
    assert task_state(reopened).decisions == ["Import Decimal at module level"]
    customs = [e for e in reopened.entries if e["type"] == "custom"]
    assert [e["customType"] for e in customs] == [TASK_STATE_TYPE] * 3
    reopened.branch(root_leaf)
    assert task_state(reopened).empty
    assert clear_task_state(tree).empty


def test_injected_into_every_request_but_never_stored_as_a_message(tmp_path):
    session, script = make(tmp_path, ["first answer", "second answer"])
    policy = enable_task_state(session, tool=False)
    assert enable_task_state(session) is policy
    update_task_state(session, goal="Ship v2", add_constraints=["Never touch the public API"])
    session.prompt("Start please.")
    update_task_state(session, add_decisions=["Use feature flags"])
    session.prompt("Next please.")
    requests = [r for r in script.requests if r["turn"] is not None]
    assert len(requests) == 2
    for request, decisions in zip(requests, (False, True), strict=True):
        texts = request_texts(request)
        first = next(i for i, m in enumerate(request["messages"]) if m["role"] != "system")
        assert "<task-state>" in texts[first]
        assert "Never touch the public API" in texts[first]
        assert ("Use feature flags" in texts[first]) is decisions
    assert policy.injected == 2
    # The file holds the edits as custom entries only: no message carries the note.
    lines = (tmp_path / "s.jsonl").read_text().splitlines()
    messages = [json.loads(x) for x in lines if '"type":"message"' in x]
    assert all("<task-state>" not in json.dumps(m) for m in messages)
    assert all("<task-state>" not in json.dumps(m) for m in session.context().messages)


def test_survives_compaction_and_is_not_summarized(tmp_path):
    session, script = make(tmp_path, ["ok"] * 4, reserve=2000, keep=200)
    enable_task_state(session, tool=False)
    update_task_state(session, goal="Keep the rate limit at 40 requests per minute")
    for i in range(5):
        add_turn(session.tree, f"Turn {i}. " + "Details about the work. " * 15, "fine " * 50)
    result = session.compact()
    assert "rate limit" not in result.summary  # the summarizer never saw the note
    session.prompt("What next?")
    request = [r for r in script.requests if r["turn"] is not None][-1]
    assert any("rate limit at 40 requests" in t for t in request_texts(request))


def test_the_agent_edits_it_with_its_tool(tmp_path):
    call = {
        "name": TASK_STATE_TOOL,
        "arguments": {"goal": "Migrate to Postgres", "add_constraints": ["Zero downtime"]},
    }
    session, script = make(tmp_path, [{"text": "Recording.", "tool_calls": [call]}, "Done."])
    enable_task_state(session)
    assert [t.name for t in session.tools] == [TASK_STATE_TOOL]
    result = session.prompt("We move to Postgres; no downtime allowed.")
    assert result.ok, result.error
    state = task_state(session)
    assert state.goal == "Migrate to Postgres"
    assert state.constraints == ["Zero downtime"]
    assert state.by == "agent"
    follow = [r for r in script.requests if r["turn"] is not None][-1]
    assert any("Zero downtime" in t for t in request_texts(follow))
    assert disable_task_state(session) is True
    assert session.tools == []


def test_before_prompt_position(tmp_path):
    session, script = make(tmp_path, ["a", "b"])
    enable_task_state(session, position="before_prompt", tool=False)
    update_task_state(session, goal="Goal X")
    session.prompt("one")
    session.prompt("two")
    request = [r for r in script.requests if r["turn"] is not None][-1]
    texts = request_texts(request)
    index = next(i for i, t in enumerate(texts) if "<task-state>" in t)
    assert texts[index + 1] == "two"
    assert sum("<task-state>" in t for t in texts) == 1
