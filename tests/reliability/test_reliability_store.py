"""The session store loses nothing and fails loudly (issue 11).

* Reading never replaces a file another writer may hold: an old version is migrated in
  memory, the file is rewritten only by a writer under its lock.
* Appends from several threads (one tree, or several trees of one file) are serialized.
* Every writer (append, create, fork, import, migration) redacts and creates files 0600.
* An entry without an id is reported like any invalid line, on the fast path too.
* A full disk is one line (``SessionWriteError``, CLI exit 2); nothing is half-written, no
  temp file is left behind, and the in-memory tree is rolled back.
"""

from __future__ import annotations

import errno
import io
import itertools
import json
import os
import signal
import stat
import sys
import threading
import warnings
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import rel_figures
from test_reliability_lock import start  # a Python child with this checkout on its path

from pi_nb.cli import main as cli_main
from pi_nb.session import SessionError, SessionLoadWarning, SessionTree
from pi_nb.session.jsonl import Appender, SessionWriteError
from pi_nb.session.lock import SessionLockedError, lock_path

STAMP = "2026-01-01T00:00:00.000Z"


def write_lines(path: Path, lines: list[dict]) -> None:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")


def header(version: object = 3, sid: str = "s") -> dict:
    return {"type": "session", "version": version, "id": sid, "timestamp": STAMP, "cwd": "/"}


def message(eid: str, parent: str | None, text: str) -> dict:
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": STAMP,
            "message": {"role": "user", "content": text, "timestamp": 1}}


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli_main(list(argv))
    return code, out.getvalue(), err.getvalue()


def temp_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp") or ".tmp-" in p.name)


def user(text: str) -> dict:
    return {"role": "user", "content": text, "timestamp": 1}


# --- 1. reading never replaces a file a writer holds ---------------------------------------

WRITER = """
import sys, time
from pi_nb.session import SessionTree
tree = SessionTree.open(sys.argv[1], lock="wait")
print("ready", flush=True)
for i in range(int(sys.argv[2])):
    tree.append_message({"role": "user", "content": f"w{i}", "timestamp": i})
    time.sleep(0.01)
tree.close()
print("done", flush=True)
"""


@pytest.mark.parametrize("version", ["3.0.0", 2])
def test_reading_while_another_process_appends_loses_nothing(tmp_path, version):
    """A second process appends 40 entries while this one opens the file read-only over and
    over (API and `pi-nb tree` / `context`): every entry is in the file afterwards."""
    path = tmp_path / "s.jsonl"
    write_lines(path, [header(version), message("a0000001", None, "first")])
    appended = 40
    child = start(WRITER, str(path), str(appended))
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    reads = 0
    while child.poll() is None or reads < 3:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SessionLoadWarning)
            SessionTree.open(path)
        code, _, err = cli("tree", str(path)) if reads % 2 else cli("context", str(path))
        assert code == 0, err
        reads += 1
    assert child.wait(timeout=60) == 0, child.stderr.read() if child.stderr else ""
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    texts = [e["message"]["content"] for e in lines[1:] if e.get("type") == "message"]
    assert texts == ["first", *(f"w{i}" for i in range(appended))]  # zero entries lost
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SessionLoadWarning)
        final = SessionTree.open(path)
    assert len(final) == 1 + appended and final.report.migrated_from is None
    rel_figures.add("store_concurrent_reads", reads)
    rel_figures.add("store_entries_appended_during_reads", appended)


def test_a_non_numeric_version_is_read_as_pi_does_reported_and_never_rewritten(tmp_path):
    path = tmp_path / "s.jsonl"
    write_lines(path, [header("3.0.0"), message("a0000001", None, "hello")])
    before = path.read_bytes()
    inode = path.stat().st_ino
    for _ in range(3):
        with pytest.warns(SessionLoadWarning, match="not a number"):
            tree = SessionTree.open(path)
        assert tree.report.migrated_from is None
        assert [(s.line, "not a number" in s.reason) for s in tree.report.skipped] == [(1, True)]
        assert tree.header["version"] == "3.0.0" and tree.entry("a0000001")
    assert path.read_bytes() == before and path.stat().st_ino == inode
    # A writer appends to it as it is (Pi migrates nothing for such a version either).
    tree.append_message(user("more"))
    assert path.stat().st_ino == inode
    assert path.read_bytes().startswith(before)


HOLD_LOCK = """
import sys
from pi_nb.session.lock import SessionLock
lock = SessionLock(sys.argv[1], "fail")
lock.acquire()
print("holding", flush=True)
sys.stdin.readline()
lock.release()
print("released", flush=True)
"""


def test_migration_waits_for_the_writer_lock_and_skips_while_it_is_held(tmp_path):
    path = tmp_path / "s.jsonl"
    write_lines(path, [header(2), message("a0000001", None, "hello")])
    before = path.read_bytes()
    child = start(HOLD_LOCK, str(path))
    assert child.stdout is not None and child.stdin is not None
    assert child.stdout.readline().strip() == "holding"
    tree = SessionTree.open(path, lock="fail")
    assert tree.report.migrated_from == 2 and tree.header["version"] == 3  # in memory
    assert path.read_bytes() == before  # the file another writer holds is left alone
    with pytest.raises(SessionLockedError):
        tree.append_message(user("not yet"))
    assert path.read_bytes() == before and tree.leaf_id == "a0000001"
    child.stdin.write("\n")
    child.stdin.flush()
    assert child.stdout.readline().strip() == "released"
    child.wait(timeout=30)
    added = tree.append_message(user("now"))  # migrates under the lock, then appends
    reopened = SessionTree.open(path)
    assert reopened.report.migrated_from is None and reopened.header["version"] == 3
    assert [e["id"] for e in reopened.entries] == ["a0000001", added["id"]]


def test_a_migrated_tree_whose_file_changed_refuses_to_write(tmp_path):
    path = tmp_path / "s.jsonl"
    write_lines(path, [header(1), {"type": "message", "timestamp": STAMP, "message": user("hi")}])
    first = SessionTree.open(path)
    second = SessionTree.open(path)
    assert [e["id"] for e in first.entries] == [e["id"] for e in second.entries]
    kept = second.append_message(user("from the second tree"))
    second.close()
    after = path.read_bytes()
    with pytest.raises(SessionError, match="changed since it was opened") as info:
        first.append_message(user("from the first tree"))
    assert "\n" not in str(info.value)
    assert path.read_bytes() == after  # nothing lost, nothing written
    assert SessionTree.open(path).leaf_id == kept["id"]


# --- 3. threads ------------------------------------------------------------------------------


@pytest.fixture
def busy_switching():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads as often as possible
    yield
    sys.setswitchinterval(old)


def run_threads(*targets) -> None:
    errors: list[BaseException] = []

    def guard(fn):
        def run():
            try:
                fn()
            except BaseException as exc:  # surfaced below
                errors.append(exc)
        return run

    threads = [threading.Thread(target=guard(t)) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


def test_two_threads_appending_through_one_tree(tmp_path, busy_switching):
    path = tmp_path / "s.jsonl"
    tree = SessionTree.create(path, str(tmp_path))
    tree.append_message(user("seed"))
    rounds = 200

    def work(tag: str):
        def run():
            for i in range(rounds):
                tree.append_message(user(f"{tag}{i}"))
        return run

    run_threads(work("a"), work("b"))
    memory = [e["id"] for e in tree.entries]
    on_disk = SessionTree.open(path)
    assert len(memory) == len(set(memory)) == 1 + 2 * rounds  # no duplicates
    assert memory == [e["id"] for e in on_disk.entries]  # memory == file
    assert tree.report.skipped == [] and on_disk.report.skipped == []
    # One chain, as two appends in a row make it: every entry is the child of the one
    # before (no fork from two threads reading the same leaf).
    entries = tree.entries
    assert all(e["parentId"] == p["id"] for p, e in itertools.pairwise(entries))
    for tag in "ab":
        mine = [e["message"]["content"] for e in entries if e["message"]["content"][0] == tag]
        assert mine == [f"{tag}{i}" for i in range(rounds)]
    rel_figures.add("store_thread_appends", 2 * rounds)


def test_two_trees_of_one_file_in_two_threads(tmp_path, busy_switching):
    path = tmp_path / "s.jsonl"
    seed = SessionTree.create(path, str(tmp_path))
    root = seed.append_message(user("seed"))["id"]
    seed.close()
    trees = {"a": SessionTree.open(path), "b": SessionTree.open(path)}
    rounds = 200
    chains: dict[str, list[str]] = {"a": [], "b": []}

    def work(tag: str):
        def run():
            for i in range(rounds):
                chains[tag].append(trees[tag].append_message(user(f"{tag}{i}"))["id"])
        return run

    run_threads(work("a"), work("b"))
    on_disk = SessionTree.open(path)
    assert on_disk.report.skipped == []
    assert len(on_disk) == 1 + 2 * rounds
    by_id = on_disk.by_id
    for tag, tree in trees.items():
        ids = [e["id"] for e in tree.entries]
        assert len(ids) == len(set(ids)) and set(ids) <= set(by_id)  # no duplicates
        assert tree.report.skipped == []  # no spurious "invalid line"
        # each thread's entries are one chain from the seed, as its tree's leaf made them
        parents = [by_id[eid]["parentId"] for eid in chains[tag]]
        assert parents == [root, *chains[tag][:-1]]
    rel_figures.add("store_thread_appends", 2 * rounds)


# --- 7/8. every writer redacts -----------------------------------------------------------

ENV_KEY = "live-env-secret-7c1f0e9a2b"
BEARER = "tok_9f8e7d6c5b4a3210ZYXW"


def test_import_writes_no_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    src = tmp_path / "chat.json"
    src.write_text(json.dumps([
        {"role": "user", "content": f"my key is {ENV_KEY}"},
        {"role": "assistant", "content": f"run curl -H 'Authorization: Bearer {BEARER}' x"},
    ]), encoding="utf-8")
    out = tmp_path / "out" / "imported.jsonl"
    code, _, err = cli("import", "openai", str(src), "-o", str(out))
    assert code == 0, err
    data = out.read_text(encoding="utf-8")
    assert ENV_KEY not in data and BEARER not in data
    assert "[REDACTED:OPENAI_API_KEY]" in data
    # A native Pi file is copied through the same writer (importer API).
    from pi_nb.research.importers import import_transcript

    pi_src = tmp_path / "pi.jsonl"
    write_lines(pi_src, [header(), message("a0000001", None, f"Bearer {BEARER} / {ENV_KEY}")])
    copy = tmp_path / "copy.jsonl"
    import_transcript(pi_src, copy, "pi")
    data = copy.read_text(encoding="utf-8")
    assert ENV_KEY not in data and BEARER not in data
    rel_figures.add("redaction_cases", 4)


def test_a_fork_copies_no_key_from_a_label(tmp_path):
    key = "sk-proj-" + "q" * 40
    path = tmp_path / "pi.jsonl"
    write_lines(path, [
        header(),
        message("a0000001", None, "hello"),
        {"type": "label", "id": "l0000001", "parentId": "a0000001", "timestamp": STAMP,
         "targetId": "a0000001", "label": f"uses {key}"},
    ])
    tree = SessionTree.open(path)
    forked = tree.fork("a0000001", path=tmp_path / "fork.jsonl")
    forked.flush()
    assert key not in (tmp_path / "fork.jsonl").read_text(encoding="utf-8")
    assert key not in json.dumps(forked.labels) and "sk-[REDACTED]" in forked.labels["a0000001"]
    in_memory = SessionTree(tree.header, list(tree.entries), None).fork("a0000001")
    assert key not in json.dumps(in_memory.labels)
    assert key in tree.label("a0000001")  # the source is left untouched
    rel_figures.add("redaction_cases", 2)


# --- 10. files are created 0600 --------------------------------------------------------------


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_every_session_file_is_created_0600(tmp_path):
    old = os.umask(0o022)
    try:
        new = tmp_path / "new.jsonl"
        tree = SessionTree.create(new, str(tmp_path))
        tree.append_message(user("hi"))
        assert mode(new) == 0o600
        assert mode(Path(lock_path(str(new)))) == 0o600

        made = tmp_path / "made.jsonl"
        Appender(str(made)).create([header(), message("a0000001", None, "x")])
        assert mode(made) == 0o600

        forked = tmp_path / "fork.jsonl"
        tree.fork(path=forked)
        assert mode(forked) == 0o600

        empty = tmp_path / "empty.jsonl"
        empty.touch(mode=0o644)
        SessionTree.open(empty)
        assert mode(empty) == 0o600

        old_version = tmp_path / "v2.jsonl"
        write_lines(old_version, [header(2), message("a0000001", None, "x")])
        os.chmod(old_version, 0o644)
        SessionTree.open(old_version).append_custom("note")  # migration rewrite
        assert mode(old_version) == 0o600

        src = tmp_path / "chat.json"
        src.write_text(json.dumps([{"role": "user", "content": "hi"}]), encoding="utf-8")
        imported = tmp_path / "imported.jsonl"
        assert cli("import", "openai", str(src), "-o", str(imported))[0] == 0
        assert mode(imported) == 0o600
    finally:
        os.umask(old)


# --- 12. an entry without an id ---------------------------------------------------------------


def test_an_entry_without_an_id_is_reported_not_a_crash(tmp_path):
    path = tmp_path / "s.jsonl"
    no_id = message("x", "a0000001", "no id")
    del no_id["id"]
    write_lines(path, [header(), message("a0000001", None, "hello"), no_id,
                       message("a0000002", "a0000001", "after")])
    with pytest.warns(SessionLoadWarning, match=r"s\.jsonl:3: entry has no string id"):
        tree = SessionTree.open(path)
    assert [(s.line, s.reason) for s in tree.report.skipped] == [(3, "entry has no string id")]
    assert [e["id"] for e in tree.entries] == ["a0000001", "a0000002"]
    assert tree.context_tokens().tokens > 0
    for command in ("tree", "context", "tokens"):
        code, out, err = cli(command, str(path))
        assert code == 0, err
        assert f"{path}:3: entry has no string id" in err and "Traceback" not in err
        assert out.strip()


# --- 14. full disk, killed writers ---------------------------------------------------------------


@pytest.fixture
def disk_full(monkeypatch, tmp_path):
    """os.write into tmp_path writes half its bytes, then fails with ENOSPC."""
    real = os.write
    state = {"on": True, "failures": 0}

    def write(fd, data):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if state["on"] and target.startswith(str(tmp_path)):
            state["failures"] += 1
            if len(data) > 1 and state["failures"] % 2:
                real(fd, bytes(data[: len(data) // 2]))  # a part of the line, then full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    return state


def test_a_full_disk_during_append_writes_nothing_and_rolls_back(tmp_path, disk_full):
    path = tmp_path / "s.jsonl"
    disk_full["on"] = False
    tree = SessionTree.create(path, str(tmp_path))
    first = tree.append_message(user("kept"))
    before = path.read_bytes()
    disk_full["on"] = True
    for _ in range(3):
        with pytest.raises(SessionWriteError) as info:
            tree.append_message(user("lost to a full disk"))
        assert "disk full" in str(info.value) and "\n" not in str(info.value)
        assert info.value.errno == errno.ENOSPC and isinstance(info.value, OSError)
        assert path.read_bytes() == before  # not even half a line
        assert tree.leaf_id == first["id"] and len(tree) == 1  # memory rolled back
    rel_figures.add("store_disk_full", 3)
    disk_full["on"] = False
    after = tree.append_message(user("disk has room again"))
    assert after["parentId"] == first["id"]
    reopened = SessionTree.open(path)
    assert reopened.report.clean and [e["id"] for e in reopened.entries] == [first["id"], after["id"]]


def test_a_full_disk_during_create_leaves_no_file_no_temp_and_no_entry(tmp_path, disk_full):
    path = tmp_path / "s.jsonl"
    tree = SessionTree.create(path, str(tmp_path))
    tree.append_custom("setup")  # buffered: no conversation yet, nothing written
    for _ in range(4):
        with pytest.raises(SessionWriteError, match="disk full"):
            tree.append_message(user("first message"))
        assert not path.exists() and temp_files(tmp_path) == []
        # rolled back: no entry points at an unwritten parent, the leaf did not move
        assert len(tree) == 1 and tree.leaf["type"] == "custom" and not tree.is_persisted
    rel_figures.add("store_disk_full", 4)
    disk_full["on"] = False
    written = tree.append_message(user("first message"))
    assert written["parentId"] == tree.entries[0]["id"]
    assert [e["id"] for e in SessionTree.open(path).entries] == [e["id"] for e in tree.entries]
    assert temp_files(tmp_path) == []


def test_cli_prompt_on_a_full_disk_is_one_line_exit_2(tmp_path, disk_full):
    path = tmp_path / "s.jsonl"
    code, _, err = cli("prompt", str(path), "hello", "--no-tools")
    assert code == 2, err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and "disk full" in lines[0] and lines[0].startswith("pi-nb: error:")
    assert not path.exists() and temp_files(tmp_path) == []
    rel_figures.add("store_disk_full")


SLOW_WRITER = """
import os, sys, time
from pi_nb.session import SessionTree
target, kind = sys.argv[1], sys.argv[2]
big = {"role": "user", "content": "x" * 2_000_000, "timestamp": 1}
if kind == "fork":
    source = SessionTree.open(sys.argv[3])
real = os.write
def stalled(fd, data):
    real(fd, bytes(data[: len(data) // 2]))
    print("writing", flush=True)
    time.sleep(120)  # killed here, in the middle of the write
os.write = stalled
if kind == "create":
    SessionTree.create(target, "/").append_message(big)
else:
    source.fork(path=target)
"""


@pytest.mark.parametrize("kind", ["create", "fork"])
def test_temp_files_of_killed_creates_and_forks_are_removed(tmp_path, kind):
    folder = tmp_path / "sessions"
    folder.mkdir()
    source = folder / "source.jsonl"
    seed = SessionTree.create(source, str(tmp_path))
    seed.append_message({"role": "user", "content": "y" * 2_000_000, "timestamp": 1})
    seed.close()
    kills = 3
    for round_ in range(kills):
        child = start(SLOW_WRITER, str(folder / f"{kind}{round_}.jsonl"), kind, str(source))
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "writing", child.stderr.read()
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    # The last kill left its temp file (a megabyte); each earlier one was removed by the
    # next child's create or fork.
    assert len(temp_files(folder)) == 1
    # Names earlier pi_nb versions left behind are recognised too (same dead process).
    (folder / f".old.jsonl.{child.pid}.7f00deadbeef.tmp").write_bytes(b"x" * 1000)
    (folder / f"old.jsonl.tmp-{child.pid}").write_bytes(b"x" * 1000)
    assert not any((folder / f"{kind}{r}.jsonl").exists() for r in range(kills))
    # The next create or fork in the folder removes them.
    if kind == "create":
        SessionTree.create(folder / "next.jsonl", str(tmp_path)).append_message(user("hi"))
    else:
        SessionTree.open(source).fork(path=folder / "next.jsonl")
    assert temp_files(folder) == []
    assert SessionTree.open(folder / "next.jsonl").report.clean
    rel_figures.add("store_killed_creates_and_forks", kills)
