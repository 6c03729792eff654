"""Issue 15, "honest costs": a reply's usage is priced by the one rule (pi_nb.llm.price_usage),
cached input at the cache-read rate; an unknown price keeps Pi's zeros in the message (the
file stays JSON Pi reads) and whatever shows the cost says "unknown". Offline: litellm's
bundled table; a made-up model name for an unknown price."""

from __future__ import annotations

import json
import math

import pytest

from pi_nb.llm import _usage_from, model_info, price_usage, usage_cost

UNKNOWN = "no-such-model-xyz"
RAW = {
    "prompt_tokens": 10_000,
    "completion_tokens": 200,
    "prompt_tokens_details": {"cached_tokens": 9_000},
}


def test_a_reply_prices_cached_input_at_the_cache_read_rate() -> None:
    info = model_info("gpt-4o-mini")
    usage = _usage_from(RAW, "gpt-4o-mini")
    assert (usage["input"], usage["cacheRead"], usage["output"]) == (1_000, 9_000, 200)
    cost = usage["cost"]
    assert cost["input"] == pytest.approx(1_000 * info["input_cost_per_token"])
    assert cost["cacheRead"] == pytest.approx(9_000 * info["cache_read_input_token_cost"])
    assert cost["output"] == pytest.approx(200 * info["output_cost_per_token"])
    assert cost["total"] == pytest.approx(cost["input"] + cost["cacheRead"] + cost["output"])
    # The same figure every other place computes (compare, tune, importers, strategies).
    assert cost["total"] == pytest.approx(usage_cost("gpt-4o-mini", usage)[0])
    assert cost["cacheRead"] < 9_000 * info["input_cost_per_token"]


def test_an_unknown_price_keeps_pis_zeros_in_the_message_and_reads_as_unknown() -> None:
    usage = _usage_from(RAW, UNKNOWN)
    # What is written to the session file: valid JSON (no NaN), Pi's zeros.
    json.dumps(usage, allow_nan=False)
    assert usage["cost"]["total"] == 0
    # What is shown or summed: unknown, with a note naming the model.
    value, note = usage_cost(UNKNOWN, usage)
    assert math.isnan(value) and note is not None and UNKNOWN in note
    assert price_usage(UNKNOWN, usage) == (None, note)


def _reply(model: str, provider: str | None = None, recorded: float = 0.0) -> dict:
    usage = _usage_from(RAW, model)
    if recorded:
        usage["cost"] = {**usage["cost"], "total": recorded}
    return {"role": "assistant", "provider": provider, "model": model, "usage": usage}


def test_a_run_total_with_an_unpriced_reply_is_unknown_not_free() -> None:
    from pi_nb.agent.result import usage_total

    priced = _reply("gpt-4o-mini")
    known = usage_total([priced, priced])
    assert known["calls"] == 2 and "cost_note" not in known
    assert known["cost"]["total"] == pytest.approx(2 * priced["usage"]["cost"]["total"])
    mixed = usage_total([priced, _reply(UNKNOWN)])
    assert mixed["input"] == 2_000  # the tokens still add up
    assert all(math.isnan(v) for v in mixed["cost"].values())
    assert UNKNOWN in mixed["cost_note"]


def test_a_run_total_prices_again_a_reply_recorded_at_zero() -> None:
    """Pi writes 0 for a model it has no price for; litellm may know it."""
    from pi_nb.agent.result import usage_total

    reply = _reply(UNKNOWN)  # zeros in the message, as Pi would record them
    reply["model"] = "gpt-4o-mini"
    total = usage_total([reply])
    assert total["cost"]["total"] == pytest.approx(usage_cost("gpt-4o-mini", reply["usage"])[0])
    assert total["cost"]["total"] > 0
    local = {"role": "assistant", "provider": "pinb", "model": "scripted", "usage": _usage_from(RAW, "pinb/scripted")}
    assert usage_total([local])["cost"]["total"] == 0.0  # the embedded models cost nothing
