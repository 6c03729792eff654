"""Figures the reliability suite reports (printed at the end of the run; the README's
Guarantees section quotes them)."""

from __future__ import annotations

import json
import os
from collections import Counter

FIGURES: Counter[str] = Counter()

LABELS = {
    "kills": "SIGKILLs of a writing process survived",
    "kills_torn": "  of which tore a line mid-write (reported, then repaired)",
    "kills_complete_unterminated": "  of which left a complete line without its newline",
    "lock_contenders": "competing writer processes (lock)",
    "fuzz_cases": "hostile session files fuzzed (hypothesis examples)",
    "fuzz_rejected": "  of which refused as not a session (typed error)",
    "fuzz_skipped_lines": "  lines skipped and reported across them",
    "fuzz_entry_lists": "hostile entry lists projected (hypothesis examples)",
    "typed_cases": "sessions with wrongly typed fields run through every command / Session",
    "corpus_files": "corpus files loaded",
    "redaction_cases": "redaction cases checked",
    "faults": "provider / tool faults injected end to end",
    "oracle_checks": "file projections by Pi (1.3.0 and 1.6.0, each counted) compared",
    "store_concurrent_reads": "read-only opens while another process appended",
    "store_entries_appended_during_reads": "  entries appended meanwhile (all kept)",
    "store_thread_appends": "appends from two threads (one tree / two trees of a file)",
    "store_killed_creates_and_forks": "creates / forks killed mid-write (temp files cleaned)",
    "store_disk_full": "writes failed with ENOSPC (one line, nothing half-written)",
}


def add(name: str, count: int = 1) -> None:
    FIGURES[name] += count


def summary_lines() -> list[str]:
    lines = []
    for key, label in LABELS.items():
        if key in FIGURES:
            lines.append(f"{label}: {FIGURES[key]}")
    for key in sorted(FIGURES):
        if key not in LABELS:
            lines.append(f"{key}: {FIGURES[key]}")
    return lines


def dump() -> None:
    target = os.environ.get("PI_NB_RELIABILITY_FIGURES")
    if target and FIGURES:
        with open(target, "w", encoding="utf-8") as fh:
            json.dump(dict(FIGURES), fh, indent=1, sort_keys=True)
