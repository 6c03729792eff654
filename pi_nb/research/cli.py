"""``pi-nb import`` and ``pi-nb compare``: the research API from a terminal.

The functions here take plain arguments and return an exit status (0 ok, 2 for a user
mistake, printed as one line on stderr), so the main ``pi-nb`` parser only has to wire them:

    pi-nb import {pi,claude-code,codex,openai} SRC -o OUT.jsonl
    pi-nb compare FILE... --strategies NAMES --model M [--judge J] [--replay] [--json|--csv]
    pi-nb compare FILE... --dry-run     (planned calls, tokens and cost; nothing is sent)
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from typing import Any

from .compare import SIZE_COLUMNS

__all__ = ["compare_command", "import_command"]

#: Columns printed by ``pi-nb compare`` as a table (JSON and CSV carry every column).
TABLE_COLUMNS = (
    "session",
    "source",
    "strategy",
    "summarizer",
    *SIZE_COLUMNS,
    "model_calls",
    "model_calls_cached",
    "cost",
    "probe_recall",
    "probe_artifact",
    "probe_continuation",
    "probe_decision",
    "probe_needed_later",
    "probe_all",
    "reason",
    "error",
)
#: Shown in the table only when the study asked for them.
JUDGE_COLUMNS = ("judge_score", "judge_error")
REPLAY_COLUMNS = ("continuation_agreement", "matches_actual")


def _fail(command: str, message: Any) -> int:
    text = str(message).strip().splitlines()[0] if str(message).strip() else type(message).__name__
    sys.stderr.write(f"pi-nb {command}: error: {text}\n")
    return 2


def import_command(
    kind: str,
    src: str,
    out: str,
    *,
    overwrite: bool = False,
    costs: bool = False,
) -> int:
    """Import transcript ``src`` (format ``kind``, or ``auto``) into the Pi session ``out``.

    Prints the import report's one-line summary and the output path.
    """
    import warnings

    from ..session.jsonl import SessionError, SessionLoadWarning
    from .importers import (
        FORMATS,
        TranscriptImportError,
        detect_format,
        existing_source,
        import_transcript,
    )

    if kind != "auto" and kind not in FORMATS:
        return _fail("import", f"unknown format {kind!r} (choose from {', '.join(FORMATS)})")
    if not out:
        return _fail("import", "an output file is required (-o OUT.jsonl)")
    # Only the transcript importers price usage; a Pi file already carries its costs.
    options: dict[str, Any] = {"overwrite": overwrite}
    try:
        if costs:
            existing_source(src)
            if (kind if kind != "auto" else detect_format(src)) == "pi":
                return _fail("import", "--costs does not apply to a Pi session (it keeps its own costs)")
            options["costs"] = True
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SessionLoadWarning)
            result = import_transcript(src, out, kind, **options)
    except (TranscriptImportError, SessionError, OSError, ValueError) as exc:
        return _fail("import", exc)
    print(result.report.summary())
    print(f"wrote {result.report.output}")
    for note in result.report.cost_notes:  # the file keeps Pi's 0: say it is unknown
        sys.stderr.write(f"pi-nb import: note: {note}\n")
    return 0


def _looks_like_session(path: str) -> bool:
    """The first non-blank line is a Pi session header."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.strip():
                try:
                    header = json.loads(line)
                except ValueError:
                    return False
                return isinstance(header, dict) and header.get("type") == "session"
    return False


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value


def _write_records(frame: Any, fmt: str) -> bool:
    """Every column of ``frame`` on stdout as JSON records (NaN as null) or CSV; False for
    the table format, which each command prints its own way."""
    if fmt == "json":
        records = [
            {k: _jsonable(v) for k, v in row.items()} for row in frame.to_dict(orient="records")
        ]
        sys.stdout.write(json.dumps(records, ensure_ascii=False) + "\n")
    elif fmt == "csv":
        frame.to_csv(sys.stdout, index=False)
    else:
        return False
    return True


def _reasons(frame: Any, keep: int) -> list[str]:
    """Why a row's figures are what they are: the strategy's note, why it has no probes
    (or no needed-later probes), why the replay could not say whether the steps agree."""
    reasons = []
    for row in frame.to_dict(orient="records"):
        parts = []
        note = row.get("note")
        if isinstance(note, str) and note:
            parts.append(note)
        if not row.get("error") and not row.get("probes"):
            parts.append(f"no probes: nothing to cut at keep={keep}")
        elif not row.get("error") and isinstance(row.get("needed_later_note"), str):
            parts.append(f"needed_later: {row['needed_later_note']}")
        if isinstance(row.get("agreement_note"), str):
            parts.append(f"agreement: {row['agreement_note']}")
        reasons.append("; ".join(parts) or "-")
    return reasons


def _print_plan(frame: Any, fmt: str) -> int:
    """The dry run's plan on stdout (a table with a total line, or JSON / CSV); its notes
    (unknown prices, how the estimate was made) on stderr."""
    import pandas as pd

    if not _write_records(frame, fmt):
        table = frame.drop(columns=["cost_note"]).assign(error=frame["error"].fillna("-"))
        # NaN stays NaN in the total: one unknown price makes the total unknown.
        numbers = [c for c in table.columns if c not in ("session", "strategy", "error")]
        total = {c: table[c].sum(skipna=False) for c in numbers}
        table = pd.concat(
            [table, pd.DataFrame([{"session": "TOTAL", "strategy": "", "error": "", **total}])],
            ignore_index=True,
        )
        text = table.to_string(index=False, float_format=lambda v: f"{v:.4g}", na_rep="-")
        sys.stdout.write(text + "\n")
        sys.stderr.write("pi-nb compare: dry run: no model was called\n")
    for note in frame.attrs.get("notes", []):
        sys.stderr.write(f"pi-nb compare: note: {note}\n")
    return 0


def compare_command(
    files: Sequence[str],
    strategies: str | Sequence[str] | None,
    model: str,
    fmt: str = "table",
    *,
    keep_recent_tokens: int | None = None,
    reserve_tokens: int | None = None,
    cache_dir: str | None = None,
    jobs: int = 1,
    price_model: str | None = None,
    judge_model: str | None = None,
    judge_grader: str = "judge",
    at: str | None = None,
    replay: bool = False,
    api_base: str | None = None,
    window: int | None = None,
    dry_run: bool = False,
) -> int:
    """Compare strategies on session files and print the table (``fmt``: table, json, csv).

    ``judge_model``: an LLM judge grades the probes (``judge_score`` 0–5); ``judge_grader``
    ``"match"`` string-matches its answers instead. ``at``: the compaction point (an entry
    id, or a branch index such as ``-20``). ``replay``: continuation replay. The study's
    notices (unknown prices, judge failures, the extractive stand-in) go to stderr.

    ``strategies`` is a list of specs or one comma-separated string (``"pi,mask:3"`` —
    use ``;`` between strategies when a spec itself has commas); None runs the defaults.
    ``jobs`` > 1 runs in a process pool. ``api_base``: the summaries go to that
    OpenAI-compatible server (model rule and window note as for ``pi-nb prompt``). ``dry_run``: print the plan instead — per
    (session, strategy) the model calls, estimated input tokens and cost — and call nothing.
    """
    import os

    from ..compaction import CompactionSettings, SettingsError
    from .compare import compare_strategies
    from .strategies import DEFAULT_STRATEGIES, get_strategy

    if fmt not in ("table", "json", "csv"):
        return _fail("compare", f"unknown output format {fmt!r} (table, json or csv)")
    if not files:
        return _fail("compare", "no session files given")
    for path in files:
        if not os.path.isfile(path):
            return _fail("compare", f"{path}: no such session file")
        if not _looks_like_session(path):
            return _fail(
                "compare",
                f"{path}: not a Pi session file (import it first: pi-nb import KIND {path} -o OUT)",
            )
    if isinstance(strategies, str):
        separator = ";" if ";" in strategies else ","
        specs = [s.strip() for s in strategies.split(separator) if s.strip()]
    else:
        specs = list(strategies or DEFAULT_STRATEGIES)
    try:
        compactors = [get_strategy(spec) for spec in specs]
        defaults = CompactionSettings()
        settings = CompactionSettings(
            keep_recent_tokens=defaults.keep_recent_tokens
            if keep_recent_tokens is None
            else keep_recent_tokens,
            reserve_tokens=defaults.reserve_tokens if reserve_tokens is None else reserve_tokens,
        )
    except (ValueError, TypeError, SettingsError) as exc:
        return _fail("compare", exc)
    point: str | int | None = at
    if isinstance(at, str) and at.lstrip("-").isdigit():
        point = int(at)
    completion = None
    if api_base:
        from ..llm import Endpoint, endpoint_window, served_model

        completion = Endpoint(api_base)
        model = served_model(model, api_base)
        if window is None:
            window, note = endpoint_window(model, api_base)
            if note:
                sys.stderr.write(f"pi-nb compare: note: {note}\n")
    executor = None
    try:
        if jobs > 1:
            from concurrent.futures import ProcessPoolExecutor

            executor = ProcessPoolExecutor(jobs)
        frame = compare_strategies(
            list(files),
            compactors,
            model,
            settings=settings,
            executor=executor,
            cache_dir=cache_dir,
            progress=sys.stderr.isatty(),
            price_model=price_model,
            judge_model=judge_model,
            judge_grader=judge_grader,
            at=point,
            replay=replay,
            completion=completion,
            window=window,
            dry_run=dry_run,
        )
    except Exception as exc:  # not a session file, unknown model …
        return _fail("compare", exc)
    finally:
        if executor is not None:
            executor.shutdown()
    if dry_run:
        return _print_plan(frame, fmt)
    if not _write_records(frame, fmt):
        columns = [
            *TABLE_COLUMNS[:-1],
            *(JUDGE_COLUMNS if judge_model else ()),
            *(REPLAY_COLUMNS if replay else ()),
            TABLE_COLUMNS[-1],
        ]
        table = frame.assign(
            reason=_reasons(frame, settings.keep_recent_tokens), error=frame["error"].fillna("-")
        )[columns]
        text = table.to_string(index=False, float_format=lambda v: f"{v:.3g}", na_rep="-")
        sys.stdout.write(text + "\n")
        if (frame["probes"].fillna(0) == 0).any():
            sys.stderr.write(
                "pi-nb compare: '-' in the probe columns: Pi's cut at keepRecentTokens="
                f"{settings.keep_recent_tokens} removes nothing from some session(s), so there "
                "is no removed fact to probe (pi-nb cut FILE --keep N shows where a cut falls; "
                "--keep N below the context's tokens makes one)\n"
            )
    for note in frame.attrs.get("notes", []):
        sys.stderr.write(f"pi-nb compare: note: {note}\n")
    failed = frame["error"].notna().sum()
    if failed:
        sys.stderr.write(f"pi-nb compare: {failed} run(s) failed (see the error column)\n")
    return 0
