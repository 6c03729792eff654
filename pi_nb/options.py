"""Keyword families declared once: a :class:`~typing.TypedDict` names the keywords that a
group of functions take (``**options: Unpack[Family]``), and :func:`keyword_options`
checks a call's keywords against it and fills the defaults in one place.

Why: the same keywords (a compaction's ``settings`` / ``prompts`` / ``focus`` …, a
session's ``model`` / ``window`` / ``reserve`` …) were re-declared in every signature
that forwards them, so a new option or a changed default had to be made in each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["family_keys", "keyword_options"]


def family_keys(family: type) -> frozenset[str]:
    """The keywords a TypedDict ``family`` declares (its bases' included)."""
    return frozenset(family.__required_keys__ | family.__optional_keys__)  # type: ignore[attr-defined]


def keyword_options(
    function: str,
    options: Mapping[str, Any],
    family: type,
    defaults: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``options`` checked against ``family``, with every missing keyword set to its entry
    in ``defaults`` (None when it has none).

    Raises:
        TypeError: a keyword ``family`` does not declare, worded as Python words it for an
            explicit signature (``compact() got an unexpected keyword argument 'x'``).
    """
    keys = family_keys(family)
    for name in options:
        if name not in keys:
            raise TypeError(f"{function}() got an unexpected keyword argument {name!r}")
    given = defaults or {}
    return {**{key: given.get(key) for key in keys}, **options}
