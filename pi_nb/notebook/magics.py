"""`%load_ext pi_nb`: the %pi line magic and the %%pi cell magic.

Magics only parse and display: every subcommand is one call of the public API
(:class:`pi_nb.agent.Session` and the :mod:`pi_nb.notebook` helpers). The current session is
the state, held on the magics object (:func:`current_session` returns it to Python code),
with the rows of the last ``%pi sessions`` listing (what ``%pi open N`` numbers). Settings
are traitlets, configurable with ``%config PiMagics.model = "..."`` like jupyter-ai's
magics; changing one applies to the current session at once.

Nothing heavy (litellm, pandas, matplotlib, anywidget) is imported until a subcommand needs
it, so ``%load_ext pi_nb`` stays instant.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import string
import sys
import time
from collections.abc import Mapping
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from traitlets import Bool, Dict, Integer, Unicode, observe, validate

from ..events import PiEvent
from ..models import default_model, default_model_notice

__all__ = [
    "DisplayStream",
    "PiMagics",
    "StreamPrinter",
    "current_session",
    "default_model",
    "interpolate",
    "load_ipython_extension",
    "text_token_bar",
    "unload_ipython_extension",
]


class _HelpShown(Exception):
    """argparse printed --help: stop quietly."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports mistakes as one-line UsageErrors instead of exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")

    def exit(self, status: int = 0, message: str | None = None) -> None:  # type: ignore[override]
        if message:
            print(message, end="")
        raise _HelpShown

    def print_help(self, file: Any = None) -> None:
        super().print_help(file or sys.stdout)


# `{name}`, `{obj.attr}`, `{x[0]}`, `{x!r}`, `{x:>8}` — a field must start like an identifier,
# so JSON (`{"a": 1}`), set literals and `{}` in code are never touched.
_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_][^{}\n]*)\}")


def interpolate(text: str, namespace: Mapping[str, Any]) -> str:
    """Replace ``{name}`` (and ``{obj.attr}``, ``{x[0]}``, ``{x!r}``, ``{x:spec}``) by notebook
    values; ``{{`` / ``}}`` give literal braces.

    Fields naming unknown variables (or failing to format) are left untouched, so code and
    JSON in prompts survive; unbalanced braces are fine.
    """
    formatter = string.Formatter()

    def replace(match: re.Match[str]) -> str:
        whole = match.group(0)
        if whole == "{{":
            return "{"
        if whole == "}}":
            return "}"
        try:
            return formatter.vformat(whole, (), _Namespace(namespace))
        except Exception:
            return whole

    return _FIELD.sub(replace, text)


class _Namespace(dict):  # type: ignore[type-arg]
    """A read-only view of the user namespace for str.format (KeyError when unknown)."""

    def __init__(self, namespace: Mapping[str, Any]) -> None:
        super().__init__()
        self._ns = namespace

    def __getitem__(self, key: str) -> Any:
        return self._ns[key]

    def __contains__(self, key: object) -> bool:
        return key in self._ns


def text_token_bar(tokens: int, window: int, reserve: int, width: int = 40) -> str:
    """One line: ``context ▕█████░░░░│░░▏ 1,234 / 2,048 tokens · W − R = 1,536``.

    The bar is the window W; ``│`` marks the compaction threshold W − R.
    """
    window = max(int(window), 1)
    threshold = max(window - int(reserve), 0)
    cut = min(width, max(0, round(threshold / window * width)))
    filled = min(width, max(0, round(tokens / window * width)))
    cells = ["█" if i < filled else "░" for i in range(width)]
    bar = "".join(cells[:cut]) + "│" + "".join(cells[cut:])
    over = "  ⚠ above W − R" if tokens > threshold else ""
    return f"context ▕{bar}▏ {tokens:,} / {window:,} tokens · W − R = {threshold:,}{over}"


class DisplayStream:
    """A file-like ``out`` for :class:`StreamPrinter` that keeps the whole streamed text in
    ONE display output, updated in place (``display_id`` + ``update``).

    Writing a kernel's stdout instead stores one stream output per flush: nbconvert's HTML
    then shows a reply as dozens of short blocks. An update replaces the display's data, in
    live Jupyter and in the outputs ``nbconvert --execute`` / nbclient store.

    ``flush`` publishes at most once per ``interval`` seconds, counted from the first write:
    a reply that streams faster than that (the scripted model) is ONE display message, so a
    consumer that ignores display updates (nbval) sees all of it too. :meth:`close` always
    publishes the final text.
    """

    def __init__(self, interval: float = 0.25) -> None:
        self.text = ""
        self.handle: Any = None
        self.interval = interval
        self._started: float | None = None
        self._last = 0.0
        self._shown = ""

    def write(self, text: str) -> int:
        if self._started is None:
            self._started = self._last = time.monotonic()
        self.text += text
        return len(text)

    def flush(self) -> None:
        if self._started is not None and time.monotonic() - self._last >= self.interval:
            self._publish()

    def close(self) -> None:
        """Publish the final text (the stored output of the cell)."""
        self._publish()

    def _publish(self) -> None:
        if not self.text or self.text == self._shown:
            return  # no empty block before the first word, no repeated update
        self._last = time.monotonic()
        self._shown = self.text
        data = {"text/plain": self.text}
        if self.handle is None:
            from IPython.display import display

            self.handle = display(data, raw=True, display_id=True)
        else:
            self.handle.update(data, raw=True)


def _in_kernel(shell: Any) -> bool:
    """Whether ``shell`` runs in a Jupyter kernel (displays can be updated in place); a
    terminal IPython prints every display, so it gets the plain stdout stream."""
    return shell is not None and getattr(shell, "kernel", None) is not None


class StreamPrinter:
    """Prints agent events as plain text while the reply streams in."""

    #: Seconds between flushes while text streams: each flush is one output message in
    #: Jupyter (a display update with :class:`DisplayStream`), so flushing every token
    #: would send hundreds of messages per cell.
    flush_interval = 0.25

    def __init__(self, show_tools: bool = True, out: Any = None) -> None:
        self.show_tools = show_tools
        self.out = out
        self._at_line_start = True
        self._last_flush = 0.0
        self._pending = ""  # streamed text held back until a word ends (see _stream)

    def close(self) -> None:
        """Write what is still held back and flush: the output shows the whole run, also
        when the run stopped early (an interrupt, an error) without an ``agent_end``."""
        self._finish_stream()
        out = self.out or sys.stdout
        (out.close if isinstance(out, DisplayStream) else out.flush)()

    def _stream(self, delta: str) -> None:
        # A key can arrive split over several deltas: hold back the unfinished word so
        # every word is redacted whole before it reaches the output.
        text = self._pending + delta
        cut = max(text.rfind(" "), text.rfind("\n"), text.rfind("\t"))
        if cut < 0 and len(text) < 4096:
            self._pending = text
            return
        head, self._pending = (text, "") if cut < 0 else (text[: cut + 1], text[cut + 1 :])
        self._write(head)

    def _finish_stream(self) -> None:
        if self._pending:
            text, self._pending = self._pending, ""
            self._write(text)

    def _write(self, text: str, flush: bool = False) -> None:
        if not text:
            return
        from ..redact import redact

        text = redact(text)
        out = self.out or sys.stdout  # looked up late: Jupyter swaps sys.stdout per cell
        out.write(text)
        now = time.monotonic()
        if flush or now - self._last_flush >= self.flush_interval:
            out.flush()
            self._last_flush = now
        self._at_line_start = text.endswith("\n")

    def _line(self, text: str) -> None:
        self._finish_stream()
        if not self._at_line_start:
            self._write("\n")
        self._write(text + "\n", flush=True)

    def __call__(self, event: PiEvent) -> None:
        kind = event.get("type")
        if kind == "message_update":
            self._stream(str(event.get("delta") or ""))
        elif kind == "tool_execution_start" and self.show_tools:
            args = event.get("args") or {}
            shown = ", ".join(f"{k}={_short(v)}" for k, v in args.items())
            self._line(f"→ {event.get('tool_name')}({shown})")
        elif kind == "tool_execution_end" and self.show_tools:
            result = event.get("result") or {}
            from ..messages import content_text

            text = content_text(result.get("content") if isinstance(result, dict) else result)
            mark = "✗" if event.get("is_error") else "✓"
            self._line(f"  {mark} {_short(text, 100)}")
        elif kind == "compaction_start":
            self._line(f"⟳ compacting ({event.get('reason', 'threshold')})…")
        elif kind == "compaction_end":
            result = event.get("result")
            if event.get("error_message"):
                self._line(f"⟳ compaction failed: {_one_line(event['error_message'])}")
            elif event.get("skipped"):
                self._line(f"⟳ compaction skipped: {_one_line(event['skipped'])}")
            elif event.get("aborted"):
                self._line("⟳ compaction cancelled")
            elif result is not None:
                from ..compaction.compact import result_figures, result_warnings

                after = getattr(result, "tokens_after", None)
                calls = getattr(result, "calls", 0)
                self._line(
                    f"⟳ compacted: {result_figures(result)}, "
                    f"{calls} summary call(s); %pi diff shows what changed"
                )
                for warning in result_warnings(result):  # failed hooks, a grown context
                    self._line(f"⚠ {warning}")
                from ..agent.session import above_threshold_note

                note = above_threshold_note(after, event.get("threshold"))
                if note:
                    self._line(f"⚠ {note} (%pi model --keep N --reserve N)")
        elif kind == "message_end":
            self._finish_stream()
            message = event.get("message") or {}
            if message.get("role") == "assistant" and message.get("stopReason") == "error":
                error = _short(str(message.get("errorMessage") or "unknown error"), 160)
                self._line(f"✗ the model call failed: {error}")
        elif kind == "auto_retry_start":
            attempt, most = event.get("attempt"), event.get("max_attempts")
            self._line(f"… retrying (attempt {attempt} of {most})")
        elif kind == "error":
            self._line(f"error: {_one_line(event.get('message'))}")
        elif kind == "agent_end":
            self._finish_stream()
            if not self._at_line_start:
                self._write("\n", flush=True)


def _short(value: Any, width: int = 40) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _one_line(value: Any) -> str:
    text = str(value).strip() or type(value).__name__
    text = " ".join(text.splitlines()[0].split()) if text else text
    return text[:500]


def _display_text_html(text: str, html: str) -> None:
    """Display one output with a text/plain and a text/html form."""
    from IPython.display import display

    display({"text/plain": text, "text/html": html}, raw=True)


@magics_class
class PiMagics(Magics):
    """Drive a Pi-style agent cell by cell: ``%%pi`` sends a prompt, ``%pi …`` inspects."""

    model = Unicode(
        "", help="litellm model name (default: pi_nb.models.default_model(), $PI_NB_MODEL)"
    ).tag(config=True)
    window = Integer(None, allow_none=True, help="context window W (default: the model's)").tag(
        config=True
    )
    reserve = Integer(
        None, allow_none=True, help="reserve R (default 16384, scaled down for small windows)"
    ).tag(config=True)
    keep = Integer(
        None, allow_none=True, help="keepRecentTokens (default 20000, scaled for small windows)"
    ).tag(config=True)
    max_tokens = Integer(None, allow_none=True, help="cap on each reply's tokens").tag(config=True)
    api_base = Unicode(
        "",
        help="an OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1 (a bare model name "
        "then means openai/NAME; the key is OPENAI_API_KEY when set)",
    ).tag(config=True)
    llm_kwargs = Dict(
        help='extra options for every model call, e.g. {"script": [...]} for pinb/scripted'
    ).tag(config=True)
    session_dir = Unicode(
        "", help="folder for new session files (default: Pi's ~/.pi/agent/sessions layout)"
    ).tag(config=True)
    show_tools = Bool(True, help="print tool calls and results while streaming").tag(config=True)
    tools = Bool(True, help="give the agent the default tools (read/write/edit/bash)").tag(
        config=True
    )
    token_bar = Bool(True, help="print the context token bar after each %%pi reply").tag(
        config=True
    )

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell, **kwargs)
        self.session: Any = None  # the current pi_nb.agent.Session — the magics' only state
        self.listing: list[Any] | None = None  # rows of the last %pi sessions, for %pi open N
        self.parser = self._build_parser()
        self.cell_parser = self._build_cell_parser()

    # --- the current session ----------------------------------------------------------------

    def _model_kwargs(self) -> dict[str, Any]:
        """``llm_kwargs`` for a Session; a list script becomes a fresh stateful Script."""
        kwargs = dict(self.llm_kwargs)
        script = kwargs.get("script")
        if isinstance(script, (list, tuple)):
            from ..models.scripted import Script

            kwargs["script"] = Script(script)
        if self.api_base:  # llm_kwargs replaced later must not drop the endpoint
            kwargs["api_base"] = self.api_base
        return kwargs

    def _options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"model": self.model or default_model()}
        for name in ("window", "reserve", "keep", "max_tokens"):
            value = getattr(self, name)
            if value is not None:
                options[name] = value
        if not self.tools:
            options["no_tools"] = True
        options["llm_kwargs"] = self._model_kwargs()
        if self.api_base:
            options["api_base"] = self.api_base
        return options

    @validate("window", "reserve", "keep", "max_tokens", "llm_kwargs")
    def _check_setting(self, proposal: Any) -> Any:
        """``%config PiMagics.window = -10`` is refused with the rules of ``%pi model``: one
        line on stderr, and the earlier valid value stays.

        The validator keeps the old value instead of raising: IPython merges a ``%config``
        statement into the shell's config even when a configurable rejects it, so a raised
        TraitError would come back at every later load of the magics (``%reload_ext``).
        """
        name, value = proposal["trait"].name, proposal["value"]
        accepted = self.__dict__.setdefault("_accepted", {})  # runs before __init__'s body
        error = _setting_error(name, value)
        if error is None:
            accepted[name] = value
            return value
        kept = accepted.get(name, proposal["trait"].default())
        print(f"pi_nb: PiMagics.{name}: {error}; it stays {kept!r}", file=sys.stderr)
        return kept

    @observe("model", "window", "reserve", "keep", "max_tokens", "llm_kwargs", "api_base")
    def _apply_setting(self, change: Any) -> None:
        """A changed setting (``%config`` or ``%pi model``) applies to the current session."""
        session = getattr(self, "session", None)  # config is applied before __init__ ends
        if session is None:
            return
        name, value = change["name"], change["new"]
        if name == "model":
            session.model = value or default_model()
        elif name == "llm_kwargs":
            session.llm_kwargs = self._model_kwargs()  # replaces: {} clears earlier keys
        elif name == "api_base":
            session.api_base = value or None
        else:
            setattr(session, name, value)

    def _new_session(self, path: str | None = None, cwd: str | None = None) -> Any:
        from ..agent import Session

        if path is None and self.session_dir:
            folder = os.path.expanduser(self.session_dir)
            if not os.path.isdir(folder):
                os.mkdir(folder)  # the folder named, not missing parents (FileNotFoundError)
            path = os.path.join(folder, _new_file_name())
        return Session.new(os.path.expanduser(path) if path else None, cwd=cwd, **self._options())

    def current(self) -> Any:
        """The current session, started on first use."""
        if self.session is None:
            self.session = self._new_session()
        return self.session

    def _require(self) -> Any:
        if self.session is None:
            raise UsageError("no session yet: start one with %%pi, %pi new or %pi open PATH")
        return self.session

    # --- %pi and %%pi -------------------------------------------------------------------------

    @line_cell_magic
    def pi(self, line: str = "", cell: str | None = None) -> Any:
        """%%pi: send the cell as the next user prompt. %pi SUBCOMMAND: see %pi --help."""
        try:
            if cell is not None:
                return self._prompt(line, cell)
            return self._command(line)
        except _HelpShown:
            return None
        except UsageError:
            raise
        except KeyboardInterrupt:
            print("\n[interrupted]")
            return None
        except Exception as exc:  # never a traceback from inside the package
            raise UsageError(_error_line(exc)) from None

    def _build_cell_parser(self) -> _Parser:
        parser = _Parser(
            prog="%%pi",
            description=(
                "Send the cell as the next user prompt of the current session (started on "
                "first use) and stream the reply. {var} in the cell is replaced by the notebook "
                "variable var ({{ and }} for literal braces; unknown names are left as they are). "
                "Interrupt the kernel to abort: the partial reply is kept, marked aborted."
            ),
        )
        parser.add_argument("--quiet", action="store_true", help="do not stream the reply")
        return parser

    def _prompt(self, line: str, cell: str) -> Any:
        args = self.cell_parser.parse_args(_split(line))
        text = interpolate(cell, self.shell.user_ns if self.shell is not None else {}).strip()
        if not text:
            raise UsageError("%%pi: the cell is empty")
        session = self.current()
        printer = None
        if not args.quiet:
            # In a kernel the whole streamed run is one display output, updated in place.
            out = DisplayStream(StreamPrinter.flush_interval) if _in_kernel(self.shell) else None
            printer = StreamPrinter(self.show_tools, out=out)
        try:
            result = session.prompt(text, on_event=printer)
        except KeyboardInterrupt:
            # Interrupted outside the model call (e.g. during a compaction): nothing partial.
            print("\n[interrupted: the session is ready for the next prompt]")
            return None
        finally:
            if printer is not None:
                printer.close()
        if result.aborted:
            print("\n[interrupted: the partial reply is recorded as aborted; the session is ready]")
        elif self.token_bar and not args.quiet:
            self._print_token_bar(session)
        if result.error:
            raise UsageError(_one_line(result.error))
        return None

    def _print_token_bar(self, session: Any) -> None:
        print(text_token_bar(session.context_tokens().tokens, session.window, session.reserve))

    def _command(self, line: str) -> Any:
        argv = _split(line) or ["status"]
        args = self.parser.parse_args(argv)
        return args.run(self, args)

    # --- subcommands ------------------------------------------------------------------------

    def _build_parser(self) -> _Parser:
        parser = _Parser(
            prog="%pi",
            description="Inspect and steer the current pi_nb session (%%pi sends prompts). "
            "Each subcommand has --help.",
        )
        sub = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="SUBCOMMAND")

        def add(name: str, run: Any, help_text: str) -> _Parser:
            # argparse %-formats help strings (not descriptions)
            p = sub.add_parser(name, help=help_text.replace("%", "%%"), description=help_text)
            p.set_defaults(run=run)
            return p

        add("status", PiMagics.cmd_status, "one line: session, model, context tokens")
        p = add("new", PiMagics.cmd_new, "start a new session (file created on first message)")
        p.add_argument("path", nargs="?", help="session file (default: PiMagics.session_dir)")
        p.add_argument("--cwd", help="working folder for the agent's tools")
        p = add("open", PiMagics.cmd_open, "open any Pi session file and continue it")
        p.add_argument("path", help="a session file, or N: row N of the last %%pi sessions")
        p.add_argument(
            "--follow",
            action="store_true",
            help="show the explorer and keep re-reading the file as another process (Pi in "
            "a terminal) writes it",
        )
        p.add_argument(
            "--interval", type=float, metavar="SECONDS", help="with --follow: seconds between reads (default 1)"
        )
        p = add("sessions", PiMagics.cmd_sessions, "list session files, newest first")
        p.add_argument("dir", nargs="?", help="folder (default: Pi's <agent dir>/sessions)")
        p = add("use", PiMagics.cmd_use, "make a Session held in a notebook variable current")
        p.add_argument("variable")
        add("session", PiMagics.cmd_session, "return the current Session (s = %pi session)")
        p = add("model", PiMagics.cmd_model, "show or set the model and its budget")
        p.add_argument("name", nargs="?", help="litellm model name, e.g. pinb/smollm2")
        p.add_argument("--window", type=int, help="context window W")
        p.add_argument("--reserve", type=int, help="reserve R (compaction above W − R)")
        p.add_argument("--keep", type=int, help="keepRecentTokens kept verbatim by a compaction")
        p.add_argument("--max-tokens", type=int, dest="max_tokens", help="cap on each reply")
        p.add_argument(
            "--script",
            metavar="VARIABLE",
            help="notebook variable holding a pinb/scripted script (a list of turns)",
        )
        p = add("context", PiMagics.cmd_context, "the projection as the model will see it")
        p.add_argument("--leaf", help="project from another entry (id or label)")
        add("tree", PiMagics.cmd_tree, "the session tree (text)")
        p = add("branch", PiMagics.cmd_branch, "move the leaf to an entry id or label")
        p.add_argument("target")
        p.add_argument("--summarize", action="store_true", help="summarize the abandoned branch")
        p.add_argument("--focus", help="what the branch summary should focus on")
        p.add_argument("--label", help="label the entry the summary is attached to")
        p = add("label", PiMagics.cmd_label, "label an entry (no text clears the label)")
        p.add_argument("id", help="entry id or label")
        p.add_argument("text", nargs="*")
        p = add("edit", PiMagics.cmd_edit, "context edit: omit or replace one message")
        p.add_argument("id", help="entry id or label")
        group = p.add_mutually_exclusive_group(required=True)
        group.add_argument("--omit", action="store_true", help="hide it from the model")
        group.add_argument("--replace", metavar="TEXT", help="the model sees TEXT instead")
        p = add("compact", PiMagics.cmd_compact, "compact now (or --preview without changes)")
        p.add_argument("focus", nargs="*", help="extra instructions for the summary")
        p.add_argument("--preview", action="store_true", help="show the plan and its diff only")
        p = add("pin", PiMagics.cmd_pin, "keep a fact or a message through every compaction")
        p.add_argument("fact", nargs="*", help="a fact to keep (no fact and no --entry: list pins)")
        p.add_argument("--entry", metavar="ID", help="pin this message (id or label) verbatim")
        p = add("unpin", PiMagics.cmd_unpin, "remove a pin (its id, a pinned entry id or the fact)")
        p.add_argument("pin", nargs="+")
        add("tokens", PiMagics.cmd_tokens, "context tokens: estimated, reported, tiktoken")
        add("usage", PiMagics.cmd_usage, "chart of context tokens per turn against W and W − R")
        p = add("diff", PiMagics.cmd_diff, "projection before/after the latest compaction")
        p.add_argument("--leaf", help="the latest compaction on another branch (id or label)")
        add("widget", PiMagics.cmd_widget, "the interactive session explorer")
        return parser

    def cmd_status(self, args: argparse.Namespace) -> None:
        if self.session is None:
            print(f"pi_nb: no session yet · model {self.model or default_model()}")
            return
        s = self.session
        tokens = s.context_tokens().tokens
        print(
            f"pi_nb: session {s.path or '(in memory)'} · model {s.model} · "
            f"context ~{tokens:,}/{s.window:,} tokens (W − R = {s.threshold:,})"
        )

    def _replace_session(self, new: Any) -> None:
        # Release the previous file's writer lock so another kernel can continue it.
        old, self.session = self.session, new
        if old is not None and old is not new and hasattr(old, "close"):
            old.close()

    def cmd_new(self, args: argparse.Namespace) -> None:
        self._replace_session(self._new_session(args.path, args.cwd))
        self.cmd_status(args)

    def cmd_sessions(self, args: argparse.Namespace) -> None:
        """Show the session browser; its row numbers are what ``%pi open N`` takes."""
        from ..render import render_sessions
        from ..session.listing import scan_session_files, sessions_frame, sessions_root

        try:
            rows = scan_session_files(args.dir)
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise UsageError(f"%pi sessions: {exc}") from None
        self.listing = rows
        if not rows:
            print(f"no session files in {args.dir or sessions_root()}")
            return
        frame = sessions_frame(rows).drop(columns=["path", "id"])
        _display_text_html(render_sessions(rows), frame.to_html())
        bad = sum(1 for r in rows if not r.readable)
        note = f"; {bad} could not be read (see error)" if bad else ""
        print(f"{len(rows)} file(s){note} · %pi open N opens row N")

    def _listed_path(self, text: str) -> str:
        """``%pi open N``: the path of row N of the last listing; any other text is a path
        (a file named like a number only opens while there is no listing)."""
        if not text.isdigit():
            return text
        if self.listing is None:
            if os.path.exists(text):
                return text
            raise UsageError(f"%pi open {text}: no listing yet (run %pi sessions first)")
        number = int(text)
        if not 1 <= number <= len(self.listing):
            raise UsageError(
                f"%pi open {text}: the last listing has rows 1 to {len(self.listing)}"
            )
        row = self.listing[number - 1]
        if not row.readable:
            raise UsageError(f"%pi open {text}: {row.file} cannot be opened ({row.error})")
        return row.path

    def cmd_open(self, args: argparse.Namespace) -> None:
        from ..agent import Session

        path = os.path.abspath(os.path.expanduser(self._listed_path(args.path)))
        if _is_bundled_sample(path):
            raise UsageError(
                "%pi open: that is a bundled sample (read-only); open a copy, e.g. "
                "shutil.copy(sample_session_path(), 'my_session.jsonl')"
            )
        follow: float = 0.0
        if args.follow or args.interval is not None:
            from .widget import _follow_interval  # checked before the session changes

            follow = _follow_interval(True if args.interval is None else args.interval)
        self._replace_session(Session.open(path, lock="fail", **self._options()))
        report = getattr(self.session.tree, "report", None)
        for skipped in getattr(report, "skipped", None) or []:
            print(f"warning: skipped {skipped}")
        self.cmd_status(args)
        if follow:
            from IPython.display import display

            from .widget import SessionExplorer

            display(SessionExplorer(self.session, follow=follow))

    def cmd_use(self, args: argparse.Namespace) -> None:
        namespace = self.shell.user_ns if self.shell is not None else {}
        if args.variable not in namespace:
            raise UsageError(f"%pi use: no notebook variable {args.variable!r}")
        value = namespace[args.variable]
        if not (hasattr(value, "prompt") and hasattr(value, "tree")):
            raise UsageError(
                f"%pi use: {args.variable} is a {type(value).__name__}, not a pi_nb Session"
            )
        self.session = value
        self.cmd_status(args)

    def cmd_session(self, args: argparse.Namespace) -> Any:
        return self._require()

    def cmd_model(self, args: argparse.Namespace) -> None:
        for name in ("window", "reserve", "keep", "max_tokens"):
            value = getattr(args, name)
            if value is not None and _setting_error(name, value):
                flag = name.replace("_", "-")
                raise UsageError(f"%pi model: --{flag} must be ≥ 0")
        if args.script is not None:
            namespace = self.shell.user_ns if self.shell is not None else {}
            if args.script not in namespace:
                raise UsageError(f"%pi model: no notebook variable {args.script!r}")
            turns = namespace[args.script]
            if not isinstance(turns, (list, tuple)):
                raise UsageError(
                    f"%pi model: {args.script} must be a list of script turns, "
                    f"not a {type(turns).__name__}"
                )
            kwargs = {**self.llm_kwargs, "script": list(turns)}
            error = _setting_error("llm_kwargs", kwargs)
            if error:
                raise UsageError(f"%pi model: {args.script}: {error}")
            self.llm_kwargs = kwargs
        if args.name:
            self.model = args.name
        for name in ("window", "reserve", "keep", "max_tokens"):
            value = getattr(args, name)
            if value is not None:
                setattr(self, name, value)
        model = self.session.model if self.session is not None else self.model or default_model()
        parts = [f"model {model}"]
        if self.session is not None:
            s = self.session
            parts += [f"W {s.window:,}", f"R {s.reserve:,}", f"keep {s.keep:,}"]
            if s.max_tokens:
                parts.append(f"max tokens {s.max_tokens:,}")
        else:
            for name in ("window", "reserve", "keep", "max_tokens"):
                value = getattr(self, name)
                if value is not None:
                    parts.append(f"{name.replace('_', ' ')} {value:,}")
        if "script" in self.llm_kwargs:
            parts.append(f"script of {len(self.llm_kwargs['script'])} turn(s)")
        print("pi_nb: " + " · ".join(parts))

    def cmd_context(self, args: argparse.Namespace) -> None:
        from ..render import render_context
        from .html import projection_html

        session = self._require()
        leaf = session.resolve(args.leaf) if args.leaf else None
        projection = session.tree.projection(leaf) if leaf else session.context()
        _display_text_html(render_context(session.tree, leaf), projection_html(projection))

    def cmd_tree(self, args: argparse.Namespace) -> None:
        from ..render import render_tree

        print(render_tree(self._require().tree, max_lines=400))

    def cmd_branch(self, args: argparse.Namespace) -> None:
        session = self._require()
        result = session.navigate(
            args.target, summarize=args.summarize, focus=args.focus, label=args.label
        )
        if getattr(result, "cancelled", False):
            print("navigation cancelled (by a hook); the leaf did not move")
            return
        note = ""
        summary = getattr(result, "summary_entry", None)
        if summary is not None:
            note = f" (branch summary {summary['id']} appended)"
        print(f"leaf is now {session.tree.leaf_id}{note}")
        from ..compaction.compact import result_warnings

        for warning in result_warnings(result):
            print(f"⚠ {warning}")
        editor = getattr(result, "editor_text", None)
        if editor:
            print(f"the target was a user message; its text, to edit and resend:\n{editor}")

    def cmd_label(self, args: argparse.Namespace) -> None:
        session = self._require()
        text = " ".join(args.text) or None
        entry = session.label(args.id, text)
        target = entry.get("targetId", args.id) if isinstance(entry, Mapping) else args.id
        print(f"label {text!r} set on {target}" if text else f"label cleared on {target}")

    def cmd_edit(self, args: argparse.Namespace) -> None:
        session = self._require()
        entry = session.edit(args.id, omit=args.omit, replace=args.replace)
        what = "omitted from" if args.omit else "replaced in"
        print(
            f"{entry['targetId']} {what} the context (edit {entry['id']}); "
            "the record itself is unchanged"
        )

    def cmd_compact(self, args: argparse.Namespace) -> None:
        from IPython.display import display

        session = self._require()
        focus = " ".join(args.focus) or None
        result = session.compact(focus=focus, preview=args.preview)
        display(result)  # its text and HTML forms lead with the warnings (⚠ …)
        note = session.above_threshold_note(getattr(result, "tokens_after", None))
        if note and not args.preview:
            print(f"⚠ {note} (%pi model --keep N --reserve N)")
        if args.preview and getattr(result, "projection", None) is not None:
            from .diff import diff_projection

            display(diff_projection(session.context(), result.projection))

    def cmd_pin(self, args: argparse.Namespace) -> None:
        from ..policies.pins import enable_pins, pin, pins

        session = self._require()
        fact = " ".join(args.fact) or None
        if fact is None and args.entry is None:
            active = pins(session)
            print("\n".join(str(p) for p in active) if active else "no pins on this branch")
            return
        if fact is not None and args.entry is not None:
            raise UsageError("%pi pin: give a fact or --entry ID, not both")
        enable_pins(session)  # the session_before_compact policy that honours pins
        made = pin(session, text=fact, entry_id=args.entry)
        print(f"pinned {made}: every later compaction keeps it")

    def cmd_unpin(self, args: argparse.Namespace) -> None:
        from ..policies.pins import unpin

        removed = unpin(self._require(), " ".join(args.pin))
        print(f"unpinned {removed}")

    def cmd_tokens(self, args: argparse.Namespace) -> None:
        from ..tokens import token_figures

        session = self._require()
        call = session.next_call_tokens()  # the basis of the bar, %pi status and the explorer
        estimate = session.context_tokens()
        figures = token_figures(session.context().messages, estimate, session.model)
        threshold = session.threshold
        print(f"context tokens   : {call.label()} (Pi's rule)")
        print(f"messages chars/4 : {figures['heuristicTokens']:,} (estimated, messages only)")
        print(
            f"messages tiktoken: {figures['tiktokenTokens']:,} "
            f"({figures['tiktokenEncoding']}, {figures['tiktokenKind']}, messages only)"
        )
        print(
            f"window W {session.window:,} · reserve R {session.reserve:,} · "
            f"compacts above W − R = {threshold:,} · keeps ~{session.keep:,} recent"
        )
        print(text_token_bar(call.tokens, session.window, session.reserve))

    def cmd_usage(self, args: argparse.Namespace) -> None:
        from IPython.display import display

        from .plots import plot_usage

        session = self._require()
        ax = plot_usage(session.tree, window=session.window, reserve=session.reserve)
        display(ax.figure)
        import matplotlib.pyplot as plt

        plt.close(ax.figure)

    def cmd_diff(self, args: argparse.Namespace) -> None:
        from IPython.display import display

        from .diff import latest_compaction_diff

        session = self._require()
        leaf = session.resolve(args.leaf) if args.leaf else None
        try:
            diff = latest_compaction_diff(session.tree, leaf)
        except ValueError as exc:
            raise UsageError(
                f"%pi diff: {exc} (%pi compact makes one; --leaf ID looks on another branch)"
            ) from None
        display(diff)

    def cmd_widget(self, args: argparse.Namespace) -> None:
        from IPython.display import display

        from .widget import SessionExplorer

        display(SessionExplorer(self._require()))


def _setting_error(name: str, value: Any) -> str | None:
    """Why a value of setting ``name`` is refused (one line), or None when it is valid —
    the rules shared by ``%config PiMagics.…`` and ``%pi model``."""
    if name in ("window", "reserve", "keep", "max_tokens"):
        return f"must be ≥ 0, not {value}" if value is not None and value < 0 else None
    if name == "llm_kwargs":
        from ..llm import check_call_options
        from ..models.scripted import Script, check_turns

        try:
            check_call_options(value)
            script = value.get("script")
            if isinstance(script, (list, tuple)):
                check_turns(script)
            elif script is not None and not isinstance(script, Script):
                return f"script must be a list of turns, not a {type(script).__name__}"
        except ValueError as exc:
            return str(exc)
    return None


def _split(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError as exc:  # an unclosed quote
        raise UsageError(f"%pi: cannot parse the line ({exc})") from None


def _error_line(exc: BaseException) -> str:
    """One line for an error from the API: the message; the type when it says more."""
    from ..redact import redact

    text = redact(_one_line(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc))
    plain = (ValueError, KeyError, FileNotFoundError, RuntimeError, LookupError)
    if type(exc).__module__.startswith("pi_nb") or type(exc) in plain:
        return text
    return f"{type(exc).__name__}: {text}"


def _is_bundled_sample(path: str) -> bool:
    from ..samples import is_sample_path

    return is_sample_path(path)


def _new_file_name() -> str:
    from ..entries import new_session_id, now_iso

    return f"{now_iso().replace(':', '-').replace('.', '-')}_{new_session_id()}.jsonl"


def _magics(shell: Any = None) -> PiMagics | None:
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    if shell is None:
        return None
    found = shell.magics_manager.registry.get("PiMagics")
    return found if isinstance(found, PiMagics) else None


def current_session(shell: Any = None) -> Any:
    """The Session the %pi / %%pi magics are driving (None before the first one)."""
    magics = _magics(shell)
    return magics.session if magics is not None else None


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics and say, in one line, which session and model are active."""
    # A reload replaces the magics: the old instance must stop receiving %config (it would
    # validate and report every setting a second time).
    configurables = getattr(ipython, "configurables", None)
    if isinstance(configurables, list):
        configurables[:] = [c for c in configurables if type(c).__name__ != PiMagics.__name__]
    magics = PiMagics(shell=ipython)
    ipython.register_magics(magics)
    model = magics.model or default_model()
    print(f"pi_nb loaded · no session yet (%%pi starts one) · model {model} · %pi --help")
    notice = None if magics.model else default_model_notice()
    if notice:
        print(notice)


def unload_ipython_extension(ipython: Any) -> None:
    """Nothing to tear down: the magics hold no external resources."""
