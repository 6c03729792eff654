"""Continuation replay: does the agent take the same next step after compaction?

At a compaction point the model is asked for its next step twice — once with the full
context, once with the compacted one — and the two replies' first tool calls are compared
(same tool, same target: the file path, or the shell command). Where the real session goes
on, the compacted-context step is also compared with what the agent actually did next.
Nothing is executed: the tools are only declared.
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

__all__ = ["NextStep", "next_step", "replay_continuation", "step_of"]

_TARGET_ARGS = ("path", "file_path", "filepath", "notebook_path", "command", "cmd")


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
        return NextStep(None, None, "", f"{type(exc).__name__}: {exc}".splitlines()[0][:200])
    return step_of(reply)


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
    **call_options: Any,
) -> dict[str, Any]:
    """Next step with the full context (the projection at ``fork_id``) and with the
    compacted one (at ``compacted_leaf``).

    Returns ``next_full``, ``next_compacted``, ``next_actual`` (labels),
    ``continuation_agreement`` (same tool and target; None when neither reply made a tool
    call or a call failed), ``matches_actual`` (the compacted step against the first tool
    call of ``continuation``; None without one) and ``replay_error``.
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
    if not errors and (full.tool is not None or compacted.tool is not None):
        agreement = full.key() == compacted.key()
    matches: bool | None = None
    if actual is not None and compacted.error is None:
        matches = compacted.key() == actual.key()
    return {
        "next_full": full.label(),
        "next_compacted": compacted.label(),
        "next_actual": actual.label() if actual is not None else None,
        "continuation_agreement": agreement,
        "matches_actual": matches,
        "replay_error": "; ".join(errors) or None,
        "replay_steps": {"full": asdict(full), "compacted": asdict(compacted)},
    }
