"""AgentMessages → provider messages: convert_to_llm and normalize."""

from __future__ import annotations

import json

from pinb_testkit import assistant, tool_call, tool_result, user

from pi_nb.messages import (
    BRANCH_SUMMARY_PREFIX,
    BRANCH_SUMMARY_SUFFIX,
    COMPACTION_SUMMARY_PREFIX,
    COMPACTION_SUMMARY_SUFFIX,
    MISSING_TOOL_RESULT,
    bash_execution_text,
    convert_to_llm,
    current_system_message,
    normalize,
    to_request,
)

IMG = {"type": "image", "data": "QUJD", "mimeType": "image/png"}


def _bash(**kw):
    base = {"role": "bashExecution", "command": "make test", "output": "ok", "exitCode": 0,
            "cancelled": False, "truncated": False, "timestamp": 7}
    base.update(kw)
    return base


# --- convert_to_llm ---------------------------------------------------------------------------------


def test_passthrough_roles_are_the_same_objects():
    msgs = [{"role": "system", "content": "p", "timestamp": 0}, user("u"), assistant("a"),
            tool_result()]
    out = convert_to_llm(msgs)
    assert all(a is b for a, b in zip(out, msgs, strict=True)) and len(out) == 4


def test_bash_execution_becomes_user_text_and_excluded_is_dropped():
    out = convert_to_llm([_bash(), _bash(excludeFromContext=True)])
    assert len(out) == 1
    (msg,) = out
    assert msg["role"] == "user" and msg["timestamp"] == 7
    (block,) = msg["content"]
    assert block["type"] == "text"
    assert "make test" in block["text"] and "```\nok\n```" in block["text"]


def test_bash_execution_text_notes():
    assert "make test" in bash_execution_text(_bash(output=""))
    assert "```" not in bash_execution_text(_bash(output=""))
    cancelled = bash_execution_text(_bash(cancelled=True, exitCode=None))
    failed = bash_execution_text(_bash(exitCode=2))
    ok = bash_execution_text(_bash())
    assert "2" in failed.split("```")[-1] and failed != ok
    assert cancelled != ok and "cancel" in cancelled
    truncated = bash_execution_text(_bash(truncated=True, fullOutputPath="/tmp/full.txt"))
    assert "/tmp/full.txt" in truncated
    assert "/tmp/full.txt" not in bash_execution_text(_bash(fullOutputPath="/tmp/full.txt"))


def test_custom_branch_and_compaction_summaries_become_user_messages():
    custom_str = {"role": "custom", "customType": "x", "content": "note", "display": True,
                  "timestamp": 1}
    custom_list = {"role": "custom", "customType": "x", "content": [{"type": "text", "text": "n"},
                                                                     IMG],
                   "display": False, "timestamp": 2}
    branch = {"role": "branchSummary", "summary": "B", "fromId": "x", "timestamp": 3}
    comp = {"role": "compactionSummary", "summary": "C", "tokensBefore": 9, "timestamp": 4}
    out = convert_to_llm([custom_str, custom_list, branch, comp])
    assert [m["role"] for m in out] == ["user"] * 4
    assert out[0]["content"] == [{"type": "text", "text": "note"}]
    assert out[1]["content"] == custom_list["content"]
    assert out[2]["content"] == [{"type": "text",
                                  "text": BRANCH_SUMMARY_PREFIX + "B" + BRANCH_SUMMARY_SUFFIX}]
    assert out[3]["content"] == [{"type": "text", "text": COMPACTION_SUMMARY_PREFIX + "C"
                                  + COMPACTION_SUMMARY_SUFFIX}]
    assert "<summary>" in out[3]["content"][0]["text"]
    assert [m["timestamp"] for m in out] == [1, 2, 3, 4]


def test_unknown_roles_are_dropped():
    assert convert_to_llm([{"role": "hookMessage", "content": "x"}, user("u")]) == [user("u")]


# --- normalize -----------------------------------------------------------------------------------


def test_normalize_drops_error_and_aborted_assistants():
    out = normalize([user("q"), assistant("broken", stop="error"), assistant("cut", stop="aborted"),
                     assistant("good")])
    assert out == [{"role": "user", "content": "q"}, {"role": "assistant", "content": "good"}]


def test_normalize_synthesizes_missing_tool_results_and_keeps_ids_paired():
    calls = [tool_call("call_a", "read", path="x"), tool_call("call_b", "bash", cmd="ls")]
    msgs = [user("q"), assistant("", calls=calls), tool_result("call_b", "listing"), user("next")]
    out = normalize(msgs)
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "tool", "user"]
    a = out[1]
    assert [c["id"] for c in a["tool_calls"]] == ["call_a", "call_b"]
    assert json.loads(a["tool_calls"][0]["function"]["arguments"]) == {"path": "x"}
    assert a["tool_calls"][0]["function"]["name"] == "read"
    tool_ids = [m["tool_call_id"] for m in out if m["role"] == "tool"]
    assert sorted(tool_ids) == ["call_a", "call_b"]
    synthetic = next(m for m in out if m.get("tool_call_id") == "call_a")
    assert synthetic["content"] == MISSING_TOOL_RESULT
    real = next(m for m in out if m.get("tool_call_id") == "call_b")
    assert real["content"] == "listing"


def test_normalize_synthesizes_at_end_of_transcript_too():
    out = normalize([user("q"), assistant("", calls=[tool_call("c1")])])
    assert out[-1] == {"role": "tool", "tool_call_id": "c1", "content": MISSING_TOOL_RESULT}


def test_normalize_drops_orphan_and_duplicate_tool_results():
    msgs = [user("q"), tool_result("ghost", "x"), assistant("", calls=[tool_call("c1")]),
            tool_result("c1", "first"), tool_result("c1", "again")]
    out = normalize(msgs)
    tools = [m for m in out if m["role"] == "tool"]
    assert tools == [{"role": "tool", "tool_call_id": "c1", "content": "first"}]


def test_every_tool_call_id_has_exactly_one_result():
    msgs = [
        user("q"),
        assistant("", calls=[tool_call("a1"), tool_call("a2")]),
        tool_result("a2"),
        assistant("broken", stop="error", calls=[tool_call("e1")]),
        assistant("", calls=[tool_call("b1")]),
        tool_result("b1"),
        tool_result("a1"),  # late: after the next assistant turn
        user("end"),
    ]
    out = normalize(msgs)
    call_ids = [c["id"] for m in out if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    result_ids = [m["tool_call_id"] for m in out if m["role"] == "tool"]
    assert sorted(call_ids) == sorted(result_ids) == ["a1", "a2", "b1"]
    # results follow their assistant, before any other turn
    for i, m in enumerate(out):
        if m["role"] == "assistant" and m.get("tool_calls"):
            following = out[i + 1: i + 1 + len(m["tool_calls"])]
            assert {f["tool_call_id"] for f in following} == {c["id"] for c in m["tool_calls"]}


def test_normalize_folds_system_messages_into_one_head():
    msgs = [{"role": "system", "content": "Base.", "sections": {"s": "Section."}, "timestamp": 0},
            user("q"),
            {"role": "system", "content": "Later.", "timestamp": 1},
            assistant("a")]
    out = normalize(msgs, system_prompt="Extra prompt.")
    assert [m["role"] for m in out] == ["system", "user", "assistant"]
    head = out[0]["content"]
    assert head.index("Extra prompt.") < head.index("Base.") < head.index("Later.")
    assert "Section." in head


def test_normalize_without_system_has_no_head():
    assert normalize([user("q")])[0]["role"] == "user"


def test_tool_result_images_go_to_a_following_user_message():
    msgs = [user("look"), assistant("", calls=[tool_call("c1", "screenshot")]),
            tool_result("c1", "see image", images=1), assistant("seen")]
    out = normalize(msgs)
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "user", "assistant"]
    assert out[2]["content"] == "see image"
    assert out[3]["content"] == [{"type": "image_url",
                                  "image_url": {"url": "data:image/png;base64,AAAA"}}]


def test_user_images_become_image_parts_and_text_only_becomes_string():
    out = normalize([user([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]),
                     user([{"type": "text", "text": "pic"}, IMG])])
    assert out[0]["content"] == "a\nb"
    assert out[1]["content"] == [{"type": "text", "text": "pic"},
                                 {"type": "image_url",
                                  "image_url": {"url": "data:image/png;base64,QUJD"}}]


def test_thinking_not_sent_back_and_empty_assistant_gets_empty_string():
    msg = assistant("")
    msg["content"] = [{"type": "thinking", "thinking": "secret"}]
    out = normalize([user("q"), msg])
    assert out[1] == {"role": "assistant", "content": ""}
    assert "secret" not in json.dumps(out)


def test_to_request_runs_both_steps():
    comp = {"role": "compactionSummary", "summary": "S", "tokensBefore": 1, "timestamp": 0}
    out = to_request([comp, {"role": "bashExecution", "command": "ls", "output": "",
                             "exitCode": 0, "cancelled": False, "truncated": False,
                             "timestamp": 0}])
    assert [m["role"] for m in out] == ["user", "user"]
    assert out[0]["content"].startswith(COMPACTION_SUMMARY_PREFIX)


def test_current_system_message_replay():
    msgs = [
        {"role": "system", "content": "A", "sections": {"x": "1", "y": "2"},
         "toolsAdded": [{"name": "t1"}, {"name": "t2"}], "timestamp": 5},
        user("q"),
        {"role": "system", "content": [{"type": "text", "text": "B"}], "sections": {"x": None},
         "toolsRemoved": [{"name": "t1"}], "toolsAdded": [{"name": "t2", "v": 2}],
         "timestamp": 9},
    ]
    assert current_system_message(msgs) == {
        "role": "system", "content": "A\n\nB", "sections": {"y": "2"},
        "toolsAdded": [{"name": "t2", "v": 2}], "timestamp": 5,
    }
    assert current_system_message([user("q")]) is None
