"""Session policy: threshold compaction, stale usage, overflow recovery, retries, persistence."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from agent_helpers import script_of, texts, turn_requests
from pinb_testkit import wordy_summary

from pi_nb.agent import OVERFLOW_RECOVERY_FAILED, RetryPolicy, Session
from pi_nb.agent.cli import compact_cli, run_prompt_cli
from pi_nb.entries import empty_usage
from pi_nb.events import AutoRetryEnd
from pi_nb.messages import COMPACTION_SUMMARY_PREFIX
from pi_nb.models.scripted import Script
from pi_nb.session import SessionTree


def _call(name, **arguments):
    return {"name": name, "arguments": arguments}


def _has_summary(request) -> bool:
    return any(COMPACTION_SUMMARY_PREFIX.strip()[:40] in text for _, text in texts(request))


def _history(session: Session, turns: int = 3) -> None:
    """A few earlier exchanges so that compaction has something to summarize."""
    script = script_of(session)
    for i in range(turns):
        script.turns.insert(script.position, f"Noted fact number {i}: the value is {i * 7}. " * 3)
        assert session.prompt(f"Please remember fact {i}, it matters for later work. " * 3).ok


# --- threshold --------------------------------------------------------------------------------


def test_threshold_compaction_fires_between_turns(make_session, recorder):
    def fetch(n: int) -> str:
        """Fetch a page of data."""
        return f"page {n}: " + "data " * 320  # ~400 tokens

    turns = [{"tool_calls": [_call("fetch", n=i)]} for i in range(1, 5)] + ["all pages read"]
    session = make_session(turns, tools=[fetch], window=2000, reserve=800, keep=100)
    result = session.prompt("Read pages 1 to 4 and report.", on_event=recorder)
    assert result.ok, result.error
    assert result.text == "all pages read"

    types = recorder.types
    first = types.index("compaction_start")
    assert recorder.events[first]["reason"] == "threshold"
    # Between turns: after a completed turn, before the next model reply starts.
    assert types[first - 1] == "turn_end"
    nxt = types.index("message_start", first)
    assert recorder.events[nxt]["message"]["role"] == "assistant"
    assert "turn_start" in types[first:nxt]

    requests = turn_requests(session)
    with_summary = [_has_summary(r) for r in requests]
    assert with_summary[0] is False
    assert True in with_summary
    switch = with_summary.index(True)
    assert 1 < switch < len(requests)
    # The estimate before that request had crossed W - R, the one before did not need to.
    compactions = [e for e in session.tree.entries if e["type"] == "compaction"]
    assert compactions and compactions[0]["tokensBefore"] > 2000 - 800
    assert result.compactions and result.compactions[0].reason == "threshold"


def test_no_compaction_below_the_threshold(make_session, recorder):
    session = make_session(["short answer"], window=100000, reserve=1000, keep=100)
    _history(session, 2)
    result = session.prompt("one more", on_event=recorder)
    assert result.ok
    assert "compaction_start" not in recorder.types
    assert not any(e["type"] == "compaction" for e in session.tree.entries)


def _session_with_stale_usage(tmp_path, compacted: bool, sleeps) -> Session:
    tree = SessionTree.create(tmp_path / "stale.jsonl", str(tmp_path))
    for i in range(3):
        tree.append_message({"role": "user", "content": [{"type": "text", "text": f"question {i} " * 20}], "timestamp": 1})
        usage = empty_usage()
        usage.update(input=3500, output=10, totalTokens=3510)
        last = tree.append_message(
            {
                "role": "assistant",
                "content": [{"type": "text", "text": f"answer {i} " * 20}],
                "api": "litellm",
                "provider": "pinb",
                "model": "scripted",
                "usage": usage,
                "stopReason": "stop",
                "timestamp": 2,
            }
        )
    if compacted:
        # A compaction that keeps the last answer: its big usage predates the compaction.
        tree.append_compaction("## Goal\nanswer questions", last["id"], 3510)
    tree.close()
    return Session.open(
        tmp_path / "stale.jsonl",
        script=Script(["fresh reply"]),
        tools=[],
        window=4000,
        reserve=1000,
        keep=50,
        retry=RetryPolicy(sleep=sleeps.append),
    )


def test_pre_prompt_check_ignores_usage_older_than_the_latest_compaction(tmp_path, recorder, sleeps):
    session = _session_with_stale_usage(tmp_path, compacted=True, sleeps=sleeps)
    before = sum(1 for e in session.tree.entries if e["type"] == "compaction")
    result = session.prompt("next question", on_event=recorder)
    assert result.ok
    assert "compaction_start" not in recorder.types
    assert sum(1 for e in session.tree.entries if e["type"] == "compaction") == before == 1


def test_pre_prompt_check_compacts_on_fresh_usage(tmp_path, recorder, sleeps):
    # Control for the test above: the same usage without a later compaction does trigger.
    session = _session_with_stale_usage(tmp_path, compacted=False, sleeps=sleeps)
    result = session.prompt("next question", on_event=recorder)
    assert result.ok
    starts = recorder.of("compaction_start")
    assert starts and starts[0]["reason"] == "threshold"
    assert recorder.types.index("compaction_start") < recorder.types.index("agent_start")
    assert len(result.compactions) >= 1


# --- overflow ----------------------------------------------------------------------------------


def test_overflow_omits_failed_reply_compacts_and_retries_once(make_session, recorder):
    session = make_session([], keep=60)
    _history(session, 3)
    script_of(session).turns += [{"error": "overflow"}, "answer after recovery"]
    result = session.prompt("a question that overflows", on_event=recorder)
    assert result.ok, result.error
    assert result.text == "answer after recovery"

    failed = next(m for m in result.replies if m["stopReason"] == "error")
    failed_entry = next(e for e in result.entries if e.get("message") is failed)
    edits = [e for e in result.entries if e["type"] == "context_edit"]
    assert [(e["targetId"], e["replacement"]) for e in edits] == [(failed_entry["id"], None)]
    compactions = [e for e in result.entries if e["type"] == "compaction"]
    assert len(compactions) == 1
    starts = recorder.of("compaction_start")
    assert [s["reason"] for s in starts] == ["overflow"]
    end = recorder.of("compaction_end")[0]
    assert end["will_retry"] is True and end["result"] is not None
    # Exactly one retry, made from the compacted context without the failed reply.
    requests = turn_requests(session)
    assert len(requests) == 3 + 2
    assert _has_summary(requests[-1])
    # The raw history still holds the failed reply.
    raw = SessionTree.open(session.path)
    assert any(e.get("message", {}).get("stopReason") == "error" for e in raw.entries)
    assert all(m.get("stopReason") != "error" for m in raw.projection().messages)


def test_second_overflow_stops_with_clear_error_and_no_second_compaction(make_session, recorder):
    session = make_session([], keep=60)
    _history(session, 3)
    script_of(session).turns += [{"error": "overflow"}, {"error": "overflow"}, "never used"]
    result = session.prompt("a question that keeps overflowing", on_event=recorder)
    assert not result.ok
    assert result.error == OVERFLOW_RECOVERY_FAILED
    assert "after one compact-and-retry attempt" in result.error
    assert len([e for e in result.entries if e["type"] == "compaction"]) == 1
    assert [s["reason"] for s in recorder.of("compaction_start")] == ["overflow"]
    ends = recorder.of("compaction_end")
    assert ends[-1]["error_message"] == OVERFLOW_RECOVERY_FAILED
    assert recorder.of("error")[-1]["message"] == OVERFLOW_RECOVERY_FAILED
    assert len(turn_requests(session)) == 3 + 2  # one retry, no third request
    assert script_of(session).turns[script_of(session).position] == "never used"


def test_silent_overflow_compacts_without_retry(make_session, recorder):
    session = make_session([], keep=60, window=30000)
    _history(session, 3)
    script_of(session).turns += ["a fine answer"]
    original = session._loop

    def loop_reporting_huge_input(system_prompt):
        loop = original(system_prompt)

        def complete(*args, **kwargs):
            from pi_nb.llm import complete as real

            reply = real(*args, **kwargs)
            reply["usage"]["input"] = 40000  # the provider accepted more than the window
            return reply

        loop.config.complete = complete
        return loop

    session._loop = loop_reporting_huge_input
    result = session.prompt("question", on_event=recorder)
    assert result.ok and result.text == "a fine answer"
    assert [s["reason"] for s in recorder.of("compaction_start")] == ["overflow"]
    assert recorder.of("compaction_end")[0]["will_retry"] is False
    assert len(turn_requests(session)) == 3 + 1  # no retry
    assert not any(e["type"] == "context_edit" for e in result.entries)


# --- transient errors ---------------------------------------------------------------------------


def test_rate_limit_is_retried_with_backoff(make_session, recorder, sleeps):
    session = make_session([{"error": "rate_limit"}, {"error": "server"}, "finally"])
    result = session.prompt("hello", on_event=recorder)
    assert result.ok and result.text == "finally"
    assert sleeps == [2.0, 4.0]
    starts = recorder.of("auto_retry_start")
    assert [s["attempt"] for s in starts] == [1, 2]
    assert "Rate limit" in starts[0]["error_message"]
    assert recorder.of("auto_retry_end") == [AutoRetryEnd(success=True, attempt=2)]
    # Failed attempts stay in the file but leave the context.
    errors = [e for e in result.entries if e.get("message", {}).get("stopReason") == "error"]
    edits = {e["targetId"] for e in result.entries if e["type"] == "context_edit"}
    assert {e["id"] for e in errors} == edits and len(edits) == 2
    assert not any(e["type"] == "compaction" for e in result.entries)


def test_retries_give_up_after_max_retries(make_session, recorder, sleeps):
    session = make_session([{"error": "unavailable"}] * 3 + ["unused"], retry=RetryPolicy(max_retries=2, sleep=sleeps.append))
    result = session.prompt("hello", on_event=recorder)
    assert not result.ok
    assert "Service unavailable" in result.error
    assert sleeps == [2.0, 4.0]
    assert recorder.of("auto_retry_end")[-1]["success"] is False


def test_fatal_errors_are_not_retried(make_session, sleeps):
    session = make_session([{"error": "auth"}, "unused"])
    result = session.prompt("hello")
    assert result.error and sleeps == []
    assert len(turn_requests(session)) == 1


# --- persistence, usage, misc --------------------------------------------------------------------


def test_reopened_file_projects_exactly_what_the_session_had(make_session):
    def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()

    session = make_session([], tools=[shout], keep=60)
    _history(session, 2)
    script_of(session).turns += [
        {"tool_calls": [_call("shout", text="hi")]},
        {"error": "rate_limit"},
        "done",
        {"error": "overflow"},
        "recovered",
    ]
    assert session.prompt("shout hi").ok
    assert session.prompt("again").ok
    session.label(session.tree.leaf_id, "end")
    reopened = SessionTree.open(session.path)
    assert reopened.projection().messages == session.context().messages
    assert reopened.leaf_id == session.tree.leaf_id
    assert [e["id"] for e in reopened.entries] == [e["id"] for e in session.tree.entries]


def test_usage_and_cost_recorded_per_reply(make_session):
    session = make_session(["one two three"])
    result = session.prompt("count")
    reply = result.replies[-1]
    assert reply["usage"]["output"] > 0 and reply["usage"]["input"] > 0
    assert result.usage["calls"] == 1
    assert result.usage["totalTokens"] == reply["usage"]["totalTokens"]
    stored = SessionTree.open(session.path).entries[-1]["message"]
    assert stored["usage"] == reply["usage"]


def test_manual_compact_preview_edit_label_navigate(make_session):
    session = make_session([], keep=60)
    _history(session, 3)
    first_user = session.tree.entries[0]["id"]
    session.label(first_user, "start")
    preview = session.compact(preview=True)
    assert preview.committed is False
    assert not any(e["type"] == "compaction" for e in session.tree.entries)
    done = session.compact(focus="the facts")
    assert done.committed and session.context().messages[0]["role"] == "compactionSummary"
    from pi_nb.compaction import AlreadyCompacted

    with pytest.raises(AlreadyCompacted):
        session.compact()
    target = [pe.id for pe in session.context().entries if pe.entry["type"] == "message"][-1]
    session.edit(target, replace="edited text")
    assert session.context().messages[-1]["content"] == [{"type": "text", "text": "edited text"}]
    with pytest.raises(ValueError):
        session.edit(target)
    nav = session.navigate("start")
    assert nav.editor_text and "remember fact 0" in nav.editor_text
    assert session.tree.leaf_id is None


def test_prompt_while_running_is_refused(make_session):
    from pi_nb.agent import SessionBusyError

    session = make_session(["a", "b"])
    errors = []

    def reenter(event):
        if event["type"] == "agent_start" and not errors:
            try:
                session.prompt("nested")
            except SessionBusyError as exc:
                errors.append(exc)

    session.prompt("outer", on_event=reenter)
    assert len(errors) == 1


def test_import_does_not_import_litellm():
    code = "import sys, pi_nb.agent; from pi_nb.agent import Session; assert 'litellm' not in sys.modules, 'litellm imported'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_cli_prompt_creates_file_streams_and_compacts(tmp_path):
    path = tmp_path / "cli" / "s.jsonl"
    path.parent.mkdir()  # the file is created, its folder must exist (see the test below)
    out, err = io.StringIO(), io.StringIO()
    status = run_prompt_cli(str(path), "hello there", no_tools=True, stream_to=out, err=err, script=["Hi! How can I help?"])
    assert status == 0, err.getvalue()
    assert out.getvalue() == "Hi! How can I help?\n"
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["type"] == "session"
    assert [json.loads(line)["message"]["role"] for line in lines[1:]] == ["user", "assistant"]

    # A small window makes the threshold fire (the last reply's usage is ~620 tokens).
    for i in range(5):
        run_prompt_cli(str(path), f"fact {i} " * 40, no_tools=True, stream_to=io.StringIO(), err=io.StringIO(), script=[f"ok {i} " * 40])
    err = io.StringIO()
    status = run_prompt_cli(
        str(path), "last", window=1500, reserve=1000, keep=40, no_tools=True, stream_to=io.StringIO(), err=err, script=["fine"]
    )
    assert status == 0
    assert "[compacting: threshold]" in err.getvalue()
    assert any(json.loads(line)["type"] == "compaction" for line in path.read_text().splitlines())


def test_cli_prompt_reports_failure_status(tmp_path):
    err = io.StringIO()
    status = run_prompt_cli(str(tmp_path / "f.jsonl"), "x", no_tools=True, stream_to=io.StringIO(), err=err, script=[{"error": "auth"}])
    assert status == 1
    assert err.getvalue().startswith("pi-nb: error:")


def test_cli_compact_preview_and_commit(tmp_path):
    path = tmp_path / "c.jsonl"
    for i in range(3):
        assert run_prompt_cli(str(path), f"fact {i} " * 40, no_tools=True, stream_to=io.StringIO(), err=io.StringIO(), script=[f"ok {i} " * 40]) == 0
    out = io.StringIO()
    assert compact_cli(str(path), preview=True, stream_to=out, keep=40) == 0
    assert out.getvalue().startswith("compaction preview (nothing written): context ")
    assert "## Goal" in out.getvalue()
    assert not any(json.loads(line)["type"] == "compaction" for line in path.read_text().splitlines())
    out = io.StringIO()
    assert compact_cli(str(path), focus="facts", stream_to=out, keep=40) == 0
    assert out.getvalue().startswith("compaction written: ")
    assert any(json.loads(line)["type"] == "compaction" for line in path.read_text().splitlines())
    err = io.StringIO()
    assert compact_cli(str(path), stream_to=io.StringIO(), err=err, keep=40) == 1
    assert "lready compacted" in err.getvalue()
    assert compact_cli(str(tmp_path / "missing.jsonl"), err=io.StringIO()) == 2


def test_cli_functions_forward_the_session_keywords_and_refuse_positional_ones(tmp_path):
    # The session's keywords are declared once (Session); the CLI functions pass them on
    # by name. A value given by position (once ``model``) is refused before anything runs.
    path = tmp_path / "c.jsonl"
    err = io.StringIO()
    with pytest.raises(TypeError, match="positional"):
        run_prompt_cli(str(path), "hi", "pinb/scripted")
    with pytest.raises(TypeError, match="positional"):
        compact_cli(str(path), False, "pinb/scripted")
    assert not path.exists()
    status = run_prompt_cli(
        str(path), "hi", model="pinb/scripted", window=4096, reserve=600, keep=40, api_base=None,
        no_tools=True, stream_to=io.StringIO(), err=err, script=["hello"],
    )
    assert status == 0, err.getvalue()
    replies = [
        e["message"] for e in map(json.loads, path.read_text().splitlines())
        if e.get("type") == "message" and e["message"]["role"] == "assistant"
    ]
    assert [(m["provider"], m["model"]) for m in replies] == [("pinb", "scripted")]


def test_window_and_budgets_from_the_model(tmp_path):
    small = Session.in_memory(tmp_path, model="pinb/smollm2")
    assert small.window == 2048
    # Pi's default reserve (16384) would exceed the window: scaled to it.
    assert (small.reserve, small.keep) == (512, 512)
    assert small._effective_tools() == []  # the model has no tool calling
    explicit = Session.in_memory(tmp_path, model="pinb/smollm2", reserve=300, keep=200)
    assert (explicit.reserve, explicit.keep) == (300, 200)
    big = Session.in_memory(tmp_path, model="pinb/scripted", window=200000)
    assert (big.reserve, big.keep) == (16384, 20000)


def test_litellm_mock_response_model(tmp_path):
    session = Session.new(tmp_path / "mock.jsonl", cwd=tmp_path, model="gpt-4o", mock_response="Hi from the mock", no_tools=True)
    deltas = []
    result = session.prompt("hello", on_event=lambda e: e["type"] == "message_update" and deltas.append(e["delta"]))
    assert result.ok and result.text == "Hi from the mock"
    assert "".join(deltas) == "Hi from the mock"
    assert session.window == 128000
    usage = result.replies[-1]["usage"]
    assert usage["input"] > 0 and usage["cost"]["total"] > 0
    assert result.usage["cost"]["total"] == usage["cost"]["total"]


@pytest.mark.slow
def test_real_local_model_round_trip(tmp_path):
    pytest.importorskip("llama_cpp")
    from pi_nb.models.smollm2 import LocalModelUnavailableError, gguf_path

    try:
        gguf_path()
    except LocalModelUnavailableError as exc:
        pytest.skip(str(exc))
    session = Session.new(tmp_path / "smol.jsonl", cwd=tmp_path, model="pinb/smollm2", max_tokens=24, temperature=0)
    result = session.prompt("Say hello in one short sentence.")
    assert result.ok, result.error
    assert result.text.strip()
    assert result.replies[-1]["usage"]["input"] > 0
    assert SessionTree.open(session.path).projection().messages == session.context().messages


def test_session_and_run_result_render_as_html(tmp_path):
    session = Session.new(tmp_path / "h.jsonl", cwd=tmp_path, model="pinb/scripted", window=4096,
                          script=["<b>bold</b> reply"])
    result = session.prompt("<script>x</script>")
    html = session._repr_html_()
    assert "pinb/scripted" in html and "<script>x" not in html
    assert "&lt;b&gt;bold&lt;/b&gt; reply" in result._repr_html_()


def test_a_compaction_that_cannot_get_under_the_threshold_says_so(make_session):
    # W − R = 400, but ~600 recent tokens are kept verbatim: no compaction can fit.
    session = make_session(["fine"] * 8, window=100000, reserve=600, keep=600)
    _history(session, 12)
    session.window = 1000
    result = session.compact()
    assert result.tokens_after > 400
    note = session.above_threshold_note(result.tokens_after)
    assert note is not None and "W − R = 400" in note and f"{result.tokens_after:,}" in note
    # With room to spare there is nothing to say.
    roomy = make_session(["fine"] * 8, name="roomy.jsonl", window=100000, reserve=600, keep=600)
    _history(roomy, 12)
    assert roomy.above_threshold_note(roomy.compact().tokens_after) is None


def test_auto_compaction_that_stays_above_the_threshold_is_reported(make_session, recorder):
    from pi_nb.agent.cli import _Printer

    session = make_session(["fine"] * 8, window=100000, reserve=600, keep=600)
    _history(session, 12)
    session.window = 1000
    out, err = io.StringIO(), io.StringIO()
    printer = _Printer(out, err)

    def both(event):
        recorder(event)
        printer(event)

    session.prompt("and now?", on_event=both)
    end = recorder.of("compaction_end")[0]
    assert end["threshold"] == 400 and end["result"].tokens_after > 400
    assert "[warning: still above W − R = 400 after compacting" in err.getvalue()


def _wordy_hooks():
    """Hooks whose session_before_compact supplies a summary far longer than the history."""
    from pi_nb.hooks import Hooks

    hooks = Hooks()
    hooks.on("session_before_compact", wordy_summary)
    return hooks


def test_cli_compact_prints_the_growth_warning_on_stderr(tmp_path):
    from pi_nb.notebook.diff import latest_compaction_diff
    from pi_nb.session.tree import SessionTree

    path = tmp_path / "g.jsonl"
    for i in range(3):
        assert run_prompt_cli(str(path), f"fact {i} " * 40, no_tools=True, stream_to=io.StringIO(), err=io.StringIO(), script=[f"ok {i} " * 40]) == 0
    out, err = io.StringIO(), io.StringIO()
    assert compact_cli(str(path), stream_to=out, err=err, keep=40, hooks=_wordy_hooks()) == 0
    diff = latest_compaction_diff(SessionTree.open(path))
    figures = f"{diff.tokens_before:,} → {diff.tokens_after:,} tokens (estimated)"
    assert out.getvalue().startswith(f"compaction written: context {figures}")
    assert f"pi-nb: warning: the compaction grew the context: {figures}" in err.getvalue()


def test_cli_prompt_notes_compaction_warnings_on_stderr(tmp_path):
    path = tmp_path / "p.jsonl"
    for i in range(5):
        run_prompt_cli(str(path), f"fact {i} " * 40, no_tools=True, stream_to=io.StringIO(), err=io.StringIO(), script=[f"ok {i} " * 40])
    err = io.StringIO()
    status = run_prompt_cli(
        str(path), "last", window=1500, reserve=1000, keep=40, no_tools=True, stream_to=io.StringIO(), err=err,
        script=["fine"], hooks=_wordy_hooks(),
    )
    text = err.getvalue()
    assert status == 0 and "[compacted: " in text and "tokens (estimated)]" in text, text
    assert "[warning: the compaction grew the context: " in text
