"""The policies run only through the public extension points."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from policy_helpers import MODEL, Forgetful, filler_turns

from pi_nb.compaction import CompactionSettings, compact
from pi_nb.hooks import CONTEXT, SESSION_BEFORE_COMPACT, Hooks
from pi_nb.policies import (
    PinPolicy,
    RelevancePruner,
    TaskStatePolicy,
    fact_in,
    pin,
    update_task_state,
)

POLICIES = Path(__file__).resolve().parents[2] / "pi_nb" / "policies"
FACT = "Money must never be a float"


class SpyHooks:
    """A Hooks stand-in that records which of its attributes a policy touches."""

    def __init__(self) -> None:
        self.real = Hooks()
        self.touched: list[str] = []

    def __getattr__(self, name: str):
        self.touched.append(name)
        return getattr(self.real, name)


@pytest.mark.parametrize(
    ("make", "event"),
    [
        (lambda tree: PinPolicy(model=MODEL), SESSION_BEFORE_COMPACT),
        (lambda tree: TaskStatePolicy(tree, tool=False), CONTEXT),
        (lambda tree: RelevancePruner(tree, budget=10), CONTEXT),
    ],
)
def test_policies_only_call_hooks_on(mem_tree, make, event):
    spy = SpyHooks()
    policy = make(mem_tree).install(spy)
    assert spy.touched == ["on"]
    assert [fn.__self__ for fn in spy.real.handlers(event)] == [policy]
    policy.remove()  # through the function on() returned
    assert spy.touched == ["on"]
    assert spy.real.handlers(event) == []


def _compact(tree, hooks, completion):
    settings = CompactionSettings(reserve_tokens=2000, keep_recent_tokens=300)
    return compact(tree, MODEL, settings=settings, hooks=hooks, completion=completion, window=32768)


def test_removing_the_hook_disables_the_pin_policy(mem_tree):
    tree = mem_tree
    filler_turns(tree, 0, 4)
    pin(tree, text=FACT)
    forgetful = Forgetful()
    hooks = Hooks()
    policy = PinPolicy(model=MODEL, completion=forgetful).install(hooks)
    assert fact_in(FACT, _compact(tree, hooks, forgetful).summary)
    policy.remove()
    filler_turns(tree, 10, 4)
    result = _compact(tree, hooks, forgetful)
    assert not result.from_hook
    assert not fact_in(FACT, result.summary)


def test_removing_the_hook_disables_the_task_state(mem_tree):
    tree = mem_tree
    filler_turns(tree, 0, 1)
    update_task_state(tree, goal="Ship it")
    hooks = Hooks()
    policy = TaskStatePolicy(tree, tool=False).install(hooks)
    messages = tree.projection().messages
    assert len(hooks.run_context(messages)) == len(messages) + 1
    policy.remove()
    assert hooks.run_context(messages) == messages


def test_policy_modules_use_no_private_names():
    """No ``_private`` name imported from another pi_nb module, no ``obj._private`` access
    on sessions, trees, hooks or compaction objects."""
    problems = []
    for path in sorted(POLICIES.glob("*.py")):
        module = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(module):
            if isinstance(node, ast.ImportFrom) and node.level >= 2:
                problems += [
                    f"{path.name}: from {'.' * node.level}{node.module} import {a.name}"
                    for a in node.names
                    if a.name.startswith("_")
                ]
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                problems.append(f"{path.name}:{node.lineno}: .{node.attr}")
    assert not problems, problems
