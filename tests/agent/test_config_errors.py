"""Configuration mistakes fail at once, in one line, and write nothing (issue 11, "fail loudly,
lose nothing"): a missing API key, reserved or clashing call options, malformed scripts,
missing folders. No network: every real-model test makes an HTTP attempt fail the test."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from pi_nb.agent import RetryPolicy, Session
from pi_nb.agent.cli import run_prompt_cli
from pi_nb.agent.overflow import classify_exception, error_message_of
from pi_nb.entries import empty_usage
from pi_nb.llm import litellm_module
from pi_nb.models.scripted import Script

KEY_VARS = ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY")


@pytest.fixture
def no_openai_key(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """OPENAI_API_KEY unset, and any attempt to call litellm (hence HTTP) recorded + refused."""
    for name in KEY_VARS:
        monkeypatch.delenv(name, raising=False)
    litellm = litellm_module()
    monkeypatch.setattr(litellm, "api_key", None, raising=False)
    monkeypatch.setattr(litellm, "openai_key", None, raising=False)
    calls: list[dict[str, Any]] = []

    def refuse(**kwargs: Any) -> Any:
        calls.append(kwargs)
        raise AssertionError("litellm.completion was called: the request would have been sent")

    monkeypatch.setattr(litellm, "completion", refuse)
    return calls


def _entries(path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


# --- 15: a missing provider key ----------------------------------------------------------------


def test_missing_api_key_is_refused_before_sending_and_nothing_is_written(tmp_path, no_openai_key):
    path = tmp_path / "s.jsonl"
    sleeps: list[float] = []
    session = Session.new(path, cwd=tmp_path, model="gpt-4o", no_tools=True, retry=RetryPolicy(sleep=sleeps.append))
    with pytest.raises(ValueError) as info:
        session.prompt("hello")
    message = str(info.value)
    assert "OPENAI_API_KEY" in message and "\n" not in message
    assert no_openai_key == []  # nothing was sent
    assert sleeps == []  # nor retried
    assert _entries(path) == [] and len(session.tree) == 0
    # A later prompt on the same session is refused the same way (the session is not stuck).
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        session.prompt("again")


def test_explicit_credentials_skip_the_key_check(tmp_path, no_openai_key):
    """api_key / api_base in llm_kwargs: the call goes out (here: reaches the stub)."""
    session = Session.new(tmp_path / "s.jsonl", cwd=tmp_path, model="gpt-4o", no_tools=True,
                          api_key="sk-test", retry=RetryPolicy(enabled=False))
    result = session.prompt("hello")
    assert len(no_openai_key) == 1 and no_openai_key[0]["api_key"] == "sk-test"
    assert result.error and "\n" not in result.error


def test_cli_prompt_missing_key_one_line_exit_2(tmp_path, no_openai_key):
    path = tmp_path / "s.jsonl"
    out, err = io.StringIO(), io.StringIO()
    status = run_prompt_cli(str(path), "hello", model="gpt-4o", no_tools=True, stream_to=out, err=err)
    assert status == 2
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pi-nb: error:") and "OPENAI_API_KEY" in lines[0]
    assert out.getvalue() == ""
    assert no_openai_key == [] and not path.exists()


def test_cli_main_prompt_missing_key(tmp_path, no_openai_key, capsys):
    from pi_nb.cli import main

    path = tmp_path / "s.jsonl"
    assert main(["prompt", str(path), "hello", "--model", "gpt-4o", "--no-tools"]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "OPENAI_API_KEY" in captured.err
    assert no_openai_key == [] and not path.exists()


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("AuthenticationError", "Incorrect API key provided"),
        ("BadRequestError", "Invalid parameter: 'timeout' must be a number"),  # 'timeout': not a time-out
        ("NotFoundError", "The model `gpt-nope` does not exist"),
    ],
)
def test_auth_and_configuration_errors_are_fatal(kind, message):
    litellm = litellm_module()
    exc = getattr(litellm, kind)(message=message, model="gpt-4o", llm_provider="openai")
    assert classify_exception(exc) == "fatal"


def test_missing_credentials_reported_as_500_are_fatal_and_transient_errors_stay_transient():
    litellm = litellm_module()
    # What litellm 1.x raises for gpt-4o without OPENAI_API_KEY (seen live).
    missing = litellm.InternalServerError(
        message="OpenAIException - Missing credentials. Please pass an `api_key`, or set the "
        "`OPENAI_API_KEY` environment variable.",
        model="gpt-4o",
        llm_provider="openai",
    )
    assert classify_exception(missing) == "fatal"
    args = {"model": "gpt-4o", "llm_provider": "openai"}
    assert classify_exception(litellm.RateLimitError(message="Rate limit reached for API key", **args)) == "transient"
    assert classify_exception(litellm.InternalServerError(message="upstream 502", **args)) == "transient"
    # A 400 that is an overflow in words is still an overflow (compact, then retry).
    too_long = litellm.BadRequestError(message="prompt is too long: 210000 tokens", **args)
    assert classify_exception(too_long) == "overflow"


def test_missing_credentials_from_the_provider_are_not_retried(make_session, sleeps):
    litellm = litellm_module()

    def complete(model: str, messages: Any, **kwargs: Any) -> Any:
        raise litellm.InternalServerError(
            message="Missing credentials. Please set the `OPENAI_API_KEY` environment variable.",
            model=model,
            llm_provider="openai",
        )

    session = make_session([], complete=complete)
    result = session.prompt("hello")
    assert result.error and "OPENAI_API_KEY" in result.error
    assert sleeps == []  # not retried: one attempt, one error entry
    errors = [e for e in session.tree.entries if e["type"] == "message" and e["message"].get("stopReason") == "error"]
    assert len(errors) == 1


# --- 16a: llm_kwargs merged with pi_nb's own arguments ----------------------------------------


def _recording_complete(calls: list[dict[str, Any]]):
    def complete(model: str, messages: Any, **kwargs: Any) -> dict[str, Any]:
        calls.append(kwargs)
        return {
            "role": "assistant",
            "content": [{"type": "text", "text": "Summary of the work so far. " * 3}],
            "api": "test",
            "provider": "test",
            "model": model,
            "usage": empty_usage(),
            "stopReason": "stop",
            "timestamp": 1,
        }

    return complete


def test_llm_kwargs_max_tokens_works_in_agent_calls(make_session):
    """It used to raise "got multiple values for keyword argument 'max_tokens'" on every call."""
    session = make_session(["x" * 100], llm_kwargs={"max_tokens": 5})
    result = session.prompt("hello")
    assert result.ok, result.error
    reply = result.replies[-1]
    assert reply["stopReason"] == "length" and result.text == "x" * 20


def test_llm_kwargs_precedence_in_agent_and_summary_calls(tmp_path):
    calls: list[dict[str, Any]] = []
    session = Session.new(tmp_path / "s.jsonl", cwd=tmp_path, no_tools=True, complete=_recording_complete(calls),
                          window=32768, keep=20, llm_kwargs={"max_tokens": 50, "stream": False, "temperature": 0})
    for i in range(3):
        assert session.prompt(f"question {i} " * 30).ok
    agent = calls[-1]
    assert (agent["max_tokens"], agent["stream"], agent["temperature"]) == (50, False, 0)

    session.max_tokens = 20  # two caps: the smaller applies
    assert session.prompt("one more").ok
    assert calls[-1]["max_tokens"] == 20

    before = len(calls)
    session.compact()
    summary = calls[before:]
    assert summary, "the compaction made no summary call"
    # The summary budget (from R) is larger than the user's cap of 50: the cap applies.
    assert all(c["max_tokens"] == 50 and c["temperature"] == 0 and c["stream"] is False for c in summary)


def test_reserved_llm_kwargs_are_refused_in_one_line(tmp_path):
    with pytest.raises(ValueError) as info:
        Session.new(tmp_path / "s.jsonl", cwd=tmp_path, llm_kwargs={"tools": []})
    assert "tools" in str(info.value) and "\n" not in str(info.value)
    session = Session.new(tmp_path / "t.jsonl", cwd=tmp_path)
    with pytest.raises(ValueError, match="model"):
        session.llm_kwargs = {"model": "gpt-4o"}
    assert "model" not in session.llm_kwargs
    session.llm_kwargs = {}  # assigning replaces: {} clears
    assert session.llm_kwargs == {}


# --- 16d: malformed scripts --------------------------------------------------------------------


@pytest.mark.parametrize(
    "turn",
    [123, {"tool_calls": [{"arguments": {}}]}, {"tool_calls": "read"}, {"text": 5}, {"stream_dies_after": -1}],
)
def test_malformed_script_fails_at_once_and_writes_nothing(tmp_path, turn):
    path = tmp_path / "s.jsonl"
    with pytest.raises(ValueError) as info:
        Session.new(path, cwd=tmp_path, script=["fine", turn])
    assert "script turn 1" in str(info.value) and "\n" not in str(info.value)
    assert not path.exists()


def test_malformed_scripted_turn_at_call_time_is_fatal_one_line(make_session, sleeps):
    script = Script(["first"])
    session = make_session(script)
    assert session.prompt("one").ok
    script.turns.append({"tool_calls": [{"arguments": {}}]})  # broken after the check
    result = session.prompt("two")
    assert result.error and "malformed script" in result.error
    assert sleeps == []  # a configuration error: not retried
    errors = [e["message"] for e in session.tree.entries
              if e["type"] == "message" and e["message"].get("stopReason") == "error"]
    assert len(errors) == 1
    stored = errors[0]["errorMessage"]
    assert "\n" not in stored and "Traceback" not in stored and "script turn 1" in stored
    assert session.path is not None and "Traceback" not in Path(session.path).read_text()


def test_error_message_is_one_line_without_traceback():
    exc = RuntimeError("litellm.APIConnectionError: boom\nTraceback (most recent call last):\n  File \"x.py\", line 1\n")
    assert error_message_of(exc) == "litellm.APIConnectionError: boom"
    assert error_message_of(RuntimeError("line one\n  line two")) == "line one line two"
    assert error_message_of(RuntimeError("")) == "RuntimeError"


# --- 16e: only the file named is created -------------------------------------------------------


def test_cli_prompt_refuses_a_missing_folder(tmp_path):
    path = tmp_path / "nope" / "dir" / "new.jsonl"
    err = io.StringIO()
    status = run_prompt_cli(str(path), "hi", no_tools=True, stream_to=io.StringIO(), err=err, script=["hello"])
    assert status == 2
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and "no such folder" in lines[0] and str(path.parent) in lines[0]
    assert not (tmp_path / "nope").exists()


def test_session_new_refuses_a_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such folder"):
        Session.new(tmp_path / "missing" / "s.jsonl", cwd=tmp_path)
    assert not (tmp_path / "missing").exists()
