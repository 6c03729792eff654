"""The notebook layer: magics, the session explorer widget, graphs, frames, plots, diffs.

The top layer: nothing below imports it. Importing it registers the HTML renderers of the
core objects (:mod:`.html` fills :mod:`pi_nb.display`). The submodules import their heavy
dependency (pandas, matplotlib, networkx) inside the functions that need it; only the widget
module imports anywidget/ipywidgets at the top, so ``SessionExplorer`` and ``explore``
resolve on first use. The magics (IPython) load with ``%load_ext pi_nb``.
"""

from __future__ import annotations

from ..lazy import lazy_getattr
from . import html  # registers the core objects' HTML renderers
from .diff import ProjectionDiff, diff_projection, latest_compaction_diff
from .folders import run_folder
from .frames import context_frame, entries_frame, usage_frame
from .graph import to_networkx, tree_layout
from .plots import plot_tree, plot_usage

# Heavy at import (anywidget, ipywidgets): resolved on first use.
_LAZY = {
    "SessionExplorer": "pi_nb.notebook.widget",
    "explore": "pi_nb.notebook.widget",
}

__all__ = [
    "ProjectionDiff",
    "SessionExplorer",
    "context_frame",
    "diff_projection",
    "entries_frame",
    "explore",
    "html",
    "latest_compaction_diff",
    "plot_tree",
    "plot_usage",
    "run_folder",
    "to_networkx",
    "tree_layout",
    "usage_frame",
]


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
