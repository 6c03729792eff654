"""The policies' shared plumbing: what they need from a session (checked at install, one
clear TypeError), their dataclass constructors and the camelCase form of the reports."""

from __future__ import annotations

import inspect

import pytest
from policy_helpers import MODEL

from pi_nb.hooks import CONTEXT, SESSION_BEFORE_COMPACT, Hooks
from pi_nb.policies import (
    PinPolicy,
    PrunedItem,
    PruneReport,
    RelevancePruner,
    TaskStatePolicy,
    enable_pins,
    enable_pruning,
    enable_task_state,
    update_task_state,
)


class HooksOnly:
    """A session stand-in with hooks but no entry tree."""

    def __init__(self) -> None:
        self.hooks = Hooks()


class TreeOnly:
    """A session stand-in with an entry tree but no hooks."""

    def __init__(self, tree) -> None:
        self.tree = tree


def _one_line_type_error(excinfo: pytest.ExceptionInfo[TypeError]) -> str:
    message = str(excinfo.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("enable", [enable_task_state, enable_pruning])
def test_enabling_on_a_session_without_a_tree_fails_at_once_naming_it(enable):
    # Before: enabling succeeded and every request then failed inside the context hook.
    session = HooksOnly()
    with pytest.raises(TypeError) as excinfo:
        enable(session)
    message = _one_line_type_error(excinfo)
    assert "HooksOnly" in message and "tree" in message
    assert "hooks" not in message.split(": ", 1)[1]  # it has them
    assert session.hooks.handlers(CONTEXT) == []  # nothing installed


def test_enabling_on_an_object_without_either_names_both(mem_tree):
    with pytest.raises(TypeError) as excinfo:
        enable_task_state(object())
    message = _one_line_type_error(excinfo)
    assert "no hooks with on() and no tree (a SessionTree)" in message
    with pytest.raises(TypeError, match=r"on TreeOnly: it has no hooks with on\(\) \(") as info:
        enable_task_state(TreeOnly(mem_tree))
    assert "tree" not in str(info.value).split(":", 1)[1]


def test_a_bad_re_enable_leaves_the_enabled_policy_in_place(mem_tree):
    # Before: the enabled pruner was removed first, then the bad option raised: none left.
    session = HooksOnly()
    session.tree = mem_tree
    pruner = enable_pruning(session, budget=600)
    with pytest.raises(ValueError, match="ranker must be"):
        enable_pruning(session, ranker="nope")
    assert pruner.installed and session.hooks.handlers(CONTEXT) == [pruner.on_context]
    assert enable_pruning(session) is pruner


def test_pins_need_only_hooks():
    # The pin policy reads the branch from the compaction event: hooks are enough.
    session = HooksOnly()
    policy = enable_pins(session, model=MODEL)
    assert policy.installed
    assert session.hooks.handlers(SESSION_BEFORE_COMPACT) == [policy.on_before_compact]


@pytest.mark.parametrize(
    "make",
    [
        lambda: PinPolicy(model=MODEL),
        lambda: RelevancePruner(budget=10),
        lambda: TaskStatePolicy(HooksOnly(), tool=False),
    ],
)
def test_install_on_something_without_on_is_one_type_error(make):
    # Before: an AttributeError from inside install (``'object' object has no attribute 'on'``).
    policy = make()
    with pytest.raises(TypeError) as excinfo:
        policy.install(object())
    message = _one_line_type_error(excinfo)
    assert message.startswith(f"cannot install {type(policy).__name__} on object")
    assert "on()" in message
    assert not policy.installed and policy.hooks is None


def test_task_state_policy_without_a_tree_fails_at_install():
    # Before: installed fine, then raised at each request.
    hooks = Hooks()
    policy = TaskStatePolicy(HooksOnly(), tool=False)
    with pytest.raises(TypeError, match=r"^cannot install TaskStatePolicy on HooksOnly: .*tree"):
        policy.install(hooks)
    assert hooks.handlers(CONTEXT) == [] and not policy.installed


def test_a_tree_is_a_session_for_the_policies_that_only_read_it(mem_tree):
    update_task_state(mem_tree, goal="Ship it")
    hooks = Hooks()
    policy = TaskStatePolicy(mem_tree, tool=False).install(hooks)
    assert hooks.handlers(CONTEXT) == [policy.on_context]
    RelevancePruner(mem_tree, budget=10).install(hooks).remove()


def test_option_errors_are_unchanged():
    with pytest.raises(ValueError, match=r"^restore must be 'append' or 'focused', not 'x'$"):
        PinPolicy(restore="x")  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match=r"^position must be 'start' or 'before_prompt', not 'end'$"
    ):
        TaskStatePolicy(None, position="end")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="record=True needs the session"):
        RelevancePruner(record=True)


def test_constructors_keep_their_signatures_and_identity():
    for cls, positional in ((PinPolicy, "session"), (RelevancePruner, "session")):
        params = list(inspect.signature(cls).parameters.values())
        assert params[0].name == positional and params[0].default is None
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[1:])
    with pytest.raises(TypeError):
        PinPolicy(None, MODEL)  # type: ignore[misc]
    with pytest.raises(TypeError):
        TaskStatePolicy()  # type: ignore[call-arg]
    one, two = PinPolicy(model=MODEL), PinPolicy(model=MODEL)
    assert one != two and len({one, two}) == 2  # policies compare (and hash) by identity
    assert repr(one) == "<PinPolicy not installed, restore=append, 0 compactions>"
    assert one.outcomes == [] and one.outcomes is not two.outcomes


def test_prune_report_to_dict_is_key_for_key_the_camel_case_form():
    item = PrunedItem(
        index=2,
        role="toolResult",
        tokens_before=40,
        tokens_after=9,
        score=0.25,
        tool_name="read",
        tool_call_id="call-1",
        entry_id="e1",
        edit_id="x1",
    )
    report = PruneReport("q", "bm25", 50, 120, 89, [(2, 0.25), (4, 1.5)], [item], 5, ["x1"])
    out = report.to_dict()
    assert list(out) == [
        "query",
        "ranker",
        "budget",
        "tokensBefore",
        "tokensAfter",
        "saved",
        "metBudget",
        "candidates",
        "pruned",
        "recorded",
    ]
    assert out == {
        "query": "q",
        "ranker": "bm25",
        "budget": 50,
        "tokensBefore": 120,
        "tokensAfter": 89,
        "saved": 31,
        "metBudget": False,
        "candidates": 2,
        "pruned": [
            {
                "index": 2,
                "role": "toolResult",
                "toolName": "read",
                "entryId": "e1",
                "tokensBefore": 40,
                "tokensAfter": 9,
                "score": 0.25,
            }
        ],
        "recorded": ["x1"],
    }
    assert list(out["pruned"][0]) == [
        "index",
        "role",
        "toolName",
        "entryId",
        "tokensBefore",
        "tokensAfter",
        "score",
    ]
    assert out["recorded"] is not report.recorded
    assert item.saved == 31
