"""Small HTML renderers behind the notebook objects' ``_repr_html_`` (no heavy imports).

Everything user-controlled (message text, labels, ids, paths) goes through
:func:`html.escape`. The status colours here are shared by the plots and the diffs.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any

from ..agent.session import NextCallTokens, RunResult, Session, next_call_tokens
from ..display import register_html
from ..entries import Entry, Message
from ..messages import content_text
from ..projection import Projection
from ..render import describe_entry, one_line
from ..session.tree import SessionTree
from ..tokens import estimate_tokens

# One colour per status, used by every rendering (tables, plots, diffs).
STATUS_COLORS: dict[str, str] = {
    "summary": "#8e44ad",  # a compaction summary in context
    "kept": "#2e8b57",  # in context verbatim
    "edited": "#e67e22",  # in context, content replaced by a context edit
    "omitted": "#c0392b",  # dropped by a context edit (or by a diff)
    "summarized": "#5b8bd0",  # on the path, replaced by the latest compaction summary
    "added": "#16a085",  # new in the "after" side of a diff
    "off-path": "#c8c8c8",  # on another branch
    "invisible": "#7f7f7f",  # on the path but contributes no message (labels, settings…)
}

_BAR_ORDER = ("summary", "kept", "edited")


def esc(value: Any) -> str:
    """``html.escape(str(value))`` — quotes escaped too."""
    return html.escape("" if value is None else str(value), quote=True)


def status_color(status: str) -> str:
    """The colour of a status (grey for unknown ones)."""
    return STATUS_COLORS.get(status, "#999999")


def message_text(message: Message) -> str:
    """The readable text of one projected message (summaries, tool calls and bash included)."""
    role = message.get("role")
    if role in ("compactionSummary", "branchSummary"):
        return str(message.get("summary") or "")
    if role == "assistant":
        return describe_entry({"type": "message", "message": message}, 10**9)[len("assistant: ") :]
    if role == "bashExecution":
        return f"$ {message.get('command', '')}\n{message.get('output') or ''}"
    if role == "system":
        text = content_text(message.get("content"))
        return text or "(system prompt)"
    return content_text(message.get("content"))


def message_preview(message: Message, width: int = 80) -> str:
    """One line of a message's text, cut at ``width`` characters."""
    return one_line(message_text(message), width)


def entry_preview(entry: Entry, width: int = 60) -> str:
    """One line describing an entry (kind, role, text), as the CLI shows it."""
    return describe_entry(entry, width)


def _style_chip(status: str) -> str:
    return (
        f"background:{status_color(status)};color:#fff;border-radius:3px;"
        "padding:0 4px;font-size:0.85em"
    )


def status_chip(status: str) -> str:
    """An inline coloured badge for a status."""
    return f'<span style="{_style_chip(status)}">{esc(status)}</span>'


def token_bar(
    parts: Iterable[tuple[str, int]], total: int | None = None, width_px: int = 320
) -> str:
    """A horizontal bar of coloured segments ``(status, tokens)``; ``total`` is the full scale
    (e.g. the context window), else the sum of the parts."""
    parts = [(status, max(0, int(tokens))) for status, tokens in parts]
    scale = total if total and total > 0 else sum(t for _, t in parts)
    segments = []
    for status, tokens in parts:
        if tokens <= 0 or scale <= 0:
            continue
        pct = min(100.0, 100.0 * tokens / scale)
        segments.append(
            f'<div title="{esc(status)}: {tokens} tokens" style="width:{pct:.2f}%;'
            f'background:{status_color(status)}"></div>'
        )
    return (
        f'<div style="display:flex;width:{width_px}px;height:10px;background:#eee;'
        f'border:1px solid #ccc;overflow:hidden">{"".join(segments)}</div>'
    )


def session_html(
    tree: SessionTree, window: int | None = None, call: NextCallTokens | None = None
) -> str:
    """A session card: id, file, entry count, leaf, context size and a token bar.

    With ``window`` the bar is drawn against the context window W. The context size is the
    next model call's (``call``; default: as ``Session.open`` would continue the tree).
    """
    projection = tree.projection()
    call = call if call is not None else next_call_tokens(tree)
    per_status: dict[str, int] = {}
    for pe in projection.entries:
        if pe.messages:
            per_status[pe.status] = per_status.get(pe.status, 0) + sum(
                estimate_tokens(m) for m in pe.messages
            )
    parts = [(s, per_status.get(s, 0)) for s in _BAR_ORDER]
    if not call.reported:  # sent with every request: system prompt and tool declarations
        parts.append(("invisible", call.system_prompt + call.tools))
    name = tree.name
    leaf = tree.leaf_id
    label = tree.label(leaf) if leaf else None
    rows = [
        ("session", esc(tree.session_id) + (f" — <b>{esc(name)}</b>" if name else "")),
        ("file", f"<code>{esc(tree.path or 'in memory')}</code>"),
        ("entries", esc(len(tree.entries))),
        ("leaf", f"<code>{esc(leaf)}</code>" + (f" [{esc(label)}]" if label else "")),
        (
            "context",
            f"{len(projection.messages)} messages, {esc(call.label())}"
            + (f", {window_share(call.tokens, window)} of W = {window:,}" if window else ""),
        ),
        ("", token_bar(parts, total=window)),
    ]
    body = "".join(
        f'<tr><th style="text-align:left;padding-right:1em">{k}</th><td>{v}</td></tr>'
        for k, v in rows
    )
    return f'<div class="pi-nb-session"><table>{body}</table></div>'


def entry_html(entry: Entry, label: str | None = None, width: int = 2000) -> str:
    """One entry: type, id, parent, timestamp, label and its text."""
    kind = entry.get("type")
    text: str
    if kind == "message" and isinstance(entry.get("message"), dict):
        text = message_text(entry["message"])
        kind = f"message · {entry['message'].get('role', '?')}"
    elif kind in ("compaction", "branch_summary"):
        text = str(entry.get("summary") or "")
    elif kind == "custom_message":
        text = content_text(entry.get("content"))
    else:
        text = describe_entry(entry, width)
    if len(text) > width:
        text = text[: width - 1] + "…"
    head = (
        f"<b>{esc(kind)}</b> <code>{esc(entry.get('id'))}</code>"
        f" ← <code>{esc(entry.get('parentId'))}</code>"
        f" <span style='color:#888'>{esc(entry.get('timestamp'))}</span>"
    )
    if label:
        head += f" <span style='{_style_chip('kept')}'>{esc(label)}</span>"
    return (
        f'<div class="pi-nb-entry">{head}'
        f'<pre style="white-space:pre-wrap;margin:2px 0">{esc(text)}</pre></div>'
    )


def projection_html(projection: Projection, max_rows: int = 200, width: int = 100) -> str:
    """The projected context as a table: index, entry, role, status, tokens, preview."""
    rows: list[str] = []
    total = 0
    index = 0
    for pe in projection.entries:
        for message in pe.messages:
            tokens = estimate_tokens(message)
            total += tokens
            if index < max_rows:
                rows.append(_projection_row(index, pe.id, message, pe.status, tokens, width))
            index += 1
    if index > max_rows:
        rows.append(f'<tr><td colspan="6">… {index - max_rows} more messages</td></tr>')
    head = "".join(f"<th>{h}</th>" for h in ("#", "entry", "role", "status", "tokens", "text"))
    return (
        f'<div class="pi-nb-projection"><div>Projection at <code>{esc(projection.leaf_id)}'
        f"</code>: {index} messages, {total:,} tokens (estimated)</div>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def _projection_row(
    index: int, entry_id: str, message: Message, status: str, tokens: int, width: int
) -> str:
    return (
        f'<tr style="border-left:4px solid {status_color(status)}">'
        f"<td>{index}</td><td><code>{esc(entry_id)}</code></td>"
        f"<td>{esc(message.get('role'))}</td><td>{status_chip(status)}</td>"
        f'<td style="text-align:right">{tokens:,}</td>'
        f"<td style='text-align:left'>{esc(message_preview(message, width))}</td></tr>"
    )


def table_html(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], status_column: str | None = None
) -> str:
    """A plain escaped table; rows get a status colour stripe when ``status_column`` is set."""
    status_at = columns.index(status_column) if status_column in columns else None
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = []
    for row in rows:
        style = ""
        cells = []
        for i, value in enumerate(row):
            if i == status_at:
                style = f' style="border-left:4px solid {status_color(str(value))}"'
                cells.append(f"<td>{status_chip(str(value))}</td>")
            else:
                cells.append(f"<td style='text-align:left'>{esc(value)}</td>")
        body.append(f"<tr{style}>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def run_result_html(result: RunResult) -> str:
    """One agent run: status, entries, compactions, tokens and the reply text."""
    status = "aborted" if result.aborted else f"error: {result.error}" if result.error else "ok"
    return (
        f"<div><b>RunResult</b> · {esc(status)} · {len(result.entries)} entries · "
        f"{len(result.compactions)} compactions · {result.usage.get('totalTokens', 0)} tokens"
        f"<pre style='white-space:pre-wrap'>{esc(result.text)}</pre></div>"
    )


def agent_session_html(session: Session) -> str:
    """An agent session: its model, then the session card drawn against the known window."""
    head = f"<div><b>Session</b> · model <code>{esc(session.model)}</code></div>"
    return head + session_html(
        session.tree, window=session.known_window, call=session.next_call_tokens()
    )


# The core objects' _repr_html_ look these up (pi_nb.display); importing this module,
# which `import pi_nb` does, is what gives them their HTML.
register_html(SessionTree, session_html)
register_html(Projection, projection_html)
register_html(RunResult, run_result_html)
register_html(Session, agent_session_html)


# --- the session explorer's static snapshot ---------------------------------------------------


def window_share(used: int, window: int) -> str:
    """``used`` as a percent of ``window``, never capped: 4,080 of 2,048 is ``199%``."""
    return f"{100 * used / window:.0f}%" if window > 0 else "?%"


def explorer_text(state: dict[str, Any]) -> str:
    """One plain-text line for a SessionExplorer (plain-text viewers, markdown export)."""
    info, tok = state.get("info") or {}, state.get("tokens") or {}
    used, window = int(tok.get("used") or 0), int(tok.get("window") or 0)
    parts = [
        f"session {str(info.get('session_id') or '?')[:8]}",
        f"{info.get('entries', 0):,} entries",
        _model_words(info),
        f"context {used:,} / {window:,} tokens ({window_share(used, window)} of W, "
        f"{tok.get('kind', 'estimated')}) · W − R = {int(tok.get('threshold') or 0):,}",
    ]
    return "SessionExplorer · " + " · ".join(parts)


def explorer_snapshot_html(state: dict[str, Any], max_rows: int = 300) -> str:
    """The explorer as it was, without JavaScript: header, token bar, tree, next model call.

    Shown by every viewer that cannot run the live widget (nbconvert HTML, GitHub,
    nbviewer); ``state`` is :func:`pi_nb.notebook.widget_state.explorer_state`'s.
    """
    info, tok = state.get("info") or {}, state.get("tokens") or {}
    used, window = int(tok.get("used") or 0), int(tok.get("window") or 0)
    threshold = int(tok.get("threshold") or 0)
    roles = tok.get("by_role") or {}
    bar = token_bar(
        [("invisible" if r == "overhead" else _role_status(r), n) for r, n in roles.items()],
        total=window,
    )
    parts = ", ".join(f"{esc(role)} {int(n):,}" for role, n in roles.items())
    over = " ⚠ above W − R" if used > threshold else ""
    head = (
        f"<div><b>Session explorer</b> (snapshot) · {esc(info.get('name') or '')} "
        f"<code>{esc(str(info.get('session_id') or '')[:8])}</code> · "
        f"{int(info.get('entries') or 0):,} entries · {esc(_model_words(info))}</div>"
        f"<div>context {used:,} / {window:,} tokens ({window_share(used, window)} of W, "
        f"{esc(tok.get('kind', 'estimated'))}) · W − R = {threshold:,}{over}</div>"
        f"<div>{bar}</div><div style='color:#666;font-size:0.85em'>{parts}</div>"
    )
    tree_rows = []
    for row in (state.get("tree") or [])[:max_rows]:
        marks = "".join(
            f" {status_chip(flag)}" if flag == row.get("status") else f" [{esc(flag)}]"
            for flag in (
                row.get("status"),
                "leaf" if row.get("leaf") else None,
                "pinned" if row.get("pinned") else None,
                row.get("label"),
            )
            if flag
        )
        style = "" if row.get("on_path") else " style='color:#999'"
        tree_rows.append(
            f"<tr{style}><td><code>{esc(row.get('id'))}</code></td><td>{esc(row.get('role') or row.get('kind'))}</td>"
            f"<td style='text-align:right'>{int(row.get('tokens') or 0):,}</td>"
            f"<td style='text-align:left'>{esc(row.get('preview'))}{marks}</td></tr>"
        )
    ctx_rows = [
        f"<tr style='border-left:4px solid {status_color(str(r.get('status')))}'>"
        f"<td>{'' if r.get('index') is None else r['index']}</td><td><code>{esc(r.get('id'))}</code></td>"
        f"<td>{esc(r.get('role') or '')}</td><td>{status_chip(str(r.get('status')))}"
        f"{' [pinned]' if r.get('pinned') else ''}</td>"
        f"<td style='text-align:right'>{int(r.get('tokens') or 0):,}</td>"
        f"<td style='text-align:left'>{esc(r.get('preview'))}</td></tr>"
        for r in (state.get("context") or [])[:max_rows]
    ]
    more = len(state.get("tree") or []) - max_rows
    return (
        f'<div class="pi-nb-explorer-snapshot">{head}'
        f"<details open><summary>Tree ({len(state.get('tree') or []):,} entries"
        f"{f', first {max_rows}' if more > 0 else ''})</summary><table>{''.join(tree_rows)}</table></details>"
        "<details open><summary>Next model call</summary><table><thead><tr><th>#</th><th>entry</th>"
        "<th>role</th><th>status</th><th>tokens</th><th>text</th></tr></thead>"
        f"<tbody>{''.join(ctx_rows)}</tbody></table></details></div>"
    )


def _model_words(info: dict[str, Any]) -> str:
    """``next model X`` for a session; ``model X (last in the file)`` for a bare tree."""
    model = info.get("model") or "?"
    if info.get("model_source") == "session":
        return f"next model {model}"
    return f"model {model} (last in the file)"


def _role_status(role: str) -> str:
    return "summary" if role == "summary" else "kept"
