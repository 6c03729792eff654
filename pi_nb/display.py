"""The display hook: how core objects get an HTML rendering without importing the notebook.

Core classes (:class:`~pi_nb.session.tree.SessionTree`, :class:`~pi_nb.projection.Projection`,
the agent's ``Session`` and ``RunResult``) implement ``_repr_html_`` as ``return to_html(self)``.
The renderers themselves live in the notebook layer (:mod:`pi_nb.notebook.html`), which fills
:data:`html_renderers` when it is imported — and ``import pi_nb`` imports it, so a notebook
always has them. Keeping only this registry in the core is what lets the core never import
the notebook layer (the layers are checked by ``lint-imports``, see pyproject.toml).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["html_renderers", "register_html", "to_html"]

#: Class → function returning the object's HTML. Looked up along the object's MRO, so a
#: subclass uses its base's renderer unless it registers its own.
html_renderers: dict[type, Callable[[Any], str]] = {}


def register_html(cls: type, renderer: Callable[[Any], str]) -> None:
    """Use ``renderer(obj)`` as the HTML of every ``cls`` instance (replaces an earlier one)."""
    html_renderers[cls] = renderer


def to_html(obj: Any) -> str | None:
    """The registered HTML of ``obj``, or None when no renderer is registered for its class.

    None is IPython's "no HTML representation": the notebook then shows the plain ``repr``,
    so a missing renderer is visible as a text output rather than an empty cell.
    """
    for cls in type(obj).__mro__:
        renderer = html_renderers.get(cls)
        if renderer is not None:
            return renderer(obj)
    return None
