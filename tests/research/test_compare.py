"""The batch runner: table, progress, cache (no model calls on rerun), resume after an
interruption, and the same results with thread and process pools."""

from __future__ import annotations

import json
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pi_nb.compaction import DEFAULT_PROMPTS, CompactionSettings
from pi_nb.research.compare import COLUMNS, compare_strategies, plot_comparison
from pi_nb.research.strategies import callable_strategy
from pi_nb.research.survival import fact_survival
from pi_nb.research.synthetic import generate_session
from pi_nb.research.tuning import tune

SETTINGS = CompactionSettings(keep_recent_tokens=1500, reserve_tokens=1500)
OFFLINE = ["mask:2", "window:1500", "extractive"]
VOLATILE = ["wall_time_s", "cached"]
#: What a rerun changes on purpose: it sends nothing, the calls come from the cache.
CALL_COUNTS = ["model_calls_cached", "model_calls_sent"]
CALLS: list[int] = []
STOP_AT: list[str] = []


def counting_completion(model: str, messages: list[dict[str, Any]], **kwargs: Any) -> dict:
    """The default model call, counted (module level: picklable)."""
    from pi_nb.llm import complete

    CALLS.append(1)
    return complete(model, messages, stream=False, **kwargs)


def interrupting_summary(messages: list[dict], previous: str | None, instructions: str) -> str:
    """A strategy that stops the study (like Ctrl-C) on a chosen session."""
    text = json.dumps(messages[0].get("content"))
    if any(marker in text for marker in STOP_AT):
        raise KeyboardInterrupt
    return f"{len(messages)} messages"


def broken_summary(messages: list[dict], previous: str | None, instructions: str) -> str:
    raise ValueError("summarizer exploded")


def _stable(frame):
    return frame.drop(columns=VOLATILE).reset_index(drop=True)


def test_table_columns_rows_and_order(sessions: dict[str, str]) -> None:
    frame = compare_strategies(list(sessions.values()), OFFLINE, settings=SETTINGS, progress=False)
    assert list(frame.columns) == list(COLUMNS)
    assert list(frame["session"]) == ["s1"] * 3 + ["s2"] * 3
    assert list(frame["strategy"]) == ["mask", "window", "extractive"] * 2
    assert frame["error"].isna().all() and frame["compacted"].all()
    assert (frame["compression_ratio"] > 1).all()
    assert (frame["model_calls"] == 0).all()
    window = frame[frame["strategy"] == "window"]
    extractive = frame[frame["strategy"] == "extractive"]
    assert (window["probe_all"].to_numpy() < extractive["probe_all"].to_numpy()).all()
    assert (frame["probes"] > 10).all()
    again = compare_strategies(list(sessions.values()), OFFLINE, settings=SETTINGS, progress=False)
    assert _stable(again).equals(_stable(frame))  # deterministic


def test_progress_bar_on_stderr(sessions: dict[str, str], capsys: pytest.CaptureFixture) -> None:
    compare_strategies(sessions, OFFLINE, settings=SETTINGS, progress=True)
    err = capsys.readouterr().err
    assert "compare" in err and "6/6" in err
    compare_strategies(sessions, OFFLINE, settings=SETTINGS, progress=False)
    assert capsys.readouterr().err == ""


def test_cache_hit_on_rerun_makes_no_model_calls(sessions: dict[str, str], tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    CALLS.clear()
    first = compare_strategies(
        sessions,
        ["pi", "mask:2"],
        settings=SETTINGS,
        cache_dir=cache,
        completion=counting_completion,
        progress=False,
    )
    assert len(CALLS) == first["model_calls"].sum() > 0
    assert not first["cached"].any()
    assert len(list(cache.glob("*.json"))) == 4
    CALLS.clear()
    second = compare_strategies(
        sessions,
        ["pi", "mask:2"],
        settings=SETTINGS,
        cache_dir=cache,
        completion=counting_completion,
        progress=False,
    )
    assert CALLS == [] and second["cached"].all()
    assert (second["model_calls_sent"] == 0).all()
    assert list(second["model_calls_cached"]) == list(first["model_calls_sent"])
    assert _stable(second).drop(columns=CALL_COUNTS).equals(
        _stable(first).drop(columns=CALL_COUNTS)
    )
    # Another model, other settings or other prompts are other keys.
    CALLS.clear()
    other = CompactionSettings(keep_recent_tokens=1400, reserve_tokens=1500)
    third = compare_strategies(
        sessions,
        ["pi"],
        settings=other,
        cache_dir=cache,
        completion=counting_completion,
        progress=False,
    )
    assert CALLS and not third["cached"].any()


def test_interrupted_study_resumes(sessions: dict[str, str], tmp_path: Path) -> None:
    log = tmp_path / "study.jsonl"
    strategy = callable_strategy(interrupting_summary, "stoppable")
    STOP_AT[:] = ["api/routes.py"]  # in the first request of session s2 (seed 2) only
    with pytest.raises(KeyboardInterrupt):
        compare_strategies(
            sessions, [strategy], settings=SETTINGS, results_path=log, progress=False
        )
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [row["session"] for row in lines] == ["s1"]  # written before the interruption
    STOP_AT[:] = []
    resumed = compare_strategies(
        sessions, [strategy], settings=SETTINGS, results_path=log, progress=False
    )
    assert list(resumed["cached"]) == [True, False]
    assert len(log.read_text().splitlines()) == 2


def test_failed_runs_are_rows_and_are_retried(sessions: dict[str, str], tmp_path: Path) -> None:
    broken = callable_strategy(broken_summary, "broken")
    frame = compare_strategies(
        sessions, [broken, "mask:2"], settings=SETTINGS, cache_dir=tmp_path / "c", progress=False
    )
    failed = frame[frame["strategy"] == "broken"]
    assert failed["error"].str.contains("summarizer exploded").all()
    assert frame[frame["strategy"] == "mask"]["error"].isna().all()
    again = compare_strategies(
        sessions, [broken, "mask:2"], settings=SETTINGS, cache_dir=tmp_path / "c", progress=False
    )
    assert list(again["cached"]) == [False, True, False, True]


def test_thread_and_process_pools_give_the_same_table(sessions: dict[str, str]) -> None:
    serial = compare_strategies(sessions, OFFLINE, settings=SETTINGS, progress=False)
    with ThreadPoolExecutor(3) as pool:
        threaded = compare_strategies(
            sessions, OFFLINE, settings=SETTINGS, executor=pool, progress=False
        )
    with ProcessPoolExecutor(2) as pool:
        processes = compare_strategies(
            sessions, OFFLINE, settings=SETTINGS, executor=pool, progress=False
        )
    assert _stable(threaded).equals(_stable(serial))
    assert _stable(processes).equals(_stable(serial))


def test_in_memory_sessions_and_labels(tmp_path: Path) -> None:
    tree = generate_session(8, seed=5)
    before = len(tree)
    frame = compare_strategies(
        {"generated": tree}, ["mask:2"], settings=SETTINGS, cache_dir=tmp_path, progress=False
    )
    assert list(frame["session"]) == ["generated"] and len(tree) == before
    assert not (tmp_path / "sessions").exists()  # the job carries the content: no copy


def test_price_model_and_plot(sessions: dict[str, str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    frame = compare_strategies(
        sessions,
        ["pi", "window:1500"],
        settings=SETTINGS,
        price_model="gpt-4o-mini",
        progress=False,
    )
    pi = frame[frame["strategy"] == "pi"]
    assert (pi["cost"] > 0).all()  # scripted calls priced as gpt-4o-mini
    assert (frame[frame["strategy"] == "window"]["cost"] == 0).all()
    figure = plot_comparison(frame)
    assert len(figure.axes) == 3 and "synthetic sessions" in figure.axes[0].get_title()
    mixed = frame.assign(source=["real"] + ["synthetic"] * (len(frame) - 1))
    with pytest.raises(ValueError, match="mixes synthetic and real"):
        plot_comparison(mixed)
    assert len(plot_comparison(mixed, source="real").axes) == 3


def _distributed() -> Any:
    """dask.distributed; in CI (CI=true) its absence fails the test instead of skipping."""
    import os

    if os.environ.get("CI", "").lower() in ("true", "1"):
        import distributed  # an ImportError here fails CI: the extra must be installed

        return distributed
    return pytest.importorskip("distributed")


class RemovingExecutor:
    """Submits to ``inner``; before the first job, moves the session files away (as if the
    workers ran on machines that never had them)."""

    def __init__(self, inner: Any, paths: list[str]) -> None:
        self.inner, self.paths, self.jobs = inner, paths, []

    def submit(self, fn: Any, job: Any) -> Any:
        if not self.jobs:
            for path in self.paths:
                Path(path).rename(path + ".gone")
        self.jobs.append(job)
        return self.inner.submit(fn, job)


def test_dask_cluster_of_worker_processes(sessions: dict[str, str], tmp_path: Path) -> None:
    from dataclasses import fields

    from pi_nb.research.compare import _Job

    distributed = _distributed()
    serial = compare_strategies(sessions, OFFLINE, settings=SETTINGS, progress=False)
    many = [*OFFLINE, "mask:1", "mask:3"]
    many += [f"window:{n}" for n in (600, 700, 800, 900, 1000, 1100, 1200, 1300)]
    many_serial = compare_strategies(sessions, many, settings=SETTINGS, progress=False)
    cluster = distributed.LocalCluster(
        n_workers=2,
        processes=True,
        threads_per_worker=1,
        host="127.0.0.1",
        dashboard_address=None,
    )
    with cluster, distributed.Client(cluster) as client:
        # The Client itself: one batch out, a few jobs per task (enough strategies here for
        # two per task), results back through Dask's as_completed, each in its row.
        on_client = compare_strategies(
            sessions, many, settings=SETTINGS, executor=client, progress=False
        )
        assert len(on_client) == 2 * len(many) >= 4 * 2 * 2  # size 2 chunks on 2 workers
        executor = RemovingExecutor(client.get_executor(), list(sessions.values()))
        log = tmp_path / "study.jsonl"
        on_dask = compare_strategies(
            sessions,
            OFFLINE,
            settings=SETTINGS,
            executor=executor,
            results_path=log,
            progress=False,
        )
        workers = client.run(lambda: __import__("os").getpid())
        # fact_survival and tune take the session's bytes: a remote worker needs no file.
        data = Path(sessions["s1"] + ".gone").read_bytes()
        survival = client.submit(fact_survival, data, "pi", k=2, settings=SETTINGS).result()
        tuned = client.submit(tune, data, [DEFAULT_PROMPTS], settings=SETTINGS).result()
    assert len(set(workers.values())) == 2  # two worker processes
    assert survival.equals(fact_survival(data, "pi", k=2, settings=SETTINGS))
    local = tune(data, [DEFAULT_PROMPTS], settings=SETTINGS)
    assert tuned.frame.equals(local.frame) and tuned.summaries == local.summaries
    assert not any(Path(p).exists() for p in sessions.values())  # the files were gone
    assert on_dask["error"].isna().all()
    assert _stable(on_dask).equals(_stable(serial))
    assert _stable(on_client).equals(_stable(many_serial))
    # Every result was logged as it came back: a rerun resumes with nothing left to run.
    assert len(log.read_text().splitlines()) == len(serial)
    resumed = compare_strategies(
        {k: v + ".gone" for k, v in sessions.items()},
        OFFLINE,
        settings=SETTINGS,
        results_path=log,
        progress=False,
    )
    assert resumed["cached"].all()
    # Jobs carry the session's content, never a local path.
    assert not any("path" in f.name for f in fields(_Job))
    assert all(job.session_data.startswith(b'{"type":"session"') for job in executor.jobs)


def test_rows_name_the_summarizer_and_the_source(sessions: dict[str, str]) -> None:
    frame = compare_strategies(
        sessions, ["pi", "extractive", "window:1500", "mask:2"], settings=SETTINGS, progress=False
    )
    by = frame[frame["session"] == "s1"].set_index("strategy")
    assert by.loc["pi", "summarizer"] == "extractive stand-in"  # pinb/scripted wrote it
    assert by.loc["extractive", "summarizer"] == "extractive (no model)"
    assert by.loc["window", "summarizer"] == "none (truncation note)"
    assert by.loc["mask", "summarizer"] == "none"
    assert set(frame["source"]) == {"synthetic"}
    notes = frame.attrs["notes"]
    assert any("extractive stand-in" in n and "pi" in n for n in notes)
    real = compare_strategies(
        sessions, ["pi"], "gpt-4o-mini", settings=SETTINGS, completion=scripted_as, progress=False
    )
    assert real["summarizer"][0].startswith("gpt-4o-mini via ")  # a custom call: named
    assert not any("stand-in" in n for n in real.attrs["notes"])


def scripted_as(model: str, messages: list[dict[str, Any]], **kwargs: Any) -> dict:
    """Answer as pinb/scripted whatever the model name (module level: picklable)."""
    from pi_nb.llm import complete

    return complete("pinb/scripted", messages, stream=False, **kwargs)


def test_unknown_price_is_nan_with_a_note(sessions: dict[str, str]) -> None:
    frame = compare_strategies(
        sessions,
        ["pi", "window:1500"],
        settings=SETTINGS,
        price_model="no-such-model-xyz",
        progress=False,
    )
    pi = frame[frame["strategy"] == "pi"]
    assert pi["cost"].isna().all()  # never a made-up 0.0
    assert (
        pi["cost_note"] == "no price for no-such-model-xyz in litellm's table: cost unknown (NaN)"
    ).all()
    assert (frame[frame["strategy"] == "window"]["cost"] == 0).all()  # no call: nothing spent
    assert frame.attrs["notes"][0].startswith("no price for no-such-model-xyz")


def test_cached_input_is_priced_at_the_cache_rate() -> None:
    import math

    import litellm

    from pi_nb.research.costs import usage_cost

    rates = litellm.model_cost["gpt-4o-mini"]
    cached, note = usage_cost("gpt-4o-mini", {"input": 1000, "output": 100, "cacheRead": 9000})
    expected = (
        1000 * rates["input_cost_per_token"]
        + 100 * rates["output_cost_per_token"]
        + 9000 * rates["cache_read_input_token_cost"]
    )
    assert note is None and math.isclose(cached, expected)
    full, _ = usage_cost("gpt-4o-mini", {"input": 10000, "output": 100})
    assert cached < full  # the same prompt costs less when most of it was a cache hit
    unknown, note = usage_cost("no-such-model-xyz", {"input": 5})
    assert math.isnan(unknown) and "no-such-model-xyz" in note


def judge_reply(model: str, messages: list[dict[str, Any]], **kwargs: Any) -> dict:
    """A judge that answers with the notes and grades 4, except one unparseable grade."""
    prompt = messages[-1]["content"]
    if "Rubric" not in prompt:
        text = prompt[:2000]
    elif "Probe type: decision" in prompt:
        text = "no idea"
    else:
        text = "GRADE: 4 - close"
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def test_judge_columns_log_and_failures(sessions: dict[str, str]) -> None:
    frame = compare_strategies(
        sessions,
        ["window:1500", "extractive"],
        settings=SETTINGS,
        judge_model="judge-x",
        judge_completion=judge_reply,
        progress=False,
    )
    assert frame["error"].isna().all()
    assert (frame["judge_score"] == 4.0).all()  # the failed grades are not counted as 0
    assert (frame["judge_artifact"] == 4.0).all() and frame["judge_decision"].isna().all()
    assert (frame["judge_grader"] == "judge judge-x").all()
    assert frame["judge_error"].str.contains("unparseable reply 'no idea'").all()
    log = pd.DataFrame(frame.attrs["judge_log"])
    assert len(log) == frame["probes"].sum()
    assert {"session", "strategy", "question", "answer", "grade_reply", "grade", "error"} <= set(
        log.columns
    )
    assert log[log["category"] == "decision"]["grade"].isna().all()
    assert any(n.startswith("judge: 4 run(s)") for n in frame.attrs["notes"])
    cheap = compare_strategies(
        sessions,
        ["extractive"],
        settings=SETTINGS,
        judge_model="judge-x",
        judge_grader="match",
        judge_completion=judge_reply,
        progress=False,
    )
    assert (cheap["judge_grader"] == "string match").all() and cheap["judge_error"].isna().all()


def next_step_reply(model: str, messages: list[dict[str, Any]], **kwargs: Any) -> dict:
    """Reads the file named last in the context; after a compaction, reads the notes."""
    text = json.dumps(messages)
    path = "NOTES.md" if "<summary>" in text else "a.py"
    call = {"type": "toolCall", "id": "n1", "name": "read", "arguments": {"path": path}}
    return {"role": "assistant", "content": [call]}


def test_continuation_replay(sessions: dict[str, str]) -> None:
    from pi_nb.research.replay import step_of

    frame = compare_strategies(
        sessions,
        ["mask:2", "extractive"],
        settings=SETTINGS,
        at=-8,
        replay=True,
        replay_completion=next_step_reply,
        progress=False,
    )
    assert frame["error"].isna().all() and frame["replay_error"].isna().all()
    by = frame[frame["session"] == "s1"].set_index("strategy")
    assert by.loc["mask", "continuation_agreement"] == True  # noqa: E712 (masking: same step)
    assert by.loc["extractive", "continuation_agreement"] == False  # noqa: E712
    assert by.loc["extractive", "next_compacted"] == "read NOTES.md"
    assert by.loc["mask", "next_full"] == "read a.py"
    # The session goes on after the point: the agent's real next step is compared too.
    assert by.loc["mask", "next_actual"].startswith(("read ", "edit ", "bash "))
    assert by.loc["mask", "matches_actual"] == (by.loc["mask", "next_actual"] == "read a.py")
    step = step_of(
        {"content": [{"type": "toolCall", "name": "bash", "arguments": {"command": "ls"}}]}
    )
    assert step.key() == ("bash", "ls")


def test_two_comparison_tables_concatenate(tmp_path):
    """The judge log in ``attrs`` is plain records: ``pd.concat`` of two tables (which
    compares their attrs with ==) must not fail, judged or not."""
    sessions = [generate_session(8, seed=3)]
    first = compare_strategies(sessions, ["mask:2"], model="pinb/scripted")
    second = compare_strategies(sessions, ["window:300"], model="pinb/scripted")
    both = pd.concat([first, second], ignore_index=True)
    assert list(both["strategy"]) == ["mask", "window"]
    assert isinstance(first.attrs["judge_log"], list)
