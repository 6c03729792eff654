"""pandas frames: usage per turn, entries, the projected context."""

from __future__ import annotations

import itertools
import math
from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest

from pi_nb.notebook.frames import (
    CONTEXT_COLUMNS,
    ENTRY_COLUMNS,
    USAGE_COLUMNS,
    context_frame,
    entries_frame,
    usage_frame,
)
from pi_nb.notebook.graph import to_networkx
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


def usage(inp: int, out: int, read: int = 0, write: int = 0, cost: float = 0.0) -> dict:
    return {
        "input": inp,
        "output": out,
        "cacheRead": read,
        "cacheWrite": write,
        "totalTokens": inp + out + read + write,
        "cost": {"total": cost},
    }


def user(tree: SessionTree, tokens: int) -> dict:
    return tree.append_message({"role": "user", "content": text(tokens, "u")})


def reply(
    tree: SessionTree, tokens: int, use: dict | None, stop: str = "stop", model: str = "gpt-4o"
) -> dict:
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": text(tokens, "a")}],
        "provider": "openai",
        "model": model,
        "stopReason": stop,
    }
    if use is not None:
        message["usage"] = use
    return tree.append_message(message)


@pytest.fixture
def turns(tmp_path):
    """Five replies: usage, usage, error reply, [compaction] usage, [branch summary] usage."""
    t = make_tree(tmp_path)
    ids: dict[str, str] = {}
    ids["u1"] = user(t, 10)["id"]
    ids["a1"] = reply(t, 20, usage(100, 20, 5, 3, 0.01))["id"]
    ids["u2"] = user(t, 7)["id"]
    ids["a2"] = reply(t, 15, usage(200, 30))["id"]
    ids["u3"] = user(t, 5)["id"]
    ids["a3"] = reply(t, 4, usage(50, 0), stop="error")["id"]
    ids["c"] = t.append_compaction(text(12, "s"), ids["u3"], 300)["id"]
    ids["u4"] = user(t, 6)["id"]
    ids["a4"] = reply(t, 8, usage(400, 40))["id"]
    ids["u5"] = user(t, 9)["id"]  # abandoned by the branch summary below
    ids["bs"] = t.branch_with_summary(ids["a4"], text(13, "b"))["id"]
    ids["u6"] = user(t, 3)["id"]
    ids["a6"] = reply(t, 2, usage(500, 60))["id"]
    return t, ids


def test_usage_frame_one_row_per_reply(turns):
    tree, ids = turns
    frame = usage_frame(tree)
    assert list(frame.columns) == list(USAGE_COLUMNS)
    assert list(frame["entry_id"]) == [ids[k] for k in ("a1", "a2", "a3", "a4", "a6")]
    assert list(frame["turn"]) == [1, 2, 3, 4, 5]
    reported = list(frame["context_tokens_reported"])
    assert reported[:2] == [100 + 20 + 5 + 3, 200 + 30]
    assert math.isnan(reported[2])  # an error reply's usage does not count
    assert reported[3:] == [440, 560]
    assert list(frame["compaction"]) == [False, False, False, True, False]
    assert list(frame["branch_switch"]) == [False, False, False, False, True]
    assert frame["input"].iloc[0] == 100 and frame["cache_read"].iloc[0] == 5
    assert frame["cache_write"].iloc[0] == 3 and frame["cost"].iloc[0] == pytest.approx(0.01)
    assert list(frame["stop_reason"]) == ["stop", "stop", "error", "stop", "stop"]
    assert set(frame["model"]) == {"openai/gpt-4o"}
    assert pd.api.types.is_datetime64_any_dtype(frame["timestamp"])


def test_usage_frame_estimates_before_each_call(turns):
    tree, ids = turns
    frame = usage_frame(tree).set_index("entry_id")
    est = frame["context_tokens_estimated"]
    # 1st call: nothing reported yet, the heuristic over [u1]
    assert est[ids["a1"]] == 10
    # 2nd call: a1's reported usage + u2
    assert est[ids["a2"]] == 128 + 7
    # 3rd call: a2's usage + u3
    assert est[ids["a3"]] == 230 + 5
    # after the compaction: usage is stale, the heuristic over [summary, u3, a3, u4]
    assert est[ids["a4"]] == 12 + 5 + 4 + 6
    # after the branch summary: a4's usage (after the compaction) + bs + u6
    assert est[ids["a6"]] == 440 + 13 + 3
    # … and each equals Pi's projected estimate at the reply's parent
    for eid in frame.index:
        parent = tree.entry(eid)["parentId"]
        expected = estimate_projected_context_tokens(tree.projection(parent)).tokens
        assert est[eid] == expected


def test_usage_frame_other_leaf_and_empty(turns, tmp_path):
    tree, ids = turns
    frame = usage_frame(tree, leaf=ids["u5"])
    assert list(frame["entry_id"]) == [ids[k] for k in ("a1", "a2", "a3", "a4")]
    empty = usage_frame(make_tree(tmp_path, "empty.jsonl"))
    assert len(empty) == 0 and list(empty.columns) == list(USAGE_COLUMNS)


def test_entries_frame(turns):
    tree, ids = turns
    frame = entries_frame(tree)
    assert list(frame.columns) == list(ENTRY_COLUMNS)
    assert list(frame["id"]) == [e["id"] for e in tree.entries]
    g = to_networkx(tree)
    assert list(frame["status"]) == [g.nodes[e["id"]]["status"] for e in tree.entries]
    row = frame.set_index("id").loc[ids["u1"]]
    assert row["type"] == "message" and row["role"] == "user" and row["tokens"] == 10
    assert row["status"] == "summarized" and bool(row["on_path"])
    assert frame.set_index("id").loc[ids["u5"], "status"] == "off-path"


def test_context_frame(turns):
    tree, _ = turns
    projection = tree.projection()
    frame = context_frame(tree)
    assert list(frame.columns) == list(CONTEXT_COLUMNS)
    assert len(frame) == len(projection.messages)
    assert list(frame["role"]) == [m["role"] for m in projection.messages]
    assert list(frame["tokens"]) == [estimate_tokens(m) for m in projection.messages]
    assert frame["role"].iloc[0] == "compactionSummary" and frame["status"].iloc[0] == "summary"
    assert frame["tokens"].sum() == 12 + 5 + 4 + 6 + 8 + 13 + 3 + 2
    assert context_frame(projection).equals(frame)


def test_usage_frame_cost_of_an_unpriced_model_is_unknown_not_zero(tmp_path) -> None:
    # Issue 15: Pi records 0 for a model without a price; the frame must not show that 0.
    from pi_nb.research.costs import usage_cost

    tree = make_tree(tmp_path)
    for model in ("no-such-model-xyz", "gpt-4o-mini"):
        user(tree, 10)
        reply(tree, 10, usage(1000, 100, read=9000), model=model)
    frame = usage_frame(tree)
    assert math.isnan(frame["cost"].iloc[0])
    assert frame.attrs["notes"] == [
        "no price for openai/no-such-model-xyz in litellm's table: cost unknown (NaN)"
    ]
    # A recorded 0 for a model litellm can price is priced (cached input at the cache rate).
    expected, _ = usage_cost("openai/gpt-4o-mini", usage(1000, 100, read=9000))
    assert frame["cost"].iloc[1] == pytest.approx(expected) and expected > 0
