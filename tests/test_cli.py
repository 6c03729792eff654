"""`python -m pi_nb` in a subprocess: output shapes, errors and warnings."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

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
