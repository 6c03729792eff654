"""The session tree as data: per-entry records, a ``networkx.DiGraph`` and a tidy tree layout.

networkx is imported inside :func:`to_networkx` only; :func:`entry_records` and
:func:`tree_layout` are pure Python.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..entries import Entry
from ..projection import entry_messages
from ..tokens import TokenCache, estimate_tokens
from .html import entry_preview

if TYPE_CHECKING:
    import networkx as nx

    from ..projection import Projection
    from ..session.tree import SessionTree

# Every status an entry can have in the tree view.
STATUSES = ("summary", "kept", "edited", "omitted", "summarized", "off-path", "invisible")

_DEFAULT = object()


def entry_tokens(entry: Entry, cache: TokenCache | None = None) -> int:
    """Pi's estimate of the messages an entry contributes when in context (edits ignored)."""
    messages = entry_messages(entry)
    own = entry.get("message")
    total = 0
    for message in messages:
        # Message entries contribute their own dict: cache it by identity like the tree does.
        if cache is not None and message is own:
            total += cache.estimate(message)
        else:
            total += estimate_tokens(message)
    return total


def entry_statuses(tree: SessionTree, leaf: Any = _DEFAULT) -> tuple[dict[str, str], Projection]:
    """``{entry id: status}`` for every entry, and the projection they were read from.

    On the path: the projection's status (summary / kept / edited / omitted / invisible), or
    ``summarized`` for an entry before the latest compaction that the projection no longer
    shows (it is covered by the summary). Off the path: ``off-path``.
    """
    projection = tree.projection() if leaf is _DEFAULT or leaf is None else tree.projection(leaf)
    projected = {pe.id: pe.status for pe in projection.entries}
    statuses: dict[str, str] = {}
    compaction = projection.compaction
    before_compaction = compaction is not None
    for entry in projection.path:
        eid = entry["id"]
        if compaction is not None and eid == compaction["id"]:
            before_compaction = False
        if eid in projected:
            statuses[eid] = projected[eid]
        elif before_compaction and entry_messages(entry):
            statuses[eid] = "summarized"
        else:
            statuses[eid] = "invisible"
    for entry in tree.entries:
        statuses.setdefault(entry["id"], "off-path")
    return statuses, projection


def entry_records(tree: SessionTree, leaf: Any = _DEFAULT) -> list[dict[str, Any]]:
    """One plain dict per entry (file order) with everything the graph and frames show.

    Keys: id, parent_id, type, role, tokens, on_path, in_context, status, label,
    is_compaction, is_branch_summary, is_context_edit, target_id, timestamp, preview.
    """
    statuses, projection = entry_statuses(tree, leaf)
    on_path = {e["id"] for e in projection.path}
    in_context = {pe.id for pe in projection.entries if pe.messages}
    labels = tree.labels
    cache = tree.token_cache
    records = []
    for entry in tree.entries:
        eid = entry["id"]
        kind = entry.get("type")
        message = entry.get("message")
        role = None
        if kind == "message" and isinstance(message, dict):
            role = message.get("role")
        elif kind == "custom_message":
            role = "custom"
        target = entry.get("targetId") if kind in ("context_edit", "label") else None
        records.append(
            {
                "id": eid,
                "parent_id": entry.get("parentId"),
                "type": kind,
                "role": role,
                "tokens": entry_tokens(entry, cache),
                "on_path": eid in on_path,
                "in_context": eid in in_context,
                "status": statuses[eid],
                "label": labels.get(eid),
                "is_compaction": kind == "compaction",
                "is_branch_summary": kind == "branch_summary",
                "is_context_edit": kind == "context_edit",
                "target_id": target,
                "timestamp": entry.get("timestamp"),
                "preview": entry_preview(entry, 60),
            }
        )
    return records


def to_networkx(tree: SessionTree, leaf: Any = _DEFAULT) -> nx.DiGraph:
    """The session tree as a DiGraph: one node per entry, an edge parent → child.

    Node attributes: type, role, tokens (Pi estimate of the messages the entry contributes,
    unedited), on_path, in_context, status, label, is_compaction, is_branch_summary,
    is_context_edit, target_id, timestamp, preview, parent_id. Graph attributes: leaf_id,
    session_id. ``leaf`` picks another leaf than the session's current one.
    """
    import networkx as nx

    records = entry_records(tree, leaf)
    graph = nx.DiGraph(
        leaf_id=tree.leaf_id if leaf is _DEFAULT or leaf is None else leaf,
        session_id=tree.session_id,
    )
    for record in records:
        attrs = dict(record)
        graph.add_node(attrs.pop("id"), **attrs)
    for record in records:
        parent = record["parent_id"]
        if isinstance(parent, str) and parent != record["id"] and parent in graph:
            graph.add_edge(parent, record["id"])
    return graph


def tree_layout(graph: Any, root: Hashable | None = None) -> dict[Hashable, tuple[float, float]]:
    """Tidy tree positions ``{node: (x, y)}`` in O(n), iteratively (any depth).

    ``y = -depth`` (children sit one unit below their parent), ``x`` = leaf order: leaves
    get 0, 1, 2, … left to right and a parent is centred over its first and last child, so a
    linear chain is a vertical line. Several roots (or a forest) are laid out side by side;
    nodes on a parent cycle are treated as roots. ``graph`` is a networkx DiGraph or a
    ``{node: [children]}`` mapping.
    """
    children: Mapping[Hashable, Iterable[Hashable]]
    if isinstance(graph, Mapping):
        children = graph
        nodes = list(graph)
        has_parent: set[Hashable] = {c for kids in graph.values() for c in kids}
    else:
        children = graph.succ
        nodes = list(graph.nodes)
        has_parent = {n for n in nodes if graph.in_degree(n) > 0}
    roots = [root] if root is not None else [n for n in nodes if n not in has_parent]
    pos: dict[Hashable, tuple[float, float]] = {}
    next_x = 0.0

    def place(start: Hashable) -> None:
        nonlocal next_x
        # Iterative post-order: (node, depth, children iterator, first child x, last child x)
        stack: list[list[Any]] = [[start, 0, iter(children.get(start, ())), None, None]]
        pos[start] = (0.0, 0.0)  # marks visited; overwritten when finished
        while stack:
            frame = stack[-1]
            node, depth, kids = frame[0], frame[1], frame[2]
            pushed = False
            for child in kids:
                if child in pos:
                    continue
                pos[child] = (0.0, 0.0)
                stack.append([child, depth + 1, iter(children.get(child, ())), None, None])
                pushed = True
                break
            if pushed:
                continue
            stack.pop()
            if frame[3] is None:
                x = next_x
                next_x += 1.0
            else:
                x = (frame[3] + frame[4]) / 2.0
            pos[node] = (x, -float(depth))
            if stack:
                parent = stack[-1]
                if parent[3] is None:
                    parent[3] = x
                parent[4] = x

    for start in roots:
        if start not in pos:
            place(start)
    if root is None:
        for start in nodes:  # parent cycles: nodes no root reaches
            if start not in pos:
                place(start)
    return pos
