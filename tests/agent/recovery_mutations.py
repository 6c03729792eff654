"""Delete each guard of pi_nb/agent/recovery.py in turn (in a scratch copy of the package) and
run tests/agent/test_recovery.py against it: every mutation must fail at least one test.

Run from the repository root (not collected by pytest)::

    python tests/agent/recovery_mutations.py [--python PYTHON]

Prints one row per guard: the guard, the failing tests (or SURVIVED); exits 1 when a
mutation survives or a mutation no longer applies (the guard's code changed).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGET = os.path.join("pi_nb", "agent", "recovery.py")
TESTS = os.path.join("tests", "agent", "test_recovery.py")

# (guard, code as written, code with the guard deleted)
MUTATIONS: list[tuple[str, str, str]] = [
    ("disabled → no decision", "    if not limits.enabled:\n        return None\n    stop =", "    stop ="),
    ("skip an aborted reply after a run", 'if skip_aborted and stop == "aborted":\n        return None', "pass"),
    (
        "stale: reply before the latest compaction (position)",
        "if position < latest_compaction:\n                return None",
        "pass",
    ),
    (
        "stale: reply off the branch, older than the compaction (timestamp)",
        'if (message.get("timestamp") or 0) <= stamp:\n                return None',
        "pass",
    ),
    (
        "overflow only for the current model",
        'same_model = message.get("provider") == provider and message.get("model") == model_id',
        "same_model = True",
    ),
    (
        "explicit overflow only while the reply is not omitted",
        "(explicit and retained)",
        "explicit",
    ),
    (
        "overflow kind from the exception counts",
        '(error_kind == "overflow" or is_context_overflow(message))',
        "is_context_overflow(message)",
    ),
    (
        "silent overflow: no context edit after the reply (edit-after)",
        "usage_matches = projected and not edit_after",
        "usage_matches = projected",
    ),
    (
        "silent overflow: the reply is in the projection",
        "usage_matches = projected and not edit_after",
        "usage_matches = not edit_after",
    ),
    ("recoverable length stop → like overflow", "length = same_model and projected and", "length = False and"),
    (
        "length recovery only for a projected reply",
        "length = same_model and projected and",
        "length = same_model and",
    ),
    (
        "successful overflowing reply → compact, no retry",
        'if stop == "stop":  # a successful reply that overflowed: compact, nothing to retry',
        "if False:",
    ),
    ("one overflow recovery per user message (give up)", "if state.overflow_attempted:", "if False:"),
    ("the attempt is recorded", "state.overflow_attempted = True", "pass"),
    ("omit the failed reply's tool results too", "(entry_id, *tool_results)", "(entry_id,)"),
    ("threshold: context edits → projected re-estimate", "if has_edits:", "if False:"),
    (
        "threshold: stale usage source before the compaction",
        "if (-1 if source_position is None else source_position) < latest_compaction:\n                return None",
        "pass",
    ),
    ("threshold: request overhead when no usage", "            tokens += overhead()", "            pass"),
    ("threshold: the reply's own usage", "        tokens = direct", "        tokens = 0"),
    (
        "between turns: disabled → nothing",
        "    if not limits.enabled:\n        return None\n    if should_compact(projected",
        "    if should_compact(projected",
    ),
    (
        "between turns: W − R check",
        "should_compact(projected_tokens(tree, overhead).tokens, limits.window, limits.reserve)",
        "False",
    ),
    ("projected estimate adds the overhead", "extra = overhead()", "extra = 0"),
    (
        "overflow attempt resets on a user message",
        'if event.type == "message_start" and role == "user":\n            self.overflow_attempted = False',
        "pass",
    ),
    (
        "overflow attempt resets on a good reply",
        'if stop not in ("error", "length"):\n                self.overflow_attempted = False',
        "pass",
    ),
    (
        "…but not on a length stop",
        'if stop not in ("error", "length"):',
        'if stop != "error":',
    ),
    ("a good reply closes the retry sequence", 'if stop != "error" and self.retry_attempt > 0:', "if False:"),
    (
        "retry policy disabled → no retry",
        'if not policy.enabled or message.get("stopReason") != "error":',
        'if message.get("stopReason") != "error":',
    ),
    (
        "only error replies are retried",
        'if not policy.enabled or message.get("stopReason") != "error":',
        "if not policy.enabled:",
    ),
    (
        "an overflow is never retried",
        'if kind == "overflow" or is_context_overflow(message, window):\n            return False',
        "pass",
    ),
    ("the classified kind decides", 'if kind is not None:\n            return kind == "transient"', "pass"),
    ("at most max_retries", "if self.retry_attempt >= policy.max_retries:\n            return None", "pass"),
    (
        "exponential backoff",
        "delay_ms=int(policy.delay(self.retry_attempt) * 1000)",
        "delay_ms=int(policy.base_delay * 1000)",
    ),
    ("end_retry only when a retry is in progress", "if not self.retry_attempt:\n            return None", "pass"),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    with open(os.path.join(ROOT, TARGET), encoding="utf-8") as source:
        original = source.read()
    bad = 0
    with tempfile.TemporaryDirectory(prefix="recovery-mutations-") as scratch:
        # The package, the agent tests and the pytest settings, run from the scratch copy
        # (``python -m pytest`` puts the working folder first on sys.path).
        shutil.copytree(os.path.join(ROOT, "pi_nb"), os.path.join(scratch, "pi_nb"))
        shutil.copytree(os.path.join(ROOT, "tests", "agent"), os.path.join(scratch, "tests", "agent"))
        shutil.copytree(os.path.join(ROOT, "tests", "fixtures"), os.path.join(scratch, "tests", "fixtures"))
        shutil.copy(os.path.join(ROOT, "pyproject.toml"), scratch)
        for guard, code, mutated in MUTATIONS:
            if original.count(code) != 1:
                print(f"NOT APPLIED  {guard}: code not found exactly once")
                bad += 1
                continue
            with open(os.path.join(scratch, TARGET), "w", encoding="utf-8") as out:
                out.write(original.replace(code, mutated))
            run = subprocess.run(
                [args.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore", TESTS],
                cwd=scratch,
                env={**os.environ, "PYTHONPATH": scratch},
                capture_output=True,
                text=True,
            )
            failed = sorted(set(re.findall(r"FAILED \S+::(\w+)", run.stdout)))
            if run.returncode == 0:
                print(f"SURVIVED     {guard}")
                bad += 1
            elif not failed:  # the mutant did not even import: a broken mutation, not a catch
                print(f"BROKEN       {guard}: {run.stdout.strip().splitlines()[-1:]}")
                bad += 1
            else:
                print(f"caught       {guard}: {', '.join(failed)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
