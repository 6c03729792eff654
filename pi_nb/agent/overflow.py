"""Recognising context overflow and transient errors, and the retry policy.

Pi 1.3 semantics: a reply overflowed the context when it failed with one of the providers'
"too long" messages, when a *successful* reply reports more input than the window holds
(silent overflow), or when it stopped for length with no output and a full window. Transient
errors (rate limits, 5xx, dropped connections) are retried with exponential backoff before
anything else; an overflow is never retried blindly — it is compacted first.

Nothing here imports litellm: exceptions are classified by their class names.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "ErrorKind",
    "RetryPolicy",
    "classify_exception",
    "error_message_of",
    "is_context_overflow",
    "is_overflow_message",
    "is_recoverable_length",
    "is_retryable_error",
    "one_line",
    "unwrap_exception",
]

ErrorKind = Literal["overflow", "transient", "fatal"]

# Provider wordings for "the request does not fit the context window" (case-insensitive).
_OVERFLOW = re.compile(
    "|".join(
        [
            r"prompt (is )?too long",  # Anthropic, z.ai
            r"prompt exceeds max length",  # z.ai (CN)
            r"request_too_large",  # Anthropic, request size
            r"input is too long for requested model",  # Bedrock
            r"exceeds the context window",  # OpenAI
            r"exceeds (the )?(model'?s )?maximum context length( of [\d,]+ tokens?|\s*\([\d,]+\))",  # LiteLLM-style proxies
            r"input token count.*exceeds the maximum",  # Gemini
            r"maximum prompt length is \d+",  # xAI
            r"reduce the length of the messages",  # Groq
            r"maximum context length is \d+ tokens",  # OpenRouter, OpenAI-compatible
            r"exceeds (the )?maximum allowed input length of [\d,]+ tokens?",  # OpenRouter/Poolside
            r"input \(\d+ tokens\) is longer than the model'?s context length",  # Together
            r"exceeds the limit of \d+",  # Copilot
            r"exceeds the available context size",  # llama.cpp server
            r"exceed context window of \d+",  # llama-cpp-python
            r"greater than the context length",  # LM Studio
            r"context window exceeds limit",  # MiniMax
            r"exceeded model token limit",  # Kimi
            r"too large for model with \d+ maximum context length",  # Mistral
            r"prompt has [\d,]+ tokens?, but the configured context size is",  # DS4
            r"model_context_window_exceeded",  # z.ai finish reason as error text
            r"prompt too long; exceeded (max )?context length",  # Ollama
            r"range of input length should be",  # DashScope
            r"context[_ ]length[_ ]exceeded",  # generic
            r"context ?window ?exceeded",  # litellm's exception name in messages
            r"too many tokens",  # generic
            r"token limit exceeded",  # generic
        ]
    ),
    re.I,
)
# Errors that mention tokens but are throttling, never overflow.
_NOT_OVERFLOW = re.compile(
    r"^(throttling error|service unavailable):|rate.?limit|too many requests", re.I
)
_CEREBRAS_NO_BODY = re.compile(r"^4(00|13)\s*(status code)?\s*\(no body\)", re.I)

# Transient provider / transport failures worth retrying.
_TRANSIENT = re.compile(
    "|".join(
        [
            r"overloaded",
            r"server_busy|servers are currently busy|high demand|at capacity",
            r"rate.?limit",
            r"too many requests",
            r"\b(429|500|502|503|504|520|524)\b",
            r"service.?(is.?)?(temporarily.?)?unavailable",
            r"server.?error",
            r"internal.?error",
            r"provider.?returned.?(an.?)?error",
            r"upstream.?connect|unable to forward upstream",
            r"network.?error",
            r"connection.?(error|refused|lost|reset)",
            r"other side closed",
            r"fetch failed",
            r"getaddrinfo|ENOTFOUND|EAI_AGAIN",
            r"reset before headers",
            r"socket hang up|socket connection was closed",
            r"timed? ?out|timeout",
            r"terminated",
            r"ended without|stream ended before",
            r"retry delay|retry your request|try your request again",
            r"ResourceExhausted",
        ]
    ),
    re.I,
)
# Account limits reported like rate limits but not transient.
_QUOTA = re.compile(
    r"insufficient_quota|quota exceeded|out of budget|billing|usage limit reached|available balance",
    re.I,
)

_OVERFLOW_TYPES = {"ContextWindowExceededError"}
_TRANSIENT_TYPES = {
    "RateLimitError",
    "InternalServerError",
    "ServiceUnavailableError",
    "BadGatewayError",
    "APIConnectionError",
    "APITimeoutError",
    "Timeout",
    "TimeoutError",
    "ConnectionError",
    "ConnectionResetError",
    "ConnectionRefusedError",
    "RemoteProtocolError",
    "ReadTimeout",
    "ConnectTimeout",
}
# Authentication and configuration errors: retrying cannot help.
_FATAL_TYPES = {
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "BadRequestError",
    "UnprocessableEntityError",
    "UnsupportedParamsError",
    "InvalidRequestError",
    "BudgetExceededError",
    "ContentPolicyViolationError",
    "ModelConfigError",
}
# The same, told only by the text (litellm reports a missing OpenAI key as a 500).
_CONFIG = re.compile(
    r"missing credentials|api[_ -]?key|authenticat|unauthori[sz]ed|invalid x-api-key"
    r"|permission denied|\b40[13]\b",
    re.I,
)
# Throttling texts that may mention the key ("rate limit reached for this API key").
_TRANSIENT_WORDING = re.compile(r"rate.?limit|too many requests|overloaded|\b429\b", re.I)
_TRACEBACK = re.compile(r"\s*Traceback \(most recent call last\):.*", re.S)


def _usage(message: dict[str, Any]) -> dict[str, Any]:
    from ..tokens import usage_counts

    return usage_counts(message.get("usage"))  # numbers only: a hostile file's usage adds up


def is_overflow_message(text: str | None, provider: str | None = None) -> bool:
    """True when an error text is one of the providers' context-overflow wordings."""
    if not text or _NOT_OVERFLOW.search(text):
        return False
    if _OVERFLOW.search(text):
        return True
    return provider == "cerebras" and bool(_CEREBRAS_NO_BODY.search(text))


def is_context_overflow(message: dict[str, Any], context_window: int | None = None) -> bool:
    """Did this assistant reply overflow the context window? (Pi's isContextOverflow.)

    1. ``stopReason == "error"`` with an overflow error text (throttling texts excluded);
    2. silent overflow: ``stopReason == "stop"`` and ``input + cacheRead > context_window``;
    3. length-stop overflow: ``stopReason == "length"``, no output, and
       ``input + cacheRead >= 0.99 × context_window``.
    """
    stop = message.get("stopReason")
    if stop == "error" and is_overflow_message(message.get("errorMessage"), message.get("provider")):
        return True
    if context_window:
        usage = _usage(message)
        used = (usage.get("input") or 0) + (usage.get("cacheRead") or 0)
        if stop == "stop" and used > context_window:
            return True
        if stop == "length" and not usage.get("output") and used >= context_window * 0.99:
            return True
    return False


def is_recoverable_length(message: dict[str, Any], desired_max_output: int | None) -> bool:
    """A length stop below the intended output limit (context pressure): compact and retry."""
    if message.get("stopReason") != "length" or not desired_max_output or desired_max_output <= 0:
        return False
    return (_usage(message).get("output") or 0) < desired_max_output


def is_retryable_error(message: dict[str, Any] | str | None) -> bool:
    """A transient failure worth retrying: an error reply (or error text) that is neither an
    overflow nor an account limit, and names overload / rate limit / 5xx / a network error."""
    if isinstance(message, dict):
        if message.get("stopReason") != "error":
            return False
        text = message.get("errorMessage")
        provider = message.get("provider")
    else:
        text, provider = message, None
    if not text or is_overflow_message(text, provider) or _QUOTA.search(text):
        return False
    return bool(_TRANSIENT.search(text))


def unwrap_exception(exc: BaseException) -> BaseException:
    """The provider error behind litellm's mid-stream wrapper (``MidStreamFallbackError``)."""
    seen = 0
    while seen < 5:
        original = getattr(exc, "original_exception", None)
        if type(exc).__name__ == "MidStreamFallbackError" and isinstance(original, BaseException):
            exc = original
            seen += 1
            continue
        break
    return exc


def _type_names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def one_line(text: str, limit: int = 2000) -> str:
    """An error text as one line: a trailing traceback dropped, whitespace runs (newlines
    included) collapsed, at most ``limit`` characters."""
    text = " ".join(_TRACEBACK.sub("", text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_message_of(exc: BaseException) -> str:
    """A one-line message for an exception (its text, else its type name), never a
    traceback: this is what a session stores as ``errorMessage``."""
    exc = unwrap_exception(exc)
    return one_line(str(exc)) or type(exc).__name__


def classify_exception(exc: BaseException) -> ErrorKind:
    """``"overflow"``, ``"transient"`` or ``"fatal"`` for an exception raised by a model call.

    litellm's ``ContextWindowExceededError`` (or a 400 with an overflow wording) is an
    overflow; authentication and configuration errors (``AuthenticationError``,
    ``BadRequestError``, ``NotFoundError`` …, or a text about a missing or invalid API key)
    are fatal; rate limits, 5xx, service unavailable, connection errors and timeouts are
    transient (unless the text says a quota or budget is exhausted); other errors are
    classified by their text, else fatal.
    """
    exc = unwrap_exception(exc)
    names = _type_names(exc)
    text = _TRACEBACK.sub("", str(exc))
    if names & _OVERFLOW_TYPES:
        return "overflow"
    if names & _FATAL_TYPES:
        return "overflow" if is_overflow_message(text) else "fatal"
    if _CONFIG.search(text) and not _TRANSIENT_WORDING.search(text):
        return "fatal"
    if names & _TRANSIENT_TYPES:
        return "fatal" if _QUOTA.search(text) else "transient"
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and (status == 429 or 500 <= status < 600):
        return "fatal" if _QUOTA.search(text) else "transient"
    if is_overflow_message(text):
        return "overflow"
    if is_retryable_error(text):
        return "transient"
    return "fatal"


@dataclass
class RetryPolicy:
    """Retries of transient errors: ``base_delay × 2^(attempt−1)`` seconds, capped.

    ``sleep`` is injectable (tests pass a recorder); when None the session waits on its
    abort event, so an abort cuts the wait short.
    """

    max_retries: int = 3
    base_delay: float = 2.0
    max_delay: float = 60.0
    enabled: bool = True
    sleep: Callable[[float], Any] | None = field(default=None, repr=False, compare=False)

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        return min(self.base_delay * 2 ** max(0, attempt - 1), self.max_delay)

    def wait(self, seconds: float, abort: Any = None) -> bool:
        """Sleep ``seconds``; False when ``abort`` (a threading.Event) was set meanwhile."""
        if self.sleep is not None:
            self.sleep(seconds)
            return not (abort is not None and abort.is_set())
        if abort is not None:
            return not abort.wait(seconds)
        time.sleep(seconds)
        return True
