"""pi_nb — drive and study LLM agents with Pi-style context management, in Jupyter.

Heavy dependencies (litellm, pandas, matplotlib, widgets) are imported on first use only:
``import pi_nb`` stays instant. Public names resolve lazily.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it
_LAZY = {
    "SessionTree": "pi_nb.session.tree",
    "TreeNode": "pi_nb.session.tree",
    "SessionError": "pi_nb.session.jsonl",
    "NotASessionError": "pi_nb.session.jsonl",
    "EntryNotFoundError": "pi_nb.session.tree",
    "ContextEditError": "pi_nb.session.tree",
    "list_sessions": "pi_nb.session.listing",
    "load_file": "pi_nb.session.jsonl",
    "SessionLockedError": "pi_nb.session.lock",
    "redact": "pi_nb.redact",
    "redact_obj": "pi_nb.redact",
    "Projection": "pi_nb.projection",
    "build_session_projection": "pi_nb.projection",
    "convert_to_llm": "pi_nb.messages",
    "normalize": "pi_nb.messages",
    "to_request": "pi_nb.messages",
    "estimate_tokens": "pi_nb.tokens",
    "estimate_context_tokens": "pi_nb.tokens",
    "estimate_projected_context_tokens": "pi_nb.tokens",
    "count_exact": "pi_nb.tokens",
    "should_compact": "pi_nb.tokens",
    "ContextTokens": "pi_nb.tokens",
    # the agent
    "Session": "pi_nb.agent",
    "RunResult": "pi_nb.agent",
    "Tool": "pi_nb.agent",
    "tool_from_function": "pi_nb.agent",
    "Hooks": "pi_nb.hooks",
    # compaction
    "CompactionSettings": "pi_nb.compaction",
    "PromptSet": "pi_nb.compaction",
    "DEFAULT_PROMPTS": "pi_nb.compaction",
    "compact": "pi_nb.compaction",
    "preview_compaction": "pi_nb.compaction",
    "prepare_compaction": "pi_nb.compaction",
    "navigate": "pi_nb.compaction",
    # notebook views (heavy libraries load when these are called)
    "to_networkx": "pi_nb.notebook",
    "plot_tree": "pi_nb.notebook",
    "usage_frame": "pi_nb.notebook",
    "plot_usage": "pi_nb.notebook",
    "context_frame": "pi_nb.notebook",
    "entries_frame": "pi_nb.notebook",
    "diff_projection": "pi_nb.notebook",
    "latest_compaction_diff": "pi_nb.notebook",
    "SessionExplorer": "pi_nb.notebook",
    "explore": "pi_nb.notebook",
    # research
    "compare_strategies": "pi_nb.research",
    "import_transcript": "pi_nb.research",
    "tune": "pi_nb.research",
    "fact_survival": "pi_nb.research",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pi_nb' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext pi_nb`: register the %pi / %%pi magics."""
    from .notebook.magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .notebook.magics import unload_ipython_extension as unload

    unload(ipython)
