"""pi_nb — drive and study LLM agents with Pi-style context management, in Jupyter.

``import pi_nb`` imports every layer except the widget, so a broken module fails here, at
import, not at the first attribute use. It still imports none of the heavy libraries
(litellm, pandas, matplotlib, networkx, anywidget): the modules that need them import them
inside the functions that use them. Only the session explorer widget, whose module imports
anywidget and ipywidgets at the top, is resolved on first use.

The layers, each importing only those below it (checked by ``lint-imports``, see
pyproject.toml): notebook / cli → research → policies → agent → compaction → hooks, llm →
models → render → session → tokens → projection → messages, redact → display, entries, lazy.
Importing :mod:`pi_nb.notebook` here also registers the HTML renderers of the core objects
(:mod:`pi_nb.display`), so their ``_repr_html_`` work in a notebook.
"""

from __future__ import annotations

from typing import Any

from .agent import RunResult, Session, Tool, tool_from_function
from .compaction import (
    DEFAULT_PROMPTS,
    CompactionSettings,
    PromptSet,
    compact,
    navigate,
    prepare_compaction,
    preview_compaction,
)
from .hooks import Hooks
from .lazy import lazy_getattr
from .messages import convert_to_llm, normalize, to_request
from .notebook import (
    context_frame,
    diff_projection,
    entries_frame,
    latest_compaction_diff,
    plot_tree,
    plot_usage,
    to_networkx,
    usage_frame,
)
from .projection import Projection, build_session_projection
from .redact import redact, redact_obj
from .research import compare_strategies, fact_survival, import_transcript, tune
from .session import (
    ContextEditError,
    EntryNotFoundError,
    NotASessionError,
    SessionError,
    SessionLockedError,
    SessionTree,
    TreeNode,
    list_sessions,
    load_file,
)
from .tokens import (
    ContextTokens,
    count_exact,
    estimate_context_tokens,
    estimate_projected_context_tokens,
    estimate_tokens,
    should_compact,
)

__version__ = "0.1.0"

# Heavy at import (anywidget, ipywidgets): resolved on first use.
_LAZY = {
    "SessionExplorer": "pi_nb.notebook.widget",
    "explore": "pi_nb.notebook.widget",
}

__all__ = [
    "DEFAULT_PROMPTS",
    "CompactionSettings",
    "ContextEditError",
    "ContextTokens",
    "EntryNotFoundError",
    "Hooks",
    "NotASessionError",
    "Projection",
    "PromptSet",
    "RunResult",
    "Session",
    "SessionError",
    "SessionExplorer",
    "SessionLockedError",
    "SessionTree",
    "Tool",
    "TreeNode",
    "build_session_projection",
    "compact",
    "compare_strategies",
    "context_frame",
    "convert_to_llm",
    "count_exact",
    "diff_projection",
    "entries_frame",
    "estimate_context_tokens",
    "estimate_projected_context_tokens",
    "estimate_tokens",
    "explore",
    "fact_survival",
    "import_transcript",
    "latest_compaction_diff",
    "list_sessions",
    "load_file",
    "load_ipython_extension",
    "navigate",
    "normalize",
    "plot_tree",
    "plot_usage",
    "prepare_compaction",
    "preview_compaction",
    "redact",
    "redact_obj",
    "should_compact",
    "to_networkx",
    "to_request",
    "tool_from_function",
    "tune",
    "unload_ipython_extension",
    "usage_frame",
]


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext pi_nb`: register the %pi / %%pi magics."""
    from .notebook.magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """`%unload_ext pi_nb`: remove the magics again."""
    from .notebook.magics import unload_ipython_extension as unload

    unload(ipython)
