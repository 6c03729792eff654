"""Fixtures of the policy tests: forgetful summarizers, a history builder, and the Pi
oracle fixtures of tests/compat re-exported (``pi_version``, ``pi_oracle``, ``compat``)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from pinb_testkit import assistant, new_tree, tool_call, tool_result, user

# --- the compat fixtures, loaded under their own module name (any import mode) -------------------

_COMPAT = Path(__file__).resolve().parents[1] / "compat" / "conftest.py"
_spec = importlib.util.spec_from_file_location("pi_nb_tests_compat_conftest", _COMPAT)
assert _spec is not None and _spec.loader is not None
_compat_module = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _compat_module
_spec.loader.exec_module(_compat_module)
pi_version = _compat_module.pi_version  # one test instance per Pi release
pi_oracle = _compat_module.pi_oracle
compat = _compat_module.compat

MODEL = "pinb/scripted"


def reply(text: str, prompt_chars: int = 400) -> dict[str, Any]:
    """A Pi assistant message, as a summary completion returns it."""
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "api": "fake",
        "provider": "fake",
        "model": "fake",
        "usage": {
            "input": math.ceil(prompt_chars / 4),
            "output": math.ceil(len(text) / 4),
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": math.ceil(prompt_chars / 4) + math.ceil(len(text) / 4),
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        },
        "stopReason": "stop",
        "timestamp": 1,
    }


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


@pytest.fixture
def tree(tmp_path: Path) -> Any:
    return new_tree(str(tmp_path / "session.jsonl"))


@pytest.fixture
def mem_tree() -> Any:
    return new_tree()
