"""Probe extraction (known facts in → known probes out) and scoring (known recall)."""

from __future__ import annotations

import math

import pytest
from pinb_testkit import assistant, tool_call, tool_result, user

from pi_nb.compaction import CompactionSettings, prepare_compaction
from pi_nb.research.probes import (
    QUESTIONS,
    Probe,
    compacted_span,
    context_text,
    extract_probes,
    match_probe,
    probe_frame,
    probe_recall,
    score_probes,
)

MESSAGES = [
    user(
        "Fix parse_price in shop/pricing.py. Money must never be a float. "
        "Keep the batch size at 500 rows."
    ),
    assistant(
        "Reading the docs and the code.",
        tokens=0,
        calls=[
            tool_call("c1", "read", path="docs/money.md"),
            tool_call("c2", "read", path="shop/pricing.py"),
        ],
    ),
    tool_result("c1", "Amounts are Decimal.", "read"),
    tool_result("c2", "def parse_price(text):\n    return float(text)\n", "read"),
    assistant(
        "",
        tokens=0,
        calls=[tool_call("c3", "edit", path="shop/pricing.py", oldText="float", newText="Decimal")],
    ),
    tool_result("c3", "Applied 1 replacement", "edit"),
    assistant("Testing.", tokens=0, calls=[tool_call("c4", "bash", command="pytest -q")]),
    tool_result(
        "c4",
        "F\nE   NameError: name 'Decimal' is not defined\n1 failed, 119 passed in 0.91s",
        "bash",
        is_error=True,
    ),
    assistant(
        "I decided to import Decimal at module level because every function needs it. "
        "Next I will rerun the failing test.",
        tokens=0,
    ),
    user("Then add a currency whitelist for EUR and USD."),
]


def _facts(probes: list[Probe], kind: str) -> list[str]:
    return [p.fact for p in probes if p.kind == kind]


def test_known_facts_give_known_probes() -> None:
    probes = extract_probes(MESSAGES)
    assert _facts(probes, "file_modified") == ["shop/pricing.py"]
    assert _facts(probes, "file_read") == ["docs/money.md"]  # pricing.py counts as modified
    assert _facts(probes, "error") == ["NameError: name 'Decimal' is not defined"]
    assert _facts(probes, "constraint") == [
        "Money must never be a float.",
        "Keep the batch size at 500 rows.",
    ]
    assert _facts(probes, "decision") == [
        "I decided to import Decimal at module level because every function needs it."
    ]
    assert _facts(probes, "task") == ["Then add a currency whitelist for EUR and USD."]
    assert _facts(probes, "next_step") == ["Next I will rerun the failing test."]
    assert _facts(probes, "value") == ["500"]  # numbers people wrote, not tool output tallies
    assert "parse_price" in _facts(probes, "identifier")
    categories = {p.kind: p.category for p in probes}
    assert categories == {
        "file_modified": "artifact",
        "file_read": "artifact",
        "error": "recall",
        "identifier": "recall",
        "value": "recall",
        "constraint": "recall",
        "decision": "decision",
        "task": "continuation",
        "next_step": "continuation",
    }
    assert all(p.question == QUESTIONS[p.kind] for p in probes)
    assert all(p.fact not in p.question for p in probes)
    assert extract_probes(MESSAGES) == probes  # deterministic
    assert list(probe_frame(probes)["id"])[:2] == ["file_modified-1", "file_read-1"]


def test_other_agents_tool_conventions() -> None:
    messages = [
        assistant(
            "",
            tokens=0,
            calls=[
                tool_call(
                    "a", "Edit", file_path="/home/u/app/src/a.py", old_string="x", new_string="y"
                ),
                tool_call("b", "Read", file_path="/home/u/app/README.md"),
                tool_call(
                    "c",
                    "apply_patch",
                    input="*** Begin Patch\n*** Add File: src/new.py\n+x\n*** End Patch",
                ),
                tool_call("d", "shell", command=["bash", "-lc", "sed -n '1,40p' conf/app.toml"]),
                tool_call("e", "str_replace_editor", command="view", path="lib/util.py"),
            ],
        )
    ]
    probes = extract_probes(messages)
    assert _facts(probes, "file_modified") == ["/home/u/app/src/a.py", "src/new.py"]
    assert _facts(probes, "file_read") == ["/home/u/app/README.md", "conf/app.toml", "lib/util.py"]


def test_limits_cap_each_kind() -> None:
    reads = [tool_call(f"c{i}", "read", path=f"pkg/mod_{i}.py") for i in range(20)]
    probes = extract_probes([assistant("", tokens=0, calls=reads)], limits={"file_read": 5})
    assert _facts(probes, "file_read") == [f"pkg/mod_{i}.py" for i in range(5)]


def test_scoring_exact_and_normalized() -> None:
    probes = extract_probes(MESSAGES)
    first = {}
    for probe in probes:
        first.setdefault(probe.kind, probe)
    text = (
        "## Critical Context\n- File: shop/pricing.py\n"
        "- nameerror NAME 'decimal' is not defined\n"
        "- The user said money must never be a float!\n"
    )
    assert match_probe(first["file_modified"], text) == (True, True)
    absolute = Probe("f", "artifact", "file_modified", "/home/u/shop/pricing.py", "?")
    assert match_probe(absolute, text) == (False, True)  # by its last two components
    assert match_probe(first["error"], text) == (False, True)  # case and quotes folded
    assert match_probe(first["constraint"], text) == (False, True)
    assert match_probe(first["file_read"], text) == (False, False)
    assert match_probe(first["decision"], text) == (False, False)
    exact = "Money must never be a float. " + "docs/money.md"
    assert match_probe(first["constraint"], exact) == (True, True)
    value = next(p for p in probes if p.fact == "500")
    assert match_probe(value, "size 500.") == (True, True)
    assert match_probe(value, "size 1500") == (False, False)


def test_keyword_coverage_of_sentences() -> None:
    probe = Probe(
        "decision-1",
        "decision",
        "decision",
        "I chose SQLite instead of Postgres because the tests run offline.",
        QUESTIONS["decision"],
        keywords=("sqlite", "postgres", "offline", "tests", "instead"),
    )
    assert match_probe(probe, "Decision: SQLite over Postgres, tests run offline.")[1]  # 4/5
    assert not match_probe(probe, "We use SQLite.")[1]  # 1/5


def test_known_recall_per_category() -> None:
    probes = extract_probes(MESSAGES)
    artifacts = [p for p in probes if p.category == "artifact"]
    text = "Edited shop/pricing.py. " + " ".join(p.fact for p in probes if p.category == "decision")
    scored = score_probes(probes, text)
    assert list(scored.columns) == ["probe_id", "category", "kind", "fact", "exact", "normalized"]
    recall = probe_recall(scored)
    assert recall["artifact"] == pytest.approx(1 / len(artifacts)) == 0.5
    assert recall["decision"] == 1.0
    assert recall["continuation"] == 0.0
    assert 0 < recall["all"] < 1
    everything = score_probes(probes, context_text(MESSAGES))
    assert probe_recall(everything)["all"] == 1.0
    assert probe_recall(everything, "exact")["all"] == 1.0
    empty = probe_recall(score_probes([], "x"))
    assert all(math.isnan(v) for v in empty.values())


def test_context_text_includes_calls_results_and_summaries() -> None:
    text = context_text(
        [
            {"role": "compactionSummary", "summary": "SUMMARY TEXT", "tokensBefore": 1},
            *MESSAGES[1:3],
        ]
    )
    assert "SUMMARY TEXT" in text and 'read({"path":"docs/money.md"})' in text
    assert "Amounts are Decimal." in text


def test_compacted_span_is_what_pi_would_summarize(history) -> None:
    tree, _ = history
    settings = CompactionSettings(keep_recent_tokens=250)
    span = compacted_span(tree, settings)
    preparation = prepare_compaction(tree.get_branch(), settings)
    assert span == [*preparation.messages_to_summarize, *preparation.turn_prefix_messages]
    assert span[0]["content"].startswith("Fix parse_price")
    assert compacted_span(tree, CompactionSettings(keep_recent_tokens=10**6)) == []
