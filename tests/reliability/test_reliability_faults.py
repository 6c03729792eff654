"""Provider and tool faults end to end, through pi_nb.agent.Session and pinb/scripted.

Each scenario injects faults (429 / 5xx / timeouts with retry and backoff — sleep patched —,
a context overflow, a stream that dies midway, a malformed tool call, a tool that raises or
hangs, an abort or a notebook interrupt mid-stream). After each:

* the session file is consistent: it opens clean, and every tool call of a reply that did
  not fail has its tool result;
* re-opening it gives exactly the same context, leaf and token figures;
* the next prompt works;
* Pi 1.3.0 and Pi 1.6.0 project the file identically (when the oracle is available).
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import rel_figures
from rel_hostile import context_dict

from pi_nb.agent import RetryPolicy, Session, tool_from_function
from pi_nb.models.scripted import Script
from pi_nb.session import SessionTree

NEXT = "next prompt answered"
RELEASE = threading.Event()  # lets "hanging" tools end when the module is done


@pytest.fixture(autouse=True, scope="module")
def _release_hanging_tools():
    # Set up again when pytest runs this module's tests in one group per Pi release.
    RELEASE.clear()
    yield
    RELEASE.set()


@pytest.fixture
def pi_check(request):
    """Compare a file's context with every Pi release's (PI_VERSIONS) in one go: the agent run
    before it is the costly part and the same for each release. A no-op only when
    PI_NB_SKIP_COMPAT=1 and the oracle cannot run."""
    try:
        pi_contexts = request.getfixturevalue("pi_contexts")
        describe = request.getfixturevalue("describe_mismatch")
    except pytest.skip.Exception:
        return lambda path, ours: None

    def check(path: str, ours: dict) -> None:
        problems = []
        for version, pi_context in pi_contexts.items():
            theirs = pi_context(path)
            if set(theirs) == {"error"}:
                problems.append(f"Pi {version} cannot read {path}: {theirs}")
                continue
            problem = describe(js_numbers(ours), js_numbers(theirs))
            if problem is not None:
                problems.append(f"Pi {version}: {problem}")
            rel_figures.add("oracle_checks")
        assert not problems, "\n".join(problems)

    return check


def js_numbers(value: Any) -> Any:
    """JSON has one number type: 0.0 (what Python writes for a float) is Pi's 0."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: js_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [js_numbers(v) for v in value]
    return value


def echo(text: str) -> str:
    """Echo the text back.

    Args:
        text: what to echo
    """
    return f"echo: {text}"


def explode(reason: str) -> str:
    """A tool that always fails.

    Args:
        reason: why
    """
    raise RuntimeError(f"tool exploded: {reason}")


def hang(seconds: float) -> str:
    """A tool that hangs.

    Args:
        seconds: how long
    """
    RELEASE.wait(seconds)
    return "woke up"


TOOLS = [tool_from_function(f) for f in (echo, explode, hang)]


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def make(tmp_path: Path, turns: list[Any], sleeps: list[float], **opts: Any) -> Session:
    opts.setdefault("tools", TOOLS)
    opts.setdefault("window", 32768)
    opts.setdefault("retry", RetryPolicy(sleep=sleeps.append))
    return Session.new(tmp_path / "s.jsonl", cwd=tmp_path, script=Script([*turns, NEXT]), **opts)


def reopen(path: str) -> SessionTree:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any skipped / repaired line fails the test
        return SessionTree.open(path)


def check_consistent(session: Session, pi_check: Callable[[str, dict], None]) -> SessionTree:
    assert session.path is not None
    tree = reopen(session.path)
    assert tree.report.clean
    assert tree.leaf_id == session.tree.leaf_id
    ours = context_dict(session.tree)
    assert context_dict(tree) == ours
    assert tree.context_tokens() == session.tree.context_tokens()
    results = {
        e["message"].get("toolCallId")
        for e in tree.entries
        if e["type"] == "message" and e["message"].get("role") == "toolResult"
    }
    for entry in tree.entries:
        message = entry.get("message") or {}
        if entry["type"] != "message" or message.get("role") != "assistant":
            continue
        calls = [b for b in message.get("content") or [] if b.get("type") == "toolCall"]
        if message.get("stopReason") in ("error", "aborted"):
            continue
        for block in calls:
            assert block["id"] in results, f"tool call {block['id']} has no result"
    for message in tree.projection().messages:  # the model never sees an unanswered call
        if message.get("role") == "assistant" and message.get("stopReason") == "toolUse":
            for block in message["content"]:
                if block.get("type") == "toolCall":
                    assert block["id"] in results
    pi_check(session.path, ours)
    return tree


def finish(session: Session, pi_check: Callable[[str, dict], None]) -> None:
    """After the fault: consistent file, the next prompt works, still consistent."""
    check_consistent(session, pi_check)
    result = session.prompt("and now?")
    assert result.error is None, result.error
    assert result.text == NEXT
    check_consistent(session, pi_check)


def tool_results(session: Session) -> list[dict[str, Any]]:
    return [m for m in session.tree.projection().messages if m.get("role") == "toolResult"]


@pytest.mark.parametrize("fault", ["rate_limit", "server", "unavailable", "timeout", "connection"])
def test_transient_error_is_retried_with_backoff(fault, tmp_path, pi_check):
    sleeps: list[float] = []
    session = make(tmp_path, [{"error": fault}, {"error": fault}, "recovered"], sleeps)
    result = session.prompt("hello")
    assert result.error is None and result.text == "recovered"
    assert sleeps == [2.0, 4.0]  # exponential backoff, sleep patched
    # Both failed replies stay in the file but are omitted from the context.
    replies = [m["stopReason"] for m in session.tree.projection().messages if m["role"] == "assistant"]
    assert replies == ["stop"]
    rel_figures.add("faults", 2)
    finish(session, pi_check)


def test_retries_exhausted_then_next_prompt_works(tmp_path, pi_check):
    sleeps: list[float] = []
    session = make(tmp_path, [{"error": "rate_limit"}] * 4, sleeps,
                   retry=RetryPolicy(max_retries=3, sleep=sleeps.append))
    result = session.prompt("hello")
    assert result.error and "Rate limit" in result.error
    assert sleeps == [2.0, 4.0, 8.0]
    rel_figures.add("faults", 4)
    finish(session, pi_check)


def test_fatal_error_is_not_retried(tmp_path, pi_check):
    sleeps: list[float] = []
    session = make(tmp_path, [{"error": "auth"}], sleeps)
    result = session.prompt("hello")
    assert result.error and sleeps == []
    rel_figures.add("faults")
    finish(session, pi_check)


def test_bad_request_is_not_retried(tmp_path, pi_check):
    sleeps: list[float] = []
    session = make(tmp_path, [{"error": "bad_request"}], sleeps)
    result = session.prompt("hello")
    assert result.error and sleeps == []  # a 400 is the request's fault: retrying cannot help
    rel_figures.add("faults")
    finish(session, pi_check)


def test_malformed_script_turn_is_fatal_and_stored_in_one_line(tmp_path, pi_check):
    sleeps: list[float] = []
    session = make(tmp_path, ["first"], sleeps)
    assert session.prompt("one").ok
    session.llm_kwargs["script"].turns.insert(1, {"tool_calls": [{"arguments": {}}]})  # past the check
    result = session.prompt("two")
    assert result.error and "malformed script" in result.error and sleeps == []
    stored = [e["message"]["errorMessage"] for e in session.tree.entries
              if e["type"] == "message" and e["message"].get("stopReason") == "error"]
    assert len(stored) == 1 and "\n" not in stored[0] and "Traceback" not in stored[0]
    rel_figures.add("faults")
    finish(session, pi_check)


def test_missing_provider_key_writes_nothing_then_the_session_goes_on(tmp_path, monkeypatch, pi_check):
    from pi_nb.llm import litellm_module

    for name in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(name, raising=False)
    litellm = litellm_module()
    sent: list[Any] = []
    real = litellm.completion
    monkeypatch.setattr(litellm, "completion", lambda **kw: sent.append(kw) if kw["model"] != "pinb/scripted" else real(**kw))
    sleeps: list[float] = []
    session = make(tmp_path, ["first"], sleeps)
    assert session.prompt("one").ok
    size = Path(session.path).stat().st_size
    session.model = "gpt-4o"
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        session.prompt("two")
    assert sent == [] and sleeps == [] and Path(session.path).stat().st_size == size
    session.model = "pinb/scripted"
    rel_figures.add("faults")
    finish(session, pi_check)


def words(n: int, tag: str) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))  # varied: litellm refuses repeated chunks


def test_context_overflow_compacts_and_retries(tmp_path, pi_check):
    sleeps: list[float] = []
    turns = [f"answer {i}: " + words(300, f"a{i}x") for i in range(6)]
    session = make(tmp_path, [*turns, {"error": "overflow"}, "after compaction"], sleeps, keep=800)
    for i in range(6):
        result = session.prompt(f"question {i} " + words(300, f"q{i}x"))
        assert result.error is None, result.error
    result = session.prompt("one more")
    assert result.error is None, result.error
    assert result.text == "after compaction"
    assert result.compactions, "the overflow did not trigger a compaction"
    assert any(e["type"] == "compaction" for e in session.tree.entries)
    # The failed reply is kept in the file, omitted from the context.
    stops = [m["stopReason"] for m in session.tree.projection().messages if m["role"] == "assistant"]
    assert "error" not in stops
    rel_figures.add("faults")
    finish(session, pi_check)


def test_request_over_the_window_overflows_and_recovers(tmp_path, pi_check):
    """overflow_at: the provider refuses any request above N tokens (checked on every call)."""
    sleeps: list[float] = []
    turns = [f"reply {i}: " + words(250, f"r{i}x") for i in range(8)]
    session = make(tmp_path, turns, sleeps, overflow_at=3000, keep=600, tools=[])
    overflowed = 0
    for i in range(8):
        result = session.prompt(f"q{i} " + words(250, f"p{i}x"))
        assert result.error is None, result.error
        assert result.text == turns[i]
        overflowed += bool(result.compactions)
    assert overflowed >= 1, "the window was never exceeded"
    rel_figures.add("faults", overflowed)
    finish(session, pi_check)


def test_stream_dies_midway(tmp_path, pi_check):
    sleeps: list[float] = []
    dying = {"text": "this reply is cut off somewhere in the middle of its stream", "stream_dies_after": 3}
    session = make(tmp_path, [dying, "second try"], sleeps)
    result = session.prompt("stream please")
    assert result.error is None and result.text == "second try"
    assert sleeps == [2.0]
    failed = [e["message"] for e in session.tree.entries
              if e["type"] == "message" and e["message"].get("stopReason") == "error"]
    assert len(failed) == 1  # the partial reply is kept (omitted from context), not lost
    rel_figures.add("faults")
    finish(session, pi_check)


def test_malformed_tool_call(tmp_path, pi_check):
    sleeps: list[float] = []
    turns = [{"text": "calling", "tool_calls": [call("echo", text="hi")], "malformed_tool_call": True},
             "I will stop calling tools"]
    session = make(tmp_path, turns, sleeps)
    result = session.prompt("use echo")
    assert result.error is None and result.text == "I will stop calling tools"
    (tr,) = tool_results(session)
    assert tr["isError"] is True
    rel_figures.add("faults")
    finish(session, pi_check)


def test_tool_that_raises(tmp_path, pi_check):
    sleeps: list[float] = []
    turns = [{"tool_calls": [call("explode", reason="boom"), call("echo", text="still runs")]}, "handled"]
    session = make(tmp_path, turns, sleeps)
    result = session.prompt("go")
    assert result.error is None and result.text == "handled"
    results = {m["toolName"]: m for m in tool_results(session)}
    assert results["explode"]["isError"] is True
    assert "tool exploded: boom" in results["explode"]["content"][0]["text"]
    assert results["echo"]["isError"] is False
    rel_figures.add("faults")
    finish(session, pi_check)


def test_tool_that_hangs_times_out(tmp_path, pi_check):
    sleeps: list[float] = []
    turns = [{"tool_calls": [call("hang", seconds=60)]}, "gave up waiting"]
    session = make(tmp_path, turns, sleeps, tool_timeout=0.5)
    started = time.monotonic()
    result = session.prompt("go")
    assert time.monotonic() - started < 10
    assert result.error is None and result.text == "gave up waiting"
    (tr,) = tool_results(session)
    assert tr["isError"] is True and "timed out" in tr["content"][0]["text"]
    rel_figures.add("faults")
    finish(session, pi_check)


def test_bash_tool_timeout_in_the_session_folder(tmp_path, pi_check):
    from pi_nb.agent import default_tools

    sleeps: list[float] = []
    work = tmp_path / "work"
    work.mkdir()
    turns = [{"tool_calls": [{"name": "bash", "arguments": {"command": "pwd; sleep 30", "timeout": 1}}]},
             "the command was too slow"]
    session = Session.new(tmp_path / "s.jsonl", cwd=work, script=Script([*turns, NEXT]),
                          tools=default_tools(str(work)), window=32768,
                          retry=RetryPolicy(sleep=sleeps.append))
    started = time.monotonic()
    result = session.prompt("run it")
    assert time.monotonic() - started < 10
    assert result.error is None
    (tr,) = tool_results(session)
    text = tr["content"][0]["text"]
    assert tr["isError"] is True and "timed out" in text and str(work) in text
    rel_figures.add("faults")
    finish(session, pi_check)


def test_abort_mid_stream(tmp_path, pi_check):
    sleeps: list[float] = []
    long_reply = " ".join(f"word{i}" for i in range(200))
    session = make(tmp_path, [long_reply], sleeps)
    seen: list[str] = []

    def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "message_update":
            seen.append(event["delta"])
            if len(seen) == 3:
                session.abort()

    result = session.prompt("talk a lot", on_event=on_event)
    assert result.aborted
    (reply,) = [m for m in session.tree.projection().messages if m["role"] == "assistant"]
    assert reply["stopReason"] == "aborted"
    assert 0 < len(reply["content"][0]["text"]) < len(long_reply)  # the partial text is kept
    rel_figures.add("faults")
    # The script continues with the next turn after the aborted one.
    finish(session, pi_check)


def test_notebook_interrupt_mid_stream(tmp_path, pi_check):
    """A KeyboardInterrupt raised while the reply streams (what a notebook interrupt does)."""
    sleeps: list[float] = []
    long_reply = " ".join(f"word{i}" for i in range(200))
    session = make(tmp_path, [long_reply], sleeps)
    count = 0

    def on_event(event: dict[str, Any]) -> None:
        nonlocal count
        if event["type"] == "message_update":
            count += 1
            if count == 4:
                raise KeyboardInterrupt

    result = session.prompt("talk a lot", on_event=on_event)
    assert result.aborted
    assert not session.is_running
    rel_figures.add("faults")
    finish(session, pi_check)


def test_abort_while_a_tool_hangs(tmp_path, pi_check):
    sleeps: list[float] = []
    turns = [{"tool_calls": [call("hang", seconds=60), call("echo", text="quick")]}]
    session = make(tmp_path, turns, sleeps)

    def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "tool_execution_start" and event["tool_name"] == "hang":
            threading.Timer(0.3, session.abort).start()

    started = time.monotonic()
    result = session.prompt("go", on_event=on_event)
    assert time.monotonic() - started < 10
    assert result.aborted
    names = {m["toolName"]: m for m in tool_results(session)}
    assert set(names) == {"hang", "echo"}  # every call has a result, even the aborted one
    assert names["hang"]["isError"] is True
    rel_figures.add("faults")
    finish(session, pi_check)


def test_faults_in_sequence_then_resume(tmp_path, pi_check):
    """Several faults in one session, then a fresh Session.open continues where it stopped."""
    sleeps: list[float] = []
    turns = [
        {"error": "server"}, "one",
        {"tool_calls": [call("explode", reason="x")], "malformed_tool_call": True}, "two",
        {"text": "dies", "stream_dies_after": 1}, "three",
    ]
    session = make(tmp_path, turns, sleeps)
    for text in ("a", "b", "c"):
        assert session.prompt(text).error is None
    before = check_consistent(session, pi_check)
    leaf, tokens, ctx = before.leaf_id, before.context_tokens(), context_dict(before)
    assert session.path is not None
    session.tree.close()
    resumed = Session.open(session.path, tools=TOOLS, window=32768, script=Script(["resumed fine"]),
                           retry=RetryPolicy(sleep=sleeps.append))
    assert resumed.tree.leaf_id == leaf
    assert resumed.tree.context_tokens() == tokens
    assert context_dict(resumed.tree) == ctx
    result = resumed.prompt("continue")
    assert result.error is None and result.text == "resumed fine"
    assert resumed.tree.get_branch()[-3]["id"] == leaf  # continued from the same leaf
    rel_figures.add("faults", 3)
    check_consistent(resumed, pi_check)


def test_agent_error_messages_and_tool_output_are_redacted(tmp_path, monkeypatch, pi_check):
    """A live key reaching a tool output or a provider error message never hits the file."""
    key = "acme-live-Q8wE3rT6yU1iO4pA"
    monkeypatch.setenv("ACME_API_KEY", key)

    def leak(what: str) -> str:
        """Print a secret.

        Args:
            what: anything
        """
        return f"ACME_API_KEY={os.environ['ACME_API_KEY']} Authorization: Bearer {key}"

    sleeps: list[float] = []
    turns = [{"tool_calls": [call("leak", what="key")]}, "done"]
    session = make(tmp_path, turns, sleeps, tools=[tool_from_function(leak)])
    assert session.prompt("leak it").error is None
    assert session.path is not None
    assert key not in Path(session.path).read_text(encoding="utf-8")
    rel_figures.add("faults")
    finish(session, pi_check)


def test_bash_output_is_capped_before_it_is_stored(tmp_path, pi_check):
    """A command printing 5 MB: what reaches the file is capped (configurable)."""
    from pi_nb.agent import default_tools

    sleeps: list[float] = []
    command = "python3 -c \"import sys; sys.stdout.write('z' * 5_000_000)\""
    turns = [{"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}, "that was long"]
    session = Session.new(tmp_path / "s.jsonl", cwd=tmp_path, script=Script([*turns, NEXT]),
                          tools=default_tools(str(tmp_path), output_cap=10_000), window=10**7,
                          retry=RetryPolicy(sleep=sleeps.append))
    assert session.prompt("flood").error is None
    (tr,) = tool_results(session)
    text = tr["content"][0]["text"]
    assert len(text) < 11_000 and "truncated" in text
    assert session.path is not None and os.path.getsize(session.path) < 100_000
    rel_figures.add("faults")
    finish(session, pi_check)
