"""The fixed history the research tests run strategies and probes on."""

from __future__ import annotations

from typing import Any

from pinb_testkit import FIXTURES, assistant, tool_call, tool_result, user

TRANSCRIPTS = FIXTURES / "transcripts"

#: Long tool outputs (well above the masking placeholder's size).
PRICING_SRC = "def parse_price(text):\n" + "".join(
    f"    step_{i} = compute(text, {i})  # keep the money exact\n" for i in range(40)
)
PYTEST_LOG = (
    "".join(f"tests/test_pricing.py::test_case_{i} PASSED\n" for i in range(30))
    + "FAILED tests/test_pricing.py::test_decimal - NameError: name 'Decimal' is not defined\n"
    + "1 failed, 30 passed in 0.42s\n"
)
CURRENCY_SRC = "".join(f"CURRENCY_{i} = 'C{i:03d}'\n" for i in range(60))


def build_history(tree: Any) -> dict[str, str]:
    """A fixed coding history on ``tree``; returns {name: entry id}.

    Five tool results: r1 (long read), r2 (short edit ack), r3 (long pytest log with an
    error), r4 (long read), r5 (long pytest log). Assistant replies carry no usage, so
    context sizes are pure estimates.
    """
    ids: dict[str, str] = {}

    def add(name: str, message: dict[str, Any]) -> None:
        ids[name] = tree.append_message(message)["id"]

    add(
        "u1",
        user(
            "Fix parse_price in shop/pricing.py. Money must never be a float: use Decimal. "
            "Keep the public signature unchanged."
        ),
    )
    add(
        "a1",
        assistant("Reading it.", tokens=0, calls=[tool_call("c1", "read", path="shop/pricing.py")]),
    )
    add("r1", tool_result("c1", PRICING_SRC, "read"))
    edit = tool_call("c2", "edit", path="shop/pricing.py", oldText="float(", newText="Decimal(")
    add("a2", assistant("", tokens=0, calls=[edit]))
    add("r2", tool_result("c2", "Applied 1 replacement", "edit"))
    add("a3", assistant("Testing.", tokens=0, calls=[tool_call("c3", "bash", command="pytest -q")]))
    add("r3", tool_result("c3", PYTEST_LOG, "bash", is_error=True))
    add(
        "a4",
        assistant(
            "I decided to import Decimal at module level because every function needs it.",
            tokens=0,
        ),
    )
    add("u2", user("Now add a currency whitelist: only EUR, USD and GBP are allowed."))
    add(
        "a5",
        assistant(
            "Reading the table.", tokens=0, calls=[tool_call("c4", "read", path="shop/currency.py")]
        ),
    )
    add("r4", tool_result("c4", CURRENCY_SRC, "read"))
    add(
        "a6", assistant("Checking.", tokens=0, calls=[tool_call("c5", "bash", command="pytest -q")])
    )
    add("r5", tool_result("c5", PYTEST_LOG.replace("1 failed, 30", "31"), "bash"))
    add("a7", assistant("Whitelist done. Next I will run the full suite.", tokens=0))
    return ids
