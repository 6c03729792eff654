"""What changed between two projections of a session: kept, summarized, omitted, edited, added.

The typical use is a compaction: :func:`latest_compaction_diff` compares the context just
before the latest compaction with the context now. pandas is imported only for ``.frame``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..compaction.compact import ContextChange, context_change
from ..entries import Message
from ..projection import ProjectedEntry, Projection, build_session_projection
from ..tokens import estimate_tokens
from .html import esc, message_preview, status_chip, status_color

if TYPE_CHECKING:
    import pandas as pd

    from ..session.tree import SessionTree

DIFF_STATUSES = ("kept", "summarized", "omitted", "edited", "added")
DIFF_COLUMNS = ("id", "role", "status", "tokens_before", "tokens_after", "preview")


@dataclass
class ProjectionDiff:
    """Rows (one per context entry in either projection) and totals; renders itself.

    ``rows`` are plain dicts with the :data:`DIFF_COLUMNS`; ``frame`` is the same as a
    DataFrame. Token figures are Pi's per-message estimate (``ceil(chars / 4)``), the basis
    of :class:`~pi_nb.compaction.ContextChange` (what a compaction's result reports).
    ``compaction`` is the change made by the compaction itself (set by
    :func:`latest_compaction_diff`; later turns are not part of it).
    """

    rows: list[dict[str, Any]]
    before: Projection
    after: Projection
    totals: dict[str, Any] = field(default_factory=dict)
    compaction: ContextChange | None = None

    def __post_init__(self) -> None:
        if not self.totals:
            self.totals = _totals(self.rows, self.before, self.after)

    @property
    def frame(self) -> pd.DataFrame:
        """The rows as a DataFrame (columns: id, role, status, tokens_before, tokens_after,
        preview)."""
        import pandas as pd

        return pd.DataFrame(self.rows, columns=list(DIFF_COLUMNS))

    @property
    def tokens_before(self) -> int:
        return int(self.totals["tokens_before"])

    @property
    def tokens_after(self) -> int:
        return int(self.totals["tokens_after"])

    @property
    def saved(self) -> int:
        """Tokens before − tokens after (negative when the context grew)."""
        return int(self.totals["saved"])

    @property
    def ratio(self) -> float:
        """Tokens after / tokens before (NaN when the before side is empty)."""
        return float(self.totals["ratio"])

    @property
    def counts(self) -> dict[str, int]:
        """Rows per status (every status present, zero when absent)."""
        return dict(self.totals["counts"])

    @property
    def compaction_warning(self) -> str | None:
        """The warning line when the compaction made the context larger; None otherwise."""
        return self.compaction.warning() if self.compaction is not None else None

    def by_status(self, status: str) -> list[dict[str, Any]]:
        """The rows with one status."""
        return [r for r in self.rows if r["status"] == status]

    def summary_line(self) -> str:
        """``tokens before → after (saved, ratio) · counts``, one line."""
        t = self.totals
        ratio = "n/a" if math.isnan(t["ratio"]) else f"{t['ratio']:.0%}"
        counts = ", ".join(f"{n} {s}" for s, n in t["counts"].items() if n)
        figures = ContextChange(t["tokens_before"], t["tokens_after"]).figures()
        return f"{figures} (saved {t['saved']:,}, {ratio} remain) · {counts or 'no entries'}"

    def __repr__(self) -> str:
        lines = [
            f"<ProjectionDiff {self.before.leaf_id} → {self.after.leaf_id}: {self.summary_line()}>"
        ]
        if self.compaction_warning:
            lines.append(f"⚠ {self.compaction_warning}")
        for r in self.rows[:200]:
            lines.append(
                f"  {r['status']:<10} {r['id']:<10} {r['role'] or '':<17} "
                f"{r['tokens_before']:>7} → {r['tokens_after']:<7} {r['preview']}"
            )
        if len(self.rows) > 200:
            lines.append(f"  … {len(self.rows) - 200} more rows")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        legend = " ".join(status_chip(s) for s in DIFF_STATUSES if self.totals["counts"].get(s))
        head = "".join(f"<th>{c}</th>" for c in DIFF_COLUMNS)
        body = []
        for r in self.rows[:500]:
            body.append(
                f'<tr style="border-left:4px solid {status_color(r["status"])}">'
                f"<td><code>{esc(r['id'])}</code></td><td>{esc(r['role'])}</td>"
                f"<td>{status_chip(r['status'])}</td>"
                f'<td style="text-align:right">{r["tokens_before"]:,}</td>'
                f'<td style="text-align:right">{r["tokens_after"]:,}</td>'
                f"<td style='text-align:left'>{esc(r['preview'])}</td></tr>"
            )
        if len(self.rows) > 500:
            body.append(f'<tr><td colspan="6">… {len(self.rows) - 500} more rows</td></tr>')
        warned = (
            f"<div style='color:#b35900'>⚠ {esc(self.compaction_warning)}</div>"
            if self.compaction_warning
            else ""
        )
        return (
            f'<div class="pi-nb-diff"><div><b>{esc(self.summary_line())}</b> {legend}</div>'
            f"{warned}"
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
        )


def _totals(
    rows: Sequence[dict[str, Any]], before: Projection, after: Projection
) -> dict[str, Any]:
    change = context_change(before.messages, after.messages)
    tokens_before, tokens_after = change.before, change.after
    counts = dict.fromkeys(DIFF_STATUSES, 0)
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return {
        "tokens_before": tokens_before,
        "tokens_after": tokens_after,
        "saved": tokens_before - tokens_after,
        "ratio": tokens_after / tokens_before if tokens_before else math.nan,
        "counts": counts,
    }


def _role(messages: Sequence[Message]) -> str | None:
    for message in messages:
        if message.get("role") != "system":
            return message.get("role")
    return messages[0].get("role") if messages else None


def _tokens(messages: Sequence[Message]) -> int:
    return sum(estimate_tokens(m) for m in messages)


def _preview(messages: Sequence[Message], width: int) -> str:
    for message in messages:
        if message.get("role") != "system":
            return message_preview(message, width)
    return message_preview(messages[0], width) if messages else ""


def _resolve(side: Any, tree: SessionTree | None) -> Projection:
    """A Projection from a Projection, a SessionTree, a (tree, leaf) pair or a leaf id."""
    if isinstance(side, Projection):
        return side
    if isinstance(side, tuple) and len(side) == 2:
        owner, leaf = side
        return owner.projection(leaf) if leaf is not None else owner.projection()
    if hasattr(side, "projection") and hasattr(side, "entries"):
        return side.projection()
    if tree is not None and (side is None or isinstance(side, str)):
        if side is None:
            return build_session_projection([], None)
        return tree.projection(side)
    raise TypeError(
        "expected a Projection, a SessionTree, a (SessionTree, leaf_id) pair, "
        f"or a leaf id with tree=; got {type(side).__name__}"
    )


def diff_projection(
    before: Any, after: Any, *, tree: SessionTree | None = None, width: int = 80
) -> ProjectionDiff:
    """Compare two projections entry by entry.

    ``before`` / ``after``: Projection objects, SessionTrees (their current projection),
    ``(tree, leaf_id)`` pairs, or leaf ids when ``tree`` is given (None = empty context).

    One row per entry that has messages in either projection (or that an edit omits), in
    ``before`` order then the added ones in ``after`` order. Status:

    - ``kept``: same messages in both;
    - ``edited``: in both, content changed (a context edit replaced it);
    - ``omitted``: an edit omits it after, or it is gone after without a new compaction
      covering it (another branch, a rewrite);
    - ``summarized``: gone after, but a compaction new in ``after`` covers it (it is on
      ``after``'s path before that compaction) — the old summary of an earlier compaction too;
    - ``added``: only in ``after`` (new messages, the new compaction summary itself).
    """
    b = _resolve(before, tree)
    a = _resolve(after, tree)
    after_entries: dict[str, ProjectedEntry] = {pe.id: pe for pe in a.entries}
    before_ids = {pe.id for pe in b.entries}
    new_compaction = a.compaction is not None and a.compaction["id"] not in before_ids
    covered: set[str] = set()
    if new_compaction:
        assert a.compaction is not None
        for entry in a.path:
            if entry["id"] == a.compaction["id"]:
                break
            covered.add(entry["id"])
    rows: list[dict[str, Any]] = []
    for pe in b.entries:
        if not pe.messages and pe.edit is None:
            continue  # labels, settings, old compactions: never in context
        other = after_entries.get(pe.id)
        after_messages = other.messages if other is not None else []
        if not pe.messages:  # omitted by an edit before
            status = "edited" if after_messages else "omitted"
        elif other is not None and other.edit is not None and other.edit.get("replacement") is None:
            status = "omitted"
        elif after_messages:
            status = "kept" if after_messages == pe.messages else "edited"
        elif pe.id in covered:
            status = "summarized"
        else:
            status = "omitted"
        shown = after_messages or pe.messages
        rows.append(
            {
                "id": pe.id,
                "role": _role(shown),
                "status": status,
                "tokens_before": _tokens(pe.messages),
                "tokens_after": _tokens(after_messages),
                "preview": _preview(shown, width),
            }
        )
    for pe in a.entries:
        if pe.id in before_ids or not pe.messages:
            continue
        rows.append(
            {
                "id": pe.id,
                "role": _role(pe.messages),
                "status": "added",
                "tokens_before": 0,
                "tokens_after": _tokens(pe.messages),
                "preview": _preview(pe.messages, width),
            }
        )
    return ProjectionDiff(rows, b, a)


def latest_compaction_diff(tree: SessionTree, leaf: str | None = None) -> ProjectionDiff:
    """The context just before the latest compaction on the branch (projected at the
    compaction's parent) against the context now (at ``leaf``, default the current leaf).

    Raises ValueError when the branch has no compaction.
    """
    branch = tree.get_branch() if leaf is None else tree.get_branch(leaf)
    compaction = next((e for e in reversed(branch) if e.get("type") == "compaction"), None)
    if compaction is None:
        raise ValueError("the branch has no compaction to compare against")
    parent = compaction.get("parentId")
    before = (
        tree.projection(parent)
        if isinstance(parent, str) and parent in tree
        else build_session_projection([], None)
    )
    after = tree.projection() if leaf is None else tree.projection(leaf)
    diff = diff_projection(before, after)
    at_compaction = (
        after if after.leaf_id == compaction["id"] else tree.projection(compaction["id"])
    )
    diff.compaction = context_change(before.messages, at_compaction.messages)
    return diff
