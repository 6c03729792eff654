"""Property: any generated transcript, written as Claude Code, Codex or OpenAI messages,
imports with every message, tool call and tool result — in order, on the leaf's branch —
and, when the agent compacted part-way, as a Pi compaction whose projection at the leaf is
[summary, messages after] while the history before stays on the branch."""

from __future__ import annotations

import json
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_nb.research.importers import FORMATS, detect_format
from pi_nb.session import SessionTree

TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40)
NAME = st.from_regex(r"[a-z][a-z_]{0,11}", fullmatch=True)
ARGS = st.dictionaries(NAME, st.one_of(TEXT, st.integers(-999, 999), st.booleans()), max_size=3)


@dataclass
class Call:
    id: str
    name: str
    args: dict[str, Any]
    output: str
    error: bool


@dataclass
class Turn:
    user: str
    steps: list[tuple[str, list[Call]]]  # (assistant text, its calls), each step has calls
    reply: str


@st.composite
def conversations(draw: Any) -> tuple[list[Turn], int | None]:
    turns: list[Turn] = []
    counter = 0
    for _ in range(draw(st.integers(1, 4))):
        steps = []
        for _ in range(draw(st.integers(0, 3))):
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                counter += 1
                calls.append(
                    Call(f"call_{counter}", draw(NAME), draw(ARGS), draw(TEXT), draw(st.booleans()))
                )
            steps.append((draw(TEXT), calls))
        turns.append(Turn(draw(TEXT), steps, draw(TEXT)))
    # The agent compacted before turn N (never before the first).
    compact_at = draw(st.none() | st.integers(1, len(turns))) if len(turns) > 1 else None
    if compact_at == len(turns):
        compact_at = None
    return turns, compact_at


SUMMARY = "Summary of the work so far."


def claude_code(turns: list[Turn], compact_at: int | None, boundary: bool = True) -> str:
    """Claude Code records; with ``boundary`` False the older layout, where the
    ``isCompactSummary`` record alone starts the new chain."""
    lines: list[dict[str, Any]] = []
    parent: str | None = None
    base = {"isSidechain": False, "sessionId": "s-1", "cwd": "/w", "userType": "external"}

    def add(record: dict[str, Any]) -> None:
        nonlocal parent
        uuid = f"u-{len(lines)}"
        lines.append(
            {
                "parentUuid": parent,
                **base,
                **record,
                "uuid": uuid,
                "timestamp": f"2026-01-01T00:{len(lines) // 60:02d}:{len(lines) % 60:02d}Z",
            }
        )
        parent = uuid

    def assistant(content: list[dict[str, Any]], stop: str) -> None:
        add(
            {
                "type": "assistant",
                "message": {
                    "id": f"msg-{len(lines)}",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": content,
                    "stop_reason": stop,
                    "usage": {"input_tokens": 10, "output_tokens": 5},
                },
            }
        )

    for index, turn in enumerate(turns):
        if index == compact_at:
            logical, parent = parent, None  # the continuation starts a new chain
            if boundary:
                add(
                    {
                        "type": "system",
                        "subtype": "compact_boundary",
                        "logicalParentUuid": logical,
                        "content": "Conversation compacted",
                        "compactMetadata": {"trigger": "auto", "preTokens": 1234},
                    }
                )
            add(
                {
                    "type": "user",
                    "isCompactSummary": True,
                    "message": {"role": "user", "content": SUMMARY},
                }
            )
        add({"type": "user", "message": {"role": "user", "content": turn.user}})
        for text, calls in turn.steps:
            assistant(
                [{"type": "text", "text": text}]
                + [
                    {"type": "tool_use", "id": c.id, "name": c.name, "input": c.args} for c in calls
                ],
                "tool_use",
            )
            add(
                {
                    "type": "user",
                    "message": {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": c.id,
                                "content": c.output,
                                "is_error": c.error,
                            }
                            for c in calls
                        ],
                    },
                }
            )
        assistant([{"type": "text", "text": turn.reply}], "end_turn")
    return "".join(json.dumps(r) + "\n" for r in lines)


def codex(turns: list[Turn], compact_at: int | None) -> str:
    rows: list[tuple[str, dict[str, Any]]] = [
        ("session_meta", {"id": "r-1", "cwd": "/w"}),
        ("turn_context", {"model": "gpt-5", "cwd": "/w"}),
    ]

    def message(role: str, text: str) -> None:
        kind = "output_text" if role == "assistant" else "input_text"
        rows.append(
            (
                "response_item",
                {"type": "message", "role": role, "content": [{"type": kind, "text": text}]},
            )
        )

    for index, turn in enumerate(turns):
        if index == compact_at:
            rows.append(("compacted", {"message": SUMMARY}))
        message("user", turn.user)
        for text, calls in turn.steps:
            message("assistant", text)
            for c in calls:
                rows.append(
                    (
                        "response_item",
                        {
                            "type": "function_call",
                            "name": c.name,
                            "arguments": json.dumps(c.args),
                            "call_id": c.id,
                        },
                    )
                )
            for c in calls:
                output = {"output": c.output, "metadata": {"exit_code": 1 if c.error else 0}}
                rows.append(
                    (
                        "response_item",
                        {
                            "type": "function_call_output",
                            "call_id": c.id,
                            "output": json.dumps(output),
                        },
                    )
                )
        message("assistant", turn.reply)
    return "".join(
        json.dumps(
            {"timestamp": f"2026-01-01T00:00:{i % 60:02d}.{i:03d}Z", "type": t, "payload": p}
        )
        + "\n"
        for i, (t, p) in enumerate(rows)
    )


def openai(turns: list[Turn], compact_at: int | None) -> str:
    messages: list[dict[str, Any]] = []
    for turn in turns:
        messages.append({"role": "user", "content": turn.user})
        for text, calls in turn.steps:
            messages.append(
                {
                    "role": "assistant",
                    "content": text,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": json.dumps(c.args)},
                        }
                        for c in calls
                    ],
                }
            )
            messages += [
                {
                    "role": "tool",
                    "tool_call_id": c.id,
                    "content": c.output,
                    **({"is_error": True} if c.error else {}),
                }
                for c in calls
            ]
        messages.append({"role": "assistant", "content": turn.reply})
    return json.dumps({"model": "gpt-4o", "messages": messages})


WRITERS = {
    "claude-code": claude_code,
    "claude-code-old": lambda turns, at: claude_code(turns, at, boundary=False),
    "codex": codex,
    "openai": openai,
}


def _expected(turns: list[Turn]) -> dict[str, list[Any]]:
    return {
        "user": [t.user for t in turns],
        "assistantText": [x for t in turns for x in [*(s[0] for s in t.steps), t.reply]],
        "calls": [(c.id, c.name, c.args) for t in turns for _, cs in t.steps for c in cs],
        "results": [
            (c.id, c.name, c.output, c.error) for t in turns for _, cs in t.steps for c in cs
        ],
    }


def _seen(messages: list[dict[str, Any]]) -> dict[str, list[Any]]:
    def text(message: dict[str, Any]) -> list[str]:
        content = message["content"]
        if isinstance(content, str):
            return [content]
        return [b["text"] for b in content if b.get("type") == "text"]

    out: dict[str, list[Any]] = {"user": [], "assistantText": [], "calls": [], "results": []}
    for m in messages:
        if m["role"] == "user":
            out["user"] += text(m)
        elif m["role"] == "assistant":
            out["assistantText"] += text(m)
            out["calls"] += [
                (b["id"], b["name"], b["arguments"])
                for b in m["content"]
                if b.get("type") == "toolCall"
            ]
        elif m["role"] == "toolResult":
            out["results"].append((m["toolCallId"], m["toolName"], "".join(text(m)), m["isError"]))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.sampled_from(sorted(WRITERS)))
def test_every_message_call_and_result_survives(conversation: Any, fmt: str) -> None:
    turns, compact_at = conversation
    if fmt == "openai":
        compact_at = None  # the format has no compactions
    kind = fmt.removesuffix("-old")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "transcript.jsonl"
        src.write_text(WRITERS[fmt](turns, compact_at), encoding="utf-8")
        assert detect_format(src) == kind
        out = Path(tmp) / "out.jsonl"
        report = FORMATS[kind](src, out).report
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            tree = SessionTree.open(out)
    assert report.unanswered_calls == 0 and report.unmatched_results == 0
    assert report.orphans == 0 and report.generated_ids == 0
    branch = tree.get_branch()
    on_branch = [e["message"] for e in branch if e["type"] == "message"]
    assert _seen(on_branch) == _expected(turns)  # all of it on the leaf's one branch
    projection = tree.projection().messages
    compactions = [e for e in branch if e["type"] == "compaction"]
    if compact_at is None:
        assert not compactions
        assert _seen(projection) == _expected(turns)
    else:
        (compaction,) = compactions
        assert compaction["summary"] == SUMMARY
        after = branch[branch.index(compaction) + 1]
        assert compaction["firstKeptEntryId"] == after["id"]  # derived: nothing kept
        assert compaction["tokensBefore"] > 0
        assert projection[0]["role"] == "compactionSummary"
        assert _seen(projection[1:]) == _expected(turns[compact_at:])
