"""The agent loop (Pi's packages/agent acceptance checks) driven through Session + pinb/scripted."""

from __future__ import annotations

import threading
import time

from agent_helpers import script_of, texts, turn_requests

from pi_nb.agent import Tool, tool_from_function
from pi_nb.session import SessionTree


def _call(name, **arguments):
    return {"name": name, "arguments": arguments}


def test_transform_context_applies_before_convert(make_session):
    session = make_session(["done"])
    seen = []

    def transform(event):
        seen.append([m["role"] for m in event.messages])
        # A custom-role message added here only reaches the model if convert_to_llm runs after.
        return [*event.messages, {"role": "custom", "customType": "note", "content": "INJECTED", "display": False}]

    session.hooks.on("context", transform)
    result = session.prompt("hello")
    assert result.ok
    assert seen == [["user"]]
    request = texts(turn_requests(session)[0])
    assert request[-1] == ("user", "INJECTED")
    # The transform changes the request only, never the session file.
    stored = SessionTree.open(session.path).projection().messages
    assert all(m.get("customType") != "note" for m in stored)


def test_custom_roles_are_converted_and_before_agent_start_messages_persisted(make_session):
    session = make_session(["ok"])
    session.hooks.on(
        "before_agent_start",
        lambda e: {"message": {"customType": "ctx", "content": "extra context", "display": True}},
    )
    session.prompt("question")
    kinds = [(e["type"], e.get("message", {}).get("role")) for e in session.tree.entries]
    assert kinds == [("message", "user"), ("custom_message", None), ("message", "assistant")]
    assert session.tree.entries[1]["customType"] == "ctx"
    request = texts(turn_requests(session)[0])
    assert request[-2:] == [("user", "question"), ("user", "extra context")]


def test_tool_calls_produce_results(make_session, recorder):
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    session = make_session([{"text": "adding", "tool_calls": [_call("add", a=2, b=3)]}, "It is 5."], tools=[add])
    result = session.prompt("2+3?", on_event=recorder)
    assert result.text == "It is 5."
    roles = [m["role"] for m in result.messages]
    assert roles == ["user", "assistant", "toolResult", "assistant"]
    tool_result = result.messages[2]
    assert tool_result["toolName"] == "add"
    assert tool_result["isError"] is False
    assert tool_result["content"] == [{"type": "text", "text": "5"}]
    second = turn_requests(session)[1]
    assert second[-1]["role"] == "tool" and second[-1]["content"] == "5"
    assert recorder.types.count("tool_execution_start") == 1
    assert recorder.of("tool_execution_end")[0]["is_error"] is False
    assert script_of(session).requests[0]["tools"][0]["function"]["name"] == "add"


def test_parallel_tools_run_concurrently_and_results_keep_call_order(make_session, recorder):
    fast_done = threading.Event()

    def slow() -> str:
        """Slow tool."""
        # Only finishes early if `fast` ran at the same time.
        assert fast_done.wait(5), "tools did not run concurrently"
        time.sleep(0.1)
        return "slow result"

    def fast() -> str:
        """Fast tool."""
        fast_done.set()
        return "fast result"

    session = make_session(
        [{"tool_calls": [_call("slow"), _call("fast")]}, "both done"], tools=[slow, fast]
    )
    result = session.prompt("go", on_event=recorder)
    assert result.ok
    ends = [e["tool_name"] for e in recorder.of("tool_execution_end")]
    assert ends == ["fast", "slow"]  # completion order
    results = [m for m in result.messages if m["role"] == "toolResult"]
    assert [m["toolName"] for m in results] == ["slow", "fast"]  # assistant's call order
    assert [m["content"][0]["text"] for m in results] == ["slow result", "fast result"]
    assert not any(m["isError"] for m in results)


def test_sequential_tool_makes_the_batch_sequential(make_session):
    order = []

    def first() -> str:
        """First."""
        order.append("first-start")
        time.sleep(0.1)
        order.append("first-end")
        return "1"

    def second() -> str:
        """Second."""
        order.append("second")
        return "2"

    tools = [tool_from_function(first, execution_mode="sequential"), tool_from_function(second)]
    session = make_session([{"tool_calls": [_call("first"), _call("second")]}, "ok"], tools=tools)
    session.prompt("go")
    assert order == ["first-start", "first-end", "second"]


def test_unknown_tool_bad_arguments_and_raising_tool_give_error_results(make_session):
    def boom(x: int) -> str:
        """Always fails."""
        raise RuntimeError(f"boom {x}")

    session = make_session(
        [
            {"tool_calls": [_call("nope"), _call("boom", x="not a number"), _call("boom", x=7)]},
            {"malformed_tool_call": "boom"},
            "recovered",
        ],
        tools=[boom],
    )
    result = session.prompt("go")
    results = [m for m in result.messages if m["role"] == "toolResult"]
    assert [m["isError"] for m in results] == [True, True, True, True]
    text = [m["content"][0]["text"] for m in results]
    assert text[0] == "Tool nope not found"
    assert "x: must be integer" in text[1]
    assert text[2] == "boom 7"
    assert "not valid JSON" in text[3]
    assert result.text == "recovered"


def test_tool_timeout_gives_error_result(make_session):
    release = threading.Event()

    def hang() -> str:
        """Hangs."""
        release.wait(10)
        return "late"

    try:
        session = make_session(
            [{"tool_calls": [_call("hang")]}, "after timeout"],
            tools=[Tool("hang", "Hangs.", {"type": "object", "properties": {}}, hang, timeout=0.2)],
        )
        started = time.monotonic()
        result = session.prompt("go")
        assert time.monotonic() - started < 5
        tool_result = next(m for m in result.messages if m["role"] == "toolResult")
        assert tool_result["isError"] is True
        assert tool_result["content"][0]["text"] == "Tool hang timed out after 0.2 seconds"
        assert result.text == "after timeout"
    finally:
        release.set()


def test_length_stop_fails_its_tool_calls(make_session):
    calls = []

    def note(text: str) -> str:
        """Note something."""
        calls.append(text)
        return "noted"

    session = make_session([{"tool_calls": [_call("note", text="x")]}, "done"], tools=[note])
    original = session._loop

    def loop_with_length_stop(system_prompt):
        loop = original(system_prompt)
        complete = loop.config.complete

        def truncated(*args, **kwargs):
            from pi_nb.llm import complete as real

            reply = (complete or real)(*args, **kwargs)
            if any(b["type"] == "toolCall" for b in reply["content"]):
                reply["stopReason"] = "length"
            return reply

        loop.config.complete = truncated
        return loop

    session._loop = loop_with_length_stop
    result = session.prompt("go")
    tool_result = next(m for m in result.messages if m["role"] == "toolResult")
    assert tool_result["isError"] is True
    assert "output token limit" in tool_result["content"][0]["text"]
    assert calls == []  # never executed
    assert result.text == "done"


def test_steering_is_injected_before_the_next_call(make_session, recorder):
    session = make_session([{"tool_calls": [_call("work")]}, "steered reply", "unused"])

    def work() -> str:
        """Do work; the user steers meanwhile."""
        session.steer("actually, stop and summarize")
        return "worked"

    session.tools = [tool_from_function(work)]
    result = session.prompt("start", on_event=recorder)
    roles = [m["role"] for m in result.messages]
    assert roles == ["user", "assistant", "toolResult", "user", "assistant"]
    assert result.messages[3]["content"][0]["text"] == "actually, stop and summarize"
    second = texts(turn_requests(session)[1])
    assert second[-2][0] == "tool"
    assert second[-1] == ("user", "actually, stop and summarize")
    assert result.text == "steered reply"
    assert len(turn_requests(session)) == 2


def test_follow_up_runs_after_the_agent_would_stop(make_session, recorder):
    session = make_session(["first answer", "second answer"])

    def queue_follow_up(event):
        is_reply = event["type"] == "message_end" and event["message"]["role"] == "assistant"
        if is_reply and event["message"]["content"][0]["text"] == "first answer":
            session.follow_up("and one more thing")

    result = session.prompt("question", on_event=queue_follow_up)
    roles = [m["role"] for m in result.messages]
    assert roles == ["user", "assistant", "user", "assistant"]
    assert result.messages[2]["content"][0]["text"] == "and one more thing"
    assert result.text == "second answer"
    last_request = texts(turn_requests(session)[1])
    assert last_request[-1] == ("user", "and one more thing")


def test_abort_mid_stream_persists_partial_reply_and_session_stays_usable(make_session):
    long_text = " ".join(f"word{i}" for i in range(60))
    session = make_session([long_text, "fresh answer"])

    def abort_on_first_delta(event):
        if event["type"] == "message_update":
            session.abort()

    result = session.prompt("talk a lot", on_event=abort_on_first_delta)
    assert result.aborted
    reply = result.replies[-1]
    assert reply["stopReason"] == "aborted"
    partial = reply["content"][0]["text"]
    assert partial and long_text.startswith(partial) and partial != long_text
    stored = SessionTree.open(session.path)
    assert stored.entries[-1]["message"]["stopReason"] == "aborted"

    again = session.prompt("try again")
    assert again.ok and again.text == "fresh answer"
    # The aborted reply is not sent back to the model.
    request = texts(turn_requests(session)[1])
    assert [r for r, _ in request if r == "assistant"] == []


def test_keyboard_interrupt_in_stream_is_an_abort(make_session):
    session = make_session([" ".join(["chunk"] * 30), "next"])
    count = []

    def interrupt(event):
        if event["type"] == "message_update":
            count.append(1)
            if len(count) == 2:
                raise KeyboardInterrupt

    result = session.prompt("go", on_event=interrupt)
    assert result.aborted
    assert result.replies[-1]["stopReason"] == "aborted"
    assert result.replies[-1]["content"][0]["text"].count("chunk") == 6  # two 3-word chunks
    assert session.prompt("again").text == "next"


def test_steering_during_a_final_reply_continues_the_run(make_session, recorder):
    session = make_session(["first reply", "reply to steering", "unused"])

    def steer_once(event):
        recorder(event)
        if event["type"] == "message_update" and not session.steering and len(turn_requests(session)) == 1:
            session.steer("one more point")

    result = session.prompt("question", on_event=steer_once)
    assert [m["role"] for m in result.messages] == ["user", "assistant", "user", "assistant"]
    assert result.text == "reply to steering"
    assert len(session.steering) == 0
    # Polled at the turn boundary inside the same run (not by a second run).
    assert recorder.types.count("agent_start") == 1
    assert recorder.types.count("turn_start") == 2


def test_abort_during_a_tool_kills_the_command_and_ends_the_run(make_session, tmp_path):
    from pi_nb.agent import default_tools

    session = make_session(
        [{"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 30"}}]}, "unused"],
        tools=default_tools(tmp_path),
    )

    started = []

    def abort_when_tool_starts(event):
        if event["type"] == "tool_execution_start":
            started.append(time.monotonic())
            threading.Timer(0.3, session.abort).start()

    result = session.prompt("run it", on_event=abort_when_tool_starts)
    assert time.monotonic() - started[0] < 5  # not the 30 s of the command
    assert result.aborted
    tool_result = next(m for m in result.messages if m["role"] == "toolResult")
    assert tool_result["isError"] and "Command aborted" in tool_result["content"][0]["text"]
    assert result.replies[-1]["stopReason"] == "aborted"
    assert len(turn_requests(session)) == 1  # no model call after the abort
