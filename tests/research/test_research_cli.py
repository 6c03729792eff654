"""``pi-nb import`` / ``pi-nb compare`` functions: output, exit codes, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pi_nb.research.cli import compare_command, import_command
from pi_nb.research.synthetic import generate_session
from pi_nb.session import SessionTree


def test_import_command(transcripts: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "cc.jsonl"
    assert (
        import_command("claude-code", str(transcripts / "claude_code_session.jsonl"), str(out)) == 0
    )
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("claude-code: 32 records")
    assert printed[1] == f"wrote {out}"
    assert SessionTree.open(out).projection().messages


@pytest.mark.parametrize(
    ("kind", "src", "message"),
    [
        ("gemini", "codex_rollout.jsonl", "unknown format 'gemini'"),
        ("codex", "missing.jsonl", "no such file"),
        ("codex", "claude_code_session.jsonl", "not a Codex rollout"),
    ],
)
def test_import_command_errors(
    transcripts: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    kind: str,
    src: str,
    message: str,
) -> None:
    assert import_command(kind, str(transcripts / src), str(tmp_path / "o.jsonl")) == 2
    err = capsys.readouterr().err
    assert err.startswith("pi-nb import: error: ") and message in err
    assert err.count("\n") == 1


def test_import_command_refuses_existing_output(transcripts: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "o.jsonl"
    src = str(transcripts / "codex_rollout.jsonl")
    assert import_command("codex", src, str(out)) == 0
    assert import_command("codex", src, str(out)) == 2
    assert "already exists" in capsys.readouterr().err
    assert import_command("auto", src, str(out), overwrite=True) == 0


@pytest.fixture
def session_file(tmp_path: Path) -> str:
    path = tmp_path / "s.jsonl"
    generate_session(8, seed=1, path=str(path))
    return str(path)


def test_compare_command_formats(session_file: str, capsys: pytest.CaptureFixture) -> None:
    assert (
        compare_command(
            [session_file], "mask:2,window:1500", "pinb/scripted", "json", keep_recent_tokens=1500
        )
        == 0
    )
    rows = json.loads(capsys.readouterr().out)
    assert [r["strategy"] for r in rows] == ["mask", "window"]
    assert all(r["session"] == "s" and r["error"] is None for r in rows)
    assert (
        compare_command(
            [session_file], ["extractive"], "pinb/scripted", "csv", keep_recent_tokens=1500
        )
        == 0
    )
    csv = capsys.readouterr().out.splitlines()
    assert csv[0].startswith("session,source,strategy,model,summarizer")
    assert csv[1].startswith("s,synthetic,extractive,pinb/scripted,extractive (no model),")
    assert compare_command([session_file], "mask", "pinb/scripted", "table") == 0
    assert "probe_all" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("files", "strategies", "fmt", "message"),
    [
        (["missing.jsonl"], "mask", "json", "no such session file"),
        (None, "magic", "json", "unknown strategy 'magic'"),
        (None, "mask:keep_last=x", "json", "non-negative integer"),
        (None, "mask", "yaml", "unknown output format"),
        ([], "mask", "json", "no session files"),
    ],
)
def test_compare_command_errors(
    session_file: str, capsys: pytest.CaptureFixture, files, strategies, fmt, message
) -> None:
    assert (
        compare_command(
            files if files is not None else [session_file], strategies, "pinb/scripted", fmt
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("pi-nb compare: error: ") and message in err and err.count("\n") == 1


def test_compare_command_rejects_a_non_session(tmp_path: Path, capsys) -> None:
    bogus = tmp_path / "notes.txt"
    bogus.write_text("hello\n")
    assert compare_command([str(bogus)], "mask", "pinb/scripted", "json") == 2
    assert "not a Pi session" in capsys.readouterr().err


def test_compare_judge_flag_and_notices_on_stderr(session_file: str, capsys) -> None:
    from pi_nb.cli import main

    argv = ["compare", session_file, "--strategies", "pi,window:1500", "--keep", "1500"]
    assert main([*argv, "--judge", "pinb/scripted", "--judge-grader", "match"]) == 0
    captured = capsys.readouterr()
    header = captured.out.splitlines()[0].split()
    assert {"summarizer", "source", "judge_score", "judge_error"} <= set(header)
    assert "extractive stand-in" in captured.out
    assert "note: summaries of pi came from the extractive stand-in" in captured.err
    # The scripted judge's "(script finished)" is no grade: the failure is shown, not a 0.
    assert main([*argv, "--judge", "pinb/scripted", "--json"]) == 0
    captured = capsys.readouterr()
    rows = json.loads(captured.out)
    assert all(r["judge_score"] is None and "unparseable" in r["judge_error"] for r in rows)
    assert "note: judge: 2 run(s) with ungraded probes" in captured.err
    assert main([*argv, "--price-model", "no-such-model-xyz", "--json"]) == 0
    captured = capsys.readouterr()
    pi = next(r for r in json.loads(captured.out) if r["strategy"] == "pi")
    assert pi["cost"] is None and "no-such-model-xyz" in pi["cost_note"]
    assert "note: no price for no-such-model-xyz in litellm's table" in captured.err


def test_compare_at_and_replay_flags(session_file: str, capsys) -> None:
    from pi_nb.cli import main

    argv = ["compare", session_file, "--strategies", "window:300", "--keep", "300", "--json"]
    assert main([*argv, "--at", "-8", "--replay"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["error"] is None and row["probe_basis"] == "needed_later"
    # pinb/scripted without a script replies "(script finished)": no step to compare.
    assert row["next_full"] == row["next_compacted"] == "(no tool call)"
    assert row["continuation_agreement"] is None and row["next_actual"].startswith("read ")
    assert main([*argv, "--at", "no-such-entry"]) == 0
    captured = capsys.readouterr()
    assert "is not an entry of the branch" in json.loads(captured.out)[0]["error"]
    assert "1 run(s) failed" in captured.err


def test_compare_table_says_why_probe_columns_are_empty(capsys: pytest.CaptureFixture) -> None:
    from pi_nb.samples import sample_session_path

    # Pi's default keepRecentTokens (20000) keeps the whole 376-token sample: nothing is cut,
    # so no fact is removed and nothing can be probed. The table must say so, not show NaN.
    assert compare_command([sample_session_path()], "pi,mask", "pinb/scripted", "table") == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert "reason" in lines[0].split() and "NaN" not in captured.out
    assert lines[1].split()[:3] == ["refactor_session", "real", "pi"]
    reason = "no probes: nothing to cut at keep=20000"
    assert lines[1].split()[-1] == "-"  # the error column: none
    assert lines[1][:-1].rstrip().endswith(f"Nothing to compact (session too small); {reason}")
    assert lines[2].split()[-1] == "-" and lines[2][:-1].rstrip().endswith(f" {reason}")
    assert " ".join(["-"] * 6) in " ".join(lines[1].split())  # the six probe columns
    assert "Pi's cut at keepRecentTokens=20000 removes nothing" in captured.err
    # with a keep below the context's tokens there is a cut, probes, and recall figures
    assert compare_command(
        [sample_session_path()], "pi,mask", "pinb/scripted", "table", keep_recent_tokens=50
    ) == 0
    captured = capsys.readouterr()
    assert "no probes" not in captured.out and "removes nothing" not in captured.err
    assert len(captured.out.splitlines()) == 3  # header + two rows
    assert compare_command(
        [sample_session_path()], "pi,mask", "pinb/scripted", "json", keep_recent_tokens=50
    ) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 2 and all(0 <= row["probe_all"] <= 1 for row in rows)


def test_compare_dry_run_prints_the_plan_and_calls_nothing(
    session_file: str, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pi_nb.llm
    from pi_nb.cli import main

    def no_call(*args: object, **kwargs: object) -> None:
        raise AssertionError("a dry run called a model")

    monkeypatch.setattr(pi_nb.llm, "complete", no_call)
    argv = ["compare", session_file, "--strategies", "pi,extractive", "--keep", "1500"]
    assert main([*argv, "--model", "gpt-4o-mini", "--dry-run"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].split() == [
        "session",
        "strategy",
        "model_calls",
        "summary_calls",
        "judge_calls",
        "replay_calls",
        "input_tokens",
        "output_tokens_max",
        "cost",
        "error",
    ]
    pi = lines[1].split()
    assert pi[:2] == ["s", "pi"] and int(pi[2]) == int(pi[3]) >= 1  # summary calls only
    assert int(pi[6]) > 0 and float(pi[8]) > 0
    assert lines[2].split()[:3] == ["s", "extractive", "0"]
    assert lines[3].split()[0] == "TOTAL"
    assert "dry run: no model was called" in captured.err
    assert main([*argv, "--model", "no-such-model-xyz", "--dry-run", "--json"]) == 0
    captured = capsys.readouterr()
    rows = json.loads(captured.out)
    assert rows[0]["cost"] is None and "no-such-model-xyz" in rows[0]["cost_note"]
    assert "note: no price for no-such-model-xyz" in captured.err


def test_import_costs_of_an_unpriced_model_are_unknown_on_stderr_not_zero(
    transcripts: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    # Issue 15: --costs with a model litellm has no price for: the file keeps Pi's zeros
    # (valid JSON Pi reads), the report and stderr say the cost is unknown.
    text = (transcripts / "claude_code_session.jsonl").read_text(encoding="utf-8")
    src = tmp_path / "cc.jsonl"
    src.write_text(text.replace("claude-haiku-4-5-20251001", "no-such-model-xyz"), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert import_command("claude-code", str(src), str(out), costs=True) == 0
    note = "no price for no-such-model-xyz in litellm's table: cost unknown (NaN)"
    printed = capsys.readouterr()
    assert printed.err.splitlines() == [f"pi-nb import: note: {note}"]
    assert printed.out.splitlines()[0].endswith(f"; {note}")  # the summary says it too

    def no_nan(token: str) -> None:
        raise AssertionError(f"{token} in the session file: not JSON that Pi reads")

    lines = out.read_text(encoding="utf-8").splitlines()
    entries = [json.loads(line, parse_constant=no_nan) for line in lines]
    costs = {
        e["message"]["model"]: e["message"]["usage"]["cost"]["total"]
        for e in entries
        if e.get("type") == "message" and e["message"].get("role") == "assistant"
    }
    assert costs["no-such-model-xyz"] == 0 and costs["claude-sonnet-4-5-20250929"] > 0
