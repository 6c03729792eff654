"""One model call over litellm, returned as a Pi assistant message.

litellm is imported on the first call only (it costs seconds), with its bundled price and
context-window table (no network; the environment variable that asks for it is set only
while the import runs). The embedded offline models (`pinb/...`) are registered at the
same moment.

Extra call options (a session's ``llm_kwargs``) are merged with pi_nb's own arguments by
:func:`call_options`, the one rule for every call (agent replies and summaries):

- an option the user set explicitly wins over pi_nb's value (``stream``, ``temperature`` …);
- ``max_tokens`` is a cap from both sides: the smaller one applies (a summary keeps its
  window-fitted budget below a larger user cap; a smaller user cap caps summaries too — use
  ``Session(max_tokens=…)`` to cap only the agent's replies);
- the arguments pi_nb must control (:data:`RESERVED_OPTIONS`: ``model``, ``messages``,
  ``tools`` …) cannot be set there: :class:`ModelConfigError`.

An OpenAI-compatible server (Ollama, vLLM, llama.cpp server, LM Studio) is reached with the
option ``api_base`` (``http://127.0.0.1:8080/v1``). The rules for such an endpoint:

- the model name: :func:`served_model` — a bare name (``smollm2``) or a served id with a
  slash that is not a litellm provider (``Qwen/Qwen2.5-7B``) goes through litellm's
  OpenAI-compatible route (``openai/smollm2``); an explicit provider prefix is kept;
- the key: ``OPENAI_API_KEY`` from the environment when it is set (it is sent to that
  server); otherwise a placeholder is passed in the call only (local servers need none,
  litellm's route insists on one). pi_nb never writes the key or the endpoint anywhere;
- the window: :func:`endpoint_window` — the server's own figure when it reports one,
  else litellm's table, else a default with a one-line note saying so.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .entries import Message, empty_usage, js_numbers

_LOCK = threading.Lock()
_LITELLM: Any = None

#: Call arguments that pi_nb passes itself and a user's ``llm_kwargs`` may not replace.
RESERVED_OPTIONS = ("model", "messages", "tools", "on_text", "should_abort")
#: Options with which the provider's key need not be in the environment: credentials or an
#: endpoint of the caller's, or litellm's offline ``mock_response``.
_NO_KEY_NEEDED = (
    "api_key",
    "api_base",
    "base_url",
    "azure_ad_token",
    "aws_access_key_id",
    "mock_response",
)


class ModelConfigError(ValueError):
    """The model cannot be called as configured (a missing key, a reserved option …).

    Raised before anything is sent or written; the message is one line.
    """


def litellm_module() -> Any:
    """Import litellm offline-safe (local cost map, quiet) and register our providers."""
    global _LITELLM
    if _LITELLM is not None:
        return _LITELLM
    with _LOCK:
        if _LITELLM is None:
            from .models import ensure_litellm, register

            litellm = ensure_litellm()
            litellm.suppress_debug_info = True
            litellm.telemetry = False
            register()
            _LITELLM = litellm
    return _LITELLM


def check_call_options(llm_kwargs: Mapping[str, Any]) -> None:
    """Refuse ``llm_kwargs`` that set an argument pi_nb controls (one-line error)."""
    clash = [key for key in RESERVED_OPTIONS if key in llm_kwargs]
    if clash:
        raise ModelConfigError(
            f"llm_kwargs cannot set {', '.join(clash)}: pi_nb passes "
            f"{'it' if len(clash) == 1 else 'them'} itself (choose the model with model=, "
            "the tools with tools=)"
        )


def call_options(llm_kwargs: Mapping[str, Any] | None, **own: Any) -> dict[str, Any]:
    """pi_nb's own keyword arguments for :func:`complete` merged with a user's ``llm_kwargs``.

    The user's explicit options win; for ``max_tokens`` the smaller cap applies; reserved
    arguments in ``llm_kwargs`` raise :class:`ModelConfigError` (see the module docstring).
    """
    user = dict(llm_kwargs or {})
    check_call_options(user)
    merged = {**own, **user}
    caps = [v for v in (own.get("max_tokens"), user.get("max_tokens")) if v is not None]
    if caps:
        merged["max_tokens"] = min(caps)
    return merged


def missing_environment(model: str, llm_kwargs: Mapping[str, Any] | None = None) -> list[str]:
    """The environment variables a hosted model needs but that are not set (offline check).

    Asks ``litellm.validate_environment`` (it only reads the environment). Only API-key
    variables count — a missing base URL or cloud credential (Ollama, Azure, Bedrock,
    Vertex) may have a default or come from elsewhere, and is left to the provider. Empty
    for the embedded ``pinb/…`` models and when ``llm_kwargs`` name credentials or an
    endpoint (``api_key``, ``api_base`` …) or ask for ``mock_response``.
    """
    if model.startswith("pinb/") or any(k in (llm_kwargs or {}) for k in _NO_KEY_NEEDED):
        return []
    litellm = litellm_module()
    if getattr(litellm, "api_key", None):
        return []
    try:
        found = litellm.validate_environment(model)
    except Exception:  # an unknown provider: let the call report it
        return []
    missing = [str(k) for k in found.get("missing_keys") or []]
    if not missing or not all(k.endswith("_API_KEY") for k in missing):
        return []
    provider = split_model(model)[0]
    if getattr(litellm, f"{provider}_key", None):  # e.g. litellm.openai_key set in code
        return []
    return missing


def check_environment(model: str, llm_kwargs: Mapping[str, Any] | None = None) -> None:
    """Raise :class:`ModelConfigError` (one line naming the variable) when the model's API
    key is not in the environment — before anything is sent."""
    missing = missing_environment(model, llm_kwargs)
    if missing:
        names = " or ".join(missing)
        raise ModelConfigError(
            f"{model} needs an API key: set {names} in the environment (or pass api_key=…)"
        )


def split_model(model: str) -> tuple[str, str]:
    """("provider", "model id") for a litellm model name, without importing litellm."""
    if "/" in model:
        provider, _, name = model.partition("/")
        return provider, name
    if model.startswith(("claude",)):
        return "anthropic", model
    if model.startswith(("gemini",)):
        return "gemini", model
    return "openai", model


#: The key sent to an ``api_base`` server on litellm's ``openai/`` route when
#: ``OPENAI_API_KEY`` is not set: local servers accept any key, litellm requires one.
PLACEHOLDER_KEY = "sk-no-key-required"


def served_model(model: str, api_base: str | None) -> str:
    """The litellm name for ``model`` served at ``api_base`` (unchanged without one).

    A bare name becomes ``openai/<name>``; a name whose first segment is a litellm provider
    (``openai/…``, ``ollama/…``, ``hosted_vllm/…``) or ``pinb/…`` is kept; any other slash
    is part of the served id (``Qwen/Qwen2.5-7B`` → ``openai/Qwen/Qwen2.5-7B``).
    """
    if not api_base or not model:
        return model
    if "/" in model:
        prefix = model.split("/", 1)[0]
        if prefix == "pinb" or prefix in _providers():
            return model
    return f"openai/{model}"


def _providers() -> set[str]:
    litellm = litellm_module()
    return {getattr(p, "value", p) for p in getattr(litellm, "provider_list", [])}


def _endpoint_key(model: str, kwargs: dict[str, Any]) -> None:
    """Add the placeholder key for an ``api_base`` call on the ``openai/`` route when no
    key is configured (the call's own kwargs only: nothing is stored)."""
    if not kwargs.get("api_base") or kwargs.get("api_key") or split_model(model)[0] != "openai":
        return
    litellm = litellm_module()
    if os.environ.get("OPENAI_API_KEY") or getattr(litellm, "api_key", None) or getattr(
        litellm, "openai_key", None
    ):
        return
    kwargs["api_key"] = PLACEHOLDER_KEY


def served_window(api_base: str, model: str, timeout: float = 2.0) -> int | None:
    """The context window the server at ``api_base`` reports for ``model``, or None.

    Reads ``GET {api_base}/models`` (bounded by ``timeout``): vLLM's ``max_model_len``,
    llama.cpp's ``meta.n_ctx`` / ``meta.n_ctx_train``, or a ``context_length`` /
    ``max_context_length`` field. llama-cpp-python's and Ollama's ``/v1/models`` report none.
    """
    import urllib.request

    served_id = split_model(model)[1]
    url = api_base.rstrip("/") + "/models"
    headers = {"Authorization": f"Bearer {os.environ.get('OPENAI_API_KEY') or PLACEHOLDER_KEY}"}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as r:
            listing = json.loads(r.read().decode("utf-8"))
    except Exception:  # unreachable or not JSON: the window stays unknown
        return None
    items = listing.get("data") if isinstance(listing, dict) else None
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or item.get("id") not in (served_id, model):
            continue
        meta = item.get("meta") if isinstance(item.get("meta"), dict) else {}
        for value in (
            item.get("max_model_len"),
            meta.get("n_ctx"),
            meta.get("n_ctx_train"),
            item.get("context_length"),
            item.get("max_context_length"),
        ):
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


def endpoint_window(model: str, api_base: str, default: int = 128000) -> tuple[int, str | None]:
    """(window, note) for ``model`` served at ``api_base``: the server's figure, else
    litellm's table, else ``default`` — the note (one line) says a default is assumed."""
    reported = served_window(api_base, model)
    if reported is not None:
        return reported, None
    info = model_info(model)
    known = info.get("max_input_tokens") or info.get("max_tokens")
    if known:
        return int(known), None
    return default, (
        f"the context window of {model} is unknown (the server does not report it); "
        f"assuming {default:,} tokens — set the window explicitly (--window / window=)"
    )


class Endpoint:
    """A picklable completion function that calls :func:`complete` at ``api_base``
    (for ``compare_strategies(completion=…)``, which may run in a process pool)."""

    def __init__(self, api_base: str) -> None:
        self.api_base = api_base

    def __call__(self, model: str, messages: Sequence[dict[str, Any]], **options: Any) -> Message:
        return complete(served_model(model, self.api_base), messages, **{**options, "api_base": self.api_base})

    def __repr__(self) -> str:
        # A cache key names the endpoint by a digest: the URL itself is not written.
        import hashlib

        return f"Endpoint({hashlib.sha256(self.api_base.encode()).hexdigest()[:12]})"


def model_info(model: str) -> dict[str, Any]:
    """litellm's model info (context window, output limit, prices); {} when unknown."""
    litellm = litellm_module()
    try:
        return dict(litellm.get_model_info(model))
    except Exception:
        return {}


def context_window(model: str, default: int = 128000) -> int:
    """The model's input window from litellm's bundled table (default when unknown)."""
    info = model_info(model)
    return int(info.get("max_input_tokens") or info.get("max_tokens") or default)


def output_limit(model: str) -> int | None:
    info = model_info(model)
    value = info.get("max_output_tokens") or info.get("max_tokens")
    return int(value) if value else None


def _rate(info: Mapping[str, Any], key: str) -> float | None:
    value = info.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def price_usage(
    model: str, usage: Mapping[str, Any] | None
) -> tuple[dict[str, float] | None, str | None]:
    """Pi's ``usage.cost`` dict (``input``, ``output``, ``cacheRead``, ``cacheWrite``,
    ``total`` in USD) of a usage record made with ``model``, from litellm's bundled table,
    and a one-line note.

    The one pricing rule of pi_nb: cached input (``cacheRead``) at the model's cache-read
    rate and cache writes at its cache-creation rate when the table has them (else at the
    input rate, and the note says so). ``(None, note naming the model)`` when the table has
    no price for ``model``: the caller shows "unknown" (NaN), never a made-up 0.0.
    """
    usage = usage or {}
    counts = {k: int(usage.get(k, 0) or 0) for k in ("input", "output", "cacheRead", "cacheWrite")}
    info = model_info(model)
    per_in, per_out = _rate(info, "input_cost_per_token"), _rate(info, "output_cost_per_token")
    if per_in is None or per_out is None:
        return None, f"no price for {model} in litellm's table: cost unknown (NaN)"
    notes = []
    per_read = _rate(info, "cache_read_input_token_cost")
    if per_read is None:
        per_read = per_in
        if counts["cacheRead"]:
            notes.append(f"no cache-read price for {model}: cached input priced at the input rate")
    per_write = _rate(info, "cache_creation_input_token_cost")
    if per_write is None:
        per_write = per_in
        if counts["cacheWrite"]:
            notes.append(f"no cache-write price for {model}: cache writes priced at the input rate")
    cost = {
        "input": counts["input"] * per_in,
        "output": counts["output"] * per_out,
        "cacheRead": counts["cacheRead"] * per_read,
        "cacheWrite": counts["cacheWrite"] * per_write,
    }
    cost["total"] = sum(cost.values())
    return cost, "; ".join(notes) or None


def usage_cost(model: str, usage: Mapping[str, Any] | None) -> tuple[float, str | None]:
    """(cost in USD, note) of a Pi usage record (``input``, ``output``, ``cacheRead``,
    ``cacheWrite`` token counts) if made with ``model``: :func:`price_usage`'s total.

    The cost is NaN, with a note naming the model, when litellm has no price for it; the
    note is None when every count was priced at its own rate.
    """
    cost, note = price_usage(model, usage)
    return (math.nan if cost is None else cost["total"]), note


def reply_price(message: Mapping[str, Any]) -> tuple[dict[str, float] | None, str | None]:
    """(Pi's ``usage.cost`` dict, note) of an assistant reply; None for the dict when the
    price is unknown.

    A cost recorded above zero is the one priced when the call was made. A recorded 0 is
    what Pi (and :func:`complete`) write for a model without a price, so a reply that used
    tokens is priced again with :func:`price_usage` as its ``provider/model``.
    """
    usage = message.get("usage") if isinstance(message.get("usage"), Mapping) else {}
    cost = usage.get("cost")
    recorded = cost.get("total") if isinstance(cost, Mapping) else cost
    if isinstance(recorded, (int, float)) and not isinstance(recorded, bool) and recorded > 0:
        if isinstance(cost, Mapping):
            return {k: float(v) for k, v in cost.items() if isinstance(v, (int, float))}, None
        return {"total": float(recorded)}, None
    keys = ("input", "output", "cacheRead", "cacheWrite")
    if not any(isinstance(usage.get(k), (int, float)) and usage.get(k) for k in keys):
        return {**{k: 0.0 for k in keys}, "total": 0.0}, None  # no tokens: nothing spent
    provider, model = message.get("provider"), message.get("model")
    if not model:
        return None, "a reply names no model: its cost is unknown (NaN)"
    return price_usage(f"{provider}/{model}" if provider else str(model), usage)


def reply_cost(message: Mapping[str, Any]) -> tuple[float, str | None]:
    """(cost in USD, note) of an assistant reply, for whatever shows or sums costs:
    :func:`reply_price`'s total, NaN with the note when the price is unknown (never a
    made-up 0.0)."""
    cost, note = reply_price(message)
    return (math.nan if cost is None else cost.get("total", math.nan)), note


def _usage_from(raw: Any, model: str, response: Any = None) -> dict[str, Any]:
    usage = empty_usage()
    if raw is None:
        return usage
    get = raw.get if isinstance(raw, dict) else lambda k, d=None: getattr(raw, k, d)
    prompt = int(get("prompt_tokens", 0) or 0)
    completion = int(get("completion_tokens", 0) or 0)
    details = get("prompt_tokens_details", None)
    cached = 0
    if details is not None:
        cached = int((details.get("cached_tokens") if isinstance(details, dict) else getattr(details, "cached_tokens", 0)) or 0)
    cache_write = int(get("cache_creation_input_tokens", 0) or 0)
    usage["input"] = max(prompt - cached, 0)
    usage["output"] = completion
    usage["cacheRead"] = cached
    usage["cacheWrite"] = cache_write
    usage["totalTokens"] = prompt + completion + cache_write
    # An unknown price keeps Pi's zeros: the session file stays what Pi writes (Pi records 0
    # for a model without a price; NaN is not JSON). Whatever shows or sums a cost prices
    # the usage again with usage_cost, which says "unknown".
    cost, _ = price_usage(model, usage)
    if cost is not None:
        usage["cost"] = js_numbers(cost)
    return usage


def _warn_if_estimated(model: str, response: Any) -> bool:
    """Warn (and return True) when a streamed reply's usage is litellm's tokenizer estimate,
    not the provider's.

    Servers that ignore ``stream_options.include_usage`` (llama-cpp-python's) stream no
    usage; litellm then counts the tokens itself. The figures are kept (the compaction
    trigger needs a figure) but the user is told they are not the server's.
    """
    chunks = getattr(response, "chunks", None)
    if not isinstance(chunks, list) or not chunks:
        return False
    if any(getattr(c, "usage", None) is not None for c in chunks):
        return False
    import warnings

    warnings.warn(
        f"{model}: the server sent no usage with the streamed reply, so the usage recorded is "
        "litellm's tokenizer estimate (stream=False records the server's own figures)",
        UserWarning,
        stacklevel=3,
    )
    return True


def _parse_arguments(text: str) -> tuple[dict[str, Any], str | None]:
    if not text:
        return {}, None
    try:
        value = json.loads(text)
    except ValueError as exc:
        return {}, f"tool call arguments are not valid JSON: {exc}"
    if not isinstance(value, dict):
        return {}, "tool call arguments are not a JSON object"
    return value, None


_STOP_REASONS = {"stop": "stop", "length": "length", "tool_calls": "toolUse", "function_call": "toolUse"}


def _no_choices_reply(
    provider: str, model_id: str, response: Any, model: str, started: float
) -> Message:
    """The assistant message of a provider reply that carried no choices: an error."""
    return {
        "role": "assistant",
        "content": [],
        "api": "litellm",
        "provider": provider,
        "model": model_id,
        "usage": _usage_from(getattr(response, "usage", None), model),
        "stopReason": "error",
        "errorMessage": "the model returned a reply without choices (no text, no tool call)",
        "timestamp": int(time.time() * 1000),
        "durationMs": int((time.time() - started) * 1000),
    }


def complete(
    model: str,
    messages: Sequence[dict[str, Any]],
    *,
    tools: Sequence[dict[str, Any]] | None = None,
    max_tokens: int | None = None,
    stream: bool = True,
    on_text: Callable[[str], None] | None = None,
    should_abort: Callable[[], bool] | None = None,
    **extra: Any,
) -> Message:
    """Call a model through litellm and return a Pi assistant message.

    Streaming by default: ``on_text`` receives text deltas as they arrive. Provider errors
    propagate as litellm's exception types (the caller decides about retries and
    overflow). ``should_abort`` is polled between chunks; an abort returns the partial
    reply with ``stopReason: "aborted"``.
    """
    litellm = litellm_module()
    provider, model_id = split_model(model)
    kwargs: dict[str, Any] = {"model": model, "messages": list(messages), **extra}
    _endpoint_key(model, kwargs)
    if tools:
        kwargs["tools"] = list(tools)
    if max_tokens is not None:
        kwargs["max_tokens"] = max_tokens
    started = time.time()
    text_parts: list[str] = []
    thinking_parts: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish = None
    raw_usage = None
    aborted = False
    estimated = False
    if stream:
        kwargs["stream"] = True
        kwargs.setdefault("stream_options", {"include_usage": True})
        response = litellm.completion(**kwargs)
        try:
            for chunk in response:
                if should_abort is not None and should_abort():
                    aborted = True
                    break
                raw_usage = getattr(chunk, "usage", None) or raw_usage
                for choice in getattr(chunk, "choices", None) or []:
                    delta = getattr(choice, "delta", None)
                    if getattr(choice, "finish_reason", None):
                        finish = choice.finish_reason
                    if delta is None:
                        continue
                    reasoning = getattr(delta, "reasoning_content", None)
                    if reasoning:
                        thinking_parts.append(reasoning)
                    if getattr(delta, "content", None):
                        text_parts.append(delta.content)
                        if on_text is not None:
                            on_text(delta.content)
                    for call in getattr(delta, "tool_calls", None) or []:
                        index = getattr(call, "index", None)
                        index = len(calls) if index is None else index
                        slot = calls.setdefault(index, {"id": None, "name": "", "arguments": ""})
                        if getattr(call, "id", None):
                            slot["id"] = call.id
                        function = getattr(call, "function", None)
                        if function is not None:
                            if getattr(function, "name", None):
                                slot["name"] = function.name
                            if getattr(function, "arguments", None):
                                slot["arguments"] += function.arguments
        finally:
            close = getattr(response, "close", None)
            if aborted and callable(close):
                with contextlib.suppress(Exception):
                    close()
        if raw_usage is not None and not aborted and "mock_response" not in extra:
            estimated = _warn_if_estimated(model, response)
    else:
        response = litellm.completion(**kwargs)
        choices = getattr(response, "choices", None) or []
        if not choices:  # a reply without choices is a failed call, not an IndexError
            return _no_choices_reply(provider, model_id, response, model, started)
        choice = choices[0]
        finish = choice.finish_reason
        message = choice.message
        if getattr(message, "reasoning_content", None):
            thinking_parts.append(message.reasoning_content)
        if message.content:
            text_parts.append(message.content)
            if on_text is not None:
                on_text(message.content)
        for index, call in enumerate(getattr(message, "tool_calls", None) or []):
            calls[index] = {
                "id": call.id,
                "name": call.function.name,
                "arguments": call.function.arguments or "",
            }
        raw_usage = getattr(response, "usage", None)
    content: list[dict[str, Any]] = []
    if thinking_parts:
        content.append({"type": "thinking", "thinking": "".join(thinking_parts)})
    if text_parts:
        content.append({"type": "text", "text": "".join(text_parts)})
    for index in sorted(calls):
        slot = calls[index]
        arguments, error = _parse_arguments(slot["arguments"])
        block: dict[str, Any] = {
            "type": "toolCall",
            "id": slot["id"] or f"call_{index}_{int(started * 1000)}",
            "name": slot["name"],
            "arguments": arguments,
        }
        if error:
            block["argumentsError"] = error
        content.append(block)
    stop = "aborted" if aborted else _STOP_REASONS.get(finish or "stop", "stop")
    usage = _usage_from(raw_usage, model)
    if estimated and stop == "length" and max_tokens:
        # The server stopped at our cap, counted in its own tokens: that is the output.
        # Another tokenizer's smaller count would read as a stop under context pressure.
        usage["totalTokens"] += max_tokens - usage["output"]
        usage["output"] = max_tokens
    if stop == "stop" and any(b["type"] == "toolCall" for b in content):
        stop = "toolUse"
    reply: Message = {
        "role": "assistant",
        "content": content,
        "api": "litellm",
        "provider": provider,
        "model": model_id,
        "usage": usage,
        "stopReason": stop,
        "timestamp": int(time.time() * 1000),
    }
    reply["durationMs"] = int((time.time() - started) * 1000)
    return reply
