"""Open + project + projected token estimate of a ~50,000-entry (~90 MB) session: pi_nb vs Pi 1.3.0.

    python bench/bench_open_project.py [--runs 5] [--entries 50000] [--profile]

Generates (once, deterministically) bench/out/session_50k.jsonl with pi_nb's SessionTree, then
times, on that same file, alternating fresh processes:

* pi_nb: ``SessionTree.open(path)`` + ``tree.projection()`` + ``tree.context_tokens()``
  (timed with ``time.perf_counter`` inside a fresh ``python`` process). pi_nb parses a
  message's body only when it is first needed, so this is also timed with every message of
  the context parsed (``projection.messages``), as when the context is first sent to a model;
* Pi 1.3.0: ``SessionManager.open(path)`` + ``buildSessionProjection()`` +
  ``estimateProjectedContextTokens(projection, getBranch())`` (timed with
  ``performance.now()`` inside a fresh ``node`` process, bench/pi_open_project.mjs).

Both timings exclude interpreter start-up and module loading (imports happen before the
clock starts); each run is a new process, so no cache survives between runs. The OS page
cache is warm for both (one discarded warm-up run each). Reports medians and pi_nb/Pi
(target <= 0.5). With ``--profile`` also prints a cProfile of the pi_nb work.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import gen_session  # noqa: E402

PI_NB_SCRIPT = r"""
import json, sys, time, warnings
from pi_nb.session.tree import SessionTree
import pi_nb.projection, pi_nb.tokens, pi_nb.messages, pi_nb.session.jsonl  # loaded before timing
warnings.simplefilter("error")
path = sys.argv[1]
t0 = time.perf_counter()
tree = SessionTree.open(path)
projection = tree.projection()
tokens = tree.context_tokens()
t1 = time.perf_counter()
bodies = projection.messages  # every message body parsed (the first send to a model does this)
t2 = time.perf_counter()
assert len(bodies) == projection.message_count
print(json.dumps({"ms": (t1 - t0) * 1000, "full_ms": (t2 - t0) * 1000,
                  "messages": projection.message_count,
                  "tokens": tokens.tokens, "lastUsageIndex": tokens.lastUsageIndex,
                  "entries": len(tree)}))
"""


def oracle_dir() -> Path | None:
    configured = os.environ.get("PI_ORACLE_DIR")
    candidates = [Path(configured)] if configured else [Path("/tmp/pi13"), REPO / ".pi-oracle"]
    for c in candidates:
        if (c / "node_modules" / "@earendil-works" / "pi-coding-agent" / "package.json").is_file():
            return c
    return None


def run_pi_nb(path: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", PI_NB_SCRIPT, str(path)], capture_output=True,
                          text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_pi(path: Path, pi_dir: Path) -> dict:
    env = {**os.environ, "PI_ORACLE_DIR": str(pi_dir)}
    proc = subprocess.run(["node", str(HERE / "pi_open_project.mjs"), str(path)],
                          capture_output=True, text=True, check=True, env=env)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def profile(path: Path) -> None:
    import cProfile
    import pstats

    from pi_nb.session.tree import SessionTree

    prof = cProfile.Profile()
    prof.enable()
    tree = SessionTree.open(path)
    tree.projection()
    tree.context_tokens()
    prof.disable()
    stats = pstats.Stats(prof)
    print("\n--- cProfile of pi_nb open + projection + context_tokens (tottime) ---")
    stats.sort_stats("tottime").print_stats(15)
    print("--- (cumulative) ---")
    stats.sort_stats("cumulative").print_stats(20)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--entries", type=int, default=50_000)
    ap.add_argument("--tool-scale", type=float, default=0.48,
                    help="scale of tool output sizes (0.48 gives ~90 MB at 50k entries)")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()

    name = f"session_{args.entries // 1000}k"
    path, meta = gen_session.cached(name, entries=args.entries, tool_scale=args.tool_scale)
    size_mb = path.stat().st_size / 1e6
    print(f"file      : {path} ({size_mb:.1f} MB, {meta['entries']} entries, "
          f"{meta['branches']} branches, {meta['compactions']} compactions, "
          f"{meta['edits']} context edits)")

    pi_dir = oracle_dir()
    if pi_dir is None or shutil.which("node") is None:
        print("Pi 1.3.0 not found (set PI_ORACLE_DIR) or node missing: timing pi_nb only")

    run_pi_nb(path)  # warm-up (page cache), discarded
    if pi_dir is not None:
        run_pi(path, pi_dir)
    ours, theirs = [], []
    for _ in range(args.runs):
        ours.append(run_pi_nb(path))
        if pi_dir is not None:
            theirs.append(run_pi(path, pi_dir))

    ms_ours = statistics.median(r["ms"] for r in ours)
    print(f"pi_nb     : median {ms_ours:8.1f} ms  runs {[round(r['ms']) for r in ours]}  "
          f"({ours[0]['messages']} messages, {ours[0]['tokens']} tokens)")
    if theirs:
        ms_pi = statistics.median(r["ms"] for r in theirs)
        print(f"Pi 1.3.0  : median {ms_pi:8.1f} ms  runs {[round(r['ms']) for r in theirs]}  "
              f"({theirs[0]['messages']} messages, {theirs[0]['tokens']} tokens)")
        same = all((a["messages"], a["tokens"], a["lastUsageIndex"])
                   == (b["messages"], b["tokens"], b["lastUsageIndex"])
                   for a, b in zip(ours, theirs, strict=True))
        print(f"same result (messages, tokens, lastUsageIndex): {'yes' if same else 'NO'}")
        ratio = ms_ours / ms_pi
        verdict = "meets" if ratio <= 0.5 else "MISSES"
        print(f"ratio pi_nb/Pi = {ratio:.2f} ({verdict} target <= 0.5)")
        full = statistics.median(r["full_ms"] for r in ours)
        print(f"with every message body parsed too: pi_nb {full:.1f} ms, "
              f"ratio {full / ms_pi:.2f} (pi_nb parses bodies on first use; Pi has them from "
              f"JSON.parse)")
    print("(times exclude interpreter start-up and module loading; each run a fresh process)")
    if args.profile:
        profile(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
