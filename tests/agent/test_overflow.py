"""Overflow detection, transient errors, exception classification, retry delays."""

from __future__ import annotations

import pytest

from pi_nb.agent.overflow import (
    RetryPolicy,
    classify_exception,
    is_context_overflow,
    is_recoverable_length,
    is_retryable_error,
)


def _reply(stop: str, error: str | None = None, *, input_tokens: int = 0, output: int = 0, provider: str = "x"):
    message = {
        "role": "assistant",
        "content": [],
        "provider": provider,
        "stopReason": stop,
        "usage": {"input": input_tokens, "output": output, "cacheRead": 0, "cacheWrite": 0},
    }
    if error is not None:
        message["errorMessage"] = error
    return message


@pytest.mark.parametrize(
    "text",
    [
        "prompt is too long: 213462 tokens > 200000 maximum",
        "Your input exceeds the context window of this model",
        "Requested token count exceeds the model's maximum context length of 131072 tokens",
        "Input length (265330) exceeds model's maximum context length (262144).",
        "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575)",
        "This model's maximum prompt length is 131072 but the request contains 537812 tokens",
        "This endpoint's maximum context length is 8192 tokens. However, you requested about 9000 tokens",
        "the request exceeds the available context size, try increasing it",
        "litellm.ContextWindowExceededError: litellm.BadRequestError: context_length_exceeded",
        "Requested tokens (3000) exceed context window of 2048",
    ],
)
def test_provider_overflow_phrases(text):
    assert is_context_overflow(_reply("error", text))
    assert not is_retryable_error(_reply("error", text))


def test_throttling_that_mentions_tokens_is_not_overflow():
    msg = _reply("error", "ThrottlingException: Too many tokens, rate limit reached")
    assert not is_context_overflow(msg)
    assert is_retryable_error(msg)


def test_silent_and_length_stop_overflow_need_the_window():
    silent = _reply("stop", input_tokens=3000, output=10)
    assert is_context_overflow(silent, 2048)
    assert not is_context_overflow(silent, 4096)
    assert not is_context_overflow(silent)
    full = _reply("length", input_tokens=2040, output=0)
    assert is_context_overflow(full, 2048)
    assert not is_context_overflow(_reply("length", input_tokens=2040, output=5), 2048)
    assert is_recoverable_length(_reply("length", output=100), 4096)
    assert not is_recoverable_length(_reply("length", output=4096), 4096)
    assert not is_recoverable_length(_reply("stop", output=100), 4096)


@pytest.mark.parametrize(
    ("text", "retry"),
    [
        ("529 overloaded_error", True),
        ("Rate limit exceeded (429)", True),
        ("503 Service Unavailable", True),
        ("Connection error.", True),
        ("Request timed out", True),
        ("insufficient_quota: You exceeded your current quota, check billing", False),
        ("invalid api key", False),
    ],
)
def test_retryable_error_texts(text, retry):
    assert is_retryable_error(_reply("error", text)) is retry
    assert not is_retryable_error(_reply("stop", text))


def test_classify_litellm_exceptions():
    litellm = pytest.importorskip("litellm")
    args = {"message": "boom", "model": "m", "llm_provider": "pinb"}
    assert classify_exception(litellm.ContextWindowExceededError(**args)) == "overflow"
    assert classify_exception(litellm.RateLimitError(**args)) == "transient"
    assert classify_exception(litellm.InternalServerError(**args)) == "transient"
    assert classify_exception(litellm.ServiceUnavailableError(**args)) == "transient"
    assert classify_exception(litellm.APIConnectionError(**args)) == "transient"
    assert classify_exception(litellm.Timeout(**args)) == "transient"
    assert classify_exception(litellm.AuthenticationError(**args)) == "fatal"
    assert classify_exception(litellm.BadRequestError(**args)) == "fatal"
    quota = {**args, "message": "insufficient_quota"}
    assert classify_exception(litellm.RateLimitError(**quota)) == "fatal"
    # A BadRequestError whose text is an overflow wording counts as overflow.
    text = {**args, "message": "maximum context length is 4096 tokens"}
    assert classify_exception(litellm.BadRequestError(**text)) == "overflow"


def test_classify_unwraps_midstream_wrapper_and_plain_errors():
    class RateLimitError(Exception):
        pass

    class MidStreamFallbackError(Exception):
        def __init__(self, original):
            super().__init__("wrapped")
            self.original_exception = original

    assert classify_exception(MidStreamFallbackError(RateLimitError("429"))) == "transient"
    assert classify_exception(ValueError("something else")) == "fatal"
    assert classify_exception(ConnectionResetError()) == "transient"


def test_retry_policy_backoff_and_injected_sleep():
    slept = []
    policy = RetryPolicy(max_retries=5, base_delay=2.0, max_delay=10.0, sleep=slept.append)
    assert [policy.delay(n) for n in (1, 2, 3, 4, 5)] == [2.0, 4.0, 8.0, 10.0, 10.0]
    assert policy.wait(4.0) is True
    assert slept == [4.0]
