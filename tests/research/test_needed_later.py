"""Needed-later probes: the facts of the compacted span that the session's continuation
uses again, at a compaction point given as an entry id, a branch index or the session's
own compaction entry."""

from __future__ import annotations

import pytest
from pinb_testkit import assistant, new_tree, tool_call, tool_result, user

from pi_nb.compaction import CompactionSettings
from pi_nb.research.compare import compare_strategies
from pi_nb.research.probes import (
    compacted_span,
    compaction_point,
    extract_probes,
    needed_later_probes,
)

SPAN = [
    user("Fix parse_price in shop/pricing.py. Keep the batch size at 500 rows."),
    assistant("", tokens=0, calls=[tool_call("c1", "read", path="shop/pricing.py")]),
    tool_result("c1", "def parse_price(text):\n    return float(text)\n", "read"),
    assistant(
        "The rules are in docs/money.md.",
        tokens=0,
        calls=[tool_call("c2", "read", path="docs/money.md")],
    ),
    tool_result("c2", "Amounts are exact, see `MoneyRules`.", "read"),
    assistant(
        "Testing.",
        tokens=0,
        calls=[tool_call("c3", "bash", command="pytest -q tests/test_pricing.py")],
    ),
    tool_result(
        "c3", "F\nE   NameError: name 'Decimal' is not defined\n1 failed", "bash", is_error=True
    ),
]
CONTINUATION = [
    user("Go on."),
    assistant(
        "", tokens=0, calls=[tool_call("c4", "bash", command="pytest -q tests/test_pricing.py")]
    ),
    tool_result("c4", "E   NameError: name 'Decimal' is not defined", "bash", is_error=True),
    assistant(
        "",
        tokens=0,
        calls=[
            tool_call("c5", "edit", path="shop/pricing.py", oldText="float(", newText="Decimal(")
        ],
    ),
    tool_result("c5", "Applied 1 replacement", "edit"),
    assistant("`parse_price` returns Decimal now; the batch of 500 rows is unchanged.", tokens=0),
]


def _facts(probes, kind):
    return [p.fact for p in probes if p.kind == kind]


def test_the_facts_the_continuation_uses_again() -> None:
    probes = needed_later_probes(SPAN, CONTINUATION)
    assert {p.category for p in probes} == {"needed_later"}
    assert _facts(probes, "file") == ["shop/pricing.py", "tests/test_pricing.py"]
    assert _facts(probes, "identifier") == ["parse_price", "NameError"]
    assert _facts(probes, "error") == ["NameError: name 'Decimal' is not defined"]
    assert _facts(probes, "value") == ["500"]
    assert _facts(probes, "command") == ["pytest -q tests/test_pricing.py"]
    # Facts the continuation never touched again are not needed-later probes.
    facts = {p.fact for p in probes}
    assert "docs/money.md" not in facts and "MoneyRules" not in facts
    assert probes[0].id == "needed_later-file-1"
    assert needed_later_probes(SPAN, []) == []
    # The heuristic probes of the same span do include what was never needed again.
    assert "docs/money.md" in {p.fact for p in extract_probes(SPAN)}


def _session():
    tree = new_tree()
    ids = [tree.append_message(m)["id"] for m in [*SPAN, *CONTINUATION]]
    return tree, ids


def test_compaction_point_by_id_index_and_compaction_entry() -> None:
    tree, ids = _session()
    point = compaction_point(tree, ids[len(SPAN) - 1])
    assert point.fork_id == ids[len(SPAN) - 1] and point.compaction_id is None
    assert point.continuation == CONTINUATION and point.has_continuation
    assert compaction_point(tree, -len(CONTINUATION) - 1).fork_id == point.fork_id
    end = compaction_point(tree)  # no compaction entry: the leaf, nothing after it
    assert end.fork_id == ids[-1] and end.continuation == [] and not end.has_continuation
    with pytest.raises(ValueError, match="not an entry"):
        compaction_point(tree, "nope")
    with pytest.raises(ValueError, match="outside the branch"):
        compaction_point(tree, 99)
    # The agent's own compaction: fork at its parent, the continuation is what followed.
    real = new_tree()
    first = [real.append_message(m)["id"] for m in SPAN]
    compaction = real.append_compaction("summary", first[-1], 1000)
    for message in CONTINUATION:
        real.append_message(message)
    point = compaction_point(real)
    assert point.compaction_id == compaction["id"] and point.fork_id == first[-1]
    assert point.continuation == CONTINUATION


def test_compare_defaults_to_needed_later_with_a_continuation() -> None:
    tree = new_tree()
    for message in SPAN:
        tree.append_message(message)
    last = tree.append_message(assistant("Pausing here.", tokens=0))["id"]
    tree.append_compaction("summary", last, 1000)
    for message in CONTINUATION:
        tree.append_message(message)
    settings = CompactionSettings(keep_recent_tokens=10, reserve_tokens=1000)
    span = compacted_span(tree, settings, last)
    assert span and span[0] == SPAN[0]
    frame = compare_strategies(
        {"real": tree}, ["window:10", "extractive"], settings=settings, progress=False
    )
    assert frame["error"].isna().all()
    assert set(frame["probe_basis"]) == {"needed_later"} and set(frame["source"]) == {"real"}
    assert (frame["compaction_point"] != last).all()  # the agent's compaction entry
    window, extract = frame.set_index("strategy").loc[["window", "extractive"], "probe_all"]
    assert window < extract  # truncation drops what the agent used again
    assert (frame["probe_all"] == frame["probe_needed_later"]).all()
    # Without a continuation the heuristic probes are the basis.
    plain = compare_strategies(
        {"p": tree}, ["window:10"], settings=settings, at=last, progress=False
    )
    assert plain["probe_basis"][0] == "needed_later"  # at an inner entry: the rest continues
    leaf = compare_strategies({"p": tree}, ["window:10"], settings=settings, at=-1, progress=False)
    assert (
        leaf["probe_basis"][0] == "heuristic" and leaf["probe_all"][0] == leaf["probe_heuristic"][0]
    )
    # A continuation that uses nothing of the span again: the heuristic probes are the basis.
    idle = new_tree()
    for message in SPAN:
        idle.append_message(message)
    point = idle.append_message(assistant("Pausing here.", tokens=0))["id"]
    idle.append_message(user("Thanks, that is all."))
    idle.append_message(assistant("Glad to help.", tokens=0))
    quiet = compare_strategies(
        {"q": idle}, ["window:10"], settings=settings, at=point, progress=False
    )
    assert (
        quiet["probe_basis"][0] == "heuristic"
        and quiet["probe_all"][0] == quiet["probe_heuristic"][0]
    )


def test_the_table_says_why_a_row_has_no_needed_later_probes() -> None:
    """A NaN ``probe_needed_later`` comes with its reason (the shipped samples: a session
    that ends at its leaf, and agents' compactions whose continuation reuses nothing)."""
    from pi_nb.research.cli import _reasons

    settings = CompactionSettings(keep_recent_tokens=10, reserve_tokens=1000)
    tree, ids = _session()
    idle = new_tree()
    for message in SPAN:
        idle.append_message(message)
    pause = idle.append_message(assistant("Pausing here.", tokens=0))["id"]
    idle.append_compaction("summary", pause, 1000)
    idle.append_message(user("Thanks, that is all."))
    idle.append_message(assistant("Glad to help.", tokens=0))
    frame = compare_strategies(
        {"leaf": tree, "idle": idle}, ["window:10"], settings=settings, progress=False
    ).set_index("session")
    assert frame["probe_needed_later"].isna().all()
    assert frame.loc["leaf", "needed_later_note"] == (
        "no continuation: no user or assistant message follows the compaction point "
        "(by default the session's leaf): nothing later to measure"
    )
    assert frame.loc["idle", "needed_later_note"] == (
        "the continuation (2 user/assistant messages) uses no fact of the compacted span "
        f"({len(compacted_span(idle, settings, pause))} messages) again"
    )
    # At an inner point the same session has needed-later probes, and no note.
    inner = compare_strategies(
        {"p": tree}, ["window:10"], settings=settings, at=ids[len(SPAN) - 1], progress=False
    )
    assert inner["probe_basis"][0] == "needed_later" and inner["needed_later_note"][0] is None
    # Nothing cut: the note says so (and the CLI's reason column carries the note).
    big = CompactionSettings(keep_recent_tokens=100_000, reserve_tokens=1000)
    uncut = compare_strategies({"p": tree}, ["window:10"], settings=big, at=ids[2], progress=False)
    assert uncut["needed_later_note"][0].startswith("the cut removes nothing")
    reasons = _reasons(frame.reset_index(), 10)
    assert reasons[1].endswith("needed_later: " + frame.loc["idle", "needed_later_note"])
