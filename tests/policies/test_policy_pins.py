"""Pins: protected facts and messages survive every compaction (PinPolicy)."""

from __future__ import annotations

from typing import Any

import pytest
from pinb_testkit import user
from policy_helpers import MODEL, Forgetful, add_turn, filler_turns, reply

from pi_nb.compaction import CompactionSettings, compact
from pi_nb.hooks import Hooks
from pi_nb.messages import content_text
from pi_nb.policies import PIN_TYPE, UNPIN_TYPE, PinPolicy, fact_in, pin, pins, unpin
from pi_nb.policies.pins import (
    PINNED_FACTS_HEADING,
    PINNED_MESSAGES_HEADING,
    disable_pins,
    enable_pins,
    normalize_fact,
    strip_pinned_sections,
)
from pi_nb.session import SessionTree

SETTINGS = CompactionSettings(reserve_tokens=2000, keep_recent_tokens=300)
FACT = "Money must never be a float: use Decimal everywhere"
RULE = "The ledger table stores prices as integer cents."


def context_text(tree: SessionTree) -> str:
    parts = []
    for m in tree.projection().messages:
        parts.append(str(m["summary"]) if "summary" in m else content_text(m.get("content"), "\n"))
    return "\n".join(parts)


def run_compaction(tree: SessionTree, hooks: Hooks | None, completion: Any) -> Any:
    return compact(tree, MODEL, settings=SETTINGS, hooks=hooks, completion=completion, window=32768)


def seed(tree: SessionTree) -> str:
    """A history where the constraint is stated once, early; returns its entry id."""
    filler_turns(tree, 0, 2)
    rule = tree.append_message(user(f"Note for the whole task: {RULE}"))
    tree.append_message(
        {**reply("Understood, integer cents."), "provider": "anthropic", "model": "x"}
    )
    filler_turns(tree, 2, 2)
    return rule["id"]


@pytest.mark.parametrize("k", [3, 5])
def test_pins_survive_k_compactions_with_forgetful_summaries(mem_tree, k):
    tree = mem_tree
    rule_id = seed(tree)
    fact_pin = pin(tree, text=FACT)
    message_pin = pin(tree, entry_id=rule_id)
    forgetful = Forgetful()
    hooks = Hooks()
    policy = PinPolicy(model=MODEL, completion=forgetful).install(hooks)

    for round_ in range(k):
        filler_turns(tree, 10 * (round_ + 1), 3)
        result = run_compaction(tree, hooks, forgetful)
        text = context_text(tree)
        assert result.from_hook is True
        assert result.entry["fromHook"] is True
        assert fact_in(FACT, text), f"pinned fact lost at compaction {round_ + 1}"
        assert RULE in text, f"pinned message lost at compaction {round_ + 1}"
        record = result.details["pins"]
        assert [r["id"] for r in record["restored"]] == [fact_pin.id]
        assert record["restored"][0]["how"] == "appended"
        assert [v["entryId"] for v in record["verbatim"]] == [rule_id]
        assert result.summary.count(PINNED_FACTS_HEADING) == 1
        assert result.summary.count(PINNED_MESSAGES_HEADING) == 1
        # The summarizer itself never kept them: the policy restored them.
        assert not fact_in(FACT, strip_pinned_sections(result.summary))
    assert len(policy.outcomes) == k
    assert all(o.verbatim == [message_pin] for o in policy.outcomes)


def test_without_the_policy_the_same_summaries_lose_the_pins(mem_tree):
    """The control: the forgetful summarizer really drops the facts."""
    tree = mem_tree
    seed(tree)
    pin(tree, text=FACT)
    forgetful = Forgetful()
    for round_ in range(3):
        filler_turns(tree, 10 * (round_ + 1), 3)
        result = run_compaction(tree, Hooks(), forgetful)
        assert result.from_hook is False
    text = context_text(tree)
    assert not fact_in(FACT, text)
    assert RULE not in text


def test_a_fact_the_summary_keeps_is_not_restored(mem_tree):
    tree = mem_tree
    seed(tree)
    pin(tree, text="integer cents")
    keeper = Forgetful(keep=("integer cents",))
    hooks = Hooks()
    PinPolicy(model=MODEL, completion=keeper).install(hooks)
    filler_turns(tree, 10, 3)
    result = run_compaction(tree, hooks, keeper)
    record = result.details["pins"]
    assert record["restored"] == []
    assert len(record["present"]) == 1
    assert PINNED_FACTS_HEADING not in result.summary


def test_unpinned_facts_are_no_longer_restored(mem_tree):
    tree = mem_tree
    rule_id = seed(tree)
    keep_pin = pin(tree, text=FACT)
    drop_pin = pin(tree, text="Deploy only on Tuesdays")
    msg_pin = pin(tree, entry_id=rule_id)
    forgetful = Forgetful()
    hooks = Hooks()
    PinPolicy(model=MODEL, completion=forgetful).install(hooks)
    filler_turns(tree, 10, 3)
    first = run_compaction(tree, hooks, forgetful)
    assert fact_in("Deploy only on Tuesdays", first.summary)
    assert RULE in first.summary

    assert unpin(tree, drop_pin.id) == drop_pin
    assert unpin(tree, rule_id) == msg_pin  # by the pinned message's entry id
    assert pins(tree) == [keep_pin]
    filler_turns(tree, 20, 3)
    second = run_compaction(tree, hooks, forgetful)
    text = context_text(tree)
    assert fact_in(FACT, text)
    assert not fact_in("Deploy only on Tuesdays", text)
    assert RULE not in text
    assert [r["id"] for r in second.details["pins"]["restored"]] == [keep_pin.id]
    assert second.details["pins"]["verbatim"] == []
    with pytest.raises(KeyError):
        unpin(tree, drop_pin.id)


def test_pins_persist_in_the_file_and_follow_the_branch(tree, tmp_path):
    seed(tree)
    before = tree.leaf_id
    fact = pin(tree, text=FACT)
    same = pin(tree, text="  money MUST never be a float:  use decimal everywhere ")
    assert same == fact  # normalized duplicate
    unpin(tree, pin(tree, text="temporary").id)
    tree.flush()
    reopened = SessionTree.open(tmp_path / "session.jsonl")
    assert pins(reopened) == [fact]
    kinds = [e.get("customType") for e in reopened.entries if e["type"] == "custom"]
    assert kinds == [PIN_TYPE, PIN_TYPE, UNPIN_TYPE]
    reopened.branch(before)  # a branch without the pin entries
    assert pins(reopened) == []


def test_pin_validation(mem_tree):
    tree = mem_tree
    seed(tree)
    with pytest.raises(ValueError):
        pin(tree)
    with pytest.raises(ValueError):
        pin(tree, text="x", entry_id=tree.leaf_id)
    with pytest.raises(ValueError):
        pin(tree, text="   ")
    custom = tree.append_custom("other", {"x": 1})
    with pytest.raises(ValueError):
        pin(tree, entry_id=custom["id"])
    with pytest.raises(KeyError):
        pin(tree, entry_id="nope")
    first = pin(tree, entry_id=tree.entries[0]["id"])
    assert pin(tree, entry_id=tree.entries[0]["id"]) == first


def test_a_pinned_message_still_kept_verbatim_is_not_duplicated(mem_tree):
    tree = mem_tree
    seed(tree)
    filler_turns(tree, 10, 3)
    recent = tree.append_message(user("Latest instruction: keep the CLI flags stable."))
    pinned = pin(tree, entry_id=recent["id"])
    forgetful = Forgetful()
    hooks = Hooks()
    policy = PinPolicy(model=MODEL, completion=forgetful).install(hooks)
    result = run_compaction(tree, hooks, forgetful)
    assert policy.outcomes[-1].kept == [pinned]
    assert PINNED_MESSAGES_HEADING not in result.summary
    assert "keep the CLI flags stable" in context_text(tree)


def test_focused_restore_asks_the_summarizer_first(mem_tree):
    tree = mem_tree
    seed(tree)
    pin(tree, text=FACT)
    obedient = Forgetful(obey_focus=True)
    hooks = Hooks()
    policy = PinPolicy(model=MODEL, completion=obedient, restore="focused").install(hooks)
    filler_turns(tree, 10, 3)
    result = run_compaction(tree, hooks, obedient)
    focused = [r for r in obedient.requests if "Additional focus:" in r]
    assert focused and len(focused) < obedient.calls  # a base summary, then a focused one
    assert FACT in focused[0]
    assert policy.outcomes[-1].calls == obedient.calls
    assert result.details["pins"]["restored"][0]["how"] == "focused"
    assert PINNED_FACTS_HEADING not in result.summary
    assert fact_in(FACT, result.summary)
    # A summarizer that ignores the focus: the fact is appended after all.
    deaf = Forgetful()
    hooks2 = Hooks()
    PinPolicy(model=MODEL, completion=deaf, restore="focused").install(hooks2)
    filler_turns(tree, 20, 3)
    again = run_compaction(tree, hooks2, deaf)
    assert again.details["pins"]["restored"][0]["how"] == "appended"
    assert any("Additional focus:" in r for r in deaf.requests)


def test_wraps_a_supplied_summarizer(mem_tree):
    tree = mem_tree
    seed(tree)
    pin(tree, text=FACT)
    seen = []

    def summarizer(event):
        seen.append(event.preparation.first_kept_entry_id)
        return {"summary": "My own summary.", "details": {"mine": True}}

    hooks = Hooks()
    PinPolicy(summarizer=summarizer).install(hooks)
    filler_turns(tree, 10, 3)
    result = run_compaction(tree, hooks, None)
    assert result.summary.startswith("My own summary.")
    assert fact_in(FACT, result.summary)
    assert result.first_kept_entry_id == seen[0]
    assert result.details["mine"] is True and "pins" in result.details


def test_without_pins_the_default_compaction_runs_unchanged(mem_tree):
    tree = mem_tree
    seed(tree)
    forgetful = Forgetful()
    hooks = Hooks()
    policy = PinPolicy(model=MODEL, completion=forgetful).install(hooks)
    filler_turns(tree, 10, 3)
    result = run_compaction(tree, hooks, forgetful)
    assert result.from_hook is False
    assert policy.outcomes == []
    assert "pins" not in (result.details or {})


def test_file_lists_are_carried_across_policy_compactions(mem_tree):
    tree = mem_tree
    seed(tree)
    pin(tree, text=FACT)
    forgetful = Forgetful()
    hooks = Hooks()
    PinPolicy(model=MODEL, completion=forgetful).install(hooks)
    filler_turns(tree, 10, 3)
    first = run_compaction(tree, hooks, forgetful)
    assert "src/module_0.py" in first.details["readFiles"]
    filler_turns(tree, 20, 3)
    second = run_compaction(tree, hooks, forgetful)
    assert "src/module_0.py" in second.details["readFiles"]  # from the earlier compaction
    assert "src/module_10.py" in second.details["readFiles"]
    assert second.summary.rstrip().endswith("</read-files>")
    assert second.summary.index(PINNED_FACTS_HEADING) < second.summary.index("<read-files>")


def test_strip_pinned_sections_leaves_other_text_alone():
    text = "## Goal\nx\n\n\n## Next Steps\n1. y"
    assert strip_pinned_sections(text) == text
    pinned = (
        "## Goal\nx\n\n## Pinned facts\nintro\n- a\n\n## Pinned messages\nintro\n\n"
        '<pinned-message entry="e1" role="user">\nhi\n</pinned-message>\n\n## Next Steps\n1. y'
    )
    assert strip_pinned_sections(pinned) == "## Goal\nx\n\n## Next Steps\n1. y"
    assert normalize_fact("Don’t  USE floats!") == normalize_fact("dont use floats")


def test_enable_pins_on_a_session_uses_its_model(tmp_path):
    from pi_nb.agent import Session

    session = Session.new(
        tmp_path / "s.jsonl",
        cwd=tmp_path,
        no_tools=True,
        window=32768,
        reserve=2000,
        keep=200,
        script=["Understood."] * 6,
    )
    policy = enable_pins(session)
    assert enable_pins(session) is policy
    for i in range(4):
        add_turn(session.tree, f"Turn {i}. " + "More detail here. " * 20, "ok " * 40)
    session.prompt("Please continue with the next part of the work.")
    pin(session, text="The staging database is read-only")
    result = session.compact()
    assert result.from_hook is True
    assert "pins" in result.details
    assert fact_in("The staging database is read-only", context_text(session.tree))
    assert disable_pins(session) is True
    assert disable_pins(session) is False
    assert not policy.installed


@pytest.mark.parametrize("release", ["1.6", "1.3"])
def test_default_compaction_asks_what_the_built_in_compaction_asks(mem_tree, release):
    """``default_compaction`` (what a policy wraps) makes the built-in compaction's calls:
    the same budgets under either ``pi_release`` and, under "1.6", the focus for the turn
    prefix too."""
    from pinb_testkit import assistant, tool_call, tool_result

    from pi_nb.compaction import prepare_compaction, preview_compaction
    from pi_nb.policies.pins import default_compaction

    filler_turns(mem_tree, 0, 2)
    mem_tree.append_message(user("One long turn: read every file."))
    for i in range(4):
        call = f"call_big_{i}"
        mem_tree.append_message(assistant("", tokens=0, calls=[tool_call(call, "read", path=f"b{i}.py")]))
        mem_tree.append_message(tool_result(call, "B" * 3000, "read"))
    mem_tree.append_message(assistant("Read them all.", tokens=0))
    settings = CompactionSettings(reserve_tokens=2000, keep_recent_tokens=1000, pi_release=release)
    preparation = prepare_compaction(mem_tree.get_branch(), settings)
    assert preparation is not None and preparation.is_split_turn

    def capture(into: list):
        def complete(model, messages, **kwargs):
            into.append((kwargs.get("max_tokens"), messages[-1]["content"]))
            return reply("## Goal\nsummary")

        return complete

    policy_calls: list = []
    built_in_calls: list = []
    event = {
        "preparation": preparation,
        "custom_instructions": "KEEP-PATHS",
        "branch_entries": mem_tree.get_branch(),
    }
    default_compaction(event, model=MODEL, window=32768, completion=capture(policy_calls))
    preview_compaction(
        mem_tree, MODEL, settings=settings, focus="KEEP-PATHS", window=32768,
        completion=capture(built_in_calls),
    )  # fmt: skip
    assert policy_calls == built_in_calls and len(policy_calls) == 2
    prefix_prompt = policy_calls[1][1]
    assert prefix_prompt.endswith("Additional focus: KEEP-PATHS") == (release == "1.6")
