"""What model calls cost, from litellm's bundled price table — NaN and a note when unknown.

A study's cost column must never show 0.0 for "we do not know": :func:`usage_cost` returns
NaN and a one-line note naming the model when litellm has no price for it. Cached input
(``cacheRead``) is priced at the model's cache-read rate when the table has one
(``cache_read_input_token_cost``), cache writes at the cache-creation rate; without those
rates they fall back to the input rate and the note says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["usage_cost"]


def _rate(info: Mapping[str, Any], key: str) -> float | None:
    value = info.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def usage_cost(model: str, usage: Mapping[str, Any] | None) -> tuple[float, str | None]:
    """(cost in USD, note) of a Pi usage record (``input``, ``output``, ``cacheRead``,
    ``cacheWrite`` token counts) if made with ``model``.

    The cost is NaN, with a note naming the model, when litellm has no price for it; the
    note is None when every count was priced at its own rate.
    """
    from ..llm import model_info

    usage = usage or {}
    counts = {k: int(usage.get(k, 0) or 0) for k in ("input", "output", "cacheRead", "cacheWrite")}
    info = model_info(model)
    per_in, per_out = _rate(info, "input_cost_per_token"), _rate(info, "output_cost_per_token")
    if per_in is None or per_out is None:
        return math.nan, f"no price for {model} in litellm's table: cost unknown (NaN)"
    notes = []
    per_read = _rate(info, "cache_read_input_token_cost")
    if per_read is None:
        per_read = per_in
        if counts["cacheRead"]:
            notes.append(f"no cache-read price for {model}: cached input priced at the input rate")
    per_write = _rate(info, "cache_creation_input_token_cost")
    if per_write is None:
        per_write = per_in
        if counts["cacheWrite"]:
            notes.append(f"no cache-write price for {model}: cache writes priced at the input rate")
    total = (
        counts["input"] * per_in
        + counts["output"] * per_out
        + counts["cacheRead"] * per_read
        + counts["cacheWrite"] * per_write
    )
    return total, "; ".join(notes) or None
