"""One token basis on every surface: the next model call's context, labelled by its parts
(messages + system prompt + tool declarations), as ``Session.context_tokens`` counts it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pi_nb.agent import Session, next_call_tokens
from pi_nb.session.tree import SessionTree

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def file(tmp_path: Path) -> Path:
    """A session file with messages but no reported usage: a pure estimate."""
    path = tmp_path / "s.jsonl"
    tree = SessionTree.create(path, str(tmp_path))
    tree.append_message({"role": "user", "content": "Explain the projection " * 40})
    tree.append_message(
        {"role": "assistant", "content": [{"type": "text", "text": "It is C = P(H). " * 30}],
         "provider": "pinb", "model": "scripted", "stopReason": "stop"}
    )  # fmt: skip
    tree.flush()
    tree.close()
    return path


def test_parts_add_up_to_the_session_figure(file: Path) -> None:
    session = Session.open(file, model="pinb/scripted")
    call = session.next_call_tokens()
    assert not call.reported and call.tools > 0 and call.system_prompt > 0
    assert call.tokens == sum(n for _, n in call.parts()) == session.context_tokens().tokens
    assert call.messages == session.tree.context_tokens().tokens
    label = call.label()
    assert label.startswith(f"{call.tokens:,} tokens (estimated: messages {call.messages:,}")
    assert f"tool declarations {call.tools:,}" in label
    session.close()


def test_cli_tokens_counts_the_next_call(file: Path) -> None:
    expected = Session.open(file, model="pinb/scripted")
    want = expected.next_call_tokens()
    expected.close()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = [sys.executable, "-m", "pi_nb", "tokens", str(file), "--model", "pinb/scripted"]
    out = json.loads(subprocess.run([*run, "--json"], capture_output=True, text=True, env=env,
                                    check=True).stdout)  # fmt: skip
    assert out["nextCallTokens"] == want.tokens and out["nextCallKind"] == "estimated"
    assert out["nextCallParts"]["tool declarations"] == want.tools
    text = subprocess.run(run, capture_output=True, text=True, env=env, check=True).stdout
    assert f"context tokens      : {want.label()}" in text


def test_explorer_and_card_show_the_same_figure(file: Path, monkeypatch: Any) -> None:
    pytest.importorskip("anywidget")
    import comm
    from comm.base_comm import BaseComm

    from pi_nb.notebook.html import agent_session_html, session_html
    from pi_nb.notebook.widget import SessionExplorer

    class Quiet(BaseComm):
        def publish_msg(self, *args: Any, **kwargs: Any) -> None:
            pass

    monkeypatch.setattr(comm, "create_comm", lambda **kw: Quiet(**kw))
    session = Session.open(file, model="pinb/scripted", window=4096)
    want = session.next_call_tokens()
    bare = SessionTree.open(file)
    for widget in (SessionExplorer(session), SessionExplorer(bare)):
        try:
            assert widget._tokens["used"] == want.tokens
        finally:
            widget.close()
    assert next_call_tokens(bare, "pinb/scripted") == want
    assert want.label() in agent_session_html(session)
    assert want.label() in session_html(bare, call=next_call_tokens(bare, "pinb/scripted"))
    session.close()


def test_reported_usage_is_labelled_as_such(file: Path, tmp_path: Path) -> None:
    tree = SessionTree.open(file)
    tree.append_message(
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "provider": "pinb",
         "model": "scripted", "stopReason": "stop", "usage": {"input": 700, "output": 20,
         "cacheRead": 0, "cacheWrite": 0, "totalTokens": 720}}
    )  # fmt: skip
    tree.append_message({"role": "user", "content": "and now?"})
    session = Session(tree, model="pinb/scripted")
    call = session.next_call_tokens()
    assert call.reported and call.usage == 720 and call.tokens == session.context_tokens().tokens
    assert call.label() == f"{call.tokens:,} tokens (reported usage 720 + estimated newer messages {call.messages:,})"
    tree.close()
