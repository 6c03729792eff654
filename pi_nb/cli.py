"""`pi-nb`: inspect and drive Pi sessions from a terminal, over the same API as the notebook."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from .session.jsonl import SessionError, SessionLoadWarning


class CliError(Exception):
    """A user mistake: printed as one line, exit status 2."""


def _open(path: str, leaf: str | None = None):
    from .session.tree import SessionTree

    tree = SessionTree.open(path)
    if leaf is not None:
        if leaf not in tree:
            raise CliError(f"{path}: no entry with id {leaf!r}")
        tree.branch(leaf)
    return tree


def cmd_context(args: argparse.Namespace) -> int:
    """The projection as the model will see it (Pi's buildSessionContext)."""
    from .render import render_context

    tree = _open(args.file, args.leaf)
    projection = tree.projection()
    if args.json:
        out = {
            "leafId": tree.leaf_id,
            "model": projection.model,
            "thinkingLevel": projection.thinking_level,
            "messages": projection.messages,
            "tokens": tree.context_tokens().to_dict(),
        }
        _print_json(out)
    else:
        print(render_context(tree))
        t = tree.context_tokens()
        print(f"-- {len(projection.messages)} messages, ~{t.tokens} tokens (estimated)")
    return 0


def cmd_tree(args: argparse.Namespace) -> int:
    """The session tree, one line per entry; * = current path, @ = leaf."""
    from .render import render_tree

    tree = _open(args.file, args.leaf)
    print(render_tree(tree, max_lines=args.max_lines))
    return 0


def cmd_tokens(args: argparse.Namespace) -> int:
    """Token figures for the context: the next model call's (one basis with the magics and
    the explorer: messages + system prompt + tool declarations), chars/4 and tiktoken."""
    from .agent.session import next_call_tokens
    from .tokens import token_figures

    tree = _open(args.file, args.leaf)
    estimate = tree.context_tokens()
    figures = token_figures(tree.projection().messages, estimate, args.model)
    # as `pi-nb prompt FILE` would send it (that model's default system prompt and tools)
    call = next_call_tokens(tree, args.model)
    figures["nextCallTokens"] = call.tokens
    figures["nextCallParts"] = dict(call.parts())
    figures["nextCallKind"] = "reported" if call.reported else "estimated"
    if args.json:
        _print_json(figures)
    else:
        encoding = figures["tiktokenEncoding"]
        print(f"messages in context : {figures['messages']}")
        print(f"context tokens      : {call.label()}")
        print(f"chars/4 heuristic   : {figures['heuristicTokens']} (estimated, messages only)")
        print(
            f"tiktoken {encoding:<11}: {figures['tiktokenTokens']} "
            f"({figures['tiktokenKind']} for {args.model or 'gpt-4o'}, messages only)"
        )
    return 0


def cmd_cut(args: argparse.Namespace) -> int:
    """Where a compaction would cut now (Pi 1.3's prepareCompaction), without a model call."""
    from .compaction.prepare import planned_cut

    tree = _open(args.file, args.leaf)
    result = planned_cut(tree, keep=args.keep, reserve=args.reserve)
    if args.json:
        _print_json(result)
    elif result.get("nothingToCompact"):
        print("nothing to compact")
    else:
        for key, value in result.items():
            print(f"{key:<20}: {value}")
    return 0


def _refuse_sample(path: str, command: str) -> None:
    """Writing commands never append to a bundled sample (it is part of the package)."""
    from .samples import is_sample_path

    if is_sample_path(path):
        raise CliError(
            f"{path} is a bundled sample (read-only); copy it first, e.g. "
            f"cp {path} my_session.jsonl && pi-nb {command} my_session.jsonl …"
        )


def cmd_prompt(args: argparse.Namespace) -> int:
    """Send one user prompt through the agent (file created if needed); stream the reply."""
    from .agent.cli import run_prompt_cli

    _refuse_sample(args.file, "prompt")
    return run_prompt_cli(args.file, args.text, no_tools=args.no_tools, **_options(args, _AGENT))


def cmd_compact(args: argparse.Namespace) -> int:
    """Compact the session now (or --preview: show the cut and summary, change nothing)."""
    from .agent.cli import compact_cli

    if not args.preview:
        _refuse_sample(args.file, "compact")
    return compact_cli(args.file, preview=args.preview, focus=args.focus, **_options(args, _AGENT))


#: The options a command passes on to its function under the name they are parsed with:
#: an agent command's (prompt, compact) model, endpoint and context budget (_add_budget) …
_AGENT = ("model", "api_base", "window", "reserve", "keep")
#: … and a study's (compare; its --keep, --reserve and --judge are renamed on the way).
_STUDY = (
    "cache_dir", "jobs", "price_model", "judge_grader", "at", "replay", "api_base", "window",
    "dry_run",
)


def _options(args: argparse.Namespace, names: Sequence[str]) -> dict[str, Any]:
    """``{name: args.name}`` for ``names``: the options passed on unchanged."""
    return {name: getattr(args, name) for name in names}


def cmd_import(args: argparse.Namespace) -> int:
    """Import a Pi / Claude Code / Codex / OpenAI-messages transcript as a Pi session file."""
    from .research.cli import import_command

    return import_command(args.kind, args.src, args.out, overwrite=args.overwrite, costs=args.costs)


def cmd_compare(args: argparse.Namespace) -> int:
    """Run compaction strategies side by side on session files and score them."""
    from .research.cli import compare_command

    return compare_command(
        args.files,
        args.strategies,
        args.model,
        "json" if args.json else "csv" if args.csv else "table",
        keep_recent_tokens=args.keep,
        reserve_tokens=args.reserve,
        judge_model=args.judge,
        **_options(args, _STUDY),
    )


def cmd_sessions(args: argparse.Namespace) -> int:
    """List Pi's session files, newest activity first; unreadable ones with the reason."""
    from .session.listing import scan_session_files, sessions_root

    try:
        rows = scan_session_files(args.dir)
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise CliError(str(exc)) from None
    if args.json:
        _print_json([_session_row_dict(r) for r in rows])
        return 0
    if not rows:
        print(f"no session files in {args.dir or sessions_root()}")
        return 0
    from .render import render_sessions

    print(render_sessions(rows))
    bad = sum(1 for r in rows if not r.readable)
    if bad:
        print(f"pi-nb: {bad} file(s) could not be read (see the error column)", file=sys.stderr)
    return 0


def _session_row_dict(row: Any) -> dict[str, Any]:
    from dataclasses import asdict

    from .render import utc_text

    out = asdict(row)
    out["lastActivity"] = utc_text(out["last_activity_ms"], "%Y-%m-%dT%H:%M:%S.%f")
    if out["lastActivity"]:
        out["lastActivity"] = out["lastActivity"][:-3] + "Z"
    return out


def cmd_demo(args: argparse.Namespace) -> int:
    """Open a session file (a bundled sample by default) and print tree, context and tokens."""
    from .samples import sample_session_path

    path = args.file or sample_session_path()
    print(f"== session {path}")
    for fn, ns in (
        (cmd_tree, argparse.Namespace(file=path, leaf=None, max_lines=60)),
        (cmd_context, argparse.Namespace(file=path, leaf=None, json=False)),
        (cmd_tokens, argparse.Namespace(file=path, leaf=None, model=None, json=False)),
    ):
        print(f"\n== {fn.__doc__.splitlines()[0] if fn.__doc__ else fn.__name__}")
        fn(ns)
    return 0


def _print_json(value: Any) -> None:
    from .entries import js_numbers

    # Numbers as JavaScript prints them (a float 0.0 read from a file is 0), like Pi.
    text = json.dumps(js_numbers(value), ensure_ascii=False)
    # A lone surrogate (an emoji cut in half) cannot be encoded: escape it like JavaScript.
    data = text.encode("utf-8", "backslashreplace") if _has_surrogate(text) else text.encode()
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.flush()


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be ≥ 0, got {value}")
    return value


def _add_api_base(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--api-base",
        metavar="URL",
        help="an OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio), e.g. "
        "http://127.0.0.1:8080/v1; a bare --model NAME means openai/NAME; the key is "
        "OPENAI_API_KEY when set",
    )


def _add_budget(p: argparse.ArgumentParser, *, reserve: str, keep: str) -> None:
    """--window / --reserve / --keep of an agent command (W, R, keepRecentTokens; whole
    numbers ≥ 0), with the command's own help for R and keep."""
    p.add_argument("--window", type=_non_negative, help="context window W")
    p.add_argument("--reserve", type=_non_negative, help=reserve)
    p.add_argument("--keep", type=_non_negative, help=keep)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pi-nb", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, fn: Callable[[argparse.Namespace], int], help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(func=fn)
        return p

    p = add("context", cmd_context, "print the model-visible context of a session")
    p.add_argument("file")
    p.add_argument("--leaf", help="entry id to project from (default: the file's leaf)")
    p.add_argument("--json", action="store_true", help="one JSON object, as Pi builds it")

    p = add("tree", cmd_tree, "print the session tree")
    p.add_argument("file")
    p.add_argument("--leaf")
    p.add_argument("--max-lines", type=int, default=None)

    p = add("tokens", cmd_tokens, "token figures for the context")
    p.add_argument("file")
    p.add_argument("--leaf")
    p.add_argument("--model", default=None, help="litellm model name for the tiktoken count")
    p.add_argument("--json", action="store_true")

    p = add("cut", cmd_cut, "where a compaction would cut (Pi's prepareCompaction)")
    p.add_argument("file")
    p.add_argument("--leaf")
    p.add_argument("--keep", type=_non_negative, help="keepRecentTokens (default 20000)")
    p.add_argument("--reserve", type=_non_negative, help="reserveTokens (default 16384)")
    p.add_argument("--json", action="store_true")

    p = add("prompt", cmd_prompt, "run one user prompt through the agent on a session file")
    p.add_argument("file")
    p.add_argument("text")
    p.add_argument(
        "--model",
        help="litellm model name (default: $PI_NB_MODEL, else pinb/smollm2 with the local "
        "extra, else pinb/scripted)",
    )
    _add_budget(p, reserve="reserve R", keep="keepRecentTokens")
    p.add_argument("--no-tools", action="store_true", help="no read/write/edit/bash tools")
    _add_api_base(p)

    p = add("compact", cmd_compact, "compact a session now, or --preview the compaction")
    p.add_argument("file")
    p.add_argument("--preview", action="store_true")
    p.add_argument("--model")
    p.add_argument("--focus", help="extra instructions for the summary")
    _add_api_base(p)
    _add_budget(p, reserve="reserveTokens R", keep="keepRecentTokens kept verbatim")

    p = add("import", cmd_import, "convert a transcript into a Pi session file")
    p.add_argument("kind", choices=["pi", "claude-code", "codex", "openai", "auto"])
    p.add_argument("src")
    p.add_argument("-o", "--out", required=True, help="the session file to write")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--costs", action="store_true", help="price usage with litellm's table")

    p = add("compare", cmd_compare, "compare compaction strategies on session files")
    p.add_argument("files", nargs="+")
    p.add_argument(
        "--strategies",
        default=None,
        help="comma-separated specs like 'pi,mask:5' (';' between specs that contain commas); "
        "default: every built-in strategy",
    )
    p.add_argument("--model", default="pinb/scripted")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true")
    out.add_argument("--csv", action="store_true")
    p.add_argument("--keep", type=_non_negative, help="keepRecentTokens")
    p.add_argument("--reserve", type=_non_negative, help="reserveTokens")
    p.add_argument("--cache-dir", help="cache results here (reruns make no model calls)")
    p.add_argument("--jobs", type=_non_negative, default=1, help="parallel workers")
    p.add_argument("--price-model", help="price the calls as this model (litellm table)")
    p.add_argument(
        "--judge", metavar="MODEL", help="an LLM judge answers and grades the probes (0-5)"
    )
    p.add_argument(
        "--judge-grader",
        choices=("judge", "match"),
        default="judge",
        help="grade the judge's answers by the judge (default) or by string match",
    )
    p.add_argument(
        "--at", help="compaction point: entry id or branch index (default: the last compaction)"
    )
    p.add_argument(
        "--replay", action="store_true", help="ask for the next step with full / compacted context"
    )
    p.add_argument("--window", type=_non_negative, help="the summarizer's context window W")
    _add_api_base(p)
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the planned model calls, tokens and estimated cost; call nothing",
    )

    p = add("sessions", cmd_sessions, "list session files, newest first (Pi's folder by default)")
    p.add_argument(
        "dir", nargs="?", help="folder of session files (default: <agent dir>/sessions, "
        "PI_CODING_AGENT_DIR respected; subfolders one level deep are listed too)"
    )
    p.add_argument("--json", action="store_true", help="one JSON list, a dict per file")

    p = add("demo", cmd_demo, "print tree, context and tokens of a session (sample by default)")
    p.add_argument("file", nargs="?")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `pi-nb` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", SessionLoadWarning)
            status = args.func(args)
        for warning in caught:
            print(f"pi-nb: warning: {warning.message}", file=sys.stderr)
        return status
    except (CliError, SessionError, FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        from .redact import redact

        print(f"pi-nb: error: {redact(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pi-nb: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


def run() -> None:
    """The ``pi-nb`` console script and ``python -m pi_nb``: :func:`main`, then exit.

    Before exiting, every object is moved out of the garbage collector's reach
    (``gc.freeze``): the interpreter's teardown would otherwise traverse the thousands of
    classes litellm imports, seconds after the reply was printed (2.7 s measured on
    ``import litellm`` alone). atexit handlers and finalizers still run, so files are closed
    and locks released as usual.
    """
    status = main()
    import gc

    gc.freeze()
    sys.exit(status)


if __name__ == "__main__":
    run()
