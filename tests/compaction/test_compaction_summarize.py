"""Serialization and summary calls (limits, failures, window-fitted chunking)."""

from __future__ import annotations

import dataclasses

import pytest
from compaction_helpers import FakeModel, reply_message
from pinb_testkit import assistant, tool_call, tool_result, user

from pi_nb.compaction import (
    DEFAULT_PROMPTS,
    SummarizationError,
    generate_summary,
    serialize_conversation,
)
from pi_nb.compaction.summarize import (
    build_summary_request,
    clamp_max_tokens_to_context,
    combine_usage,
    pi_request_tokens,
    summary_max_tokens,
)

# --- serialization ------------------------------------------------------------------------


def test_serialization_format():
    thinking = {"type": "thinking", "thinking": "secret reasoning"}
    reply = assistant(
        "Looking.",
        calls=[
            tool_call("c1", "read", path="a.py", limit=5),
            tool_call("c2", "bash", command='echo "hi"'),
        ],
    )
    reply["content"].insert(0, thinking)
    messages = [
        user("Fix a.py"),
        user(
            [
                {"type": "text", "text": "two "},
                {"type": "image", "data": "AA", "mimeType": "image/png"},
                {"type": "text", "text": "blocks"},
            ]
        ),
        user(""),
        reply,
        tool_result("c1", "print(1)"),
        {"role": "system", "content": "prompt", "timestamp": 0},
    ]
    assert serialize_conversation(messages) == (
        "[User]: Fix a.py\n\n"
        "[User]: two blocks\n\n"
        "[Assistant]: Looking.\n\n"
        '[Assistant tool calls]: read(path="a.py", limit=5); bash(command="echo \\"hi\\"")\n\n'
        "[Tool result]: print(1)"
    )


def test_assistant_text_blocks_join_with_newline_and_tool_only_reply():
    reply = assistant("first")
    reply["content"].append({"type": "text", "text": "second"})
    only_call = assistant("", calls=[tool_call("c", "ls")])
    assert serialize_conversation([reply, only_call]) == (
        "[Assistant]: first\nsecond\n\n[Assistant tool calls]: ls()"
    )


def test_long_tool_results_are_truncated_with_a_marker():
    text = "x" * 2500
    out = serialize_conversation([tool_result("c", text)])
    assert out == "[Tool result]: " + "x" * 2000 + "\n\n[... 500 more characters truncated]"


def test_short_tool_results_and_long_user_text_are_unchanged():
    assert serialize_conversation([tool_result("c", "y" * 2000)]) == "[Tool result]: " + "y" * 2000
    long_text = "u" * 9000
    assert serialize_conversation([user(long_text)]) == "[User]: " + long_text
    assert serialize_conversation([assistant(long_text)]) == "[Assistant]: " + long_text


def test_truncation_counts_utf16_units_like_javascript():
    text = "😀" * 1500  # 3000 UTF-16 units
    out = serialize_conversation([tool_result("c", text)])
    assert out == "[Tool result]: " + "😀" * 1000 + "\n\n[... 1000 more characters truncated]"


def test_internal_roles_are_serialized_as_user_text():
    summary = {
        "role": "compactionSummary",
        "summary": "old notes",
        "tokensBefore": 5,
        "timestamp": 0,
    }
    custom = {
        "role": "custom",
        "customType": "x",
        "content": "reminder",
        "display": True,
        "timestamp": 0,
    }
    out = serialize_conversation_of([summary, custom])
    assert out.startswith("[User]: ") and "old notes" in out and "[User]: reminder" in out


def serialize_conversation_of(messages):
    from pi_nb.messages import convert_to_llm

    return serialize_conversation(convert_to_llm(messages))


# --- requests and budgets -----------------------------------------------------------------


def test_request_layout():
    request = build_summary_request("CONV", "INSTR", previous_summary="PREV", focus="FOCUS")
    assert request[0] == {"role": "system", "content": DEFAULT_PROMPTS.system}
    assert request[1]["content"] == (
        "<conversation>\nCONV\n</conversation>\n\n<previous-summary>\nPREV\n</previous-summary>"
        "\n\nINSTR\n\nAdditional focus: FOCUS"
    )


def test_prompt_texts_fit_the_scripted_model_conventions():
    assert "## Original Request" in DEFAULT_PROMPTS.turn_prefix
    for section in ("## Progress So Far", "## Context Needed to Continue"):
        assert section in DEFAULT_PROMPTS.turn_prefix
    for text in (DEFAULT_PROMPTS.initial, DEFAULT_PROMPTS.update, DEFAULT_PROMPTS.branch):
        for section in (
            "## Goal",
            "## Constraints & Preferences",
            "## Progress",
            "### Done",
            "### In Progress",
            "### Blocked",
            "## Key Decisions",
            "## Next Steps",
        ):
            assert section in text
        assert "## Original Request" not in text and "prefix" not in text.lower()
    assert "## Critical Context" in DEFAULT_PROMPTS.initial


def test_max_tokens_pi_1_3():
    def rule(kind, reserve, limit):
        return summary_max_tokens(kind, reserve, limit, pi_release="1.3", window=200000)

    assert rule("history", 16384, None) == 13107
    assert rule("turn_prefix", 16384, None) == 8192
    assert rule("branch", 16384, None) == 4096
    assert rule("history", 16384, 4000) == 4000
    assert rule("branch", 16384, 2048) == 2048
    assert rule("history", 16384, 0) == 13107


@pytest.mark.parametrize("kind", ["history", "turn_prefix", "branch"])
def test_max_tokens_pi_1_6_is_the_output_limit_clamped_to_the_window(kind):
    def rule(reserve, limit, window, tokens):
        return summary_max_tokens(kind, reserve, limit, window=window, input_tokens=tokens)

    # The output limit for every kind; R plays no part.
    assert rule(16384, 64000, 200000, 5000) == rule(100, 64000, 200000, 5000) == 64000
    # 15 % margin while it leaves >= 32768: 200000 - 150000 - 22500 = 27500 < 32768, so only
    # the fixed 4096 margin, capped at 32768.
    assert rule(16384, 64000, 200000, 150000) == 32768
    assert rule(16384, 64000, 200000, 170000) == 200000 - 170000 - 4096
    assert rule(16384, 64000, 200000, 100000) == 64000  # 200000 - 100000 - 15000 = 85000
    assert rule(16384, 100000, 200000, 100000) == 85000
    assert rule(16384, 64000, 8192, 3000) == 8192 - 3000 - 4096
    assert rule(16384, 64000, 2048, 100) == 1  # never below MIN_MAX_TOKENS
    assert rule(16384, None, 100000, 0) == 100000 - 4096  # unknown output limit: the room
    assert rule(16384, 5000, None, 0) == 5000  # unknown window: the output limit
    assert rule(16384, None, None, 0) is None  # neither: no cap, the provider's default


def test_pi_input_estimate_and_clamp_match_pi_ai():
    # pi-ai: ceil(chars / 3.5) per message; 1.6.0 clamp (window <= 0: max(1, maxTokens)).
    assert pi_request_tokens([{"content": "x" * 7}, {"content": "y" * 8}]) == 2 + 3
    assert clamp_max_tokens_to_context(0, 10, 500) == 500
    assert clamp_max_tokens_to_context(-1, 10, 0) == 1


def test_small_window_keeps_the_reserve_budget_under_pi_1_6(fake):
    """pinb/smollm2's 2048 window: Pi 1.6.0's 4096-token margin would leave a 1-token reply,
    so pi_nb uses the reserve-derived budget there (and says so in budget_rule)."""
    messages = _many_facts(1, filler=100)
    result = generate_summary(
        messages, "m", reserve_tokens=512, window=2048, output_limit=2048, completion=fake
    )
    assert result.budget_rule == "pi-1.3 (window too small for pi-1.6)"
    assert fake.requests[0]["max_tokens"] == 409  # ⌊0.8·512⌋, as with pi_release="1.3"
    old = generate_summary(
        messages,
        "m",
        reserve_tokens=512,
        window=2048,
        output_limit=2048,
        completion=fake,
        pi_release="1.3",
    )
    assert old.budget_rule == "pi-1.3" and fake.requests[1]["max_tokens"] == 409
    # a window with room for Pi 1.6.0's margin keeps its rule
    roomy = generate_summary(
        messages, "m", reserve_tokens=512, window=9000, output_limit=2048, completion=fake
    )
    assert roomy.budget_rule == "pi-1.6" and fake.requests[2]["max_tokens"] == 2048


def test_generate_summary_uses_the_budget_and_initial_prompt(fake):
    result = generate_summary(
        [user("FACT-one")],
        "fake/model",
        reserve_tokens=1000,
        window=100000,
        output_limit=500,
        completion=fake,
    )
    assert fake.requests[0]["max_tokens"] == 500  # min(800, output limit)
    assert DEFAULT_PROMPTS.initial in fake.prompt(0)
    assert "<previous-summary>" not in fake.prompt(0)
    assert "FACT-one" in result.text
    assert (result.calls, result.chunks) == (1, 1)
    assert result.usage["output"] > 0 and result.usage["cost"]["total"] == pytest.approx(0.03)


def test_update_prompt_with_previous_summary_and_focus(fake):
    generate_summary(
        [user("new")],
        "m",
        previous_summary="OLD FACT-old",
        focus="keep the API key",
        window=100000,
        output_limit=0,
        completion=fake,
    )
    prompt = fake.prompt(0)
    assert DEFAULT_PROMPTS.update in prompt
    assert "<previous-summary>\nOLD FACT-old\n</previous-summary>" in prompt
    assert prompt.endswith("Additional focus: keep the API key")


@pytest.mark.parametrize(
    ("release", "budget", "focused"),
    [
        ("1.6", 3000, True),  # Pi 1.6.0: the output limit; the focus reaches the turn prefix
        ("1.3", 500, False),  # Pi 1.3.0: ⌊0.5·R⌋; no focus for the turn prefix
    ],
)
def test_turn_prefix_call(fake, release, budget, focused):
    result = generate_summary(
        [user("start")],
        "m",
        reserve_tokens=1000,
        kind="turn_prefix",
        focus="KEEP-PATHS",
        previous_summary="ignored",
        window=100000,
        output_limit=3000,
        completion=fake,
        pi_release=release,
    )
    prompt = fake.prompt(0)
    assert DEFAULT_PROMPTS.turn_prefix in prompt
    assert "ignored" not in prompt  # the previous summary is for history summaries only
    assert prompt.endswith("\n\nAdditional focus: KEEP-PATHS") == focused
    assert ("KEEP-PATHS" in prompt) == focused
    assert fake.requests[0]["max_tokens"] == budget and result.budget_rule == f"pi-{release}"


def test_custom_prompts_are_used_per_call(fake):
    mine = dataclasses.replace(DEFAULT_PROMPTS, initial="MY INSTRUCTIONS", system="MY SYSTEM")
    generate_summary([user("x")], "m", prompts=mine, window=100000, output_limit=0, completion=fake)
    assert fake.requests[0]["messages"][0]["content"] == "MY SYSTEM"
    assert fake.prompt(0).endswith("MY INSTRUCTIONS")
    assert DEFAULT_PROMPTS.initial != "MY INSTRUCTIONS"  # nothing changed globally


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        (reply_message("partial", stop="length"), "token cap"),
        (reply_message("", stop="error", errorMessage="boom"), "boom"),
        (reply_message("", stop="aborted"), "aborted"),
    ],
)
def test_failed_replies_raise(reply, match):
    model = FakeModel(lambda messages, n: reply)
    with pytest.raises(SummarizationError, match=match):
        generate_summary([user("x")], "m", window=100000, output_limit=0, completion=model)


def test_capped_summary_kept_only_when_accepted():
    model = FakeModel(lambda messages, n: reply_message("## Goal\npartial", stop="length"))
    result = generate_summary(
        [user("x")], "m", window=100000, output_limit=0, completion=model, accept_truncated=True
    )
    assert result.text == "## Goal\npartial"
    assert result.truncated == 1
    with pytest.raises(SummarizationError, match="token cap"):
        generate_summary([user("x")], "m", window=100000, output_limit=0, completion=model)


def test_tool_calls_in_the_reply_raise():
    def reply(messages, n):
        msg = reply_message("let me check")
        msg["content"].append(tool_call("c", "read", path="a.py"))
        return msg

    with pytest.raises(SummarizationError, match="tool"):
        generate_summary(
            [user("x")], "m", window=100000, output_limit=0, completion=FakeModel(reply)
        )


def test_combine_usage():
    a = reply_message("a")["usage"]
    total = combine_usage(a, None, a)
    assert total["input"] == 2 * a["input"] and total["cost"]["total"] == pytest.approx(0.06)


# --- window fitting -----------------------------------------------------------------------


def _many_facts(n: int, filler: int = 300):
    messages = []
    for i in range(n):
        messages.append(user(f"FACT-u{i} " + "w" * filler))
        messages.append(assistant(f"FACT-a{i} handled " + "v" * filler))
    return messages


def test_small_window_folds_chunks_through_the_update_prompt(fake):
    messages = _many_facts(8)
    result = generate_summary(
        messages, "m", reserve_tokens=16384, window=600, output_limit=0, completion=fake
    )
    assert result.calls == fake.calls == result.chunks > 2
    for step, request in zip(result.steps, fake.requests, strict=True):
        assert step["promptTokens"] + request["max_tokens"] <= 600
    assert DEFAULT_PROMPTS.initial in fake.prompt(0) and "<previous-summary>" not in fake.prompt(0)
    for i in range(1, fake.calls):
        assert DEFAULT_PROMPTS.update in fake.prompt(i) and "<previous-summary>" in fake.prompt(i)
    # nothing dropped: every fact reached the model, and the first chunk's survive to the end
    for i in range(8):
        assert f"FACT-u{i}" in result.text and f"FACT-a{i}" in result.text


def test_a_single_message_larger_than_the_window_is_split_not_dropped(fake):
    text = "FACT-head " + "z" * 6000 + " FACT-tail"
    result = generate_summary([user(text)], "m", window=800, output_limit=0, completion=fake)
    assert result.calls > 1
    sent = "".join(fake.prompt(i) for i in range(fake.calls))
    assert sent.count("z") == 6000
    assert "FACT-head" in result.text and "FACT-tail" in result.text


def test_max_tokens_shrinks_before_chunking(fake):
    messages = _many_facts(2, filler=200)
    result = generate_summary(
        messages, "m", reserve_tokens=16384, window=1500, output_limit=0, completion=fake
    )
    assert result.calls == 1
    budget = fake.requests[0]["max_tokens"]
    assert 64 <= budget < 13107 and result.steps[0]["promptTokens"] + budget <= 1500


def test_window_too_small_raises(fake):
    with pytest.raises(SummarizationError, match="window"):
        generate_summary(_many_facts(3), "m", window=200, output_limit=0, completion=fake)
    assert fake.calls == 0


def test_scripted_model_keeps_the_first_chunk_goal():
    pytest.importorskip("litellm")
    messages = [user("Goal: port FACT-goal parser to Rust " + "g" * 300), *_many_facts(6)]
    result = generate_summary(messages, "pinb/scripted", window=1500)
    assert result.calls > 1
    assert result.text.startswith("## Goal\nGoal: port FACT-goal parser to Rust")
