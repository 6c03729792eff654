"""The session tree as a networkx graph, and the tidy tree layout."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone

import networkx as nx
import pytest

from pi_nb.notebook.graph import entry_records, to_networkx, tree_layout
from pi_nb.session.tree import SessionTree
from pi_nb.tokens import estimate_tokens

BASE = datetime(2026, 1, 1, tzinfo=timezone.utc)


def make_tree(tmp_path, name: str = "s.jsonl") -> SessionTree:
    ids = itertools.count()
    ticks = itertools.count()

    def clock() -> str:
        return (BASE + timedelta(seconds=next(ticks))).isoformat().replace("+00:00", "Z")

    return SessionTree.create(
        tmp_path / name, cwd=str(tmp_path), id_source=lambda: f"e{next(ids):05d}", clock=clock
    )


def text(tokens: int, ch: str = "x") -> str:
    """A text Pi estimates at exactly ``tokens`` tokens (ceil(chars / 4))."""
    return ch * (4 * tokens)


def user(tree: SessionTree, tokens: int, body: str | None = None) -> dict:
    return tree.append_message({"role": "user", "content": body or text(tokens, "u")})


def assistant(tree: SessionTree, tokens: int) -> dict:
    return tree.append_message(
        {"role": "assistant", "content": [{"type": "text", "text": text(tokens, "a")}]}
    )


@pytest.fixture
def rich(tmp_path):
    """u1 a1 u2 a2 C(keeps u2) u3 a3 [u4 a4 abandoned] BS u5 a5 edit(u3) omit(a3) label(a2)."""
    t = make_tree(tmp_path)
    ids = {}
    ids["u1"] = user(t, 10)["id"]
    ids["a1"] = assistant(t, 20)["id"]
    ids["u2"] = user(t, 8)["id"]
    ids["a2"] = assistant(t, 12)["id"]
    ids["c"] = t.append_compaction(text(15, "s"), ids["u2"], 50)["id"]
    ids["u3"] = user(t, 6)["id"]
    ids["a3"] = assistant(t, 9)["id"]
    ids["u4"] = user(t, 7)["id"]
    ids["a4"] = assistant(t, 3)["id"]
    ids["bs"] = t.branch_with_summary(ids["a3"], text(11, "b"))["id"]
    ids["u5"] = user(t, 4)["id"]
    ids["a5"] = assistant(t, 5)["id"]
    ids["edit"] = t.append_context_edit(ids["u3"], {"content": text(2, "r")})["id"]
    ids["omit"] = t.append_context_edit(ids["a3"], None)["id"]
    ids["label"] = t.append_label(ids["a2"], "checkpoint")["id"]
    return t, ids


def test_nodes_and_edges_are_entries_and_parent_links(rich):
    tree, _ = rich
    g = to_networkx(tree)
    assert isinstance(g, nx.DiGraph)
    assert list(g.nodes) == [e["id"] for e in tree.entries]
    expected = {(e["parentId"], e["id"]) for e in tree.entries if e["parentId"] is not None}
    assert set(g.edges) == expected
    assert g.graph["leaf_id"] == tree.leaf_id
    assert g.graph["session_id"] == tree.session_id
    assert nx.is_tree(g)


def test_on_path_matches_get_branch(rich):
    tree, ids = rich
    g = to_networkx(tree)
    branch = {e["id"] for e in tree.get_branch()}
    assert {n for n, on in g.nodes(data="on_path") if on} == branch
    assert not g.nodes[ids["u4"]]["on_path"] and not g.nodes[ids["a4"]]["on_path"]


def test_attributes_for_compaction_edit_label_branch_summary(rich):
    tree, ids = rich
    g = to_networkx(tree)
    n = g.nodes
    status = {k: n[v]["status"] for k, v in ids.items()}
    assert status == {
        "u1": "summarized",
        "a1": "summarized",
        "u2": "kept",
        "a2": "kept",
        "c": "summary",
        "u3": "edited",
        "a3": "omitted",
        "u4": "off-path",
        "a4": "off-path",
        "bs": "kept",
        "u5": "kept",
        "a5": "kept",
        "edit": "invisible",
        "omit": "invisible",
        "label": "invisible",
    }
    # tokens = Pi's estimate of what the entry contributes, unedited
    assert n[ids["u1"]]["tokens"] == 10
    assert n[ids["u3"]]["tokens"] == 6
    assert n[ids["a3"]]["tokens"] == 9
    assert n[ids["c"]]["tokens"] == 15
    assert n[ids["bs"]]["tokens"] == 11
    assert n[ids["label"]]["tokens"] == 0
    # kinds and roles
    assert n[ids["c"]]["is_compaction"] and n[ids["c"]]["type"] == "compaction"
    assert n[ids["bs"]]["is_branch_summary"]
    assert n[ids["edit"]]["is_context_edit"] and n[ids["edit"]]["target_id"] == ids["u3"]
    assert n[ids["u1"]]["role"] == "user" and n[ids["a1"]]["role"] == "assistant"
    assert n[ids["c"]]["role"] is None
    assert n[ids["a2"]]["label"] == "checkpoint"
    assert sum(1 for _, lab in g.nodes(data="label") if lab) == 1
    # in_context: projected with messages on the current leaf's projection
    projection = tree.projection()
    assert {x for x, inc in g.nodes(data="in_context") if inc} == {
        pe.id for pe in projection.entries if pe.messages
    }
    assert not n[ids["a3"]]["in_context"] and n[ids["u3"]]["in_context"]
    assert n[ids["u1"]]["timestamp"] == tree.entry(ids["u1"])["timestamp"]
    assert n[ids["u1"]]["preview"].startswith("user: uuu")
    # in-context tokens add up to the projection's heuristic estimate
    in_context_tokens = sum(estimate_tokens(m) for m in projection.messages)
    assert in_context_tokens == 15 + 8 + 12 + 2 + 11 + 4 + 5


def test_other_leaf(rich):
    tree, ids = rich
    g = to_networkx(tree, leaf=ids["a4"])
    assert g.graph["leaf_id"] == ids["a4"]
    assert g.nodes[ids["a4"]]["on_path"] and g.nodes[ids["u4"]]["status"] == "kept"
    assert g.nodes[ids["bs"]]["status"] == "off-path"
    assert g.nodes[ids["u3"]]["status"] == "kept"  # the edit is on the other branch
    records = entry_records(tree, ids["a4"])
    assert [r["status"] for r in records] == [g.nodes[r["id"]]["status"] for r in records]


def test_tree_layout_deep_chain_no_recursion():
    n = 20_000
    chain = nx.path_graph(n, create_using=nx.DiGraph)
    pos = tree_layout(chain)
    assert len(pos) == n
    assert all(pos[i][0] == pos[0][0] for i in range(n))  # a chain is a vertical line
    assert all(pos[i + 1][1] < pos[i][1] for i in range(n - 1))  # children below parents
    assert pos[n - 1][1] == -(n - 1)


def test_tree_layout_deep_session(tmp_path):
    tree = SessionTree.in_memory(cwd=str(tmp_path))
    for i in range(20_000):
        tree.append_message({"role": "user" if i % 2 == 0 else "assistant", "content": "hi"})
    pos = tree_layout(to_networkx(tree))
    branch = tree.get_branch()
    assert len(pos) == 20_000
    assert all(pos[b["id"]][1] < pos[a["id"]][1] for a, b in itertools.pairwise(branch))


def test_tree_layout_tidy_branches():
    children = {"r": ["a", "b"], "a": ["a1", "a2"], "b": ["b1"], "a1": [], "a2": [], "b1": []}
    pos = tree_layout(children)
    assert [pos[x][0] for x in ("a1", "a2", "b1")] == [0.0, 1.0, 2.0]  # leaf order
    assert pos["a"][0] == 0.5 and pos["b"][0] == 2.0 and pos["r"][0] == 1.25
    for parent, kids in children.items():
        for kid in kids:
            assert pos[kid][1] == pos[parent][1] - 1


def test_tree_layout_forest_and_cycle():
    g = nx.DiGraph([("r1", "x"), ("r2", "y"), ("c1", "c2"), ("c2", "c1")])
    pos = tree_layout(g)
    assert set(pos) == set(g.nodes)
    assert pos["r1"][0] != pos["r2"][0]
