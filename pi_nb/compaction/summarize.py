"""Summary model calls: serialize the conversation, ask for a structured summary.

The conversation is serialized to plain text (``[User]: …``, ``[Assistant]: …``,
``[Assistant tool calls]: …``, ``[Tool result]: …``) so the summarizing model reads it as a
document instead of continuing it. Tool results are cut to 2000 characters; thinking is
left out (Pi 1.3.0 and 1.6.0).

The output budget of a call follows ``pi_release`` (:data:`~.settings.PiRelease`): Pi 1.6.0
sends no ``maxTokens``, so the model's output limit applies, fitted to the window by pi-ai
1.6.0's ``clampMaxTokensToContext`` (:func:`clamp_max_tokens_to_context`); Pi 1.3.0 asks for
⌊0.8·R⌋ (history), ⌊0.5·R⌋ (turn prefix) or 4096 (branch), capped by the output limit.
Pi 1.6.0's clamp keeps at least 4096 tokens free, which leaves a window of a few thousand
tokens (``pinb/smollm2``'s 2048) a 1-token reply; there pi_nb uses the 1.3.0 budget, which
keeps the summary inside the reserve R (recorded as ``SummaryResult.budget_rule``).

When a request would not fit the summarizing model's context window (a 2048-token local
model, say), the messages are split into chunks that fit and folded one after another
through the *update* prompt: summary of chunk 1, then that summary updated with chunk 2,
and so on. No history is dropped; :class:`SummaryResult` records how many calls it took.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..entries import Message, empty_usage, js_len, js_stringify
from ..messages import content_text, convert_to_llm
from .prompts import DEFAULT_PROMPTS, PromptSet
from .settings import PI_RELEASES, PiRelease

__all__ = [
    "BRANCH_SUMMARY_MAX_TOKENS",
    "TOOL_RESULT_MAX_CHARS",
    "Completion",
    "SummarizationError",
    "SummaryKind",
    "SummaryResult",
    "build_summary_request",
    "clamp_max_tokens_to_context",
    "combine_usage",
    "generate_summary",
    "pi_request_tokens",
    "serialize_conversation",
    "serialize_parts",
    "summary_max_tokens",
    "truncate_for_summary",
]

#: Tool results longer than this (UTF-16 units, like Pi) are cut in the serialized text.
TOOL_RESULT_MAX_CHARS = 2000
#: Output cap of a branch summary (further capped by the model's output limit).
BRANCH_SUMMARY_MAX_TOKENS = 4096
#: Tokens counted per request on top of its text (chat-template markers).
REQUEST_OVERHEAD_TOKENS = 16
#: Share of the summarizer's window kept free for estimation error (chars / 4 vs real tokens).
WINDOW_MARGIN = 0.1
#: Smallest output budget a window-fitted call gets.
MIN_OUTPUT_TOKENS = 64
#: Allowance for the ``<previous-summary>`` tags around a running summary.
PREVIOUS_SUMMARY_TAG_TOKENS = 8
#: Smallest conversation slice (tokens) a chunk may carry before giving up.
MIN_CHUNK_TOKENS = 16

# pi-ai 1.6.0 ``clampMaxTokensToContext`` (dist/api/simple-options.js) and its estimate.
#: Tokens always kept free between the estimated input and the window.
CONTEXT_SAFETY_TOKENS = 4096
#: Share of the input kept free as well, while that still leaves 32768 tokens of output.
CONTEXT_SAFETY_RATIO = 0.15
MIN_OUTPUT_WITH_RATIO_MARGIN = 32768
MIN_MAX_TOKENS = 1
#: pi-ai's ``estimateTextTokens``: ceil(UTF-16 units / 3.5) per message.
PI_CHARS_PER_TOKEN = 3.5

SummaryKind = Literal["history", "turn_prefix", "branch"]
#: ``completion(model, openai_messages, max_tokens=n) -> Pi assistant message``.
Completion = Callable[..., Message]

_LABELS = {
    "history": "Summarization",
    "turn_prefix": "Turn prefix summarization",
    "branch": "Branch summarization",
}
_CONTINUED = "[continued] "


class SummarizationError(RuntimeError):
    """A summary call failed, was cut off, called a tool, returned no text, or cannot fit
    the window."""


# --- serialization ----------------------------------------------------------------------


def _js_prefix(text: str, limit: int) -> str:
    """The longest prefix of ``text`` of at most ``limit`` UTF-16 units (pairs kept whole)."""
    units = 0
    for index, char in enumerate(text):
        units += 2 if ord(char) > 0xFFFF else 1
        if units > limit:
            return text[:index]
    return text


def truncate_for_summary(text: str, max_chars: int = TOOL_RESULT_MAX_CHARS) -> str:
    """``text`` cut to ``max_chars`` plus a line saying how much was cut (unchanged if short)."""
    total = js_len(text)
    if total <= max_chars:
        return text
    head = _js_prefix(text, max_chars)
    # Pi's count is ``text.length - maxChars`` even when the head keeps a pair's high
    # surrogate out (one unit more cut than counted); follow it.
    return f"{head}\n\n[... {total - max_chars} more characters truncated]"


def serialize_parts(llm_messages: Sequence[Message]) -> list[str]:
    """The serialized parts of LLM-level messages (after :func:`convert_to_llm`).

    user → ``[User]: text``; assistant → ``[Assistant]: text`` and
    ``[Assistant tool calls]: name(k=<json>, …); …``; toolResult → ``[Tool result]: text``
    (cut to 2000 characters). Thinking, images, system messages and empty texts are left out.
    """
    parts: list[str] = []
    for message in llm_messages:
        role = message.get("role")
        content = message.get("content")
        if role == "user":
            text = content_text(content, "")
            if text:
                parts.append(f"[User]: {text}")
        elif role == "assistant":
            blocks = (
                [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
            )
            calls = []
            for block in blocks:
                if block.get("type") == "toolCall":
                    arguments = block.get("arguments")
                    items = arguments.items() if isinstance(arguments, dict) else ()
                    rendered = ", ".join(f"{k}={js_stringify(v)}" for k, v in items)
                    calls.append(f"{block.get('name', '')}({rendered})")
            if any(b.get("type") == "text" for b in blocks):
                parts.append(f"[Assistant]: {content_text(blocks)}")
            if calls:
                parts.append(f"[Assistant tool calls]: {'; '.join(calls)}")
        elif role == "toolResult":
            text = content_text(content, "")
            if text:
                parts.append(f"[Tool result]: {truncate_for_summary(text)}")
    return parts


def serialize_conversation(llm_messages: Sequence[Message]) -> str:
    """Serialized parts joined by a blank line (Pi 1.3's ``serializeConversation``)."""
    return "\n\n".join(serialize_parts(llm_messages))


# --- requests ---------------------------------------------------------------------------


def build_summary_request(
    conversation: str,
    instructions: str,
    *,
    prompts: PromptSet = DEFAULT_PROMPTS,
    previous_summary: str | None = None,
    focus: str | None = None,
) -> list[dict[str, Any]]:
    """The OpenAI-format messages of one summary call (system + one user message)."""
    text = f"<conversation>\n{conversation}\n</conversation>\n\n"
    if previous_summary:
        text += f"<previous-summary>\n{previous_summary}\n</previous-summary>\n\n"
    text += instructions
    if focus:
        text += f"\n\nAdditional focus: {focus}"
    return [{"role": "system", "content": prompts.system}, {"role": "user", "content": text}]


def _request_tokens(request: Sequence[dict[str, Any]]) -> int:
    chars = sum(js_len(str(m.get("content") or "")) for m in request)
    return math.ceil(chars / 4) + REQUEST_OVERHEAD_TOKENS


def pi_request_tokens(request: Sequence[dict[str, Any]]) -> int:
    """pi-ai's ``estimateContextTokens`` of a summary request (system + user text, no
    usage): ⌈UTF-16 units / 3.5⌉ per message."""
    return sum(
        math.ceil(js_len(str(m.get("content") or "")) / PI_CHARS_PER_TOKEN) for m in request
    )


def clamp_max_tokens_to_context(window: int, input_tokens: int, max_tokens: float) -> int:
    """pi-ai 1.6.0's ``clampMaxTokensToContext``: ``max_tokens`` fitted into ``window`` after
    ``input_tokens``, keeping max(4096, ⌈0.15·input⌉) free — only 4096 when the 15 % would
    leave under 32768 tokens of output, and then at most 32768; never below 1."""
    if window <= 0:
        return int(max(MIN_MAX_TOKENS, max_tokens))
    margin = max(CONTEXT_SAFETY_TOKENS, math.ceil(input_tokens * CONTEXT_SAFETY_RATIO))
    room = window - input_tokens - margin
    if room < MIN_OUTPUT_WITH_RATIO_MARGIN:
        room = min(MIN_OUTPUT_WITH_RATIO_MARGIN, window - input_tokens - CONTEXT_SAFETY_TOKENS)
    return int(min(max_tokens, max(MIN_MAX_TOKENS, room)))


def summary_max_tokens(
    kind: SummaryKind,
    reserve_tokens: int,
    output_limit: int | None,
    *,
    pi_release: PiRelease = "1.6",
    window: int | None = None,
    input_tokens: int = 0,
) -> int | None:
    """The output budget Pi would give a summary call.

    ``pi_release="1.3"``: ⌊0.8·R⌋ history, ⌊0.5·R⌋ turn prefix, 4096 branch; capped by the
    model's output limit (when known and positive). ``"1.6"``: the output limit (any kind;
    R plays no part) clamped to ``window`` after ``input_tokens`` by
    :func:`clamp_max_tokens_to_context`; None when neither limit is known (no cap sent, the
    provider's default applies, as when Pi 1.6.0 sends no ``maxTokens``).
    """
    if pi_release not in PI_RELEASES:
        raise ValueError(f"unknown pi_release {pi_release!r}; expected one of {PI_RELEASES}")
    limit = output_limit if output_limit is not None and output_limit > 0 else None
    if pi_release == "1.6":
        if window is None:
            return limit
        return clamp_max_tokens_to_context(
            window, input_tokens, math.inf if limit is None else limit
        )
    if kind == "history":
        budget = math.floor(0.8 * reserve_tokens)
    elif kind == "turn_prefix":
        budget = math.floor(0.5 * reserve_tokens)
    else:
        budget = BRANCH_SUMMARY_MAX_TOKENS
    if limit is not None:
        budget = min(budget, limit)
    return max(budget, 1)


def combine_usage(*usages: dict[str, Any] | None) -> dict[str, Any]:
    """Field-wise sum of Pi usage dicts (cost included); missing ones count as zero."""
    total = empty_usage()
    for usage in usages:
        if not isinstance(usage, dict):
            continue
        for key, value in usage.items():
            if key == "cost" and isinstance(value, dict):
                cost = total.setdefault("cost", {})
                for ck, cv in value.items():
                    if isinstance(cv, (int, float)):
                        cost[ck] = cost.get(ck, 0) + cv
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                total[key] = total.get(key, 0) + value  # type: ignore[literal-required]
    return total


def _default_completion(model: str, messages: Sequence[dict[str, Any]], **kwargs: Any) -> Message:
    from ..llm import complete

    return complete(model, messages, stream=False, **kwargs)


def _model_limits(model: str) -> tuple[int | None, int | None]:
    """(context window, output limit) from litellm's table; (None, None) when unknown."""
    try:
        from ..llm import model_info

        info = model_info(model)
    except Exception:  # litellm missing or a provider that cannot be registered
        return None, None
    window = info.get("max_input_tokens") or info.get("max_tokens")
    output = info.get("max_output_tokens") or info.get("max_tokens")
    return (int(window) if window else None), (int(output) if output else None)


# --- calls ------------------------------------------------------------------------------


@dataclass
class SummaryResult:
    """A generated summary and what it cost.

    Attributes:
        text: the summary text.
        usage: combined usage of every call.
        calls: number of model calls.
        chunks: number of conversation chunks (1 when everything fit in one request).
        steps: per call ``{"promptTokens", "maxTokens", "parts"}`` (estimated prompt size,
            output budget, serialized parts in the chunk).
        truncated: calls whose reply hit the cap and was kept (``accept_truncated``).
        budget_rule: how the output budget was chosen: ``"pi-1.6"``, ``"pi-1.3"``, or
            ``"pi-1.3 (window too small for pi-1.6)"`` when Pi 1.6.0's clamp would leave
            under :data:`MIN_OUTPUT_TOKENS` tokens.
    """

    text: str
    usage: dict[str, Any] = field(default_factory=empty_usage)
    calls: int = 0
    chunks: int = 0
    steps: list[dict[str, int | None]] = field(default_factory=list)
    truncated: int = 0
    budget_rule: str = ""


def _check_reply(
    reply: Message, label: str, max_tokens: int | None, accept_truncated: bool = False
) -> str:
    stop = reply.get("stopReason")
    if stop == "error":
        raise SummarizationError(f"{label} failed: {reply.get('errorMessage') or 'unknown error'}")
    if stop == "aborted":
        raise SummarizationError(f"{label} was aborted")
    if stop == "length" and not accept_truncated:
        cap = "the provider's token cap" if max_tokens is None else f"its {max_tokens}-token cap"
        raise SummarizationError(
            f"{label} failed: the reply hit {cap}, so the summary is incomplete"
        )
    content = reply.get("content")
    blocks = content if isinstance(content, list) else []
    if any(isinstance(b, dict) and b.get("type") == "toolCall" for b in blocks):
        raise SummarizationError(f"{label} failed: the model tried to call a tool")
    text = content_text(content)
    if not text.strip():
        # An empty summary would drop everything before the cut from the context.
        raise SummarizationError(f"{label} failed: the model returned an empty summary")
    return text


def _chunk(parts: list[str], capacity: int) -> tuple[list[str], list[str]]:
    """Take parts (joined by a blank line) up to ``capacity`` UTF-16 units; split a part
    that is too long on its own. Returns (taken, remaining)."""
    taken: list[str] = []
    used = 0
    for index, part in enumerate(parts):
        size = js_len(part) + (2 if taken else 0)
        if used + size <= capacity:
            taken.append(part)
            used += size
            continue
        if not taken:
            head = _js_prefix(part, capacity)
            if not head:
                head = part[:1]
            rest = part[len(head) :]
            return [head], [_CONTINUED + rest, *parts[index + 1 :]] if rest else parts[index + 1 :]
        return taken, parts[index:]
    return taken, []


def generate_summary(
    messages: Sequence[Message],
    model: str,
    *,
    reserve_tokens: int = 16384,
    prompts: PromptSet | None = None,
    previous_summary: str | None = None,
    focus: str | None = None,
    kind: SummaryKind = "history",
    window: int | None = None,
    output_limit: int | None = None,
    replace_instructions: bool = False,
    completion: Completion | None = None,
    accept_truncated: bool = False,
    pi_release: PiRelease = "1.6",
) -> SummaryResult:
    """Summarize AgentMessages with ``model``.

    Args:
        messages: the messages to summarize (Pi's AgentMessages; converted here).
        model: the litellm model name of the summarizer.
        reserve_tokens: R; under ``pi_release="1.3"`` the output budget is ⌊0.8·R⌋
            (history) or ⌊0.5·R⌋ (turn prefix) (see :func:`summary_max_tokens`).
        prompts: prompt texts (default :data:`DEFAULT_PROMPTS`).
        previous_summary: a summary to update (history only): the update prompt is used.
        focus: extra instructions, appended as "Additional focus: …" (history and branch;
            the turn prefix too under ``pi_release="1.6"``).
        kind: ``"history"``, ``"turn_prefix"`` or ``"branch"``.
        window: the summarizer's context window (default: litellm's table; no window
            fitting when unknown).
        output_limit: the summarizer's output limit (default: litellm's table; 0 = none).
        replace_instructions: for branches, ``focus`` replaces the default instructions.
        completion: ``completion(model, messages, max_tokens=n)`` returning a Pi assistant
            message (default: :func:`pi_nb.llm.complete` without streaming).
        accept_truncated: keep replies that hit the token cap (counted in ``truncated``)
            instead of raising.
        pi_release: ``"1.6"`` or ``"1.3"``: the budget rule and whether the turn prefix
            gets ``focus`` (:data:`~.settings.PiRelease`).

    Raises:
        SummarizationError: a call ended in error / length / abort, tried to call a tool,
            returned an empty (or whitespace-only) text, or the window is too small for
            even one short chunk.
    """
    if kind not in _LABELS:
        raise ValueError(f"unknown summary kind {kind!r}; expected one of {sorted(_LABELS)}")
    prompts = prompts or DEFAULT_PROMPTS
    completion = completion or _default_completion
    label = _LABELS[kind]
    if window is None or output_limit is None:
        found_window, found_output = _model_limits(model)
        window = found_window if window is None else window
        output_limit = found_output if output_limit is None else output_limit
    if pi_release not in PI_RELEASES:
        raise ValueError(f"unknown pi_release {pi_release!r}; expected one of {PI_RELEASES}")
    if kind != "history":
        previous_summary = None
    if kind == "turn_prefix" and pi_release == "1.3":
        focus = None  # Pi 1.3.0 gives the turn prefix no custom instructions

    def instructions(first: bool, running: str | None) -> tuple[str, str | None]:
        """(instructions, focus) for one call."""
        if first and kind == "turn_prefix":
            return prompts.turn_prefix, focus
        if first and kind == "branch":
            if replace_instructions and focus:
                return focus, None
            return prompts.branch, focus
        return (prompts.update if running else prompts.initial), focus

    parts = serialize_parts(convert_to_llm(messages))
    result = SummaryResult(text="", budget_rule=f"pi-{pi_release}")
    # The budget of the request Pi would send: everything in one call.
    whole_text, whole_focus = instructions(True, previous_summary)
    whole_request = build_summary_request(
        "\n\n".join(parts),
        whole_text,
        prompts=prompts,
        previous_summary=previous_summary,
        focus=whole_focus,
    )
    max_tokens = summary_max_tokens(
        kind,
        reserve_tokens,
        output_limit,
        pi_release=pi_release,
        window=window,
        input_tokens=pi_request_tokens(whole_request),
    )
    if window is not None and (max_tokens is None or max_tokens < MIN_OUTPUT_TOKENS):
        # Pi 1.6.0's 4096-token safety margin does not fit a small window (a 1-token reply
        # on pinb/smollm2): keep the summary inside the reserve, as Pi 1.3.0 did.
        max_tokens = summary_max_tokens(kind, reserve_tokens, output_limit, pi_release="1.3")
        result.budget_rule = "pi-1.3 (window too small for pi-1.6)"

    def call(chunk: list[str], running: str | None, first: bool, budget: int | None) -> str:
        text, extra = instructions(first, running)
        request = build_summary_request(
            "\n\n".join(chunk), text, prompts=prompts, previous_summary=running, focus=extra
        )
        reply = completion(model, request, max_tokens=budget)
        result.calls += 1
        result.chunks += 1
        result.usage = combine_usage(result.usage, reply.get("usage"))
        result.steps.append(
            {"promptTokens": _request_tokens(request), "maxTokens": budget, "parts": len(chunk)}
        )
        if reply.get("stopReason") == "length" and accept_truncated:
            result.truncated += 1
        return _check_reply(reply, label, budget, accept_truncated)

    def fixed_tokens(first: bool, running: str | None) -> int:
        text, extra = instructions(first, running)
        return _request_tokens(
            build_summary_request("", text, prompts=prompts, previous_summary=running, focus=extra)
        )

    # Estimates are chars / 4; real tokenizers often count more, so keep a margin.
    usable = None if window is None else window - max(8, math.ceil(window * WINDOW_MARGIN))
    conversation_tokens = math.ceil(js_len("\n\n".join(parts)) / 4)
    whole = fixed_tokens(True, previous_summary) + conversation_tokens
    if usable is None or max_tokens is None or whole + max_tokens <= usable:
        result.text = call(parts, previous_summary, True, max_tokens)
        return result
    assert max_tokens is not None
    # The output budget of a window-fitted call: a third of what the longest instructions
    # leave free (the rest holds the running summary and a conversation chunk).
    instructions_tokens = max(
        fixed_tokens(True, None), fixed_tokens(False, "x") + PREVIOUS_SUMMARY_TAG_TOKENS
    )
    fitted = min(max_tokens, max(MIN_OUTPUT_TOKENS, (usable - instructions_tokens) // 3))
    if whole + fitted <= usable:
        result.text = call(parts, previous_summary, True, min(max_tokens, usable - whole))
        return result

    # Fold chunks through the update prompt.
    budget = fitted
    running = previous_summary
    remaining = parts
    first = True
    while remaining or first:
        room = usable - budget - fixed_tokens(first, running)
        if room < MIN_CHUNK_TOKENS:
            raise SummarizationError(
                f"{label} failed: a {window}-token window leaves no room for the conversation "
                f"(instructions, previous summary and a {budget}-token reply need "
                f"{usable - room} of its {usable} usable tokens)"
            )
        chunk, remaining = _chunk(remaining, room * 4)
        running = call(chunk, running, first, budget)
        first = False
    result.text = running or ""
    return result
