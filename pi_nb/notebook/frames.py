"""pandas views of a session: turns and token usage, entries, the projected context.

pandas is imported inside each function, so ``import pi_nb.notebook.frames`` stays cheap.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..llm import reply_cost
from ..projection import Projection, build_session_projection, extend_projection
from ..tokens import (
    assistant_usage,
    calculate_context_tokens,
    estimate_projected_context_tokens,
    estimate_tokens,
    extend_context_tokens,
)
from .graph import entry_records
from .html import message_preview

if TYPE_CHECKING:
    import pandas as pd

    from ..session.tree import SessionTree
    from ..tokens import ContextTokens

USAGE_COLUMNS = (
    "turn",
    "entry_id",
    "timestamp",
    "context_tokens_reported",
    "context_tokens_estimated",
    "input",
    "output",
    "cache_read",
    "cache_write",
    "cost",
    "stop_reason",
    "model",
    "compaction",
    "branch_switch",
)
ENTRY_COLUMNS = (
    "id",
    "parent_id",
    "type",
    "role",
    "tokens",
    "on_path",
    "in_context",
    "status",
    "label",
    "timestamp",
    "preview",
)
CONTEXT_COLUMNS = ("index", "entry_id", "role", "status", "tokens", "preview")

_NAN = math.nan


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else _NAN


def _timestamps(values: Any) -> Any:
    import pandas as pd

    return pd.to_datetime(pd.Series(values, dtype="object"), utc=True, errors="coerce")


def _projected_tokens_along(tree: SessionTree, branch: list[dict[str, Any]]) -> list[int]:
    """Pi's projected context estimate at each entry of ``branch`` (root→leaf), in O(n)
    overall: the projection is extended entry by entry and rebuilt only at compactions and
    context edits, as the session tree keeps its own projection current."""
    cache = tree.token_cache
    out: list[int] = []
    projection: Projection | None = None
    tokens: ContextTokens | None = None
    for entry in branch:
        extended = extend_projection(projection, entry) if projection is not None else None
        if extended is None or tokens is None:
            projection = build_session_projection(tree.entries, entry["id"], tree.by_id)
            tokens = estimate_projected_context_tokens(projection, projection.path, cache)
        else:
            before = len(projection.messages)  # type: ignore[union-attr]
            projection = extended
            tokens = extend_context_tokens(tokens, extended.messages[before:], before, cache)
            if tokens is None:
                tokens = estimate_projected_context_tokens(extended, extended.path, cache)
        out.append(tokens.tokens)
    return out


def usage_rows(tree: SessionTree, leaf: str | None = None) -> list[dict[str, Any]]:
    """The rows of :func:`usage_frame` as plain dicts (no pandas)."""
    branch = tree.get_branch() if leaf is None else tree.get_branch(leaf)
    estimates = _projected_tokens_along(tree, branch)
    rows: list[dict[str, Any]] = []
    compaction = branch_switch = False
    for index, entry in enumerate(branch):
        kind = entry.get("type")
        if kind == "compaction":
            compaction = True
        elif kind == "branch_summary":
            branch_switch = True
        message = entry.get("message")
        if kind != "message" or not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        raw = message.get("usage") if isinstance(message.get("usage"), dict) else {}
        valid = assistant_usage(message)
        cost, cost_note = reply_cost(message)  # a recorded 0 may mean "no price": NaN
        provider, model = message.get("provider"), message.get("model")
        rows.append(
            {
                "turn": len(rows) + 1,
                "entry_id": entry["id"],
                "timestamp": entry.get("timestamp"),
                "context_tokens_reported": (
                    float(calculate_context_tokens(valid)) if valid is not None else _NAN
                ),
                # The context as it was just before this call: projected at the parent.
                "context_tokens_estimated": float(estimates[index - 1]) if index > 0 else 0.0,
                "input": _number(raw.get("input")),
                "output": _number(raw.get("output")),
                "cache_read": _number(raw.get("cacheRead")),
                "cache_write": _number(raw.get("cacheWrite")),
                "cost": cost,
                "stop_reason": message.get("stopReason"),
                "model": f"{provider}/{model}" if provider and model else model,
                "compaction": compaction,
                "branch_switch": branch_switch,
                "cost_note": cost_note,
            }
        )
        compaction = branch_switch = False
    return rows


def usage_frame(tree: SessionTree, leaf: str | None = None) -> pd.DataFrame:
    """One row per turn (assistant reply) along the branch to ``leaf`` (default: current).

    Columns: turn (1-based), entry_id, timestamp, context_tokens_reported (the reply's
    provider usage total, NaN when missing / zero / an aborted or failed reply),
    context_tokens_estimated (Pi's projected estimate of the context just before the call,
    i.e. projected at the reply's parent), input, output, cache_read, cache_write, cost,
    stop_reason, model, compaction (a compaction entry since the previous turn) and
    branch_switch (a branch summary since the previous turn).

    ``cost`` is :func:`~pi_nb.llm.reply_cost`: NaN when the reply's model has no price
    (the file keeps Pi's 0), with the reason in ``frame.attrs["notes"]``.
    """
    import pandas as pd

    rows = usage_rows(tree, leaf)
    frame = pd.DataFrame(rows, columns=list(USAGE_COLUMNS))
    frame.attrs["notes"] = list(dict.fromkeys(r["cost_note"] for r in rows if r["cost_note"]))
    frame["timestamp"] = _timestamps(frame["timestamp"].tolist())
    frame["compaction"] = frame["compaction"].astype(bool)
    frame["branch_switch"] = frame["branch_switch"].astype(bool)
    return frame


def entries_frame(tree: SessionTree, leaf: str | None = None) -> pd.DataFrame:
    """One row per entry, in file order: id, parent_id, type, role, tokens (Pi estimate of
    what the entry contributes, unedited), on_path, in_context, status, label, timestamp,
    preview. Status as in :func:`pi_nb.notebook.graph.entry_statuses`."""
    import pandas as pd

    records = entry_records(tree) if leaf is None else entry_records(tree, leaf)
    frame = pd.DataFrame(records, columns=list(ENTRY_COLUMNS))
    frame["timestamp"] = _timestamps(frame["timestamp"].tolist())
    return frame


def context_rows(projection: Projection, width: int = 80) -> list[dict[str, Any]]:
    """The rows of :func:`context_frame` as plain dicts (no pandas)."""
    rows = []
    for pe in projection.entries:
        for message in pe.messages:
            rows.append(
                {
                    "index": len(rows),
                    "entry_id": pe.id,
                    "role": message.get("role"),
                    "status": pe.status,
                    "tokens": estimate_tokens(message),
                    "preview": message_preview(message, width),
                }
            )
    return rows


def context_frame(
    tree_or_projection: SessionTree | Projection, leaf: str | None = None
) -> pd.DataFrame:
    """One row per message the model sees next: index, entry_id, role, status (summary /
    kept / edited), tokens (Pi estimate), preview. Takes a Projection, or a SessionTree
    (projected at ``leaf``, default the current leaf)."""
    import pandas as pd

    projection = _as_projection(tree_or_projection, leaf)
    return pd.DataFrame(context_rows(projection), columns=list(CONTEXT_COLUMNS))


def _as_projection(obj: Any, leaf: str | None = None) -> Projection:
    if isinstance(obj, Projection):
        return obj
    if hasattr(obj, "projection"):
        return obj.projection() if leaf is None else obj.projection(leaf)
    raise TypeError(f"expected a SessionTree or a Projection, got {type(obj).__name__}")
