"""The policies as research strategies, side by side with plain summarization."""

from __future__ import annotations

from pinb_testkit import user
from policy_helpers import Forgetful, filler_turns

from pi_nb.compaction import CompactionSettings
from pi_nb.research.compare import compare_strategies
from pi_nb.research.strategies import (
    STRATEGIES,
    Compactor,
    PinnedSummary,
    RelevancePruning,
    constraint_sentences,
    get_strategy,
)

SETTINGS = CompactionSettings(reserve_tokens=2000, keep_recent_tokens=300)


def history(tree):
    filler_turns(tree, 0, 2)
    tree.append_message(user("Money must never be a float. Only touch files under shop/."))
    filler_turns(tree, 2, 4)
    tree.append_message(user("Why does parse_price in module_5 fail?"))


def test_constraint_sentences():
    messages = [
        user("Hello there. Money must never be a float.\nOnly touch shop/."),
        {"role": "assistant", "content": [{"type": "text", "text": "I must go."}]},
    ]
    assert constraint_sentences(messages) == ["Money must never be a float.", "Only touch shop/."]


def test_both_are_compactors_in_the_one_registry():
    assert isinstance(PinnedSummary(), Compactor)
    assert isinstance(RelevancePruning(), Compactor)
    assert STRATEGIES["pinned"] == (PinnedSummary, {})
    assert STRATEGIES["prune"] == (RelevancePruning, {})
    assert get_strategy("prune:4000") == RelevancePruning(budget=4000)
    assert get_strategy("pinned:false") == PinnedSummary(auto_constraints=False)


def test_compared_side_by_side(mem_tree):
    history(mem_tree)
    forgetful = Forgetful()
    frame = compare_strategies(
        mem_tree,
        ["pi", PinnedSummary(), RelevancePruning(ratio=0.5, keep_last=1)],
        settings=SETTINGS,
        completion=forgetful,
        window=32768,
        progress=False,
    )
    rows = {r["strategy"]: r for r in frame.to_dict("records")}
    assert all(r["error"] is None for r in rows.values()), frame["error"].tolist()
    assert rows["pinned"]["compacted"] and rows["prune"]["compacted"]
    # The forgetful summarizer loses the user's constraints; the pinned summary keeps them.
    assert rows["pinned"]["probe_recall"] > rows["pi"]["probe_recall"]
    # Pruning saves tokens without a model call.
    assert rows["prune"]["tokens_after"] < rows["prune"]["tokens_before"]
    assert rows["prune"]["model_calls"] == 0


def test_prune_strategy_branch_holds_only_context_edits(mem_tree):
    history(mem_tree)
    fork = mem_tree.leaf_id
    result = RelevancePruning(budget=300, keep_last=0).compact(mem_tree, model="", fork_id=fork)
    assert result.entries and all(e["type"] == "context_edit" for e in result.entries)
    assert result.details["pruned"] == [e["targetId"] for e in result.entries]
    assert result.tokens_after < result.tokens_before
    mem_tree.branch(fork)  # the fork itself is untouched
    assert all(e["type"] != "context_edit" for e in mem_tree.get_branch())
