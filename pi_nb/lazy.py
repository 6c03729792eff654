"""Names a package exports but imports on first use (PEP 562 module ``__getattr__``).

Both :mod:`pi_nb` and :mod:`pi_nb.notebook` resolve the session explorer widget this way,
because its module imports anywidget and ipywidgets at the top. Everything else they export
is imported eagerly, so a broken module still fails at ``import pi_nb``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

__all__ = ["lazy_getattr"]


def lazy_getattr(
    module_name: str, table: Mapping[str, str], namespace: MutableMapping[str, Any]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``module_name`` that imports the names of ``table`` on use.

    ``table`` maps each lazy name to the module that defines it; ``namespace`` is the
    package's ``globals()``. The first access imports the module and stores the value in
    ``namespace``, so later lookups do not reach ``__getattr__``; any other name raises
    AttributeError worded as Python words it for a module without ``__getattr__``.
    """

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
