"""Tools: schemas from functions, argument validation, the default tools."""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Literal

import pytest

from pi_nb.agent.tools import (
    Tool,
    ToolError,
    default_tools,
    redact_secrets,
    to_openai_tools,
    tool,
    tool_from_function,
    truncate_output,
    validate_arguments,
)


def test_schema_from_signature_hints_and_docstring():
    def search(query: str, limit: int = 10, mode: Literal["fast", "exact"] = "fast", tags: list[str] | None = None) -> str:
        """Search the notes.

        Args:
            query: what to look for
            limit: at most this many hits
                (continued description)
        """
        return query

    t = tool_from_function(search)
    assert t.name == "search"
    assert t.description == "Search the notes."
    params = t.parameters
    assert params["required"] == ["query"]
    assert params["additionalProperties"] is False
    props = params["properties"]
    assert props["query"] == {"type": "string", "description": "what to look for"}
    assert props["limit"]["type"] == "integer"
    assert props["limit"]["default"] == 10
    assert props["limit"]["description"] == "at most this many hits (continued description)"
    assert props["mode"]["enum"] == ["fast", "exact"]
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    openai = to_openai_tools([t])[0]
    assert openai["type"] == "function"
    assert openai["function"]["name"] == "search"
    assert openai["function"]["parameters"] is params


def test_sphinx_docstring_and_decorator():
    @tool(timeout=3, execution_mode="sequential")
    def scale(x: float, factor: float = 2.0) -> float:
        """Scale a number.

        :param x: the number
        :param factor: the factor
        """
        return x * factor

    assert isinstance(scale, Tool)
    assert scale.timeout == 3
    assert scale.execution_mode == "sequential"
    assert scale.parameters["properties"]["x"]["description"] == "the number"
    assert scale.parameters["required"] == ["x"]
    assert scale(x=2) == 4


def test_validate_arguments_reports_and_coerces():
    def f(a: int, b: bool = False) -> None: ...

    t = tool_from_function(f)
    assert validate_arguments(t, {"a": "3", "b": "true"}) == {"a": 3, "b": True}
    with pytest.raises(ValueError, match="a: required"):
        validate_arguments(t, {})
    with pytest.raises(ValueError, match="zzz: unknown parameter"):
        validate_arguments(t, {"a": 1, "zzz": 2})
    with pytest.raises(ValueError, match="a: must be integer"):
        validate_arguments(t, {"a": "three"})


def test_read_write_edit(tmp_path):
    tools = {t.name: t for t in default_tools(tmp_path)}
    assert set(tools) == {"read", "write", "edit", "bash"}
    assert "Wrote" in tools["write"](path="sub/a.txt", content="one\ntwo\nthree\n")
    assert (tmp_path / "sub" / "a.txt").read_text() == "one\ntwo\nthree\n"
    assert tools["read"](path="sub/a.txt") == "one\ntwo\nthree"
    paged = tools["read"](path="sub/a.txt", offset=2, limit=1)
    assert paged.startswith("two")
    assert "offset=3" in paged
    tools["edit"](path="sub/a.txt", old_text="two", new_text="TWO")
    assert (tmp_path / "sub" / "a.txt").read_text() == "one\nTWO\nthree\n"
    with pytest.raises(ToolError, match="Could not find"):
        tools["edit"](path="sub/a.txt", old_text="four", new_text="x")
    (tmp_path / "dup.txt").write_text("x x")
    with pytest.raises(ToolError, match="occurs 2 times"):
        tools["edit"](path="dup.txt", old_text="x", new_text="y")
    with pytest.raises(ToolError, match="File not found"):
        tools["read"](path="missing.txt")


def test_bash_runs_in_folder_reports_exit_code_and_times_out(tmp_path):
    bash = {t.name: t for t in default_tools(tmp_path)}["bash"]
    ok = bash(command="pwd")
    assert not ok.is_error
    assert ok.content[0]["text"].strip() == os.path.realpath(tmp_path)
    failed = bash(command="echo oops; exit 3")
    assert failed.is_error
    assert "oops" in failed.content[0]["text"]
    assert "exited with code 3" in failed.content[0]["text"]
    slow = bash(command="sleep 5", timeout=0.3)
    assert slow.is_error
    assert "timed out after 0.3 seconds" in slow.content[0]["text"]


def test_bash_output_cap_keeps_head_and_tail(tmp_path):
    bash = {t.name: t for t in default_tools(tmp_path, output_cap=1000)}["bash"]
    result = bash(command="echo START; seq 1 20000; echo END")
    text = result.content[0]["text"]
    assert text.startswith("START")
    assert text.rstrip().endswith("END")
    assert "characters truncated" in text
    assert len(text) < 1200
    assert result.details["truncated"] is True


def test_bash_keeps_environment_but_never_echoes_secrets(tmp_path):
    env = {**os.environ, "MY_API_KEY": "sk-test-1234567890", "PLAIN": "visible-value"}
    bash = {t.name: t for t in default_tools(tmp_path, env=env)}["bash"]
    text = bash(command='echo "$MY_API_KEY $PLAIN"; test -n "$MY_API_KEY" && echo has-key').content[0]["text"]
    assert "sk-test-1234567890" not in text
    assert "[redacted $MY_API_KEY]" in text
    assert "visible-value" in text
    assert "has-key" in text  # the variable is still there for the command


def test_truncate_and_redact_helpers():
    text, cut = truncate_output("a" * 100 + "b" * 100, 50)
    assert cut and text.startswith("a") and text.endswith("b")
    assert truncate_output("short", 50) == ("short", False)
    assert redact_secrets("token=abcdefgh12", {"GH_TOKEN": "abcdefgh12"}) == "token=[redacted $GH_TOKEN]"


def test_bash_keeps_output_when_a_background_child_holds_the_pipe(tmp_path):
    # The child inherits stdout, so the pipe has no EOF when the command ends; what the
    # command printed before must still come back (it used to wait for 64 KiB and was lost).
    bash = {t.name: t for t in default_tools(tmp_path)}["bash"]
    marker = tmp_path / "child.pid"
    try:
        result = bash(command=f"sleep 30 & echo $! > {marker}; echo started; echo done")
        assert result.content[0]["text"].split() == ["started", "done"]
        assert not result.is_error
    finally:
        if marker.exists():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(marker.read_text()), signal.SIGKILL)


def test_edit_changes_only_the_matched_text_in_crlf_and_mixed_files(tmp_path):
    edit = {t.name: t for t in default_tools(tmp_path)}["edit"]
    target = tmp_path / "win.txt"
    target.write_bytes(b"one\r\ntwo\r\nthree\nfour\r\n\xff\n")
    edit(path="win.txt", old_text="one\ntwo", new_text="ONE\nTWO")  # the model writes LF
    assert target.read_bytes() == b"ONE\r\nTWO\r\nthree\nfour\r\n\xff\n"
    edit(path="win.txt", old_text="three\nfour", new_text="3\n4")  # exact match wins
    assert target.read_bytes() == b"ONE\r\nTWO\r\n3\n4\r\n\xff\n"
