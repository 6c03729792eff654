"""pi_nb.options: a keyword family declared once as a TypedDict, checked and defaulted."""

from __future__ import annotations

from typing import TypedDict

import pytest

from pi_nb.compaction import CompactOptions, NavigateOptions, PreviewOptions
from pi_nb.options import family_keys, keyword_options


class _Base(TypedDict, total=False):
    size: int
    name: str | None


class _More(_Base, total=False):
    again: bool


def test_a_family_has_its_bases_keys_and_the_defaults_fill_the_rest() -> None:
    assert family_keys(_More) == {"size", "name", "again"}
    assert keyword_options("f", {"size": 3}, _More, {"again": False}) == {
        "size": 3,
        "name": None,
        "again": False,
    }
    # a keyword given wins over its default, and the caller's mapping is not changed
    given = {"again": True}
    assert keyword_options("f", given, _More, {"again": False})["again"] is True
    assert given == {"again": True}


def test_an_unknown_keyword_is_named_as_python_names_it() -> None:
    with pytest.raises(TypeError, match=r"^f\(\) got an unexpected keyword argument 'again'$"):
        keyword_options("f", {"size": 1, "again": True}, _Base)


def test_the_compaction_families_are_a_preview_plus_will_retry() -> None:
    assert family_keys(CompactOptions) - family_keys(PreviewOptions) == {"will_retry"}
    assert family_keys(PreviewOptions) < family_keys(CompactOptions)
    assert {"summarize", "label", "reserve_tokens"} <= family_keys(NavigateOptions)
