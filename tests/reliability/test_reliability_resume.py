"""Resume: re-opening a session (SessionTree.open / Session.open — what `%pi open PATH` does
after a kernel restart) continues exactly where it stopped: same leaf, same projection,
same token figures, same tree; the next prompt continues from that leaf."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from rel_hostile import context_dict

from pi_nb.agent import RetryPolicy, Session
from pi_nb.models.scripted import Script
from pi_nb.render import render_tree
from pi_nb.session import SessionTree

REPO = Path(__file__).resolve().parents[2]


def snapshot(tree: SessionTree) -> dict:
    return {
        "leaf": tree.leaf_id,
        "context": context_dict(tree),
        "tokens": tree.context_tokens(),
        "tree": render_tree(tree),
        "labels": tree.labels,
        "entries": [e["id"] for e in tree.entries],
    }


def words(n: int, tag: str) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def busy_session(path: Path) -> Session:
    """A session with tool calls, a retried error, a compaction, a branch with a summary,
    a label and a context edit."""
    turns = [
        {"text": "reading", "tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}]},
        "the notes say hello",
        {"error": "server"},
        "answer after a retry " + words(200, "a"),
        "another long answer " + words(200, "b"),
        "third answer " + words(200, "c"),
        "on the new branch",
    ]
    (path.parent / "notes.txt").write_text("hello\n", encoding="utf-8")
    session = Session.new(path, cwd=path.parent, script=Script(turns), window=32768, keep=300,
                          retry=RetryPolicy(sleep=lambda s: None))
    session.prompt("read notes.txt")
    session.prompt("first question " + words(200, "q"))
    session.prompt("second question " + words(200, "r"))
    first_user = next(e["id"] for e in session.tree.entries
                      if e["type"] == "message" and e["message"]["role"] == "user")
    session.label(first_user, "start")
    session.compact()
    session.prompt("third question")
    answer = session.tree.leaf_id
    session.edit(first_user, replace="read notes.txt (edited)")
    session.navigate(answer, summarize=True)
    session.prompt("continue on a branch")
    return session


def test_reopen_continues_exactly_where_it_stopped(tmp_path):
    path = tmp_path / "s.jsonl"
    session = busy_session(path)
    tree = session.tree
    types = {e["type"] for e in tree.entries}
    assert {"compaction", "label", "context_edit", "branch_summary"} <= types
    before = snapshot(tree)
    session_tokens = session.context_tokens()
    tree.close()

    reopened = SessionTree.open(path)
    assert reopened.report.clean
    assert snapshot(reopened) == before

    resumed = Session.open(path, window=32768, keep=300, script=Script(["resumed"]),
                           retry=RetryPolicy(sleep=lambda s: None))
    assert snapshot(resumed.tree) == before
    assert resumed.context_tokens() == session_tokens
    result = resumed.prompt("after the restart")
    assert result.error is None and result.text == "resumed"
    user = next(e for e in result.entries if e["type"] == "message")
    assert user["parentId"] == before["leaf"]  # continued from the leaf it stopped at
    assert resumed.tree.projection().messages[: len(before["context"]["messages"])] == \
        SessionTree.open(path).projection(before["leaf"]).messages


def test_resume_in_a_fresh_interpreter(tmp_path):
    """A kernel restart: a new process opens the file and sees the same figures."""
    path = tmp_path / "s.jsonl"
    session = busy_session(path)
    before = snapshot(session.tree)
    session.tree.close()
    script = textwrap.dedent(
        """
        import json, sys
        from pi_nb.session import SessionTree
        from pi_nb.render import render_tree
        tree = SessionTree.open(sys.argv[1])
        print(json.dumps({"leaf": tree.leaf_id, "tokens": tree.context_tokens().to_dict(),
                          "messages": len(tree.projection().messages),
                          "tree": render_tree(tree)}))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                          text=True, cwd=REPO, check=True)
    import json

    seen = json.loads(proc.stdout)
    assert seen["leaf"] == before["leaf"]
    assert seen["tokens"] == before["tokens"].to_dict()
    assert seen["messages"] == len(before["context"]["messages"])
    assert seen["tree"] == before["tree"]


def test_moving_the_leaf_without_writing_is_not_persisted(tmp_path):
    """Pi's rule: on load the leaf is the last entry written. Navigating without a summary
    writes nothing, so a re-open returns to the last entry."""
    path = tmp_path / "s.jsonl"
    tree = SessionTree.create(path, str(tmp_path))
    first = tree.append_message({"role": "user", "content": "one", "timestamp": 1})
    last = tree.append_message({"role": "user", "content": "two", "timestamp": 2})
    tree.branch(first["id"])
    tree.close()
    assert SessionTree.open(path).leaf_id == last["id"]


def test_bundled_sample_round_trips(tmp_path):
    from pi_nb.samples import sample_session_path

    path = tmp_path / "sample.jsonl"
    shutil.copyfile(sample_session_path(), path)
    tree = SessionTree.open(path)
    before = snapshot(tree)
    added = tree.append_message({"role": "user", "content": "one more", "timestamp": 1})
    expected = snapshot(tree)
    tree.close()
    again = SessionTree.open(path)
    assert snapshot(again) == expected
    assert added["parentId"] == before["leaf"]
    assert path.read_bytes().startswith(Path(sample_session_path()).read_bytes())  # append-only
