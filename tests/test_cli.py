"""`python -m pi_nb` in a subprocess: output shapes, errors and warnings."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pinb_testkit import FIXTURES, assistant, new_tree, tool_call, tool_result, user

from pi_nb.session import SessionTree


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pi_nb", *map(str, args)], capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def session(tmp_path):
    path = tmp_path / "s.jsonl"
    tree = new_tree(str(path))
    tree.append_thinking_level_change("high")
    u = tree.append_message(user("root question"))
    a = tree.append_message(assistant("first answer", tokens=500,
                                      calls=[tool_call("c1", "read", path="x")]))
    tree.append_message(tool_result("c1", "r" * 40))
    tree.append_label(u["id"], "start")
    off = tree.append_message(user("follow up"))
    tree.branch(a["id"])
    alt = tree.append_message(user("alt follow"))
    leaf = tree.append_message(assistant("alt answer", tokens=900, model="claude-z"))
    tree.close()
    return {"path": path, "tree": SessionTree.open(path), "u": u, "a": a, "off": off,
            "alt": alt, "leaf": leaf}


def _assert_one_error_line(proc):
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("pi-nb: error:")
    return lines[0]


def test_context_json_shape(session):
    proc = run("context", session["path"], "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) == {"leafId", "model", "thinkingLevel", "messages", "tokens"}
    assert out["leafId"] == session["leaf"]["id"]
    assert out["model"] == {"provider": "anthropic", "modelId": "claude-z"}
    assert out["thinkingLevel"] == "high"
    tree = session["tree"]
    assert out["messages"] == tree.projection().messages
    assert set(out["tokens"]) == {"tokens", "usageTokens", "trailingTokens", "lastUsageIndex"}
    assert out["tokens"] == tree.context_tokens().to_dict()
    assert out["tokens"]["tokens"] == 900 and out["tokens"]["lastUsageIndex"] == 3


def test_context_json_with_leaf(session):
    proc = run("context", session["path"], "--json", "--leaf", session["off"]["id"])
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["leafId"] == session["off"]["id"]
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "toolResult", "user"]
    assert out["messages"][-1]["content"] == "follow up"
    assert out["model"] == {"provider": "anthropic", "modelId": "claude-x"}
    assert out["tokens"]["usageTokens"] == 500


def test_context_text(session):
    proc = run("context", session["path"])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 5
    assert "alt answer" in lines[3] and session["leaf"]["id"] in lines[3]
    assert lines[-1].startswith("-- 4 messages, ~900 tokens")


def test_tree_marks_path_leaf_and_labels(session):
    proc = run("tree", session["path"])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    by_id = {}
    for line in lines:
        for key in ("u", "a", "off", "alt", "leaf"):
            if session[key]["id"] in line.split("label")[0]:
                by_id[key] = line
    assert by_id["u"].startswith("*") and "[start]" in by_id["u"]
    assert by_id["a"].startswith("*")
    assert by_id["alt"].startswith("*")
    assert by_id["leaf"].startswith("@")
    assert by_id["off"].startswith(" ")
    assert sum(line.startswith("@") for line in lines) == 1
    assert len(lines) == len(session["tree"].entries)


def test_tree_with_leaf_moves_the_marks(session):
    proc = run("tree", session["path"], "--leaf", session["off"]["id"])
    assert proc.returncode == 0
    line = next(x for x in proc.stdout.splitlines() if session["off"]["id"] in x)
    assert line.startswith("@")
    leaf_line = next(x for x in proc.stdout.splitlines() if session["leaf"]["id"] in x)
    assert leaf_line.startswith(" ")


def test_tokens_output(session):
    proc = run("tokens", session["path"], "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["messages"] == 4
    assert out["contextTokens"] == 900 and out["usageTokens"] == 900
    assert out["tiktokenEncoding"] == "o200k_base" and out["tiktokenKind"] == "exact"
    assert out["tiktokenTokens"] > 0 and out["heuristicTokens"] > 0
    proc = run("tokens", session["path"], "--model", "anthropic/claude-sonnet-4")
    assert proc.returncode == 0, proc.stderr
    assert "context tokens      : 900" in proc.stdout
    assert "estimated" in proc.stdout.splitlines()[-1]


def test_missing_file_is_one_error_line(tmp_path):
    line = _assert_one_error_line(run("context", tmp_path / "nope.jsonl"))
    assert "nope.jsonl" in line


def test_not_a_session_is_one_error_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("hello\n", encoding="utf-8")
    for cmd in ("context", "tree", "tokens"):
        _assert_one_error_line(run(cmd, bad))


def test_bad_leaf_id_is_one_error_line(session):
    line = _assert_one_error_line(run("context", session["path"], "--leaf", "zzzzzzzz"))
    assert "zzzzzzzz" in line
    _assert_one_error_line(run("tree", session["path"], "--leaf", "zzzzzzzz"))


def test_directory_is_one_error_line(tmp_path):
    _assert_one_error_line(run("tree", tmp_path))


def test_corrupt_line_prints_a_warning_naming_file_and_line(tmp_path):
    path = tmp_path / "garbage.jsonl"
    shutil.copy(FIXTURES / "garbage_lines.jsonl", path)
    proc = run("context", path, "--json")
    assert proc.returncode == 0
    assert "Traceback" not in proc.stderr
    warnings = [x for x in proc.stderr.splitlines() if x.startswith("pi-nb: warning:")]
    assert len(warnings) == 1
    assert f"{path}:3" in warnings[0] and f"{path}:8" in warnings[0]
    assert len(json.loads(proc.stdout)["messages"]) == 3


def test_lone_surrogate_content_prints_without_traceback(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(
        '{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}\n'
        '{"type":"message","id":"m1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",'
        '"message":{"role":"user","content":"cut \\ud83d","timestamp":1}}\n',
        encoding="utf-8",
    )
    proc = run("context", path, "--json")
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["messages"][0]["content"] == "cut \ud83d"


def test_v1_file_via_cli(tmp_path):
    path = tmp_path / "v1.jsonl"
    shutil.copy(FIXTURES / "v1_session.jsonl", path)
    proc = run("context", path, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [m["role"] for m in out["messages"]] == ["compactionSummary", "user", "assistant",
                                                    "custom", "user"]
    assert out["thinkingLevel"] == "medium"


def test_context_json_prints_numbers_like_javascript(tmp_path):
    # Pi reads 0.0 as the number 0 and prints it so; pi_nb must print the same JSON.
    path = tmp_path / "floats.jsonl"
    path.write_text(
        '{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}\n'
        '{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",'
        '"message":{"role":"user","content":"hi","timestamp":1.0,"score":2.5,"zero":0.0}}\n'
    )
    result = run("context", path, "--json")
    assert result.returncode == 0, result.stderr
    message = json.loads(result.stdout)["messages"][0]
    assert '"timestamp": 1,' in result.stdout and '"zero": 0}' in result.stdout
    assert message["score"] == 2.5


def _offline_env(**extra: str) -> dict[str, str]:
    """The environment without any OpenAI key; an HTTP attempt would hit a closed local port."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(OPENAI_BASE_URL="http://127.0.0.1:9/v1", OPENAI_API_BASE="http://127.0.0.1:9/v1", **extra)
    return env


def test_prompt_without_the_provider_key_is_one_line_exit_2(tmp_path):
    path = tmp_path / "s.jsonl"
    proc = subprocess.run([sys.executable, "-m", "pi_nb", "prompt", str(path), "hello", "--model", "gpt-4o",
                           "--no-tools"], capture_output=True, text=True, timeout=120, env=_offline_env())
    line = _assert_one_error_line(proc)
    assert "OPENAI_API_KEY" in line and "[retry" not in proc.stderr
    assert proc.stdout == "" and not path.exists()


def test_prompt_refuses_a_missing_folder(tmp_path):
    path = tmp_path / "nope" / "dir" / "new.jsonl"
    line = _assert_one_error_line(run("prompt", path, "hi", "--no-tools"))
    assert "no such folder" in line
    assert not (tmp_path / "nope").exists()


# --- sessions ----------------------------------------------------------------------------------


def _run_env(env: dict, *args: str) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "pi_nb", *map(str, args)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **env})


def test_sessions_one_row_per_file_newest_first_errors_shown(tmp_path):
    from pi_nb.session.listing import default_session_dir

    agent = tmp_path / "agent"
    folders = []
    for n, (day, cwd) in enumerate((("2026-01-05", "/p/old"), ("2026-04-05", "/p/new\nline"))):
        folder = agent / "sessions" / f"--p{n}--"
        folder.mkdir(parents=True)
        header = {"type": "session", "version": 3, "id": f"id{n}",
                  "timestamp": f"{day}T08:00:00.000Z", "cwd": cwd}
        entries = [
            {"type": "message", "id": "u1", "parentId": None, "timestamp": f"{day}T08:00:01.000Z",
             "message": {"role": "user", "content": "q", "timestamp": 1}},
            {"type": "session_info", "id": "n1", "parentId": "u1",
             "timestamp": f"{day}T08:30:00.000Z", "name": f"name {n}"},
        ]
        (folder / f"s{n}.jsonl").write_text(
            "".join(json.dumps(e) + "\n" for e in (header, *entries)), encoding="utf-8")
        folders.append(folder)
    (folders[0] / "junk.jsonl").write_text("garbage\n", encoding="utf-8")
    (folders[0] / "dir.jsonl").mkdir()
    proc = _run_env({"PI_CODING_AGENT_DIR": str(agent)}, "sessions")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["#", "last", "activity", "UTC", "entries", "msgs", "compact",
                                "size", "cwd", "session", "error"]
    assert len(lines) == 1 + 4  # one row per file, the hostile cwd's newline escaped
    size = (folders[1] / "s1.jsonl").stat().st_size
    assert lines[1].split()[:8] == ["1", "2026-04-05", "08:30", "2", "1", "0", str(size), "B"]
    assert "/p/new\\nline" in lines[1] and lines[1].endswith("s1.jsonl (name 1)")
    assert lines[2].startswith("2  2026-01-05 08:30") and lines[2].endswith("s0.jsonl (name 0)")
    assert lines[3].split()[:7] == ["3", "-", "-", "-", "-", "-", "-"]
    assert lines[3].split()[-6:] == ["dir.jsonl", "a", "directory,", "not", "a", "file"]
    assert lines[4].split()[:2] == ["4", "-"] and "junk.jsonl" in lines[4]
    assert lines[4].endswith("not a Pi session file (no parsable lines)")
    assert proc.stderr == "pi-nb: 2 file(s) could not be read (see the error column)\n"
    # one project folder, as JSON
    proc = _run_env({}, "sessions", folders[1], "--json")
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)
    assert row["id"] == "id1" and row["entries"] == 2 and row["messages"] == 1
    assert row["lastActivity"] == "2026-04-05T08:30:00.000Z" and row["error"] is None
    assert default_session_dir("/x").endswith("--x--")


def test_sessions_user_mistakes_and_empty(tmp_path):
    line = _assert_one_error_line(run("sessions", tmp_path / "nowhere"))
    assert "no such folder" in line
    (tmp_path / "f.jsonl").write_text("", encoding="utf-8")
    assert "not a folder" in _assert_one_error_line(run("sessions", tmp_path / "f.jsonl"))
    proc = _run_env({"PI_CODING_AGENT_DIR": str(tmp_path / "none")}, "sessions")
    assert proc.returncode == 0
    assert proc.stdout == f"no session files in {tmp_path / 'none' / 'sessions'}\n"


# --- commands that never call a model stay light ------------------------------------------------

MODEL_FREE = {
    "tree": ["tree", "{sample}"],
    "context": ["context", "{sample}", "--json"],
    "tokens": ["tokens", "{sample}"],
    "cut": ["cut", "{sample}", "--keep", "100"],
    "sessions": ["sessions", "{folder}"],
    "import-pi": ["import", "pi", "{sample}", "-o", "{out}"],
    "import-claude-code": ["import", "auto", "{claude}", "-o", "{out}"],
}


@pytest.mark.parametrize("name", sorted(MODEL_FREE))
def test_model_free_commands_never_import_litellm_pandas_matplotlib(tmp_path, name):
    from pi_nb.samples import sample_session_path

    folder = tmp_path / "sessions"
    folder.mkdir()
    shutil.copy(sample_session_path(), folder / "a.jsonl")
    values = {"sample": sample_session_path(), "folder": folder, "out": tmp_path / "out.jsonl",
              "claude": FIXTURES / "transcripts" / "claude_code_session.jsonl"}
    argv = [str(a).format(**{k: str(v) for k, v in values.items()}) for a in MODEL_FREE[name]]
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "pi_nb", *argv],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert "pi_nb.cli" in imported  # the -X importtime report is really there
    heavy = {m for m in imported if m.split(".")[0] in ("litellm", "pandas", "matplotlib")}
    assert not heavy, f"pi-nb {name} imported {sorted(heavy)[:5]}"


def test_import_pi_copies_and_costs_flag_is_refused(tmp_path):
    from pi_nb.samples import sample_session_path

    out = tmp_path / "copy.jsonl"
    proc = run("import", "pi", sample_session_path(), "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == f"wrote {out}"
    original = SessionTree.open(sample_session_path()).entries
    assert SessionTree.open(out).entries[: len(original)] == original  # + the import note
    proc = run("import", "auto", sample_session_path(), "-o", tmp_path / "b.jsonl", "--costs")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr == (
        "pi-nb import: error: --costs does not apply to a Pi session (it keeps its own costs)\n"
    )
    assert not (tmp_path / "b.jsonl").exists()


# --- compact --keep/--reserve/--window, and the bundled sample stays read-only ------------------


def test_compact_budget_flags_demonstrate_a_compaction_on_the_sample(tmp_path):
    from pi_nb.samples import sample_session_path

    sample = sample_session_path()
    before = Path(sample).read_bytes()
    # Pi's default keepRecentTokens (20000) keeps the whole 376-token sample
    proc = run("compact", sample, "--preview")
    assert proc.returncode == 1 and "Nothing to compact" in proc.stderr
    proc = run("compact", sample, "--preview", "--keep", "50")
    assert proc.returncode == 0, proc.stderr
    head = proc.stdout.splitlines()[0]
    cut = json.loads(run("cut", sample, "--keep", "50", "--json").stdout)
    assert head.startswith("compaction preview (nothing written): context 376 → ")
    assert f"first kept entry {cut['firstKeptEntryId']}, split turn" in head
    assert "## Goal" in proc.stdout
    # writing commands refuse the bundled sample; a copy compacts
    for argv in (("compact", sample, "--keep", "50"), ("prompt", sample, "hi")):
        assert "is a bundled sample (read-only); copy it first" in _assert_one_error_line(run(*argv))
    assert Path(sample).read_bytes() == before
    copy = tmp_path / "copy.jsonl"
    shutil.copy(sample, copy)
    proc = run("compact", copy, "--keep", "50", "--reserve", "1000", "--window", "8192")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("compaction written: context 376 → ")
    last = json.loads(copy.read_text(encoding="utf-8").splitlines()[-1])
    assert last["type"] == "compaction" and last["firstKeptEntryId"] == cut["firstKeptEntryId"]
    proc = run("compact", copy, "--keep", "-1")
    assert proc.returncode == 2 and "must be ≥ 0" in proc.stderr


def test_prompt_exits_promptly_after_the_reply(tmp_path):
    # After `import litellm`, the interpreter's final garbage collection took seconds
    # (3-4 s measured under load) between the printed reply and the exit.
    import os
    import time

    path = tmp_path / "p.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "pi_nb", "prompt", str(path), "hi",
                             "--model", "pinb/scripted", "--no-tools"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    last = None
    while True:
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            break
        last = time.perf_counter()
    gap = time.perf_counter() - last
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [e.get("message", {}).get("role") for e in lines[1:]] == ["user", "assistant"]
    assert gap < 1.5, f"{gap:.2f} s from the reply to the exit"
