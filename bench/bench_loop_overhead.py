"""Per-turn overhead of the agent loop, excluding the model call, at 1,000 vs 100,000 entries.

    python bench/bench_loop_overhead.py [--turns 200]

For each size a session is generated (deterministically, into bench/out/) whose history has
that many entries and ends in a compaction, as a long real session does: the context the
model sees stays small while the history grows. It is opened with ``Session.open`` (not
timed); then each timed turn is a full ``Session.prompt`` — threshold check, projection,
token estimate, transformContext → convert → normalize, persistence of the user message
and the reply — with the model replaced by a function that answers instantly. Both sizes
run in this one process, one after the other. Prints the median per turn and the ratio
100k / 1k (target: flat, <= 1.5).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

from pi_nb.agent import Session
from pi_nb.session.tree import SessionTree

OUT = Path(__file__).resolve().parent / "out"


def _usage(total: int) -> dict:
    return {"input": total - 20, "output": 20, "cacheRead": 0, "cacheWrite": 0,
            "totalTokens": total,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}


def generate(path: Path, entries: int) -> Path:
    """A linear session of ``entries`` entries: user/assistant turns with a compaction every
    500 entries keeping the last turn."""
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    tree = SessionTree.create(tmp, cwd=str(OUT))
    last_user = None
    while len(tree) < entries:
        i = len(tree)
        last_user = tree.append_message({"role": "user", "content": f"step {i}: " + "x " * 60,
                                         "timestamp": i})
        tree.append_message({"role": "assistant", "content": [{"type": "text", "text": "ok " * 40}],
                             "api": "bench", "provider": "bench", "model": "bench",
                             "usage": _usage(3000), "stopReason": "stop", "timestamp": i + 1})
        if len(tree) % 500 < 2:
            tree.append_compaction("## Goal\nbench\n", last_user["id"], 3000)
    tree.append_compaction("## Goal\nbench\n", last_user["id"], 3000)
    tree.close()
    tmp.rename(path)
    return path


def instant_model(model, messages, **kwargs):
    return {"role": "assistant", "content": [{"type": "text", "text": "done"}], "api": "bench",
            "provider": "bench", "model": "bench", "usage": _usage(len(messages) * 50 + 100),
            "stopReason": "stop", "timestamp": int(time.time() * 1000)}


def measure(path: Path, turns: int) -> list[float]:
    work = path.with_name(path.stem + "-run.jsonl")
    work.write_bytes(path.read_bytes())
    session = Session.open(work, model="bench/instant", window=1_000_000, reserve=1000,
                           keep=500, complete=instant_model, no_tools=True)
    session.prompt("warm up")
    times = []
    for i in range(turns):
        gc.disable()
        start = time.perf_counter()
        session.prompt(f"turn {i}")
        times.append(time.perf_counter() - start)
        gc.enable()
    session.tree.close()
    work.unlink()
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args(argv)
    results = {}
    for size in (1_000, 100_000):
        path = generate(OUT / f"loop_{size}.jsonl", size)
        times = measure(path, args.turns)
        results[size] = statistics.median(times)
        print(f"{size:>7} entries: median {results[size] * 1e3:.3f} ms per turn "
              f"(mean {statistics.fmean(times) * 1e3:.3f} ms, {args.turns} turns)")
    ratio = results[100_000] / results[1_000]
    print(f"ratio 100k/1k: {ratio:.2f} (target <= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
