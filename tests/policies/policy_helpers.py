"""Helpers of the policy tests: forgetful summarizers and a history builder."""

from __future__ import annotations

from typing import Any

from pinb_testkit import assistant, summary_reply, tool_call, tool_result, user

MODEL = "pinb/scripted"


def reply(text: str, prompt_chars: int = 400) -> dict[str, Any]:
    """A Pi assistant message, as a summary completion returns it (costing nothing)."""
    return summary_reply(text, prompt_chars=prompt_chars)


class Forgetful:
    """A summary completion that never mentions anything specific (it omits every fact).

    ``keep`` lists phrases it does repeat when the request contains them (to simulate a
    summarizer that keeps some facts); ``obey_focus`` repeats the bullet lines of an
    "Additional focus" block (a summarizer that follows a focused request).
    """

    def __init__(self, keep: tuple[str, ...] = (), obey_focus: bool = False) -> None:
        self.keep = keep
        self.obey_focus = obey_focus
        self.requests: list[str] = []

    def __call__(self, model: str, messages: list[dict[str, Any]], **kwargs: Any) -> dict:
        prompt = str(messages[-1]["content"])
        self.requests.append(prompt)
        kept = [k for k in self.keep if k in prompt]
        if self.obey_focus and "Additional focus:" in prompt:
            focus = prompt.split("Additional focus:", 1)[1]
            kept += [line[2:].strip() for line in focus.splitlines() if line.startswith("- ")]
        lines = "\n".join(f"- {k}" for k in kept) or "(none)"
        text = (
            f"## Goal\nContinue the refactoring (summary {len(self.requests)}).\n\n"
            f"## Constraints & Preferences\n{lines}\n\n## Next Steps\n1. Keep going."
        )
        return reply(text, sum(len(str(m["content"])) for m in messages))

    @property
    def calls(self) -> int:
        return len(self.requests)


def add_turn(
    tree: Any, text: str, answer: str, *, read: str | None = None, output: str = ""
) -> None:
    """user → [assistant read call → tool result] → assistant."""
    tree.append_message(user(text))
    if read is not None:
        call_id = f"call_{len(tree.entries)}"
        tree.append_message(assistant("", tokens=0, calls=[tool_call(call_id, "read", path=read)]))
        tree.append_message(tool_result(call_id, output or f"contents of {read}\n" * 20, "read"))
    tree.append_message(assistant(answer, tokens=0))


def filler_turns(tree: Any, start: int, count: int) -> None:
    """``count`` unremarkable turns (each ~150 tokens) so a compaction has work to do."""
    for i in range(start, start + count):
        add_turn(
            tree,
            f"Step {i}: tidy up module_{i}. " + "Carry on with the plan. " * 10,
            f"Tidied module_{i}. " + "All good so far. " * 10,
            read=f"src/module_{i}.py",
        )
