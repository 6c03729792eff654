"""``pinb/scripted``: a deterministic scripted model for tests and demos.

It replays a *script* of assistant turns passed with each call (there is no module state)::

    litellm.completion(model="pinb/scripted", messages=msgs, script=[
        "Hello!",                                                     # a text turn
        {"text": "Reading it.", "tool_calls": [{"name": "read", "arguments": {"path": "a.py"}}]},
        {"error": "rate_limit"},                                      # a fault
    ])

Which turn is replayed:

- ``script`` as a **list** (stateless): turn number = the number of ``assistant`` messages in
  the request, so a resumed or replayed conversation continues the script where it stands.
  Pass ``script_index=n`` to choose the turn explicitly.
- ``script`` as a :class:`Script` (stateful, owned by the caller): each call consumes the next
  turn in call order, so a retried request after a transient fault gets the following turn.
  The script also records every request it saw (``Script.requests``).
- Past the end of the script the reply is the text ``"(script finished)"``.

A turn is a string (text) or a dict with the keys

- ``text``: the reply text; ``tool_calls``: ``[{"name", "arguments" (dict or JSON string),
  "id" (optional)}]``;
- ``error``: raise instead of replying — ``"rate_limit"`` (``RateLimitError``), ``"server"``
  (``InternalServerError``), ``"unavailable"`` (``ServiceUnavailableError``), ``"overflow"``
  (``ContextWindowExceededError``), ``"timeout"`` (``Timeout``), ``"connection"``
  (``APIConnectionError``), ``"auth"`` (``AuthenticationError``), ``"bad_request"``
  (``BadRequestError``);
- ``stream_dies_after``: ``k`` — a stream raises ``APIConnectionError`` after ``k`` chunks (a
  non-streaming call raises it at once);
- ``malformed_tool_call``: ``True`` makes every tool call's arguments invalid JSON (a string
  names a tool to add, with broken arguments, when the turn has none).

Summarization requests — the last user message contains ``<conversation>…</conversation>``
(or Pi 1.3's ``# Conversation`` / ``# Instructions`` turn-prefix layout) — are answered with
:func:`~pi_nb.models.extractive.extractive_summary` (or the turn-prefix variant) instead of the
script, honouring ``max_tokens``; pass ``summarize=False`` to replay the script for them too.

Other call options: ``overflow_at=N`` raises ``ContextWindowExceededError`` when the request's
prompt tokens exceed ``N`` (checked before a turn is consumed); ``max_tokens`` truncates a
longer scripted reply (``finish_reason="length"``, tool calls dropped).

Usage is ``ceil(chars / 4)``: prompt = all message contents, tool calls and tool definitions
(:func:`~pi_nb.models._messages.request_tokens`); completion = reply text + tool call names and
arguments. The model does not import litellm; :mod:`pi_nb.models.provider` wraps it.
"""

from __future__ import annotations

import copy
import json
import math
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._messages import estimate_tokens, last_user_text, request_tokens, tool_call_chars
from .extractive import extractive_summary, extractive_turn_prefix_summary

__all__ = [
    "FAULTS",
    "SCRIPT_FINISHED_TEXT",
    "Script",
    "ScriptError",
    "ScriptedReply",
    "Turn",
    "extractive_summary",
    "plan_reply",
    "stream_chunks",
]

#: A script turn: plain text, or a dict (see the module docstring).
Turn = str | Mapping[str, Any]

#: Reply once the script is exhausted.
SCRIPT_FINISHED_TEXT = "(script finished)"

#: Fault names accepted in a turn's ``error`` key.
FAULTS = (
    "rate_limit",
    "server",
    "unavailable",
    "overflow",
    "timeout",
    "connection",
    "auth",
    "bad_request",
)

_TURN_KEYS = {"text", "tool_calls", "error", "stream_dies_after", "malformed_tool_call"}
_WORDS_PER_CHUNK = 3


class ScriptError(ValueError):
    """A script turn of the wrong shape: a configuration mistake, never a model failure.

    The message is one line naming the turn; the provider raises it to litellm callers as
    a ``BadRequestError`` (not retried).
    """


def check_turns(turns: Iterable[Turn]) -> None:
    """Raise :class:`ScriptError` for the first malformed turn (see the module docstring)."""
    for index, turn in enumerate(turns):
        _normalize_turn(turn, index)


class Script:
    """A caller-owned, stateful script: each call consumes the next turn, in call order.

    Pass the same instance on every call (``script=my_script``). Summarization requests do not
    consume turns (unless ``summarize=False``), nor do requests rejected by ``overflow_at``.

    Attributes:
        turns: the turns, as given.
        position: index of the next turn to replay.
        requests: every request seen, as ``{"messages", "tools", "turn"}`` dicts (``turn`` is
            the index replayed, or ``None`` for a summary / rejected request).
    """

    def __init__(self, turns: Iterable[Turn]) -> None:
        self.turns: list[Turn] = list(turns)
        check_turns(self.turns)  # a malformed script fails here, before any call
        self.position = 0
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()  # concurrent acompletion calls must not share a turn

    def __repr__(self) -> str:
        return f"Script({len(self.turns)} turns, position={self.position})"

    @property
    def exhausted(self) -> bool:
        """True once every turn has been replayed."""
        return self.position >= len(self.turns)

    def _take(self) -> tuple[int, Turn | None]:
        with self._lock:
            index = self.position
            self.position += 1
        return index, self.turns[index] if index < len(self.turns) else None

    def _record(self, messages: Sequence[Mapping[str, Any]], tools: Any, turn: int | None) -> None:
        with self._lock:
            self.requests.append(
                {"messages": copy.deepcopy(list(messages)), "tools": tools, "turn": turn}
            )


@dataclass
class ScriptedReply:
    """What ``pinb/scripted`` answers to one request (before litellm wrapping).

    ``error`` is a fault name from :data:`FAULTS` (the reply must be raised, not returned);
    ``stream_dies_after`` the number of stream chunks delivered before the connection drops.
    """

    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    error_message: str = ""
    stream_dies_after: int | None = None
    turn: int | None = None
    summary: bool = False

    @property
    def usage(self) -> dict[str, int]:
        """OpenAI-style usage dict."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }


# ---------------------------------------------------------------------------------------------
# Summarization requests


def _between(text: str, start: str, end: str) -> tuple[str, int, int] | None:
    """Text between the first ``start`` and the last ``end`` after it, with the span."""
    i = text.find(start)
    if i < 0:
        return None
    j = text.rfind(end)
    if j < i:
        return None
    return text[i + len(start) : j].strip("\n"), i, j + len(end)


def summary_request(text: str) -> dict[str, Any] | None:
    """Parse a Pi summarization prompt (the user message) into its parts.

    Returns ``{"conversation", "previous_summary", "instructions", "turn_prefix",
    "legacy_headings"}`` or ``None`` when ``text`` is not a summarization request.
    """
    previous = None
    prev = _between(text, "<previous-summary>", "</previous-summary>")
    if prev:
        previous = prev[0]
        # The conversation ends before the previous summary, whatever it contains.
        head, tail = text[: prev[1]], text[prev[2] :]
    else:
        head, tail = text, ""
    conv = _between(head, "<conversation>", "</conversation>")
    if conv:
        conversation, instructions = conv[0], head[conv[2] :] + tail
    else:
        # Pi 1.3 turn-prefix layout: "# Conversation\n…\n# Instructions\n…".
        m = re.search(r"^# Conversation\s*$(.*?)^# Instructions\s*$(.*)", text, re.M | re.S)
        if not m:
            return None
        conversation, instructions = m.group(1).strip("\n"), m.group(2)
    # Pi's turn-prefix prompts ask for "## Original Request" and shout "PREFIX"; a lowercase
    # "prefix" alone may be a user's custom focus text, so it does not count.
    turn_prefix = "## Original Request" in instructions or bool(
        re.search(r"\bPREFIX\b|\bprefix of (?:a|an|the) (?:\w+ )?turn\b", instructions)
    )
    return {
        "conversation": conversation,
        "previous_summary": previous,
        "instructions": instructions.strip(),
        "turn_prefix": turn_prefix,
        "legacy_headings": "## Early Progress" in instructions,
    }


def _summarize(request: Mapping[str, Any], max_tokens: int | None) -> str:
    if request["turn_prefix"]:
        return extractive_turn_prefix_summary(
            request["conversation"], max_tokens, legacy_headings=request["legacy_headings"]
        )
    return extractive_summary(request["conversation"], request["previous_summary"], max_tokens)


# ---------------------------------------------------------------------------------------------
# Script turns


def _normalize_turn(turn: Turn, index: int) -> dict[str, Any]:
    """The turn as a dict; :class:`ScriptError` (one line) when it has the wrong shape."""
    if isinstance(turn, str):
        return {"text": turn}
    if not isinstance(turn, Mapping):
        raise ScriptError(
            f"script turn {index} must be a str or a dict, not {type(turn).__name__}"
        )
    unknown = set(turn) - _TURN_KEYS
    if unknown:
        raise ScriptError(
            f"script turn {index} has unknown keys {sorted(unknown)}; known: {sorted(_TURN_KEYS)}"
        )
    if turn.get("error") is not None and turn["error"] not in FAULTS:
        raise ScriptError(f"script turn {index}: unknown error {turn['error']!r}; known: {FAULTS}")
    if turn.get("text") is not None and not isinstance(turn["text"], str):
        raise ScriptError(f"script turn {index}: text must be a str, not {type(turn['text']).__name__}")
    dies = turn.get("stream_dies_after")
    if dies is not None and (not isinstance(dies, int) or isinstance(dies, bool) or dies < 0):
        raise ScriptError(f"script turn {index}: stream_dies_after must be an int ≥ 0, not {dies!r}")
    calls = turn.get("tool_calls")
    if calls is not None and not isinstance(calls, (list, tuple)):
        raise ScriptError(
            f"script turn {index}: tool_calls must be a list of {{'name', 'arguments'}} dicts, "
            f"not {type(calls).__name__}"
        )
    for j, call in enumerate(calls or ()):
        where = f"script turn {index}: tool call {j}"
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            raise ScriptError(f"{where} must be a dict with a 'name' (str), not {call!r:.80}")
        if not isinstance(call.get("arguments", {}), (Mapping, str)):
            raise ScriptError(f"{where}: arguments must be a dict or a JSON string")
    return dict(turn)


def _tool_calls(turn: Mapping[str, Any], index: int) -> list[dict[str, Any]]:
    calls = []
    for j, call in enumerate(turn.get("tool_calls") or ()):
        args = call.get("arguments", {})
        calls.append(
            {
                "id": call.get("id") or f"call_{index}_{j}",
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
        )
    malformed = turn.get("malformed_tool_call")
    if malformed:
        if not calls:
            name = malformed if isinstance(malformed, str) else "bash"
            calls.append(
                {
                    "id": f"call_{index}_0",
                    "type": "function",
                    "function": {"name": name, "arguments": '{"command": "ls -la'},
                }
            )
        for call in calls:
            # Drop the closing brace (or add a stray one): never valid JSON either way.
            args = call["function"]["arguments"]
            call["function"]["arguments"] = args[:-1] if args.endswith("}") else args + "}{"
    return calls


def plan_reply(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    *,
    script: Sequence[Turn] | Script | None = None,
    script_index: int | None = None,
    overflow_at: int | None = None,
    max_tokens: int | None = None,
    summarize: bool = True,
) -> ScriptedReply:
    """Decide the scripted model's reply to one request (see the module docstring).

    Pure: raises nothing for scripted faults — they come back in ``error`` — so that a
    streaming call can consume its turn at call time and raise on first iteration.
    """
    if script is not None and not isinstance(script, (Script, list, tuple)):
        raise ScriptError(f"script must be a list of turns or a Script, not {type(script).__name__}")
    prompt_tokens = request_tokens(messages, tools)
    if overflow_at is not None and prompt_tokens > overflow_at:
        if isinstance(script, Script):
            script._record(messages, tools, None)
        return ScriptedReply(
            prompt_tokens=prompt_tokens,
            error="overflow",
            error_message=_overflow_message(overflow_at, prompt_tokens),
        )

    request = summary_request(last_user_text(messages) or "") if summarize else None
    if request is not None:
        if isinstance(script, Script):
            script._record(messages, tools, None)
        text = _summarize(request, max_tokens)
        return ScriptedReply(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=estimate_tokens(text),
            summary=True,
        )

    if script_index is not None or not isinstance(script, Script):
        turns = script.turns if isinstance(script, Script) else list(script or ())
        index = (
            script_index
            if script_index is not None
            else sum(1 for m in messages if m.get("role") == "assistant")
        )
        raw = turns[index] if 0 <= index < len(turns) else None
        if isinstance(script, Script):
            script._record(messages, tools, index)  # an explicit index consumes nothing
    else:
        index, raw = script._take()
        script._record(messages, tools, index)

    turn = _normalize_turn(raw, index) if raw is not None else {"text": SCRIPT_FINISHED_TEXT}
    if turn.get("error"):
        message = (
            _overflow_message(
                overflow_at if overflow_at is not None else max(prompt_tokens - 1, 0),
                prompt_tokens,
            )
            if turn["error"] == "overflow"
            else f"scripted fault at turn {index}"
        )
        return ScriptedReply(
            prompt_tokens=prompt_tokens, error=turn["error"], error_message=message, turn=index
        )

    text = str(turn.get("text") or "")
    calls = _tool_calls(turn, index)
    completion = math.ceil((len(text) + tool_call_chars(calls)) / 4)
    finish = "tool_calls" if calls else "stop"
    limit = max_tokens if max_tokens is not None and max_tokens > 0 else None
    if limit is not None and completion > limit:
        # Like a real model hitting the cap: cut text, no (half-written) tool calls.
        text, calls, finish = text[: limit * 4], [], "length"
        completion = estimate_tokens(text)
    return ScriptedReply(
        text=text,
        tool_calls=calls,
        finish_reason=finish,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion,
        stream_dies_after=turn.get("stream_dies_after"),
        turn=index,
    )


def _overflow_message(window: int, prompt_tokens: int) -> str:
    # Wording that Pi's isContextOverflow patterns (and litellm's) recognise.
    return (
        f"This model's maximum context length is {window} tokens. However, your messages "
        f"resulted in {prompt_tokens} tokens (context_length_exceeded)."
    )


# ---------------------------------------------------------------------------------------------
# Streaming


def _text_pieces(text: str) -> list[str]:
    words = re.findall(r"\S+\s*|\s+", text)
    return [
        "".join(words[i : i + _WORDS_PER_CHUNK]) for i in range(0, len(words), _WORDS_PER_CHUNK)
    ]


def stream_chunks(reply: ScriptedReply) -> list[dict[str, Any]]:
    """The reply as litellm ``GenericStreamingChunk`` dicts.

    Text comes in pieces of a few words, then each tool call in two chunks (id + name + first
    half of the arguments, then the rest, as OpenAI streams them), then a final empty chunk
    with ``finish_reason`` and ``usage``.
    """

    def chunk(text: str = "", tool_use: dict[str, Any] | None = None) -> dict[str, Any]:
        return {
            "text": text,
            "tool_use": tool_use,
            "is_finished": False,
            "finish_reason": "",
            "usage": None,
            "index": 0,
        }

    chunks = [chunk(piece) for piece in _text_pieces(reply.text)]
    for j, call in enumerate(reply.tool_calls):
        args = call["function"]["arguments"]
        half = len(args) // 2
        first = {"name": call["function"]["name"], "arguments": args[:half]}
        chunks.append(
            chunk(tool_use={"id": call["id"], "type": "function", "function": first, "index": j})
        )
        if args[half:]:
            rest = {"name": None, "arguments": args[half:]}
            chunks.append(
                chunk(tool_use={"id": None, "type": "function", "function": rest, "index": j})
            )
    final = chunk()
    final.update(is_finished=True, finish_reason=reply.finish_reason, usage=reply.usage)
    chunks.append(final)
    return chunks
