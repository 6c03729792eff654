"""Plain-text renderings of sessions shared by the CLI and the notebook (no dependencies)."""

from __future__ import annotations

from collections.abc import Sequence

from .entries import Entry
from .messages import content_text
from .session.listing import SessionFile
from .session.tree import SessionTree, TreeNode
from .tokens import TokenCache


def one_line(text: str, width: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def describe_entry(entry: Entry, width: int = 60) -> str:
    """A short human description of an entry: kind, role and a text preview."""
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        if not isinstance(message, dict):
            message = {}
        role = message.get("role", "?")
        if role == "assistant":
            parts = []
            calls = []
            content = message.get("content")
            for block in content if isinstance(content, list) else ():
                if isinstance(block, dict) and block.get("type") == "text":
                    parts.append(str(block.get("text") or ""))
                elif isinstance(block, dict) and block.get("type") == "toolCall":
                    calls.append(str(block.get("name")))
            text = " ".join(parts)
            if calls:
                text = (text + " " if text else "") + "→ " + ", ".join(calls)
            stop = message.get("stopReason")
            if stop in ("error", "aborted", "length"):
                text = f"[{stop}] " + (text or str(message.get("errorMessage") or ""))
            return f"assistant: {one_line(text, width)}"
        if role == "toolResult":
            flag = " (error)" if message.get("isError") else ""
            return f"toolResult {message.get('toolName', '')}{flag}: " + one_line(
                content_text(message.get("content")), width
            )
        if role == "bashExecution":
            return f"bash: {one_line(str(message.get('command', '')), width)}"
        return f"{role}: {one_line(content_text(message.get('content')), width)}"
    if kind == "compaction":
        return (
            f"compaction (keeps from {entry.get('firstKeptEntryId')}, "
            f"{entry.get('tokensBefore')} tokens before): {one_line(str(entry.get('summary', '')), 40)}"
        )
    if kind == "branch_summary":
        return f"branch summary (from {entry.get('fromId')}): {one_line(str(entry.get('summary', '')), 40)}"
    if kind == "context_edit":
        what = "omit" if entry.get("replacement") is None else "replace"
        return f"context edit: {what} {entry.get('targetId')}"
    if kind == "label":
        return f"label {entry.get('targetId')}: {entry.get('label') or '(cleared)'}"
    if kind == "model_change":
        return f"model → {entry.get('provider')}/{entry.get('modelId')}"
    if kind == "thinking_level_change":
        return f"thinking → {entry.get('thinkingLevel')}"
    if kind == "custom_message":
        return f"custom message [{entry.get('customType')}]: " + one_line(
            content_text(entry.get("content")), width
        )
    if kind == "custom":
        return f"custom [{entry.get('customType')}]"
    if kind == "session_info":
        return f"session name: {entry.get('name')}"
    if kind == "usage":
        return f"usage [{entry.get('kind')}] {entry.get('provider')}/{entry.get('model')}"
    return f"{kind}"


def render_tree(tree: SessionTree, width: int = 60, max_lines: int | None = None) -> str:
    """The tree as text: one line per entry, indented at forks.

    ``*`` marks the current path, ``@`` the leaf; labels in brackets; context edits and
    compactions are named on their line.
    """
    on_path = {e["id"] for e in tree.get_branch()}
    leaf = tree.leaf_id
    lines: list[str] = []
    # (node, depth, starts a fork?) — depth grows only where the tree forks.
    stack: list[tuple[TreeNode, int, bool]] = [(n, 0, False) for n in reversed(tree.tree())]
    while stack:
        node, depth, forked = stack.pop()
        eid = node.entry["id"]
        mark = "@" if eid == leaf else ("*" if eid in on_path else " ")
        label = f" [{node.label}]" if node.label else ""
        indent = "  " * depth + ("├ " if forked else "")
        lines.append(f"{mark} {indent}{eid} {describe_entry(node.entry, width)}{label}")
        if max_lines is not None and len(lines) >= max_lines:
            lines.append(f"  … ({len(tree) - len(lines)} more entries)")
            break
        if len(node.children) == 1:
            stack.append((node.children[0], depth, False))
        else:
            stack.extend((child, depth + 1, True) for child in reversed(node.children))
    return "\n".join(lines)


def render_context(tree: SessionTree, leaf_id: str | None = None, width: int = 80) -> str:
    """The projection as text: one line per message with its source entry and tokens."""
    projection = tree.projection(leaf_id) if leaf_id else tree.projection()
    cache = TokenCache()
    lines = []
    index = 0
    for pe in projection.entries:
        for message in pe.messages:
            role = message.get("role")
            if role in ("compactionSummary", "branchSummary"):
                text = str(message.get("summary", ""))
            elif role == "assistant":
                text = describe_entry({"type": "message", "message": message}, width)[len("assistant: "):]
            elif role == "bashExecution":
                text = str(message.get("command", ""))
            else:
                text = content_text(message.get("content"))
            status = pe.status
            lines.append(
                f"{index:>4} {role!s:<17} {cache.estimate(message):>6} tok  {pe.id} {status:<8} "
                f"{one_line(text, width)}"
            )
            index += 1
    return "\n".join(lines)


def utc_text(ms: int | None, fmt: str) -> str | None:
    """A millisecond time in UTC; the number itself where datetime cannot show it."""
    from datetime import datetime, timezone

    if ms is None:
        return None
    try:
        return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime(fmt)
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms"


def render_sessions(rows: Sequence[SessionFile]) -> str:
    """The session browser as text, one line per file: its number (what ``%pi open N``
    takes), last activity, counts, size, cwd, file (and name) and why it is unreadable."""

    def when(ms: int | None) -> str:
        return utc_text(ms, "%Y-%m-%d %H:%M") or "-"

    def size(n: int | None) -> str:
        if n is None:
            return "-"
        if n < 1000:
            return f"{n} B"
        value = n / 1000
        for unit in ("kB", "MB"):
            if value < 1000:
                return f"{value:.1f} {unit}"
            value /= 1000
        return f"{value:.1f} GB"

    def count(n: int | None) -> str:
        return "-" if n is None else str(n)

    def cell(text: str, width: int = 60) -> str:
        # A hostile cwd or name (newlines, escapes, megabytes) must not break the one line.
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
        return text if len(text) <= width else text[: width - 1] + "…"

    head = ("#", "last activity UTC", "entries", "msgs", "compact", "size", "cwd", "session", "error")
    table = [head]
    for number, r in enumerate(rows, 1):
        label = cell(f"{r.file} ({r.name})" if r.name else r.file)
        table.append(
            (
                str(number),
                when(r.last_activity_ms),
                count(r.entries),
                count(r.messages),
                count(r.compactions),
                size(r.size),
                cell(r.cwd or "-"),
                label,
                cell(r.error or "", 200),
            )
        )
    widths = [max(len(line[i]) for line in table) for i in range(len(head) - 1)]
    right = {0, 2, 3, 4, 5}
    lines = []
    for line in table:
        cells = [
            text.rjust(widths[i]) if i in right else text.ljust(widths[i])
            for i, text in enumerate(line[:-1])
        ]
        lines.append(("  ".join(cells) + "  " + line[-1]).rstrip())
    return "\n".join(lines)
