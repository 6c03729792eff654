"""compact() / preview_compaction(): entries written, hooks, events, split turns."""

from __future__ import annotations

import json

import pytest
from compaction_helpers import FakeModel, add_turn, long_session, reply_message, split_turn_history

from pi_nb.compaction import (
    AlreadyCompacted,
    CompactionCancelled,
    CompactionSettings,
    NothingToCompact,
    SummarizationError,
    compact,
    preview_compaction,
)
from pi_nb.hooks import Hooks
from pi_nb.session.tree import SessionTree

KEEP = CompactionSettings(keep_recent_tokens=300)
WINDOW = 200000


def _lines(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _recorder(hooks: Hooks, names: list[str], tag: str = "") -> list[tuple[str, dict]]:
    seen: list[tuple[str, dict]] = []
    for name in names:
        hooks.on(name, lambda event, name=name: seen.append((tag + name, dict(event))))
    return seen


def test_compact_writes_the_entry_and_the_projection_starts_with_the_summary(
    tree, session_path, fake
):
    turns = long_session(tree, 4)
    before = tree.context_tokens().tokens
    result = compact(tree, "fake/m", settings=KEEP, window=WINDOW, completion=fake)
    assert fake.calls == 1 and result.calls == 1
    entry = _lines(session_path)[-1]
    assert entry["type"] == "compaction" and entry == result.entry
    assert entry["firstKeptEntryId"] == turns[-1][0]["id"] == result.first_kept_entry_id
    assert entry["tokensBefore"] == before == result.tokens_before
    assert entry["fromHook"] is False
    assert entry["details"] == {
        "readFiles": [],
        "modifiedFiles": ["src/mod0.py", "src/mod1.py", "src/mod2.py"],
    }
    assert entry["usage"]["output"] > 0
    assert entry["summary"].endswith(
        "<modified-files>\nsrc/mod0.py\nsrc/mod1.py\nsrc/mod2.py\n</modified-files>"
    )
    for i in range(3):
        assert f"FACT-t{i}" in entry["summary"]
    messages = tree.projection().messages
    assert messages[0]["role"] == "compactionSummary" and messages[0]["summary"] == result.summary
    assert messages[1] is turns[-1][0]["message"]
    assert result.tokens_after < result.tokens_before
    reopened = SessionTree.open(session_path)
    assert reopened.projection().messages[0]["summary"] == result.summary
    assert "tokens" in result._repr_html_() and result.committed


def test_compaction_through_the_scripted_model(tree):
    pytest.importorskip("litellm")
    long_session(tree, 5)
    result = compact(tree, "pinb/scripted", settings=KEEP)
    messages = tree.projection().messages
    assert messages[0]["role"] == "compactionSummary"
    assert result.summary.startswith("## Goal\nTask 0: FACT-t0 fix src/mod0.py")
    assert "<modified-files>" in result.summary
    assert result.usage["input"] > 0


def test_preview_appends_nothing(tree, session_path, fake):
    long_session(tree, 4)
    data = session_path.read_bytes()
    count, leaf = len(tree.entries), tree.leaf_id
    preview = preview_compaction(tree, "fake/m", settings=KEEP, window=WINDOW, completion=fake)
    assert session_path.read_bytes() == data
    assert (len(tree.entries), tree.leaf_id) == (count, leaf)
    assert not preview.committed and preview.entry["id"] not in tree
    assert preview.entry["parentId"] == leaf
    assert preview.projection.messages[0]["role"] == "compactionSummary"
    assert preview.projection.messages[0]["summary"] == preview.summary
    assert preview.tokens_after < preview.tokens_before
    assert "preview" in preview._repr_html_()
    # the real compaction afterwards cuts at the same place
    real = compact(tree, "fake/m", settings=KEEP, window=WINDOW, completion=FakeModel())
    assert real.first_kept_entry_id == preview.first_kept_entry_id
    assert len(real.projection.messages) == len(preview.projection.messages)


def test_nothing_to_compact_and_already_compacted(tree, fake):
    add_turn(tree, "hi")
    with pytest.raises(NothingToCompact, match="Nothing to compact"):
        compact(tree, "m", settings=KEEP, completion=fake)
    long_session(tree, 4)
    compact(tree, "m", settings=KEEP, window=WINDOW, completion=fake)
    with pytest.raises(AlreadyCompacted, match="Already compacted"):
        compact(tree, "m", settings=KEEP, completion=fake)
    with pytest.raises(AlreadyCompacted):
        preview_compaction(tree, "m", settings=KEEP, completion=fake)


@pytest.mark.parametrize(
    ("call", "keyword"),
    [(compact, "focuss"), (preview_compaction, "focuss"), (preview_compaction, "will_retry")],
)
def test_an_unknown_keyword_fails_by_name_before_anything_is_sent_or_written(
    tree, session_path, fake, call, keyword
):
    # The options are one declared family (CompactOptions; a preview's lacks will_retry).
    long_session(tree, 4)
    data = session_path.read_bytes()
    message = rf"^{call.__name__}\(\) got an unexpected keyword argument '{keyword}'$"
    with pytest.raises(TypeError, match=message):
        call(tree, "fake/m", settings=KEEP, completion=fake, **{keyword: True})
    assert fake.calls == 0 and session_path.read_bytes() == data


@pytest.mark.parametrize(
    ("release", "budgets", "prefix_focus"),
    [
        # Pi 1.6.0: no reserve-derived cap; the model's output limit (gpt-4o: 16384) fitted
        # to the window, for the turn prefix too, which also gets the focus.
        ("1.6", (16384, 16384), True),
        # Pi 1.3.0: ⌊0.8·R⌋ and ⌊0.5·R⌋ (R = 2000); the turn prefix gets no focus.
        ("1.3", (1600, 1000), False),
    ],
)
def test_split_turn_summarizes_history_and_turn_prefix_separately(
    tree, fake, release, budgets, prefix_focus
):
    split_turn_history(tree)
    settings = CompactionSettings(keep_recent_tokens=1000, reserve_tokens=2000, pi_release=release)
    result = compact(
        tree, "gpt-4o", settings=settings, window=WINDOW, completion=fake, focus="KEEP-PATHS"
    )
    prep = result.preparation
    assert prep.is_split_turn and prep.messages_to_summarize and prep.turn_prefix_messages
    assert fake.calls == 2 == result.calls
    history, prefix = fake.requests
    assert "## Original Request" not in fake.prompt(0) and "## Original Request" in fake.prompt(1)
    assert (history["max_tokens"], prefix["max_tokens"]) == budgets
    assert result.budget_rule == f"pi-{release}" == result.to_dict()["budgetRule"]
    assert fake.prompt(0).endswith("\n\nAdditional focus: KEEP-PATHS")
    assert fake.prompt(1).endswith("\n\nAdditional focus: KEEP-PATHS") == prefix_focus
    assert ("KEEP-PATHS" in fake.prompt(1)) == prefix_focus
    assert "FACT-request" in fake.prompt(1) and "FACT-request" not in fake.prompt(0)
    head, rule, tail = result.summary.partition("\n\n---\n\n**Turn Context (split turn):**\n\n")
    assert rule and "summary 1 (history)" in head and tail.startswith("## Goal\nsummary 2 (prefix)")
    assert "<read-files>\nbig0.py" in tail  # file lists come last, after the prefix summary
    assert result.usage["input"] == sum(
        reply_message("x", prompt_chars=sum(len(m["content"]) for m in r["messages"]))["usage"][
            "input"
        ]
        for r in fake.requests
    )


def test_split_turn_without_earlier_history_makes_one_call(tree, fake):
    add_turn(
        tree,
        "only turn",
        steps=[("read", {"path": f"f{i}.py"}, "C" * 3000) for i in range(4)],
        reply="done",
    )
    result = compact(
        tree,
        "m",
        settings=CompactionSettings(keep_recent_tokens=1000),
        window=WINDOW,
        completion=fake,
    )
    assert result.preparation.is_split_turn and not result.preparation.messages_to_summarize
    assert fake.calls == 1 and "## Original Request" in fake.prompt(0)
    assert result.summary.startswith("No prior history.\n\n---\n\n**Turn Context (split turn):**")


def test_repeated_compaction_uses_the_update_prompt(tree, fake):
    from pi_nb.compaction import DEFAULT_PROMPTS

    long_session(tree, 4)
    first = compact(tree, "m", settings=KEEP, window=WINDOW, completion=fake)
    long_session(tree, 3)
    second = compact(tree, "m", settings=KEEP, window=WINDOW, completion=fake)
    prompt = fake.prompt(1)
    assert f"<previous-summary>\n{first.summary}\n</previous-summary>" in prompt
    assert DEFAULT_PROMPTS.update in prompt
    assert "FACT-t3" in prompt  # the first compaction's kept tail is summarized again
    assert "FACT-t0" in second.summary  # carried through the previous summary
    assert second.preparation.previous_summary == first.summary


def test_focus_and_model_override(tree, fake):
    long_session(tree, 4)
    settings = CompactionSettings(
        keep_recent_tokens=300, model_overrides={"fake/m": {"keepRecentTokens": 100000}}
    )
    with pytest.raises(NothingToCompact):
        compact(tree, "fake/m", settings=settings, completion=fake)
    compact(tree, "other/m", settings=settings, focus="the parser", window=WINDOW, completion=fake)
    assert fake.prompt(0).endswith("Additional focus: the parser")


def test_hook_cancel(tree, session_path, fake):
    long_session(tree, 4)
    hooks = Hooks()
    seen = _recorder(
        hooks, ["compaction_start", "compaction_end", "session_compact", "session_compact_failed"]
    )
    hooks.on("session_before_compact", lambda event: {"cancel": True})
    data = session_path.read_bytes()
    with pytest.raises(CompactionCancelled, match="Compaction cancelled"):
        compact(tree, "m", settings=KEEP, hooks=hooks, completion=fake)
    assert fake.calls == 0 and session_path.read_bytes() == data
    assert [name for name, _ in seen] == [
        "compaction_start",
        "compaction_end",
        "session_compact_failed",
    ]
    assert seen[1][1]["aborted"] is True and seen[1][1]["error_message"] is None


def test_hook_supplies_the_compaction_verbatim(tree, session_path, fake):
    turns = long_session(tree, 4)
    hooks = Hooks()
    seen = _recorder(hooks, ["session_compact"])
    payloads = []

    def supply(event):
        payloads.append(event)
        return {
            "compaction": {
                "summary": "custom summary",
                "firstKeptEntryId": turns[2][0]["id"],
                "tokensBefore": 999,
                "details": {"why": "policy"},
            }
        }

    hooks.on("session_before_compact", supply)
    result = compact(tree, "m", settings=KEEP, hooks=hooks, focus="F", completion=fake)
    assert fake.calls == 0 and result.calls == 0 and result.from_hook
    entry = _lines(session_path)[-1]
    assert entry["summary"] == "custom summary" and entry["tokensBefore"] == 999
    assert entry["firstKeptEntryId"] == turns[2][0]["id"] and entry["fromHook"] is True
    assert entry["details"] == {"why": "policy"} and "usage" not in entry
    event = payloads[0]
    assert event.preparation.first_kept_entry_id == turns[-1][0]["id"]
    assert event.branch_entries == tree.get_branch()[:-1]
    assert (event.custom_instructions, event.reason, event.will_retry) == ("F", "manual", False)
    assert seen[0][1]["from_extension"] is True and seen[0][1]["compaction_entry"] == entry


def test_raising_handler_is_reported_and_the_default_proceeds(tree, fake):
    long_session(tree, 4)
    hooks = Hooks()
    errors = _recorder(hooks, ["hook_error"])

    def broken(event):
        raise RuntimeError("extension bug")

    hooks.on("session_before_compact", broken)
    result = compact(tree, "m", settings=KEEP, hooks=hooks, window=WINDOW, completion=fake)
    assert fake.calls == 1 and not result.from_hook
    assert errors[0][1]["event"] == "session_before_compact"
    assert "extension bug" in errors[0][1]["error"]
    assert hooks.errors[0].handler is broken


def test_two_handlers_later_wins_and_event_order(tree, fake):
    long_session(tree, 4)
    hooks = Hooks()
    order: list[str] = []
    for name in ("ext1", "ext2"):

        def before(event, name=name):
            order.append(f"{name}-before")
            return {
                "compaction": {
                    "summary": f"from {name}",
                    "firstKeptEntryId": None,
                    "tokensBefore": 1,
                }
            }

        hooks.on("session_before_compact", before)
    for name in ("ext1", "ext2"):
        hooks.on("session_compact", lambda event, name=name: order.append(f"{name}-after"))
    result = compact(tree, "m", settings=KEEP, hooks=hooks, completion=fake)
    assert order == ["ext1-before", "ext2-before", "ext1-after", "ext2-after"]
    assert result.summary == "from ext2"
    assert result.entry["firstKeptEntryId"] == result.entry["id"]  # None keeps nothing


def test_events_of_a_successful_compaction(tree, fake):
    long_session(tree, 4)
    hooks = Hooks()
    seen = _recorder(
        hooks, ["compaction_start", "session_before_compact", "session_compact", "compaction_end"]
    )
    result = compact(
        tree, "m", settings=KEEP, hooks=hooks, reason="threshold", window=WINDOW, completion=fake
    )
    assert [name for name, _ in seen] == [
        "compaction_start",
        "session_before_compact",
        "session_compact",
        "compaction_end",
    ]
    assert seen[0][1] == {"type": "compaction_start", "reason": "threshold"}
    assert seen[3][1]["result"] is result and seen[3][1]["aborted"] is False


def test_automatic_compaction_with_nothing_to_do_emits_nothing(tree, fake):
    add_turn(tree, "hi")
    hooks = Hooks()
    seen = _recorder(hooks, ["compaction_start", "compaction_end", "session_compact_failed"])
    with pytest.raises(NothingToCompact):
        compact(tree, "m", settings=KEEP, hooks=hooks, reason="threshold", completion=fake)
    assert seen == []
    with pytest.raises(NothingToCompact):
        compact(tree, "m", settings=KEEP, hooks=hooks, completion=fake)  # manual reports it
    assert [name for name, _ in seen] == [
        "compaction_start",
        "compaction_end",
        "session_compact_failed",
    ]
    assert "Nothing to compact" in seen[1][1]["error_message"]


def test_summary_failure_writes_nothing_and_reports(tree, session_path):
    long_session(tree, 4)
    hooks = Hooks()
    seen = _recorder(hooks, ["session_compact_failed", "session_compact"])
    data = session_path.read_bytes()
    model = FakeModel(lambda messages, n: reply_message("half", stop="length"))
    with pytest.raises(SummarizationError):
        compact(
            tree,
            "m",
            settings=KEEP,
            hooks=hooks,
            reason="overflow",
            will_retry=True,
            window=WINDOW,
            completion=model,
        )
    assert session_path.read_bytes() == data
    assert [name for name, _ in seen] == ["session_compact_failed"]
    failed = seen[0][1]
    assert failed["error_message"].startswith("Context overflow recovery failed: ")
    assert failed["will_retry"] is False and failed["aborted"] is False


def test_smollm2_window_compacts_under_pi_1_6_with_the_reserve_budget(tmp_path):
    """pinb/smollm2 (window 2048, output limit 2048): Pi 1.6.0's clamp keeps 4096 tokens
    free and would allow a 1-token summary. pi_nb keeps the reserve budget there (Session
    scales R to 2048 // 4 = 512, so ⌊0.8·R⌋ = 409), fits it to the window, and says so."""
    from pi_nb.agent import Session

    fake = FakeModel()
    session = Session.new(
        tmp_path / "s.jsonl", model="pinb/smollm2", complete=fake, no_tools=True
    )
    assert session.settings.pi_release == "1.6" and session.reserve == 512
    for i in range(6):
        add_turn(session.tree, f"FACT-q{i} " + "w" * 300, reply=f"FACT-r{i} " + "v" * 300)
    result = session.compact()
    assert result.budget_rule == "pi-1.3 (window too small for pi-1.6)"
    assert fake.calls == result.calls >= 1
    for request in fake.requests:
        assert 64 <= request["max_tokens"] <= 409
    assert result.projection.messages[0]["role"] == "compactionSummary"
    assert result.tokens_after < session.threshold
