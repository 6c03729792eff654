"""The session explorer's state and widget model, over a real (recording) comm.

The comm is ``comm.base_comm.BaseComm`` with ``publish_msg`` recording the JSON it would put
on the wire, so ipywidgets' real open / update / custom-message paths run: state is
serialized as the front end receives it, and front-end messages enter through
``comm.handle_msg`` exactly as the kernel delivers them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import comm
import pytest
from comm.base_comm import BaseComm
from pinb_testkit import pi_turn_lines, wordy_summary

from pi_nb.compaction.compact import CompactionResult, NavigateResult
from pi_nb.notebook import widget_state as ws
from pi_nb.samples import sample_session_path
from pi_nb.session.tree import SessionTree

anywidget = pytest.importorskip("anywidget")

from pi_nb.notebook.widget import SessionExplorer, asset_dir, explore  # noqa: E402

LEAF = "1a2b3c1b"
OFF_PATH = "1a2b3c12"  # on the abandoned currency-whitelist branch
SIZE_BUDGET = 2_500_000  # bytes of synced JSON for 10,000 entries


class RecordingComm(BaseComm):
    """A comm that keeps what it would send (as JSON) instead of talking to a kernel."""

    def __init__(self, **kwargs: Any) -> None:
        self.sent: list[dict[str, Any]] = []
        super().__init__(**kwargs)

    def publish_msg(
        self,
        msg_type: str,
        data: Any = None,
        metadata: Any = None,
        buffers: Any = None,
        **keys: Any,
    ) -> None:
        wire = json.dumps(data)  # what jupyter_client's packer would do
        self.sent.append({"msg_type": msg_type, "data": json.loads(wire), "bytes": len(wire)})

    def updates(self) -> list[dict[str, Any]]:
        return [
            m["data"]["state"]
            for m in self.sent
            if m["msg_type"] == "comm_msg" and m["data"].get("method") == "update"
        ]

    def from_frontend(self, data: dict[str, Any]) -> None:
        self.handle_msg({"content": {"comm_id": self.comm_id, "data": data}, "buffers": []})


@pytest.fixture(autouse=True)
def recording_comm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(comm, "create_comm", lambda **kw: RecordingComm(**kw))


@pytest.fixture
def session_file(tmp_path: Path) -> Path:
    copy = tmp_path / "session.jsonl"
    shutil.copy(sample_session_path(), copy)
    return copy


@pytest.fixture
def tree(session_file: Path) -> SessionTree:
    return SessionTree.open(session_file)


@pytest.fixture
def explorer(tree: SessionTree) -> Any:
    widget = SessionExplorer(tree, throttle=0.05)
    yield widget
    widget.close()


def rows_by_id(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in rows}


# --- pure state ------------------------------------------------------------------------------


def test_tree_state_flags_match_the_tree(tree: SessionTree) -> None:
    rows = ws.tree_state(tree)
    by_id = rows_by_id(rows)
    assert [r["id"] for r in rows] == [e["id"] for e in tree.entries]
    path = {e["id"] for e in tree.get_branch()}
    assert {r["id"] for r in rows if r.get("on_path")} == path
    assert [r["id"] for r in rows if r.get("leaf")] == [LEAF]
    assert by_id["1a2b3c13"]["compaction"] is True and "on_path" not in by_id["1a2b3c13"]
    assert by_id["1a2b3c16"]["branch_summary"] is True
    assert by_id["1a2b3c1a"]["edit"] is True and by_id["1a2b3c1a"]["target"] == "1a2b3c08"
    assert by_id["1a2b3c0d"]["label"] == "decimal-done"
    assert by_id["1a2b3c03"]["role"] == "assistant" and by_id["1a2b3c03"]["tokens"] > 0
    assert all(len(r["preview"]) <= 80 for r in rows)
    for row in rows:  # a row mentions only what is set: small JSON
        assert all(v is not None and v is not False for k, v in row.items() if k != "parent")


def test_statuses_match_the_projection(tree: SessionTree) -> None:
    by_id = rows_by_id(ws.tree_state(tree))
    projection = tree.projection()
    for pe in projection.entries:
        if pe.status == "invisible":
            assert "status" not in by_id[pe.id]
        else:
            assert by_id[pe.id]["status"] == pe.status
            assert by_id[pe.id].get("in_context") is (pe.status in ("summary", "kept", "edited"))
    assert by_id["1a2b3c08"]["status"] == "edited"

    context = ws.context_state(tree)
    assert [r["id"] for r in context if r["in_context"]] == [
        pe.id for pe in projection.entries for _ in pe.messages
    ]
    assert [r["index"] for r in context] == list(range(len(projection.messages)))
    assert len(ws.token_state(tree)["by_role"]) >= 3


def test_compaction_on_the_path_is_explained(tree: SessionTree) -> None:
    tree.branch("1a2b3c15")  # after the compaction 1a2b3c13 (keeps from 1a2b3c0f)
    by_id = rows_by_id(ws.tree_state(tree))
    assert by_id["1a2b3c13"]["status"] == "summary" and by_id["1a2b3c13"]["in_context"]
    assert by_id["1a2b3c02"]["status"] == "summarized" and "in_context" not in by_id["1a2b3c02"]
    assert by_id["1a2b3c0f"]["status"] == "kept"
    context = ws.context_state(tree)
    group = context[0]
    assert group["status"] == "summarized" and group["compaction"] == "1a2b3c13"
    assert group["count"] == sum(1 for r in by_id.values() if r.get("status") == "summarized")
    assert group["in_context"] is False and group["tokens_before"] == 4300
    assert context[1]["role"] == "compactionSummary" and context[1]["status"] == "summary"


def test_omitted_messages_stay_in_the_context_panel_greyed(tree: SessionTree) -> None:
    tree.append_context_edit("1a2b3c03", None)
    context = ws.context_state(tree)
    omitted = [r for r in context if r["status"] == "omitted"]
    assert [r["id"] for r in omitted] == ["1a2b3c03"]
    assert omitted[0]["index"] is None and omitted[0]["in_context"] is False


def test_token_state(tree: SessionTree) -> None:
    state = ws.token_state(tree, window=2048, reserve=512)
    assert state["used"] == tree.context_tokens().tokens
    assert state["threshold"] == 2048 - 512 and state["kind"] == "estimated"
    assert state["over"] is (state["used"] > 1536)
    assert ws.token_state(tree, window=200, reserve=100)["over"] is True
    assert ws.token_state(tree, overhead=100)["used"] == state["used"] + 100
    assert ws.token_state(tree)["window"] == ws.DEFAULT_WINDOW


def test_reported_usage_is_labelled(tmp_path: Path) -> None:
    tree = SessionTree.in_memory()
    tree.append_message({"role": "user", "content": "hi"})
    tree.append_message(
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "hello"}],
            "usage": {
                "input": 900,
                "output": 100,
                "cacheRead": 0,
                "cacheWrite": 0,
                "totalTokens": 1000,
            },
            "stopReason": "stop",
        }
    )
    state = ws.token_state(tree, overhead=500)
    assert state["kind"] == "reported" and state["used"] == 1000 and state["overhead"] == 0


# --- the widget over a comm ------------------------------------------------------------------


def test_open_message_carries_the_state(explorer: Any, tree: SessionTree) -> None:
    opened = explorer.comm.sent[0]
    assert opened["msg_type"] == "comm_open"
    state = opened["data"]["state"]
    assert "export default" in state["_esm"] and ".pinb-explorer" in state["_css"]
    assert state["leaf_id"] == LEAF and state["selected_id"] is None
    assert len(state["_tree"]) == len(tree.entries)
    assert state["_caps"] == {"session": False, "compact": False, "summarize": False}
    assert state["_tokens"]["window_source"] == "default"


def test_select_from_the_front_end_and_from_python(explorer: Any) -> None:
    explorer.comm.from_frontend({"method": "update", "state": {"selected_id": OFF_PATH}})
    assert explorer.selected_id == OFF_PATH
    assert explorer.selected["id"] == OFF_PATH
    explorer.selected_id = "1a2b3c03"
    assert explorer.comm.updates()[-1] == {"selected_id": "1a2b3c03"}


def test_branch_action_moves_the_leaf(explorer: Any, tree: SessionTree) -> None:
    explorer.comm.from_frontend({"method": "update", "state": {"selected_id": OFF_PATH}})
    explorer.comm.from_frontend(
        {"method": "custom", "content": {"action": "branch", "id": OFF_PATH, "seq": 7}}
    )
    assert tree.leaf_id == OFF_PATH and explorer.leaf_id == OFF_PATH
    assert explorer.status.startswith(f"Leaf moved {LEAF} → {OFF_PATH}")
    assert explorer._ack == 7
    by_id = rows_by_id(explorer._tree)
    assert by_id[OFF_PATH].get("leaf") and by_id["1a2b3c0f"].get("on_path")
    assert "on_path" not in by_id["1a2b3c17"]
    last = explorer.comm.updates()[-1]
    assert last["status"].startswith("Leaf moved") and last["_ack"] == 7
    assert any(u.get("leaf_id") == OFF_PATH for u in explorer.comm.updates())


def test_omit_and_replace_append_context_edits(
    explorer: Any, tree: SessionTree, session_file: Path
) -> None:
    explorer._handle_custom_msg({"action": "omit", "id": "1a2b3c03"}, [])
    assert explorer.status.startswith("Omitted 1a2b3c03")
    explorer._handle_custom_msg({"action": "replace", "id": "1a2b3c05", "text": "shorter"}, [])
    assert explorer.status.startswith("Replaced 1a2b3c05")
    on_disk = [json.loads(line) for line in session_file.read_text().splitlines()][-2:]
    assert [(e["type"], e["targetId"]) for e in on_disk] == [
        ("context_edit", "1a2b3c03"),
        ("context_edit", "1a2b3c05"),
    ]
    assert on_disk[1]["replacement"] == {"content": [{"type": "text", "text": "shorter"}]}
    statuses = {r["id"]: r["status"] for r in explorer._context}
    assert statuses["1a2b3c03"] == "omitted" and statuses["1a2b3c05"] == "edited"


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            {"action": "omit", "id": "1a2b3c12"},
            "Error: ContextEditError: Entry 1a2b3c12 is not on the active branch",
        ),
        ({"action": "omit", "id": "nope"}, "Error: Entry nope is not in this session."),
        ({"action": "omit"}, "Error: Select an entry in the tree first."),
        (
            {"action": "replace", "id": "1a2b3c03", "text": "  "},
            "Error: Replace needs a non-empty text.",
        ),
        ({"action": "compact"}, "Error: Compaction needs a pi_nb.agent.Session"),
        ({"action": "compact", "preview": True}, "Error: Compaction needs a pi_nb.agent.Session"),
        (
            {"action": "branch", "id": "1a2b3c12", "summarize": True},
            "Error: Summarizing the abandoned branch needs",
        ),
        ({"action": "explode"}, "Error: Unknown action 'explode'"),
    ],
)
def test_errors_become_one_status_line(
    explorer: Any, tree: SessionTree, message: dict[str, Any], expected: str
) -> None:
    before = len(tree.entries), tree.leaf_id
    explorer.comm.from_frontend({"method": "custom", "content": message})
    assert explorer.status.startswith(expected), explorer.status
    assert "\n" not in explorer.status and len(explorer.status) <= 240
    assert (len(tree.entries), tree.leaf_id) == before  # nothing half-done


def test_frontend_messages_without_action_are_ignored(explorer: Any) -> None:
    explorer.comm.from_frontend({"method": "custom", "content": {"type": "anything-else"}})
    assert explorer.status == ""


class FakeSession:
    """The duck-typed session API the explorer uses (pi_nb.agent.Session has the same)."""

    def __init__(self, tree: SessionTree) -> None:
        self.tree = tree
        self.window = 4096
        self.reserve = 1024
        self.calls: list[tuple[Any, ...]] = []

    def navigate(self, target: str, summarize: bool = False, focus: str | None = None) -> Any:
        self.calls.append(("navigate", target, summarize, focus))
        if summarize:
            return NavigateResult(summary_entry=self.tree.branch_with_summary(target, "what we tried"))
        self.tree.branch(target)
        return None

    def compact(self, focus: str | None = None, preview: bool = False) -> Any:
        self.calls.append(("compact", focus, preview))
        if focus == "boom":
            raise RuntimeError("model unavailable\nsecond line")
        return CompactionResult(
            summary="## Goal\nDecimal money",
            first_kept_entry_id="1a2b3c17",
            tokens_before=376,
            tokens_after=120,
            details=None,
            usage=None,
            entry=None,  # type: ignore[arg-type]  # a stand-in: nothing written
            preparation=None,  # type: ignore[arg-type]
        )

    def edit(self, entry_id: str, omit: bool = False, replace: Any = None) -> Any:
        self.calls.append(("edit", entry_id, omit, replace))
        return self.tree.append_context_edit(entry_id, None if omit else {"content": replace})

    def context_tokens(self) -> Any:
        base = self.tree.context_tokens()
        return type(base)(base.tokens + 50, 0, base.trailingTokens + 50, None)


def test_a_session_drives_the_actions(tree: SessionTree) -> None:
    session = FakeSession(tree)
    widget = SessionExplorer(session)
    try:
        assert widget._caps == {"session": True, "compact": True, "summarize": True}
        tokens = widget._tokens
        assert (tokens["window"], tokens["reserve"], tokens["threshold"]) == (4096, 1024, 3072)
        assert tokens["used"] == tree.context_tokens().tokens + 50 and tokens["overhead"] == 50
        assert tokens["window_source"] == "session"

        widget.perform({"action": "compact", "preview": True, "focus": "money"})
        assert session.calls[-1] == ("compact", "money", True)
        assert widget._preview["first_kept_id"] == "1a2b3c17"
        assert widget.status.startswith("Preview (nothing written): 376 → 120 tokens")
        widget.perform({"action": "discard_preview"})
        assert widget._preview == {}
        widget.perform({"action": "compact"})
        assert widget.status.startswith("Compacted") and session.calls[-1] == (
            "compact",
            None,
            False,
        )
        widget.perform({"action": "compact", "focus": "boom"})
        assert widget.status == "Error: RuntimeError: model unavailable second line"

        widget.perform({"action": "branch", "id": OFF_PATH, "summarize": True, "focus": "why"})
        assert session.calls[-1] == ("navigate", OFF_PATH, True, "why")
        assert "with branch summary" in widget.status
        assert rows_by_id(widget._tree)[tree.leaf_id]["branch_summary"] is True

        widget.perform({"action": "omit", "id": "1a2b3c10"})
        assert session.calls[-1] == ("edit", "1a2b3c10", True, None)
    finally:
        widget.close()


def test_appends_refresh_coalesced_and_close_unsubscribes(
    explorer: Any, tree: SessionTree, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds = []
    real = ws.explorer_state
    monkeypatch.setattr(ws, "explorer_state", lambda *a, **k: builds.append(1) or real(*a, **k))
    for i in range(40):
        tree.append_message({"role": "user", "content": f"more {i}"})
    assert len(explorer._tree) == 28  # not yet: refreshes are coalesced
    deadline = time.monotonic() + 5
    while len(explorer._tree) != 68 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(explorer._tree) == 68 and explorer.leaf_id == tree.leaf_id
    assert 1 <= len(builds) <= 3
    explorer.close()
    tree.append_message({"role": "user", "content": "after close"})
    time.sleep(0.2)
    assert len(builds) <= 3 and tree._listeners == []


def test_refresh_sees_changes_made_outside(explorer: Any, tree: SessionTree) -> None:
    tree.branch(OFF_PATH)  # moving the leaf appends nothing: refresh() picks it up
    explorer.refresh()
    assert explorer.leaf_id == OFF_PATH


def test_explore_and_bad_input(session_file: Path) -> None:
    widget = explore(str(session_file), window=8000, reserve=2000)
    try:
        assert widget._tokens["threshold"] == 6000 and widget._tokens["window_source"] == "explicit"
    finally:
        widget.close()
    with pytest.raises(TypeError, match="SessionTree or a session"):
        SessionExplorer(object())


# --- size and speed ---------------------------------------------------------------------------


def test_10k_entries_state_is_small_and_fast() -> None:
    tree = ws.synthetic_session(10_000)
    assert len(tree) >= 10_000
    start = time.perf_counter()
    state = ws.explorer_state(tree)
    elapsed = time.perf_counter() - start
    size = len(json.dumps(state))
    assert elapsed < 1.0, elapsed
    assert size < SIZE_BUDGET, size
    kinds = {r["kind"] for r in state["tree"]}
    assert {"compaction", "branch_summary", "context_edit", "label"} <= kinds
    statuses = {r["status"] for r in state["context"]}
    assert {"summarized", "summary", "kept", "omitted"} <= statuses


def test_10k_entries_widget_update_fits_the_budget() -> None:
    tree = ws.synthetic_session(10_000)
    start = time.perf_counter()
    widget = SessionExplorer(tree)
    elapsed = time.perf_counter() - start
    try:
        opened = widget.comm.sent[0]
        esm_css = len(json.dumps(opened["data"]["state"]["_esm"])) + len(
            json.dumps(opened["data"]["state"]["_css"])
        )
        assert opened["bytes"] - esm_css < SIZE_BUDGET
        assert elapsed < 2.0, elapsed
        tree.append_message({"role": "user", "content": "one more"})
        start = time.perf_counter()
        widget.refresh()  # previews and token counts are cached between refreshes
        assert time.perf_counter() - start < 1.0
    finally:
        widget.close()


# --- packaging ---------------------------------------------------------------------------------


def test_assets_are_plain_es_modules_without_imports() -> None:
    folder = asset_dir()
    js = (folder / "session_explorer.js").read_text()
    assert "export default" in js
    assert not [line for line in js.splitlines() if line.startswith("import ")]
    assert (folder / "session_explorer.css").is_file()


def test_importing_pi_nb_does_not_import_anywidget() -> None:
    code = (
        "import sys, pi_nb, pi_nb.notebook, pi_nb.notebook.widget_state\n"
        "assert 'anywidget' not in sys.modules and 'ipywidgets' not in sys.modules\n"
        "pi_nb.notebook.SessionExplorer\n"
        "assert 'anywidget' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_pin_action_pins_the_message_for_later_compactions(session_file: Path) -> None:
    from pi_nb.agent import Session
    from pi_nb.policies import pins

    session = Session.open(session_file, model="pinb/scripted")
    explorer = SessionExplorer(session)
    target = next(
        e["id"]
        for e in session.tree.get_branch()
        if e.get("type") == "message" and e["message"]["role"] == "user"
    )
    status = explorer.perform({"action": "pin", "id": target})
    assert status.startswith("Pinned"), status
    assert [p for p in pins(session) if getattr(p, "entry_id", None) == target]
    bare = SessionExplorer(SessionTree.open(session_file))
    assert bare.perform({"action": "pin", "id": target}).startswith("Error:")


# --- compaction warnings in the status line (issue 11) -------------------------------------------


def _scripted_session(tmp_path: Path) -> Any:
    from pi_nb.agent import Session

    session = Session.new(
        tmp_path / "w.jsonl", model="pinb/scripted", window=30000, reserve=1000, keep=150,
        no_tools=True, script=[f"Answer {i}. " * 30 for i in range(6)],
    )  # fmt: skip
    for i in range(4):
        session.prompt(f"Question {i}: " + "please explain this. " * 12)
    return session


def test_status_line_shows_growth_on_the_diff_basis_and_hook_failures(tmp_path: Path) -> None:
    from pi_nb.notebook.diff import latest_compaction_diff

    session = _scripted_session(tmp_path)

    def broken(event: Any) -> None:
        raise RuntimeError("policy bug")

    session.hooks.on("session_before_compact", broken)
    session.hooks.on("session_before_compact", wordy_summary)
    widget = SessionExplorer(session)
    try:
        status = widget.perform({"action": "compact"})
    finally:
        widget.close()
    diff = latest_compaction_diff(session.tree)
    figures = f"{diff.tokens_before:,} → {diff.tokens_after:,} tokens (estimated)"
    assert status.startswith("Compacted as ") and f": {figures}, keeps from" in status
    assert "⚠ session_before_compact hook" in status and "policy bug" in status
    assert f"⚠ the compaction grew the context: {figures}" in status
    assert "\n" not in status


def test_status_line_shows_a_failing_tree_hook(tmp_path: Path) -> None:
    session = _scripted_session(tmp_path)
    target = session.tree.get_branch()[1]["id"]  # the first reply

    def broken(event: Any) -> None:
        raise RuntimeError("tree hook bug")

    session.hooks.on("session_before_tree", broken)
    widget = SessionExplorer(session)
    try:
        status = widget.perform({"action": "branch", "id": target})
    finally:
        widget.close()
    assert status.startswith("Leaf moved") and "⚠ session_before_tree hook" in status


def test_preview_panel_figures_are_on_the_estimate_basis(tmp_path: Path) -> None:
    from pi_nb.tokens import estimate_tokens

    session = _scripted_session(tmp_path)
    before = sum(estimate_tokens(m) for m in session.context().messages)
    widget = SessionExplorer(session)
    try:
        status = widget.perform({"action": "compact", "preview": True})
        preview = dict(widget._preview)
    finally:
        widget.close()
    assert session.tree.leaf["type"] == "message"  # nothing written
    after = preview["tokens_after"]
    assert preview["tokens_before"] == before != session.context_tokens().tokens
    assert status.startswith(f"Preview (nothing written): {before:,} → {after:,} tokens (estimated)")


# --- follow mode: another process writes the file -------------------------------------------

APPENDER = r"""
import json, os, sys
path = sys.argv[1]
for line in sys.stdin:  # each stdin line is raw text to append; answer when it is on disk
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    os.write(fd, json.loads(line).encode("utf-8"))
    os.close(fd)
    print("ok", flush=True)
"""


def _pi_lines(parent: str) -> list[str]:
    return pi_turn_lines(parent, "Add JPY. " * 30, "## Goal\nJPY.")


class Appender:
    """A real second process appending raw bytes to the session file."""

    def __init__(self, path: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", APPENDER, str(path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip

    def write(self, text: str) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(text) + "\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().strip() == "ok"

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=10)


def _wait_for(condition: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return bool(condition())


def test_follow_updates_the_synced_state_as_another_process_writes(
    session_file: Path, tree: SessionTree
) -> None:
    widget = SessionExplorer(tree, follow=0.05)
    writer = Appender(session_file)
    try:
        assert widget.following == 0.05 and widget._follow_thread is not None
        sent = len(widget.comm.updates())
        lines = _pi_lines(LEAF)
        writer.write(lines[0] + lines[1][:60])  # the reply is torn: only the user message
        assert _wait_for(lambda: widget.leaf_id == "f0000001")
        time.sleep(0.2)  # a few more polls: the half line is never taken
        assert widget.leaf_id == "f0000001" and len(widget._tree) == 29
        writer.write(lines[1][60:] + lines[2])
        assert _wait_for(lambda: widget.leaf_id == "f0000003")
        # what went over the comm equals the state of a fresh open of the file
        other = SessionTree.open(session_file)
        from pi_nb.agent.session import next_call_tokens

        call = next_call_tokens(other)  # one basis: the next model call, as Session.open counts it
        expected = ws.explorer_state(other, overhead=call.system_prompt + call.tools)
        synced = {}
        for update in widget.comm.updates()[sent:]:
            synced.update(update)
        assert synced["leaf_id"] == "f0000003"
        assert [r["id"] for r in synced["_tree"]] == [r["id"] for r in expected["tree"]]
        assert synced["_context"] == expected["context"]
        summary = [r for r in synced["_context"] if r.get("status") == "summary"]
        assert [r["id"] for r in summary] == ["f0000003"]  # Pi's compaction, in the panel
        assert synced["_tokens"] == {**expected["tokens"], "window_source": "default"}
        assert synced["_tokens"]["used"] == call.tokens
        assert synced["_info"]["entries"] == 31
        assert not widget.status.startswith("Error")
    finally:
        widget.close()
        writer.close()
    # closing stops the thread; later appends change nothing
    assert widget._follow_thread is None and widget._follow_stop.is_set()
    assert not any(t.name == "pi_nb-explorer-follow" and t.is_alive() for t in threading.enumerate())


def test_follow_stops_when_closed(session_file: Path) -> None:
    tree = SessionTree.open(session_file)
    widget = SessionExplorer(tree, follow=0.05)
    thread = widget._follow_thread
    assert thread is not None and thread.is_alive()
    widget.close()
    assert not thread.is_alive()
    with open(session_file, "a") as fh:
        fh.write(_pi_lines(LEAF)[0])
    time.sleep(0.2)
    assert tree.leaf_id == LEAF and widget.leaf_id == LEAF  # nobody reads any more


def test_follow_shows_a_rewritten_file_and_a_read_error_in_the_status(
    session_file: Path, tree: SessionTree
) -> None:
    widget = SessionExplorer(tree, follow=0.05)
    try:
        text = session_file.read_text()
        session_file.write_text("".join(text.splitlines(keepends=True)[:10]))  # in place
        assert _wait_for(lambda: widget.status.startswith("Following:"))
        assert "shrank" in widget.status and "read it again" in widget.status
        assert len(widget._tree) == 9
        moved = session_file.with_name("elsewhere.jsonl")
        session_file.rename(moved)
        assert _wait_for(lambda: widget.status.startswith("Error: following the file"))
        assert "gone" in widget.status and "\n" not in widget.status
        moved.rename(session_file)  # back: the error clears on the next good read
        assert _wait_for(lambda: not widget.status.startswith("Error"))
    finally:
        widget.close()


def test_follow_refuses_what_it_cannot_follow(tree: SessionTree) -> None:
    with pytest.raises(ValueError, match="needs a session file"):
        SessionExplorer(SessionTree.in_memory(), follow=True)
    with pytest.raises(ValueError, match="at least"):
        SessionExplorer(tree, follow=0)
    widget = SessionExplorer(tree)
    try:
        assert widget.following == 0.0 and widget._follow_thread is None
        widget.follow()
        assert widget.following == 1.0
        widget.stop_following()
        assert widget.following == 0.0
    finally:
        widget.close()


# --- the newcomer's first hour (issue 14) ------------------------------------------------------


def _captured_display(widget: Any) -> Any:
    """What ``display(widget)`` sends to the frontend, from a real IPython shell."""
    from IPython.testing import globalipapp
    from IPython.utils.capture import capture_output

    globalipapp.get_ipython()  # display() publishes only with a shell running
    with capture_output() as shown:
        widget._ipython_display_()
    return shown


def test_display_is_the_live_view_then_a_static_snapshot(explorer: Any, tree: SessionTree) -> None:

    shown = _captured_display(explorer)
    live, snapshot = (output.data for output in shown.outputs)  # exactly two outputs
    view = live["application/vnd.jupyter.widget-view+json"]
    assert view["model_id"] == explorer.model_id
    # the live output carries no HTML: a page that skips the view must not show it twice
    assert "text/html" not in live
    text = live["text/plain"]
    assert "object at 0x" not in text and "\n" not in text
    assert f"{len(tree.entries):,} entries" in text and "tokens" in text
    html = snapshot["text/html"]
    assert html.startswith(f'<div data-pi-nb-snapshot="{explorer._snapshot_id}">')
    assert 'class="pi-nb-explorer-snapshot"' in html and "Next model call" in html
    assert html.count("<tr") >= len(tree.entries)  # a row per entry, plus the context rows
    assert f"<code>{LEAF}</code>" in html
    assert explorer._snapshot_id and explorer._snapshot_id in explorer.get_state()["_snapshot_id"]


def test_the_snapshot_follows_the_view(tmp_path: Path) -> None:
    """A saved notebook holds the explorer as it last was, not as it was first shown."""
    session = _scripted_session(tmp_path)
    widget = SessionExplorer(session, window=30000)
    updates: list[dict[str, Any]] = []
    try:
        _captured_display(widget)
        handle = widget._snapshot_handle
        handle.update = lambda data, **kw: updates.append(data)  # what the kernel would send
        session.label(session.tree.get_branch()[0]["id"], "a-fresh-label")
        widget.refresh()
        assert updates and "a-fresh-label" in updates[-1]["text/html"]
    finally:
        widget.close()


def test_header_names_the_model_of_the_next_call(tmp_path: Path) -> None:
    session = _scripted_session(tmp_path)
    session.model = "pinb/smollm2"  # switched after the replies: the file says scripted
    widget = SessionExplorer(session, window=30000)
    try:
        assert widget._info["model"] == "pinb/smollm2"
        assert "next model pinb/smollm2" in widget._repr_mimebundle_()[0]["text/plain"]
    finally:
        widget.close()
    bare = SessionExplorer(session.tree, window=30000)  # no session: say where it comes from
    try:
        assert bare._info["model_source"] == "file"
        assert "(last in the file)" in bare._repr_mimebundle_()[0]["text/plain"]
    finally:
        bare.close()


def test_share_of_the_window_is_not_capped(tree: SessionTree) -> None:
    used = ws.token_state(tree, window=10_000)["used"]
    tokens = ws.token_state(tree, window=used // 2, reserve=0)
    assert tokens["percent"] == pytest.approx(100 * used / (used // 2))
    assert tokens["percent"] > 199
    from pi_nb.notebook.html import explorer_text

    assert f"({round(tokens['percent'])}% of W" in explorer_text({"tokens": tokens, "info": {}})


def test_pinned_rows_get_a_flag(tmp_path: Path) -> None:
    from pi_nb.policies import pin

    session = _scripted_session(tmp_path)
    first_user = session.tree.get_branch()[0]["id"]
    pin(session, entry_id=first_user)
    assert rows_by_id(ws.tree_state(session.tree))[first_user].get("pinned") is True
    assert any(r.get("pinned") for r in ws.context_state(session.tree) if r["id"] == first_user)
    assert sum(1 for r in ws.tree_state(session.tree) if r.get("pinned")) == 1
    widget = SessionExplorer(session, window=30000)
    try:
        assert "[pinned]" in widget._snapshot_bundle()["text/html"]
    finally:
        widget.close()


def test_omitting_an_omitted_message_writes_nothing(
    explorer: Any, tree: SessionTree, session_file: Path
) -> None:
    explorer.perform({"action": "omit", "id": "1a2b3c03"})
    lines = session_file.read_text().splitlines()
    status = explorer.perform({"action": "omit", "id": "1a2b3c03"})
    assert status == "1a2b3c03 is already omitted from the context; nothing written."
    assert session_file.read_text().splitlines() == lines
