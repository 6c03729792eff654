"""What one :meth:`~pi_nb.agent.session.Session.prompt` returns, and the figures of a run."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..display import to_html
from ..entries import Entry, Message, empty_usage

__all__ = ["RunResult", "above_threshold_note", "text_of", "usage_total"]


def above_threshold_note(tokens: int | None, threshold: int | None) -> str | None:
    """The hint shown when a compaction leaves the context above W − R; None otherwise."""
    if tokens is None or threshold is None or tokens <= threshold:
        return None
    return (
        f"still above W − R = {threshold:,} after compacting ({tokens:,} tokens): the kept "
        "tail and the summary do not fit; lower keep or reserve"
    )


def usage_total(messages: Iterable[Message]) -> dict[str, Any]:
    """Tokens and cost of the assistant replies among ``messages``, summed, plus ``calls``.

    Each reply's cost follows :func:`pi_nb.llm.reply_cost`'s rule: a reply recorded at 0
    that used tokens (what Pi writes for a model without a price) is priced again; when any
    reply's price is unknown, every cost field is NaN and ``cost_note`` names the model,
    never a sum that counts the unknown reply as free.
    """
    from ..llm import reply_price

    total = empty_usage()
    calls = 0
    notes: list[str] = []
    unknown = False
    for message in messages:
        usage = message.get("usage")
        if message.get("role") != "assistant" or not isinstance(usage, dict):
            continue
        calls += 1
        for key in ("input", "output", "cacheRead", "cacheWrite", "totalTokens"):
            total[key] += usage.get(key) or 0  # type: ignore[literal-required]
        cost, note = reply_price(message)
        if note and note not in notes:
            notes.append(note)
        if cost is None:
            unknown = True
            continue
        for key in total["cost"]:
            total["cost"][key] += cost.get(key) or 0  # type: ignore[literal-required]
    out: dict[str, Any] = dict(total)
    if unknown:
        out["cost"] = {key: math.nan for key in total["cost"]}
    if notes:
        out["cost_note"] = "; ".join(notes)
    out["calls"] = calls
    return out


def text_of(message: Message | None) -> str:
    """The text blocks of a message, joined ("" for None)."""
    if not message:
        return ""
    return "".join(
        b.get("text", "") for b in message.get("content") or [] if isinstance(b, dict) and b.get("type") == "text"
    )


@dataclass
class RunResult:
    """What one :meth:`Session.prompt` did.

    Attributes:
        entries: every entry appended during the run (messages, edits, compactions …).
        text: the text of the final model reply.
        usage: tokens and cost of the run's model replies, summed (plus ``calls``).
        compactions: compaction results produced during the run, in order.
        error: why the run failed, or None.
        aborted: the run was aborted.
        replies: the run's assistant messages.
    """

    entries: list[Entry] = field(default_factory=list)
    text: str = ""
    usage: dict[str, Any] = field(default_factory=dict)
    compactions: list[Any] = field(default_factory=list)
    error: str | None = None
    aborted: bool = False
    replies: list[Message] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None and not self.aborted

    @property
    def messages(self) -> list[Message]:
        return [e["message"] for e in self.entries if e.get("type") == "message"]

    def _repr_html_(self) -> str | None:
        # The renderer lives in the notebook layer, which registers it (pi_nb.display).
        return to_html(self)

    def __repr__(self) -> str:
        status = "aborted" if self.aborted else f"error={self.error!r}" if self.error else "ok"
        text = self.text if len(self.text) <= 60 else self.text[:57] + "..."
        return (
            f"<RunResult {status}: {len(self.entries)} entries, {len(self.compactions)} compactions, "
            f"{self.usage.get('totalTokens', 0)} tokens, text={text!r}>"
        )
