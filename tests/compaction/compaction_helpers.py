"""Helpers for the compaction tests: a recording fake model and session builders."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pinb_testkit import assistant, summary_reply, tool_call, tool_result, user

_FACT = re.compile(r"FACT-[A-Za-z0-9]+")


def _between(text: str, start: str, end: str) -> str:
    i, j = text.find(start), text.rfind(end)
    return text[i + len(start) : j] if i >= 0 and j > i else ""


class FakeModel:
    """A completion callable that records every request and answers with a summary.

    The default answer lists the ``FACT-…`` markers of the previous summary and of the
    conversation (in order, deduplicated), so folded chunks can be checked end to end.
    ``reply`` may override the whole assistant message.
    """

    def __init__(self, reply: Callable[[list[dict[str, Any]], int], dict[str, Any]] | None = None):
        self.requests: list[dict[str, Any]] = []
        self._reply = reply

    def __call__(self, model: str, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        prompt = messages[-1]["content"]
        self.requests.append({"model": model, "messages": messages, **kwargs})
        if self._reply is not None:
            return self._reply(messages, len(self.requests))
        previous = _between(prompt, "<previous-summary>\n", "\n</previous-summary>")
        conversation = _between(prompt, "<conversation>\n", "\n</conversation>")
        facts = list(dict.fromkeys(_FACT.findall(previous) + _FACT.findall(conversation)))
        kind = "prefix" if "## Original Request" in prompt else "history"
        text = f"## Goal\nsummary {len(self.requests)} ({kind})\n\n## Critical Context\n" + (
            "\n".join(f"- {f}" for f in facts) or "(none)"
        )
        return reply_message(text, prompt_chars=sum(len(m["content"]) for m in messages))

    @property
    def calls(self) -> int:
        return len(self.requests)

    def prompt(self, index: int) -> str:
        return self.requests[index]["messages"][-1]["content"]


#: What the fake summary replies of the compaction tests cost (priced, so sums show).
PRICED = {"input": 0.01, "output": 0.02, "cacheRead": 0, "cacheWrite": 0, "total": 0.03}


def reply_message(text: str, *, stop: str = "stop", prompt_chars: int = 400, **extra: Any) -> dict:
    return summary_reply(text, stop=stop, prompt_chars=prompt_chars, cost=dict(PRICED), **extra)


def add_turn(tree, text: str, *, steps: list[tuple[str, dict, str]] = (), reply: str = "done"):
    """user → (assistant tool call → tool result)* → assistant; returns the entries."""
    entries = [tree.append_message(user(text))]
    for i, (name, args, result) in enumerate(steps):
        call_id = f"call_{len(tree.entries)}_{i}"
        entries.append(
            tree.append_message(
                assistant("", calls=[tool_call(call_id, name, **args)], stop="toolUse", tokens=0)
            )
        )
        entries.append(tree.append_message(tool_result(call_id, result, name=name)))
    entries.append(tree.append_message(assistant(reply, tokens=0)))
    return entries


def long_session(tree, turns: int = 6, chars: int = 600) -> list[list[dict]]:
    """Turns with a FACT marker each, reading and editing files, each about ``chars`` long."""
    out = []
    for i in range(turns):
        out.append(
            add_turn(
                tree,
                f"Task {i}: FACT-t{i} fix src/mod{i}.py " + "x" * chars,
                steps=[
                    ("read", {"path": f"src/mod{i}.py"}, "code " * (chars // 5)),
                    ("edit", {"path": f"src/mod{i}.py", "oldText": "a", "newText": "b"}, "ok"),
                ],
                reply=f"Fixed `parse_{i}` in src/mod{i}.py",
            )
        )
    return out


def split_turn_history(tree) -> None:
    """Two short turns, then one turn whose four large tool results make any small keep
    budget cut inside it (a split turn)."""
    long_session(tree, 2, chars=200)
    add_turn(
        tree,
        "big refactor FACT-request",
        steps=[("read", {"path": f"big{i}.py"}, f"FACT-r{i} " + "B" * 3000) for i in range(4)],
        reply="refactor finished",
    )
