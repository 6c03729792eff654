"""Files written with the policies open in Pi 1.3.0 and 1.6.0 and project exactly as in pi_nb."""

from __future__ import annotations

import json

import pytest
from pinb_testkit import user
from policy_helpers import MODEL, Forgetful, filler_turns

from pi_nb.compaction import CompactionSettings, compact
from pi_nb.hooks import Hooks
from pi_nb.policies import PinPolicy, RelevancePruner, pin, unpin, update_task_state

pytestmark = pytest.mark.compat

FACT = "Money must never be a float: use Decimal everywhere"
RULE = "The ledger table stores prices as integer cents."


def test_files_with_pins_task_state_and_recorded_pruning_project_like_pi(
    tree, tmp_path, pi_oracle, compat
):
    settings = CompactionSettings(reserve_tokens=2000, keep_recent_tokens=300)
    forgetful = Forgetful()
    hooks = Hooks()
    PinPolicy(model=MODEL, completion=forgetful, window=32768).install(hooks)
    RelevancePruner(tree, budget=400, keep_last=1, record=True).install(hooks)

    filler_turns(tree, 0, 2)
    rule = tree.append_message(user(f"Note for the whole task: {RULE}"))
    pin(tree, text=FACT)
    pin(tree, entry_id=rule["id"])
    unpin(tree, pin(tree, text="Deploy only on Tuesdays").id)
    update_task_state(tree, goal="Port pricing to Decimal", add_constraints=["Zero downtime"])
    filler_turns(tree, 2, 3)
    first = compact(tree, MODEL, settings=settings, hooks=hooks, completion=forgetful, window=32768)
    filler_turns(tree, 10, 3)
    update_task_state(tree, add_decisions=["Keep the public API"], by="agent")
    hooks.run_context(tree.projection().messages)  # records its pruning as context edits
    second = compact(
        tree, MODEL, settings=settings, hooks=hooks, completion=forgetful, window=32768
    )
    filler_turns(tree, 20, 2)
    hooks.run_context(tree.projection().messages)
    tree.flush()

    assert first.from_hook and second.from_hook
    entries = tree.entries
    assert any(e["type"] == "context_edit" for e in entries)
    assert {e.get("customType") for e in entries if e["type"] == "custom"} == {
        "pi_nb.pin",
        "pi_nb.unpin",
        "pi_nb.task_state",
    }
    path = tmp_path / "session.jsonl"
    marks = [
        e["id"]
        for e in entries
        if e["type"] in ("compaction", "context_edit", "custom") or e is entries[-1]
    ]
    leaves = [None, *marks]
    expected = pi_oracle.context_many(path, leaves)
    problems = []
    for leaf, pi in zip(leaves, expected, strict=True):
        ours = compat.pi_nb_context(path, leaf)
        diff = compat.describe_mismatch(ours, pi)
        if diff:
            problems.append(f"leaf={leaf}: {diff}")
    assert not problems, "\n\n".join(problems)
    # Pi itself sees the pinned fact and the pinned message, never the task-state note.
    latest = json.dumps(expected[0])
    assert FACT in latest
    assert RULE in latest
    assert "Deploy only on Tuesdays" not in latest
    assert "task-state" not in latest and "Zero downtime" not in latest
