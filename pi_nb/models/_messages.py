"""Helpers over OpenAI-format chat messages shared by the ``pinb`` models.

Pure Python: nothing here imports litellm.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

# Pi counts an image as 4800 characters (1200 tokens); do the same so estimates agree.
IMAGE_CHARS = 4800


def estimate_tokens(text: str) -> int:
    """Pi's estimate: ``ceil(len(text) / 4)``."""
    return math.ceil(len(text) / 4)


def content_text(content: Any) -> str:
    """The text of an OpenAI ``content`` field (a string, a list of parts, or ``None``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for part in content:
        if isinstance(part, Mapping) and part.get("type") == "text":
            texts.append(str(part.get("text", "")))
        elif isinstance(part, str):
            texts.append(part)
    return "\n".join(texts)


def _content_chars(content: Any) -> int:
    chars = len(content_text(content))
    if isinstance(content, list):
        chars += IMAGE_CHARS * sum(
            1 for p in content if isinstance(p, Mapping) and p.get("type") == "image_url"
        )
    return chars


def tool_call_chars(tool_calls: Iterable[Mapping[str, Any]] | None) -> int:
    """Characters of tool calls as Pi counts them: name + JSON arguments."""
    chars = 0
    for call in tool_calls or ():
        fn = call.get("function") or {}
        args = fn.get("arguments") or ""
        if not isinstance(args, str):
            args = json.dumps(args)
        chars += len(fn.get("name") or "") + len(args)
    return chars


def request_chars(
    messages: Iterable[Mapping[str, Any]], tools: Iterable[Mapping[str, Any]] | None = None
) -> int:
    """Characters in a request: every message's content and tool calls, plus tool definitions."""
    chars = 0
    for msg in messages:
        chars += _content_chars(msg.get("content"))
        chars += tool_call_chars(msg.get("tool_calls"))
    if tools:
        # Compact, key-sorted JSON so the count does not depend on dict order.
        chars += len(json.dumps(list(tools), sort_keys=True, separators=(",", ":")))
    return chars


def request_tokens(
    messages: Iterable[Mapping[str, Any]], tools: Iterable[Mapping[str, Any]] | None = None
) -> int:
    """``ceil(request_chars / 4)``: the prompt tokens the scripted model reports."""
    return math.ceil(request_chars(messages, tools) / 4)


def last_user_text(messages: Iterable[Mapping[str, Any]]) -> str | None:
    """Text of the last ``user`` message, or ``None`` when there is none."""
    text = None
    for msg in messages:
        if msg.get("role") == "user":
            text = content_text(msg.get("content"))
    return text
