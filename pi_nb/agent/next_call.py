"""The next-call token figure: what the next model request of a session will hold.

One basis for every token figure pi_nb shows (``%pi tokens``, ``pi-nb tokens``, the
explorer, the token bar): provider-reported usage when the projection trusts it, else Pi's
chars/4 estimate of the messages plus the request overhead (system prompt and tool
declarations, sent with every request but not stored in the transcript).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..entries import js_len, js_stringify

if TYPE_CHECKING:
    from ..session.tree import SessionTree
    from .tools import Tool

__all__ = ["NextCallTokens", "next_call_of", "request_overhead_parts"]


@dataclass(frozen=True)
class NextCallTokens:
    """The context tokens of the next model call, with its parts.

    Estimated (``reported`` False): ``messages`` (Pi's chars/4 over the projection) +
    ``system_prompt`` + ``tools`` (the declarations sent with every request). Reported:
    the provider's usage of the last valid reply (``usage``, which covers the system prompt
    and tools) + estimates of the ``messages`` after it.
    """

    tokens: int
    messages: int
    system_prompt: int
    tools: int
    usage: int
    reported: bool

    def parts(self) -> list[tuple[str, int]]:
        """(label, tokens) pairs that add up to :attr:`tokens`."""
        if self.reported:
            return [("reported usage", self.usage), ("estimated newer messages", self.messages)]
        return [
            ("messages", self.messages),
            ("system prompt", self.system_prompt),
            ("tool declarations", self.tools),
        ]

    def label(self) -> str:
        """``1,111 tokens (estimated: messages 534 + system prompt 60 + tool declarations
        517)``, or ``677 tokens (reported usage 677 + estimated newer messages 0)`` — the
        same words on every surface."""
        parts = " + ".join(f"{name} {value:,}" for name, value in self.parts())
        if self.reported:
            return f"{self.tokens:,} tokens ({parts})"
        return f"{self.tokens:,} tokens (estimated: {parts})"


def request_overhead_parts(system_prompt: str, tools: Sequence[Tool]) -> tuple[int, int]:
    """(system prompt, tool declarations) estimated tokens of one request. Their sum is
    ceil(chars / 4) of both together, so the parts add up to the figure Pi would estimate."""
    prompt_chars = js_len(system_prompt)
    chars = prompt_chars
    if tools:
        chars += js_len(js_stringify([t.declaration() for t in tools]))
    both = math.ceil(chars / 4)
    prompt_tokens = min(both, math.ceil(prompt_chars / 4))
    return prompt_tokens, both - prompt_tokens


def next_call_of(tree: SessionTree, overhead_parts: Callable[[], tuple[int, int]]) -> NextCallTokens:
    """The next call's tokens for ``tree``: reported usage + newer messages when the
    projection trusts a usage, else the estimate plus ``overhead_parts()`` (called only
    then: building the system prompt may read the projection)."""
    estimate = tree.context_tokens()
    if estimate.lastUsageIndex is not None:
        return NextCallTokens(estimate.tokens, estimate.trailingTokens, 0, 0, estimate.usageTokens, True)
    prompt, tools = overhead_parts()
    return NextCallTokens(estimate.tokens + prompt + tools, estimate.tokens, prompt, tools, 0, False)
