"""matplotlib views: the session tree (tidy tree layout, never a force layout) and the
per-turn context size against ``W`` and ``W − R``.

matplotlib is imported inside the functions; nothing here calls ``plt.show()``, so the
plots work under Agg (tests, CI) and display inline in notebooks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .graph import STATUSES, tree_layout
from .html import STATUS_COLORS

if TYPE_CHECKING:
    from matplotlib.axes import Axes

# Marker per entry kind (status is the colour).
KIND_MARKERS = {
    "entry": "o",
    "compaction": "s",
    "branch_summary": "D",
    "context_edit": "X",
}
_KIND_NAMES = {
    "entry": "entry",
    "compaction": "compaction",
    "branch_summary": "branch summary",
    "context_edit": "context edit",
}
PATH_COLOR = "#1f3a93"
COMPACTION_LINE = STATUS_COLORS["summary"]
BRANCH_LINE = "#555555"


def _new_axes(ax: Axes | None, figsize: tuple[float, float]) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=figsize)
    return ax


def _kind(attrs: dict[str, Any]) -> str:
    if attrs.get("is_compaction"):
        return "compaction"
    if attrs.get("is_branch_summary"):
        return "branch_summary"
    if attrs.get("is_context_edit"):
        return "context_edit"
    return "entry"


def _visible_nodes(graph: Any, max_nodes: int) -> tuple[list[Any], bool]:
    """At most ``max_nodes`` nodes: the leaf's ancestry (up to half the budget), then the
    newest entries (graph order is file order)."""
    nodes = list(graph.nodes)
    if len(nodes) <= max_nodes:
        return nodes, False
    keep: set[Any] = set()
    current = graph.graph.get("leaf_id")
    while current is not None and current in graph and len(keep) < max_nodes // 2:
        if current in keep:
            break
        keep.add(current)
        parents = list(graph.predecessors(current))
        current = parents[0] if parents else None
    for node in reversed(nodes):
        if len(keep) >= max_nodes:
            break
        keep.add(node)
    return [n for n in nodes if n in keep], True


def plot_tree(
    tree_or_graph: Any,
    ax: Axes | None = None,
    max_nodes: int = 5000,
    annotate_labels: bool = True,
) -> Axes:
    """Draw the session tree with a tidy tree layout (root on top, leaf order left→right).

    Nodes are coloured by status (summary / kept / edited / omitted / summarized /
    off-path / invisible), compactions, branch summaries and context edits get their own
    markers, the current path is drawn thick and dark, the leaf is a star and labels are
    written next to their entry. Takes a SessionTree or the DiGraph of
    :func:`pi_nb.notebook.graph.to_networkx`. Above ``max_nodes`` entries only the leaf's
    ancestry and the newest entries are drawn (the title says so). Returns the Axes.
    """
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D

    if hasattr(tree_or_graph, "projection") and hasattr(tree_or_graph, "entries"):
        from .graph import to_networkx

        graph = to_networkx(tree_or_graph)
    else:
        graph = tree_or_graph
    total = graph.number_of_nodes()
    shown, truncated = _visible_nodes(graph, max_nodes)
    sub = graph.subgraph(shown) if truncated else graph
    pos = tree_layout(sub)
    n = len(pos)
    ax = _new_axes(ax, (10, 6))
    size = max(6.0, min(80.0, 12000.0 / max(n, 1)))

    # Edges: off-path thin and light, the current path thick and dark.
    plain, path = [], []
    for u, v in sub.edges:
        segment = (pos[u], pos[v])
        if sub.nodes[u].get("on_path") and sub.nodes[v].get("on_path"):
            path.append(segment)
        else:
            plain.append(segment)
    if plain:
        ax.add_collection(LineCollection(plain, colors="#b0b0b0", linewidths=0.8, zorder=1))
    if path:
        ax.add_collection(LineCollection(path, colors=PATH_COLOR, linewidths=2.4, zorder=2))

    # Nodes: one scatter per marker kind, coloured by status.
    present_status: set[str] = set()
    present_kind: set[str] = set()
    groups: dict[str, tuple[list[float], list[float], list[str], list[str]]] = {}
    for node, (x, y) in pos.items():
        attrs = sub.nodes[node]
        status = attrs.get("status", "invisible")
        kind = _kind(attrs)
        present_status.add(status)
        present_kind.add(kind)
        xs, ys, colors, edges = groups.setdefault(kind, ([], [], [], []))
        xs.append(x)
        ys.append(y)
        colors.append(STATUS_COLORS.get(status, "#999999"))
        edges.append(PATH_COLOR if attrs.get("on_path") else "none")
    for kind, (xs, ys, colors, edges) in groups.items():
        scale = 1.0 if kind == "entry" else 1.8
        ax.scatter(
            xs,
            ys,
            s=size * scale,
            c=colors,
            marker=KIND_MARKERS[kind],
            edgecolors=edges,
            linewidths=0.8,
            zorder=3,
        )
    leaf = graph.graph.get("leaf_id")
    if leaf in pos:
        ax.scatter(
            [pos[leaf][0]],
            [pos[leaf][1]],
            s=size * 4,
            marker="*",
            c="gold",
            edgecolors="black",
            linewidths=0.8,
            zorder=4,
        )

    if annotate_labels:
        for node, (x, y) in pos.items():
            label = sub.nodes[node].get("label")
            if label:
                ax.annotate(
                    str(label),
                    (x, y),
                    xytext=(6, 0),
                    textcoords="offset points",
                    fontsize=8,
                    va="center",
                    zorder=5,
                    bbox={"boxstyle": "round,pad=0.2", "fc": "#fffbe6", "ec": "#c9a800", "lw": 0.6},
                )

    handles = [
        Line2D(
            [],
            [],
            marker="o",
            linestyle="",
            markersize=7,
            markerfacecolor=STATUS_COLORS[s],
            markeredgecolor="none",
            label=s,
        )
        for s in STATUSES
        if s in present_status
    ]
    handles += [
        Line2D(
            [],
            [],
            marker=KIND_MARKERS[k],
            linestyle="",
            markersize=7,
            markerfacecolor="white",
            markeredgecolor="black",
            label=_KIND_NAMES[k],
        )
        for k in ("compaction", "branch_summary", "context_edit")
        if k in present_kind
    ]
    handles.append(Line2D([], [], color=PATH_COLOR, linewidth=2.4, label="current path"))
    if leaf in pos:
        handles.append(
            Line2D(
                [],
                [],
                marker="*",
                linestyle="",
                markersize=10,
                markerfacecolor="gold",
                markeredgecolor="black",
                label="leaf",
            )
        )
    ax.legend(
        handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False
    )

    if pos:
        xs_all = [p[0] for p in pos.values()]
        ys_all = [p[1] for p in pos.values()]
        ax.set_xlim(min(xs_all) - 1, max(xs_all) + 1)
        ax.set_ylim(min(ys_all) - 1, max(ys_all) + 1)
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_visible(False)
    sid = str(graph.graph.get("session_id") or "")[:8]
    title = f"session {sid} — {total} entries, leaf {leaf}"
    if truncated:
        title += f" (showing {n} of {total})"
    ax.set_title(title, fontsize=10)
    return ax


def _mark_turns(ax: Axes, turns: list[int], flags: Any, gid: str, label: str, **style: Any) -> None:
    """A vertical line (gid ``gid``) just before each turn whose flag is set; only the first
    carries ``label``, so the legend names the kind of mark once."""
    first = True
    for turn, flag in zip(turns, flags, strict=True):
        if flag:
            line = ax.axvline(turn - 0.5, label=label if first else None, **style)
            line.set_gid(gid)
            first = False


def plot_usage(
    tree_or_frame: Any,
    window: int | None = None,
    reserve: int | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Context tokens per turn: the provider-reported total and Pi's projected estimate
    before each call, against horizontal lines at ``W = window`` and ``W − R`` (the
    compaction threshold, with ``reserve`` R). Vertical lines mark compactions (purple)
    and branch switches (grey) just before the first turn after them.

    Takes a SessionTree or a frame from :func:`pi_nb.notebook.frames.usage_frame`. The
    lines carry gids ``reported``, ``estimated``, ``window``, ``threshold``, ``compaction``
    and ``branch_switch``. Returns the Axes.
    """
    if reserve is not None and window is None:
        raise ValueError("reserve needs window: the threshold is W − R")
    if hasattr(tree_or_frame, "projection") and hasattr(tree_or_frame, "entries"):
        from .frames import usage_frame

        frame = usage_frame(tree_or_frame)
    else:
        frame = tree_or_frame
    ax = _new_axes(ax, (9, 4.5))
    turns = [int(t) for t in frame["turn"]]
    (reported,) = ax.plot(
        turns,
        list(frame["context_tokens_reported"]),
        marker="o",
        markersize=4,
        color="#1f77b4",
        label="reported (provider usage)",
    )
    reported.set_gid("reported")
    (estimated,) = ax.plot(
        turns,
        list(frame["context_tokens_estimated"]),
        marker=".",
        linestyle="--",
        color="#ff7f0e",
        label="estimated (Pi, before the call)",
    )
    estimated.set_gid("estimated")
    if window is not None:
        ax.axhline(window, color="black", linewidth=1.2, label=f"W = {window:,}").set_gid("window")
        if reserve is not None:
            ax.axhline(
                window - reserve,
                color="#c0392b",
                linestyle=":",
                linewidth=1.4,
                label=f"W − R = {window - reserve:,}",
            ).set_gid("threshold")
    _mark_turns(
        ax,
        turns,
        frame["compaction"],
        "compaction",
        "compaction",
        color=COMPACTION_LINE,
        linewidth=1.2,
    )
    _mark_turns(
        ax,
        turns,
        frame["branch_switch"],
        "branch_switch",
        "branch switch",
        color=BRANCH_LINE,
        linestyle="-.",
        linewidth=1.0,
    )
    ax.set_xlabel("turn")
    ax.set_ylabel("context tokens")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8, loc="best")
    ax.grid(True, alpha=0.3)
    return ax
