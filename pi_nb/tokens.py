"""Token accounting: Pi's estimate, usage-first context totals, exact tiktoken counts.

Pi estimates ``ceil(chars / 4)`` with chars counted in UTF-16 code units (JavaScript's
``.length``). Context usage prefers the provider-reported usage of the last valid reply
plus estimates for what came after it; 1.3's projected estimate distrusts usage older
than the latest context edit or compaction on the branch.
"""

from __future__ import annotations

import importlib.util
import math
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from .entries import Entry, Message, js_len, js_stringify
from .messages import as_text, current_system_message

if TYPE_CHECKING:
    from .projection import Projection

IMAGE_CHARS = 4800


def _text_len(value: Any) -> int:
    """js_len of a string; 0 for anything else (hand-edited or hostile files)."""
    return js_len(value) if isinstance(value, str) else 0


def _number(value: Any) -> int | float:
    """A finite number, else 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return value if math.isfinite(value) else 0


USAGE_COUNTS = ("input", "output", "cacheRead", "cacheWrite", "totalTokens")


def usage_counts(usage: Any) -> dict[str, int | float]:
    """The token counts of a reply's ``usage`` (:data:`USAGE_COUNTS`), each a finite
    number: a missing or non-numeric member (or a usage that is not an object) counts 0,
    as in every estimate here, so arithmetic on them never fails."""
    if not isinstance(usage, dict):
        return dict.fromkeys(USAGE_COUNTS, 0)
    return {key: _number(usage.get(key)) for key in USAGE_COUNTS}


# What Pi counts of each content block type, per kind of content (others count 0).
_BlockCounts = dict[str, Callable[[dict[str, Any]], int]]
_USER_BLOCKS: _BlockCounts = {
    "text": lambda block: _text_len(block.get("text")),
    "image": lambda block: IMAGE_CHARS,
}
_ASSISTANT_BLOCKS: _BlockCounts = {
    "text": lambda block: _text_len(block.get("text")),
    "thinking": lambda block: _text_len(block.get("thinking")),
    "toolCall": lambda block: (
        _text_len(block.get("name")) + js_len(js_stringify(block.get("arguments")))
    ),
}


def _blocks_chars(content: Any, counts: _BlockCounts) -> int:
    chars = 0
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict):
            kind = block.get("type")  # hostile files: a list or dict type is no block type
            count = counts.get(kind) if isinstance(kind, str) else None
            if count is not None:
                chars += count(block)
    return chars


def _content_chars(content: Any) -> int:
    if isinstance(content, str):
        return js_len(content)
    return _blocks_chars(content, _USER_BLOCKS)


def message_chars(message: Message) -> int:
    """Characters Pi counts for a message (UTF-16 units; images 4800; tool calls as JSON)."""
    role = message.get("role")
    if role == "system":
        chars = _content_chars(message.get("content"))
        sections = message.get("sections")
        for value in sections.values() if isinstance(sections, dict) else ():
            chars += _text_len(value)
        if message.get("toolsAdded") is not None:  # an empty list counts, as in JavaScript
            chars += js_len(js_stringify(message["toolsAdded"]))
        return chars
    if role in ("user", "custom", "toolResult"):
        return _content_chars(message.get("content"))
    if role == "assistant":
        return _blocks_chars(message.get("content"), _ASSISTANT_BLOCKS)
    if role == "bashExecution":
        return _text_len(message.get("command")) + _text_len(message.get("output"))
    if role in ("branchSummary", "compactionSummary"):
        return _text_len(message.get("summary"))
    return 0


def estimate_tokens(message: Message) -> int:
    """Pi's heuristic: ceil(chars / 4)."""
    return math.ceil(message_chars(message) / 4)


def calculate_context_tokens(usage: dict[str, Any]) -> int:
    """totalTokens when non-zero, else input + output + cacheRead + cacheWrite."""
    total = _number(usage.get("totalTokens"))
    if total:
        return total
    return sum(_number(usage.get(k)) for k in ("input", "output", "cacheRead", "cacheWrite"))


def assistant_usage(message: Message) -> dict[str, Any] | None:
    """The usage of a reply that counts: not aborted/error, present, and non-zero (1.3)."""
    if message.get("role") != "assistant":
        return None
    usage = message.get("usage")
    if message.get("stopReason") in ("aborted", "error") or not isinstance(usage, dict):
        return None
    return usage if calculate_context_tokens(usage) > 0 else None


def last_assistant_usage(entries: Sequence[Entry]) -> dict[str, Any] | None:
    """The last valid usage among session entries (scanning backwards)."""
    for entry in reversed(entries):
        if entry.get("type") == "message" and isinstance(entry.get("message"), dict):
            usage = assistant_usage(entry["message"])
            if usage is not None:
                return usage
    return None


@dataclass
class ContextTokens:
    """Estimated context size: usage of the last valid reply + estimates after it."""

    tokens: int
    usageTokens: int
    trailingTokens: int
    lastUsageIndex: int | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def estimate_context_tokens(
    messages: Sequence[Message], cache: TokenCache | None = None
) -> ContextTokens:
    """Usage-first estimate over a message list (Pi's estimateContextTokens)."""
    est = cache.estimate if cache is not None else estimate_tokens
    return _usage_first(reversed(messages), len(messages), est)


def _usage_first(newest_first: Iterable[Message], count: int, est: Any) -> ContextTokens:
    """The usage-first estimate from ``count`` messages given newest first: the last valid
    usage plus estimates of the messages after it (every estimate when there is none).
    Stops at that usage, so older messages are never looked at."""
    trailing = 0
    index = count
    for message in newest_first:
        index -= 1
        usage = assistant_usage(message)
        if usage is not None:
            usage_tokens = calculate_context_tokens(usage)
            return ContextTokens(usage_tokens + trailing, usage_tokens, trailing, index)
        trailing += est(message)
    return ContextTokens(trailing, 0, trailing, None)


def estimate_projected_context_tokens(
    projection: Projection, branch: Sequence[Entry] | None = None, cache: TokenCache | None = None
) -> ContextTokens:
    """Pi 1.3's estimate for a projection: usage is trusted only when it comes from an entry
    after the latest context edit or compaction on the branch; else a pure heuristic.

    Scans back from the end, so with trusted usage only the messages after the last reply
    are looked at (and, for a lazily loaded file, parsed).
    """
    est = cache.estimate if cache is not None else estimate_tokens
    branch = projection.light_path if branch is None else branch
    newest_first = (
        message
        for pe in reversed(projection.entries)
        if pe.message_count
        for message in reversed(pe.messages)
    )
    estimate = _usage_first(newest_first, projection.message_count, est)
    if estimate.lastUsageIndex is not None and _after_invalidation(
        projection.source_of(estimate.lastUsageIndex).id, branch
    ):
        return estimate
    return _heuristic_tokens(projection.messages, est)


def _after_invalidation(source_id: str, branch: Sequence[Entry]) -> bool:
    """Whether ``source_id`` is on the branch after its latest context edit or compaction."""
    for index in range(len(branch) - 1, -1, -1):
        entry = branch[index]
        if entry.get("id") == source_id:
            return True
        if entry.get("type") in ("context_edit", "compaction"):
            return False
    return False


def _heuristic_tokens(messages: Sequence[Message], est: Any) -> ContextTokens:
    """Pure chars/4: the replayed system prompt plus every other message."""
    system = current_system_message(messages)
    tokens = estimate_tokens(system) if system is not None else 0
    tokens += sum(est(m) for m in messages if m.get("role") != "system")
    return ContextTokens(tokens, 0, tokens, None)


def extend_context_tokens(
    previous: ContextTokens,
    added: Sequence[Message],
    first_index: int,
    cache: TokenCache | None = None,
) -> ContextTokens | None:
    """Update a projected estimate for messages appended at the end of the branch.

    O(len(added)). None when a full recount is needed (a system message changes the
    replayed system prompt the heuristic counts).
    """
    est = cache.estimate if cache is not None else estimate_tokens
    tokens, usage_tokens, trailing, last = (
        previous.tokens,
        previous.usageTokens,
        previous.trailingTokens,
        previous.lastUsageIndex,
    )
    for offset, message in enumerate(added):
        if message.get("role") == "system":
            return None
        usage = assistant_usage(message)
        if usage is not None:
            # Usage from the newest entry is after every edit and compaction: trusted.
            usage_tokens, trailing, last = calculate_context_tokens(usage), 0, first_index + offset
        else:
            trailing += est(message)
        tokens = usage_tokens + trailing
    return ContextTokens(tokens, usage_tokens, trailing, last)


def should_compact(tokens: int, window: int, reserve: int = 16384, enabled: bool = True) -> bool:
    """The trigger: compaction enabled and tokens > window − reserve."""
    return enabled and tokens > window - reserve


class TokenCache:
    """Per-message estimates cached by object identity, so appending one entry never
    re-counts the whole history. Messages are treated as immutable once appended."""

    def __init__(self, max_size: int = 500_000) -> None:
        self._by_id: dict[int, tuple[Message, int]] = {}
        self.max_size = max_size

    def estimate(self, message: Message) -> int:
        key = id(message)
        hit = self._by_id.get(key)
        if hit is not None and hit[0] is message:
            return hit[1]
        value = estimate_tokens(message)
        if len(self._by_id) >= self.max_size:
            # Rebuilt projections make fresh summary dicts; bound what they leave behind.
            self._by_id.clear()
        self._by_id[key] = (message, value)
        return value

    def __len__(self) -> int:
        return len(self._by_id)


# --- exact counts through tiktoken ---------------------------------------------------------

_ENCODINGS: dict[str, Any] = {}
_ENC_LOCK = threading.Lock()
_O200K_PREFIXES = (
    "gpt-4o",
    "gpt-4.1",
    "gpt-4.5",
    "gpt-5",
    "o1",
    "o3",
    "o4",
    "chatgpt-4o",
    "gpt-oss",
)
_CL100K_PREFIXES = ("gpt-4", "gpt-3.5", "text-embedding-3", "text-embedding-ada")


def encoding_for(model: str | None) -> tuple[str, bool]:
    """(tiktoken encoding name, exact?) for a litellm model name.

    Exact only for OpenAI models; for other providers o200k_base is a close proxy and the
    figure is labelled as estimated.
    """
    model = model or "gpt-4o"
    name = model.split("/")[-1].lower()
    provider = model.split("/")[0].lower() if "/" in model else "openai"
    openai_like = provider in ("openai", "azure", "openrouter")
    if name.startswith(_O200K_PREFIXES):
        return "o200k_base", openai_like
    if name.startswith(_CL100K_PREFIXES):
        return "cl100k_base", openai_like
    return "o200k_base", False


def _tiktoken_cache_dir() -> str | None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = os.path.join(
        next(iter(spec.submodule_search_locations)), "litellm_core_utils", "tokenizers"
    )
    return folder if os.path.isdir(folder) else None


def get_encoding(name: str) -> Any:
    """A tiktoken encoding loaded offline from the BPE files litellm ships."""
    with _ENC_LOCK:
        if name in _ENCODINGS:
            return _ENCODINGS[name]
        import tiktoken

        folder = _tiktoken_cache_dir()
        previous = os.environ.get("TIKTOKEN_CACHE_DIR")
        try:
            if folder:
                os.environ["TIKTOKEN_CACHE_DIR"] = folder
            encoding = tiktoken.get_encoding(name)
        finally:
            if previous is None:
                os.environ.pop("TIKTOKEN_CACHE_DIR", None)
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = previous
        _ENCODINGS[name] = encoding
        return encoding


def message_text_for_count(message: Message) -> str:
    """The text a model reads for a message (images excluded), for exact counting."""
    from .messages import content_text

    # Fields of another type count as empty, as in message_chars (hostile files).
    role = message.get("role")
    if role == "assistant":
        parts = []
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                parts.append(as_text(block.get("text")))
            elif block.get("type") == "thinking":
                parts.append(as_text(block.get("thinking")))
            elif block.get("type") == "toolCall":
                parts.append(as_text(block.get("name")) + js_stringify(block.get("arguments")))
        return "\n".join(parts)
    if role == "bashExecution":
        return f"{as_text(message.get('command'))}\n{as_text(message.get('output'))}"
    if role in ("branchSummary", "compactionSummary"):
        return as_text(message.get("summary"))
    return content_text(message.get("content"))


def _image_count(message: Message) -> int:
    content = message.get("content")
    if not isinstance(content, list):
        return 0
    return sum(1 for b in content if isinstance(b, dict) and b.get("type") == "image")


@dataclass
class ExactCount:
    """A tiktoken count and what it is: exact for the model, or a proxy estimate."""

    tokens: int
    encoding: str
    exact: bool

    @property
    def kind(self) -> str:
        return "exact" if self.exact else "estimated"


def token_figures(
    messages: Sequence[Message], estimate: ContextTokens, model: str | None = None
) -> dict[str, Any]:
    """Every token figure for a context, side by side: Pi's usage-first total, the plain
    chars/4 heuristic over the messages, and a tiktoken count (exact or proxy)."""
    from .messages import convert_to_llm

    exact = count_exact(convert_to_llm(messages), model)
    return {
        "messages": len(messages),
        "contextTokens": estimate.tokens,
        "usageTokens": estimate.usageTokens,
        "trailingTokens": estimate.trailingTokens,
        "heuristicTokens": sum(estimate_tokens(m) for m in messages),
        "tiktokenTokens": exact.tokens,
        "tiktokenEncoding": exact.encoding,
        "tiktokenKind": exact.kind,
    }


# Per-message overhead of OpenAI's chat format (role markers); images are not tokenized
# as text, so they get Pi's flat estimate.
_MESSAGE_OVERHEAD = 4


def count_exact(messages: Sequence[Message], model: str | None = None) -> ExactCount:
    """Token count of messages with the model's tiktoken encoding, offline."""
    name, exact = encoding_for(model)
    encoding = get_encoding(name)
    total = 0
    for message in messages:
        text = message_text_for_count(message)
        total += len(encoding.encode(text, disallowed_special=())) + _MESSAGE_OVERHEAD
        total += _image_count(message) * (IMAGE_CHARS // 4)
    return ExactCount(total, name, exact)
