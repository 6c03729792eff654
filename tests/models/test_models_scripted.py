"""pinb/scripted through litellm: replay, tool calls, streaming, usage, overflow, faults."""

from __future__ import annotations

import asyncio
import json
import math

import pytest

from pi_nb.models import SCRIPT_FINISHED_TEXT, Script, unwrap_error

MODEL = "pinb/scripted"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]
SCRIPT = [
    "Sure, let me look at the code first.",
    {
        "text": "Reading both files.",
        "tool_calls": [
            {"name": "read", "arguments": {"path": "a.py"}},
            {"name": "read", "arguments": {"path": "src/b.py"}},
        ],
    },
    {"tool_calls": [{"name": "edit", "arguments": {"path": "a.py", "old": "x", "new": "y"}}]},
    "Done: a.py now uses y.",
]


def _assistant(response) -> dict:
    """The reply as an OpenAI assistant message dict, to append to the conversation."""
    message = response.choices[0].message
    out = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.function.name, "arguments": c.function.arguments},
            }
            for c in message.tool_calls
        ]
    return out


def _collect(stream) -> tuple[str, list[dict], str | None, object]:
    """Accumulate a litellm stream the way an agent loop does (OpenAI delta semantics)."""
    text, calls, finish, usage = "", {}, None, None
    for chunk in stream:
        usage = getattr(chunk, "usage", None) or usage
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        finish = choice.finish_reason or finish
        text += choice.delta.content or ""
        for tc in choice.delta.tool_calls or []:
            slot = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
            slot["id"] = tc.id or slot["id"]
            slot["name"] += tc.function.name or ""
            slot["arguments"] += tc.function.arguments or ""
    return text, [calls[i] for i in sorted(calls)], finish, usage


def _run_script(litellm, stream: bool) -> list[tuple[str, list[tuple[str, dict]], str]]:
    """Drive the whole SCRIPT as an agent would; return (text, [(tool, args)], finish) per turn."""
    messages: list[dict] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Please fix a.py"},
    ]
    turns = []
    for _ in range(len(SCRIPT) + 1):
        if stream:
            text, calls, finish, _usage = _collect(
                litellm.completion(
                    model=MODEL, messages=messages, tools=TOOLS, script=SCRIPT, stream=True
                )
            )
            assistant = {"role": "assistant", "content": text}
            if calls:
                assistant["tool_calls"] = [
                    {"id": c["id"], "type": "function",
                     "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for c in calls
                ]  # fmt: skip
        else:
            response = litellm.completion(
                model=MODEL, messages=messages, tools=TOOLS, script=SCRIPT
            )
            assistant = _assistant(response)
            finish = response.choices[0].finish_reason
        messages.append(assistant)
        calls = [
            (c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in assistant.get("tool_calls", [])
        ]
        turns.append((assistant["content"] or "", calls, finish))
        for c in assistant.get("tool_calls", []):
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": "ok"})
        if not calls:
            messages.append({"role": "user", "content": "go on"})
    return turns


EXPECTED = [
    ("Sure, let me look at the code first.", [], "stop"),
    ("Reading both files.", [("read", {"path": "a.py"}), ("read", {"path": "src/b.py"})],
     "tool_calls"),
    ("", [("edit", {"path": "a.py", "old": "x", "new": "y"})], "tool_calls"),
    ("Done: a.py now uses y.", [], "stop"),
    (SCRIPT_FINISHED_TEXT, [], "stop"),
]  # fmt: skip


def test_replay_order_and_tool_calls(litellm) -> None:
    assert _run_script(litellm, stream=False) == EXPECTED


def test_replay_streaming_matches_non_streaming(litellm) -> None:
    assert _run_script(litellm, stream=True) == EXPECTED


def test_stream_comes_in_several_chunks_with_usage(litellm) -> None:
    messages = [{"role": "user", "content": "hello"}]
    text = "one two three four five six seven eight nine ten"
    chunks = list(
        litellm.completion(
            model=MODEL,
            messages=messages,
            script=[text],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    pieces = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert len(pieces) >= 3 and "".join(pieces) == text
    plain = litellm.completion(model=MODEL, messages=messages, script=[text])
    usage = [c.usage for c in chunks if getattr(c, "usage", None)]
    assert usage and usage[-1].prompt_tokens == plain.usage.prompt_tokens
    assert usage[-1].completion_tokens == plain.usage.completion_tokens
    # Without include_usage, stream_chunk_builder still recovers it.
    chunks = list(litellm.completion(model=MODEL, messages=messages, script=[text], stream=True))
    assert litellm.stream_chunk_builder(chunks).usage.total_tokens == plain.usage.total_tokens


def test_usage_is_chars_over_four(litellm) -> None:
    messages = [
        {"role": "system", "content": "sys prompt"},
        {"role": "user", "content": [{"type": "text", "text": "look at this"}]},
        {
            "role": "assistant",
            "content": "ok",
            "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "read", "arguments": '{"path": "a.py"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "print('hi')\n"},
    ]  # fmt: skip
    turn = {"text": "Here it is.", "tool_calls": [{"name": "read", "arguments": {"path": "b.py"}}]}
    response = litellm.completion(model=MODEL, messages=messages, tools=TOOLS, script=[turn] * 2)
    chars = len("sys prompt") + len("look at this") + len("ok") + len("read")
    chars += len('{"path": "a.py"}') + len("print('hi')\n")
    chars += len(json.dumps(TOOLS, sort_keys=True, separators=(",", ":")))
    assert response.usage.prompt_tokens == math.ceil(chars / 4)
    reply = len("Here it is.") + len("read") + len('{"path": "b.py"}')
    assert response.usage.completion_tokens == math.ceil(reply / 4)
    assert response.usage.total_tokens == response.usage.prompt_tokens + math.ceil(reply / 4)
    again = litellm.completion(model=MODEL, messages=messages, tools=TOOLS, script=[turn] * 2)
    assert again.usage.model_dump() == response.usage.model_dump()


def test_script_index_override_and_exhaustion(litellm) -> None:
    messages = [{"role": "user", "content": "hi"}]
    script = ["first", "second", "third"]
    pick = litellm.completion(model=MODEL, messages=messages, script=script, script_index=2)
    assert pick.choices[0].message.content == "third"
    past = litellm.completion(model=MODEL, messages=messages, script=script, script_index=7)
    assert past.choices[0].message.content == SCRIPT_FINISHED_TEXT
    none = litellm.completion(model=MODEL, messages=messages)
    assert none.choices[0].message.content == SCRIPT_FINISHED_TEXT


def test_stateful_script_survives_transient_faults(litellm) -> None:
    script = Script([{"error": "rate_limit"}, "recovered", "next"])
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(litellm.RateLimitError):
        litellm.completion(model=MODEL, messages=messages, script=script)
    # The retry of the very same request gets the following turn.
    retry = litellm.completion(model=MODEL, messages=messages, script=script)
    assert retry.choices[0].message.content == "recovered"
    assert [r["turn"] for r in script.requests] == [0, 1]
    assert script.requests[1]["messages"][-1]["content"] == "hi"
    assert not script.exhausted
    # overflow_at rejects without consuming a turn.
    with pytest.raises(litellm.ContextWindowExceededError):
        litellm.completion(model=MODEL, messages=messages, script=script, overflow_at=0)
    assert script.position == 2
    assert (
        litellm.completion(model=MODEL, messages=messages, script=script).choices[0].message.content
        == "next"
    )


def test_overflow_at_raises_context_window_exceeded(litellm) -> None:
    messages = [{"role": "user", "content": "x" * 400}]  # 100 tokens
    ok = litellm.completion(model=MODEL, messages=messages, script=["fine"], overflow_at=100)
    assert ok.choices[0].message.content == "fine"
    with pytest.raises(litellm.ContextWindowExceededError) as info:
        litellm.completion(model=MODEL, messages=messages, script=["fine"], overflow_at=99)
    assert "maximum context length is 99 tokens" in str(info.value)
    assert "resulted in 100 tokens" in str(info.value)


def test_overflow_when_streaming_raises_on_first_iteration(litellm) -> None:
    messages = [{"role": "user", "content": "x" * 400}]
    stream = litellm.completion(
        model=MODEL, messages=messages, script=["fine"], overflow_at=10, stream=True
    )
    with pytest.raises(litellm.ContextWindowExceededError):
        next(iter(stream))


FAULT_TYPES = {
    "rate_limit": "RateLimitError",
    "server": "InternalServerError",
    "unavailable": "ServiceUnavailableError",
    "overflow": "ContextWindowExceededError",
    "timeout": "Timeout",
    "connection": "APIConnectionError",
    "auth": "AuthenticationError",
    "bad_request": "BadRequestError",
}


@pytest.mark.parametrize("fault", sorted(FAULT_TYPES))
def test_fault_raises_litellm_exception(litellm, fault: str) -> None:
    expected = getattr(litellm, FAULT_TYPES[fault])
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(expected) as info:
        litellm.completion(model=MODEL, messages=messages, script=[{"error": fault}])
    assert type(info.value) is expected
    assert "pinb/scripted" in str(info.value)


@pytest.mark.parametrize("fault", sorted(FAULT_TYPES))
def test_fault_when_streaming(litellm, fault: str) -> None:
    expected = getattr(litellm, FAULT_TYPES[fault])
    messages = [{"role": "user", "content": "hi"}]
    stream = litellm.completion(
        model=MODEL, messages=messages, script=[{"error": fault}], stream=True
    )
    with pytest.raises(Exception) as info:
        next(iter(stream))
    # litellm wraps 429 / 5xx / connection errors raised mid-stream; the original is kept.
    assert type(unwrap_error(info.value)) is expected


def test_stream_dies_after_k_chunks(litellm) -> None:
    turn = {"text": "a b c d e f g h i j k l m n o p", "stream_dies_after": 2}
    messages = [{"role": "user", "content": "hi"}]
    received = []
    with pytest.raises(Exception) as info:
        for chunk in litellm.completion(model=MODEL, messages=messages, script=[turn], stream=True):
            if chunk.choices and chunk.choices[0].delta.content:
                received.append(chunk.choices[0].delta.content)
    assert received == ["a b c ", "d e f "]
    assert isinstance(unwrap_error(info.value), litellm.APIConnectionError)
    with pytest.raises(litellm.APIConnectionError):
        litellm.completion(model=MODEL, messages=messages, script=[turn])


def test_malformed_tool_call(litellm) -> None:
    messages = [{"role": "user", "content": "hi"}]
    turn = {"tool_calls": [{"name": "read", "arguments": {"path": "a.py"}}],
            "malformed_tool_call": True}  # fmt: skip
    response = litellm.completion(model=MODEL, messages=messages, script=[turn])
    call = response.choices[0].message.tool_calls[0]
    assert call.function.name == "read"
    with pytest.raises(json.JSONDecodeError):
        json.loads(call.function.arguments)
    _, calls, finish, _ = _collect(
        litellm.completion(model=MODEL, messages=messages, script=[turn], stream=True)
    )
    assert finish == "tool_calls" and calls[0]["arguments"] == call.function.arguments
    bare = litellm.completion(
        model=MODEL, messages=messages, script=[{"malformed_tool_call": "bash"}]
    )
    with pytest.raises(json.JSONDecodeError):
        json.loads(bare.choices[0].message.tool_calls[0].function.arguments)


def test_max_tokens_truncates_with_length(litellm) -> None:
    messages = [{"role": "user", "content": "hi"}]
    turn = {"text": "x" * 100, "tool_calls": [{"name": "read", "arguments": {"path": "a.py"}}]}
    response = litellm.completion(model=MODEL, messages=messages, script=[turn], max_tokens=5)
    assert response.choices[0].finish_reason == "length"
    assert response.choices[0].message.content == "x" * 20
    assert not response.choices[0].message.tool_calls
    assert response.usage.completion_tokens == 5


def test_unknown_turn_keys_are_rejected(litellm) -> None:
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(Exception, match="unknown keys"):
        litellm.completion(model=MODEL, messages=messages, script=[{"txt": "typo"}])


def test_async_completion_and_streaming(litellm) -> None:
    messages = [{"role": "user", "content": "hi"}]
    script = [{"text": "async hello", "tool_calls": [{"name": "read", "arguments": {"p": 1}}]}]

    async def main() -> tuple[str, str]:
        response = await litellm.acompletion(model=MODEL, messages=messages, script=script)
        stream = await litellm.acompletion(
            model=MODEL, messages=messages, script=script, stream=True
        )
        text = ""
        async for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
        return response.choices[0].message.content, text

    full, streamed = asyncio.run(main())
    assert full == streamed == "async hello"
