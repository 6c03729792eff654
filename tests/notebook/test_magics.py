"""The %pi / %%pi magics in a real IPython InteractiveShell, on the scripted model.

Every subcommand is run through the shell's magic machinery (``run_line_magic`` /
``run_cell_magic``) the way a notebook cell runs it; user mistakes must come back as one-line
``UsageError``s, never as a traceback from inside pi_nb.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.testing import globalipapp  # its get_ipython, looked up at call time
from pinb_testkit import wordy_summary

import pi_nb
from pi_nb.notebook import magics as magics_module
from pi_nb.notebook.magics import PiMagics, current_session, interpolate, text_token_bar
from pi_nb.samples import sample_session_path

SUBCOMMANDS = (
    "status",
    "new",
    "open",
    "sessions",
    "use",
    "session",
    "model",
    "context",
    "tree",
    "branch",
    "label",
    "edit",
    "compact",
    "pin",
    "unpin",
    "tokens",
    "usage",
    "diff",
    "widget",
)
HEAVY = ("litellm", "pandas", "matplotlib", "anywidget", "ipywidgets", "networkx", "llama_cpp")
REPLIES = [
    "The first scripted reply, long enough to arrive in several streamed pieces.",
    "The second scripted reply.",
    "The third scripted reply.",
    "The fourth scripted reply.",
]


@pytest.fixture(scope="module")
def shell() -> Any:
    return globalipapp.get_ipython()


@pytest.fixture
def ip(shell: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Any:
    """A shell with fresh magics on pinb/scripted, sessions written under tmp_path."""
    pi_nb.load_ipython_extension(shell)
    shell.user_ns["turns"] = list(REPLIES)
    shell.run_line_magic("config", 'PiMagics.model = "pinb/scripted"')
    shell.run_line_magic("config", f"PiMagics.session_dir = {str(tmp_path / 'sessions')!r}")
    shell.run_line_magic("config", "PiMagics.tools = False")
    shell.run_line_magic("pi", "model --script turns")
    capsys.readouterr()
    yield shell
    magics = _magics(shell)
    if magics.session is not None:
        magics.session.tree.close()
    for name in ("turns", "topic", "s"):
        shell.user_ns.pop(name, None)


def _magics(shell: Any) -> PiMagics:
    found = shell.magics_manager.registry["PiMagics"]
    assert isinstance(found, PiMagics)
    return found


def _usage_error(ip: Any, line: str) -> str:
    with pytest.raises(UsageError) as info:
        ip.run_line_magic("pi", line)
    message = str(info.value)
    assert "\n" not in message.strip(), f"{line!r} gave a multi-line error: {message!r}"
    assert "Traceback" not in message
    return message


def _sample_copy(tmp_path: Path) -> str:
    path = tmp_path / "refactor_session.jsonl"
    shutil.copy(sample_session_path(), path)
    return str(path)


def _chat(ip: Any, n: int) -> None:
    for i in range(n):
        ip.run_cell_magic("pi", "--quiet", f"Question {i}: " + "please explain this. " * 12)


# --- loading ----------------------------------------------------------------------------------


def test_load_is_fast_light_and_prints_one_line(tmp_path) -> None:
    """≤ 0.3 s of CPU for %load_ext (best of three fresh interpreters, bytecode cached as in
    an installed package; CPU time, so a busy machine does not count); no heavy import."""
    code = textwrap.dedent(
        """
        import io, json, sys, time
        from contextlib import redirect_stdout
        from IPython.core.interactiveshell import InteractiveShell
        ip = InteractiveShell.instance()
        out = io.StringIO()
        start = time.process_time()
        with redirect_stdout(out):
            ip.run_line_magic("load_ext", "pi_nb")
        elapsed = time.process_time() - start
        print(json.dumps({"elapsed": elapsed, "printed": out.getvalue(),
                          "modules": sorted(sys.modules)}))
        """
    )
    # `import pi_nb` imports the whole library (not the heavy libraries), so compiling it
    # is most of a cold start; installs have bytecode, so measure with it cached (this
    # environment may set PYTHONDONTWRITEBYTECODE).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path / "pycache")
    subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=120, check=True)
    runs = []
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, "-c", code],
            env=env, capture_output=True, text=True, timeout=120, check=True,
        )
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        if runs[-1]["elapsed"] <= 0.3:
            break
    best = min(runs, key=lambda r: r["elapsed"])
    assert best["elapsed"] <= 0.3, [r["elapsed"] for r in runs]
    lines = best["printed"].strip().splitlines()
    assert len(lines) == 1
    assert "no session yet" in lines[0] and "model pinb/" in lines[0]
    loaded = set(best["modules"])
    assert not [m for m in HEAVY if m in loaded]


def test_unload_and_current_session(ip: Any) -> None:
    assert current_session(ip) is None
    ip.run_cell_magic("pi", "--quiet", "hello")
    assert current_session(ip) is _magics(ip).session
    pi_nb.unload_ipython_extension(ip)  # holds nothing: a no-op


# --- %%pi -------------------------------------------------------------------------------------


def test_cell_streams_the_reply_in_pieces(
    ip: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[str] = []
    original = magics_module.StreamPrinter._write

    def record(self: Any, text: str, flush: bool = False) -> None:
        writes.append(text)
        original(self, text, flush)

    monkeypatch.setattr(magics_module.StreamPrinter, "_write", record)
    ip.run_cell_magic("pi", "", "Tell me something.")
    out = capsys.readouterr().out
    assert REPLIES[0] in out
    pieces = [w for w in writes if w.strip()]
    assert len(pieces) > 2, "the reply arrived in one piece, not streamed"
    assert "".join(writes).strip() == REPLIES[0]
    assert "context ▕" in out and "W − R" in out  # the token bar after the reply
    session = current_session(ip)
    assert [e["message"]["role"] for e in session.tree.entries] == ["user", "assistant"]
    assert session.path and session.path.startswith(str(Path(session.path).parent))
    assert os.path.dirname(session.path).endswith("sessions")


def test_cell_quiet_and_token_bar_setting(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell_magic("pi", "--quiet", "one")
    assert capsys.readouterr().out == ""
    ip.run_line_magic("config", "PiMagics.token_bar = False")
    ip.run_cell_magic("pi", "", "two")
    out = capsys.readouterr().out
    assert REPLIES[1] in out and "context ▕" not in out


def test_cell_interpolates_notebook_variables(ip: Any) -> None:
    ip.user_ns["topic"] = "compaction"
    ip.run_cell_magic(
        "pi", "--quiet", 'Explain {topic} and {topic!r}; keep {unknown}, {{x}}, {"json": 1} and {'
    )
    text = current_session(ip).tree.entries[0]["message"]["content"]
    text = text if isinstance(text, str) else text[0]["text"]
    assert text == "Explain compaction and 'compaction'; keep {unknown}, {x}, {\"json\": 1} and {"


def test_interpolate_function() -> None:
    ns = {"n": 3, "xs": [10, 20], "d": {"k": "v"}}
    assert interpolate("{n} {xs[1]} {n:>3} {d}", ns) == "3 20   3 {'k': 'v'}"
    assert interpolate("{missing.attr} {n.nope} {}", ns) == "{missing.attr} {n.nope} {}"
    assert interpolate("def f(): return {", ns) == "def f(): return {"
    assert interpolate("{{n}}", ns) == "{n}"


def test_cell_errors_are_usage_errors(ip: Any) -> None:
    with pytest.raises(UsageError, match="empty"):
        ip.run_cell_magic("pi", "", "   \n ")
    with pytest.raises(UsageError, match="unrecognized arguments"):
        ip.run_cell_magic("pi", "--bogus", "hi")


def test_cell_help(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert ip.run_cell_magic("pi", "--help", "ignored") is None
    out = capsys.readouterr().out
    assert "usage: %%pi" in out and "{var}" in out
    assert current_session(ip) is None  # --help sends nothing


def test_keyboard_interrupt_mid_stream_records_an_aborted_reply(
    ip: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while the reply streams: partial reply kept (aborted), next %%pi works."""
    original = magics_module.StreamPrinter.__call__
    fired = []

    def interrupt_once(self: Any, event: dict[str, Any]) -> None:
        original(self, event)
        if event.get("type") == "message_update" and not fired:
            fired.append(event["delta"])
            raise KeyboardInterrupt

    monkeypatch.setattr(magics_module.StreamPrinter, "__call__", interrupt_once)
    ip.run_cell_magic("pi", "", "Start a long answer.")
    out = capsys.readouterr().out
    assert "interrupted" in out and "aborted" in out
    session = current_session(ip)
    reply = session.tree.entries[-1]["message"]
    assert reply["role"] == "assistant" and reply["stopReason"] == "aborted"
    partial = reply["content"][0]["text"]
    assert partial == fired[0] and REPLIES[0].startswith(partial) and partial != REPLIES[0]
    assert not session.is_running

    monkeypatch.setattr(magics_module.StreamPrinter, "__call__", original)
    ip.run_cell_magic("pi", "", "Go on.")
    assert REPLIES[1] in capsys.readouterr().out
    assert session.tree.entries[-1]["message"]["stopReason"] == "stop"


def test_keyboard_interrupt_outside_the_stream(
    ip: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ip.run_cell_magic("pi", "--quiet", "first")
    session = current_session(ip)

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(session, "prompt", interrupted)
    ip.run_cell_magic("pi", "", "second")
    assert "interrupted" in capsys.readouterr().out
    monkeypatch.undo()
    ip.run_cell_magic("pi", "--quiet", "third")
    assert session.tree.entries[-1]["message"]["content"][0]["text"] == REPLIES[1]


def test_model_error_is_one_line(ip: Any) -> None:
    ip.user_ns["turns"] = [{"error": "auth"}]
    ip.run_line_magic("pi", "model --script turns")
    with pytest.raises(UsageError) as info:
        ip.run_cell_magic("pi", "--quiet", "hello")
    assert "\n" not in str(info.value)


# --- %pi subcommands -----------------------------------------------------------------------


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_every_subcommand_has_help(ip: Any, capsys: pytest.CaptureFixture[str], name: str) -> None:
    assert ip.run_line_magic("pi", f"{name} --help") is None
    out = capsys.readouterr().out
    assert f"usage: %pi {name}" in out


def test_top_level_help_lists_every_subcommand(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_line_magic("pi", "--help")
    out = capsys.readouterr().out
    for name in SUBCOMMANDS:
        assert name in out


def test_status_before_and_after(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_line_magic("pi", "")
    assert "no session yet · model pinb/scripted" in capsys.readouterr().out
    ip.run_cell_magic("pi", "--quiet", "hi")
    ip.run_line_magic("pi", "status")
    out = capsys.readouterr().out
    assert "model pinb/scripted" in out and "W − R" in out and "sessions" in out


def test_new_with_path_and_cwd(ip: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mine.jsonl"
    ip.run_line_magic("pi", f"new {path} --cwd {tmp_path}")
    assert "mine.jsonl" in capsys.readouterr().out
    ip.run_cell_magic("pi", "--quiet", "hi")
    assert current_session(ip).path == str(path) and path.exists()
    first = current_session(ip)
    ip.run_line_magic("pi", "new")
    assert current_session(ip) is not first and len(current_session(ip).tree) == 0


def test_model_shows_and_sets_the_budget(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_line_magic("pi", "model --window 4000 --reserve 1000 --keep 300 --max-tokens 50")
    out = capsys.readouterr().out
    assert "window 4,000" in out and "reserve 1,000" in out and "max tokens 50" in out
    ip.run_cell_magic("pi", "--quiet", "hi")
    session = current_session(ip)
    assert (session.window, session.reserve, session.keep, session.max_tokens) == (
        4000,
        1000,
        300,
        50,
    )
    # changing settings applies to the current session at once
    ip.run_line_magic("pi", "model pinb/scripted --window 6000")
    assert session.window == 6000
    ip.run_line_magic("config", "PiMagics.reserve = 1500")
    assert session.reserve == 1500
    ip.run_line_magic("pi", "model")
    assert "W 6,000 · R 1,500 · keep 300" in capsys.readouterr().out


def test_config_traitlets(ip: Any) -> None:
    ip.run_line_magic("config", "PiMagics.window = 5000")
    ip.run_line_magic("config", 'PiMagics.llm_kwargs = {"script": ["from config"]}')
    ip.run_cell_magic("pi", "--quiet", "hi")
    session = current_session(ip)
    assert session.window == 5000
    assert session.tree.entries[-1]["message"]["content"][0]["text"] == "from config"
    assert ip.run_line_magic("config", "PiMagics.window") == 5000


def test_script_option_restarts_the_script(ip: Any) -> None:
    ip.run_cell_magic("pi", "--quiet", "one")
    ip.user_ns["turns"] = ["replacement turn"]
    ip.run_line_magic("pi", "model --script turns")
    ip.run_cell_magic("pi", "--quiet", "two")
    assert (
        current_session(ip).tree.entries[-1]["message"]["content"][0]["text"] == "replacement turn"
    )


def test_use_and_session(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from pi_nb.agent import Session

    ip.user_ns["s"] = Session.in_memory(model="pinb/scripted", script=["in memory"], no_tools=True)
    ip.run_line_magic("pi", "use s")
    assert "(in memory)" in capsys.readouterr().out
    assert ip.run_line_magic("pi", "session") is ip.user_ns["s"]
    ip.run_cell_magic("pi", "--quiet", "hi")
    assert ip.user_ns["s"].tree.entries[-1]["message"]["content"][0]["text"] == "in memory"


def test_open_sample_copy_then_inspect(
    ip: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    path = _sample_copy(tmp_path)
    ip.run_line_magic("pi", f"open {path}")
    assert "refactor_session.jsonl" in capsys.readouterr().out

    ip.run_line_magic("pi", "context")
    out = capsys.readouterr().out
    assert "1a2b3c02" in out and "tok" in out  # the text form of the projection

    ip.run_line_magic("pi", "context --leaf 1a2b3c12")
    assert "1a2b3c12" in capsys.readouterr().out

    ip.run_line_magic("pi", "tree")
    out = capsys.readouterr().out
    assert "1a2b3c13 compaction" in out and "[decimal-done]" in out

    ip.run_line_magic("pi", "diff --leaf 1a2b3c15")
    out = capsys.readouterr().out
    assert "ProjectionDiff" in out and "summarized" in out and "kept" in out

    ip.run_line_magic("pi", "usage")
    assert "Figure" in capsys.readouterr().out

    ip.run_line_magic("pi", "tokens")
    out = capsys.readouterr().out
    assert "context tokens" in out and "tiktoken" in out and "W − R" in out


def test_sessions_then_open_row_n(
    ip: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from pi_nb.session.listing import default_session_dir

    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    assert "run %pi sessions first" in _usage_error(ip, "open 1")
    ip.run_line_magic("pi", "sessions")
    assert "no session files in" in capsys.readouterr().out
    paths = []
    for n, day in enumerate(("2026-02-01", "2026-03-01")):  # written oldest first
        folder = Path(default_session_dir(str(tmp_path / f"proj{n}")))
        folder.mkdir(parents=True)
        header = {"type": "session", "version": 3, "id": f"s{n}",
                  "timestamp": f"{day}T10:00:00.000Z", "cwd": str(tmp_path / f"proj{n}")}
        entry = {"type": "message", "id": f"m{n}", "parentId": None,
                 "timestamp": f"{day}T10:00:01.000Z",
                 "message": {"role": "user", "content": f"hello {n}", "timestamp": 1}}
        path = folder / f"{day}_s{n}.jsonl"
        path.write_text(json.dumps(header) + "\n" + json.dumps(entry) + "\n", encoding="utf-8")
        paths.append(str(path))
    bad = Path(paths[0]).parent / "broken.jsonl"
    bad.write_text("not a session\n", encoding="utf-8")

    ip.run_line_magic("pi", "sessions")
    out = capsys.readouterr().out
    assert "3 file(s); 1 could not be read (see error) · %pi open N opens row N" in out
    assert "not a Pi session file" in out and "2026-03-01" in out
    ip.run_line_magic("pi", "open 1")
    assert os.path.basename(paths[1]) in capsys.readouterr().out
    assert current_session(ip).path == paths[1]  # newest first
    ip.run_line_magic("pi", "open 2")
    assert current_session(ip).path == paths[0]
    assert "broken.jsonl cannot be opened (not a Pi session file" in _usage_error(ip, "open 3")
    assert "rows 1 to 3" in _usage_error(ip, "open 4")
    assert "rows 1 to 3" in _usage_error(ip, "open 0")
    # a path still opens
    ip.run_line_magic("pi", f"open {paths[1]}")
    assert current_session(ip).path == paths[1]
    assert "no such folder" in _usage_error(ip, f"sessions {tmp_path / 'nowhere'}")


def test_open_refuses_the_bundled_sample(ip: Any) -> None:
    assert "bundled sample" in _usage_error(ip, f"open {sample_session_path()}")


def test_branch_label_edit(ip: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_line_magic("pi", f"open {_sample_copy(tmp_path)}")
    session = current_session(ip)

    ip.run_line_magic("pi", "label 1a2b3c17 docstring turn")
    assert "label 'docstring turn' set on 1a2b3c17" in capsys.readouterr().out
    assert session.tree.label("1a2b3c17") == "docstring turn"
    ip.run_line_magic("pi", "label 1a2b3c17")
    assert "cleared" in capsys.readouterr().out and session.tree.label("1a2b3c17") is None

    ip.run_line_magic("pi", "edit 1a2b3c04 --replace 'file contents elided'")
    assert "1a2b3c04 replaced in the context" in capsys.readouterr().out
    texts = [m.get("content") for m in session.context().messages]
    assert [{"type": "text", "text": "file contents elided"}] in texts

    ip.run_line_magic("pi", "edit 1a2b3c0c --omit")
    assert "omitted from" in capsys.readouterr().out
    assert all(pe.id != "1a2b3c0c" or not pe.messages for pe in session.context().entries)
    count = len(session.tree.entries)
    with pytest.raises(UsageError, match="already omitted from the context; nothing written"):
        ip.run_line_magic("pi", "edit 1a2b3c0c --omit")
    assert len(session.tree.entries) == count  # no duplicate edit in the record

    ip.run_line_magic("pi", "branch decimal-done --summarize --focus 'the docstring'")
    out = capsys.readouterr().out
    assert "branch summary" in out
    leaf = session.tree.leaf
    assert leaf["type"] == "branch_summary" and leaf["parentId"] == "1a2b3c0d"

    ip.run_line_magic("pi", "branch 1a2b3c0f")  # a user message: its text comes back
    out = capsys.readouterr().out
    assert "leaf is now 1a2b3c0e" in out and "currency whitelist" in out


def test_compact_preview_then_compact_then_diff(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    ip.run_line_magic("pi", "model --window 30000 --reserve 1000 --keep 150")
    _chat(ip, 5)
    session = current_session(ip)
    before = len(session.tree)

    ip.run_line_magic("pi", "compact --preview")
    out = capsys.readouterr().out
    assert "CompactionResult preview" in out and "ProjectionDiff" in out and "summarized" in out
    assert len(session.tree) == before  # a preview writes nothing

    ip.run_line_magic("pi", "compact keep the questions")
    out = capsys.readouterr().out
    assert "CompactionResult" in out and "preview" not in out
    assert session.tree.leaf["type"] == "compaction"

    ip.run_line_magic("pi", "diff")
    out = capsys.readouterr().out
    assert "ProjectionDiff" in out and "added" in out and "summarized" in out


def test_threshold_compaction_streams_a_notice(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.user_ns["turns"] = [f"Reply {i}. " * 40 for i in range(8)]
    ip.run_line_magic("pi", "model --script turns --window 1200 --reserve 300 --keep 200")
    for i in range(6):
        ip.run_cell_magic("pi", "", f"Question {i}: " + "lorem ipsum " * 20)
    out = capsys.readouterr().out
    assert "⟳ compacting (threshold)" in out and "⟳ compacted:" in out
    ip.run_line_magic("pi", "diff")
    assert "summarized" in capsys.readouterr().out


def test_widget(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("anywidget")
    ip.run_cell_magic("pi", "--quiet", "hi")
    ip.run_line_magic("pi", "widget")
    assert "SessionExplorer" in capsys.readouterr().out


# --- mistakes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("branch 1a2b3c0d", "no session yet"),
        ("context", "no session yet"),
        ("tree", "no session yet"),
        ("tokens", "no session yet"),
        ("diff", "no session yet"),
        ("widget", "no session yet"),
        ("session", "no session yet"),
        ("bogus", "invalid choice"),
        ("tree --bogus", "unrecognized arguments"),
        ("model --window abc", "invalid int value"),
        ("model --window -5", "--window must be ≥ 0"),
        ("model --script nothing_here", "no notebook variable"),
        ("use nothing_here", "no notebook variable"),
        ("open /no/such/file.jsonl", "no such session file"),
        ("label 'unclosed", "cannot parse"),
    ],
)
def test_mistakes_without_a_session(ip: Any, line: str, needle: str) -> None:
    assert needle in _usage_error(ip, line)


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("edit 1a2b3c04", "one of the arguments --omit --replace is required"),
        ("edit 1a2b3c04 --omit --replace x", "not allowed with"),
        ("edit nope --omit", "Entry nope not found"),
        ("branch nope", "Entry nope not found"),
        ("label nope text", "Entry nope not found"),
        ("context --leaf nope", "Entry nope not found"),
        ("diff", "no compaction"),
        ("diff --leaf nope", "Entry nope not found"),
        ("edit 1a2b3c10 --omit", "not on the active branch"),
        ("model --keep -1", "--keep must be ≥ 0"),
    ],
)
def test_mistakes_on_a_session(ip: Any, tmp_path: Path, line: str, needle: str) -> None:
    ip.run_line_magic("pi", f"open {_sample_copy(tmp_path)}")
    assert needle in _usage_error(ip, line)


def test_compact_too_small_is_a_usage_error(ip: Any) -> None:
    ip.run_cell_magic("pi", "--quiet", "hi")
    assert "Nothing to compact" in _usage_error(ip, "compact")


def test_use_rejects_non_sessions(ip: Any) -> None:
    ip.user_ns["s"] = 42
    assert "not a pi_nb Session" in _usage_error(ip, "use s")


def test_script_must_be_a_list(ip: Any) -> None:
    ip.user_ns["turns"] = "not a list"
    assert "must be a list" in _usage_error(ip, "model --script turns")


def test_text_token_bar() -> None:
    bar = text_token_bar(1024, 2048, 512, width=8)
    assert bar == "context ▕████░░│░░▏ 1,024 / 2,048 tokens · W − R = 1,536"
    assert "above W − R" in text_token_bar(1800, 2048, 512)
    assert text_token_bar(99999, 100, 10, width=4).count("█") == 4


def test_overflow_recovery_is_streamed(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.user_ns["turns"] = [*REPLIES[:3], {"error": "overflow"}, "Recovered."]
    ip.run_line_magic("pi", "model --script turns --keep 60")
    _chat(ip, 3)
    capsys.readouterr()
    ip.run_cell_magic("pi", "", "One more question.")
    out = capsys.readouterr().out
    assert "✗ the model call failed:" in out
    assert "⟳ compacting (overflow)" in out and "⟳ compacted:" in out
    assert out.index("⟳ compacted:") < out.index("Recovered.")
    types = [e["type"] for e in current_session(ip).tree.entries[-4:]]
    assert types == ["message", "context_edit", "compaction", "message"]


def test_pin_and_unpin(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _chat(ip, 3)
    session = current_session(ip)
    first_user = session.tree.entries[0]["id"]
    ip.run_line_magic("pi", "pin Money is always Decimal")
    ip.run_line_magic("pi", f"pin --entry {first_user}")
    out = capsys.readouterr().out
    assert "pinned [" in out and "Money is always Decimal" in out and first_user in out
    ip.run_line_magic("pi", "pin")
    listed = capsys.readouterr().out.strip().splitlines()
    assert len(listed) == 2
    ip.run_line_magic("pi", "model --keep 40")
    ip.run_line_magic("pi", "compact")
    summary = session.tree.leaf["summary"]
    assert "Money is always Decimal" in summary and "Question 0" in summary
    ip.run_line_magic("pi", "unpin Money is always Decimal")
    assert "unpinned" in capsys.readouterr().out
    ip.run_line_magic("pi", "pin")
    assert len(capsys.readouterr().out.strip().splitlines()) == 1
    assert "no active pin" in _usage_error(ip, "unpin nothing-like-this")
    assert "not both" in _usage_error(ip, f"pin a fact --entry {first_user}")


def test_stream_printer_redacts_a_key_split_across_deltas():
    import io

    from pi_nb.notebook.magics import StreamPrinter

    out = io.StringIO()
    printer = StreamPrinter(out=out)
    key = "sk-ant-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"
    for delta in ["Your key is ", key[:9], key[9:20], key[20:], " — keep it safe.\n"]:
        printer({"type": "message_update", "delta": delta})
    printer({"type": "agent_end"})
    text = out.getvalue()
    assert key[9:20] not in text and "keep it safe" in text and "Your key is" in text


def test_threshold_compaction_that_cannot_fit_says_how_to_fix_it(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # keep (600) alone exceeds W − R (1000 − 600 = 400): every compaction stays above it.
    ip.user_ns["turns"] = [f"Reply {i}. " * 40 for i in range(10)]
    ip.run_line_magic("pi", "model --script turns --window 100000 --reserve 600 --keep 600")
    for i in range(6):
        ip.run_cell_magic("pi", "", f"Question {i}: " + "lorem ipsum " * 20)
    capsys.readouterr()
    ip.run_line_magic("pi", "model --window 1000")
    ip.run_cell_magic("pi", "", "one more question")
    out = capsys.readouterr().out
    assert "⟳ compacted:" in out
    assert "⚠ still above W − R = 400 after compacting" in out and "--keep N" in out


# --- configuration mistakes: one line, nothing written, the earlier setting stays -------------


def _config_error(ip: Any, line: str, capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``%config line``; the one error line printed for a refused setting."""
    capsys.readouterr()
    ip.run_line_magic("config", line)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    # One line per PiMagics instance of the shell (the fixture loads the extension per test).
    lines = set(captured.err.splitlines())
    assert len(lines) == 1, f"%config {line} was not refused in one line: {captured.err!r}"
    return lines.pop()


def test_missing_api_key_is_one_line_and_writes_nothing(
    ip: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pi_nb.llm import litellm_module

    for name in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(name, raising=False)
    litellm = litellm_module()
    sent: list[Any] = []
    monkeypatch.setattr(litellm, "completion", lambda **kw: sent.append(kw) or 1 / 0)
    ip.run_line_magic("config", 'PiMagics.model = "gpt-4o"')
    try:
        with pytest.raises(UsageError) as info:
            ip.run_cell_magic("pi", "", "hello")
        message = str(info.value)
        assert "OPENAI_API_KEY" in message and "\n" not in message
        assert "retrying" not in capsys.readouterr().out
        assert sent == []
        session = current_session(ip)
        assert len(session.tree) == 0 and not (session.path and os.path.exists(session.path))
    finally:
        ip.run_line_magic("config", 'PiMagics.model = "pinb/scripted"')


def test_config_llm_kwargs_replaces_earlier_keys(ip: Any) -> None:
    ip.run_line_magic("config", 'PiMagics.llm_kwargs = {"temperature": 0.5, "script": ["a"]}')
    ip.run_cell_magic("pi", "--quiet", "hi")
    session = current_session(ip)
    assert session.llm_kwargs["temperature"] == 0.5
    ip.run_line_magic("config", "PiMagics.llm_kwargs = {}")
    assert session.llm_kwargs == {}


def test_config_negative_window_is_refused_and_the_old_value_stays(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    ip.run_line_magic("config", "PiMagics.window = 5000")
    try:
        ip.run_cell_magic("pi", "--quiet", "hi")
        for name in ("window", "reserve", "keep", "max_tokens"):
            assert "must be ≥ 0" in _config_error(ip, f"PiMagics.{name} = -10", capsys)
        assert _magics(ip).window == 5000 and current_session(ip).window == 5000
        assert "it stays 5000" in _config_error(ip, "PiMagics.window = -1", capsys)
        capsys.readouterr()
        ip.run_line_magic("pi", "status")  # still works
        assert "5,000" in capsys.readouterr().out
    finally:
        ip.run_line_magic("config", "PiMagics.window = None")


def test_config_malformed_script_or_reserved_key_is_refused(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    before = dict(_magics(ip).llm_kwargs)
    assert "script turn 0" in _config_error(ip, "PiMagics.llm_kwargs = {'script': [123]}", capsys)
    assert "tools" in _config_error(ip, "PiMagics.llm_kwargs = {'tools': []}", capsys)
    assert _magics(ip).llm_kwargs == before
    ip.user_ns["turns"] = [{"tool_calls": [{"arguments": {}}]}]
    assert "script turn 0" in _usage_error(ip, "model --script turns")
    ip.run_cell_magic("pi", "--quiet", "still fine")  # the earlier script is in force
    assert current_session(ip).tree.entries[-1]["message"]["content"][0]["text"] == REPLIES[0]


def test_new_refuses_a_missing_folder(ip: Any, tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "dir"
    assert "no such folder" in _usage_error(ip, f"new {missing / 'new.jsonl'}")
    ip.run_line_magic("config", f"PiMagics.session_dir = {str(missing)!r}")
    assert "No such file" in _usage_error(ip, "new")
    assert not (tmp_path / "nope").exists()
    # The folder named is created when its parent exists.
    ip.run_line_magic("config", f"PiMagics.session_dir = {str(tmp_path / 'nope')!r}")
    ip.run_line_magic("pi", "new")
    assert (tmp_path / "nope").is_dir()
# --- compaction results that need the user's attention (issue 11) ------------------------------


def _supply_a_wordy_summary(session: Any) -> None:
    """A session_before_compact hook whose summary is far longer than the history it replaces."""

    session.hooks.on("session_before_compact", wordy_summary)


def test_a_compaction_that_grows_the_context_says_so_in_compact_and_diff(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from pi_nb.notebook.diff import latest_compaction_diff

    ip.run_line_magic("pi", "model --window 30000 --reserve 1000 --keep 150")
    _chat(ip, 3)
    session = current_session(ip)
    _supply_a_wordy_summary(session)
    capsys.readouterr()
    ip.run_line_magic("pi", "compact")
    out = capsys.readouterr().out
    diff = latest_compaction_diff(session.tree)
    figures = f"{diff.tokens_before:,} → {diff.tokens_after:,} tokens (estimated)"
    assert diff.tokens_after > diff.tokens_before
    assert figures in out and f"⚠ the compaction grew the context: {figures}" in out
    ip.run_line_magic("pi", "diff")
    out = capsys.readouterr().out
    assert figures in out and f"⚠ the compaction grew the context: {figures}" in out


def test_a_failing_compaction_hook_is_shown_in_the_cell_output(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    ip.user_ns["turns"] = [f"Reply {i}. " * 40 for i in range(8)]
    ip.run_line_magic("pi", "model --script turns --window 1200 --reserve 300 --keep 200")
    ip.run_cell_magic("pi", "", "Question 0: " + "lorem ipsum " * 20)
    session = current_session(ip)

    def broken(event: Any) -> None:
        raise RuntimeError("policy bug")

    session.hooks.on("session_before_compact", broken)
    for i in range(1, 6):
        ip.run_cell_magic("pi", "", f"Question {i}: " + "lorem ipsum " * 20)
    out = capsys.readouterr().out
    assert "⟳ compacted:" in out and "tokens (estimated)" in out
    assert "⚠ session_before_compact hook" in out and "policy bug" in out
    assert "made without it" in out


def test_branch_warnings_are_printed(ip: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    ip.run_line_magic("pi", f"open {_sample_copy(tmp_path)}")
    session = current_session(ip)

    def broken(event: Any) -> None:
        raise RuntimeError("tree hook bug")

    session.hooks.on("session_before_tree", broken)
    capsys.readouterr()
    ip.run_line_magic("pi", "branch 1a2b3c0d")
    out = capsys.readouterr().out
    assert "⚠ session_before_tree hook" in out and "tree hook bug" in out


# --- %pi open --follow -------------------------------------------------------------------------

HOLDER = """
import sys, warnings
warnings.simplefilter("ignore")
from pi_nb.session import SessionTree
tree = SessionTree.open(sys.argv[1])
tree.append_message({"role": "user", "content": "written by the other process", "timestamp": 1})
print(tree.leaf_id, flush=True)
sys.stdin.readline()          # holds the writer lock until told to exit
tree.close()
"""


def test_open_follow_shows_the_live_explorer_and_a_held_file_gets_the_lock_message(
    ip: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("anywidget")
    import time

    import IPython.display

    from pi_nb.notebook.widget import SessionExplorer

    shown: list[Any] = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, **kw: shown.append(obj))
    path = _sample_copy(tmp_path)
    ip.run_line_magic("pi", f"open {path} --follow --interval 0.05")
    explorer = shown[-1]
    assert isinstance(explorer, SessionExplorer) and explorer.following == 0.05
    assert explorer.session is _magics(ip).session
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, path],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdin is not None
        theirs = holder.stdout.readline().strip()
        deadline = time.monotonic() + 10
        while explorer.leaf_id != theirs and time.monotonic() < deadline:
            time.sleep(0.02)
        assert explorer.leaf_id == theirs  # the other process's entry, followed
        before = Path(path).read_bytes()
        with pytest.raises(UsageError) as info:
            ip.run_cell_magic("pi", "--quiet", "my turn")
        message = str(info.value)
        assert "being written by another process" in message and "\n" not in message
        assert Path(path).read_bytes() == before  # nothing of ours was written
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=10)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        explorer.close()


def test_open_interval_must_be_sensible(ip: Any, tmp_path: Path) -> None:
    pytest.importorskip("anywidget")
    assert "at least" in _usage_error(ip, f"open {_sample_copy(tmp_path)} --follow --interval 0")


def test_display_stream_is_one_output_updated_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a kernel %%pi streams into one display: created once, then updated; a reply
    faster than the interval is a single display message (what nbval, which ignores
    updates, compares)."""
    import IPython.display

    from pi_nb.notebook.magics import DisplayStream, StreamPrinter

    calls: list[tuple[str, str]] = []

    class Handle:
        def update(self, data: dict[str, str], raw: bool = False) -> None:
            calls.append(("update", data["text/plain"]))

    def display(data: dict[str, str], raw: bool = False, display_id: bool = False) -> Handle:
        assert raw and display_id
        calls.append(("display", data["text/plain"]))
        return Handle()

    monkeypatch.setattr(IPython.display, "display", display)
    words = [f"w{i} " for i in range(50)]

    def stream(interval: float) -> None:
        printer = StreamPrinter(out=DisplayStream(interval))
        printer.flush_interval = 0  # the printer flushes at every word
        for word in words:
            printer({"type": "message_update", "delta": word})
        printer.close()

    stream(60.0)  # everything arrives within the interval
    assert calls == [("display", "".join(words))]
    calls.clear()
    stream(0.0)  # a slow reply: shown as it grows, one output all along
    assert calls[0][0] == "display" and len(calls) > 2
    assert {kind for kind, _ in calls[1:]} == {"update"}
    assert calls[-1][1] == "".join(words)
