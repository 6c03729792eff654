"""The agent side of the ``pi-nb`` command line: ``prompt`` and ``compact``.

``pi_nb.cli`` parses the arguments and calls these; they return the exit status.

    pi-nb prompt FILE "TEXT" [--model M] [--window W] [--reserve R] [--keep K] [--no-tools]
    pi-nb compact FILE [--preview] [--model M] [--focus TEXT] [--window W] [--reserve R] [--keep K]
                  [--api-base URL]

``--api-base URL`` sends the model calls to an OpenAI-compatible server (Ollama, vLLM,
llama.cpp server, LM Studio): ``--model smollm2`` then means ``openai/smollm2`` (an explicit
provider prefix is kept); the key is ``OPENAI_API_KEY`` when set, else none is needed.
Without ``--window`` the server's reported window is used, or 128000 with a one-line note.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO

from ..events import PiEvent

__all__ = ["compact_cli", "run_prompt_cli"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_ABORTED = 130


def _window_note(session: Any, err: TextIO) -> None:
    """Resolve the window of an ``api_base`` session now and say on ``err`` when it is an
    assumption (the server reports none and no --window was given)."""
    import warnings

    if not getattr(session, "api_base", None):
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # printed below as one plain line
        session.window  # noqa: B018 - resolves (and may note) the window
    if session.window_note:
        err.write(f"pi-nb: note: {session.window_note}\n")
        err.flush()


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Printer:
    """Streams a run: reply text to ``out``, tool calls, compactions and retries to ``err``."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err
        self.mid_line = False

    def _note(self, text: str) -> None:
        if self.mid_line:
            self.out.write("\n")
            self.out.flush()
            self.mid_line = False
        self.err.write(text + "\n")
        self.err.flush()

    def __call__(self, event: PiEvent) -> None:
        kind = event.get("type")
        if kind == "message_update":
            delta = event.get("delta") or ""
            self.out.write(delta)
            self.out.flush()
            self.mid_line = not delta.endswith("\n") if delta else self.mid_line
        elif kind == "message_end" and event["message"].get("role") == "assistant":
            if self.mid_line:
                self.out.write("\n")
                self.out.flush()
                self.mid_line = False
            message = event["message"]
            if message.get("stopReason") == "aborted":
                self._note("[aborted]")
        elif kind == "tool_execution_start":
            self._note(f"[tool] {event.get('tool_name')}({_short(event.get('args') or {})})")
        elif kind == "tool_execution_end" and event.get("is_error"):
            content = (event.get("result") or {}).get("content") or []
            text = " ".join(b.get("text", "") for b in content if isinstance(b, dict))
            self._note(f"[tool error] {event.get('tool_name')}: {_short(text, 200)}")
        elif kind == "compaction_start":
            self._note(f"[compacting: {event.get('reason')}]")
        elif kind == "compaction_end":
            result = event.get("result")
            if result is not None:
                after = getattr(result, "tokens_after", None)
                from ..compaction.compact import result_figures, result_warnings

                self._note(f"[compacted: {result_figures(result)}]")
                for warning in result_warnings(result):  # failed hooks, a grown context
                    self._note(f"[warning: {warning}]")
                from .result import above_threshold_note

                note = above_threshold_note(after, event.get("threshold"))
                if note:
                    self._note(f"[warning: {note}]")
            elif event.get("error_message"):
                self._note(f"[compaction failed: {event['error_message']}]")
            elif event.get("skipped"):
                self._note(f"[compaction skipped: {event['skipped']}]")
        elif kind == "auto_retry_start":
            self._note(
                f"[retry {event.get('attempt')}/{event.get('max_attempts')} in "
                f"{event.get('delay_ms', 0) / 1000:g}s: {_short(event.get('error_message') or '', 160)}]"
            )


def run_prompt_cli(
    path: str, text: str, *, stream_to: TextIO | None = None, err: TextIO | None = None, **options: Any
) -> int:
    """``pi-nb prompt``: send one prompt to the session in ``path`` (created if needed).

    ``options`` are :class:`~pi_nb.agent.session.Session`'s keywords (``model``,
    ``window``, ``reserve``, ``keep``, ``api_base``, ``no_tools`` …), passed on unchanged
    (declared once there: a None is the session's default).

    The reply streams to ``stream_to`` (stdout); tool calls, compactions and retries are
    noted on ``err`` (stderr). Compaction happens when the trigger fires. Returns 0 on
    success, 1 when the run failed, 2 for a configuration mistake (the file's folder does
    not exist, the model's API key is not set: one line, nothing written), 130 when it was
    interrupted.
    """
    from .session import Session

    out = stream_to if stream_to is not None else sys.stdout
    err = err if err is not None else sys.stderr
    opts = dict(options)
    from ..llm import ModelConfigError

    file = os.path.abspath(path)
    try:
        if os.path.exists(file) and os.path.getsize(file) > 0:
            session = Session.open(file, **opts)
        else:
            # Session.new refuses a missing folder: only the file named is created.
            opts.setdefault("cwd", os.getcwd())
            session = Session.open_or_new(file, **opts)
        _window_note(session, err)
        printer = _Printer(out, err)
        # A missing API key is refused here, before anything is sent or written.
        result = session.prompt(text, on_event=printer)
    except (ModelConfigError, FileNotFoundError) as exc:
        err.write(f"pi-nb: error: {exc}\n")
        err.flush()
        return EXIT_USAGE
    session.tree.flush()
    if result.aborted:
        return EXIT_ABORTED
    if result.error:
        err.write(f"pi-nb: error: {result.error}\n")
        err.flush()
        return EXIT_FAILED
    return EXIT_OK


def compact_cli(
    path: str,
    preview: bool = False,
    *,
    focus: str | None = None,
    stream_to: TextIO | None = None,
    err: TextIO | None = None,
    **options: Any,
) -> int:
    """``pi-nb compact``: compact the session in ``path`` now (or ``preview`` the cut).

    ``options`` are the session's keywords as for :func:`run_prompt_cli`: ``window`` /
    ``reserve`` / ``keep`` set the budget (``keep`` is keepRecentTokens: how much recent
    context the compaction keeps verbatim).

    Prints the summary (or the preview) to ``stream_to``. Returns 0 on success, 1 when
    there is nothing to compact or the summary failed, 2 when the file does not exist.
    """
    from .. import compaction as comp
    from .session import Session

    out = stream_to if stream_to is not None else sys.stdout
    err = err if err is not None else sys.stderr
    if not os.path.exists(path):
        err.write(f"pi-nb: error: {path}: no such session file\n")
        return EXIT_USAGE
    session = Session.open(path, **options)
    _window_note(session, err)
    try:
        result = session.compact(focus=focus, preview=preview)
    except (comp.NothingToCompact, comp.AlreadyCompacted, comp.CompactionCancelled, comp.SummarizationError) as exc:
        err.write(f"pi-nb: error: {exc}\n")
        return EXIT_FAILED
    out.write(_render_compaction(result).rstrip("\n") + "\n")
    out.flush()
    for warning in comp.result_warnings(result):  # on stderr, where users look
        err.write(f"pi-nb: warning: {warning}\n")
    err.flush()
    return EXIT_OK


def _render_compaction(result: Any) -> str:
    """A compaction result as text: one line of figures, then the summary."""
    from ..compaction import result_figures

    committed = getattr(result, "committed", True)
    head = "compaction written" if committed else "compaction preview (nothing written)"
    figures = [
        f"context {result_figures(result)}",
        f"first kept entry {getattr(result, 'first_kept_entry_id', '?')}",
    ]
    preparation = getattr(result, "preparation", None)
    if preparation is not None and getattr(preparation, "is_split_turn", False):
        figures.append("split turn")
    tools = getattr(getattr(preparation, "file_ops", None), "tools", "pi")
    if tools != "pi":  # an imported tree: its agent's file tools fill the file lists
        figures.append(f"file lists from {tools} file tools")
    return f"{head}: " + ", ".join(figures) + "\n\n" + str(getattr(result, "summary", result))
