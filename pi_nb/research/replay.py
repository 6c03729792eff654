"""Continuation replay: does the agent take the same next step after compaction?

At a compaction point the model is asked for its next step twice — once with the full
context, once with the compacted one — and the two replies' first tool calls are compared
(same tool, same target: the file path, or the shell command). Where the real session goes
on, the compacted-context step is also compared with what the agent actually did next.
Nothing is executed: the tools are only declared.

When neither reply makes a tool call there is no target to compare: with a ``judge_model``
the judge reads the two replies and grades on :data:`AGREEMENT_RUBRIC` (0–5) whether they
take the same next step; a grade of :data:`AGREES_AT` or more is ``continuation_agreement``
True. The judge sees only the two replies — none of the strategies' rules or the probes'
heuristics — and its exchange (prompt, reply, grade) is returned for audit. Without a judge
the agreement stays None and ``agreement_note`` says why.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ..messages import content_text, to_request

if TYPE_CHECKING:
    from ..entries import Message
    from ..session.tree import SessionTree

__all__ = [
    "AGREEMENT_RUBRIC",
    "AGREES_AT",
    "NextStep",
    "judge_agreement",
    "next_step",
    "replay_continuation",
    "step_of",
]

_TARGET_ARGS = ("path", "file_path", "filepath", "notebook_path", "command", "cmd")

#: The 0–5 rubric the judge grades two replies' next steps on.
AGREEMENT_RUBRIC = """5 - the same next step (same action on the same thing, or the same answer)
4 - the same next step in other words, or with a small difference of detail
3 - the same intent, carried out differently
2 - related, but a different next step
1 - a different next step on the same task
0 - unrelated or contradictory next steps"""
#: The judge's grade from which two replies agree (``continuation_agreement`` True).
AGREES_AT = 3
_AGREEMENT_PROMPT = (
    "Two replies of a coding agent were written at the same point of a session: reply A with "
    "the full conversation, reply B with a compacted version of it. Grade whether they take "
    "the same next step.\n\nReply A (full context):\n{full}\n\nReply B (compacted context):\n"
    "{compacted}\n\nRubric:\n{rubric}\n\nReply with one line: GRADE: <0-5> - <short reason>"
)
_NO_JUDGE = (
    "neither reply made a tool call and no judge model was given (pass judge_model to have "
    "the judge compare the two replies)"
)


@dataclass(frozen=True)
class NextStep:
    """A next step: the first tool call of a reply (``tool`` None when it made none)."""

    tool: str | None
    target: str | None
    text: str = ""
    error: str | None = None

    def key(self) -> tuple[str, str] | None:
        """(tool, normalized target) — what two steps must share to agree."""
        if self.tool is None:
            return None
        target = " ".join((self.target or "").split())
        if "/" in target and " " not in target:  # a path: its last two components
            target = "/".join([p for p in re.split(r"[\\/]+", target) if p and p != "."][-2:])
        return self.tool.lower(), target

    def label(self) -> str:
        if self.error:
            return f"(error: {self.error})"
        return f"{self.tool} {self.target or ''}".strip() if self.tool else "(no tool call)"


def step_of(message: Mapping[str, Any]) -> NextStep:
    """The next step an assistant message takes (its first tool call)."""
    text = content_text(
        [b for b in message.get("content") or [] if isinstance(b, dict) and b.get("type") == "text"]
    )
    for block in message.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "toolCall":
            args = block.get("arguments") if isinstance(block.get("arguments"), dict) else {}
            target = next((args[k] for k in _TARGET_ARGS if isinstance(args.get(k), str)), None)
            if target is None and isinstance(args.get("command"), list):
                target = " ".join(str(c) for c in args["command"])
            return NextStep(str(block.get("name", "")), target, text)
    return NextStep(None, None, text)


def _default_tools() -> list[dict[str, Any]]:
    from ..agent.tools import default_tools, to_openai_tools

    return to_openai_tools(default_tools())


def next_step(
    messages: Sequence[Message],
    model: str,
    *,
    tools: Sequence[dict[str, Any]] | None = None,
    completion: Callable[..., Message] | None = None,
    **call_options: Any,
) -> NextStep:
    """Ask ``model`` for its next step after ``messages`` (Pi messages, e.g. a projection).

    ``tools``: OpenAI tool declarations (default: Pi's read, write, edit and bash). A failed
    call is a step with ``error`` set, never an exception.
    """
    declared = list(tools) if tools is not None else _default_tools()
    request = to_request(messages, None, declared)
    try:
        if completion is not None:
            reply = completion(model, request, tools=declared, **call_options)
        else:
            from ..llm import complete

            reply = complete(model, request, tools=declared, stream=False, **call_options)
    except Exception as exc:  # the replay is a measurement: a failure is recorded
        from .judge import failure_text

        return NextStep(None, None, "", failure_text(exc))
    return step_of(reply)


def judge_agreement(
    full: NextStep,
    compacted: NextStep,
    model: str,
    *,
    completion: Callable[..., Message] | None = None,
    **call_options: Any,
) -> dict[str, Any]:
    """Ask the judge ``model`` whether two replies without a tool call take the same next
    step (:data:`AGREEMENT_RUBRIC`).

    Returns the exchange for audit: ``model``, ``prompt``, ``reply``, ``grade`` (0–5, None
    on a failure), ``agrees`` (grade ≥ :data:`AGREES_AT`; None on a failure) and ``error``
    (the call raised, the reply was empty or had no grade). Never raises for a failed call.
    """
    from .judge import ask_model, failure_text, grade_of

    prompt = _AGREEMENT_PROMPT.format(
        full=full.text.strip(), compacted=compacted.text.strip(), rubric=AGREEMENT_RUBRIC
    )
    log: dict[str, Any] = {"model": model, "prompt": prompt, "reply": "", "grade": None}
    try:
        log["reply"] = ask_model(
            model, [{"role": "user", "content": prompt}], completion, **call_options
        )
    except Exception as exc:  # a failed judge call is recorded, never a crash
        log["error"] = f"judge: {failure_text(exc)}"
    else:
        log["grade"] = grade_of(log["reply"])
        if not log["reply"]:
            log["error"] = "judge: empty reply"
        elif log["grade"] is None:
            log["error"] = f"judge: unparseable reply {log['reply'][:80]!r}"
        else:
            log["error"] = None
    log["agrees"] = None if log["grade"] is None else log["grade"] >= AGREES_AT
    return log


def _actual_step(continuation: Sequence[Message]) -> NextStep | None:
    for message in continuation:
        if message.get("role") == "assistant":
            step = step_of(message)
            if step.tool is not None:
                return step
    return None


def replay_continuation(
    tree: SessionTree,
    fork_id: str,
    compacted_leaf: str,
    model: str,
    *,
    continuation: Sequence[Message] | None = None,
    tools: Sequence[dict[str, Any]] | None = None,
    completion: Callable[..., Message] | None = None,
    judge_model: str | None = None,
    judge_completion: Callable[..., Message] | None = None,
    judge_options: Mapping[str, Any] | None = None,
    **call_options: Any,
) -> dict[str, Any]:
    """Next step with the full context (the projection at ``fork_id``) and with the
    compacted one (at ``compacted_leaf``).

    Returns ``next_full``, ``next_compacted``, ``next_actual`` (labels),
    ``continuation_agreement`` (same tool and target when a reply made a tool call; else
    the judge's verdict, see :func:`judge_agreement`; None when a call failed or there is no
    judge), ``agreement_basis`` (``"tool call"``, ``"judge <model>"`` or None),
    ``agreement_score`` (the judge's 0–5 grade), ``agreement_note`` (why the agreement is
    None), ``agreement_log`` (the judge's exchange, or None), ``matches_actual`` (the
    compacted step against the first tool call of ``continuation``; None without one) and
    ``replay_error``.

    ``judge_model`` / ``judge_completion`` / ``judge_options``: the judge for replies
    without a tool call (its own model call and options, apart from the replayed model's).
    """
    full = next_step(
        tree.projection(fork_id).messages, model, tools=tools, completion=completion, **call_options
    )
    compacted = next_step(
        tree.projection(compacted_leaf).messages,
        model,
        tools=tools,
        completion=completion,
        **call_options,
    )
    actual = _actual_step(continuation or [])
    errors = [s.error for s in (full, compacted) if s.error]
    agreement: bool | None = None
    basis: str | None = None
    note: str | None = None
    log: dict[str, Any] | None = None
    if errors:
        note = "a replay call failed (see replay_error)"
    elif full.tool is not None or compacted.tool is not None:
        agreement, basis = full.key() == compacted.key(), "tool call"
    elif not (full.text.strip() or compacted.text.strip()):
        note = "both replies are empty (no tool call, no text): nothing to compare"
    elif judge_model is None:
        note = _NO_JUDGE
    else:
        log = judge_agreement(
            full, compacted, judge_model, completion=judge_completion, **(judge_options or {})
        )
        agreement, note = log["agrees"], log["error"]
        basis = f"judge {judge_model}" if log["error"] is None else None
    matches: bool | None = None
    if actual is not None and compacted.error is None:
        matches = compacted.key() == actual.key()
    return {
        "next_full": full.label(),
        "next_compacted": compacted.label(),
        "next_actual": actual.label() if actual is not None else None,
        "continuation_agreement": agreement,
        "agreement_basis": basis,
        "agreement_score": log["grade"] if log is not None else None,
        "agreement_note": note,
        "agreement_log": log,
        "matches_actual": matches,
        "replay_error": "; ".join(errors) or None,
        "replay_steps": {"full": asdict(full), "compacted": asdict(compacted)},
    }
