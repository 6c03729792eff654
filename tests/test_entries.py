"""Entry helpers of the bottom layer: numbers as JavaScript holds them."""

from __future__ import annotations

import copy
import json

from pi_nb.entries import js_numbers


def test_js_numbers_makes_integral_floats_ints_at_any_depth() -> None:
    value = {"a": 1.0, "b": [0.0, 2.5, {"c": -3.0}], "d": "1.0", "e": True, "f": None}
    out = js_numbers(value)
    assert json.dumps(out) == '{"a": 1, "b": [0, 2.5, {"c": -3}], "d": "1.0", "e": true, "f": null}'
    assert type(out["a"]) is int and type(out["b"][2]["c"]) is int


def test_js_numbers_keeps_floats_beyond_exact_integers() -> None:
    # Past 2**53 a float is not an exact integer in JavaScript: left as it is.
    assert js_numbers(2.0**53) == 2**53 and type(js_numbers(2.0**53)) is int
    big = 2.0**54
    assert js_numbers(big) is big
    assert js_numbers([float("inf")])[0] == float("inf")


def test_js_numbers_copies_only_the_containers_that_change() -> None:
    same = {"x": [1, "two"], "y": {"z": 3}}
    assert js_numbers(same) is same
    value = {"keep": {"z": 3}, "list": [1, 2.0], "also": ["s"]}
    before = copy.deepcopy(value)
    out = js_numbers(value)
    assert value == before  # the input is never changed in place
    assert out is not value and out["list"] is not value["list"]
    assert out["keep"] is value["keep"] and out["also"] is value["also"]
    assert out == {"keep": {"z": 3}, "list": [1, 2], "also": ["s"]}


def test_js_numbers_leaves_other_containers_alone() -> None:
    # Only dicts and lists (what json.loads makes) are walked; a tuple passes through.
    pair = (1.0, 2.0)
    assert js_numbers(pair) is pair
