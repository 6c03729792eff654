"""Regenerate pi_nb/samples/refactor_session.jsonl, the bundled demo session.

A realistic coding-agent session in Pi's format: tool calls and results, an error, a
compaction, a labelled branch point, a branch summary and a context edit. Deterministic
(fixed clock and ids), so the committed file only changes when this script does.
"""

from __future__ import annotations

import itertools
import os
import sys
from datetime import datetime, timedelta, timezone

from pi_nb.session import SessionTree

OUT = os.path.join(os.path.dirname(__file__), "..", "pi_nb", "samples", "refactor_session.jsonl")
START = datetime(2026, 3, 2, 9, 30, tzinfo=timezone.utc)
_tick = itertools.count()
_ids = itertools.count(0x1A2B3C00)


def clock() -> str:
    t = START + timedelta(seconds=7 * next(_tick))
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def ms() -> int:
    return int((START + timedelta(seconds=7 * next(_tick))).timestamp() * 1000)


def usage(inp: int, out: int) -> dict:
    return {
        "input": inp, "output": out, "cacheRead": 0, "cacheWrite": 0, "totalTokens": inp + out,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }


def assistant(text: str, calls=(), inp=0, out=0, stop=None) -> dict:
    content = [{"type": "text", "text": text}] if text else []
    for cid, name, args in calls:
        content.append({"type": "toolCall", "id": cid, "name": name, "arguments": args})
    return {
        "role": "assistant", "content": content, "api": "openai-completions",
        "provider": "openai", "model": "gpt-4o", "usage": usage(inp, out),
        "stopReason": stop or ("toolUse" if calls else "stop"), "timestamp": ms(),
    }


def result(cid: str, name: str, text: str, error: bool = False) -> dict:
    return {
        "role": "toolResult", "toolCallId": cid, "toolName": name,
        "content": [{"type": "text", "text": text}], "isError": error, "timestamp": ms(),
    }


def user(text: str) -> dict:
    return {"role": "user", "content": text, "timestamp": ms()}


PARSER = '''def parse_price(text):
    """Parse "12.50 EUR" into (Decimal, currency)."""
    amount, currency = text.split(" ")
    return float(amount), currency
'''


def main() -> int:
    if os.path.exists(OUT):
        os.remove(OUT)
    t = SessionTree.create(OUT, cwd="/home/ada/shop", session_id="0192f7a0-sample-refactor",
                           clock=clock, id_source=lambda: f"{next(_ids):08x}")
    t.append_model_change("openai", "gpt-4o")
    t.append_thinking_level_change("off")
    t.append_message(user(
        "parse_price in shop/pricing.py returns floats. Money must never be a float: "
        "use Decimal everywhere, and keep the public signature unchanged."))
    t.append_message(assistant("Let me look at the parser first.",
                               [("call_1", "read", {"path": "shop/pricing.py"})], 820, 40))
    t.append_message(result("call_1", "read", PARSER))
    t.append_message(assistant("It returns float(amount). I will switch to Decimal.",
                               [("call_2", "edit", {"path": "shop/pricing.py",
                                                    "oldText": "float(amount)",
                                                    "newText": "Decimal(amount)"})], 1010, 60))
    t.append_message(result("call_2", "edit", "Applied 1 replacement in shop/pricing.py"))
    t.append_message(assistant("Running the tests.",
                               [("call_3", "bash", {"command": "pytest -q tests/test_pricing.py"})],
                               1120, 30))
    log = "\n".join(f"tests/test_pricing.py::test_case_{i} PASSED" for i in range(1, 120))
    big = t.append_message(result(
        "call_3", "bash",
        log + "\nE   NameError: name 'Decimal' is not defined\n1 failed, 119 passed in 0.84s",
        error=True))
    t.append_message(assistant("The import is missing; adding `from decimal import Decimal`.",
                               [("call_4", "edit", {"path": "shop/pricing.py",
                                                    "oldText": "def parse_price",
                                                    "newText": "from decimal import Decimal\n\n"
                                                               "def parse_price"})], 3900, 70))
    t.append_message(result("call_4", "edit", "Applied 1 replacement in shop/pricing.py"))
    t.append_message(assistant("Fixed. All 120 tests pass now.",
                               [("call_5", "bash", {"command": "pytest -q"})], 4000, 25))
    t.append_message(result("call_5", "bash", "120 passed in 0.91s"))
    done = t.append_message(assistant(
        "parse_price now returns Decimal; the signature is unchanged and the suite is green.",
        (), 4050, 30))
    t.append_label(done["id"], "decimal-done")
    u2 = t.append_message(user("Now add a currency whitelist: only EUR, USD and GBP are valid."))
    t.append_message(assistant("I'll add a frozenset and raise ValueError for others.",
                               [("call_6", "edit", {"path": "shop/pricing.py",
                                                    "oldText": "amount, currency = text.split(\" \")",
                                                    "newText": "amount, currency = text.split(\" \")\n"
                                                               "    if currency not in CURRENCIES:\n"
                                                               "        raise ValueError(currency)"})],
                               2100, 80))
    t.append_message(result("call_6", "edit", "Applied 1 replacement in shop/pricing.py"))
    t.append_message(assistant("Whitelist added (EUR, USD, GBP).", (), 2200, 20))
    # A compaction keeping the currency turn verbatim.
    t.append_compaction(
        "## Goal\nMake shop/pricing.py handle money as Decimal; add a currency whitelist.\n\n"
        "## Constraints & Preferences\n- Money must never be a float\n"
        "- Keep the public signature of parse_price unchanged\n\n"
        "## Progress\n### Done\n- [x] parse_price returns Decimal (import added)\n"
        "- [x] 120 tests pass\n### In Progress\n- [ ] Currency whitelist\n### Blocked\n(none)\n\n"
        "## Key Decisions\n- **Decimal(amount)**: exact arithmetic for money\n\n"
        "## Next Steps\n1. Finish the whitelist\n\n"
        "## Critical Context\n- Error seen: NameError: name 'Decimal' is not defined\n\n"
        "<read-files>\nshop/pricing.py\n</read-files>\n\n"
        "<modified-files>\nshop/pricing.py\n</modified-files>",
        u2["id"], 4300,
        details={"readFiles": [], "modifiedFiles": ["shop/pricing.py"]},
    )
    t.append_message(user("Also support JPY, which has no minor unit."))
    t.append_message(assistant("Adding JPY with zero decimal places.", (), 2500, 40))
    # Go back to the finished Decimal work and explore another direction, leaving a summary.
    t.branch_with_summary(
        done["id"],
        "The user explored adding a currency whitelist (EUR, USD, GBP, later JPY) in "
        "shop/pricing.py; ValueError is raised for other currencies.",
        details={"readFiles": [], "modifiedFiles": ["shop/pricing.py"]},
    )
    t.append_message(user("Instead, write a short docstring explaining the Decimal choice."))
    t.append_message(assistant(
        "Done: the docstring says amounts are Decimal to avoid binary rounding errors.",
        [("call_7", "edit", {"path": "shop/pricing.py", "oldText": "(Decimal, currency)",
                              "newText": "(Decimal, currency); Decimal avoids rounding errors"})],
        4200, 50))
    t.append_message(result("call_7", "edit", "Applied 1 replacement in shop/pricing.py"))
    # The long pytest log is no longer useful: hide it from the context, keep the record.
    t.append_context_edit(big["id"], {"content": "[pytest log omitted: 1 failed (NameError: "
                                                 "Decimal not defined), 119 passed]"})
    t.append_session_info("Decimal prices")
    t.close()
    print(OUT, len(t.entries), "entries", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
