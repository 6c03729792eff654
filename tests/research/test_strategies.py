"""Every strategy on a fixed history: what it keeps and what it drops, on its own branch."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from pinb_testkit import assistant, new_tree, user
from research_kit import build_history

from pi_nb.compaction import DEFAULT_PROMPTS, CompactionSettings
from pi_nb.research.costs import usage_cost
from pi_nb.research.strategies import (
    DEFAULT_STRATEGIES,
    Compactor,
    Extractive,
    Hybrid,
    ObservationMasking,
    PiSummary,
    SlidingWindow,
    callable_strategy,
    context_size,
    get_strategy,
    strategy_key,
)
from pi_nb.tokens import estimate_tokens

MODEL = "pinb/scripted"
SETTINGS = CompactionSettings(keep_recent_tokens=250, reserve_tokens=4000)


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if b.get("type") == "text")


def _by_entry(tree: Any, leaf: str) -> dict[str, dict[str, Any]]:
    """Projected messages of the branch ending at ``leaf``, by the entry that made them."""
    return {pe.id: pe.messages[0] for pe in tree.projection(leaf).entries if pe.messages}


def test_masking_keeps_the_last_n_results_and_replaces_older_ones(history) -> None:
    tree, ids = history
    fork = tree.leaf_id
    before = _by_entry(tree, fork)
    result = ObservationMasking(keep_last=2).compact(tree, model=MODEL)
    after = _by_entry(tree, result.leaf_id)
    # r4, r5 are the last two: verbatim. r1, r3 are long and older: placeholders.
    assert _text(after[ids["r4"]]) == _text(before[ids["r4"]])
    assert _text(after[ids["r5"]]) == _text(before[ids["r5"]])
    for name, tool in (("r1", "read"), ("r3", "bash")):
        text = _text(after[ids[name]])
        assert text.startswith(f"[{tool} output omitted to save context")
        assert str(estimate_tokens(before[ids[name]])) in text
    # r2 is shorter than a placeholder: left alone.
    assert _text(after[ids["r2"]]) == "Applied 1 replacement"
    assert result.details["masked"] == [ids["r1"], ids["r3"]]
    assert {e["type"] for e in result.entries} == {"context_edit"}
    # Assistant turns (calls, reasoning) are all still there.
    assert [m["role"] for m in tree.projection(result.leaf_id).messages] == [
        m["role"] for m in tree.projection(fork).messages
    ]
    assert result.calls == 0 and result.summary is None
    assert result.tokens_after < result.tokens_before
    assert result.tokens_before == context_size(tree, fork)


def test_masking_twice_does_not_mask_again(history) -> None:
    tree, _ = history
    first = ObservationMasking(keep_last=2).compact(tree, model=MODEL)
    second = ObservationMasking(keep_last=2).compact(tree, model=MODEL, fork_id=first.leaf_id)
    assert second.entries == [] and not second.compacted
    assert second.leaf_id == first.leaf_id


def test_window_keeps_about_k_recent_tokens(history) -> None:
    tree, ids = history
    fork = tree.leaf_id
    result = SlidingWindow(keep_tokens=300).compact(tree, model=MODEL, settings=SETTINGS)
    messages = tree.projection(result.leaf_id).messages
    assert messages[0]["role"] == "compactionSummary"
    assert "\n" not in result.summary and "dropped" in result.summary
    kept = messages[1:]
    kept_tokens = sum(estimate_tokens(m) for m in kept)
    # Pi's cut: at least K tokens counted back from the end, then moved forward to a valid
    # cut point — never more than K plus the message that crossed the budget.
    largest = max(estimate_tokens(m) for m in tree.projection(fork).messages)
    assert kept_tokens <= 300 + largest
    assert kept[0]["role"] in ("user", "assistant")
    kept_ids = set(_by_entry(tree, result.leaf_id))
    assert ids["u1"] not in kept_ids and ids["a7"] in kept_ids
    assert result.details["firstKeptEntryId"] == result.entries[0]["firstKeptEntryId"]
    assert result.calls == 0 and result.entries[0]["fromHook"] is True
    assert result.details["droppedMessages"] == len(tree.projection(fork).messages) - len(kept)


def test_window_larger_than_history_does_nothing(history) -> None:
    tree, _ = history
    fork = tree.leaf_id
    result = SlidingWindow(keep_tokens=100_000).compact(tree, model=MODEL)
    assert not result.compacted and result.leaf_id == fork and result.note


def test_pi_summary_structured_and_incremental(history) -> None:
    tree, _ = history
    first = PiSummary().compact(tree, model=MODEL, settings=SETTINGS)
    assert first.compacted and first.calls >= 1
    for heading in (
        "## Goal",
        "## Constraints & Preferences",
        "## Progress",
        "## Key Decisions",
        "## Next Steps",
        "## Critical Context",
    ):
        assert heading in first.summary
    assert "Money must never be a float" in first.summary
    assert "<modified-files>\nshop/pricing.py" in first.summary
    entry = first.entries[-1]
    assert entry["type"] == "compaction" and entry["details"]["modifiedFiles"] == [
        "shop/pricing.py"
    ]
    # More history, then compact again: the update keeps the first goal.
    _more_work(tree)
    second = PiSummary().compact(tree, model=MODEL, settings=SETTINGS)
    assert second.compacted
    goal = first.summary.split("## Goal\n")[1].split("\n")[0]
    assert goal in second.summary


def _more_work(tree: Any) -> None:
    """Two more turns, each larger than the keep-recent budget."""
    for text in ("Also support JPY, which has no minor unit.", "And document it."):
        tree.append_message(user(text))
        tree.append_message(assistant("Working on that request now. " * 40, tokens=0))


def _recording(calls: list[str]):
    def completion(model: str, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        from pi_nb.llm import complete

        calls.append(messages[-1]["content"])
        return complete(model, messages, stream=False, **kwargs)

    return completion


def test_from_scratch_never_sees_the_previous_summary(history) -> None:
    tree, _ = history
    PiSummary().compact(tree, model=MODEL, settings=SETTINGS)
    _more_work(tree)
    fork = tree.leaf_id
    incremental: list[str] = []
    scratch: list[str] = []
    PiSummary().compact(
        tree, model=MODEL, settings=SETTINGS, completion=_recording(incremental), fork_id=fork
    )
    result = PiSummary(incremental=False).compact(
        tree, model=MODEL, settings=SETTINGS, completion=_recording(scratch), fork_id=fork
    )
    assert any("<previous-summary>" in text for text in incremental)
    assert scratch and not any("<previous-summary>" in text for text in scratch)
    # From scratch reads the original first request again (it was summarized away before).
    assert any("Fix parse_price in shop/pricing.py" in text for text in scratch)
    assert result.entries[-1]["details"]["strategy"] == "pi-scratch"


def test_extractive_is_a_summary_without_model_calls(history) -> None:
    tree, _ = history
    result = Extractive().compact(tree, model=MODEL, settings=SETTINGS)
    assert result.compacted and result.calls == 0 and result.usage is None
    assert "## Goal\nFix parse_price in shop/pricing.py." in result.summary
    assert "NameError: name 'Decimal' is not defined" in result.summary
    assert result.entries[-1]["details"]["strategy"] == "extractive"


def test_callable_strategy_gets_span_previous_summary_and_instructions(history) -> None:
    tree, _ = history
    seen: list[tuple[int, str | None, str]] = []

    def summarize(messages: list[dict], previous: str | None, instructions: str) -> str:
        seen.append((len(messages), previous, instructions))
        return f"SUMMARY {len(seen)}: {len(messages)} messages"

    strategy = callable_strategy(summarize, "mine")
    assert strategy.name == "mine" and isinstance(strategy, Compactor)
    first = strategy.compact(tree, model=MODEL, settings=SETTINGS)
    assert first.summary.startswith("SUMMARY 1:") and "<modified-files>" in first.summary
    count, previous, instructions = seen[0]
    assert count > 0 and previous is None and instructions == DEFAULT_PROMPTS.initial
    _more_work(tree)
    strategy.compact(tree, model=MODEL, settings=SETTINGS)
    assert seen[1][1] == first.summary and seen[1][2] == DEFAULT_PROMPTS.update


def test_hybrid_masks_and_summarizes_only_over_budget(history) -> None:
    tree, _ = history
    fork = tree.leaf_id
    cheap = Hybrid(keep_last=1, budget=100_000).compact(tree, model=MODEL, settings=SETTINGS)
    assert cheap.calls == 0 and cheap.summary is None
    assert {e["type"] for e in cheap.entries} == {"context_edit"}
    assert cheap.details["summarized"] is False
    tight = Hybrid(keep_last=1, budget=100).compact(
        tree, model=MODEL, settings=SETTINGS, fork_id=fork
    )
    assert tight.calls >= 1 and tight.details["summarized"] is True
    assert [e["type"] for e in tight.entries][-1] == "compaction"
    assert tight.details["tokensAfterMask"] > 100


def test_strategies_share_the_fork_and_never_see_each_other(history) -> None:
    tree, _ = history
    fork = tree.leaf_id
    fork_context = [dict(m) for m in tree.projection(fork).messages]
    results = [
        get_strategy(spec).compact(tree, model=MODEL, settings=SETTINGS, fork_id=fork)
        for spec in DEFAULT_STRATEGIES
    ]
    assert all(r.fork_id == fork for r in results)
    assert len({r.leaf_id for r in results if r.compacted}) == sum(r.compacted for r in results)
    own = {r.strategy: {e["id"] for e in r.entries} for r in results}
    for result in results:
        path = {e["id"] for e in tree.get_branch(result.leaf_id)}
        assert fork in path
        for other, entries in own.items():
            if other != result.strategy:
                assert not (entries & path), (result.strategy, other)
    assert [dict(m) for m in tree.projection(fork).messages] == fork_context


def test_nothing_to_compact_is_not_an_error() -> None:
    tree = new_tree()
    build = tree.append_message(user("hi"))
    tree.append_message(assistant("hello", tokens=0))
    for spec in ("pi", "pi-scratch", "window", "extractive"):
        result = get_strategy(spec).compact(tree, model=MODEL, fork_id=tree.leaf_id)
        assert not result.compacted and result.note and result.entries == []
    assert build["id"] in tree


def test_get_strategy_specs() -> None:
    assert get_strategy("mask:5") == ObservationMasking(keep_last=5)
    assert get_strategy("window:keep_tokens=4000") == SlidingWindow(keep_tokens=4000)
    assert get_strategy("hybrid:keep_last=2,budget=100") == Hybrid(keep_last=2, budget=100)
    assert get_strategy("pi-scratch") == PiSummary(incremental=False)
    assert get_strategy("pi").name == "pi"
    for bad, message in (
        ("magic", "unknown strategy"),
        ("mask:depth=3", "no parameter"),
        ("mask:keep_last=x", "non-negative integer"),
        ("hybrid:2,3", "only the first parameter"),
    ):
        with pytest.raises(ValueError, match=message):
            get_strategy(bad)
    assert strategy_key(get_strategy("mask:5")) != strategy_key(get_strategy("mask:4"))


def test_fixed_history_is_fixed() -> None:
    a, b = new_tree(), new_tree()
    build_history(a)
    build_history(b)
    assert [e["message"] for e in a.entries] == [e["message"] for e in b.entries]
    assert context_size(a, a.leaf_id) == context_size(b, b.leaf_id) > 1500


@pytest.mark.parametrize("release", ["1.6", "1.3"])
def test_from_scratch_follows_the_pi_release_setting(history, release) -> None:
    """The from-scratch summary (its own generate_summary call) uses the budget rule of
    ``settings.pi_release``, like the incremental one (the built-in compaction)."""
    tree, _ = history
    settings = dataclasses.replace(SETTINGS, pi_release=release)
    budgets: dict[str, list[Any]] = {"pi": [], "pi-scratch": []}

    def recording(into: list[Any]):
        def completion(model: str, messages: list[dict[str, Any]], **kwargs: Any) -> dict:
            into.append(kwargs.get("max_tokens"))
            from pi_nb.llm import complete

            return complete(model, messages, stream=False, **kwargs)

        return completion

    fork = tree.leaf_id
    PiSummary().compact(
        tree, model=MODEL, settings=settings, completion=recording(budgets["pi"]), fork_id=fork
    )
    PiSummary(incremental=False).compact(
        tree,
        model=MODEL,
        settings=settings,
        completion=recording(budgets["pi-scratch"]),
        fork_id=fork,
    )
    # the history summary's budget (the incremental run also summarizes a split turn's prefix)
    assert budgets["pi"] and budgets["pi"][0] == budgets["pi-scratch"][0]
    assert (budgets["pi"][0] == 3200) == (release == "1.3")  # ⌊0.8·4000⌋ under 1.3 only


def test_strategy_cost_is_unknown_not_zero_when_the_model_has_no_price(history) -> None:
    # Issue 15: a strategy that called a model without a price costs NaN, with the note.
    tree, _ = history
    unknown = "no-such-model-xyz"

    def offline(model: str, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        from pi_nb.llm import complete

        return complete(MODEL, messages, stream=False, **kwargs)  # answered offline

    result = PiSummary().compact(tree, model=unknown, settings=SETTINGS, completion=offline)
    assert result.calls >= 1 and result.model == unknown
    assert math.isnan(result.cost) and unknown in (result.cost_note or "")
    facts = result.to_dict()
    assert math.isnan(facts["cost"]) and facts["cost_note"] == result.cost_note
    # Priced by the one rule when the model has a price (cached input at the cache rate) …
    usage = {"input": 1000, "output": 100, "cacheRead": 9000, "cacheWrite": 0}
    priced = dataclasses.replace(result, model="gpt-4o-mini", usage=usage)
    assert priced.cost == pytest.approx(usage_cost("gpt-4o-mini", usage)[0]) and priced.cost > 0
    # … and 0.0 only when nothing was called.
    nothing = SlidingWindow(keep_tokens=100_000).compact(tree, model=MODEL)
    assert nothing.calls == 0 and nothing.cost == 0.0 and nothing.cost_note is None


def test_compact_keywords_are_checked_by_name_and_nothing_is_appended(history) -> None:
    # The keywords are declared once (StrategyOptions): a misspelt one fails by name,
    # a model-calling strategy still requires ``model``, and the tree is left as it was.
    tree, _ids = history
    count, leaf = len(tree.entries), tree.leaf_id
    with pytest.raises(TypeError, match=r"compact\(\) got an unexpected keyword argument 'windw'$"):
        PiSummary().compact(tree, model=MODEL, windw=100)
    with pytest.raises(TypeError, match=r"compact\(\) missing required keyword argument: 'model'$"):
        PiSummary().compact(tree, settings=SETTINGS)
    with pytest.raises(TypeError, match=r"compact\(\) got an unexpected keyword argument 'fork'$"):
        ObservationMasking(keep_last=2).compact(tree, fork=leaf)
    assert (len(tree.entries), tree.leaf_id) == (count, leaf)
    # every declared keyword still reaches the strategy (the defaults unchanged)
    result = PiSummary().compact(
        tree, model=MODEL, settings=SETTINGS, prompts=None, completion=None, window=None, fork_id=leaf
    )
    assert result.compacted and result.model == MODEL and result.fork_id == leaf
