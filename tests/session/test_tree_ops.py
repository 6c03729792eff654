"""Tree traversal, branching and labels (Pi's tree-traversal / labels / save-entry tests)."""

from __future__ import annotations

import itertools
import json
import os
import re
from pathlib import Path

import pytest
from pinb_testkit import Clock, assistant, new_tree, roles, texts, user

from pi_nb.entries import new_entry_id
from pi_nb.session import EntryNotFoundError, SessionError, SessionTree


def _shape(nodes):
    """Nested (id, [children]) tuples."""
    return [(n.id, _shape(n.children)) for n in nodes]


# --- appending and parent chaining -----------------------------------------------------------


def test_append_chains_parents_and_advances_leaf():
    tree = new_tree()
    assert tree.leaf_id is None and tree.leaf is None
    e1 = tree.append_message(user("a"))
    assert e1["parentId"] is None and tree.leaf_id == e1["id"]
    e2 = tree.append_thinking_level_change("high")
    e3 = tree.append_model_change("openai", "gpt-4o")
    e4 = tree.append_compaction("sum", None, 10)
    e5 = tree.append_custom("ext", {"k": 1})
    e6 = tree.append_message(assistant("b"))
    chain = [e1, e2, e3, e4, e5, e6]
    for parent, child in itertools.pairwise(chain):
        assert child["parentId"] == parent["id"]
    assert tree.leaf_id == e6["id"] and tree.leaf is e6


def test_custom_entries_are_in_the_tree_but_not_in_context():
    tree = new_tree()
    u = tree.append_message(user("a"))
    c = tree.append_custom("ext", {"state": 1})
    a = tree.append_message(assistant("b"))
    assert c["parentId"] == u["id"] and a["parentId"] == c["id"]
    assert texts(tree.projection().messages) == ["a", "b"]


def test_entry_ids_are_8_lowercase_hex_and_unique():
    tree = new_tree()
    ids = [tree.append_message(user(str(i)))["id"] for i in range(300)]
    assert all(re.fullmatch(r"[0-9a-f]{8}", i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_new_entry_id_redraws_on_collision_then_falls_back_to_uuid():
    draws = iter(["aaaaaaaa", "aaaaaaaa", "bbbbbbbb"])
    assert new_entry_id({"aaaaaaaa"}, lambda: next(draws)) == "bbbbbbbb"
    fallback = new_entry_id({"cccccccc"}, lambda: "cccccccc")
    assert re.fullmatch(r"[0-9a-f-]{36}", fallback)


def test_entry_timestamps_are_iso_with_ms_and_z():
    tree = SessionTree.in_memory("/x")
    e = tree.append_message(user("a"))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", e["timestamp"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", tree.header["timestamp"])


def test_entry_key_order_matches_pi():
    tree = new_tree()
    m = tree.append_message(user("a"))
    assert list(m) == ["type", "id", "parentId", "timestamp", "message"]
    c = tree.append_custom("ext", {"a": 1})
    assert list(c) == ["type", "customType", "data", "id", "parentId", "timestamp"]
    cm = tree.append_custom_message("ext", "hi", True, {"d": 1})
    assert list(cm) == ["type", "customType", "content", "display", "details", "id", "parentId",
                        "timestamp"]


# --- get_branch / children / get ---------------------------------------------------------------


def test_get_branch_shapes():
    tree = new_tree()
    assert tree.get_branch() == []
    a = tree.append_message(user("a"))
    assert tree.get_branch() == [a]
    b = tree.append_message(assistant("b"))
    c = tree.append_message(user("c"))
    assert tree.get_branch() == [a, b, c]
    assert tree.get_branch(b["id"]) == [a, b]
    assert tree.get_branch("unknown") == []


def test_get_and_entry_lookup():
    tree = new_tree()
    a = tree.append_message(user("a"))
    assert tree.get(a["id"]) is a and tree.entry(a["id"]) is a
    assert tree.get("nope") is None
    with pytest.raises(EntryNotFoundError, match="Entry nope not found"):
        tree.entry("nope")


def test_children_in_file_order():
    tree = new_tree()
    root = tree.append_message(user("r"))
    kids = []
    for i in range(3):
        tree.branch(root["id"])
        kids.append(tree.append_message(assistant(str(i))))
    assert tree.children(root["id"]) == kids
    assert tree.children(None) == [root]


# --- tree() ------------------------------------------------------------------------------------


def test_tree_empty_and_linear():
    tree = new_tree()
    assert tree.tree() == []
    a = tree.append_message(user("a"))
    b = tree.append_message(assistant("b"))
    c = tree.append_message(user("c"))
    assert _shape(tree.tree()) == [(a["id"], [(b["id"], [(c["id"], [])])])]


def test_tree_branching_makes_siblings_three_branches():
    tree = new_tree()
    root = tree.append_message(user("r"))
    kids = []
    for i in range(3):
        tree.branch(root["id"])
        kids.append(tree.append_message(assistant(str(i)))["id"])
    (node,) = tree.tree()
    assert [c.id for c in node.children] == kids


def test_tree_children_sorted_by_timestamp_not_file_order():
    # Clock goes backwards for the second child, so file order != time order.
    stamps = iter(["2026-01-15T09:00:01.000Z", "2026-01-15T09:00:05.000Z",
                   "2026-01-15T09:00:03.000Z"])
    tree = new_tree(clock=lambda: next(stamps))
    root = tree.append_message(user("r"))
    late = tree.append_message(assistant("late"))
    tree.branch(root["id"])
    early = tree.append_message(assistant("early"))
    (node,) = tree.tree()
    assert [c.id for c in node.children] == [early["id"], late["id"]]


def test_tree_deep_nested_forks():
    tree = new_tree()
    r = tree.append_message(user("r"))
    a = tree.append_message(assistant("a"))
    a1 = tree.append_message(user("a1"))
    tree.branch(a["id"])
    a2 = tree.append_message(user("a2"))
    a2x = tree.append_message(assistant("a2x"))
    tree.branch(a2["id"])
    a2y = tree.append_message(assistant("a2y"))
    tree.branch(r["id"])
    b = tree.append_message(assistant("b"))
    assert _shape(tree.tree()) == [
        (r["id"], [
            (a["id"], [
                (a1["id"], []),
                (a2["id"], [(a2x["id"], []), (a2y["id"], [])]),
            ]),
            (b["id"], []),
        ])
    ]


def test_tree_orphans_and_self_parents_are_roots():
    entries = [
        {"type": "message", "id": "r", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
         "message": user("r")},
        {"type": "message", "id": "o", "parentId": "gone", "timestamp": "2026-01-01T00:00:01.000Z",
         "message": user("o")},
        {"type": "message", "id": "s", "parentId": "s", "timestamp": "2026-01-01T00:00:02.000Z",
         "message": user("s")},
    ]
    tree = SessionTree({"type": "session", "version": 3, "id": "x", "timestamp": "", "cwd": "/"},
                       entries)
    assert [n.id for n in tree.tree()] == ["r", "o", "s"]
    # a self-parent does not loop forever in get_branch
    assert [e["id"] for e in tree.get_branch("s")] == ["s"]


# --- branch / reset_leaf / branch_with_summary -----------------------------------------------------


def test_branch_moves_leaf_and_next_append_is_child():
    tree = new_tree()
    a = tree.append_message(user("a"))
    tree.append_message(assistant("b"))
    tree.branch(a["id"])
    assert tree.leaf_id == a["id"]
    c = tree.append_message(assistant("c"))
    assert c["parentId"] == a["id"]


def test_branch_unknown_id_raises():
    tree = new_tree()
    tree.append_message(user("a"))
    before = tree.leaf_id
    with pytest.raises(EntryNotFoundError, match=r"^Entry ghost not found$"):
        tree.branch("ghost")
    assert tree.leaf_id == before


def test_reset_leaf_next_append_is_new_root():
    tree = new_tree()
    tree.append_message(user("a"))
    tree.reset_leaf()
    assert tree.leaf_id is None
    assert tree.projection().messages == []
    b = tree.append_message(user("b"))
    assert b["parentId"] is None
    assert len(tree.tree()) == 2
    assert texts(tree.projection().messages) == ["b"]


def test_branch_with_summary_records_abandoned_leaf():
    tree = new_tree()
    a = tree.append_message(user("a"))
    tree.append_message(assistant("b"))
    abandoned = tree.append_message(user("c"))
    bs = tree.branch_with_summary(a["id"], "explored c", details={"readFiles": []})
    assert bs["type"] == "branch_summary"
    assert bs["parentId"] == a["id"]
    assert bs["fromId"] == abandoned["id"]
    assert bs["details"] == {"readFiles": []}
    assert tree.leaf_id == bs["id"]
    assert roles(tree.projection().messages) == ["user", "branchSummary"]


def test_branch_with_summary_from_null_leaf_is_root_and_to_null_target():
    tree = new_tree()
    tree.append_message(user("a"))
    tree.reset_leaf()
    bs = tree.branch_with_summary(None, "s")
    assert bs["fromId"] == "root"
    assert bs["parentId"] is None


def test_branch_with_summary_unknown_target_raises_and_changes_nothing():
    tree = new_tree()
    tree.append_message(user("a"))
    n, leaf = len(tree), tree.leaf_id
    with pytest.raises(EntryNotFoundError, match="Entry nope not found"):
        tree.branch_with_summary("nope", "s")
    assert len(tree) == n and tree.leaf_id == leaf


# --- labels ---------------------------------------------------------------------------------------


def test_label_creates_entry_and_last_wins():
    tree = new_tree()
    a = tree.append_message(user("a"))
    lab = tree.append_label(a["id"], "start")
    assert {k: lab[k] for k in ("type", "targetId", "label")} == {
        "type": "label", "targetId": a["id"], "label": "start"}
    assert tree.label(a["id"]) == "start"
    tree.append_label(a["id"], "renamed")
    assert tree.label(a["id"]) == "renamed"
    assert tree.labels == {a["id"]: "renamed"}
    assert tree.find_label("renamed") == a["id"] and tree.find_label("start") is None


@pytest.mark.parametrize("clear", [None, ""])
def test_label_cleared_by_none_or_empty(clear):
    tree = new_tree()
    a = tree.append_message(user("a"))
    tree.append_label(a["id"], "x")
    entry = tree.append_label(a["id"], clear)
    assert tree.label(a["id"]) is None
    assert tree.labels == {}
    if clear is None:
        assert "label" not in entry


def test_labels_on_tree_nodes_with_timestamp():
    tree = new_tree()
    a = tree.append_message(user("a"))
    lab = tree.append_label(a["id"], "here")
    node = tree.tree()[0]
    assert node.label == "here" and node.label_timestamp == lab["timestamp"]
    assert node.children[0].label is None


def test_labels_never_enter_context():
    tree = new_tree()
    a = tree.append_message(user("a"))
    tree.append_label(a["id"], "lbl")
    tree.append_message(assistant("b"))
    assert roles(tree.projection().messages) == ["user", "assistant"]
    assert "lbl" not in json.dumps(tree.projection().messages)


def test_label_unknown_target_raises():
    tree = new_tree()
    tree.append_message(user("a"))
    with pytest.raises(EntryNotFoundError, match="Entry nope not found"):
        tree.append_label("nope", "x")
    assert all(e["type"] != "label" for e in tree.entries)


def test_labels_survive_reopen(tmp_path):
    path = tmp_path / "s.jsonl"
    tree = new_tree(str(path))
    a = tree.append_message(user("a"))
    b = tree.append_message(assistant("b"))
    tree.append_label(a["id"], "one")
    tree.append_label(b["id"], "two")
    tree.append_label(b["id"], None)
    tree.close()
    again = SessionTree.open(path)
    assert again.labels == {a["id"]: "one"}


# --- fork (createBranchedSession) ------------------------------------------------------------------


def _forkable(tmp_path):
    tree = new_tree(str(tmp_path / "src.jsonl"))
    u1 = tree.append_message(user("u1"))
    tree.append_label(u1["id"], "first")
    a1 = tree.append_message(assistant("a1"))
    u2 = tree.append_message(user("u2"))
    tree.branch(a1["id"])
    off = tree.append_message(user("off-path"))
    tree.append_label(off["id"], "offpath")
    tree.append_label(u2["id"], "second")
    return tree, u1, a1, u2, off


def test_fork_keeps_path_and_path_labels_drops_off_path(tmp_path):
    tree, u1, a1, u2, off = _forkable(tmp_path)
    forked = tree.fork(u2["id"])
    ids = [e["id"] for e in forked.entries if e["type"] != "label"]
    assert ids == [u1["id"], a1["id"], u2["id"]]
    # parents relinked past the removed label entry
    assert [e["parentId"] for e in forked.entries[:3]] == [None, u1["id"], a1["id"]]
    assert forked.labels == {u1["id"]: "first", u2["id"]: "second"}
    assert off["id"] not in forked
    assert forked.session_id != tree.session_id
    assert forked.header["parentSession"] == tree.path
    assert texts(forked.projection().messages) == ["u1", "a1", "u2"]
    # written at once (has a conversation) with exactly one header and unique ids
    lines = [json.loads(x) for x in Path(forked.path).read_text(encoding="utf-8").splitlines()]
    assert [x["type"] for x in lines].count("session") == 1 and lines[0]["type"] == "session"
    assert len({x["id"] for x in lines[1:]}) == len(lines) - 1
    assert forked.path != tree.path


def test_fork_keeps_label_timestamps(tmp_path):
    tree, u1, *_ = _forkable(tmp_path)
    original = next(e for e in tree.entries if e["type"] == "label" and e["targetId"] == u1["id"])
    forked = tree.fork()
    copied = next(e for e in forked.entries if e["type"] == "label" and e["targetId"] == u1["id"])
    assert copied["timestamp"] == original["timestamp"]
    # fresh label entries are chained after the last path entry
    labels = [e for e in forked.entries if e["type"] == "label"]
    path_part = [e for e in forked.entries if e["type"] != "label"]
    assert forked.entries[-len(labels):] == labels
    assert [e["parentId"] for e in labels] == [path_part[-1]["id"]] + [e["id"] for e in labels[:-1]]


def test_fork_unknown_leaf_raises(tmp_path):
    tree, *_ = _forkable(tmp_path)
    with pytest.raises(EntryNotFoundError):
        tree.fork("nope")


def test_fork_remaps_first_kept_id_that_was_a_label(tmp_path):
    tree = new_tree(str(tmp_path / "s.jsonl"))
    u = tree.append_message(user("u"))
    lab = tree.append_label(u["id"], "L")
    a = tree.append_message(assistant("a"))
    comp = tree.append_compaction("S", lab["id"], 5)
    forked = tree.fork()
    fcomp = forked.entry(comp["id"])
    assert fcomp["firstKeptEntryId"] == a["id"]
    assert texts(forked.projection().messages) == ["S", "a"]


def test_fork_without_conversation_is_not_written(tmp_path):
    tree = new_tree(str(tmp_path / "s.jsonl"))
    tree.append_model_change("openai", "gpt-4o")
    tree.flush()
    forked = tree.fork()
    assert not forked.is_persisted
    assert not os.path.exists(forked.path)
    forked.append_message(user("now"))
    assert os.path.exists(forked.path)
    lines = Path(forked.path).read_text(encoding="utf-8").splitlines()
    assert [json.loads(x)["type"] for x in lines] == ["session", "model_change", "message"]


def test_fork_in_memory():
    tree = new_tree()
    u = tree.append_message(user("u"))
    tree.append_message(assistant("a"))
    forked = tree.fork(u["id"])
    assert forked.path is None
    assert [e["id"] for e in forked.entries] == [u["id"]]


def test_append_entry_rejects_duplicate_ids():
    tree = new_tree()
    a = tree.append_message(user("a"))
    with pytest.raises(SessionError):
        tree.append_entry({"type": "message", "id": a["id"], "parentId": None,
                           "timestamp": "x", "message": user("dup")})


def test_clock_is_used_for_entries():
    clock = Clock()
    tree = new_tree(clock=clock)
    e1 = tree.append_message(user("a"))
    e2 = tree.append_message(user("b"))
    assert e1["timestamp"] == "2026-01-15T09:00:01.000Z"
    assert e2["timestamp"] == "2026-01-15T09:00:02.000Z"


def test_fork_from_first_user_message_writes_one_header(tmp_path):
    tree = new_tree(str(tmp_path / "s.jsonl"))
    u = tree.append_message(user("first"))
    tree.append_message(assistant("reply"))
    forked = tree.fork(u["id"])
    assert [e["id"] for e in forked.entries] == [u["id"]]
    forked.append_message(assistant("other reply"))
    lines = [json.loads(x) for x in Path(forked.path).read_text(encoding="utf-8").splitlines()]
    assert [x["type"] for x in lines] == ["session", "message", "message"]
    assert len({x["id"] for x in lines}) == 3
    assert texts(forked.projection().messages) == ["first", "other reply"]
