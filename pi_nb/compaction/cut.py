"""Where to cut: the first entry kept verbatim after a compaction (Pi 1.3 semantics).

Works on projected entries (:class:`~pi_nb.projection.ProjectedEntry`), so an entry omitted
by a context edit costs nothing and cannot be a cut point, and a replaced one costs what
its replacement costs. Walking back from the newest entry, tokens add up until
``keep_recent_tokens`` is reached; the cut then moves to the nearest valid cut point at or
after that position — a user-like or assistant message, never a tool result, so a tool call
is never separated from its results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..entries import Message
from ..projection import ProjectedEntry, entry_messages
from ..tokens import estimate_tokens

__all__ = [
    "CUT_POINT_ROLES",
    "TURN_START_ROLES",
    "CutPoint",
    "find_cut_point",
    "find_turn_start",
    "is_cut_point",
    "is_turn_start",
    "valid_cut_points",
]

#: Roles a cut may land on (a toolResult must stay with its call).
CUT_POINT_ROLES = frozenset(
    {"user", "assistant", "bashExecution", "custom", "branchSummary", "compactionSummary"}
)
#: Roles that start a turn (everything a user-side input produces).
TURN_START_ROLES = frozenset(
    {"user", "bashExecution", "custom", "branchSummary", "compactionSummary"}
)


@dataclass(frozen=True)
class CutPoint:
    """The result of the cut search, as indices into the projected entries.

    Attributes:
        first_kept_index: the first entry kept verbatim.
        turn_start_index: when the cut splits a turn, the entry that started it; else -1.
        is_split_turn: the cut lands inside a turn (on an assistant message whose turn
            started earlier); that turn's prefix is summarized separately.
    """

    first_kept_index: int
    turn_start_index: int = -1
    is_split_turn: bool = False


def _roles(messages: Sequence[Message]) -> list[str]:
    # Only a string is a role: a list or object (hostile file) matches none, as in Pi's
    # switch over the role, instead of failing the set lookup.
    return [role for m in messages if isinstance(role := m.get("role"), str)]


def is_cut_point(entry: ProjectedEntry) -> bool:
    """A non-compaction entry whose projected messages include a cut-point role."""
    if entry.entry.get("type") == "compaction":
        return False
    return any(role in CUT_POINT_ROLES for role in _roles(entry.messages))


def is_turn_start(entry: ProjectedEntry) -> bool:
    """A non-compaction entry whose projected messages include a turn-start role."""
    if entry.entry.get("type") == "compaction":
        return False
    return any(role in TURN_START_ROLES for role in _roles(entry.messages))


def valid_cut_points(entries: Sequence[ProjectedEntry], start: int, end: int) -> list[int]:
    """Indices in ``[start, end)`` where a cut may land."""
    return [i for i in range(start, end) if is_cut_point(entries[i])]


def find_turn_start(entries: Sequence[ProjectedEntry], index: int, start: int) -> int:
    """The nearest turn start at or before ``index`` (not before ``start``); -1 if none."""
    for i in range(index, start - 1, -1):
        if is_turn_start(entries[i]):
            return i
    return -1


def entry_tokens(entry: ProjectedEntry) -> int:
    """Estimated tokens of the messages an entry contributes to the context."""
    return sum(estimate_tokens(m) for m in entry.messages)


def _intrinsically_visible(entry: ProjectedEntry) -> bool:
    return entry.entry.get("type") != "context_edit" and bool(entry_messages(entry.entry))


def _omitted(entry: ProjectedEntry) -> bool:
    return _intrinsically_visible(entry) and not entry.messages


def _is_recovery_omission_suffix(suffix: Sequence[ProjectedEntry]) -> bool:
    """Everything after the cut is a failed attempt hidden by omission edits (plus metadata).

    Overflow recovery omits the failed assistant reply (and its tool results) with
    ``context_edit(null)`` entries; such a suffix carries nothing the model will see, so
    the cut may move past the visible entry in front of it.
    """
    omitted_ids = {pe.entry.get("id") for pe in suffix if _omitted(pe)}
    for pe in suffix:
        entry = pe.entry
        if (
            entry.get("type") == "context_edit"
            and entry.get("replacement") is not None
            and entry.get("targetId") not in omitted_ids
        ):
            return False
    has_omitted_assistant = any(
        pe.entry.get("type") == "message"
        and isinstance(pe.entry.get("message"), dict)
        and pe.entry["message"].get("role") == "assistant"
        and _omitted(pe)
        for pe in suffix
    )
    if not has_omitted_assistant:
        return False
    return all(
        pe.entry.get("type") != "compaction" and (not _intrinsically_visible(pe) or _omitted(pe))
        for pe in suffix
    )


def find_cut_point(
    entries: Sequence[ProjectedEntry], start: int, end: int, keep_recent_tokens: int
) -> CutPoint:
    """Pi 1.3's projected cut over ``entries[start:end]``.

    1. Valid cut points: non-compaction entries with a user-like or assistant message.
       None → keep from ``start``.
    2. Walk back from ``end − 1`` summing each entry's projected tokens; when the sum
       reaches ``keep_recent_tokens``, cut at the first cut point at or after that entry,
       or — when there is none (huge trailing tool results) — at the last cut point.
       If the budget is never reached, keep from the first cut point (keep everything).
    3. When the budget was exceeded and the rest after the cut is only an omitted failed
       attempt (see :func:`_is_recovery_omission_suffix`), move the cut one entry later.
    4. Extend the cut backwards over directly preceding entries that contribute no
       messages (settings, labels, edits…), stopping at a compaction.
    5. A cut on an entry that does not start a turn splits the turn that contains it.
    """
    cut_points = valid_cut_points(entries, start, end)
    if not cut_points:
        return CutPoint(start, -1, False)

    accumulated = 0
    exceeded = False
    cut = cut_points[0]
    for i in range(end - 1, start - 1, -1):
        tokens = entry_tokens(entries[i])
        if tokens == 0:
            continue
        accumulated += tokens
        if accumulated >= keep_recent_tokens:
            exceeded = True
            cut = next((c for c in cut_points if c >= i), cut_points[-1])
            break

    if exceeded and _is_recovery_omission_suffix(entries[cut + 1 : end]):
        cut += 1

    while cut > start:
        previous = entries[cut - 1]
        if previous.entry.get("type") == "compaction" or previous.messages:
            break
        cut -= 1

    starts_turn = is_turn_start(entries[cut]) if cut < len(entries) else False
    turn_start = -1 if starts_turn else find_turn_start(entries, min(cut, len(entries) - 1), start)
    return CutPoint(cut, turn_start, (not starts_turn) and turn_start != -1)
