"""The session explorer's synced state, as plain JSON-able rows (no widget imports).

Pure functions over a :class:`~pi_nb.session.tree.SessionTree` (or a :class:`Snapshot` of
one): :func:`tree_state` (one row per entry), :func:`context_state` (one row per message
the model sees next, plus the greyed entries that explain what is left out) and
:func:`token_state` (usage against ``W − R`` and ``W``). Rows hold previews only, never
full message bodies, so a 10,000-entry session syncs in about 2 MB.

Rows leave out keys whose value is false / None to stay small: a tree row always has
``id``, ``parent``, ``kind``, ``preview`` and ``tokens``; ``role``, ``label`` and
``status`` appear when set, and the flags ``on_path``, ``leaf``, ``compaction``,
``branch_summary``, ``edit``, ``in_context`` only when true.

Everything here reads a snapshot of the tree (entries list, leaf) and builds its own
projection, so it is safe to call from a background thread while the tree grows.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..entries import Entry, Message
from ..messages import content_text
from ..projection import Projection, build_session_projection, entry_messages
from ..render import describe_entry, one_line
from ..tokens import ContextTokens, TokenCache, estimate_projected_context_tokens, estimate_tokens

if TYPE_CHECKING:
    from ..session.tree import SessionTree

PREVIEW_CHARS = 80
DEFAULT_WINDOW = 128_000  # Pi's fallback when a model does not say (model.contextWindow || 128000)
DEFAULT_RESERVE = 16_384  # Pi's default compaction.reserveTokens

# Statuses shown in the context panel. The first four come from ProjectedEntry.status;
# "summarized" marks path entries a compaction replaced by its summary.
IN_CONTEXT_STATUSES = ("summary", "kept", "edited")
STATUSES = (*IN_CONTEXT_STATUSES, "omitted", "summarized")
EDITABLE_ROLES = ("user", "assistant", "toolResult", "custom")


@dataclass
class Snapshot:
    """One consistent view of a tree: entries, leaf, labels and the projection of the leaf."""

    entries: list[Entry]
    by_id: Mapping[str, Entry]
    leaf_id: str | None
    projection: Projection
    labels: dict[str, str]
    token_cache: TokenCache = field(default_factory=TokenCache)
    _context_tokens: ContextTokens | None = None

    @property
    def path_ids(self) -> set[str]:
        return {e["id"] for e in self.projection.path}

    def context_tokens(self) -> ContextTokens:
        if self._context_tokens is None:
            self._context_tokens = estimate_projected_context_tokens(
                self.projection, self.projection.path, self.token_cache
            )
        return self._context_tokens


def snapshot(tree: SessionTree | Snapshot, token_cache: TokenCache | None = None) -> Snapshot:
    """A consistent snapshot of ``tree`` (returned as is when it already is one).

    ``token_cache`` keeps per-message estimates between snapshots (the widget passes its
    own); by default each snapshot counts afresh and leaves the tree's caches alone.
    """
    if isinstance(tree, Snapshot):
        return tree
    leaf = tree.leaf_id  # read the leaf first: its entry is then in the entries copy
    entries = list(tree.entries)
    by_id = tree.by_id
    projection = (
        build_session_projection(entries, leaf, by_id)
        if leaf is not None
        else (build_session_projection([], None, {}))
    )
    return Snapshot(
        entries=entries,
        by_id=by_id,
        leaf_id=leaf,
        projection=projection,
        labels=labels_of(entries),
        token_cache=token_cache if token_cache is not None else TokenCache(),
    )


def labels_of(entries: Sequence[Entry]) -> dict[str, str]:
    """Current labels by target id from label entries (the last one wins; empty clears)."""
    labels: dict[str, str] = {}
    for entry in entries:
        if entry.get("type") != "label":
            continue
        target = entry.get("targetId")
        if not isinstance(target, str):
            continue
        if entry.get("label"):
            labels[target] = str(entry["label"])
        else:
            labels.pop(target, None)
    return labels


# --- previews -------------------------------------------------------------------------------


def _clip(text: str, width: int = PREVIEW_CHARS) -> str:
    return one_line(text, width)


def entry_role(entry: Entry) -> str | None:
    """The message role an entry carries (``custom`` for custom_message), else None."""
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        role = message.get("role") if isinstance(message, dict) else None
        return role if isinstance(role, str) else None
    if kind == "custom_message":
        return "custom"
    return None


def entry_preview(entry: Entry, width: int = PREVIEW_CHARS) -> str:
    """A one-line preview (≤ ``width`` chars) of an entry, without its role prefix."""
    text = describe_entry(entry, width)
    role = entry_role(entry)
    if entry.get("type") == "message" and role and text.startswith(role):
        text = text[len(role) :].lstrip(" :")
    return _clip(text, width)


def message_preview(message: Message, width: int = PREVIEW_CHARS) -> str:
    """A one-line preview of a projected message (what the model reads)."""
    role = message.get("role")
    if role in ("compactionSummary", "branchSummary"):
        return _clip(str(message.get("summary") or ""), width)
    if role == "bashExecution":
        return _clip(str(message.get("command") or ""), width)
    if role == "system":
        return _clip(content_text(message.get("content")) or "(system prompt)", width)
    if role == "custom":
        return _clip(content_text(message.get("content")), width)
    return entry_preview({"type": "message", "message": message}, width)


def entry_tokens(entry: Entry, cache: TokenCache | None = None) -> int:
    """Estimated tokens of the messages an entry contributes (before context edits)."""
    if entry.get("type") == "message" and isinstance(entry.get("message"), dict):
        message = entry["message"]
        return cache.estimate(message) if cache is not None else estimate_tokens(message)
    return sum(estimate_tokens(m) for m in entry_messages(entry))


# --- tree -----------------------------------------------------------------------------------


def _static_row(entry: Entry, cache: TokenCache | None) -> dict[str, Any]:
    parent = entry.get("parentId")
    row: dict[str, Any] = {
        "id": entry["id"],
        "parent": parent if isinstance(parent, str) and parent != entry["id"] else None,
        "kind": entry.get("type"),
        "preview": entry_preview(entry),
        "tokens": entry_tokens(entry, cache),
    }
    role = entry_role(entry)
    if role:
        row["role"] = role
    return row


def statuses(snap: Snapshot) -> dict[str, str]:
    """Entry id → summary | kept | edited | omitted | summarized, for path entries that
    contribute (or would contribute) messages to the context."""
    out: dict[str, str] = {}
    projection = snap.projection
    for pe in projection.entries:
        status = pe.status
        if status != "invisible":
            out[pe.id] = status
    if projection.compaction is not None:
        for entry in projection.path:
            eid = entry["id"]
            if eid not in out and entry.get("type") != "compaction" and entry_messages(entry):
                out[eid] = "summarized"
            if entry is projection.compaction:
                break
    return out


def tree_state(
    tree: SessionTree | Snapshot, cache: dict[str, dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """One compact row per entry, in file order (see the module docstring for the keys).

    ``cache`` (id → static row) lets a caller keep previews and token counts between calls:
    entries never change once appended, so only labels and flags are recomputed.
    """
    snap = snapshot(tree)
    on_path = snap.path_ids
    status_of = statuses(snap)
    pinned = pinned_ids(snap)
    labels = snap.labels
    leaf = snap.leaf_id
    rows: list[dict[str, Any]] = []
    for entry in snap.entries:
        eid = entry["id"]
        static = cache.get(eid) if cache is not None else None
        if static is None:
            static = _static_row(entry, snap.token_cache)
            if cache is not None:
                cache[eid] = static
        row = dict(static)
        kind = row["kind"]
        if kind == "compaction":
            row["compaction"] = True
        elif kind == "branch_summary":
            row["branch_summary"] = True
        elif kind == "context_edit":
            row["edit"] = True
            row["target"] = entry.get("targetId")
        label = labels.get(eid)
        if label:
            row["label"] = label
        if eid in on_path:
            row["on_path"] = True
            status = status_of.get(eid)
            if status:
                row["status"] = status
                if status in IN_CONTEXT_STATUSES:
                    row["in_context"] = True
        if eid == leaf:
            row["leaf"] = True
        if eid in pinned:
            row["pinned"] = True
        rows.append(row)
    return rows


def pinned_ids(tree: SessionTree | Snapshot) -> set[str]:
    """Ids of the messages pinned on the current branch (kept verbatim by compactions)."""
    from ..policies.pins import pins_from_entries

    snap = snapshot(tree)
    return {p.entry_id for p in pins_from_entries(snap.projection.path) if p.entry_id}


# --- context --------------------------------------------------------------------------------


def context_state(tree: SessionTree | Snapshot) -> list[dict[str, Any]]:
    """The live projection: one row per message the model sees next, in order.

    Message rows: ``id`` (source entry), ``index`` (message index), ``role``, ``preview``,
    ``tokens``, ``status`` (summary / kept / edited) and ``in_context: True``. Omitted
    messages stay in place as rows with ``status: "omitted"``, ``index: None`` and
    ``in_context: False``. When a compaction is in force, the entries it summarized come
    first as ONE group row ``{"status": "summarized", "count", "tokens", "compaction",
    "first", "last", "in_context": False}`` (the tree rows carry those entries' previews).
    """
    snap = snapshot(tree)
    projection = snap.projection
    cache = snap.token_cache
    pinned = pinned_ids(snap)
    rows: list[dict[str, Any]] = []
    if projection.compaction is not None:
        kept = {pe.id for pe in projection.entries}
        count = tokens = 0
        first = last = None
        for entry in projection.path:
            if entry is projection.compaction:
                break
            if entry["id"] in kept or entry.get("type") == "compaction":
                continue
            messages = entry_messages(entry)
            if not messages:
                continue
            count += 1
            tokens += entry_tokens(entry, cache)
            first = first or entry["id"]
            last = entry["id"]
        if count:
            rows.append(
                {
                    "id": first,
                    "index": None,
                    "role": None,
                    "status": "summarized",
                    "count": count,
                    "tokens": tokens,
                    "first": first,
                    "last": last,
                    "compaction": projection.compaction["id"],
                    "tokens_before": projection.compaction.get("tokensBefore"),
                    "in_context": False,
                    "preview": f"{count} earlier entries summarized by compaction "
                    f"{projection.compaction['id']}",
                }
            )
    index = 0
    for pe in projection.entries:
        status = pe.status
        if status == "invisible":
            continue
        if status == "omitted":
            for message in entry_messages(pe.entry):
                rows.append(_context_row(pe.id, None, message, "omitted", cache))
            continue
        for message in pe.messages:
            rows.append(_context_row(pe.id, index, message, status, cache))
            index += 1
    for row in rows:
        if row["id"] in pinned and row["status"] != "summarized":
            row["pinned"] = True
    return rows


def _context_row(
    eid: str, index: int | None, message: Message, status: str, cache: TokenCache
) -> dict[str, Any]:
    return {
        "id": eid,
        "index": index,
        "role": message.get("role"),
        "preview": message_preview(message),
        "tokens": cache.estimate(message),
        "status": status,
        "in_context": index is not None,
    }


# --- tokens ---------------------------------------------------------------------------------


def token_state(
    tree: SessionTree | Snapshot,
    window: int | None = None,
    reserve: int | None = None,
    overhead: int = 0,
) -> dict[str, Any]:
    """Context usage against the compaction threshold ``W − R`` and the window ``W``.

    ``kind`` is ``reported`` when the figure starts from the provider-reported usage of the
    last reply (plus estimates for what came after it), else ``estimated`` (Pi's chars/4).
    ``overhead`` (system prompt and tool declarations a session sends with every request)
    is added to an estimated figure; reported usage already includes it. ``by_role``
    splits the estimate by role for the bar's segments.
    """
    snap = snapshot(tree)
    window = int(window) if window else DEFAULT_WINDOW
    reserve = int(reserve) if reserve is not None else DEFAULT_RESERVE
    tokens = snap.context_tokens()
    reported = tokens.lastUsageIndex is not None
    overhead = 0 if reported else max(0, int(overhead))
    by_role: dict[str, int] = {}
    if overhead:
        by_role["overhead"] = overhead
    for message in snap.projection.messages:
        role = str(message.get("role"))
        role = "summary" if role in ("compactionSummary", "branchSummary") else role
        by_role[role] = by_role.get(role, 0) + snap.token_cache.estimate(message)
    threshold = max(0, window - reserve)
    used = tokens.tokens + overhead
    return {
        "used": used,
        "window": window,
        "reserve": reserve,
        "threshold": threshold,
        # share of W, not capped: 4,080 of 2,048 is 199 (the bar itself stops at W)
        "percent": 100 * used / window,
        "kind": "reported" if reported else "estimated",
        "usage_tokens": tokens.usageTokens,
        "trailing_tokens": tokens.trailingTokens + overhead,
        "overhead": overhead,
        "messages": len(snap.projection.messages),
        "over": used > threshold,
        "by_role": by_role,
    }


def info_state(tree: SessionTree, snap: Snapshot | None = None) -> dict[str, Any]:
    """Header facts: session name, id, file, entry count, model and thinking level."""
    snap = snap or snapshot(tree)
    name = None
    for entry in reversed(snap.entries):
        if entry.get("type") == "session_info":
            value = entry.get("name")
            name = value.strip() or None if isinstance(value, str) else None
            break
    model = snap.projection.model or {}
    return {
        "name": name,
        "session_id": getattr(tree, "session_id", None),
        "path": getattr(tree, "path", None),
        "entries": len(snap.entries),
        "model": "/".join(str(v) for v in (model.get("provider"), model.get("modelId")) if v),
        "model_source": "file",  # the last model change in the file; a Session says "session"
        "thinking": snap.projection.thinking_level,
    }


def explorer_state(
    tree: SessionTree,
    window: int | None = None,
    reserve: int | None = None,
    cache: dict[str, dict[str, Any]] | None = None,
    token_cache: TokenCache | None = None,
    overhead: int = 0,
) -> dict[str, Any]:
    """All synced state from one snapshot: ``tree``, ``context``, ``tokens``, ``info``."""
    snap = snapshot(tree, token_cache)
    return {
        "tree": tree_state(snap, cache),
        "context": context_state(snap),
        "tokens": token_state(snap, window, reserve, overhead),
        "info": info_state(tree, snap),
        "leaf_id": snap.leaf_id,
    }


# --- a large synthetic session (benchmarks and render tests) --------------------------------


def synthetic_session(n_entries: int = 10_000, seed: int = 0) -> SessionTree:
    """An in-memory session of about ``n_entries`` entries with the shapes the explorer
    draws: long chains, side branches, branch summaries, compactions, context edits and
    labels. Deterministic for a seed."""
    from ..session.tree import SessionTree

    rng = random.Random(seed)
    counter = iter(range(1, 10**9))
    tree = SessionTree.in_memory(cwd="/tmp/synthetic")
    tree._id_source = lambda: f"{next(counter):08x}"  # short, stable ids
    words = [
        "parse", "price", "decimal", "currency", "refactor", "test", "module", "import",
        "value", "error", "format", "amount", "locale", "rounding", "invoice", "tax",
        "ledger", "total", "cents", "fixture", "schema",
    ]  # fmt: skip

    def text(k: int) -> str:
        return " ".join(rng.choice(words) for _ in range(k))

    tree.append_model_change("openai", "gpt-4o")
    turn = 0
    while len(tree) < n_entries:
        turn += 1
        user = tree.append_message({"role": "user", "content": f"Turn {turn}: " + text(12)})
        tree.append_message(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": text(10)},
                    {
                        "type": "toolCall",
                        "id": f"c{turn}",
                        "name": "read",
                        "arguments": {"path": f"src/m{turn % 50}.py"},
                    },
                ],
                "provider": "openai",
                "model": "gpt-4o",
                "stopReason": "toolUse",
            }
        )
        tool = tree.append_message(
            {
                "role": "toolResult",
                "toolCallId": f"c{turn}",
                "toolName": "read",
                "content": [{"type": "text", "text": text(60)}],
                "isError": False,
            }
        )
        tree.append_message(
            {
                "role": "assistant",
                "content": [{"type": "text", "text": text(15)}],
                "provider": "openai",
                "model": "gpt-4o",
                "stopReason": "stop",
            }
        )
        if turn % 7 == 0:
            tree.append_context_edit(tool["id"], None)
        if turn % 11 == 0:
            tree.append_label(user["id"], f"turn-{turn}")
        if turn % 40 == 0:
            # a side branch: explore from the user message, then come back with a summary
            back = tree.leaf_id
            tree.branch(user["id"])
            for _ in range(rng.randint(2, 12)):
                tree.append_message({"role": "user", "content": "side: " + text(8)})
                tree.append_message(
                    {
                        "role": "assistant",
                        "content": [{"type": "text", "text": text(8)}],
                        "provider": "openai",
                        "model": "gpt-4o",
                        "stopReason": "stop",
                    }
                )
            assert back is not None
            tree.branch_with_summary(back, "Explored a side idea: " + text(20))
        if turn % 150 == 0:
            path = tree.get_branch()
            kept = next(
                (
                    e
                    for e in reversed(path[:-40])
                    if e.get("type") == "message" and e["message"].get("role") == "user"
                ),
                None,
            )
            if kept is not None:
                tree.append_compaction("## Goal\n" + text(40), kept["id"], 1000 + turn)
    return tree


# --- status lines of model-backed actions ---------------------------------------------------------


def with_warnings(text: str, result: Any) -> str:
    """``text`` followed by every warning of ``result`` (``⚠ …``), on one status line."""
    from ..compaction.compact import result_warnings

    return " ".join([text, *(f"⚠ {w}" for w in result_warnings(result))])
