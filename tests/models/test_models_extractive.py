"""The extractive summarizer, directly and as pinb/scripted's answer to Pi's summary prompt."""

from __future__ import annotations

import re

from pi_nb.models import extractive_summary, extractive_turn_prefix_summary
from pi_nb.models.extractive import parse_conversation, parse_tool_calls

CONVERSATION = """[User]: Please fix the failing test in tests/test_parser.py. You must not change the public API of parse_config(). I prefer small commits.

[Assistant]: I'll start by reading the test file.

[Assistant tool calls]: read(path="tests/test_parser.py"); bash(command="pytest -q tests/test_parser.py")

[Tool result]: def test_roundtrip():
    assert parse_config("a=1") == {"a": 1}

[Tool result]: F
E   KeyError: 'a'
FAILED tests/test_parser.py::test_roundtrip - KeyError: 'a'

[Assistant]: The parser drops keys because split_line strips the key. I decided to use str.partition instead of split because it keeps empty values. Fixed the bug in src/config/parser.py.

[Assistant tool calls]: edit(path="src/config/parser.py", oldText="k.split('=')", newText="k.partition('=')")

[Tool result]: Successfully replaced text in src/config/parser.py.

[User]: Great. Now also make ConfigLoader cache results for 300 seconds.

[Assistant]: Next I will add a TTL cache to ConfigLoader.load."""

NEW_CONVERSATION = """[User]: Then run the benchmarks. Never push to main.

[Assistant tool calls]: bash(command="make bench")

[Tool result]: Traceback (most recent call last):
RuntimeError: benchmark harness missing"""

HEADINGS = [
    "## Goal",
    "## Constraints & Preferences",
    "## Progress",
    "### Done",
    "### In Progress",
    "### Blocked",
    "## Key Decisions",
    "## Next Steps",
    "## Critical Context",
]

INSTRUCTIONS = """The messages above are a conversation to summarize. Create a structured context checkpoint summary that another LLM will use to continue the work.

Use this EXACT format:

## Goal
[What is the user trying to accomplish?]

## Constraints & Preferences
- [Any constraints, preferences, or requirements mentioned by user]

## Progress
### Done
- [x] [Completed tasks/changes]

### In Progress
- [ ] [Current work]

### Blocked
- [Issues preventing progress, if any]

## Key Decisions
- **[Decision]**: [Brief rationale]

## Next Steps
1. [Ordered list of what should happen next]

## Critical Context
- [Any data, examples, or references needed to continue]

Keep each section concise. Preserve exact file paths, function names, and error messages."""

TURN_PREFIX_INSTRUCTIONS = """This is the PREFIX of a turn that was too large to keep. The SUFFIX (recent work) is retained.

Summarize the prefix to provide context for the retained suffix:

## Original Request
[What did the user ask for in this turn?]

## Progress So Far
- [Key decisions and work done in the prefix]

## Context Needed to Continue
- [Information needed to understand the retained recent work]"""


def _headings(summary: str) -> list[str]:
    return [line for line in summary.splitlines() if line.startswith("#")]


def _bullets(summary: str) -> list[str]:
    return [
        line for line in summary.splitlines() if re.match(r"^(- |\d+\. )", line)
    ]  # fmt: skip


def test_summary_has_the_six_sections_in_order() -> None:
    assert _headings(extractive_summary(CONVERSATION)) == HEADINGS
    assert _headings(extractive_summary("")) == HEADINGS


def test_summary_keeps_real_facts() -> None:
    summary = extractive_summary(CONVERSATION)
    goal = summary.split("## Goal\n", 1)[1].split("\n\n", 1)[0]
    assert goal.startswith("Please fix the failing test in tests/test_parser.py.")
    constraints = summary.split("## Constraints & Preferences\n", 1)[1].split("\n\n", 1)[0]
    assert "- You must not change the public API of parse_config()." in constraints
    assert "- I prefer small commits." in constraints
    assert "- [x] read tests/test_parser.py" in summary
    assert "- [x] edited src/config/parser.py" in summary
    assert "- [x] ran `pytest -q tests/test_parser.py`" in summary
    assert "- [ ] Great. Now also make ConfigLoader cache results for 300 seconds." in summary
    assert "**I decided to use str.partition instead of split**: because" in summary
    critical = summary.split("## Critical Context\n", 1)[1]
    for fact in [
        "tests/test_parser.py",
        "src/config/parser.py",
        "FAILED tests/test_parser.py::test_roundtrip - KeyError: 'a'",
        "ConfigLoader",
        "split_line",
        "300 seconds",
    ]:
        assert fact in critical, fact
    next_steps = summary.split("## Next Steps\n", 1)[1].split("\n\n", 1)[0]
    assert next_steps.startswith("1. Finish: Great. Now also make ConfigLoader cache")


def test_summary_is_deterministic_and_extractive() -> None:
    summary = extractive_summary(CONVERSATION)
    assert summary == extractive_summary(CONVERSATION)
    # Every bullet's substance comes from the conversation (modulo the labels we add).
    for bullet in _bullets(summary):
        body = re.sub(r"^(- \[[ x]\] |- |\d+\. )", "", bullet)
        body = re.sub(r"^(File|Error|Identifier|Value|Finish): ", "", body)
        body = re.sub(r"^(read|edited|ran) ", "", body).strip("`*")
        words = re.findall(r"[A-Za-z_][\w.]{3,}", body)
        assert all(w in CONVERSATION for w in words), bullet


def test_update_merges_previous_summary_without_losing_bullets() -> None:
    previous = extractive_summary(CONVERSATION)
    # Pi appends file lists to stored summaries; they must not leak in as bullets.
    stored = previous + "\n<read-files>\ntests/test_parser.py\n</read-files>"
    merged = extractive_summary(NEW_CONVERSATION, previous_summary=stored)
    assert _headings(merged) == HEADINGS
    for bullet in _bullets(previous):
        body = re.sub(r"^\d+\. ", "", bullet)
        assert body in merged, bullet
    assert "<read-files>" not in merged
    # The original goal stays; new facts are added.
    assert merged.split("## Goal\n", 1)[1].startswith("Please fix the failing test")
    assert "- Never push to main." in merged
    assert "- [x] ran `make bench`" in merged
    assert "### Blocked\n- RuntimeError: benchmark harness missing" in merged
    assert "Error: RuntimeError: benchmark harness missing" in merged
    # No duplicates after merging the same conversation twice.
    twice = extractive_summary(CONVERSATION, previous_summary=previous)
    assert len(_bullets(twice)) == len(set(_bullets(twice))) == len(_bullets(previous))


def test_merge_keeps_unknown_sections_verbatim() -> None:
    previous = (
        "## Goal\nShip v2\n\n## Key Decisions\n- **Use uv**: faster\n\n"
        "---\n\n**Turn Context (split turn):**\n\n## Original Request\nRename the module"
    )
    merged = extractive_summary(NEW_CONVERSATION, previous_summary=previous)
    assert merged.split("## Goal\n", 1)[1].startswith("Ship v2")
    assert "- **Use uv**: faster" in merged
    assert merged.rstrip().endswith("## Original Request\nRename the module")


def test_max_tokens_trims_items_never_headings() -> None:
    full = extractive_summary(CONVERSATION)
    for budget in (400, 150, 60, 1):
        trimmed = extractive_summary(CONVERSATION, max_tokens=budget)
        assert _headings(trimmed) == HEADINGS
        # Within budget, unless nothing but the headings is left.
        assert len(trimmed) <= budget * 4 or _only_headings(trimmed)
        assert len(trimmed) <= len(full)
    trimmed = extractive_summary(CONVERSATION, max_tokens=150)
    # Least important first: old Done items go before constraints and the goal.
    assert "You must not change the public API" in trimmed
    assert "(omitted for length)" in trimmed


def _only_headings(summary: str) -> bool:
    return all(
        line.startswith("#") or line in ("", "(none)", "(omitted for length)")
        for line in summary.splitlines()
    )


def test_turn_prefix_summary() -> None:
    summary = extractive_turn_prefix_summary(CONVERSATION)
    assert _headings(summary) == [
        "## Original Request",
        "## Progress So Far",
        "## Context Needed to Continue",
    ]
    assert "Please fix the failing test in tests/test_parser.py." in summary
    assert "- read tests/test_parser.py" in summary
    assert "src/config/parser.py" in summary
    legacy = extractive_turn_prefix_summary(CONVERSATION, legacy_headings=True)
    assert _headings(legacy) == [
        "## Original Request",
        "## Early Progress",
        "## Context for Suffix",
    ]


def test_parse_helpers() -> None:
    parts = parse_conversation(CONVERSATION)
    assert [kind for kind, _ in parts][:3] == ["User", "Assistant", "Assistant tool calls"]
    assert parse_tool_calls('read(path="a.py"); bash(command="ls -la", timeout=5)') == [
        ("read", {"path": "a.py"}),
        ("bash", {"command": "ls -la", "timeout": 5}),
    ]
    assert parse_tool_calls('edit(path="a.py", edits=[{"old": "a, b)", "new": ";"}])') == [
        ("edit", {"path": "a.py", "edits": [{"old": "a, b)", "new": ";"}]})
    ]
    assert parse_tool_calls("garbage") == [("garbage", {})]


# -- through litellm ------------------------------------------------------------------------

SYSTEM = "You are a context summarization assistant. Do NOT continue the conversation."


def _summary_call(litellm, user_text: str, **kwargs):
    return litellm.completion(
        model="pinb/scripted",
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": user_text}],
        script=["this script must not be used for summaries"],
        **kwargs,
    )


def test_scripted_model_answers_pi_summary_prompt(litellm) -> None:
    prompt = f"<conversation>\n{CONVERSATION}\n</conversation>\n\n{INSTRUCTIONS}"
    response = _summary_call(litellm, prompt, max_tokens=13107)
    text = response.choices[0].message.content
    assert text == extractive_summary(CONVERSATION, max_tokens=13107)
    assert response.choices[0].finish_reason == "stop"
    assert response.usage.completion_tokens == -(-len(text) // 4)
    streamed = "".join(
        c.choices[0].delta.content or ""
        for c in _summary_call(litellm, prompt, max_tokens=13107, stream=True)
        if c.choices
    )
    assert streamed == text


def test_scripted_model_answers_pi_update_prompt(litellm) -> None:
    previous = extractive_summary(CONVERSATION)
    prompt = (
        f"<conversation>\n{NEW_CONVERSATION}\n</conversation>\n\n"
        f"<previous-summary>\n{previous}\n</previous-summary>\n\n{INSTRUCTIONS}"
    )
    text = _summary_call(litellm, prompt).choices[0].message.content
    assert text == extractive_summary(NEW_CONVERSATION, previous_summary=previous)
    assert "Never push to main." in text and "parse_config" in text


def test_scripted_model_answers_turn_prefix_prompts(litellm) -> None:
    pi_058 = f"<conversation>\n{CONVERSATION}\n</conversation>\n\n{TURN_PREFIX_INSTRUCTIONS}"
    text = _summary_call(litellm, pi_058).choices[0].message.content
    assert text == extractive_turn_prefix_summary(CONVERSATION)
    pi_13 = f"# Conversation\n\n{CONVERSATION}\n\n# Instructions\n\n{TURN_PREFIX_INSTRUCTIONS}"
    assert _summary_call(litellm, pi_13).choices[0].message.content == text


def test_summarize_false_replays_the_script(litellm) -> None:
    prompt = f"<conversation>\n{CONVERSATION}\n</conversation>\n\n{INSTRUCTIONS}"
    response = _summary_call(litellm, prompt, summarize=False)
    assert response.choices[0].message.content == "this script must not be used for summaries"
