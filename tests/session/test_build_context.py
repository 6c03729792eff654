"""Building the LLM context from a branch (Pi's build-context.test.ts and compaction.test.ts)."""

from __future__ import annotations

from typing import Any

from pinb_testkit import assistant, new_tree, roles, texts, user

from pi_nb.projection import build_session_projection


def _e(eid: str, parent: str | None, type_: str = "message", second: int = 0, **payload: Any):
    entry = {"type": type_, "id": eid, "parentId": parent,
             "timestamp": f"2026-01-15T09:00:{second:02d}.000Z"}
    entry.update(payload)
    return entry


def _m(eid: str, parent: str | None, message: dict, second: int = 0):
    return _e(eid, parent, "message", second, message=message)


def _ctx(entries, leaf: Any = ...):
    p = build_session_projection(entries, leaf) if leaf is not ... else build_session_projection(entries)
    return p.to_context()


def _four():
    return [
        _m("u1", None, user("one"), 1),
        _m("a1", "u1", assistant("two"), 2),
        _m("u2", "a1", user("three"), 3),
        _m("a2", "u2", assistant("four"), 4),
    ]


def test_empty_entries_give_no_messages_off_and_no_model():
    ctx = _ctx([])
    assert ctx == {"messages": [], "thinkingLevel": "off", "model": None}


def test_null_leaf_gives_empty_context_even_with_entries():
    assert _ctx(_four(), None)["messages"] == []


def test_single_user_message():
    entries = [_m("u1", None, user("only"), 1)]
    ctx = _ctx(entries)
    assert ctx["messages"] == [entries[0]["message"]]
    assert ctx["model"] is None


def test_four_message_conversation_model_from_assistant():
    entries = _four()
    ctx = _ctx(entries)
    assert texts(ctx["messages"]) == ["one", "two", "three", "four"]
    assert ctx["thinkingLevel"] == "off"
    assert ctx["model"] == {"provider": "anthropic", "modelId": "claude-x"}
    # messages are the stored objects, verbatim
    assert all(a is e["message"] for a, e in zip(ctx["messages"], entries, strict=True))


def test_thinking_level_changes_last_wins():
    entries = [
        _m("u1", None, user("a"), 1),
        _e("t1", "u1", "thinking_level_change", 2, thinkingLevel="high"),
        _e("t2", "t1", "thinking_level_change", 3, thinkingLevel="low"),
        _m("a1", "t2", assistant("b"), 4),
    ]
    ctx = _ctx(entries)
    assert ctx["thinkingLevel"] == "low"
    assert texts(ctx["messages"]) == ["a", "b"]
    assert _ctx(entries, "t1")["thinkingLevel"] == "high"


def test_model_from_model_change_entry():
    entries = [_m("u1", None, user("a"), 1),
               _e("mc", "u1", "model_change", 2, provider="openai", modelId="gpt-4o")]
    assert _ctx(entries)["model"] == {"provider": "openai", "modelId": "gpt-4o"}


def test_assistant_overrides_earlier_model_change_and_later_change_overrides_assistant():
    entries = [
        _e("mc", None, "model_change", 1, provider="openai", modelId="gpt-4o"),
        _m("u1", "mc", user("a"), 2),
        _m("a1", "u1", assistant("b", provider="anthropic", model="claude-y"), 3),
        _e("mc2", "a1", "model_change", 4, provider="google", modelId="gemini"),
    ]
    assert _ctx(entries, "a1")["model"] == {"provider": "anthropic", "modelId": "claude-y"}
    assert _ctx(entries, "mc2")["model"] == {"provider": "google", "modelId": "gemini"}
    assert _ctx(entries, "u1")["model"] == {"provider": "openai", "modelId": "gpt-4o"}


def test_settings_entries_contribute_no_messages():
    entries = [
        _m("u1", None, user("a"), 1),
        _e("t", "u1", "thinking_level_change", 2, thinkingLevel="high"),
        _e("mc", "t", "model_change", 3, provider="p", modelId="m"),
        _e("c", "mc", "custom", 4, customType="ext", data={"x": 1}),
        _e("l", "c", "label", 5, targetId="u1", label="start"),
        _e("si", "l", "session_info", 6, name="name"),
        _e("us", "si", "usage", 7, kind="cache_warm", provider="p", model="m", usage={}),
        _e("zz", "us", "some_future_type", 8, payload=[1, 2]),
        _m("a1", "zz", assistant("b"), 9),
    ]
    assert texts(_ctx(entries)["messages"]) == ["a", "b"]


def test_compaction_summary_first_then_kept_then_later():
    entries = [
        _m("u1", None, user("1"), 1),
        _m("a1", "u1", assistant("2"), 2),
        _m("u2", "a1", user("3"), 3),
        _m("a2", "u2", assistant("4"), 4),
        _e("c1", "a2", "compaction", 5, summary="S1", firstKeptEntryId="u2", tokensBefore=999),
        _m("u3", "c1", user("5"), 6),
        _m("a3", "u3", assistant("6"), 7),
    ]
    msgs = _ctx(entries)["messages"]
    assert roles(msgs)[0] == "compactionSummary"
    assert msgs[0]["summary"] == "S1" and msgs[0]["tokensBefore"] == 999
    assert msgs[0]["timestamp"] == 1768467605000  # ms of the compaction's ISO timestamp
    assert texts(msgs) == ["S1", "3", "4", "5", "6"]


def test_compaction_keeping_from_first_entry_keeps_everything_before():
    entries = [
        *_four(),
        _e("c1", "a2", "compaction", 5, summary="S", firstKeptEntryId="u1", tokensBefore=10),
    ]
    msgs = _ctx(entries)["messages"]
    assert texts(msgs) == ["S", "one", "two", "three", "four"]


def test_compaction_with_unknown_first_kept_keeps_nothing_before():
    entries = [
        *_four(),
        _e("c1", "a2", "compaction", 5, summary="S", firstKeptEntryId="nope", tokensBefore=10),
        _m("u9", "c1", user("after"), 6),
    ]
    assert texts(_ctx(entries)["messages"]) == ["S", "after"]


def test_latest_of_several_compactions_is_used():
    entries = [
        _m("u1", None, user("1"), 1),
        _m("a1", "u1", assistant("2"), 2),
        _e("c1", "a1", "compaction", 3, summary="first", firstKeptEntryId="a1", tokensBefore=1),
        _m("u2", "c1", user("3"), 4),
        _m("a2", "u2", assistant("4"), 5),
        _e("c2", "a2", "compaction", 6, summary="second", firstKeptEntryId="u2", tokensBefore=2),
        _m("u3", "c2", user("5"), 7),
    ]
    msgs = _ctx(entries)["messages"]
    assert texts(msgs) == ["second", "3", "4", "5"]
    assert sum(m["role"] == "compactionSummary" for m in msgs) == 1


def test_older_compaction_inside_kept_range_contributes_nothing():
    entries = [
        _m("u1", None, user("1"), 1),
        _e("c1", "u1", "compaction", 2, summary="old", firstKeptEntryId="u1", tokensBefore=1),
        _m("u2", "c1", user("2"), 3),
        _e("c2", "u2", "compaction", 4, summary="new", firstKeptEntryId="u1", tokensBefore=2),
    ]
    p = build_session_projection(entries)
    assert texts(p.messages) == ["new", "1", "2"]
    by_id = {pe.id: pe for pe in p.entries}
    assert by_id["c1"].messages == [] and by_id["c1"].status == "invisible"
    assert [pe.id for pe in p.entries] == ["c2", "u1", "c1", "u2"]


def test_compaction_keeping_its_own_id_keeps_nothing_before():
    entries = [
        *_four(),
        _e("c1", "a2", "compaction", 5, summary="S", firstKeptEntryId="c1", tokensBefore=10),
        _m("u3", "c1", user("next"), 6),
    ]
    assert texts(_ctx(entries)["messages"]) == ["S", "next"]


def test_system_messages_in_kept_range_are_skipped_but_kept_after():
    sysmsg = {"role": "system", "content": "prompt v1", "timestamp": 0}
    entries = [
        _m("s1", None, sysmsg, 1),
        _m("u1", "s1", user("1"), 2),
        _e("c1", "u1", "compaction", 3, summary="S", firstKeptEntryId="s1", tokensBefore=1),
        _m("s2", "c1", {"role": "system", "content": "v2", "timestamp": 1}, 4),
    ]
    assert roles(_ctx(entries)["messages"]) == ["compactionSummary", "user", "system"]


def test_compaction_system_message_comes_before_summary():
    system = {"role": "system", "content": "P", "timestamp": 5}
    entries = [
        _m("u1", None, user("1"), 1),
        _e("c1", "u1", "compaction", 2, summary="S", firstKeptEntryId="c1", tokensBefore=1,
           systemMessage=system),
    ]
    msgs = _ctx(entries)["messages"]
    assert msgs[0] is system
    assert roles(msgs) == ["system", "compactionSummary"]


def test_context_follows_only_the_path_to_the_leaf():
    entries = [
        _m("u1", None, user("root"), 1),
        _m("a1", "u1", assistant("r1"), 2),
        _m("b1", "a1", user("left"), 3),
        _m("b2", "b1", assistant("left-reply"), 4),
        _m("c1", "a1", user("right"), 5),
        _m("c2", "c1", assistant("right-reply"), 6),
    ]
    assert texts(_ctx(entries, "b2")["messages"]) == ["root", "r1", "left", "left-reply"]
    assert texts(_ctx(entries, "c2")["messages"]) == ["root", "r1", "right", "right-reply"]
    # default leaf = last entry in file order
    assert texts(_ctx(entries)["messages"])[-1] == "right-reply"


def test_branch_summary_on_path_becomes_summary_message():
    entries = [
        _m("u1", None, user("root"), 1),
        _m("a1", "u1", assistant("r1"), 2),
        _m("x1", "a1", user("abandoned"), 3),
        _e("bs", "a1", "branch_summary", 4, fromId="x1", summary="tried X"),
        _m("u2", "bs", user("new way"), 5),
    ]
    msgs = _ctx(entries)["messages"]
    assert roles(msgs) == ["user", "assistant", "branchSummary", "user"]
    assert msgs[2] == {"role": "branchSummary", "summary": "tried X", "fromId": "x1",
                       "timestamp": 1768467604000}


def test_empty_branch_summary_contributes_nothing():
    entries = [_m("u1", None, user("a"), 1),
               _e("bs", "u1", "branch_summary", 2, fromId="root", summary="")]
    assert roles(_ctx(entries)["messages"]) == ["user"]


def test_complex_tree_compaction_on_one_branch_summary_on_another():
    entries = [
        _m("u1", None, user("1"), 1),
        _m("a1", "u1", assistant("2"), 2),
        _m("u2", "a1", user("3"), 3),
        _m("a2", "u2", assistant("4"), 4),
        _e("c1", "a2", "compaction", 5, summary="compacted", firstKeptEntryId="u2",
           tokensBefore=1),
        _m("u3", "c1", user("5"), 6),
        _e("bs", "a1", "branch_summary", 7, fromId="u3", summary="other branch"),
        _m("u4", "bs", user("6"), 8),
    ]
    assert texts(_ctx(entries, "u3")["messages"]) == ["compacted", "3", "4", "5"]
    assert texts(_ctx(entries, "u4")["messages"]) == ["1", "2", "other branch", "6"]


def test_custom_message_entry_becomes_custom_role():
    entries = [_m("u1", None, user("a"), 1),
               _e("cm", "u1", "custom_message", 2, customType="ext", content="note",
                  display=False, details={"k": 1})]
    msgs = _ctx(entries)["messages"]
    assert msgs[1] == {"role": "custom", "customType": "ext", "content": "note", "display": False,
                       "details": {"k": 1}, "timestamp": 1768467602000}


def test_null_content_is_normalised():
    entries = [_m("u1", None, {"role": "user", "content": None, "timestamp": 1}, 1),
               _m("s1", "u1", {"role": "system", "content": None, "timestamp": 1}, 2),
               _e("cm", "s1", "custom_message", 3, customType="x", content=None, display=True)]
    msgs = _ctx(entries)["messages"]
    assert [m["content"] for m in msgs] == [[], "", []]
    assert entries[0]["message"]["content"] is None  # stored entry untouched


def test_error_and_aborted_assistants_stay_in_context():
    entries = [_m("u1", None, user("a"), 1),
               _m("a1", "u1", assistant("x", stop="error"), 2),
               _m("a2", "a1", assistant("y", stop="aborted"), 3)]
    assert roles(_ctx(entries)["messages"]) == ["user", "assistant", "assistant"]


def test_unknown_leaf_falls_back_to_last_entry():
    entries = _four()
    assert texts(_ctx(entries, "doesnotexist")["messages"]) == ["one", "two", "three", "four"]
    assert build_session_projection(entries, "doesnotexist").leaf_id == "a2"


def test_entry_with_missing_parent_yields_only_itself():
    entries = [*_four(), _m("orphan", "missing-parent", user("alone"), 9)]
    assert texts(_ctx(entries, "orphan")["messages"]) == ["alone"]


def test_tree_context_after_branching_returns_only_current_branch():
    tree = new_tree()
    u1 = tree.append_message(user("root"))
    tree.append_message(assistant("first"))
    tree.branch(u1["id"])
    tree.append_message(assistant("second"))
    assert texts(tree.projection().messages) == ["root", "second"]
    assert tree.projection().to_context()["model"] == {"provider": "anthropic",
                                                        "modelId": "claude-x"}


def test_projection_for_other_leaf_does_not_move_the_leaf():
    tree = new_tree()
    u1 = tree.append_message(user("root"))
    a1 = tree.append_message(assistant("first"))
    assert texts(tree.projection(u1["id"]).messages) == ["root"]
    assert tree.leaf_id == a1["id"]
    assert texts(tree.projection().messages) == ["root", "first"]


def test_source_of_maps_messages_to_entries():
    system = {"role": "system", "content": "P", "timestamp": 5}
    entries = [
        _m("u1", None, user("1"), 1),
        _e("c1", "u1", "compaction", 2, summary="S", firstKeptEntryId="u1", tokensBefore=1,
           systemMessage=system),
        _m("u2", "c1", user("2"), 3),
    ]
    p = build_session_projection(entries)
    assert [p.source_of(i).id for i in range(len(p.messages))] == ["c1", "c1", "u1", "u2"]
    assert p.entries[0].status == "summary"
