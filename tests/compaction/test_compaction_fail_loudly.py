"""Issue 11 "Fail loudly, lose nothing": empty summaries are refused, hook and policy
failures reach the result, capped replies are kept on every summary call when allowed, and a
compaction that grows the context says so with figures on one basis."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from compaction_helpers import FakeModel, add_turn, long_session, reply_message, split_turn_history

from pi_nb.compaction import (
    CompactionError,
    CompactionSettings,
    SummarizationError,
    compact,
    navigate,
    preview_compaction,
)
from pi_nb.hooks import Hooks
from pi_nb.policies.pins import PinPolicy, pin

KEEP = CompactionSettings(keep_recent_tokens=300)
WINDOW = 200000
MOCK_MODEL = "openai/gpt-4o-mini"


def _litellm() -> Any:
    """litellm, imported through pi_nb (which keeps it off the network: local cost map)."""
    if importlib.util.find_spec("litellm") is None:
        pytest.skip("litellm not installed")
    from pi_nb.llm import litellm_module

    return litellm_module()


def _mock_completion(*replies: Any) -> Any:
    """A completion through pi_nb.llm.complete and litellm's ``mock_response``: the n-th call
    gets ``replies[n]`` (the last one repeats); a callable reply picks from the prompt."""
    _litellm()
    from pi_nb.llm import complete

    calls: list[str] = []

    def call(model: str, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        prompt = messages[-1]["content"]
        calls.append(prompt)
        pick = replies[min(len(calls), len(replies)) - 1]
        mock = pick(prompt) if callable(pick) else pick
        return complete(model, messages, mock_response=mock, **{**kwargs, "stream": False})

    call.prompts = calls  # type: ignore[attr-defined]
    return call



# --- 4. empty summaries are refused -------------------------------------------------------------


@pytest.mark.parametrize("empty", ["", "  \n\t "])
def test_an_empty_history_summary_is_refused_and_nothing_is_written(tree, session_path, empty):
    long_session(tree, 4)
    data = session_path.read_bytes()
    completion = _mock_completion(empty)
    with pytest.raises(SummarizationError, match=r"Summarization failed: .*empty summary"):
        compact(tree, MOCK_MODEL, settings=KEEP, window=WINDOW, completion=completion)
    assert session_path.read_bytes() == data
    assert tree.leaf["type"] == "message"


def test_a_reply_without_choices_is_a_one_line_summarization_error(tree, session_path):
    ModelResponse = _litellm().ModelResponse

    long_session(tree, 4)
    data = session_path.read_bytes()
    completion = _mock_completion(ModelResponse(choices=[]))
    with pytest.raises(SummarizationError) as caught:
        compact(tree, MOCK_MODEL, settings=KEEP, window=WINDOW, completion=completion)
    message = str(caught.value)
    assert message.startswith("Summarization failed: ") and "without choices" in message
    assert "\n" not in message and not isinstance(caught.value.__context__, IndexError)
    assert session_path.read_bytes() == data


def test_an_empty_update_summary_is_refused(tree, session_path, fake):
    long_session(tree, 4)
    compact(tree, "m", settings=KEEP, window=WINDOW, completion=fake)
    long_session(tree, 3)
    data = session_path.read_bytes()
    completion = _mock_completion("")
    with pytest.raises(SummarizationError, match="empty summary"):
        compact(tree, MOCK_MODEL, settings=KEEP, window=WINDOW, completion=completion)
    assert "<previous-summary>" in completion.prompts[0]  # it was the update call
    assert session_path.read_bytes() == data


def test_an_empty_turn_prefix_summary_is_refused(tree, session_path):
    split_turn_history(tree)
    data = session_path.read_bytes()
    completion = _mock_completion(
        lambda prompt: "" if "## Original Request" in prompt else "## Goal\nhistory"
    )
    settings = CompactionSettings(keep_recent_tokens=1000, reserve_tokens=2000)
    with pytest.raises(SummarizationError, match=r"Turn prefix summarization failed: .*empty"):
        compact(tree, MOCK_MODEL, settings=settings, window=WINDOW, completion=completion)
    assert len(completion.prompts) == 2  # the history summary was fine; the prefix was not
    assert session_path.read_bytes() == data


def test_an_empty_branch_summary_is_refused_and_the_leaf_stays(tree, session_path):
    root = add_turn(tree, "FACT-root question", reply="root answer")
    add_turn(tree, "FACT-a try another way", reply="it failed")
    leaf, data = tree.leaf_id, session_path.read_bytes()
    with pytest.raises(SummarizationError, match=r"Branch summarization failed: .*empty"):
        navigate(
            tree,
            root[-1]["id"],
            summarize=True,
            model=MOCK_MODEL,
            window=50000,
            completion=_mock_completion(" "),
        )
    assert tree.leaf_id == leaf and session_path.read_bytes() == data


def test_an_empty_pin_policy_summary_is_refused(tree, session_path):
    long_session(tree, 4)
    pin(tree, text="Money is always Decimal")
    data = session_path.read_bytes()
    hooks = Hooks()
    completion = _mock_completion("")
    PinPolicy(model=MOCK_MODEL, window=WINDOW, completion=completion).install(hooks)
    with pytest.raises(SummarizationError, match="empty summary"):
        compact(tree, MOCK_MODEL, settings=KEEP, hooks=hooks, window=WINDOW, completion=completion)
    assert "empty summary" in hooks.errors[0].message  # the policy refused it first
    assert session_path.read_bytes() == data


@pytest.mark.parametrize("where", ["compact", "tree"])
def test_an_empty_summary_supplied_by_a_hook_is_refused(tree, session_path, fake, where):
    root = long_session(tree, 4)
    data = session_path.read_bytes()
    hooks = Hooks()
    if where == "compact":
        supplied = {"summary": " \n", "firstKeptEntryId": None, "tokensBefore": 1}
        hooks.on("session_before_compact", lambda event: {"compaction": supplied})
        with pytest.raises(CompactionError, match="empty 'summary'"):
            compact(tree, "m", settings=KEEP, hooks=hooks, window=WINDOW, completion=fake)
    else:
        hooks.on("session_before_tree", lambda event: {"summary": {"summary": ""}})
        with pytest.raises(CompactionError, match="'summary' is empty"):
            navigate(tree, root[0][-1]["id"], summarize=True, model="m", hooks=hooks)
    assert session_path.read_bytes() == data


# --- 5. hook and policy failures reach the result -------------------------------------------------


def test_a_failing_before_compact_hook_is_a_warning_on_the_result(tree, fake):
    long_session(tree, 4)
    hooks = Hooks()

    def broken(event):
        raise RuntimeError("extension bug")

    hooks.on("session_before_compact", broken)
    preview = preview_compaction(
        tree, "m", settings=KEEP, hooks=hooks, window=WINDOW, completion=fake
    )
    assert len(preview.warnings) == 1 and "extension bug" in preview.warnings[0]
    result = compact(tree, "m", settings=KEEP, hooks=hooks, window=WINDOW, completion=fake)
    assert not result.from_hook
    [warning] = result.warnings  # this compaction's failure only, not the preview's
    assert "session_before_compact hook" in warning and "broken" in warning
    assert "RuntimeError: extension bug" in warning and "made without it" in warning
    assert result.to_dict()["warnings"] == [warning] and warning in repr(result)
    assert "extension bug" in result._repr_html_()


def test_a_failing_pin_policy_says_the_pins_were_not_applied(tree, fake):
    long_session(tree, 4)
    pin(tree, text="Money is always Decimal")
    hooks = Hooks()
    capped = FakeModel(lambda messages, n: reply_message("half a summ", stop="length"))
    PinPolicy(model="m", window=WINDOW, completion=capped).install(hooks)
    seen: list[list[str]] = []
    hooks.on("compaction_end", lambda event: seen.append(list(event.result.warnings)))
    result = compact(tree, "m", settings=KEEP, hooks=hooks, window=WINDOW, completion=fake)
    assert not result.from_hook  # the default compaction ran, without the pins
    [warning] = result.warnings
    assert "PinPolicy.on_before_compact failed" in warning
    assert "hit its" in warning and "WITHOUT the pins" in warning
    assert seen == [[warning]]  # compaction_end listeners already see it


def test_a_failing_notification_hook_is_a_warning_too(tree, fake):
    long_session(tree, 4)
    hooks = Hooks()

    def listener(event):
        raise ValueError("listener bug")

    hooks.on("session_compact", listener)
    result = compact(tree, "m", settings=KEEP, hooks=hooks, window=WINDOW, completion=fake)
    assert tree.leaf["type"] == "compaction"
    assert any(
        "session_compact hook" in w and "listener bug" in w and "notification" in w
        for w in result.warnings
    )


def test_accept_truncated_applies_to_the_pin_policy_summaries(tree):
    long_session(tree, 4)
    pin(tree, text="Money is always Decimal")
    hooks = Hooks()
    capped = FakeModel(lambda messages, n: reply_message("## Goal\nhalf a summ", stop="length"))
    PinPolicy(model="m", window=WINDOW, completion=capped).install(hooks)
    settings = CompactionSettings(keep_recent_tokens=300, accept_truncated=True)
    result = compact(tree, "m", settings=settings, hooks=hooks, window=WINDOW, completion=capped)
    assert result.from_hook and "Money is always Decimal" in result.summary
    assert result.warnings == [] and hooks.errors == []


def test_accept_truncated_applies_to_branch_summaries(tree):
    root = add_turn(tree, "FACT-root question", reply="root answer")
    add_turn(tree, "FACT-a try another way", reply="it failed")
    capped = FakeModel(lambda messages, n: reply_message("## Goal\nhalf a summ", stop="length"))
    target = root[-1]["id"]
    with pytest.raises(SummarizationError, match="hit its"):
        navigate(tree, target, summarize=True, model="m", window=50000, completion=capped)
    result = navigate(
        tree,
        target,
        summarize=True,
        model="m",
        window=50000,
        completion=capped,
        accept_truncated=True,
    )
    assert result.summary_entry is not None and "half a summ" in result.summary_entry["summary"]
    assert result.truncated == 1


def test_branch_here_and_summarize_works_on_smollm2_settings(tmp_path):
    """``pinb/smollm2`` sessions accept capped summaries: the branch summary too (a scripted
    completion that always stops on ``length`` stands in for the model)."""
    from pi_nb.agent import Session

    capped = FakeModel(lambda messages, n: reply_message("## Goal\nhalf a summ", stop="length"))
    session = Session.new(
        tmp_path / "s.jsonl", model="pinb/smollm2", window=2048, complete=capped, no_tools=True
    )
    root = add_turn(session.tree, "FACT-root question", reply="root answer")
    add_turn(session.tree, "FACT-a try another way", reply="it failed")
    assert session.settings.accept_truncated
    result = session.navigate(root[-1]["id"], summarize=True)
    assert result.summary_entry is not None and result.truncated == 1
    assert session.tree.leaf["type"] == "branch_summary"


def test_a_failing_before_tree_hook_is_a_warning_on_the_navigate_result(tree, fake):
    root = add_turn(tree, "FACT-root question", reply="root answer")
    add_turn(tree, "FACT-a try another way", reply="it failed")
    hooks = Hooks()

    def broken(event):
        raise RuntimeError("tree hook bug")

    hooks.on("session_before_tree", broken)
    result = navigate(tree, root[-1]["id"], hooks=hooks)
    [warning] = result.warnings
    assert "session_before_tree hook" in warning and "tree hook bug" in warning


# --- 6. a compaction that grows the context --------------------------------------------------------


def test_a_compaction_that_grows_the_context_warns_with_figures_on_one_basis(tree):
    pytest.importorskip("pandas")
    from pi_nb.notebook.diff import latest_compaction_diff
    from pi_nb.tokens import estimate_tokens

    long_session(tree, 3, chars=40)
    before = sum(estimate_tokens(m) for m in tree.projection().messages)
    wordy = FakeModel(lambda messages, n: reply_message("## Goal\n" + "very long notes " * 400))
    settings = CompactionSettings(keep_recent_tokens=30)
    result = compact(tree, "m", settings=settings, window=WINDOW, completion=wordy)
    after = sum(estimate_tokens(m) for m in tree.projection().messages)
    assert result.change is not None and (result.change.before, result.change.after) == (
        before,
        after,
    )
    assert result.change.grew and after > before
    [warning] = result.warnings
    assert warning.startswith("the compaction grew the context:")
    assert f"{before:,} → {after:,} tokens (estimated)" in warning
    diff = latest_compaction_diff(tree)  # %pi diff: the same two numbers
    assert (diff.tokens_before, diff.tokens_after) == (before, after)
    assert diff.compaction_warning == warning


def test_a_compaction_that_shrinks_the_context_has_no_warning(tree, fake):
    long_session(tree, 4)
    result = compact(tree, "m", settings=KEEP, window=WINDOW, completion=fake)
    assert result.change is not None and not result.change.grew and result.warnings == []
    from pi_nb.compaction import context_change

    assert context_change([], []).warning() is None
