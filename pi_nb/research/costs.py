"""What model calls cost, from litellm's bundled price table — NaN and a note when unknown.

A study's cost column must never show 0.0 for "we do not know": :func:`usage_cost` returns
NaN and a one-line note naming the model when litellm has no price for it. Cached input
(``cacheRead``) is priced at the model's cache-read rate when the table has one
(``cache_read_input_token_cost``), cache writes at the cache-creation rate; without those
rates they fall back to the input rate and the note says so.

The rule itself lives in :mod:`pi_nb.llm` (:func:`~pi_nb.llm.price_usage`), below every
layer that prices a call: the agent's replies, the importers, the strategies and the
studies all use the same one.
"""

from __future__ import annotations

from ..llm import price_usage, usage_cost

__all__ = ["price_usage", "usage_cost"]
