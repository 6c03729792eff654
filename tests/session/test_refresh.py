"""SessionTree.refresh(): follow a file another process appends to (issue 14).

A real second process (a stand-in for Pi in a terminal) writes raw bytes to the session file
in steps the test drives over a pipe: whole entries, a line torn in two writes, a compaction,
a duplicate id, an in-place rewrite and a replacement by rename. After every refresh() the
follower must equal a fresh SessionTree.open of the file: entries, leaf, tree, projection
messages and context tokens (the follower's projection and token caches were primed before,
so stale caches would show).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from pi_nb.samples import sample_session_path
from pi_nb.session import SessionError, SessionTree, TreeNode

LEAF = "1a2b3c1b"
OFF_PATH = "1a2b3c12"

# The writer: reads one JSON command per line on stdin, acts, answers "ok".
WRITER = r"""
import json, os, sys
path = sys.argv[1]
for line in sys.stdin:
    cmd = json.loads(line)
    if cmd["op"] == "append":  # raw bytes, exactly as given (no newline added)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        os.write(fd, cmd["data"].encode("utf-8"))
        os.close(fd)
    elif cmd["op"] == "rewrite":  # in place, same inode (Pi's writeFileSync)
        with open(path, "wb") as fh:
            fh.write(cmd["data"].encode("utf-8"))
    elif cmd["op"] == "replace":  # a new file renamed over the old one
        with open(path + ".new", "wb") as fh:
            fh.write(cmd["data"].encode("utf-8"))
        os.replace(path + ".new", path)
    elif cmd["op"] == "exit":
        break
    print("ok", flush=True)
"""


class Writer:
    """The second process, one command at a time (each returns once it is on disk)."""

    def __init__(self, path: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def __call__(self, op: str, data: str = "") -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({"op": op, "data": data}) + "\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().strip() == "ok"

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps({"op": "exit"}) + "\n")
            self.process.stdin.close()
            self.process.wait(timeout=10)


@pytest.fixture
def session_file(tmp_path: Path) -> Path:
    copy = tmp_path / "session.jsonl"
    shutil.copy(sample_session_path(), copy)
    return copy


@pytest.fixture
def writer(session_file: Path) -> Any:
    process = Writer(session_file)
    yield process
    process.close()


def line(entry: dict[str, Any]) -> str:
    return json.dumps(entry, separators=(",", ":")) + "\n"


def message(eid: str, parent: str, role: str, text: str, usage: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"role": role, "content": text, "timestamp": 1772444200000}
    if role == "assistant":
        body.update(
            content=[{"type": "text", "text": text}],
            provider="openai",
            model="gpt-4o",
            stopReason="stop",
            usage={"input": usage or 0, "output": 10, "cacheRead": 0, "cacheWrite": 0,
                   "totalTokens": (usage or 0) + 10},
        )  # fmt: skip
    return {"type": "message", "id": eid, "parentId": parent,
            "timestamp": "2026-03-02T09:40:00.000Z", "message": body}  # fmt: skip


def shape(nodes: list[TreeNode]) -> list[Any]:
    return [(n.id, n.label, shape(n.children)) for n in nodes]


def fresh(path: Path, leaf: str | None = None) -> SessionTree:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a torn line is reported as skipped
        tree = SessionTree.open(path)
    if leaf is not None:
        tree.branch(leaf)
    return tree


def assert_same(follower: SessionTree, path: Path, leaf: str | None = None) -> None:
    other = fresh(path, leaf)
    assert [e["id"] for e in follower.entries] == [e["id"] for e in other.entries]
    assert follower.entries == other.entries
    assert follower.leaf_id == other.leaf_id
    assert shape(follower.tree()) == shape(other.tree())
    assert follower.labels == other.labels
    assert follower.projection().messages == other.projection().messages
    assert follower.context_tokens() == other.context_tokens()
    assert follower.header == other.header


def prime(tree: SessionTree) -> None:
    """Fill the projection and token caches, as a widget showing the tree does."""
    tree.projection()
    tree.context_tokens()


def test_refresh_follows_a_second_process_step_by_step(session_file: Path, writer: Writer) -> None:
    follower = SessionTree.open(session_file)
    prime(follower)
    assert follower.refresh() == 0

    # three whole entries: the leaf follows the file (it was at the last entry)
    writer("append", line(message("f0000001", LEAF, "user", "Add JPY again, properly."))
           + line(message("f0000002", "f0000001", "assistant", "Adding JPY.", usage=3100))
           + line(message("f0000003", "f0000002", "user", "And a test.")))  # fmt: skip
    assert follower.refresh() == 3
    assert follower.leaf_id == "f0000003"
    assert_same(follower, session_file)
    prime(follower)

    # a line torn in two writes: nothing is read until it is whole
    reply = line(message("f0000004", "f0000003", "assistant", "Test added. " * 40, usage=3600))
    writer("append", reply[:100])
    assert follower.refresh() == 0
    assert follower.leaf_id == "f0000003"
    assert_same(follower, session_file)  # a fresh open skips the half line too
    compaction = {
        "type": "compaction", "id": "f0000005", "parentId": "f0000004",
        "timestamp": "2026-03-02T09:41:00.000Z", "summary": "## Goal\nJPY support.",
        "firstKeptEntryId": "f0000003", "tokensBefore": 3600,
    }  # fmt: skip
    writer("append", reply[100:] + line(compaction))
    assert follower.refresh() == 2
    assert follower.leaf_id == "f0000005"
    assert follower.projection().compaction is not None
    assert follower.projection().messages[0]["role"] == "compactionSummary"
    assert_same(follower, session_file)
    assert not follower.report.skipped  # the torn line was never half-parsed

    # a later entry reusing an id on the path: the later one wins, as on load
    prime(follower)
    duplicate = message("f0000003", "f0000005", "user", "A duplicate id from a buggy writer.")
    writer("append", line(duplicate))
    assert follower.refresh() == 1
    assert follower.get("f0000003")["message"]["content"] == duplicate["message"]["content"]
    assert_same(follower, session_file)


def test_a_moved_leaf_stays_while_entries_arrive(session_file: Path, writer: Writer) -> None:
    follower = SessionTree.open(session_file)
    follower.branch(OFF_PATH)
    prime(follower)
    writer("append", line(message("f0000001", LEAF, "user", "More work on the tip.")))
    assert follower.refresh() == 1
    assert follower.leaf_id == OFF_PATH
    assert_same(follower, session_file, leaf=OFF_PATH)
    follower.branch("f0000001")  # back at the file's last entry: it follows again
    writer("append", line(message("f0000002", "f0000001", "assistant", "Done.", usage=2900)))
    assert follower.refresh() == 1 and follower.leaf_id == "f0000002"
    assert_same(follower, session_file)


def test_open_while_a_line_is_half_written(session_file: Path, writer: Writer) -> None:
    entry = line(message("f0000001", LEAF, "user", "Half of me arrives first. " * 20))
    writer("append", entry[:70])
    with pytest.warns(UserWarning):
        follower = SessionTree.open(session_file)  # the half line is skipped on load
    assert follower.leaf_id == LEAF
    writer("append", entry[70:])
    assert follower.refresh() == 1  # read once whole, not lost
    assert follower.leaf_id == "f0000001"
    assert_same(follower, session_file)


def test_rewritten_or_replaced_file_is_read_again(session_file: Path, writer: Writer) -> None:
    follower = SessionTree.open(session_file)
    prime(follower)
    original = session_file.read_text()
    lines = original.splitlines(keepends=True)

    # rewritten in place, shorter (same inode): read again, leaf follows the file
    writer("rewrite", "".join(lines[:10]))
    assert follower.refresh() == 0  # no new ids, nine entries fewer
    assert follower.reloaded is not None and "shrank" in follower.reloaded
    assert len(follower) == 9 and follower.leaf_id == json.loads(lines[9])["id"]
    assert_same(follower, session_file)

    # rewritten in place, same size, different content (a grown file passes a size check)
    header = json.loads(lines[0])
    renamed = "".join([line({**header, "cwd": "/home/bob/shop"[: len(header["cwd"])]}), *lines[1:10]])
    assert len(renamed) == len("".join(lines[:10]))
    writer("rewrite", renamed)
    follower.refresh()
    assert follower.reloaded is not None and "header" in follower.reloaded
    assert_same(follower, session_file)

    # replaced by rename with an old-version file Pi would migrate on load (new inode)
    old = [{"type": "session", "version": 1, "id": "old-session", "timestamp":
            "2026-03-01T10:00:00.000Z", "cwd": "/tmp"},
           {"type": "message", "timestamp": "2026-03-01T10:00:01.000Z",
            "message": {"role": "user", "content": "hello", "timestamp": 1}},
           {"type": "message", "timestamp": "2026-03-01T10:00:02.000Z",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "hi"}],
                        "provider": "openai", "model": "gpt-4o", "stopReason": "stop",
                        "usage": {"input": 5, "output": 1, "cacheRead": 0, "cacheWrite": 0,
                                  "totalTokens": 6}, "timestamp": 2}}]  # fmt: skip
    writer("replace", "".join(line(e) for e in old))
    assert follower.refresh() == 2
    assert follower.reloaded is not None and "replaced" in follower.reloaded
    assert follower.report.migrated_from == 1 and follower.session_id == "old-session"
    assert_same(follower, session_file)
    # and it keeps following the new file
    writer("append", line(message("f0000009", follower.leaf_id or "", "user", "next")))
    assert follower.refresh() == 1
    assert_same(follower, session_file)


def test_a_moved_leaf_that_vanished_with_a_rewrite_is_said(session_file: Path, writer: Writer) -> None:
    follower = SessionTree.open(session_file)
    follower.branch(OFF_PATH)  # 1a2b3c12 is line 19
    writer("rewrite", "".join(session_file.read_text().splitlines(keepends=True)[:10]))
    follower.refresh()
    assert follower.reloaded is not None and f"leaf {OFF_PATH} is not in it" in follower.reloaded
    assert "\n" not in follower.reloaded
    assert_same(follower, session_file)


def test_deleted_file_is_one_line_error(session_file: Path) -> None:
    follower = SessionTree.open(session_file)
    os.remove(session_file)
    with pytest.raises(SessionError, match="session file is gone") as info:
        follower.refresh()
    assert "\n" not in str(info.value)


def test_in_memory_and_unwritten_trees_have_nothing_to_refresh(tmp_path: Path) -> None:
    assert SessionTree.in_memory().refresh() == 0
    assert SessionTree.create(tmp_path / "new.jsonl").refresh() == 0


def test_a_writer_tree_refreshes_after_its_own_appends(session_file: Path, writer: Writer) -> None:
    """Own appends advance the mark: refresh reads only the other process's entries."""
    tree = SessionTree.open(session_file, lock=False)
    tree.append_message({"role": "user", "content": "mine", "timestamp": 1})
    assert tree.refresh() == 0
    mine = tree.leaf_id or ""
    writer("append", line(message("f0000001", mine, "assistant", "theirs", usage=3000)))
    assert tree.refresh() == 1 and tree.leaf_id == "f0000001"
    tree.append_message({"role": "user", "content": "mine again", "timestamp": 2})
    assert tree.refresh() == 0
    assert_same(tree, session_file)
    tree.close()


def test_a_locked_writer_keeps_its_leaf_on_its_own_branch(session_file: Path, writer: Writer) -> None:
    """A tree that holds the writer lock reads foreign entries but does not move onto them
    (its next append continues its own conversation, as when it catches up on append)."""
    tree = SessionTree.open(session_file)
    tree.append_message({"role": "user", "content": "mine", "timestamp": 1})
    mine = tree.leaf_id or ""
    writer("append", line(message("f0000001", mine, "assistant", "theirs", usage=3000)))
    assert tree.refresh() == 1 and tree.leaf_id == mine and "f0000001" in tree
    assert_same(tree, session_file, leaf=mine)
    tree.close()


def test_following_extends_the_cached_projection_instead_of_rebuilding(
    session_file: Path, writer: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A follower polled every second on a long session must not re-project it each time:
    entries that continue the leaf extend the cached projection and token figure."""
    import pi_nb.session.tree as tree_module

    follower = SessionTree.open(session_file)
    prime(follower)
    builds: list[int] = []
    real = tree_module.build_session_projection
    monkeypatch.setattr(
        tree_module, "build_session_projection", lambda *a, **k: builds.append(1) or real(*a, **k)
    )
    writer("append", line(message("f0000001", LEAF, "user", "one"))
           + line(message("f0000002", "f0000001", "assistant", "two", usage=3000))
           + line(message("f0000003", "f0000002", "user", "three")))  # fmt: skip
    assert follower.refresh() == 3
    follower.context_tokens()
    assert builds == []
    monkeypatch.setattr(tree_module, "build_session_projection", real)
    assert_same(follower, session_file)
