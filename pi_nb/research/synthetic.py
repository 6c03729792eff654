"""Generated long coding sessions with planted facts, reproducible from a seed.

Generated sessions carry a ``custom`` entry of type :data:`SYNTHETIC_TYPE`;
:func:`session_source` tells them from real transcripts (``"synthetic"`` / ``"real"``).

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
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from ..entries import Message, empty_usage, iso_to_ms
from .importers._base import stable_ids

if TYPE_CHECKING:
    from ..session.tree import SessionTree

__all__ = ["MODULES", "SYNTHETIC_TYPE", "append_turns", "generate_session", "session_source"]

#: customType of the entry that marks a generated session.
SYNTHETIC_TYPE = "pi_nb.synthetic"

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
# Every fact has several phrasings (picked by the seed), none of them using the trigger words
# a keyword summarizer looks for (must / never / always / decided / because / next …): a
# summarizer scores on these sessions by keeping facts, not by matching its own rules.
_CONSTRAINTS = (
    (
        "The public signature of `{symbol}` stays exactly as it is.",
        "Callers depend on the signature of `{symbol}`, so leave it untouched.",
        "Changing how `{symbol}` is called is off the table.",
    ),
    (
        "{path} has to keep working on Python 3.10.",
        "Python 3.10 compatibility in {path} is a hard requirement.",
    ),
    (
        "Amounts are logged in cents, not as floats.",
        "Log money as integer cents; floats are not acceptable.",
    ),
    (
        "No new dependencies for this, please.",
        "The dependency list stays as it is for this change.",
    ),
    (
        "Leave every file except {path} alone for this step.",
        "This step touches {path} and nothing else.",
    ),
    (
        "Every request has to finish within {limit} ms.",
        "The latency budget per request is {limit} ms.",
    ),
)
_ERRORS = (
    "TypeError: {symbol}() got an unexpected keyword argument 'currency'",
    "KeyError: 'tenant_id'",
    "AssertionError: expected {limit} rows, got {other}",
    "TimeoutError: upstream did not answer within {limit} ms",
    "ValueError: invalid literal for int() with base 10: 'n/a'",
)
_DECISIONS = (
    (
        "Caching the result in {symbol} avoids the second query, which doubled the latency.",
        "{symbol} now keeps its result in a cache, as querying twice doubled the latency.",
    ),
    (
        "{symbol} gets a dataclass rather than a dict, since its fields are fixed.",
        "A dataclass fits {symbol} better than a dict: the set of fields is fixed.",
    ),
    (
        "An explicit timeout of {limit} ms goes in, as the default one waits forever.",
        "The call gets a {limit} ms timeout; left to the default it waits forever.",
    ),
    (
        "{symbol} stays synchronous rather than moving to asyncio, since every caller is "
        "synchronous.",
        "Moving {symbol} to asyncio buys nothing here: all of its callers are synchronous.",
    ),
)
_PLANS = (
    "{path} is the file to look at after this.",
    "Up later: a review of {path}.",
    "A pass over {path} comes after this one.",
)
_GREEN = (
    "`{symbol}` in {path} is in shape: {passed} tests pass.",
    "{passed} tests pass with the new `{symbol}`.",
    "All {passed} tests pass for {path}.",
)
_RED = (
    "The test for `{symbol}` fails; the fixture needs a look.",
    "`{symbol}` breaks its test; the fixture is suspect.",
)
_REQUESTS = (
    (
        "Please refactor `{symbol}` in {path} so it is easier to test.",
        "`{symbol}` in {path} is hard to test; restructure it.",
    ),
    (
        "There is a bug in {path}: `{symbol}` mishandles empty input. Fix it.",
        "`{symbol}` in {path} breaks on empty input; please repair it.",
    ),
    (
        "Add input validation to `{symbol}` in {path}.",
        "`{symbol}` in {path} accepts garbage; validate its input.",
    ),
    (
        "Speed up `{symbol}` in {path}; it is too slow on large tenants.",
        "`{symbol}` in {path} is slow for large tenants. Make it faster.",
    ),
    (
        "Add logging around `{symbol}` in {path}.",
        "I need log lines around `{symbol}` in {path}.",
    ),
)


def _phrase(rng: random.Random, phrasings: tuple[str, ...], fill: dict[str, Any]) -> str:
    """One of a fact's phrasings, chosen by the seeded generator."""
    return rng.choice(phrasings).format(**fill)


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
        request = _phrase(rng, rng.choice(_REQUESTS), fill)
        if n % 3 == 0:
            request += " " + _phrase(rng, rng.choice(_CONSTRAINTS), fill)
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
        fill["passed"] = passed
        report = _phrase(rng, _RED if failed else _GREEN, fill)
        if n % 2 == 0:
            report += " " + _phrase(rng, rng.choice(_DECISIONS), fill)
        if n % 5 == 4:
            after = MODULES[(n + seed + 1) % len(MODULES)][0]
            report += " " + _phrase(rng, _PLANS, {**fill, "path": after})
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
    ids = stable_ids(f"session:{seed}:{turns}:{tool_output_lines}")
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
    # Marks the session as generated, so results on it are reported apart from real ones.
    tree.append_custom(SYNTHETIC_TYPE, {"seed": seed, "turns": turns})
    append_turns(tree, turns, seed=seed, tool_output_lines=tool_output_lines, model=model)
    return tree


def session_source(tree: SessionTree) -> str:
    """``"synthetic"`` for a session made by :func:`generate_session`, else ``"real"``."""
    for entry in tree.entries:
        if entry.get("type") == "custom" and entry.get("customType") == SYNTHETIC_TYPE:
            return "synthetic"
    return "real"
