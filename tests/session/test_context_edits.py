"""Context edits and compaction checkpoints (Pi 1.3 behaviours derived from its code)."""

from __future__ import annotations

import copy

import pytest
from pinb_testkit import assistant, new_tree, roles, texts, tool_call, tool_result, user

from pi_nb.entries import iso_to_ms
from pi_nb.projection import build_session_projection
from pi_nb.session import ContextEditError, EntryNotFoundError


def _conversation():
    tree = new_tree()
    u1 = tree.append_message(user("question"))
    a1 = tree.append_message(assistant("calling", calls=[tool_call("c1", "read", path="f")]))
    r1 = tree.append_message(tool_result("c1", "long output " * 10))
    a2 = tree.append_message(assistant("answer"))
    return tree, u1, a1, r1, a2


# --- edits -------------------------------------------------------------------------------------


def test_null_edit_omits_target_raw_entries_unchanged():
    tree, _u1, _a1, r1, _a2 = _conversation()
    before = copy.deepcopy(list(tree.entries))
    edit = tree.append_context_edit(r1["id"], None)
    assert edit["replacement"] is None and edit["targetId"] == r1["id"]
    p = tree.projection()
    assert texts(p.messages) == ["question", "calling", "answer"]
    assert list(tree.entries)[:4] == before
    pe = next(pe for pe in p.entries if pe.id == r1["id"])
    assert pe.status == "omitted" and pe.edit is edit
    assert next(pe for pe in p.entries if pe.id == edit["id"]).messages == []


def test_later_edit_wins():
    tree, u1, *_ = _conversation()
    tree.append_context_edit(u1["id"], None)
    tree.append_context_edit(u1["id"], {"content": "rephrased"})
    p = tree.projection()
    assert p.messages[0]["content"] == "rephrased"
    assert next(pe for pe in p.entries if pe.id == u1["id"]).status == "edited"
    tree.append_context_edit(u1["id"], None)
    assert texts(tree.projection().messages)[0] == "calling"


@pytest.mark.parametrize("which", ["assistant", "toolResult"])
def test_string_replacement_on_assistant_or_tool_result_becomes_one_text_block(which):
    tree, _u1, a1, r1, _a2 = _conversation()
    target = a1 if which == "assistant" else r1
    edit = tree.append_context_edit(target["id"], {"content": "short"})
    assert edit["replacement"] == {"content": [{"type": "text", "text": "short"}]}
    msg = next(m for m in tree.projection().messages if m["role"] == which)
    assert msg["content"] == [{"type": "text", "text": "short"}]
    # metadata kept
    original = target["message"]
    assert {k: v for k, v in msg.items() if k != "content"} == {
        k: v for k, v in original.items() if k != "content"}
    assert original["content"] != msg["content"]  # raw untouched


def test_string_replacement_read_from_raw_entry_is_normalised_too():
    """A hand-written edit with a string replacement for an assistant still projects as a block."""
    entries = [
        {"type": "message", "id": "a", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
         "message": assistant("long")},
        {"type": "context_edit", "id": "e", "parentId": "a",
         "timestamp": "2026-01-01T00:00:01.000Z", "targetId": "a",
         "replacement": {"content": "s"}},
    ]
    (msg,) = build_session_projection(entries).messages
    assert msg["content"] == [{"type": "text", "text": "s"}]


def test_string_replacement_on_user_stays_a_string():
    tree, u1, *_ = _conversation()
    edit = tree.append_context_edit(u1["id"], {"content": "new question"})
    assert edit["replacement"] == {"content": "new question"}
    assert tree.projection().messages[0]["content"] == "new question"


def test_list_replacement_and_custom_message_edit():
    tree, *_ = _conversation()
    cm = tree.append_custom_message("ext", "long note")
    tree.append_context_edit(cm["id"], {"content": "tiny"})
    msg = tree.projection().messages[-1]
    assert msg["role"] == "custom" and msg["content"] == "tiny"
    tree.append_context_edit(cm["id"], {"content": [{"type": "text", "text": "listed"}]})
    assert tree.projection().messages[-1]["content"] == [{"type": "text", "text": "listed"}]


def test_edit_of_entry_off_the_active_branch_raises():
    tree, u1, _a1, _r1, a2 = _conversation()
    tree.branch(u1["id"])
    tree.append_message(assistant("other"))
    n = len(tree)
    with pytest.raises(ContextEditError, match="not on the active branch"):
        tree.append_context_edit(a2["id"], None)
    assert len(tree) == n


@pytest.mark.parametrize("kind", ["model_change", "system", "bash", "label", "compaction"])
def test_edit_of_non_editable_entry_raises(kind):
    tree, u1, *_ = _conversation()
    if kind == "model_change":
        target = tree.append_model_change("p", "m")
    elif kind == "system":
        target = tree.append_message({"role": "system", "content": "x", "timestamp": 0})
    elif kind == "bash":
        target = tree.append_message({"role": "bashExecution", "command": "ls", "output": "",
                                      "exitCode": 0, "cancelled": False, "truncated": False,
                                      "timestamp": 0})
    elif kind == "label":
        target = tree.append_label(u1["id"], "l")
    else:
        target = tree.append_compaction("s", None, 1)
    with pytest.raises(ContextEditError, match="does not contribute editable model content"):
        tree.append_context_edit(target["id"], None)


def test_edit_of_unknown_id_raises():
    tree, *_ = _conversation()
    with pytest.raises(EntryNotFoundError, match="Entry ghost not found"):
        tree.append_context_edit("ghost", None)


@pytest.mark.parametrize("bad", [{}, {"content": 5}, {"text": "x"}, "string", ["list"]])
def test_invalid_replacement_raises(bad):
    tree, u1, *_ = _conversation()
    with pytest.raises(ContextEditError):
        tree.append_context_edit(u1["id"], bad)


def test_edit_not_among_context_entries_does_not_act():
    # The edit sits before the compaction's kept range (hand-ordered file): it is not a
    # context entry, so its target (kept) is not omitted.
    entries = [
        {"type": "message", "id": "u1", "parentId": None,
         "timestamp": "2026-01-01T00:00:00.000Z", "message": user("one")},
        {"type": "context_edit", "id": "e1", "parentId": "u1",
         "timestamp": "2026-01-01T00:00:01.000Z", "targetId": "u2", "replacement": None},
        {"type": "message", "id": "u2", "parentId": "e1",
         "timestamp": "2026-01-01T00:00:02.000Z", "message": user("two")},
        {"type": "compaction", "id": "c1", "parentId": "u2",
         "timestamp": "2026-01-01T00:00:03.000Z", "summary": "S", "firstKeptEntryId": "u2",
         "tokensBefore": 5},
    ]
    p = build_session_projection(entries)
    assert texts(p.messages) == ["S", "two"]
    assert p.edits == {}
    # without the compaction the same edit is in context and acts
    assert texts(build_session_projection(entries[:3]).messages) == ["one"]


def test_edit_on_another_branch_does_not_act():
    tree, u1, _a1, _r1, a2 = _conversation()
    tree.append_context_edit(u1["id"], None)
    tree.branch(a2["id"])
    tree.append_message(user("sibling"))
    assert texts(tree.projection().messages)[0] == "question"


def test_edit_summarised_away_by_compaction_no_longer_acts_on_kept_target():
    tree, u1, _a1, _r1, _a2 = _conversation()
    tree.append_context_edit(u1["id"], {"content": "edited"})
    u2 = tree.append_message(user("later"))
    tree.append_compaction("S", u2["id"], 10)
    assert texts(tree.projection().messages) == ["S", "later"]


def test_edit_inside_kept_range_still_acts_after_compaction():
    tree, u1, _a1, r1, _a2 = _conversation()
    tree.append_context_edit(r1["id"], None)
    tree.append_compaction("S", u1["id"], 10)
    assert texts(tree.projection().messages) == ["S", "question", "calling", "answer"]


# --- compaction checkpoints ------------------------------------------------------------------------


def test_compaction_with_null_first_kept_stores_own_id_and_keeps_nothing():
    tree, *_ = _conversation()
    comp = tree.append_compaction("all summarised", None, 500)
    assert comp["firstKeptEntryId"] == comp["id"]
    assert "systemMessage" not in comp
    assert roles(tree.projection().messages) == ["compactionSummary"]
    tree.append_message(user("next"))
    assert texts(tree.projection().messages) == ["all summarised", "next"]


def test_compaction_unknown_first_kept_raises():
    tree, *_ = _conversation()
    with pytest.raises(EntryNotFoundError):
        tree.append_compaction("s", "ghost", 1)


def test_compaction_replays_system_messages():
    tree = new_tree()
    tree.append_message({"role": "system", "content": "Base prompt.", "sections": {"a": "A1"},
                         "toolsAdded": [{"name": "read"}, {"name": "write"}], "timestamp": 10})
    tree.append_message(user("hi"))
    tree.append_message({"role": "system", "content": [{"type": "text", "text": "More."}],
                         "sections": {"a": None, "b": "B1"}, "toolsRemoved": [{"name": "read"}],
                         "toolsAdded": [{"name": "bash"}], "timestamp": 20})
    u2 = tree.append_message(user("again"))
    comp = tree.append_compaction("S", u2["id"], 100)
    assert comp["systemMessage"] == {
        "role": "system",
        "content": "Base prompt.\n\nMore.",
        "sections": {"b": "B1"},
        "toolsAdded": [{"name": "write"}, {"name": "bash"}],
        "timestamp": iso_to_ms(comp["timestamp"]),
    }
    assert list(comp)[-1] == "systemMessage"
    msgs = tree.projection().messages
    assert roles(msgs) == ["system", "compactionSummary", "user"]
    assert msgs[0] == comp["systemMessage"]
    # a later compaction carries the replayed prompt forward
    tree.append_message(user("more"))
    comp2 = tree.append_compaction("S2", None, 10)
    assert {k: v for k, v in comp2["systemMessage"].items() if k != "timestamp"} == {
        k: v for k, v in comp["systemMessage"].items() if k != "timestamp"}
    assert comp2["systemMessage"]["timestamp"] == iso_to_ms(comp2["timestamp"])


def test_system_messages_in_kept_range_replaced_by_checkpoint():
    tree = new_tree()
    s = tree.append_message({"role": "system", "content": "P", "timestamp": 1})
    tree.append_message(user("hi"))
    tree.append_compaction("S", s["id"], 1)
    assert roles(tree.projection().messages) == ["system", "compactionSummary", "user"]
    assert tree.projection().messages[0] is not s["message"]


def test_older_compaction_in_kept_range_contributes_nothing_via_api():
    tree = new_tree()
    u1 = tree.append_message(user("one"))
    tree.append_compaction("old", u1["id"], 1)
    tree.append_message(user("two"))
    tree.append_compaction("new", u1["id"], 2)
    msgs = tree.projection().messages
    assert texts(msgs) == ["new", "one", "two"]
