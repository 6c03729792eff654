"""Pi 1.3's retry / overflow / auto-compaction rules, as decisions over a session tree.

:class:`~pi_nb.agent.session.Session` asks this module *what* to do after a model reply,
between turns and before a prompt, and then does it (omits entries, compacts, retries,
emits events). Nothing here calls a model or writes the tree, so each rule is tested alone
(tests/agent/test_recovery.py).

The rules (pi-format.md §(e), context-model.md §4):

* **transient errors** are retried first: ``stopReason == "error"``, not an overflow, a
  transient kind or wording; at most ``max_retries`` times per run with backoff
  ``base_delay × 2^(attempt−1)``; the failed attempt is omitted from the context;
* **stale usage**: a reply older than the latest compaction on the branch (by position, or
  by timestamp when it is not on the branch) is not checked at all;
* **overflow**: only for a reply of the current model; an explicit overflow error counts while
  the reply is still in the context (not omitted, not compacted away); a silent overflow
  (``usage.input + cacheRead > W``) only while the reply's usage still describes the context
  (it is projected and no context edit came after it); a length stop below the output cap
  counts like an overflow. A *successful* overflowing reply is compacted without a retry;
  otherwise the reply and its tool results are omitted, the session compacted (``"overflow"``)
  and the request retried — once per user message: a second overflow gives up;
* **threshold**: compact when the context estimate exceeds ``W − R``: the projected estimate
  when the projection has context edits; a re-estimate when the reply is an error or has no
  usage (skipped when its usage source predates the latest compaction); else the reply's
  usage. Between turns of a run the projected estimate is checked against ``W − R`` too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..entries import Entry, Message, iso_to_ms
from ..events import AutoRetryEnd, AutoRetryStart, PiEvent
from ..tokens import (
    ContextTokens,
    calculate_context_tokens,
    estimate_context_tokens,
    should_compact,
)
from .overflow import (
    ErrorKind,
    RetryPolicy,
    is_context_overflow,
    is_recoverable_length,
    is_retryable_error,
)

if TYPE_CHECKING:
    from ..session.tree import SessionTree

__all__ = [
    "LENGTH_RECOVERY_FAILED",
    "OVERFLOW_RECOVERY_FAILED",
    "Compact",
    "Decision",
    "GiveUp",
    "Limits",
    "RecoveryState",
    "between_turns",
    "check_compaction",
    "projected_tokens",
    "tail_positions",
]

OVERFLOW_RECOVERY_FAILED = (
    "Context overflow recovery failed after one compact-and-retry attempt. "
    "Reduce the context or switch to a model with a larger context window."
)
LENGTH_RECOVERY_FAILED = "Truncated response recovery failed after one compact-and-retry attempt."

Reason = Literal["threshold", "overflow"]
Overhead = Callable[[], int]


def _no_overhead() -> int:
    return 0


@dataclass(frozen=True)
class Limits:
    """What the rules compare against: the current model, W, R and the reply cap."""

    model: str
    window: int
    reserve: int
    enabled: bool = True
    desired_output: int | None = None

    @property
    def threshold(self) -> int:
        """W − R."""
        return self.window - self.reserve


@dataclass(frozen=True)
class Compact:
    """Compact now (after omitting ``omit``); ``will_retry``: the failed request is re-sent."""

    reason: Reason
    will_retry: bool = False
    omit: tuple[str, ...] = ()


@dataclass(frozen=True)
class GiveUp:
    """Overflow recovery already tried once for this user message: stop with ``error``."""

    error: str


Decision = Compact | GiveUp | None


def tail_positions(branch: Sequence[Entry], entry_id: str | None) -> tuple[int | None, int | None]:
    """(index of the latest compaction, index of ``entry_id``) on a branch, scanning back
    from the leaf; past the compaction only while ``entry_id`` is still unfound."""
    latest = position = None
    for index in range(len(branch) - 1, -1, -1):
        entry = branch[index]
        if position is None and entry_id is not None and entry.get("id") == entry_id:
            position = index
        if latest is None and entry.get("type") == "compaction":
            latest = index
        if latest is not None and (position is not None or entry_id is None):
            break
    return latest, position


def projected_tokens(tree: SessionTree, overhead: Overhead = _no_overhead) -> ContextTokens:
    """Pi 1.3's projected context estimate (usage-first, stale usage ignored); a pure
    estimate (no trusted usage) includes ``overhead()`` (system prompt and tool
    declarations, which provider-reported usage already covers)."""
    estimate = tree.context_tokens()
    if estimate.lastUsageIndex is not None:
        return estimate
    extra = overhead()
    return ContextTokens(estimate.tokens + extra, 0, estimate.trailingTokens + extra, None)


def _split(model: str) -> tuple[str, str]:
    from ..llm import split_model

    return split_model(model)


def check_compaction(
    tree: SessionTree,
    message: Message,
    entry_id: str | None,
    limits: Limits,
    state: RecoveryState,
    *,
    skip_aborted: bool,
    tool_results: Sequence[str] = (),
    error_kind: ErrorKind | None = None,
    overhead: Overhead = _no_overhead,
) -> Decision:
    """Pi 1.3's ``_checkCompaction`` for the reply ``message`` (entry ``entry_id``).

    An overflow that will be retried marks ``state.overflow_attempted``.
    """
    if not limits.enabled:
        return None
    stop = message.get("stopReason")
    if skip_aborted and stop == "aborted":
        return None
    provider, model_id = _split(limits.model)
    same_model = message.get("provider") == provider and message.get("model") == model_id
    # Structure only, newest first: the checks look at the tail after the latest compaction.
    branch = tree.projection().light_path
    latest_compaction, position = tail_positions(branch, entry_id)
    # Stale: a reply from before the latest compaction carries stale usage and errors.
    if latest_compaction is not None:
        if position is not None:
            if position < latest_compaction:
                return None
        else:
            stamp = iso_to_ms(branch[latest_compaction].get("timestamp")) or 0
            if (message.get("timestamp") or 0) <= stamp:
                return None

    projection = tree.projection()
    projected = entry_id is None or any(
        pe.id == entry_id and any(m.get("role") == "assistant" for m in pe.messages)
        for pe in projection.entries
    )
    after = branch[position + 1 :] if position is not None else []
    edit_after = any(e.get("type") == "context_edit" for e in after)
    own_edits = [e for e in after if e.get("type") == "context_edit" and e.get("targetId") == entry_id]
    # (A compaction after the reply never reaches here: the stale check returned above.)
    retained = entry_id is None or not (own_edits and own_edits[-1].get("replacement") is None)
    usage_matches = projected and not edit_after
    explicit = stop == "error" and (error_kind == "overflow" or is_context_overflow(message))
    overflow = same_model and (
        (explicit and retained) or (usage_matches and is_context_overflow(message, limits.window))
    )
    length = same_model and projected and is_recoverable_length(message, limits.desired_output)
    if overflow or length:
        if stop == "stop":  # a successful reply that overflowed: compact, nothing to retry
            return Compact("overflow")
        if state.overflow_attempted:
            return GiveUp(OVERFLOW_RECOVERY_FAILED if overflow else LENGTH_RECOVERY_FAILED)
        state.overflow_attempted = True
        omit = (entry_id, *tool_results) if entry_id is not None else ()
        return Compact("overflow", will_retry=True, omit=omit)

    # Threshold.
    has_edits = any(pe.entry.get("type") == "context_edit" for pe in projection.entries)
    usage = message.get("usage") if isinstance(message.get("usage"), dict) else None
    direct = calculate_context_tokens(usage) if usage else 0
    if has_edits:
        tokens = projected_tokens(tree, overhead).tokens
    elif stop == "error" or direct == 0:
        estimate = estimate_context_tokens(projection.messages, tree.token_cache)
        if estimate.lastUsageIndex is not None and latest_compaction is not None:
            source = projection.source_of(estimate.lastUsageIndex).id
            source_position = tail_positions(branch, source)[1]
            if (-1 if source_position is None else source_position) < latest_compaction:
                return None
        tokens = estimate.tokens
        if estimate.lastUsageIndex is None:
            tokens += overhead()
    else:
        tokens = direct
    if should_compact(tokens, limits.window, limits.reserve, limits.enabled):
        return Compact("threshold")
    return None


def between_turns(tree: SessionTree, limits: Limits, overhead: Overhead = _no_overhead) -> Compact | None:
    """Pi 1.3's ``prepareNextTurn``: compact when the projected estimate exceeds W − R."""
    if not limits.enabled:
        return None
    if should_compact(projected_tokens(tree, overhead).tokens, limits.window, limits.reserve):
        return Compact("threshold")
    return None


@dataclass
class RecoveryState:
    """The per-session memory of the rules: retries of this run, overflow attempted."""

    retry_attempt: int = 0
    overflow_attempted: bool = False

    def start_run(self) -> None:
        """A new prompt: no retry in progress."""
        self.retry_attempt = 0

    def observe(self, event: PiEvent) -> AutoRetryEnd | None:
        """Apply an event to the state; returns ``auto_retry_end`` when a reply after retries
        succeeded. The overflow attempt resets on a user ``message_start`` and on an
        assistant reply that is neither an error nor a length stop."""
        message = event.get("message") if event.type in ("message_start", "message_end") else None
        if not isinstance(message, dict):
            return None
        role = message.get("role")
        if event.type == "message_start" and role == "user":
            self.overflow_attempted = False
        if event.type == "message_end" and role == "assistant":
            stop = message.get("stopReason")
            if stop not in ("error", "length"):
                self.overflow_attempted = False
            if stop != "error" and self.retry_attempt > 0:
                return self.end_retry(success=True)
        return None

    def should_retry(
        self, message: Message, kind: ErrorKind | None, policy: RetryPolicy, window: int | None
    ) -> bool:
        """Is this reply a transient failure to retry? (Overflow never is: it is compacted.)"""
        if not policy.enabled or message.get("stopReason") != "error":
            return False
        if kind == "overflow" or is_context_overflow(message, window):
            return False
        if kind is not None:
            return kind == "transient"
        return is_retryable_error(message)

    def next_retry(self, message: Message, policy: RetryPolicy) -> AutoRetryStart | None:
        """Count one more retry and describe it, or None when ``max_retries`` are spent."""
        if self.retry_attempt >= policy.max_retries:
            return None
        self.retry_attempt += 1
        return AutoRetryStart(
            attempt=self.retry_attempt,
            max_attempts=policy.max_retries,
            delay_ms=int(policy.delay(self.retry_attempt) * 1000),
            error_message=message.get("errorMessage") or "Unknown error",
        )

    def end_retry(self, *, success: bool, final_error: str | None = None) -> AutoRetryEnd | None:
        """Close a retry sequence (None when none is in progress)."""
        if not self.retry_attempt:
            return None
        attempt, self.retry_attempt = self.retry_attempt, 0
        return AutoRetryEnd(success=success, attempt=attempt, final_error=final_error)
