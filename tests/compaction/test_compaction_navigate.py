"""Tree navigation with and without a branch summary (Pi 1.3's navigateTree)."""

from __future__ import annotations

import json

import pytest
from compaction_helpers import add_turn
from pinb_testkit import assistant, tool_call, tool_result, user

from pi_nb.compaction import (
    DEFAULT_PROMPTS,
    collect_branch_entries,
    navigate,
    prepare_branch_entries,
)
from pi_nb.hooks import Hooks


def _two_branches(tree):
    """root turn, then branch A (explored, abandoned) and the current leaf at its end."""
    root = add_turn(tree, "FACT-root question", reply="root answer")
    branch_a = add_turn(
        tree,
        "FACT-a try the other approach",
        steps=[
            ("edit", {"path": "alt.py", "oldText": "a", "newText": "b"}, "ok"),
            ("read", {"path": "notes.md"}, "notes"),
        ],
        reply="FACT-a2 the other approach failed",
    )
    return root, branch_a


def _last_line(path):
    return json.loads(path.read_text(encoding="utf-8").splitlines()[-1])


def test_collect_branch_entries_stops_at_the_common_ancestor(tree):
    root, branch_a = _two_branches(tree)
    entries, common = collect_branch_entries(tree, tree.leaf_id, root[-1]["id"])
    assert common == root[-1]["id"]
    assert entries == branch_a
    assert collect_branch_entries(tree, None, root[0]["id"]) == ([], None)


def test_navigate_without_summary(tree, fake):
    root, _branch_a = _two_branches(tree)
    old_leaf = tree.leaf_id
    count = len(tree.entries)
    result = navigate(tree, root[-1]["id"], completion=fake)  # an assistant: becomes the leaf
    assert tree.leaf_id == root[-1]["id"] == result.new_leaf_id
    assert result.old_leaf_id == old_leaf and result.editor_text is None
    assert result.summary_entry is None and len(tree.entries) == count and fake.calls == 0


def test_navigating_to_a_user_message_puts_the_leaf_on_its_parent(tree):
    root, branch_a = _two_branches(tree)
    result = navigate(tree, branch_a[0]["id"])
    assert tree.leaf_id == root[-1]["id"]
    assert result.editor_text == "FACT-a try the other approach"
    result = navigate(tree, root[0]["id"])  # the root user message: no leaf at all
    assert tree.leaf_id is None and result.new_leaf_id is None
    assert result.editor_text == "FACT-root question"


def test_navigating_to_the_current_leaf_is_a_no_op(tree, fake):
    _two_branches(tree)
    leaf, count = tree.leaf_id, len(tree.entries)
    result = navigate(tree, leaf, summarize=True, model="m", completion=fake)
    assert not result.cancelled and tree.leaf_id == leaf and len(tree.entries) == count
    assert fake.calls == 0


@pytest.mark.parametrize(
    ("release", "budget"),
    [
        # Pi 1.6.0: the model's output limit (gpt-4o: 16384), fitted to the 50000 window.
        ("1.6", 16384),
        ("1.3", 4096),  # Pi 1.3.0: 4096 (capped by the output limit)
    ],
)
def test_navigate_with_summary(tree, session_path, fake, release, budget):
    root, _branch_a = _two_branches(tree)
    abandoned = tree.leaf_id
    result = navigate(
        tree,
        root[-1]["id"],
        summarize=True,
        model="gpt-4o",
        window=50000,
        focus="what failed",
        completion=fake,
        pi_release=release,
    )
    entry = result.summary_entry
    assert entry == _last_line(session_path) and entry["type"] == "branch_summary"
    assert entry["parentId"] == root[-1]["id"] and entry["fromId"] == abandoned
    assert tree.leaf_id == entry["id"] == result.new_leaf_id
    assert entry["fromHook"] is False and entry["usage"]["output"] > 0
    assert entry["details"] == {"readFiles": ["notes.md"], "modifiedFiles": ["alt.py"]}
    assert entry["summary"].startswith(DEFAULT_PROMPTS.branch_preamble + "## Goal")
    assert "FACT-a" in entry["summary"] and "FACT-a2" in entry["summary"]
    assert "FACT-root" not in entry["summary"]  # only the abandoned branch is summarized
    assert entry["summary"].endswith(
        "<read-files>\nnotes.md\n</read-files>\n\n<modified-files>\nalt.py\n</modified-files>"
    )
    prompt = fake.prompt(0)
    assert DEFAULT_PROMPTS.branch in prompt and prompt.endswith("Additional focus: what failed")
    assert "[Tool result]" not in prompt  # tool results are skipped for branch summaries
    assert fake.requests[0]["max_tokens"] == budget and result.budget_rule == f"pi-{release}"
    messages = tree.projection().messages
    assert [m["role"] for m in messages] == ["user", "assistant", "branchSummary"]


def test_summary_for_a_user_target_hangs_off_its_parent(tree, fake):
    root, _branch_a = _two_branches(tree)
    result = navigate(
        tree,
        root[0]["id"],
        summarize=True,
        model="m",
        window=50000,
        label="restart",
        completion=fake,
    )
    entry = result.summary_entry
    assert entry["parentId"] is None  # the root user message's parent
    assert result.editor_text == "FACT-root question"
    assert tree.label(entry["id"]) == "restart"


def test_no_content_to_summarize_makes_no_call(tree, fake):
    tree.append_message(user("go"))
    call = tree.append_message(
        assistant("", calls=[tool_call("c1", "read", path="x.py")], stop="toolUse", tokens=0)
    )
    tree.append_message(tool_result("c1", "contents"))
    result = navigate(tree, call["id"], summarize=True, model="m", window=50000, completion=fake)
    assert fake.calls == 0
    assert result.summary_entry["summary"] == "No content to summarize"
    assert result.summary_entry["details"] == {"readFiles": [], "modifiedFiles": []}


def test_summarize_requires_a_model(tree):
    root, _ = _two_branches(tree)
    with pytest.raises(ValueError, match="model"):
        navigate(tree, root[-1]["id"], summarize=True)


def test_before_tree_hook_cancel_and_supply(tree, fake):
    root, branch_a = _two_branches(tree)
    leaf, count = tree.leaf_id, len(tree.entries)
    hooks = Hooks()
    off = hooks.on("session_before_tree", lambda event: {"cancel": True})
    result = navigate(tree, root[-1]["id"], summarize=True, model="m", hooks=hooks, completion=fake)
    assert result.cancelled and tree.leaf_id == leaf and len(tree.entries) == count
    off()
    seen = []
    hooks.on(
        "session_before_tree",
        lambda event: (
            seen.append(event.preparation)
            or {"summary": {"summary": "hook summary", "details": {"k": 1}}}
        ),
    )
    trees = []
    hooks.on("session_tree", lambda event: trees.append(dict(event)))
    result = navigate(tree, root[-1]["id"], summarize=True, model="m", hooks=hooks, completion=fake)
    assert fake.calls == 0
    entry = result.summary_entry
    assert (entry["summary"], entry["details"], entry["fromHook"]) == (
        "hook summary",
        {"k": 1},
        True,
    )
    prep = seen[0]
    assert prep.target_id == root[-1]["id"] and prep.old_leaf_id == leaf
    assert prep.common_ancestor_id == root[-1]["id"] and prep.entries_to_summarize == branch_a
    assert prep.user_wants_summary is True
    assert trees == [
        {
            "type": "session_tree",
            "new_leaf_id": entry["id"],
            "old_leaf_id": leaf,
            "summary_entry": entry,
            "from_extension": True,
        }
    ]


def test_prepare_branch_entries_budget_and_file_ops():
    summary_entry = {
        "type": "branch_summary",
        "id": "b1",
        "parentId": None,
        "timestamp": "2026-01-15T09:00:00.000Z",
        "fromId": "x",
        "summary": "S" * 400,
        "details": {"readFiles": ["old.md"], "modifiedFiles": ["old.py"]},
    }
    hook_entry = {
        **summary_entry,
        "id": "b2",
        "fromHook": True,
        "details": {"readFiles": ["hook.md"], "modifiedFiles": []},
    }

    def msg(i, message):
        return {
            "type": "message",
            "id": f"m{i}",
            "parentId": None,
            "timestamp": "2026-01-15T09:00:01.000Z",
            "message": message,
        }

    entries = [
        summary_entry,
        hook_entry,
        msg(1, user("U" * 400)),
        msg(2, assistant("", calls=[tool_call("c", "write", path="new.py")], tokens=0)),
        msg(3, tool_result("c", "R" * 4000)),
        msg(4, assistant("A" * 40, tokens=0)),
    ]
    everything = prepare_branch_entries(entries, 0)
    assert [m["role"] for m in everything.messages] == [
        "branchSummary",
        "branchSummary",
        "user",
        "assistant",
        "assistant",
    ]
    ops = everything.file_ops.details()
    assert ops == {"readFiles": ["old.md"], "modifiedFiles": ["new.py", "old.py"]}
    # budget 130, newest first: 10 + 6 + 100 tokens fit; the 100-token summary does not,
    # but is still taken because the total (116) is under 90 % of the budget (117)
    limited = prepare_branch_entries(entries, 130)
    assert [m["role"] for m in limited.messages] == [
        "branchSummary",
        "user",
        "assistant",
        "assistant",
    ]
    assert limited.messages[0]["summary"] == hook_entry["summary"]
    assert limited.total_tokens == 216
    tight = prepare_branch_entries(entries, 110)  # the user message does not fit: stop there
    assert [m["role"] for m in tight.messages] == ["assistant", "assistant"]
    assert tight.total_tokens == 16


@pytest.mark.parametrize("release", ["1.6", "1.3"])
def test_branch_summary_reads_context_edits_under_pi_1_6(tree, fake, release):
    """Pi 1.6.0's prepareBranchEntries applies the latest context_edit per target among
    the summarized entries (a null replacement drops the entry); Pi 1.3.0 read the raw
    messages."""
    root, branch_a = _two_branches(tree)
    question, reply = branch_a[0], branch_a[-1]
    tree.append_custom_message("note", "FACT-custom-original", display=True)
    custom = tree.leaf
    tree.append_context_edit(question["id"], {"content": "FACT-first-edit"})
    tree.append_context_edit(question["id"], {"content": "FACT-latest-edit"})
    tree.append_context_edit(reply["id"], None)
    tree.append_context_edit(custom["id"], {"content": "FACT-custom-edited"})
    navigate(
        tree,
        root[-1]["id"],
        summarize=True,
        model="m",
        window=50000,
        completion=fake,
        pi_release=release,
    )
    prompt = fake.prompt(0)
    if release == "1.6":
        assert "FACT-latest-edit" in prompt and "FACT-custom-edited" in prompt
        for gone in ("FACT-first-edit", "FACT-a try", "FACT-a2", "FACT-custom-original"):
            assert gone not in prompt
    else:
        assert "FACT-a try" in prompt and "FACT-a2" in prompt and "FACT-custom-original" in prompt
        assert "FACT-latest-edit" not in prompt and "FACT-custom-edited" not in prompt
    prepared = prepare_branch_entries(
        collect_branch_entries(tree, tree.get(tree.leaf["fromId"])["id"], root[-1]["id"])[0],
        pi_release=release,
    )
    roles = [m["role"] for m in prepared.messages]
    # the omitted assistant reply is not read at all under 1.6
    assert roles.count("assistant") == (2 if release == "1.6" else 3)


def test_navigate_refuses_an_unknown_keyword_by_name_and_moves_nothing(tree, session_path, fake):
    # The options are one declared family (NavigateOptions): a misspelt one is a TypeError,
    # before the leaf moves, a hook runs or a summary is asked for.
    root, _branch_a = _two_branches(tree)
    leaf, data = tree.leaf_id, session_path.read_bytes()
    with pytest.raises(TypeError, match=r"^navigate\(\) got an unexpected keyword argument 'sumarize'$"):
        navigate(tree, root[-1]["id"], sumarize=True, model="m", completion=fake)
    assert tree.leaf_id == leaf and session_path.read_bytes() == data and fake.calls == 0
    # the declared defaults still apply: a summary with the default reserve and release
    result = navigate(tree, root[-1]["id"], summarize=True, model="m", window=200000, completion=fake)
    assert fake.calls == 1 and result.summary_entry["type"] == "branch_summary"
    assert result.budget_rule.startswith("pi-1.6")
