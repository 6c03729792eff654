"""The model-call cache (keyed by request content) and the dry run of a study."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from pi_nb.compaction import DEFAULT_PROMPTS, CompactionSettings
from pi_nb.research.cache import CachedCompletion, request_key
from pi_nb.research.compare import PLAN_COLUMNS, compare_strategies
from pi_nb.research.synthetic import generate_session

SETTINGS = CompactionSettings(keep_recent_tokens=1500, reserve_tokens=1500)
VOLATILE = ["wall_time_s", "cached", "model_calls_cached", "model_calls_sent"]
#: Every call that reached a "provider" (module level: the functions stay picklable).
SENT: list[str] = []


def counting_summary(model: str, messages: list[dict[str, Any]], **kwargs: Any) -> dict:
    from pi_nb.llm import complete

    SENT.append("summary")
    return complete("pinb/scripted", messages, stream=False, **kwargs)


def counting_judge(model: str, messages: list[dict[str, Any]], **kwargs: Any) -> dict:
    SENT.append("judge")
    prompt = messages[-1]["content"]
    text = "GRADE: 4 - close" if "Rubric" in prompt else prompt[-300:]
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def counting_replay(model: str, messages: list[dict[str, Any]], **kwargs: Any) -> dict:
    SENT.append("replay")
    call = {"type": "toolCall", "id": "n1", "name": "read", "arguments": {"path": "a.py"}}
    return {"role": "assistant", "content": [call]}


def _study(sessions: dict[str, str], cache: Path | None, **options: Any) -> Any:
    return compare_strategies(
        sessions,
        ["pi", "mask:2"],
        "gpt-4o-mini",
        settings=SETTINGS,
        cache_dir=cache,
        completion=counting_summary,
        judge_model="judge-x",
        judge_completion=counting_judge,
        replay=True,
        replay_completion=counting_replay,
        at=-8,
        progress=False,
        **options,
    )


def _forget_results(cache: Path) -> None:
    """Drop the per-study result cache, keep the model-call cache."""
    for path in [*cache.glob("*.json"), cache / "results.jsonl"]:
        path.unlink()


def test_rerun_answers_every_call_from_the_cache(sessions: dict[str, str], tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    SENT.clear()
    first = _study(sessions, cache)
    assert first["error"].isna().all()
    assert {"summary", "judge", "replay"} <= set(SENT)
    assert first["model_calls_sent"].sum() == len(SENT)  # summaries, judge and replay
    # Within one study the same request is asked once: the replay's full-context step is
    # the same for every strategy of a session, so the second strategy gets it from disk.
    assert (first[first["strategy"] == "pi"]["model_calls_cached"] == 0).all()
    assert (first[first["strategy"] == "mask"]["model_calls_cached"] >= 1).all()
    total = first["model_calls_cached"] + first["model_calls_sent"]
    _forget_results(cache)
    SENT.clear()
    second = _study(sessions, cache)
    assert SENT == []  # no provider call at all
    assert not second["cached"].any()  # the rows were computed again …
    assert list(second["model_calls_cached"]) == list(total)  # … from disk
    assert (second["model_calls_sent"] == 0).all()
    stable = [c for c in first.columns if c not in VOLATILE]
    assert second[stable].equals(first[stable])  # identical rows
    assert pd.DataFrame(second.attrs["judge_log"]).equals(pd.DataFrame(first.attrs["judge_log"]))


def test_a_changed_prompt_misses_and_unchanged_requests_hit(
    sessions: dict[str, str], tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    _study(sessions, cache)
    SENT.clear()
    edited = DEFAULT_PROMPTS.__class__(
        **{**DEFAULT_PROMPTS.to_dict(), "initial": DEFAULT_PROMPTS.initial + "\nBe brief."}
    )
    again = _study(sessions, cache, prompts=edited)
    pi = again[again["strategy"] == "pi"]
    mask = again[again["strategy"] == "mask"]
    assert "summary" in SENT and (pi["model_calls_sent"] > 0).all()  # a new request: sent
    # Masking asks no summary: its judge and replay requests are the same ones, all hits.
    assert (mask["model_calls_sent"] == 0).all() and (mask["model_calls_cached"] > 0).all()


def test_key_is_request_content_without_credentials(tmp_path: Path) -> None:
    calls: list[dict[str, Any]] = []

    def provider(model: str, messages: list[dict[str, Any]], **options: Any) -> dict:
        calls.append(options)
        return {"role": "assistant", "content": [{"type": "text", "text": f"n={len(calls)}"}]}

    cached = CachedCompletion(tmp_path, provider)
    messages = [{"role": "user", "content": "hello"}]
    one = cached("m", messages, max_tokens=10, api_key="sk-secret-1", api_base="http://a")
    two = cached("m", messages, max_tokens=10, api_key="sk-other", api_base="http://b")
    assert one == two and len(calls) == 1  # same request through another key / endpoint
    assert (cached.count.sent, cached.count.cached) == (1, 1)
    cached("m", messages, max_tokens=11)  # an option that changes the answer
    cached("m2", messages, max_tokens=10)  # another model
    cached("m", [{"role": "user", "content": "hello!"}], max_tokens=10)  # another message
    assert len(calls) == 4
    stored = "".join(p.read_text() for p in tmp_path.rglob("*.json"))
    assert "sk-secret" not in stored and "http://a" not in stored
    assert request_key("m", messages, {"api_key": "x"}) == request_key("m", messages, {})
    assert request_key("m", messages, {"temperature": 0}) != request_key("m", messages, {})


def test_failed_calls_are_not_cached(tmp_path: Path) -> None:
    replies = [{"role": "assistant", "content": [], "stopReason": "error"}]
    replies.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})

    def flaky(model: str, messages: list[dict[str, Any]], **options: Any) -> dict:
        return replies.pop(0)

    cached = CachedCompletion(tmp_path, flaky)
    assert cached("m", [{"role": "user", "content": "x"}])["stopReason"] == "error"
    assert cached("m", [{"role": "user", "content": "x"}])["content"][0]["text"] == "ok"
    assert cached.count.sent == 2 and cached.count.cached == 0


def test_dry_run_plans_without_calling(sessions: dict[str, str], tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    SENT.clear()
    plan = _study(sessions, cache, dry_run=True)
    assert SENT == []  # no model call made
    assert not cache.exists() or not any(cache.rglob("*.json*"))  # nothing cached or logged
    assert list(plan.columns) == list(PLAN_COLUMNS)
    assert list(plan["strategy"]) == ["pi", "mask"] * 2 and plan["error"].isna().all()
    assert (plan[plan["strategy"] == "mask"]["summary_calls"] == 0).all()
    assert (plan["replay_calls"] == 2).all() and (plan["input_tokens"] > 0).all()
    # judge-x has no price: the estimate is NaN with a note naming it, never 0.0.
    assert plan["cost"].isna().all()
    assert plan["cost_note"].str.contains("no price for judge-x").all()
    # The plan counts the calls the real study then makes, and one more per row: the plan's
    # placeholder replies make no tool call, so the judge compares them (an upper bound);
    # the real replies here read a file and are compared without the judge.
    real = _study(sessions, None)
    assert real["agreement_basis"].eq("tool call").all()
    assert list(plan["model_calls"] - 1) == list(real["model_calls_sent"])  # no cache: all sent
    assert list(plan["summary_calls"]) == list(real["model_calls"])


def test_dry_run_cost_with_known_prices(sessions: dict[str, str]) -> None:
    from pi_nb.research.costs import usage_cost

    plan = compare_strategies(
        sessions, ["pi", "extractive"], "gpt-4o-mini", settings=SETTINGS, dry_run=True,
        progress=False,
    )  # fmt: skip
    pi = plan[plan["strategy"] == "pi"].iloc[0]
    expected, _ = usage_cost(
        "gpt-4o-mini", {"input": int(pi["input_tokens"]), "output": int(pi["output_tokens_max"])}
    )
    assert pi["summary_calls"] >= 1 and math.isclose(pi["cost"], expected) and pi["cost"] > 0
    extractive = plan[plan["strategy"] == "extractive"].iloc[0]
    assert extractive["model_calls"] == 0 and extractive["cost"] == 0


def test_cached_rows_store_plain_json(sessions: dict[str, str], tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _study(sessions, cache)
    files = list((cache / "calls").rglob("*.json"))
    assert files and all(json.loads(f.read_text())["reply"]["role"] == "assistant" for f in files)


def test_survival_rerun_from_the_cache(tmp_path: Path) -> None:
    from pi_nb.research.survival import fact_survival

    session = generate_session(10, seed=3)
    options = dict(
        k=2,
        settings=SETTINGS,
        completion=counting_summary,
        judge_model="judge-x",
        judge_completion=counting_judge,
        cache_dir=tmp_path / "calls",
    )
    SENT.clear()
    first = fact_survival(session, "pi", **options)
    per_round = first.groupby("round")[["model_calls_sent", "model_calls_cached"]].first()
    assert SENT and per_round["model_calls_sent"].sum() == len(SENT)
    total = first["model_calls_sent"] + first["model_calls_cached"]
    SENT.clear()
    second = fact_survival(session, "pi", **options)
    assert SENT == []
    assert (second["model_calls_sent"] == 0).all()
    assert list(second["model_calls_cached"]) == list(total)
    stable = [c for c in first.columns if not c.startswith("model_calls")]
    assert second[stable].equals(first[stable])


def test_tune_rerun_from_the_cache_and_an_edited_prompt_misses(tmp_path: Path) -> None:
    from dataclasses import replace

    from pi_nb.research.tuning import tune

    path = tmp_path / "s.jsonl"
    generate_session(10, seed=1, path=str(path))
    variants = {"default": DEFAULT_PROMPTS}
    SENT.clear()
    first = tune(str(path), variants, settings=SETTINGS, completion=counting_summary,
                 cache_dir=tmp_path / "calls")  # fmt: skip
    sent = len(SENT)
    assert sent > 0 and list(first.frame["calls_sent"]) == [sent]
    SENT.clear()
    edited = replace(DEFAULT_PROMPTS, initial=DEFAULT_PROMPTS.initial + "\nBe brief.")
    second = tune(str(path), {**variants, "brief": edited}, settings=SETTINGS,
                  completion=counting_summary, cache_dir=tmp_path / "calls")  # fmt: skip
    frame = second.frame.set_index("variant")
    assert frame.loc["default", "calls_sent"] == 0 and frame.loc["default", "calls_cached"] == sent
    assert frame.loc["brief", "calls_sent"] > 0 and len(SENT) == frame.loc["brief", "calls_sent"]
    assert second.summaries["default"] == first.summaries["default"]
