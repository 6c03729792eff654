"""prepare_compaction: what is summarized, kept, counted; file operations; cut_command."""

from __future__ import annotations

import pytest
from compaction_helpers import add_turn, long_session
from pinb_testkit import assistant, tool_call, tool_result, user

from pi_nb.compaction import (
    CompactionSettings,
    FileOps,
    cut_command,
    format_file_operations,
    prepare_compaction,
)
from pi_nb.compaction.prepare import file_ops_from_message, js_sorted
from pi_nb.session.tree import EntryNotFoundError
from pi_nb.tokens import estimate_projected_context_tokens

KEEP = CompactionSettings(keep_recent_tokens=300)


def test_nothing_to_summarize_returns_none(tree):
    assert prepare_compaction([], KEEP) is None
    add_turn(tree, "hi", reply="hello")
    assert prepare_compaction(tree.get_branch(), KEEP) is None


def test_already_compacted_returns_none(tree):
    long_session(tree, 3)
    prep = prepare_compaction(tree.get_branch(), KEEP)
    tree.append_compaction("S", prep.first_kept_entry_id, prep.tokens_before)
    assert prepare_compaction(tree.get_branch(), KEEP) is None


def test_preparation_fields(tree):
    turns = long_session(tree, 4)
    branch = tree.get_branch()
    prep = prepare_compaction(branch, KEEP)
    assert prep.first_kept_entry_id == turns[-1][0]["id"]  # the last turn's user message
    assert not prep.is_split_turn and prep.turn_prefix_messages == []
    assert prep.previous_summary is None
    assert len(prep.messages_to_summarize) == 3 * 6
    assert prep.messages_to_summarize[0] is turns[0][0]["message"]
    assert prep.tokens_before == tree.context_tokens().tokens
    assert prep.tokens_before == estimate_projected_context_tokens(tree.projection(), branch).tokens
    assert prep.branch_entries == branch and prep.settings is KEEP
    assert prep.read_files == [] and prep.modified_files == [
        "src/mod0.py",
        "src/mod1.py",
        "src/mod2.py",
    ]


def test_repeated_compaction_resummarizes_the_previous_kept_tail(tree):
    first_turns = long_session(tree, 4)
    prep1 = prepare_compaction(tree.get_branch(), KEEP)
    tree.append_compaction(
        "## Goal\nfirst summary",
        prep1.first_kept_entry_id,
        prep1.tokens_before,
        details={"readFiles": ["notes.md"], "modifiedFiles": ["src/old.py"]},
    )
    kept_tail = first_turns[-1]
    add_turn(tree, "next " + "n" * 1500, reply="r")
    add_turn(tree, "last " + "l" * 1500, reply="r")
    prep2 = prepare_compaction(tree.get_branch(), KEEP)
    assert prep2.previous_summary == "## Goal\nfirst summary"
    summarized = prep2.messages_to_summarize
    # 1.3: the previous compaction's kept tail is summarized again (0.58 lost it)
    assert summarized[0] is kept_tail[0]["message"]
    assert all(m["role"] != "compactionSummary" for m in summarized)
    # file lists of the previous (non-hook) compaction are carried
    assert "notes.md" in prep2.read_files and "src/old.py" in prep2.modified_files


def test_hook_compaction_file_lists_are_not_carried(tree):
    long_session(tree, 3)
    prep = prepare_compaction(tree.get_branch(), KEEP)
    tree.append_compaction(
        "S", prep.first_kept_entry_id, 1, details={"readFiles": ["secret.md"]}, from_hook=True
    )
    add_turn(tree, "more " + "m" * 1500, reply="r")
    add_turn(tree, "again " + "a" * 1500, reply="r")
    prep2 = prepare_compaction(tree.get_branch(), KEEP)
    assert "secret.md" not in prep2.read_files


def test_system_messages_are_not_summarized(tree):
    tree.append_message({"role": "system", "content": "You are terse.", "timestamp": 0})
    long_session(tree, 3)
    prep = prepare_compaction(tree.get_branch(), KEEP)
    assert all(m["role"] != "system" for m in prep.messages_to_summarize)


def test_file_ops_rules():
    ops = FileOps()
    calls = [
        tool_call("1", "read", path="b.py"),
        tool_call("2", "read", path="a.py"),
        tool_call("3", "write", path="c.py", content="x"),
        tool_call("4", "edit", path="a.py", oldText="x", newText="y"),
        tool_call("5", "bash", path="ignored.sh", command="ls"),
        tool_call("6", "read", path=7),
        tool_call("7", "read", path=""),
        tool_call("8", "grep", path="also-ignored.py"),
    ]
    file_ops_from_message(assistant("", calls=calls), ops)
    nested = tool_result("9", "ran a script")
    nested["nestedCalls"] = {"calls": [{"name": "write", "arguments": {"path": "gen.py"}}]}
    file_ops_from_message(nested, ops)
    file_ops_from_message(user("read x.py please"), ops)
    assert ops.modified_files == ["a.py", "c.py", "gen.py"]
    assert ops.read_files == ["b.py"]  # a.py was also edited: modified wins
    assert ops.details() == {"readFiles": ["b.py"], "modifiedFiles": ["a.py", "c.py", "gen.py"]}


def test_file_lists_sort_like_javascript():
    # JS compares UTF-16 code units: an astral character (surrogates D800-DFFF) sorts
    # before U+FB00, unlike Python's code-point order
    names = ["src/ﬀ.ts", "src/𝄞.ts", "src/a.ts"]
    assert sorted(names) == ["src/a.ts", "src/ﬀ.ts", "src/𝄞.ts"]
    assert js_sorted(names) == ["src/a.ts", "src/𝄞.ts", "src/ﬀ.ts"]


def test_format_file_operations():
    assert format_file_operations([], []) == ""
    assert format_file_operations(["a.py"], []) == "\n\n<read-files>\na.py\n</read-files>"
    assert format_file_operations(["a", "b"], ["c"]) == (
        "\n\n<read-files>\na\nb\n</read-files>\n\n<modified-files>\nc\n</modified-files>"
    )


def test_to_dict_and_cut_command(tree, session_path):
    long_session(tree, 4)
    prep = prepare_compaction(tree.get_branch(), KEEP)
    expected = prep.to_dict()
    assert set(expected) == {
        "firstKeptEntryId",
        "isSplitTurn",
        "tokensBefore",
        "messagesToSummarize",
        "turnPrefixMessages",
        "previousSummary",
        "readFiles",
        "modifiedFiles",
    }
    assert expected["messagesToSummarize"] == len(prep.messages_to_summarize)
    assert expected["previousSummary"] is False
    assert cut_command(session_path, keep=300) == expected
    assert cut_command(session_path, keep=10**9) == {"nothingToCompact": True}
    first_turn_end = tree.get_branch()[5]["id"]
    assert cut_command(session_path, leaf=first_turn_end, keep=300) == {"nothingToCompact": True}
    with pytest.raises(EntryNotFoundError):
        cut_command(session_path, leaf="nope")


def test_file_ops_of_other_agents_tools():
    ops = FileOps(tools="claude-code")
    calls = [
        tool_call("1", "Read", file_path="/r/notes.md"),
        tool_call("2", "Write", file_path="/r/new.py", content="x"),
        tool_call("3", "MultiEdit", file_path="/r/old.py", edits=[]),
        tool_call("4", "NotebookEdit", notebook_path="/r/nb.ipynb", new_source="x"),
        tool_call("5", "Read", path="/r/wrong-argument.md"),  # Claude Code's Read takes file_path
        tool_call("6", "read", file_path="/r/pi-read-takes-path.md"),  # Pi's read takes path
        tool_call("7", "apply_patch", input="*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y\n"
                  "*** Add File: b.py\n+z\n*** Delete File: c.py\n*** Update File: d.py\n"
                  "*** Move to: e.py\n*** End Patch"),
        tool_call("8", "apply_patch", input=42),
    ]
    file_ops_from_message(assistant("", calls=calls), ops)
    assert ops.read_files == ["/r/notes.md"]
    assert ops.modified_files == ["/r/nb.ipynb", "/r/new.py", "/r/old.py"]
    codex = FileOps(tools="codex")
    file_ops_from_message(assistant("", calls=calls), codex)
    assert codex.read_files == []
    assert codex.modified_files == ["a.py", "b.py", "c.py", "d.py", "e.py"]
    pi = FileOps()  # Pi's rule: read / write / edit with a path, nothing else
    file_ops_from_message(assistant("", calls=calls), pi)
    assert pi.read_files == [] and pi.modified_files == []


@pytest.mark.parametrize(("kind", "modified"), [
    ("claude-code", ["/home/maya/httpkit/src/httpkit/retry.py",
                     "/home/maya/httpkit/tests/test_retry.py"]),
    ("codex", ["scripts/sync.py"]),
])
def test_imported_transcripts_yield_their_file_lists(kind, modified, tmp_path):
    from pi_nb.compaction.prepare import file_tools_of
    from pi_nb.research.importers import import_transcript
    from pi_nb.research.samples import sample_transcript

    tree = import_transcript(sample_transcript(kind), tmp_path / "imported.jsonl").tree
    ops = FileOps(tools=file_tools_of(tree.get_branch()))
    assert ops.tools == kind
    for entry in tree.get_branch():
        if entry["type"] == "message":
            file_ops_from_message(entry["message"], ops)
    assert ops.modified_files == modified


def test_claude_code_tool_names_in_a_pi_session_count_as_pi_counts_them(tree):
    """A Pi session is listed by Pi's rule even when its tools are called Read / Edit."""
    add_turn(tree, "look at the notes", steps=[("Read", {"file_path": "/r/notes.md"}, "notes")])
    add_turn(tree, "fix the bug", steps=[("Edit", {"file_path": "/r/bug.py"}, "edited")])
    long_session(tree, 4)
    prep = prepare_compaction(tree.get_branch(), KEEP)
    assert "/r/notes.md" not in prep.read_files and "/r/bug.py" not in prep.modified_files
    assert "fileTools" not in prep.to_dict()
