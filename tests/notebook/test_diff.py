"""Projection diffs: what a compaction (and later edits) did to the context."""

from __future__ import annotations

import itertools
import math
from datetime import datetime, timedelta, timezone

import pytest

from pi_nb.notebook.diff import (
    DIFF_COLUMNS,
    ProjectionDiff,
    diff_projection,
    latest_compaction_diff,
)
from pi_nb.session.tree import SessionTree
from pi_nb.tokens import estimate_projected_context_tokens, estimate_tokens

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
    return ch * (4 * tokens)


def add(tree: SessionTree, role: str, tokens: int) -> str:
    if role == "user":
        message = {"role": "user", "content": text(tokens, "u")}
    elif role == "assistant":
        message = {"role": "assistant", "content": [{"type": "text", "text": text(tokens, "a")}]}
    else:
        message = {
            "role": "toolResult",
            "toolCallId": "c1",
            "toolName": "read",
            "content": [{"type": "text", "text": text(tokens, "t")}],
        }
    return tree.append_message(message)["id"]


SIZES = {
    "u1": ("user", 10),
    "a1": ("assistant", 20),
    "t1": ("toolResult", 30),
    "a2": ("assistant", 5),
    "u2": ("user", 8),
    "a3": ("assistant", 12),
    "t2": ("toolResult", 40),
    "a4": ("assistant", 6),
}
SUMMARY = 14
EDITED = 3
LATER = {"u3": ("user", 4), "a5": ("assistant", 7)}


@pytest.fixture
def compacted(tmp_path):
    """8 messages, a compaction keeping from u2, then an edit of t2, an omission of u2 and
    two new messages."""
    t = make_tree(tmp_path)
    ids = {name: add(t, role, size) for name, (role, size) in SIZES.items()}
    before = t.projection()
    ids["c"] = t.append_compaction(text(SUMMARY, "s"), ids["u2"], 131)["id"]
    t.append_context_edit(ids["t2"], {"content": text(EDITED, "r")})
    t.append_context_edit(ids["u2"], None)
    for name, (role, size) in LATER.items():
        ids[name] = add(t, role, size)
    return t, ids, before


def test_latest_compaction_diff_statuses(compacted):
    tree, ids, before = compacted
    diff = latest_compaction_diff(tree)
    assert isinstance(diff, ProjectionDiff)
    status = {r["id"]: r["status"] for r in diff.rows}
    assert status == {
        ids["u1"]: "summarized",
        ids["a1"]: "summarized",
        ids["t1"]: "summarized",
        ids["a2"]: "summarized",
        ids["u2"]: "omitted",
        ids["a3"]: "kept",
        ids["t2"]: "edited",
        ids["a4"]: "kept",
        ids["c"]: "added",
        ids["u3"]: "added",
        ids["a5"]: "added",
    }
    # order: before order, then the added ones in after order
    assert [r["id"] for r in diff.rows] == [ids[k] for k in SIZES] + [
        ids["c"],
        ids["u3"],
        ids["a5"],
    ]
    assert set(diff.counts) == {"kept", "summarized", "omitted", "edited", "added"}
    assert diff.counts == {"kept": 2, "summarized": 4, "omitted": 1, "edited": 1, "added": 3}
    assert diff.before.leaf_id == before.leaf_id


def test_latest_compaction_diff_tokens(compacted):
    tree, ids, before = compacted
    diff = latest_compaction_diff(tree)
    frame = diff.frame
    assert list(frame.columns) == list(DIFF_COLUMNS)
    by_id = frame.set_index("id")
    for name, (_, size) in SIZES.items():
        assert by_id.loc[ids[name], "tokens_before"] == size
    assert by_id.loc[ids["t2"], "tokens_after"] == EDITED
    assert by_id.loc[ids["u2"], "tokens_after"] == 0
    assert by_id.loc[ids["c"], "tokens_after"] == SUMMARY
    total_before = sum(size for _, size in SIZES.values())
    total_after = SUMMARY + 12 + EDITED + 6 + 4 + 7
    assert diff.tokens_before == total_before == frame["tokens_before"].sum()
    assert diff.tokens_after == total_after == frame["tokens_after"].sum()
    # … the same as the projections' own estimates (no provider usage in this session)
    assert diff.tokens_before == sum(estimate_tokens(m) for m in before.messages)
    assert diff.tokens_before == estimate_projected_context_tokens(before).tokens
    assert diff.tokens_after == tree.context_tokens().tokens
    assert diff.saved == total_before - total_after
    assert diff.ratio == pytest.approx(total_after / total_before)


def test_diff_inputs_and_rendering(compacted):
    tree, _, before = compacted
    a = diff_projection(before, tree.projection())
    b = diff_projection((tree, before.leaf_id), tree)
    c = diff_projection(before.leaf_id, tree.leaf_id, tree=tree)
    assert a.rows == b.rows == c.rows == latest_compaction_diff(tree).rows
    html = a._repr_html_()
    for status in ("kept", "summarized", "omitted", "edited", "added"):
        assert status in html
    assert f"{a.tokens_before:,} → {a.tokens_after:,} tokens" in html
    text_repr = repr(a)
    assert text_repr.startswith("<ProjectionDiff") and "summarized" in text_repr


def test_identical_and_empty(compacted):
    tree, ids, _ = compacted
    same = diff_projection(tree, tree)
    assert same.saved == 0
    status = {r["id"]: r["status"] for r in same.rows}
    assert status.pop(ids["u2"]) == "omitted"  # omitted by an edit on both sides: 0 → 0
    assert set(status.values()) == {"kept"}
    from_empty = diff_projection(None, tree.leaf_id, tree=tree)
    assert {r["status"] for r in from_empty.rows} == {"added"}
    assert math.isnan(from_empty.ratio)


def test_branch_switch_omits_and_no_compaction_raises(tmp_path):
    t = make_tree(tmp_path)
    u1 = add(t, "user", 5)
    a1 = add(t, "assistant", 6)
    with pytest.raises(ValueError):
        latest_compaction_diff(t)
    old_leaf = add(t, "user", 9)
    t.branch(a1)
    add(t, "user", 2)
    diff = diff_projection((t, old_leaf), t)
    status = {r["id"]: r["status"] for r in diff.rows}
    assert status[u1] == "kept" and status[old_leaf] == "omitted"
