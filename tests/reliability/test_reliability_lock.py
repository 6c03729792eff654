"""Concurrent writers: one OS-level lock per session file (filelock), held while a tree writes.

Two processes appending to one session never interleave or corrupt lines: the second
writer waits (lock="wait" or a timeout) or gets a one-line SessionLockedError (lock="fail").
Readers never take the lock. A writer killed while holding it does not leave it held.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import rel_figures

from pi_nb.session import SessionTree
from pi_nb.session.lock import SessionLock, SessionLockedError

REPO = Path(__file__).resolve().parents[2]


def start(script: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.PIPE, text=True, env=env,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out}\n{err}"
    return out


HOLDER = """
import sys
from pi_nb.session import SessionTree
tree = SessionTree.open(sys.argv[1])
tree.append_message({"role": "user", "content": "held by the child", "timestamp": 1})
print("holding", flush=True)
sys.stdin.readline()          # hold the lock until told to go on
tree.append_message({"role": "user", "content": "child again", "timestamp": 2})
tree.close()
print("released", flush=True)
sys.stdin.readline()
"""


def seeded(path: Path) -> SessionTree:
    tree = SessionTree.create(path, str(path.parent))
    tree.append_message({"role": "user", "content": "hello", "timestamp": 0})
    tree.close()
    return tree


def test_second_writer_fails_fast_with_a_one_line_error(tmp_path):
    path = tmp_path / "s.jsonl"
    seeded(path)
    child = start(HOLDER, str(path))
    assert child.stdout is not None and child.stdin is not None
    assert child.stdout.readline().strip() == "holding"
    mine = SessionTree.open(path, lock="fail")
    before = path.read_bytes()
    started = time.monotonic()
    with pytest.raises(SessionLockedError) as info:
        mine.append_message({"role": "user", "content": "must not be written", "timestamp": 3})
    assert time.monotonic() - started < 2
    message = str(info.value)
    assert "\n" not in message and str(path) in message and "lock='wait'" in message
    assert path.read_bytes() == before  # nothing written, nothing half-written
    assert mine.leaf_id == SessionTree.open(path).leaf_id  # and the tree unchanged
    # A timeout waits that long, then fails the same way.
    timed = SessionTree.open(path, lock=0.5)
    started = time.monotonic()
    with pytest.raises(SessionLockedError, match=r"waited 0\.5 s"):
        timed.append_message({"role": "user", "content": "nope", "timestamp": 3})
    assert 0.4 < time.monotonic() - started < 5
    # Readers never need the lock.
    reader = SessionTree.open(path)
    assert reader.projection().messages[-1]["content"] == "held by the child"
    child.stdin.write("go\n")
    child.stdin.flush()
    assert child.stdout.readline().strip() == "released"
    # Once released, the same tree can write (it first picks up the child's new entry).
    mine.append_message({"role": "user", "content": "now it works", "timestamp": 4})
    mine.close()
    child.stdin.write("exit\n")
    finish(child)
    texts = [e["message"]["content"] for e in SessionTree.open(path).entries]
    assert texts == ["hello", "held by the child", "child again", "now it works"]
    rel_figures.add("lock_contenders", 3)


def test_waiting_writer_continues_after_the_holder_and_sees_its_entries(tmp_path):
    path = tmp_path / "s.jsonl"
    seeded(path)
    child = start(HOLDER, str(path))
    assert child.stdout is not None and child.stdin is not None
    assert child.stdout.readline().strip() == "holding"
    waiting = SessionTree.open(path, lock="wait")
    leaf_at_open = waiting.leaf_id

    import threading

    done = threading.Event()

    def append() -> None:
        waiting.append_message({"role": "user", "content": "after the wait", "timestamp": 5})
        done.set()

    thread = threading.Thread(target=append)
    thread.start()
    time.sleep(0.5)
    assert not done.is_set(), "the second writer did not wait for the lock"
    child.stdin.write("go\n")
    child.stdin.flush()
    thread.join(30)
    assert done.is_set()
    child.stdin.write("exit\n")
    finish(child)
    # The waiting tree indexed what the holder appended meanwhile, and branched from where
    # it stood (its leaf), never gluing or interleaving lines.
    assert len(waiting) == 4
    assert waiting.leaf["parentId"] == leaf_at_open
    reopened = SessionTree.open(path)
    assert reopened.report.clean
    assert [e["id"] for e in reopened.entries] == [e["id"] for e in waiting.entries]
    assert reopened.leaf_id == waiting.leaf_id
    waiting.close()
    rel_figures.add("lock_contenders", 2)


STRESS = """
import sys, json, warnings
warnings.simplefilter("ignore")
from pi_nb.session import SessionTree
path, writer, rounds, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
blob = ("w%d " % writer) * 20000
for r in range(rounds):
    tree = SessionTree.open(path, lock="wait")
    for i in range(per):
        tree.append_custom("stress", {"writer": writer, "round": r, "seq": i, "blob": blob})
    tree.close()
print("ok")
"""


def test_many_writers_never_interleave(tmp_path):
    path = tmp_path / "s.jsonl"
    seeded(path)
    writers, rounds, per = 4, 6, 8
    procs = [start(STRESS, str(path), str(w), str(rounds), str(per)) for w in range(writers)]
    for proc in procs:
        finish(proc, timeout=120)
    data = path.read_bytes()
    lines = data.split(b"\n")
    assert data.endswith(b"\n")
    parsed = [json.loads(line) for line in lines[:-1]]  # every line is whole JSON
    tree = SessionTree.open(path)
    assert tree.report.clean
    stress = [e for e in parsed if e.get("customType") == "stress"]
    assert len(stress) == writers * rounds * per
    # Each writer's hold of the lock (one round) is one contiguous run, in order.
    runs: list[tuple[int, int]] = []
    for entry in stress:
        key = (entry["data"]["writer"], entry["data"]["round"])
        if not runs or runs[-1] != key:
            runs.append(key)
    assert len(runs) == writers * rounds, "appends of two writers interleaved"
    for key in runs:
        seqs = [e["data"]["seq"] for e in stress
                if (e["data"]["writer"], e["data"]["round"]) == key]
        assert seqs == list(range(per))
    ids = set()
    for entry in parsed[1:]:
        assert entry["parentId"] is None or entry["parentId"] in ids
        ids.add(entry["id"])
    rel_figures.add("lock_contenders", writers)


KILLED_HOLDER = """
import sys, os
from pi_nb.session import SessionTree
tree = SessionTree.open(sys.argv[1])
tree.append_message({"role": "user", "content": "about to die", "timestamp": 1})
print("holding", flush=True)
sys.stdin.readline()
"""


def test_a_killed_holder_does_not_leave_the_lock_held(tmp_path):
    path = tmp_path / "s.jsonl"
    seeded(path)
    child = start(KILLED_HOLDER, str(path))
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "holding"
    with pytest.raises(SessionLockedError):
        SessionTree.open(path, lock="fail").append_message({"role": "user", "content": "x"})
    child.send_signal(signal.SIGKILL)
    child.wait()
    child.communicate()
    tree = SessionTree.open(path, lock="fail")
    tree.append_message({"role": "user", "content": "the lock died with its holder", "timestamp": 2})
    tree.close()
    assert len(SessionTree.open(path)) == 3
    rel_figures.add("lock_contenders", 2)


def test_trees_in_one_process_share_the_lock(tmp_path):
    """Re-opening the session one is writing (a notebook cell run twice) must not deadlock."""
    path = tmp_path / "s.jsonl"
    seeded(path)
    first = SessionTree.open(path, lock="fail")
    first.append_message({"role": "user", "content": "one", "timestamp": 1})
    second = SessionTree.open(path, lock="fail")
    second.append_message({"role": "user", "content": "two", "timestamp": 2})
    first.append_message({"role": "user", "content": "three", "timestamp": 3})
    assert first.lock is not None and first.lock.held
    first.close()
    second.close()
    assert not first.lock.held
    tree = SessionTree.open(path)
    assert tree.report.clean and len(tree) == 4


def test_lock_released_on_close_and_when_the_tree_is_collected(tmp_path):
    path = tmp_path / "s.jsonl"
    seeded(path)
    probe = start(
        """
        import sys
        from pi_nb.session import SessionTree
        from pi_nb.session.lock import SessionLockedError
        for line in sys.stdin:
            try:
                t = SessionTree.open(sys.argv[1], lock="fail")
                t.append_custom("probe")
                t.close()
                print("free", flush=True)
            except SessionLockedError:
                print("locked", flush=True)
        """,
        str(path),
    )
    assert probe.stdin is not None and probe.stdout is not None

    def ask() -> str:
        probe.stdin.write("?\n")
        probe.stdin.flush()
        return probe.stdout.readline().strip()

    tree = SessionTree.open(path)
    assert ask() == "free"  # opening does not lock
    tree.append_custom("mine")
    assert ask() == "locked"
    tree.close()
    assert ask() == "free"
    tree = SessionTree.open(path)
    tree.append_custom("mine again")
    assert ask() == "locked"
    del tree
    import gc

    gc.collect()
    assert ask() == "free"
    probe.communicate(timeout=30)


def test_lock_modes_are_validated():
    with pytest.raises(ValueError):
        SessionLock("/tmp/x.jsonl", "sometimes")  # type: ignore[arg-type]
    assert SessionLock("/tmp/x.jsonl", "wait").timeout == -1
    assert SessionLock("/tmp/x.jsonl", "fail").timeout == 0
    assert SessionLock("/tmp/x.jsonl", 2).timeout == 2
    assert SessionLock("/tmp/x.jsonl", False).timeout is None
