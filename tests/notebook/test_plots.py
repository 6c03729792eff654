"""matplotlib plots of the tree and of the usage per turn (Agg backend, offline)."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from pi_nb.notebook.frames import usage_frame
from pi_nb.notebook.graph import to_networkx
from pi_nb.notebook.plots import BRANCH_LINE, COMPACTION_LINE, plot_tree, plot_usage
from pi_nb.session.tree import SessionTree

BASE = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def make_tree(tmp_path, name: str = "s.jsonl") -> SessionTree:
    ids = itertools.count()
    ticks = itertools.count()

    def clock() -> str:
        return (BASE + timedelta(seconds=next(ticks))).isoformat().replace("+00:00", "Z")

    return SessionTree.create(
        tmp_path / name, cwd=str(tmp_path), id_source=lambda: f"e{next(ids):05d}", clock=clock
    )


def reply(tree: SessionTree, total: int) -> str:
    return tree.append_message(
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "ok"}],
            "usage": {"input": total - 10, "output": 10, "totalTokens": total},
            "stopReason": "stop",
        }
    )["id"]


@pytest.fixture
def session(tmp_path):
    t = make_tree(tmp_path)
    t.append_message({"role": "user", "content": "a" * 400})
    first = reply(t, 300)
    t.append_message({"role": "user", "content": "b" * 400})
    reply(t, 600)
    t.append_compaction("summary " * 10, None, 600)
    t.append_message({"role": "user", "content": "c"})
    reply(t, 200)
    t.branch_with_summary(first, "went elsewhere")
    t.append_message({"role": "user", "content": "d"})
    last = reply(t, 400)
    t.append_context_edit(last, {"content": "short"})
    t.append_label(first, "start <here>")
    return t


def _lines_by_gid(ax):
    out: dict[str, list] = {}
    for line in ax.get_lines():
        out.setdefault(line.get_gid(), []).append(line)
    return out


def test_plot_usage_lines(session, tmp_path):
    window, reserve = 1000, 250
    ax = plot_usage(session, window=window, reserve=reserve)
    lines = _lines_by_gid(ax)
    (w,) = lines["window"]
    (threshold,) = lines["threshold"]
    assert list(w.get_ydata()) == [window, window]
    assert list(threshold.get_ydata()) == [window - reserve, window - reserve]
    frame = usage_frame(session)
    (reported,) = lines["reported"]
    assert list(reported.get_ydata()) == list(frame["context_tokens_reported"])
    assert list(reported.get_ydata()) == [300, 400]  # 600 and 200 are on the other branch
    (estimated,) = lines["estimated"]
    assert list(estimated.get_ydata()) == list(frame["context_tokens_estimated"])
    # a branch switch before turn 2 on this branch; the compaction is on the other branch
    assert [list(x.get_xdata()) for x in lines["branch_switch"]] == [[1.5, 1.5]]
    assert "compaction" not in lines
    out = tmp_path / "usage.png"
    ax.figure.savefig(out)
    assert out.stat().st_size > 1000


def test_plot_usage_compaction_marks_and_frame_input(session, tmp_path):
    leaf = next(
        e["id"]
        for e in session.entries
        if e.get("type") == "message"
        and (e["message"].get("usage") or {}).get("totalTokens") == 200
    )
    session.branch(leaf)
    frame = usage_frame(session)
    _, ax = plt.subplots()
    assert plot_usage(frame, window=700, ax=ax) is ax
    lines = _lines_by_gid(ax)
    assert list(lines["window"][0].get_ydata()) == [700, 700]
    assert "threshold" not in lines
    assert [list(x.get_xdata()) for x in lines["compaction"]] == [[2.5, 2.5]]
    with pytest.raises(ValueError):
        plot_usage(frame, reserve=100)


def test_plot_usage_marks_every_flagged_turn_and_names_each_kind_once():
    # A plain mapping of columns is a frame too; two marks of each kind.
    frame = {
        "turn": [1, 2, 3, 4],
        "context_tokens_reported": [10, 20, 30, 40],
        "context_tokens_estimated": [11, 21, 31, 41],
        "compaction": [False, True, False, True],
        "branch_switch": [True, False, True, False],
    }
    lines = _lines_by_gid(plot_usage(frame))
    compaction, branch = lines["compaction"], lines["branch_switch"]
    assert [list(x.get_xdata()) for x in compaction] == [[1.5, 1.5], [3.5, 3.5]]
    assert [list(x.get_xdata()) for x in branch] == [[0.5, 0.5], [2.5, 2.5]]
    assert [(x.get_color(), x.get_linestyle(), x.get_linewidth()) for x in compaction] == [
        (COMPACTION_LINE, "-", 1.2)
    ] * 2
    assert [(x.get_color(), x.get_linestyle(), x.get_linewidth()) for x in branch] == [
        (BRANCH_LINE, "-.", 1.0)
    ] * 2
    # Only the first mark of a kind is labelled: the legend names each kind once.
    assert [x.get_label().startswith("_") for x in compaction] == [False, True]
    assert [x.get_label() for x in compaction[:1] + branch[:1]] == ["compaction", "branch switch"]
    assert branch[1].get_label().startswith("_")


def test_plot_tree(session, tmp_path):
    ax = plot_tree(session)
    labels = [t.get_text() for t in ax.texts]
    assert labels == ["start <here>"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    for name in ("kept", "off-path", "compaction", "branch summary", "context edit", "leaf"):
        assert name in legend
    out = tmp_path / "tree.png"
    ax.figure.savefig(out)
    assert out.stat().st_size > 1000
    _, ax2 = plt.subplots()
    assert plot_tree(to_networkx(session), ax=ax2) is ax2


def test_plot_tree_5000_nodes_fast(tmp_path):
    tree = SessionTree.in_memory(cwd=str(tmp_path))
    fork = None
    for i in range(5000):
        if i % 100 == 50 and fork is not None:
            tree.branch(fork)
        entry = tree.append_message({"role": "user" if i % 2 else "assistant", "content": "x"})
        if i % 100 == 10:
            fork = entry["id"]
        if i % 500 == 0:
            tree.append_label(entry["id"], f"L{i}")
    start = time.perf_counter()
    ax = plot_tree(tree)
    ax.figure.savefig(tmp_path / "big.png")
    elapsed = time.perf_counter() - start
    assert elapsed < 3.0, elapsed
    assert "showing" in ax.get_title()  # 5000 messages + labels > max_nodes


def test_plot_tree_truncates(tmp_path):
    tree = SessionTree.in_memory(cwd=str(tmp_path))
    for _ in range(300):
        tree.append_message({"role": "user", "content": "x"})
    ax = plot_tree(tree, max_nodes=100)
    assert "showing 100 of 300" in ax.get_title()


def test_imports_stay_light():
    code = (
        "import sys, pi_nb.notebook.frames, pi_nb.notebook.plots, pi_nb.notebook.graph, "
        "pi_nb.notebook.diff, pi_nb.notebook.html\n"
        "heavy = [m for m in ('pandas', 'matplotlib', 'networkx', 'numpy') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""
