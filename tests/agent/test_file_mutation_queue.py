"""write/edit calls of one reply run in parallel threads; mutations of one file must not lose
each other (Pi's per-file mutation queue), while different files stay parallel.

The calls go through the real agent loop (Session + pinb/scripted) and the real file tools.
"""

from __future__ import annotations

import threading

import pytest

from pi_nb.agent import default_tools
from pi_nb.agent import tools as tools_module
from pi_nb.agent.tools import ToolError, reset_abort_event, set_abort_event

RUNS = 20
BIG = 5 * 1024 * 1024


def _edit(path: str, old: str, new: str) -> dict:
    return {"name": "edit", "arguments": {"path": path, "old_text": old, "new_text": new}}


def _big_file(path, head: str = "HEAD-MARK", tail: str = "TAIL-MARK") -> None:
    filler = ("x" * 1023 + "\n") * (BIG // 1024)
    path.write_text(f"{head}\n{filler}{tail}\n")


def _tool_results(result) -> list[dict]:
    return [m for m in result.messages if m["role"] == "toolResult"]


def test_two_edits_of_one_big_file_in_one_reply_both_land(make_session, tmp_path):
    lost = []
    for run in range(RUNS):
        target = tmp_path / f"big{run}.txt"
        _big_file(target)
        reply = {"tool_calls": [_edit(target.name, "HEAD-MARK", "HEAD-DONE"), _edit(target.name, "TAIL-MARK", "TAIL-DONE")]}
        session = make_session([reply, "done"], name=f"s{run}.jsonl", tools=default_tools(tmp_path))
        result = session.prompt("edit both ends")
        errors = [r["content"][0]["text"] for r in _tool_results(result) if r["isError"]]
        text = target.read_text()
        if errors or not (text.startswith("HEAD-DONE\n") and text.endswith("TAIL-DONE\n")):
            lost.append((run, errors))
        session.close()
        target.unlink()
    assert lost == [], f"an edit was lost or failed in {len(lost)}/{RUNS} runs: {lost[:2]}"


def test_edits_through_a_symlink_and_the_real_path_share_one_queue(make_session, tmp_path):
    real = tmp_path / "real.txt"
    link = tmp_path / "link.txt"
    link.symlink_to(real.name)
    for run in range(RUNS):
        _big_file(real)
        reply = {"tool_calls": [_edit("link.txt", "HEAD-MARK", "VIA-LINK"), _edit(str(real), "TAIL-MARK", "VIA-REAL")]}
        session = make_session([reply, "done"], name=f"s{run}.jsonl", tools=default_tools(tmp_path))
        results = _tool_results(session.prompt("edit"))
        assert [r["isError"] for r in results] == [False, False], results
        text = real.read_text()
        assert text.startswith("VIA-LINK\n") and text.endswith("VIA-REAL\n"), f"run {run} lost an edit"
        assert link.is_symlink()  # edited through, not replaced
        session.close()


def test_write_and_edit_of_one_file_are_serialized_too(make_session, tmp_path):
    target = tmp_path / "w.txt"
    for run in range(RUNS):
        _big_file(target)
        new = "NEW-CONTENT\n" * 10
        reply = {"tool_calls": [_edit("w.txt", "TAIL-MARK", "TAIL-DONE"), {"name": "write", "arguments": {"path": "w.txt", "content": new}}]}
        session = make_session([reply, "done"], name=f"s{run}.jsonl", tools=default_tools(tmp_path))
        results = _tool_results(session.prompt("go"))
        text = target.read_text()
        # Either order is a whole outcome: edit then write (the write wins), or write then
        # edit (the edit fails loudly: its text is gone). Never a torn or silently lost change.
        if results[0]["isError"]:
            assert "Could not find old_text" in results[0]["content"][0]["text"]
        assert text == new, f"run {run}: the write was overwritten by a stale edit"
        assert not results[1]["isError"]
        session.close()


@pytest.fixture
def meet_inside_edit(monkeypatch):
    """``meet(timeout)``: every edit then waits, inside its read-modify-write, until two
    edits are inside at once (the barrier breaks after ``timeout`` seconds)."""

    def meet(timeout: float) -> threading.Barrier:
        barrier = threading.Barrier(2, timeout=timeout)
        original = tools_module._read_for_edit

        def read_when_both_arrive(handle):
            barrier.wait()
            return original(handle)

        monkeypatch.setattr(tools_module, "_read_for_edit", read_when_both_arrive)
        return barrier

    return meet


def test_edits_of_two_different_files_run_at_the_same_time(make_session, tmp_path, meet_inside_edit):
    # If edits of different files were serialized, the first would wait at the barrier for a
    # second that never comes, and fail with BrokenBarrierError after 10 s.
    barrier = meet_inside_edit(10)
    (tmp_path / "a.txt").write_text("alpha\n")
    (tmp_path / "b.txt").write_text("beta\n")
    reply = {"tool_calls": [_edit("a.txt", "alpha", "ALPHA"), _edit("b.txt", "beta", "BETA")]}
    session = make_session([reply, "done"], tools=default_tools(tmp_path))
    results = _tool_results(session.prompt("edit both"))
    assert [r["isError"] for r in results] == [False, False], results
    assert (tmp_path / "a.txt").read_text() == "ALPHA\n"
    assert (tmp_path / "b.txt").read_text() == "BETA\n"
    assert not barrier.broken


def test_edits_of_one_file_never_overlap(make_session, tmp_path, meet_inside_edit):
    # The same barrier for two edits of one file: the second is queued, so the first breaks
    # the barrier (a loud tool error) instead of both editing at once.
    barrier = meet_inside_edit(0.5)
    (tmp_path / "a.txt").write_text("one two\n")
    reply = {"tool_calls": [_edit("a.txt", "one", "ONE"), _edit("a.txt", "two", "TWO")]}
    session = make_session([reply, "done"], tools=default_tools(tmp_path))
    results = _tool_results(session.prompt("edit twice"))
    assert barrier.broken
    assert sum(r["isError"] for r in results) >= 1


def test_a_queued_edit_leaves_without_writing_when_the_run_is_aborted(tmp_path, monkeypatch):
    edit = {t.name: t for t in default_tools(tmp_path)}["edit"]
    target = tmp_path / "a.txt"
    target.write_text("one two\n")
    inside, release = threading.Event(), threading.Event()
    original = tools_module._read_for_edit

    def held(handle):
        inside.set()
        release.wait(10)
        return original(handle)

    monkeypatch.setattr(tools_module, "_read_for_edit", held)
    first = threading.Thread(target=lambda: edit(path="a.txt", old_text="one", new_text="ONE"))
    first.start()
    assert inside.wait(10)
    abort = threading.Event()
    outcome: list[BaseException] = []

    def queued() -> None:
        token = set_abort_event(abort)
        try:
            edit(path="a.txt", old_text="two", new_text="TWO")
        except ToolError as exc:
            outcome.append(exc)
        finally:
            reset_abort_event(token)

    second = threading.Thread(target=queued)
    second.start()
    abort.set()
    second.join(10)
    release.set()
    first.join(10)
    assert [str(e) for e in outcome] == ["Operation aborted"]
    assert target.read_text() == "ONE two\n"
    assert tools_module._QUEUES == {}  # the queue of the file is gone once idle
