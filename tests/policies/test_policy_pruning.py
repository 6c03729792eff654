"""Relevance pruning: BM25 ranking, the budget, the request only (unless record=True)."""

from __future__ import annotations

import math

import pytest
from pinb_testkit import assistant, tool_call, tool_result, user

from pi_nb.agent import Session
from pi_nb.hooks import Hooks
from pi_nb.messages import content_text
from pi_nb.models.scripted import Script
from pi_nb.policies import (
    RelevancePruner,
    bm25_scores,
    enable_pruning,
    prune_messages,
    semantic_available,
)
from pi_nb.policies.pruning import SemanticRanker, disable_pruning, request_query
from pi_nb.tokens import estimate_tokens

TOPICS = {
    "pricing": "def parse_price(text):\n    return Decimal(text)  # money stays Decimal\n",
    "currency": "CURRENCY_EUR = 'EUR'\nCURRENCY_USD = 'USD'\nexchange rates table\n",
    "logging": "logger = logging.getLogger(__name__)\nlog level INFO handlers rotate\n",
    "docs": "README: installation, quickstart, contributing guidelines, license\n",
    "tests": "tests/test_pricing.py::test_decimal FAILED NameError Decimal not defined\n",
}


def history(question: str = "Why does parse_price fail with a Decimal NameError?") -> list:
    """user → five (read call → long result) pairs → final answer → new user question."""
    messages = [user("Review the shop package.", ts=1)]
    for n, (topic, body) in enumerate(TOPICS.items()):
        call = tool_call(f"c{n}", "read", path=f"shop/{topic}.py")
        messages.append(assistant("", tokens=0, calls=[call], ts=10 + n))
        messages.append(tool_result(f"c{n}", body * 12, "read", ts=20 + n))
    messages.append(assistant("I read everything.", tokens=0, ts=40))
    messages.append(user(question, ts=41))
    return messages


def total(messages) -> int:
    return sum(estimate_tokens(m) for m in messages)


def result_texts(messages) -> dict[str, str]:
    return {
        m["toolCallId"]: content_text(m["content"]) for m in messages if m["role"] == "toolResult"
    }


def test_bm25_scores_rank_the_relevant_document_first():
    docs = [TOPICS[t] for t in TOPICS]
    scores = bm25_scores("parse_price Decimal", docs)
    assert scores.index(max(scores)) == 0
    assert scores[3] == 0.0  # docs: no shared word
    assert bm25_scores("", docs) == [0.0] * len(docs)
    assert bm25_scores("x", []) == []


@pytest.mark.parametrize("budget", [3000, 1500, 1000, 600, 0])
def test_prune_respects_the_budget_and_prunes_least_relevant_first(budget):
    messages = history()
    before = [dict(m) for m in messages]
    pruned, report = prune_messages(messages, budget=budget, keep_last=0)
    assert messages == before  # the input is not modified
    assert report.tokens_before == total(messages)
    assert report.tokens_after == total(pruned)
    prunable = sum(
        estimate_tokens(m) - estimate_tokens(pruned[i])
        for i, m in enumerate(messages)
        if m["role"] == "toolResult"
    )
    if report.tokens_before - prunable <= budget:
        assert report.met_budget and report.tokens_after <= budget
    else:  # unreachable: everything prunable was pruned
        assert not report.met_budget
        assert len(report.pruned) == len(report.candidates)
    # Greedy by relevance: every pruned candidate scores <= every kept one.
    pruned_scores = [p.score for p in report.pruned]
    kept = [s for i, s in report.candidates if i not in {p.index for p in report.pruned}]
    if pruned_scores and kept:
        assert max(pruned_scores) <= min(kept)
    # Only when over budget, and no more than needed: undoing the last pruning breaks it.
    if report.pruned and report.met_budget:
        last = report.pruned[-1]
        assert report.tokens_after + last.saved > budget


def test_the_relevant_results_survive_and_tool_calls_stay():
    messages = history()
    pruned, report = prune_messages(messages, budget=total(messages) * 2 // 3, keep_last=0)
    texts = result_texts(pruned)
    assert "parse_price" in texts["c0"]  # pricing: relevant
    assert "NameError" in texts["c4"]  # the failing test: relevant
    assert "pruned from this request" in texts["c3"]  # docs: irrelevant
    assert report.query.startswith("Why does parse_price fail")
    calls = [b for m in pruned if m["role"] == "assistant" for b in m["content"]]
    assert [c["id"] for c in calls if c["type"] == "toolCall"] == [f"c{n}" for n in range(5)]
    assert all(p.role == "toolResult" and p.tool_name == "read" for p in report.pruned)


def test_protected_messages_are_never_pruned():
    messages = history()
    pruned, report = prune_messages(messages, budget=0, keep_last=2)
    texts = result_texts(pruned)
    assert texts["c3"] == content_text(messages[8]["content"])  # among the last two results
    assert texts["c4"] == content_text(messages[10]["content"])
    assert pruned[-1] == messages[-1] and pruned[-2] == messages[-2]  # latest reply, prompt
    assert all(m == pruned[i] for i, m in enumerate(messages) if m["role"] == "user")
    assert report.protected_from == len(messages) - 2
    # Mid-run: the latest assistant message and the results after it are protected.
    running = [*history()[:-1], assistant("", tokens=0, calls=[tool_call("c9", "bash")], ts=50)]
    running.append(tool_result("c9", "lots of output " * 200, "bash", ts=51))
    pruned, report = prune_messages(running, budget=0, keep_last=0)
    assert pruned[-1] == running[-1]
    assert "I read everything." in request_query(running)


def test_assistant_text_is_pruned_only_when_asked():
    messages = history()
    messages.insert(3, assistant("A long digression about the weather. " * 40, tokens=0, ts=12))
    _, without = prune_messages(messages, budget=0, keep_last=0)
    assert all(p.role == "toolResult" for p in without.pruned)
    pruned, report = prune_messages(messages, budget=0, keep_last=0, include_assistant=True)
    assert any(p.role == "assistant" for p in report.pruned)
    assert "digression" not in content_text(pruned[3]["content"])


def test_custom_rankers_and_validation():
    messages = history()
    calls = []

    def reverse(query, documents):
        calls.append(len(documents))
        return [float(-i) for i in range(len(documents))]  # the latest is least relevant

    _pruned, report = prune_messages(
        messages, budget=total(messages) - 10, ranker=reverse, keep_last=0
    )
    assert calls == [5]
    assert [p.tool_call_id for p in report.pruned] == ["c4"]
    assert report.ranker == "reverse"
    with pytest.raises(ValueError):
        prune_messages(messages, ranker="tf-idf")
    with pytest.raises(ValueError):
        prune_messages(messages, budget=-1)
    with pytest.raises(ValueError):
        prune_messages(messages, ratio=2.0)


def test_semantic_ranker_with_an_injected_encoder():
    class Encoder:
        def encode(self, texts, normalize_embeddings=True):
            vectors = [[float("Decimal" in t), float("logging" in t), 1.0] for t in texts]
            return [[x / math.sqrt(sum(y * y for y in v)) for x in v] for v in vectors]

    ranker = SemanticRanker(model=Encoder())
    _pruned, report = prune_messages(history(), budget=0, ranker=ranker, keep_last=0)
    assert report.ranker == "semantic"
    order = [p.tool_call_id for p in report.pruned]
    assert order.index("c0") > order.index("c2")  # the Decimal result is pruned last


def test_semantic_is_optional():
    if semantic_available():
        pruner = RelevancePruner(ranker="semantic", budget=0)
        _, report = pruner.prune(history())
        assert report.ranker == "semantic"
        assert report.pruned[-1].tool_call_id in ("c0", "c4")
    else:
        with pytest.raises(ImportError, match="semantic"):
            RelevancePruner(ranker="semantic")


def _session(tmp_path, script, **opts):
    session = Session.new(
        tmp_path / "s.jsonl", cwd=tmp_path, window=32768, tools=[], script=script, **opts
    )
    for message in history()[:-1]:
        session.tree.append_message(message)
    return session


def test_pruning_never_touches_the_session_record(tmp_path):
    script = Script(["It is the missing import."])
    session = _session(tmp_path, script)
    session.tree.flush()
    path = tmp_path / "s.jsonl"
    before = path.read_bytes()
    reports = []
    pruner = enable_pruning(session, budget=600, keep_last=0, on_report=reports.append)
    result = session.prompt("Why does parse_price fail with a Decimal NameError?")
    assert result.ok, result.error
    after = path.read_bytes()
    assert after.startswith(before)  # nothing rewritten
    assert b"context_edit" not in after  # nothing recorded
    sent = [r for r in script.requests if r["turn"] is not None][-1]["messages"]
    sent_text = "\n".join(str(m.get("content")) for m in sent)
    assert "pruned from this request" in sent_text
    assert "README: installation" not in sent_text
    assert all(
        "pruned from this request" not in content_text(m.get("content"))
        for m in session.context().messages
    )  # the context (and file) keep everything
    assert reports == pruner.reports and reports[-1].met_budget
    assert {p.entry_id for p in reports[-1].pruned} <= {e["id"] for e in session.tree.entries}
    assert all(p.edit_id is None for p in reports[-1].pruned)
    assert disable_pruning(session) is True


def test_record_true_writes_context_edits_that_reproduce_the_request(tmp_path):
    script = Script(["It is the missing import.", "Still the import."])
    session = _session(tmp_path, script)
    pruner = enable_pruning(session, budget=600, keep_last=0, record=True)
    session.prompt("Why does parse_price fail with a Decimal NameError?")
    report = pruner.reports[0]
    assert report.pruned and len(report.recorded) == len(report.pruned)
    edits = [e for e in session.tree.entries if e["type"] == "context_edit"]
    assert [e["id"] for e in edits] == report.recorded
    sent = next(r for r in script.requests if r["turn"] is not None)["messages"]
    sent_results = [m for m in sent if m.get("role") == "tool"]
    projected = [m for m in session.context().messages if m["role"] == "toolResult"]
    assert [m["content"] for m in sent_results] == [content_text(m["content"]) for m in projected]
    # The next request does not prune the same messages again: the edits already hold.
    session.prompt("And now?")
    first = {p.entry_id for p in report.pruned}
    assert first.isdisjoint({p.entry_id for p in pruner.reports[-1].pruned})
    sent = [r for r in script.requests if r["turn"] is not None][-1]["messages"]
    projected = [m for m in session.context().messages if m["role"] == "toolResult"]
    assert [m["content"] for m in sent if m.get("role") == "tool"] == [
        content_text(m["content"]) for m in projected
    ]


def test_removing_the_hook_disables_pruning():
    hooks = Hooks()
    pruner = RelevancePruner(budget=0, keep_last=0).install(hooks)
    messages = history()
    assert hooks.run_context(messages) != messages
    pruner.remove()
    assert hooks.run_context(messages) == messages
    with pytest.raises(ValueError):
        RelevancePruner(record=True)
