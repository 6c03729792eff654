"""The litellm custom provider ``pinb``: ``pinb/scripted`` and ``pinb/smollm2``.

This module imports litellm; it is only imported by :func:`pi_nb.models.register`.

Facts about litellm's custom-provider mechanism this relies on (litellm 1.x):

- Extra keyword arguments of ``litellm.completion`` (``script=…``, ``overflow_at=…``) reach
  the handler unchanged — same objects, not copies — in ``optional_params``, next to the
  OpenAI ones (``tools``, ``max_tokens``, ``temperature``, ``stream_options`` …).
- The model name arrives without the ``pinb/`` prefix.
- Streaming handlers yield ``GenericStreamingChunk`` dicts (``text``, ``tool_use``,
  ``is_finished``, ``finish_reason``, ``usage``, ``index``). The usage of the final chunk
  reaches the caller only as a separate usage chunk when ``stream_options={"include_usage":
  True}`` is passed; ``litellm.stream_chunk_builder`` recovers it in any case.
- An exception raised while a stream is iterated is re-raised as is when it is a 4xx
  (``ContextWindowExceededError``, ``BadRequestError`` …) or a ``Timeout``; anything else —
  including 429 ``RateLimitError`` — arrives wrapped in ``litellm.MidStreamFallbackError``
  (a ``ServiceUnavailableError``) whose ``original_exception`` is the real one: use
  :func:`pi_nb.models.unwrap_error`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from . import ensure_litellm, scripted

litellm = ensure_litellm()  # offline import (bundled model table), environment restored after

from litellm import CustomLLM  # noqa: E402
from litellm.types.utils import Choices, Message, ModelResponse, Usage  # noqa: E402

from .smollm2 import ContextOverflowError, SmolLM2  # noqa: E402

PROVIDER = "pinb"

# Call options of pinb/scripted (everything else in optional_params is OpenAI's).
_SCRIPTED_OPTIONS = ("script", "script_index", "overflow_at", "summarize")


def _fault(kind: str, model: str, message: str) -> Exception:
    """The litellm exception a scripted fault stands for."""
    full = f"{PROVIDER}/{model}: {message}"
    args = {"message": full, "model": model, "llm_provider": PROVIDER}
    if kind == "overflow":
        return litellm.ContextWindowExceededError(**args)
    if kind == "rate_limit":
        return litellm.RateLimitError(**{**args, "message": f"Rate limit exceeded (429): {full}"})
    if kind == "server":
        return litellm.InternalServerError(**{**args, "message": f"Internal server error: {full}"})
    if kind == "unavailable":
        return litellm.ServiceUnavailableError(
            **{**args, "message": f"Service unavailable: {full}"}
        )
    if kind == "timeout":
        return litellm.Timeout(**{**args, "message": f"Request timed out: {full}"})
    if kind == "connection":
        return litellm.APIConnectionError(**{**args, "message": f"Connection error: {full}"})
    if kind == "auth":
        return litellm.AuthenticationError(**args)
    return litellm.BadRequestError(**args)


def _max_tokens(params: Mapping[str, Any]) -> int | None:
    value = params.get("max_tokens") or params.get("max_completion_tokens")
    return int(value) if value else None


def _fill(
    response: ModelResponse,
    model: str,
    text: str,
    tool_calls: list[dict[str, Any]],
    finish_reason: str,
    usage: Mapping[str, int],
) -> ModelResponse:
    message = Message(content=text, role="assistant", tool_calls=tool_calls or None)
    response.choices = [Choices(finish_reason=finish_reason, index=0, message=message)]
    response.model = f"{PROVIDER}/{model}"
    response.usage = Usage(**usage)  # type: ignore[attr-defined]
    return response


class PinbProvider(CustomLLM):
    """litellm handler for the ``pinb/…`` models; one instance serves all of them.

    The SmolLM2 runner is created on first use and cached on this object.
    """

    def __init__(self) -> None:
        super().__init__()
        self._smollm2: SmolLM2 | None = None
        self._lock = threading.Lock()

    @property
    def smollm2(self) -> SmolLM2:
        """The (lazily created) local SmolLM2 runner."""
        with self._lock:
            if self._smollm2 is None:
                self._smollm2 = SmolLM2()
            return self._smollm2

    # -- dispatch ---------------------------------------------------------------------------

    @staticmethod
    def _name(model: str) -> str:
        name = model.split("/", 1)[1] if model.startswith(f"{PROVIDER}/") else model
        if name not in ("scripted", "smollm2"):
            raise litellm.NotFoundError(
                message=f"{PROVIDER}: unknown model {model!r} (known: scripted, smollm2)",
                model=model,
                llm_provider=PROVIDER,
            )
        return name

    def _scripted_plan(
        self, messages: list, optional_params: Mapping[str, Any]
    ) -> scripted.ScriptedReply:
        options = {k: optional_params[k] for k in _SCRIPTED_OPTIONS if k in optional_params}
        try:
            return scripted.plan_reply(
                messages,
                optional_params.get("tools"),
                max_tokens=_max_tokens(optional_params),
                **options,
            )
        except scripted.ScriptError as exc:
            # A configuration mistake: a 400 reaches the caller as is (litellm would wrap
            # anything else as a retryable APIConnectionError with its traceback).
            raise litellm.BadRequestError(
                message=f"{PROVIDER}/scripted: malformed script: {exc}",
                model="scripted",
                llm_provider=PROVIDER,
            ) from None

    def _smollm2_overflow(self, exc: ContextOverflowError) -> Exception:
        return litellm.ContextWindowExceededError(
            message=f"{PROVIDER}/smollm2: {exc}", model="smollm2", llm_provider=PROVIDER
        )

    # -- CustomLLM API ----------------------------------------------------------------------

    def completion(  # type: ignore[override]
        self,
        model: str,
        messages: list,
        model_response: ModelResponse,
        optional_params: dict,
        **kwargs: Any,
    ) -> ModelResponse:
        """Non-streaming call (litellm passes everything by keyword)."""
        name = self._name(model)
        if name == "scripted":
            reply = self._scripted_plan(messages, optional_params)
            if reply.error:
                raise _fault(reply.error, name, reply.error_message)
            if reply.stream_dies_after is not None:
                raise _fault("connection", name, "connection closed before the response ended")
            return _fill(
                model_response,
                name,
                reply.text,
                reply.tool_calls,
                reply.finish_reason,
                reply.usage,
            )
        try:
            text, finish, usage = self.smollm2.complete(messages, **optional_params)
        except ContextOverflowError as exc:
            raise self._smollm2_overflow(exc) from exc
        return _fill(model_response, name, text, [], finish, usage)

    def streaming(  # type: ignore[override]
        self, model: str, messages: list, optional_params: dict, **kwargs: Any
    ) -> Iterator[dict]:
        """Streaming call: returns an iterator of ``GenericStreamingChunk`` dicts.

        The scripted turn is chosen now (a :class:`~pi_nb.models.scripted.Script` advances even
        if the stream is never read); faults are raised on the first iteration, like a
        provider whose error arrives in the response stream.
        """
        name = self._name(model)
        if name == "scripted":
            return self._scripted_stream(name, self._scripted_plan(messages, optional_params))
        return self._smollm2_stream(messages, optional_params)

    def _scripted_stream(self, name: str, reply: scripted.ScriptedReply) -> Iterator[dict]:
        if reply.error:
            raise _fault(reply.error, name, reply.error_message)
        chunks = scripted.stream_chunks(reply)
        if reply.stream_dies_after is None:
            yield from chunks
            return
        # The final (usage) chunk is never delivered: the stream dies before it.
        yield from chunks[: min(reply.stream_dies_after, len(chunks) - 1)]
        raise _fault(
            "connection",
            name,
            f"terminated: stream died after {reply.stream_dies_after} chunks",
        )

    def _smollm2_stream(self, messages: list, optional_params: dict) -> Iterator[dict]:
        try:
            yield from self.smollm2.stream(messages, **optional_params)
        except ContextOverflowError as exc:
            raise self._smollm2_overflow(exc) from exc

    async def acompletion(  # type: ignore[override]
        self, model: str, messages: list, **kwargs: Any
    ) -> ModelResponse:
        """Async call: the scripted model answers inline, SmolLM2 runs in a worker thread."""
        if self._name(model) == "scripted":
            return self.completion(model, messages, **kwargs)
        return await asyncio.to_thread(self.completion, model, messages, **kwargs)

    async def astreaming(  # type: ignore[override]
        self, model: str, messages: list, **kwargs: Any
    ) -> AsyncIterator[dict]:
        """Async stream: SmolLM2 chunks are produced in a worker thread, one at a time."""
        iterator = self.streaming(model, messages, **kwargs)
        if self._name(model) == "scripted":
            for chunk in iterator:
                yield chunk
            return
        done = object()
        while True:
            chunk = await asyncio.to_thread(next, iterator, done)
            if chunk is done:
                return
            yield chunk
