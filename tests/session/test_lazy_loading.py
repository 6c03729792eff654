"""Lazy loading: a reopened file parses a message only when its content is needed, and
whatever is computed from the light entries equals what full entries give."""

from __future__ import annotations

import json
import random

import pytest
from pinb_testkit import Clock, assistant, new_tree, tool_result, user

from pi_nb.session import SessionTree
from pi_nb.session.jsonl import parse_bytes
from pi_nb.tokens import estimate_projected_context_tokens


def _unparsed(tree: SessionTree) -> int:
    """How many loaded message entries are still light (white-box: the laziness itself)."""
    return len(tree._raw)


def _random_session(path, seed: int) -> SessionTree:
    rng = random.Random(seed)
    tree = new_tree(str(path), clock=Clock())
    for n in range(300):
        r = rng.random()
        ids = [e["id"] for e in tree.entries]
        if r < 0.08 and ids:
            tree.branch(rng.choice(ids))
        if r < 0.12 and len(ids) > 4:
            branch = tree.get_branch()
            targets = [e for e in branch if e["type"] == "message"
                       and e["message"]["role"] in ("user", "assistant", "toolResult")]
            if targets:
                tree.append_context_edit(rng.choice(targets)["id"],
                                         rng.choice([None, {"content": f"edit {n}"}]))
                continue
        if r < 0.15 and len(ids) > 4:
            first = rng.choice([e["id"] for e in tree.get_branch()])
            tree.append_compaction(f"summary {n}", first, 1000)
            continue
        if r < 0.18:
            tree.append_model_change("p", f"model-{n}")
            continue
        kind = rng.choice(["user", "assistant", "tool", "system"])
        text = "".join(rng.choice("ab é𝄞\n\"\\") for _ in range(rng.randint(0, 40)))
        if kind == "user":
            tree.append_message(user(text, ts=n))
        elif kind == "assistant":
            tree.append_message(assistant(text, tokens=rng.choice([0, 300, 5000]), ts=n,
                                          model=f"m{n % 3}"))
        elif kind == "tool":
            tree.append_message(tool_result(f"c{n}", text, ts=n))
        else:
            tree.append_message({"role": "system", "content": text or "p", "timestamp": n})
    tree.close()
    return tree


@pytest.mark.parametrize("seed", [11, 12])
def test_light_projection_equals_the_full_one(seed, tmp_path):
    path = tmp_path / "s.jsonl"
    written = _random_session(path, seed)
    leaves = [written.leaf_id, *random.Random(seed).sample([e["id"] for e in written.entries], 12)]
    for leaf in leaves:
        expected = written.projection(leaf)
        expected_tokens = estimate_projected_context_tokens(expected)
        lazy = SessionTree.open(path)
        got = lazy.projection(leaf)
        # computed from light entries, before any message body is asked for
        assert got.message_count == len(expected.messages)
        assert lazy.context_tokens(leaf).to_dict() == expected_tokens.to_dict()
        assert [(pe.id, pe.type, pe.status, pe.message_count) for pe in got.entries] == [
            (pe.id, pe.entry["type"], pe.status, len(pe.messages)) for pe in expected.entries
        ]
        assert got.model == expected.model and got.thinking_level == expected.thinking_level
        # a projection built from light entries stays right after the tree parses them all
        assert lazy.entries == written.entries
        assert got.messages == expected.messages
        assert [pe.entry for pe in got.entries] == [pe.entry for pe in expected.entries]


def test_open_project_and_estimate_parse_only_what_they_need(tmp_path):
    path = tmp_path / "long.jsonl"
    tree = new_tree(str(path), clock=Clock())
    for n in range(400):
        tree.append_message(user(f"question {n} " * 20, ts=n))
        tree.append_message(assistant(f"answer {n} " * 30, tokens=1000 + n, ts=n))
    tree.close()
    reopened = SessionTree.open(path)
    assert _unparsed(reopened) == 800
    projection = reopened.projection()
    tokens = reopened.context_tokens()
    assert projection.message_count == 800
    assert tokens.usageTokens == 1399 and tokens.lastUsageIndex == 799
    assert projection.model == {"provider": "anthropic", "modelId": "claude-x"}
    assert _unparsed(reopened) == 799  # only the last reply (usage and model) was parsed
    assert projection.messages[0]["content"] == "question 0 " * 20
    assert _unparsed(reopened) == 0


def test_an_edit_after_the_last_reply_makes_the_estimate_read_every_message(tmp_path):
    path = tmp_path / "edited.jsonl"
    tree = new_tree(str(path), clock=Clock())
    first = tree.append_message(user("a" * 400, ts=0))
    tree.append_message(assistant("b" * 40, tokens=5000, ts=1))
    tree.append_context_edit(first["id"], {"content": "short"})
    tree.close()
    reopened = SessionTree.open(path)
    # usage from before the edit is not trusted: pure chars/4 over the edited context
    assert reopened.context_tokens().to_dict() == {
        "tokens": 2 + 10, "usageTokens": 0, "trailingTokens": 12, "lastUsageIndex": None}


_HEADER = {"type": "session", "version": 3, "id": "s1", "timestamp": "2026-01-01T00:00:00.000Z",
           "cwd": "/p"}


def _line(entry_id: str, parent: str | None, message) -> bytes:
    return json.dumps({"type": "message", "id": entry_id, "parentId": parent,
                       "timestamp": "2026-01-01T00:00:01.000Z", "message": message}).encode()


@pytest.mark.parametrize("body", [
    # two objects on one line (Pi skips the line; a lenient reader would take both)
    _line("a", None, user("x")) + b" " + _line("b", "a", user("y")) + b"\n",
    # one object split over two lines
    _line("a", None, user("x"))[:30] + b"\n" + _line("a", None, user("x"))[30:] + b"\n",
    # Windows line ends
    _line("a", None, user("x")) + b"\r\n" + _line("b", "a", user("y")) + b"\r\n",
    # a message that is not an object, and one that is null
    _line("a", None, "text") + b"\n" + _line("b", "a", None) + b"\n" + _line("c", "b", user("z")) + b"\n",
    # a blank line and a line that is not JSON
    _line("a", None, user("x")) + b"\n\n{oops\n" + _line("b", "a", user("y")) + b"\n",
])
def test_fast_and_careful_readers_agree(body):
    data = json.dumps(_HEADER).encode() + b"\n" + body
    careful = parse_bytes(data, "f.jsonl", lazy=False)
    lazy = parse_bytes(data, "f.jsonl", lazy=True)
    assert [str(s) for s in lazy.report.skipped] == [str(s) for s in careful.report.skipped]
    tree = SessionTree(lazy.header, lazy.entries, raw=lazy.raw, line=lazy.line)
    assert tree.entries == careful.entries


def test_a_parsed_light_entry_keeps_unknown_fields_and_key_order():
    odd = (b'{"type":"message","x":1,"id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",'
           b'"message":{"role":"user","content":"hi","extra":[1]},"z":{"k":null}}')
    data = json.dumps(_HEADER).encode() + b"\n" + odd + b"\n" + _line("b", "a", user("y")) + b"\n"
    lazy = parse_bytes(data, "f.jsonl", lazy=True)
    tree = SessionTree(lazy.header, lazy.entries, raw=lazy.raw, line=lazy.line)
    held = tree.projection().entries[0]  # holds the light entry
    first = tree.get("a")
    assert list(first) == ["type", "x", "id", "parentId", "timestamp", "message", "z"]
    assert first == json.loads(odd)
    assert held.entry is first and held.messages == [json.loads(odd)["message"]]
