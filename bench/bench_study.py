"""Study throughput: serial vs a 2-worker local Dask cluster, and one long session.

    python bench/bench_study.py [--sessions 24] [--turns 10] [--long-turns 48]

1. ``--sessions`` generated sessions × 4 offline strategies (``pi`` on ``pinb/scripted``,
   ``mask:3``, ``window:1500``, ``extractive``) through :func:`compare_strategies`: in this
   process (serial), on a ``LocalCluster`` of 2 worker processes (1 thread each, 127.0.0.1,
   the ``Client`` passed as the executor) and, as the machine's ceiling, on a plain
   2-process ``ProcessPoolExecutor``. Every process first runs each strategy once, untimed
   (imports, tokenizer tables), and the cluster's start-up is not counted; the three modes
   then take turns for ``--rounds`` rounds. Prints the median runs per minute of each and
   the ratios (target >= 1.6 for the cluster on 24 sessions with 2 free cores).
2. One session of about 40 k tokens (default settings: keepRecentTokens 20000) × the same
   4 strategies, serial, after a warm-up run
   on a small session (start-up: imports, litellm, tokenizer). Prints the time (target
   <= 2 s beyond start-up).

The sessions are generated into a temporary folder; no result cache (every run computes).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

STRATEGIES = ["pi", "mask:3", "window:1500", "extractive"]


def _settings():
    """A small keepRecentTokens, so that every generated session has a span to compact."""
    from pi_nb.compaction import CompactionSettings

    return CompactionSettings(keep_recent_tokens=2000, reserve_tokens=2000)


def _sessions(folder: Path, count: int, turns: int) -> list[str]:
    from pi_nb.research.synthetic import generate_session

    paths = []
    for seed in range(count):
        path = folder / f"s{seed:02d}.jsonl"
        generate_session(turns, seed=seed, path=str(path))
        paths.append(str(path))
    return paths


def _warm(_: object = None) -> int:
    """Run every strategy once on a small session in this process, untimed.

    The imports alone are not enough: a fresh process (Dask spawns its workers) also pays for
    the tokenizer's tables and each strategy's first run, which a forked pool worker or the
    parent inherits already warm. Warming every mode the same way keeps the ratio fair.
    """
    from pi_nb.research.compare import compare_strategies
    from pi_nb.research.synthetic import generate_session

    with tempfile.TemporaryDirectory(prefix="pi-nb-bench-warm-") as folder:
        path = str(Path(folder) / "warm.jsonl")
        generate_session(6, seed=98, path=path)
        compare_strategies([path], STRATEGIES, settings=_settings(), progress=False)
    return os.getpid()


def throughput(paths: list[str], rounds: int = 3) -> None:
    import statistics
    from concurrent.futures import ProcessPoolExecutor

    from distributed import Client, LocalCluster

    from pi_nb.research.compare import compare_strategies

    runs = len(paths) * len(STRATEGIES)

    def timed(executor: object = None) -> tuple[float, object]:
        started = time.perf_counter()
        frame = compare_strategies(
            paths, STRATEGIES, settings=_settings(), executor=executor, progress=False
        )
        took = time.perf_counter() - started
        assert frame["error"].isna().all(), frame["error"].dropna().tolist()
        return took, frame

    started = time.perf_counter()
    cluster = LocalCluster(
        n_workers=2,
        processes=True,
        threads_per_worker=1,
        host="127.0.0.1",
        dashboard_address=None,
    )
    # Every process is warmed before any timing; the modes take turns, round after round, so
    # a change in the machine's load falls on all three alike. Medians are reported.
    with cluster, Client(cluster) as client, ProcessPoolExecutor(2) as pool:
        client.run(_warm)
        startup_s = time.perf_counter() - started
        list(pool.map(_warm, range(2)))
        _warm()
        times: dict[str, list[float]] = {"serial": [], "cluster": [], "pool": []}
        for _ in range(rounds):
            took, serial = timed()
            times["serial"].append(took)
            took, on_dask = timed(client)
            times["cluster"].append(took)
            took, pooled = timed(pool)
            times["pool"].append(took)
    assert serial["compacted"].all(), "a session had nothing to compact"
    same = serial.drop(columns=["wall_time_s"]).equals(on_dask.drop(columns=["wall_time_s"]))
    same = same and serial.drop(columns=["wall_time_s"]).equals(
        pooled.drop(columns=["wall_time_s"])
    )
    serial_s, dask_s, pool_s = (statistics.median(times[k]) for k in ("serial", "cluster", "pool"))
    print(f"{len(paths)} sessions x {len(STRATEGIES)} strategies = {runs} runs, median of {rounds}")
    print(f"  serial:            {serial_s:7.2f} s  {runs / serial_s * 60:7.1f} runs/min")
    print(
        f"  2-worker cluster:  {dask_s:7.2f} s  {runs / dask_s * 60:7.1f} runs/min"
        f"  (start-up {startup_s:.1f} s, not counted)"
    )
    print(f"  2-process pool:    {pool_s:7.2f} s  {runs / pool_s * 60:7.1f} runs/min (no Dask)")
    print(f"  ratio cluster / serial: {serial_s / dask_s:.2f}x (target >= 1.6)")
    print(f"  ratio pool / serial:    {serial_s / pool_s:.2f}x (what 2 processes get here)")
    print(f"  same table in all three: {same}")


def long_session(folder: Path, turns: int, lines: int) -> None:
    from pi_nb.research.compare import compare_strategies
    from pi_nb.research.synthetic import generate_session

    # Start-up: the imports (litellm …) and a first run of every strategy on a small session.
    warm = folder / "warm.jsonl"
    generate_session(8, seed=99, path=str(warm))
    started = time.perf_counter()
    _warm()
    first = compare_strategies([str(warm)], STRATEGIES, settings=_settings(), progress=False)
    startup_s = time.perf_counter() - started
    assert first["compacted"].all()
    path = folder / "long.jsonl"
    generate_session(turns, seed=7, path=str(path), tool_output_lines=lines)
    started = time.perf_counter()
    frame = compare_strategies([str(path)], STRATEGIES, progress=False)
    took = time.perf_counter() - started
    assert frame["error"].isna().all(), frame["error"].dropna().tolist()
    assert frame["compacted"].all()
    tokens = int(frame["tokens_before"].iloc[0])
    print(
        f"one session of {tokens} tokens x {len(STRATEGIES)} strategies: {took:.2f} s"
        f" (target <= 2 s; start-up + warm-up run {startup_s:.1f} s, not counted)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=24)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--long-turns", type=int, default=48)
    parser.add_argument("--long-lines", type=int, default=80, help="tool output lines")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds of each mode")
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}, load average: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="pi-nb-bench-study-") as folder:
        root = Path(folder)
        long_session(root, args.long_turns, args.long_lines)
        throughput(_sessions(root, args.sessions, args.turns), args.rounds)


if __name__ == "__main__":
    main()
