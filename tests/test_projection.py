"""The projection C = P(H): the incremental (O(1) per append) path must equal a fresh build."""

from __future__ import annotations

import copy
import random

import pytest
from pinb_testkit import Clock, assistant, new_tree, tool_call, tool_result, user

from pi_nb.projection import build_session_projection
from pi_nb.session import SessionTree
from pi_nb.tokens import estimate_projected_context_tokens


def _fresh(tree, leaf):
    entries = [copy.deepcopy(e) for e in tree.entries]
    p = build_session_projection(entries, leaf)
    return p, estimate_projected_context_tokens(p)


def _check(tree, leaf=...):
    actual = tree.projection() if leaf is ... else tree.projection(leaf)
    tokens = tree.context_tokens() if leaf is ... else tree.context_tokens(leaf)
    expected, expected_tokens = _fresh(tree, tree.leaf_id if leaf is ... else leaf)
    assert actual.messages == expected.messages
    assert [pe.id for pe in actual.entries] == [pe.id for pe in expected.entries]
    assert [pe.messages for pe in actual.entries] == [pe.messages for pe in expected.entries]
    assert [e["id"] for e in actual.path] == [e["id"] for e in expected.path]
    assert actual.thinking_level == expected.thinking_level
    assert actual.model == expected.model
    assert actual.leaf_id == expected.leaf_id
    assert tokens.to_dict() == expected_tokens.to_dict()
    return actual


def _random_message(rng: random.Random, n: int):
    kind = rng.choice(["user", "user", "assistant", "assistant", "tool", "bash", "system",
                       "error"])
    text = "".join(rng.choice("abcdé𝄞 \n") for _ in range(rng.randint(0, 60)))
    if kind == "user":
        return user(text, ts=n)
    if kind == "assistant":
        calls = [tool_call(f"c{n}", "read", path=text[:10])] if rng.random() < 0.4 else None
        return assistant(text, tokens=rng.choice([0, 50, 1000, 20000]), calls=calls, ts=n,
                         model=rng.choice(["m1", "m2"]))
    if kind == "error":
        return assistant(text, stop=rng.choice(["error", "aborted"]), tokens=777, ts=n)
    if kind == "tool":
        return tool_result(f"c{n - 1}", text * rng.randint(1, 5), images=rng.randint(0, 1), ts=n)
    if kind == "bash":
        return {"role": "bashExecution", "command": "ls", "output": text, "exitCode": 0,
                "cancelled": False, "truncated": False, "timestamp": n,
                "excludeFromContext": rng.random() < 0.2}
    return {"role": "system", "content": text or "p", "sections": {"s": text or None},
            "toolsAdded": [{"name": rng.choice(["a", "b"])}], "timestamp": n}


def _editable_on_branch(tree):
    out = []
    for e in tree.get_branch():
        role = e["message"]["role"] if e["type"] == "message" else None
        if e["type"] == "custom_message" or role in ("user", "assistant", "toolResult"):
            out.append(e)
    return out


def _step(tree: SessionTree, rng: random.Random, n: int) -> str:
    r = rng.random()
    ids = [e["id"] for e in tree.entries]
    if r < 0.55 or not ids:
        tree.append_message(_random_message(rng, n))
        return "message"
    if r < 0.62:
        tree.branch(rng.choice(ids))
        tree.append_message(_random_message(rng, n))
        return "branch"
    if r < 0.67:
        editable = _editable_on_branch(tree)
        if editable:
            target = rng.choice(editable)
            repl = rng.choice([None, {"content": "edited " + str(n)},
                               {"content": [{"type": "text", "text": "blk"}]}])
            tree.append_context_edit(target["id"], repl)
            return "edit"
        return "noop"
    if r < 0.71:
        branch = tree.get_branch()
        first = rng.choice([None] + [e["id"] for e in branch]) if branch else None
        tree.append_compaction(f"summary {n}", first, rng.randint(0, 10000))
        return "compaction"
    if r < 0.74:
        target = rng.choice([None, *ids])
        tree.branch_with_summary(target, rng.choice(["", f"branch summary {n}"]))
        return "branch_summary"
    if r < 0.77:
        tree.reset_leaf()
        tree.append_message(user(f"new root {n}", ts=n))
        return "reset"
    choice = rng.choice(["thinking", "model", "label", "custom", "custom_message", "info",
                         "usage"])
    if choice == "thinking":
        tree.append_thinking_level_change(rng.choice(["off", "low", "high"]))
    elif choice == "model":
        tree.append_model_change("p", f"model{n}")
    elif choice == "label":
        tree.append_label(rng.choice(ids), rng.choice([None, "", f"L{n}"]))
    elif choice == "custom":
        tree.append_custom("ext", {"n": n})
    elif choice == "custom_message":
        tree.append_custom_message("ext", rng.choice(["note", [{"type": "text", "text": "x"}]]))
    elif choice == "info":
        tree.append_session_info(f"name {n}")
    else:
        tree.append_usage("cache_warm", "p", "m", {"input": n})
    return choice


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_incremental_projection_equals_fresh_build_after_every_append(seed, tmp_path):
    rng = random.Random(seed)
    path = tmp_path / "s.jsonl"
    tree = new_tree(str(path), clock=Clock())
    kinds = set()
    snapshots = []
    for n in range(400):
        kinds.add(_step(tree, rng, n))
        current = _check(tree)
        if n % 37 == 0:
            snapshots.append((current, list(current.messages), current.leaf_id))
        if n % 25 == 0 and len(tree) > 3:
            _check(tree, rng.choice([e["id"] for e in tree.entries]))
    assert {"message", "branch", "edit", "compaction", "branch_summary", "reset"} <= kinds
    # older projection objects still show exactly what they showed
    for projection, messages, leaf in snapshots:
        assert projection.messages == messages and projection.leaf_id == leaf
    # a reopened file projects the same (the lazy loading path)
    tree.close()
    again = SessionTree.open(path)
    assert again.leaf_id == tree.leaf_id
    for leaf in [tree.leaf_id, *rng.sample([e["id"] for e in tree.entries], 10)]:
        assert again.projection(leaf).messages == tree.projection(leaf).messages
        assert again.context_tokens(leaf).to_dict() == tree.context_tokens(leaf).to_dict()
    _check(again)
    again.append_message(user("after reopen"))
    _check(again)


def test_incremental_path_reuses_the_cached_projection():
    tree = new_tree()
    tree.append_message(user("a"))
    p1 = tree.projection()
    tree.append_message(assistant("b"))
    p2 = tree.projection()
    assert p2 is tree.projection()  # cached until the leaf moves
    assert p1.messages == [p2.messages[0]] and len(p2.messages) == 2
    assert p2.messages[0] is p1.messages[0]


def test_tokens_follow_appends_without_asking_projection_first():
    tree = new_tree()
    tree.append_message(user("a" * 40))
    assert tree.context_tokens().tokens == 10
    tree.append_message(assistant("x", tokens=500))
    tree.append_message(tool_result(text="b" * 80))
    assert tree.context_tokens().to_dict() == {"tokens": 520, "usageTokens": 500,
                                               "trailingTokens": 20, "lastUsageIndex": 1}
    tree.append_message({"role": "system", "content": "cccc", "timestamp": 0})
    assert tree.context_tokens().tokens == 521


def test_projection_statuses():
    tree = new_tree()
    u = tree.append_message(user("a"))
    a = tree.append_message(assistant("b"))
    m = tree.append_model_change("p", "m")
    tree.append_context_edit(u["id"], None)
    tree.append_context_edit(a["id"], {"content": "B"})
    p = tree.projection()
    status = {pe.id: pe.status for pe in p.entries}
    assert status[u["id"]] == "omitted" and status[a["id"]] == "edited"
    assert status[m["id"]] == "invisible"
    assert p.to_context() == {"messages": p.messages, "thinkingLevel": "off",
                              "model": {"provider": "p", "modelId": "m"}}


def test_build_session_projection_default_leaf_is_last_entry():
    tree = new_tree()
    u = tree.append_message(user("a"))
    tree.append_message(assistant("b"))
    tree.branch(u["id"])
    last = tree.append_message(assistant("c"))
    p = build_session_projection(list(tree.entries))
    assert p.leaf_id == last["id"]
    assert [m["content"][0]["text"] for m in p.messages[1:]] == ["c"]
