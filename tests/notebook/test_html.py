"""HTML renderers: content, status colours, and escaping of user text."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone

import pytest

from pi_nb.notebook.diff import diff_projection
from pi_nb.notebook.html import (
    STATUS_COLORS,
    entry_html,
    esc,
    message_preview,
    projection_html,
    session_html,
    table_html,
)
from pi_nb.session.tree import SessionTree
from pi_nb.tokens import estimate_tokens

BASE = datetime(2026, 1, 1, tzinfo=timezone.utc)
EVIL = "<script>alert('x')</script>"


def make_tree(tmp_path, name: str = "s.jsonl") -> SessionTree:
    ids = itertools.count()
    ticks = itertools.count()

    def clock() -> str:
        return (BASE + timedelta(seconds=next(ticks))).isoformat().replace("+00:00", "Z")

    return SessionTree.create(
        tmp_path / name, cwd=str(tmp_path), id_source=lambda: f"e{next(ids):05d}", clock=clock
    )


@pytest.fixture
def evil(tmp_path):
    t = make_tree(tmp_path)
    u = t.append_message({"role": "user", "content": EVIL})
    a = t.append_message({"role": "assistant", "content": [{"type": "text", "text": EVIL}]})
    t.append_context_edit(a["id"], {"content": "edited " + EVIL})
    t.append_label(u["id"], EVIL)
    t.append_session_info(EVIL)
    return t, u, a


def _safe(html: str) -> None:
    assert "<script>" not in html
    assert "&lt;script&gt;" in html


def test_session_html_escapes_and_shows_facts(evil):
    tree, _, _ = evil
    html = session_html(tree, window=1000)
    _safe(html)
    assert tree.session_id in html and tree.leaf_id in html
    assert str(len(tree.entries)) in html
    from pi_nb.agent import next_call_tokens

    call = next_call_tokens(tree)  # the next model call's basis: messages + prompt + tools
    assert f"{call.tokens:,} tokens (estimated: messages {tree.context_tokens().tokens:,}" in html
    assert "of W = 1,000" in html
    assert f"{len(tree.projection().messages)} messages" in html


def test_entry_html_escapes(evil):
    _, u, a = evil
    _safe(entry_html(u, label=EVIL))
    html = entry_html(a)
    _safe(html)
    assert "assistant" in html and a["id"] in html


def test_projection_html_statuses_and_tokens(evil):
    tree, _, _ = evil
    projection = tree.projection()
    html = projection_html(projection)
    _safe(html)
    assert STATUS_COLORS["edited"] in html and STATUS_COLORS["kept"] in html
    total = sum(estimate_tokens(m) for m in projection.messages)
    assert f"{total:,} tokens" in html


def test_diff_and_table_escape(evil):
    tree, u, _ = evil
    before = tree.projection(u["id"])
    _safe(diff_projection(before, tree)._repr_html_())
    _safe(table_html(["id", "status", "text"], [["x", "kept", EVIL]], status_column="status"))


def test_helpers():
    assert esc('<a href="x">') == "&lt;a href=&quot;x&quot;&gt;"
    assert esc(None) == ""
    long = {"role": "user", "content": "word " * 100}
    assert len(message_preview(long, 20)) == 20
    assert message_preview({"role": "compactionSummary", "summary": "S"}) == "S"


def test_trees_and_projections_render_themselves(tmp_path):
    import shutil

    from pi_nb.samples import sample_session_path
    from pi_nb.session.tree import SessionTree

    copy = tmp_path / "s.jsonl"
    shutil.copy(sample_session_path(), copy)
    tree = SessionTree.open(copy)
    assert "Decimal prices" in tree._repr_html_()
    html = tree.projection()._repr_html_()
    assert "1a2b3c08" in html and "edited" in html
