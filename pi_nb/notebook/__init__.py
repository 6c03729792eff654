"""The notebook layer: magics, the session explorer widget, graphs, frames, plots, diffs.

Nothing here is imported by the core; each submodule imports its heavy dependency
(pandas, matplotlib, networkx, anywidget) inside the functions that need it.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "to_networkx": "pi_nb.notebook.graph",
    "tree_layout": "pi_nb.notebook.graph",
    "plot_tree": "pi_nb.notebook.plots",
    "plot_usage": "pi_nb.notebook.plots",
    "usage_frame": "pi_nb.notebook.frames",
    "entries_frame": "pi_nb.notebook.frames",
    "context_frame": "pi_nb.notebook.frames",
    "diff_projection": "pi_nb.notebook.diff",
    "latest_compaction_diff": "pi_nb.notebook.diff",
    "ProjectionDiff": "pi_nb.notebook.diff",
    "SessionExplorer": "pi_nb.notebook.widget",
    "explore": "pi_nb.notebook.widget",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pi_nb.notebook' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
