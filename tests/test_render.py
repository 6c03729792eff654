"""Plain-text renderings shared by the CLI and the notebook."""

from __future__ import annotations

import pytest
from pinb_testkit import assistant, new_tree, tool_call, tool_result, user

from pi_nb.render import describe_entry, one_line, render_context, render_tree


def test_one_line_flattens_and_truncates():
    assert one_line("a\n  b\tc") == "a b c"
    assert one_line("x" * 10, width=5) == "xxxx…"
    assert len(one_line("y" * 100, width=20)) == 20


@pytest.mark.parametrize("entry, expected", [
    ({"type": "message", "message": user("hello\nworld")}, "user: hello world"),
    ({"type": "message", "message": assistant("done", calls=[tool_call("c", "read"),
                                                            tool_call("d", "bash")])},
     "assistant: done → read, bash"),
    ({"type": "message", "message": assistant("", stop="error") | {"errorMessage": "boom"}},
     "assistant: [error] boom"),
    ({"type": "message", "message": tool_result("c", "out", name="bash", is_error=True)},
     "toolResult bash (error): out"),
    ({"type": "message", "message": {"role": "bashExecution", "command": "ls -la",
                                     "output": ""}}, "bash: ls -la"),
    ({"type": "compaction", "firstKeptEntryId": "abc", "tokensBefore": 5, "summary": "S"},
     "compaction (keeps from abc, 5 tokens before): S"),
    ({"type": "branch_summary", "fromId": "f", "summary": "B"}, "branch summary (from f): B"),
    ({"type": "context_edit", "targetId": "t", "replacement": None}, "context edit: omit t"),
    ({"type": "context_edit", "targetId": "t", "replacement": {"content": "x"}},
     "context edit: replace t"),
    ({"type": "label", "targetId": "t", "label": "L"}, "label t: L"),
    ({"type": "label", "targetId": "t"}, "label t: (cleared)"),
    ({"type": "model_change", "provider": "p", "modelId": "m"}, "model → p/m"),
    ({"type": "thinking_level_change", "thinkingLevel": "high"}, "thinking → high"),
    ({"type": "custom_message", "customType": "ext", "content": "hi"},
     "custom message [ext]: hi"),
    ({"type": "custom", "customType": "ext"}, "custom [ext]"),
    ({"type": "session_info", "name": "N"}, "session name: N"),
    ({"type": "usage", "kind": "k", "provider": "p", "model": "m"}, "usage [k] p/m"),
    ({"type": "hologram"}, "hologram"),
])
def test_describe_entry(entry, expected):
    assert describe_entry(entry) == expected


def _forked():
    tree = new_tree()
    r = tree.append_message(user("root"))
    a = tree.append_message(assistant("a"))
    x = tree.append_message(user("left"))
    tree.branch(a["id"])
    y = tree.append_message(user("right"))
    tree.append_label(r["id"], "top")
    return tree, r, a, x, y


def test_render_tree_marks_indents_and_labels():
    tree, r, a, x, y = _forked()
    lines = render_tree(tree).splitlines()
    assert len(lines) == len(tree.entries)
    line = {e["id"]: next(ln for ln in lines if f" {e['id']} " in ln)
            for e in (r, a, x, y)}
    assert line[r["id"]].startswith("* ") and line[r["id"]].endswith("[top]")
    assert line[a["id"]].startswith("* ")
    assert line[x["id"]].startswith("  ") and "├ " in line[x["id"]]
    assert line[y["id"]].startswith("* ") and "├ " in line[y["id"]]
    # the label entry is the leaf
    assert lines[-1].startswith("@") and "label" in lines[-1]
    # children of a fork are indented one level deeper than the fork point
    assert line[x["id"]].index(x["id"]) > line[a["id"]].index(a["id"])


def test_render_tree_max_lines():
    tree = new_tree()
    for i in range(10):
        tree.append_message(user(str(i)))
    out = render_tree(tree, max_lines=3).splitlines()
    assert len(out) == 4
    assert out[-1].strip().startswith("…") and "7 more entries" in out[-1]


def test_render_context_lists_messages_with_source_status_and_tokens():
    tree = new_tree()
    u = tree.append_message(user("a" * 40))
    a = tree.append_message(assistant("reply"))
    tree.append_context_edit(a["id"], {"content": "short"})
    tree.append_compaction("the summary", u["id"], 10)
    out = render_context(tree).splitlines()
    assert len(out) == 3
    assert "compactionSummary" in out[0] and "summary" in out[0] and "the summary" in out[0]
    assert u["id"] in out[1] and "kept" in out[1] and " 10 tok" in out[1]
    assert a["id"] in out[2] and "edited" in out[2] and "short" in out[2]
    assert render_context(tree, leaf_id=u["id"]).splitlines()[0].split()[:2] == ["0", "user"]
