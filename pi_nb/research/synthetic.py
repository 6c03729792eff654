"""Generated long coding sessions with planted facts, reproducible from a seed.

Real transcripts are the point of the bench, but a study also needs long sessions of known
content: :func:`generate_session` writes one (in memory or to a file) where every turn reads
a file, edits it and runs the tests, and where constraints, errors, decisions and numbers
are planted so that probes have something to find. :func:`append_turns` continues any
session with more such turns (the fact-survival curve uses it between compactions).
Nothing calls a model; the same seed always gives the same session, byte for byte.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from ..entries import Message, empty_usage, iso_to_ms

if TYPE_CHECKING:
    from ..session.tree import SessionTree

__all__ = ["MODULES", "append_turns", "generate_session"]

#: The fictional project's files (path, main symbol).
MODULES = (
    ("billing/invoice.py", "InvoiceBuilder"),
    ("billing/tax_rules.py", "apply_vat"),
    ("api/routes.py", "register_routes"),
    ("api/auth.py", "verify_token"),
    ("db/models.py", "CustomerRecord"),
    ("db/migrations.py", "run_migrations"),
    ("workers/sync_job.py", "SyncWorker"),
    ("workers/retry.py", "backoff_delays"),
    ("reports/monthly.py", "render_monthly_report"),
    ("cli/main.py", "parse_cli_args"),
    ("search/index.py", "SearchIndex"),
    ("notify/email.py", "send_receipt"),
)
_CONSTRAINTS = (
    "Never change the public signature of `{symbol}`.",
    "You must keep Python 3.10 compatibility in {path}.",
    "Always log amounts in cents, never as floats.",
    "Do not add new dependencies for this.",
    "Only touch {path} for this step.",
    "Keep every request under {limit} ms.",
)
_ERRORS = (
    "TypeError: {symbol}() got an unexpected keyword argument 'currency'",
    "KeyError: 'tenant_id'",
    "AssertionError: expected {limit} rows, got {other}",
    "TimeoutError: upstream did not answer within {limit} ms",
    "ValueError: invalid literal for int() with base 10: 'n/a'",
)
_DECISIONS = (
    "I decided to cache the result in {symbol} instead of querying twice, because the "
    "second query doubled the latency.",
    "I chose a dataclass for {symbol} instead of a dict because the fields are fixed.",
    "I will use an explicit timeout of {limit} ms because the default waits forever.",
    "I decided to keep {symbol} synchronous instead of adding asyncio, because callers are "
    "all synchronous.",
)
_REQUESTS = (
    "Please refactor `{symbol}` in {path} so it is easier to test.",
    "There is a bug in {path}: `{symbol}` mishandles empty input. Fix it.",
    "Add input validation to `{symbol}` in {path}.",
    "Speed up `{symbol}` in {path}; it is too slow on large tenants.",
    "Add logging around `{symbol}` in {path}.",
)


def _stable_ids(seed: str) -> Callable[[], str]:
    counter = 0

    def draw() -> str:
        nonlocal counter
        counter += 1
        return hashlib.sha1(f"{seed}:{counter}".encode()).hexdigest()[:8]

    return draw


class _Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> str:
        self.now += timedelta(seconds=7)
        return self.now.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _code(rng: random.Random, path: str, symbol: str, lines: int) -> str:
    """A plausible source file of ``lines`` lines that defines ``symbol``."""
    out = [f'"""{path}: part of the demo shop backend."""', "", "import logging", ""]
    is_class = symbol[0].isupper()
    out.append(f"class {symbol}:" if is_class else f"def {symbol}(items, *, limit=100):")
    body_names = ("total", "rows", "tenant", "amount", "cursor", "batch", "result")
    while len(out) < lines:
        name = rng.choice(body_names)
        value = rng.randint(1, 999)
        out.append(f"    {name}_{len(out)} = {name} + {value}  # step {len(out)}")
    return "\n".join(out[:lines]) + "\n"


def _assistant(text: str, calls: list[dict[str, Any]], model: str, context: int) -> Message:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += calls
    usage = empty_usage()
    usage["input"] = context
    usage["output"] = math.ceil((len(text) + sum(len(str(c)) for c in calls)) / 4)
    usage["totalTokens"] = usage["input"] + usage["output"]
    return {
        "role": "assistant",
        "content": content,
        "api": "openai-completions",
        "provider": "openai",
        "model": model,
        "usage": usage,
        "stopReason": "toolUse" if calls else "stop",
    }


def append_turns(
    tree: SessionTree,
    turns: int,
    *,
    seed: int = 0,
    tool_output_lines: int = 40,
    model: str = "gpt-4o",
    start: int = 0,
) -> list[str]:
    """Append ``turns`` generated turns at the current leaf; returns the new entry ids.

    A turn: a user request (sometimes with a constraint), the assistant reads a file
    (``tool_output_lines`` lines of code come back), edits it, runs the tests (a tally,
    or a planted error), and reports (sometimes with a decision and a next step).
    ``start`` numbers the turns (so facts differ between calls).
    """
    rng = random.Random(f"pi-nb-synthetic:{seed}:{start}")
    added: list[str] = []

    def add(message: Message) -> None:
        leaf = tree.leaf
        previous = iso_to_ms(leaf.get("timestamp")) if leaf is not None else None
        message.setdefault("timestamp", (previous or 1_767_600_000_000) + 1000)
        added.append(tree.append_message(message)["id"])

    for n in range(start, start + turns):
        path, symbol = MODULES[(n + seed) % len(MODULES)]
        limit = rng.choice((250, 300, 500, 750, 1200))
        fill = {"path": path, "symbol": symbol, "limit": limit, "other": limit - rng.randint(1, 9)}
        request = rng.choice(_REQUESTS).format(**fill)
        if n % 3 == 0:
            request += " " + rng.choice(_CONSTRAINTS).format(**fill)
        context = tree.context_tokens().tokens if tree.leaf_id else 0
        add({"role": "user", "content": request})
        call = f"call_{n}_read"
        reads = [{"type": "toolCall", "id": call, "name": "read", "arguments": {"path": path}}]
        doc = f"docs/{path.split('/')[0]}.md"
        if n % 3 == 2:  # also consult the package notes (a file only read, never edited)
            reads.append(
                {
                    "type": "toolCall",
                    "id": f"{call}_doc",
                    "name": "read",
                    "arguments": {"path": doc},
                }
            )
        add(_assistant(f"Let me read {path} first.", reads, model, context))
        add(
            {
                "role": "toolResult",
                "toolCallId": call,
                "toolName": "read",
                "content": [{"type": "text", "text": _code(rng, path, symbol, tool_output_lines)}],
                "isError": False,
            }
        )
        if n % 3 == 2:
            notes = f"# {doc}\n\n`{symbol}` is owned by the {path.split('/')[0]} team."
            add(
                {
                    "role": "toolResult",
                    "toolCallId": f"{call}_doc",
                    "toolName": "read",
                    "content": [{"type": "text", "text": notes}],
                    "isError": False,
                }
            )
        call = f"call_{n}_edit"
        old, new = f"def {symbol}(", f"def {symbol}(  # reviewed turn {n}\n"
        add(
            _assistant(
                "",
                [
                    {
                        "type": "toolCall",
                        "id": call,
                        "name": "edit",
                        "arguments": {"path": path, "oldText": old, "newText": new},
                    }
                ],
                model,
                context + 400,
            )
        )
        add(
            {
                "role": "toolResult",
                "toolCallId": call,
                "toolName": "edit",
                "content": [{"type": "text", "text": f"Applied 1 replacement in {path}"}],
                "isError": False,
            }
        )
        call = f"call_{n}_test"
        test = f"tests/test_{path.split('/')[-1]}"
        add(
            _assistant(
                "Running the tests.",
                [
                    {
                        "type": "toolCall",
                        "id": call,
                        "name": "bash",
                        "arguments": {"command": f"pytest -q {test}"},
                    }
                ],
                model,
                context + 500,
            )
        )
        failed = n % 4 == 1
        passed = rng.randint(12, 140)
        if failed:
            error = rng.choice(_ERRORS).format(**fill)
            output = (
                f"F.\nFAILED {test}::test_{symbol.lower()} - {error}\n1 failed, {passed} passed"
            )
        else:
            output = f"{'.' * 8}\n{passed} passed in 0.{rng.randint(10, 99)}s"
        add(
            {
                "role": "toolResult",
                "toolCallId": call,
                "toolName": "bash",
                "content": [{"type": "text", "text": output}],
                "isError": failed,
            }
        )
        report = (
            f"The test for `{symbol}` still fails; I need to look at the fixture."
            if failed
            else f"Done: `{symbol}` in {path} is updated and {passed} tests pass."
        )
        if n % 2 == 0:
            report += " " + rng.choice(_DECISIONS).format(**fill)
        if n % 5 == 4:
            nxt = MODULES[(n + seed + 1) % len(MODULES)]
            report += f" Next I will review {nxt[0]}."
        add(_assistant(report, [], model, context + 600))
    return added


def generate_session(
    turns: int = 30,
    *,
    seed: int = 0,
    path: str | None = None,
    tool_output_lines: int = 40,
    cwd: str = "/work/demo-shop",
    model: str = "gpt-4o",
) -> SessionTree:
    """A long, deterministic coding session (``turns`` turns of 7 or 8 messages each).

    Written to ``path`` when given (it must not exist), else kept in memory. With the
    defaults, 30 turns are about 25 k tokens of context.
    """
    from ..session.tree import SessionTree

    start = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc) + timedelta(days=seed % 365)
    clock = _Clock(start)
    ids = _stable_ids(f"session:{seed}:{turns}:{tool_output_lines}")
    session_id = hashlib.sha1(f"synthetic:{seed}:{turns}".encode()).hexdigest()[:16]
    if path is not None:
        tree = SessionTree.create(path, cwd, session_id=session_id, clock=clock, id_source=ids)
    else:
        header = {
            "type": "session",
            "version": 3,
            "id": session_id,
            "timestamp": clock(),
            "cwd": cwd,
        }
        tree = SessionTree(header, [], None, clock=clock, id_source=ids)
    tree.append_model_change("openai", model)
    append_turns(tree, turns, seed=seed, tool_output_lines=tool_output_lines, model=model)
    return tree
