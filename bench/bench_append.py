"""Per-append cost of keeping the projection and token totals current, at 1,000 vs 100,000 entries.

    python bench/bench_append.py [--appends 3000] [--profile]

For each size, a session with that many existing entries (generated once, deterministically,
into bench/out/ with small tool outputs) is opened with ``SessionTree.open``; one projection
and token estimate are computed (the one-time O(n) build, not timed); then each timed step is

    tree.append_message(m); tree.projection(); tree.context_tokens()

with m cycling user → assistant (tool call, usage) → toolResult → assistant (usage). The
append writes its line to the file, as in real use. Both sizes are measured in this one run,
one after the other (the small tree is dropped first). Reports the median and mean per append
and the ratio 100k / 1k (target <= 1.5).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import gen_session  # noqa: E402

from pi_nb.session.tree import SessionTree  # noqa: E402


def _messages(i: int) -> dict:
    usage = {"input": 900 + i, "output": 50, "cacheRead": 40_000, "cacheWrite": 0,
             "totalTokens": 40_950 + i,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
    k = i % 4
    if k == 0:
        return {"role": "user", "content": f"please continue with step {i} " * 8, "timestamp": i}
    if k == 1:
        return {"role": "assistant", "content": [
            {"type": "text", "text": f"Reading file {i}."},
            {"type": "toolCall", "id": f"call_{i}", "name": "read",
             "arguments": {"path": f"src/mod{i}.py"}}],
            "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
            "usage": usage, "stopReason": "toolUse", "timestamp": i}
    if k == 2:
        return {"role": "toolResult", "toolCallId": f"call_{i - 1}", "toolName": "read",
                "content": [{"type": "text", "text": f"line {i}\n" * 150}], "isError": False,
                "timestamp": i}
    return {"role": "assistant", "content": [{"type": "text", "text": f"Done with {i}."}],
            "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
            "usage": usage, "stopReason": "stop", "timestamp": i}


def measure(size: int, appends: int) -> dict:
    src, meta = gen_session.cached(f"append_{size}", entries=size, tool_scale=0.05,
                                   compactions=2, edits=10)
    work = src.with_name(f"append_{size}.work.jsonl")
    work.write_bytes(src.read_bytes())
    tree = SessionTree.open(work)
    t0 = time.perf_counter()
    tree.projection()
    tree.context_tokens()
    build_ms = (time.perf_counter() - t0) * 1000
    messages = [_messages(i) for i in range(appends)]
    samples = []
    clock = time.perf_counter_ns
    for m in messages:
        t = clock()
        tree.append_message(m)
        tree.projection()
        tree.context_tokens()
        samples.append(clock() - t)
    tree.close()
    check = SessionTree.open(work)
    fresh = check.context_tokens().to_dict()
    assert fresh == tree.context_tokens().to_dict(), "incremental tokens differ from a fresh build"
    work.unlink()
    samples_us = [s / 1000 for s in samples]
    return {
        "size": len(check) - appends,
        "bytes": meta["bytes"],
        "build_ms": build_ms,
        "median_us": statistics.median(samples_us),
        "mean_us": statistics.fmean(samples_us),
        "p95_us": sorted(samples_us)[int(0.95 * len(samples_us))],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--appends", type=int, default=3000)
    ap.add_argument("--profile", action="store_true", help="cProfile the 100k appends")
    args = ap.parse_args()
    results = []
    for size in (1_000, 100_000):
        gc.collect()
        results.append(measure(size, args.appends))
        r = results[-1]
        print(f"{r['size']:>7} entries ({r['bytes'] / 1e6:5.1f} MB): first build {r['build_ms']:7.1f} ms; "
              f"per append median {r['median_us']:7.1f} us, mean {r['mean_us']:7.1f} us, "
              f"p95 {r['p95_us']:7.1f} us")
    small, big = results
    ratio = big["median_us"] / small["median_us"]
    mean_ratio = big["mean_us"] / small["mean_us"]
    verdict = "meets" if ratio <= 1.5 else "MISSES"
    print(f"ratio 100k/1k: median {ratio:.2f} ({verdict} target <= 1.5), mean {mean_ratio:.2f}")
    if args.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        measure(100_000, args.appends)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    return 0


if __name__ == "__main__":
    sys.exit(main())
