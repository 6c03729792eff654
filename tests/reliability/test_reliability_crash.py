"""Crash during append: writers killed with SIGKILL at random points.

Short-lived child processes open the session through SessionTree and append large entries
as fast as they can; the parent kills each one after a random delay (so kills land during
open, JSON encoding and — with lines of up to several MB — in the middle of write()).
After every kill the file must load, lose at most its one partial last line, report that
line as (file, line), and the next writer must close the torn line before appending (no
two entries glued). Every entry carries a checksum of its payload, so a truncated or
merged entry that still parsed would be caught.
"""

from __future__ import annotations

import hashlib
import os
import random
import select
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import rel_figures

from pi_nb.session import SessionTree

pytestmark = pytest.mark.skipif(
    not hasattr(os, "fork") or not hasattr(signal, "SIGKILL"), reason="needs fork() and SIGKILL"
)

KILLS = int(os.environ.get("PI_NB_CRASH_KILLS", "240"))
SPAWNED_KILLS = int(os.environ.get("PI_NB_CRASH_SPAWNED_KILLS", "12"))
KILLS_PER_FILE = 10
SIZES = (300, 20_000, 200_000, 1_000_000, 3_000_000)
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789 "
PAYLOAD = "".join(random.Random(7).choice(_ALPHABET) for _ in range(4096)) * (max(SIZES) // 4096 + 1)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def entry_payload(rng: random.Random) -> dict:
    size = rng.choice(SIZES)
    start = rng.randrange(4096)
    text = PAYLOAD[start : start + size]
    return {
        "role": "toolResult",
        "toolCallId": f"call_{rng.randrange(10**6)}",
        "toolName": "bash",
        "content": [{"type": "text", "text": text}],
        "details": {"sha": digest(text), "size": len(text)},
        "isError": False,
        "timestamp": 1,
    }


def writer_loop(path: str, seed: int) -> None:
    """Append forever (until killed)."""
    rng = random.Random(seed)
    warnings.simplefilter("ignore")
    tree = SessionTree.open(path, lock="wait")
    while True:
        tree.append_message(entry_payload(rng))


def fork_writer(path: str, seed: int, notify: int | None = None) -> int:
    """A forked writer; with ``notify`` (a pipe), it writes one byte there just before each
    line's write() so the parent can aim its kill at the write itself."""
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        code = 0
        try:
            if notify is not None:
                from pi_nb.session import jsonl

                real = jsonl._write_fully

                def announced(fd: int, data: bytes) -> None:
                    os.write(notify, b"w")
                    real(fd, data)

                jsonl._write_fully = announced
            writer_loop(path, seed)
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 3
        os._exit(code)
    return pid


SPAWN_SCRIPT = f"""
import sys
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
from test_reliability_crash import writer_loop
print("ready", flush=True)
writer_loop(sys.argv[1], int(sys.argv[2]))
"""


class Checker:
    """What must hold after every kill, tracked across kills of one file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.torn: set[int] = set()  # line numbers of torn lines (skipped, reported)
        self.ids: list[str] = []

    def check(self) -> str:
        """Verify the file; returns "torn", "unterminated" or "clean" for the last kill."""
        data = self.path.read_bytes()
        lines = data.split(b"\n")
        terminated = data.endswith(b"\n")
        last_line = len(lines) - 1 if terminated else len(lines)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = SessionTree.open(self.path)
        skipped = {s.line for s in tree.report.skipped}
        for s in tree.report.skipped:
            assert s.file == str(self.path)
            assert s.reason.startswith("not valid JSON"), s
        new = skipped - self.torn
        assert len(new) <= 1, f"more than one line lost: {sorted(new)}"
        outcome = "clean"
        if new:
            (line,) = new
            assert line == last_line and not terminated, (line, last_line, terminated)
            outcome = "torn"
        elif not terminated and last_line not in skipped:
            outcome = "unterminated"  # a complete entry whose newline was not written
        assert tree.report.missing_final_newline == (not terminated)
        assert self.torn <= skipped, "a torn line was lost from the report"
        self.torn = skipped
        # Every line except the torn ones is a whole entry with an intact payload.
        entries = tree.entries
        assert len(entries) == len([x for x in lines if x.strip()]) - 1 - len(skipped)
        ids = [e["id"] for e in entries]
        assert ids[: len(self.ids)] == self.ids, "an entry that was complete disappeared"
        self.ids = ids
        previous = None
        for entry in entries:
            assert entry.get("parentId") == previous, "entries are not one chain"
            previous = entry["id"]
            details = entry["message"].get("details")
            if details:
                text = entry["message"]["content"][0]["text"]
                assert len(text) == details["size"] and digest(text) == details["sha"]
        assert tree.leaf_id == (ids[-1] if ids else None)
        return outcome


def new_session(path: Path) -> Checker:
    tree = SessionTree.create(path, str(path.parent))
    tree.append_message({"role": "user", "content": "start", "timestamp": 0})
    tree.close()
    return Checker(path)


def test_sigkill_during_append_never_corrupts(tmp_path):
    rng = random.Random(20260115)
    outcomes = {"torn": 0, "unterminated": 0, "clean": 0}
    started = time.monotonic()
    checker = new_session(tmp_path / "crash-0.jsonl")
    read_end, write_end = os.pipe()
    for kill in range(KILLS):
        if kill and kill % KILLS_PER_FILE == 0:
            checker = new_session(tmp_path / f"crash-{kill}.jsonl")
        aimed = kill % 2 == 1
        pid = fork_writer(str(checker.path), rng.randrange(2**32), write_end if aimed else None)
        if aimed:
            # Every other kill is aimed at a write(): after the child announces its n-th
            # line, wait 0-0.6 ms (a multi-MB write takes about that long).
            for _ in range(rng.randrange(1, 4)):
                ready, _, _ = select.select([read_end], [], [], 5.0)
                assert ready, "writer never reached a write"
                os.read(read_end, 1)
            time.sleep(rng.uniform(0.0, 0.0006))
        else:
            time.sleep(rng.uniform(0.0, 0.06))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, (
            f"writer exited by itself (status {status}): it failed"
        )
        outcomes[checker.check()] += 1
        while select.select([read_end], [], [], 0)[0]:  # drop announcements left over
            os.read(read_end, 4096)
    os.close(read_end)
    os.close(write_end)
    # The writer after the last kill repairs the torn line and appends cleanly.
    pid = fork_writer(str(checker.path), 1)
    time.sleep(0.3)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    checker.check()
    elapsed = time.monotonic() - started
    rel_figures.add("kills", KILLS)
    rel_figures.add("kills_torn", outcomes["torn"])
    rel_figures.add("kills_complete_unterminated", outcomes["unterminated"])
    print(f"{KILLS} kills in {elapsed:.1f}s: {outcomes}")
    # The test must actually have torn lines mid-write, or it proves nothing.
    assert outcomes["torn"] >= KILLS // 20, outcomes


def test_sigkill_of_spawned_interpreters(tmp_path):
    """The same with fresh interpreters (no fork), killed while appending."""
    rng = random.Random(11)
    checker = new_session(tmp_path / "spawned.jsonl")
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    for _ in range(SPAWNED_KILLS):
        proc = subprocess.Popen(
            [sys.executable, "-c", SPAWN_SCRIPT, str(checker.path), str(rng.randrange(2**32))],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready", proc.stderr.read() if proc.stderr else ""
        time.sleep(rng.uniform(0.0, 0.08))
        proc.kill()
        proc.wait()
        if proc.stdout:
            proc.stdout.close()
        stderr = proc.stderr.read() if proc.stderr else b""
        if proc.stderr:
            proc.stderr.close()
        assert proc.returncode == -signal.SIGKILL, stderr.decode(errors="replace")
        checker.check()
    rel_figures.add("kills", SPAWNED_KILLS)


def test_next_append_closes_a_torn_line(tmp_path):
    """Deterministic version: a torn last line is reported with file and line, and the next
    append starts on a new line (instead of completing the torn one)."""
    checker = new_session(tmp_path / "torn.jsonl")
    path = checker.path
    with open(path, "ab") as fh:
        fh.write(b'{"type":"message","id":"torn0001","parentId":null,"message":{"role":"us')
    lines_before = path.read_bytes().count(b"\n")
    with pytest.warns(UserWarning, match=rf"{path.name}:{lines_before + 1}: not valid JSON"):
        tree = SessionTree.open(path)
    assert [(s.file, s.line) for s in tree.report.skipped] == [(str(path), lines_before + 1)]
    added = tree.append_message({"role": "user", "content": "after the tear", "timestamp": 2})
    tree.close()
    raw = path.read_bytes().split(b"\n")
    assert raw[lines_before].endswith(b'"role":"us')  # the torn line, closed as it was
    assert b"after the tear" in raw[lines_before + 1]
    with pytest.warns(UserWarning):
        again = SessionTree.open(path)
    assert again.leaf_id == added["id"]
    assert [(s.file, s.line) for s in again.report.skipped] == [(str(path), lines_before + 1)]
    assert tree._appender is not None and tree._appender.repaired == 1
