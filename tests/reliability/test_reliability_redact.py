"""Secrets: API keys, bearer tokens, Authorization headers and the values of credential
environment variables never reach a session file (SessionTree.append_entry redacts)."""

from __future__ import annotations

import json
import os
import re as re_module
import string
from pathlib import Path

import pytest
import rel_figures
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_nb.redact import REDACTED, redact, redact_obj, secret_env_values
from pi_nb.session import SessionTree

FAKE_ENV_KEY = "acme-live-7Hq2pLx9Zr4Kw8Vb"  # not of any known shape: caught via os.environ

ALNUM = string.ascii_letters + string.digits
KEY_SHAPES = [
    ("sk-", 48, ALNUM),
    ("sk-proj-", 64, ALNUM + "_-"),
    ("sk-ant-api03-", 90, ALNUM + "_-"),
    ("AIza", 35, ALNUM + "_-"),
    ("xai-", 80, ALNUM),
    ("gsk_", 52, ALNUM),
    ("hf_", 34, ALNUM),
    ("ghp_", 36, ALNUM),
    ("github_pat_", 60, ALNUM + "_"),
    ("sk-or-v1-", 64, ALNUM),
]

keys = st.sampled_from(KEY_SHAPES).flatmap(
    lambda shape: st.text(alphabet=shape[2], min_size=shape[1], max_size=shape[1]).map(
        lambda body, prefix=shape[0]: prefix + body
    )
)
surroundings = st.text(alphabet=string.printable + "äé—😀", max_size=40).map(lambda s: s.replace("-", " "))
separators = st.sampled_from([" ", "\n", "=", ": ", '"', "'", "(", "[", ",", "\t"])

FUZZ = settings(max_examples=200, deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(before=surroundings, sep1=separators, key=keys, sep2=separators, after=surroundings)
def test_known_key_shapes_are_redacted_anywhere(before, sep1, key, sep2, after):
    text = before + sep1 + key + sep2 + after
    out = redact(text)
    rel_figures.add("redaction_cases")
    assert key not in out
    if key[12:] not in before + after:
        assert key[12:] not in out  # no tail of it either
    assert REDACTED in out
    assert redact(out) == out  # idempotent


@FUZZ
@given(token=st.text(alphabet=ALNUM + "._~+/-", min_size=12, max_size=80).filter(
    lambda t: any(c.isdigit() for c in t)), style=st.integers(0, 4))
def test_bearer_tokens_and_authorization_headers(token, style):
    text = [
        f"Authorization: Bearer {token}",
        f'curl -H "Authorization: Bearer {token}" https://api.example.com',
        f'{{"headers": {{"authorization": "Basic {token}"}}}}',
        f"x-api-key: {token}\nnext line",
        f"requests.get(url, headers={{'Api-Key': '{token}'}})",
    ][style]
    out = redact(text)
    rel_figures.add("redaction_cases")
    assert token not in out, out
    assert redact(out) == out


def test_env_values_by_variable_name(monkeypatch):
    for name in ("ACME_API_KEY", "SERVICE_TOKEN", "DB_SECRET", "OPENAI_API_KEY"):
        monkeypatch.setenv(name, f"value-of-{name.lower()}-123")
    monkeypatch.setenv("NOT_A_SECRET_NAME", "visible-value-123")
    monkeypatch.setenv("SHORT_TOKEN", "abc")  # too short to redact safely
    text = " ".join(os.environ[n] for n in ("ACME_API_KEY", "SERVICE_TOKEN", "DB_SECRET",
                                            "OPENAI_API_KEY", "NOT_A_SECRET_NAME"))
    out = redact(text)
    assert "value-of" not in out
    assert "[REDACTED:ACME_API_KEY]" in out and "[REDACTED:DB_SECRET]" in out
    assert "visible-value-123" in out
    assert "abc" not in secret_env_values()
    monkeypatch.delenv("ACME_API_KEY")
    assert "value-of-acme_api_key-123" in redact("value-of-acme_api_key-123")  # read live
    rel_figures.add("redaction_cases", 6)


def test_ordinary_text_is_left_alone():
    samples = [
        "Bearer authentication is described in RFC 6750.",
        "The task-based scheduler reads tokens from the queue.",
        "Use the sk- prefix for keys; see docs.",
        "authorization",
        "def risk-assessment(): pass",
        json.dumps({"usage": {"input": 10, "totalTokens": 15}, "model": "gpt-4o"}),
    ]
    for text in samples:
        assert redact(text) is text, text
    repo = Path(__file__).resolve().parents[2]
    for doc in [repo / "README.md", *sorted((repo / "pi_nb" / "session").glob("*.py"))]:
        text = doc.read_text(encoding="utf-8")
        assert redact(text) == text, doc


# An independent description of what must not survive (boundary: not inside a longer word).
LEFTOVER = re_module.compile(
    r"(?<![A-Za-z0-9_-])(sk-|AIza|xai-|gsk_|hf_|ghp_|github_pat_)[A-Za-z0-9_-]{30,}"
)


def strings(value):
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(k for k in item if isinstance(k, str))
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)


@settings(max_examples=100, deadline=None, database=None, derandomize=True)
@given(value=st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=30)
    | keys,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8) | keys, inner, max_size=4)
    | st.tuples(inner, inner),
    max_leaves=20,
))
def test_redact_obj_on_any_json_value(value):
    out = redact_obj(value)
    for text in strings(out):
        assert not LEFTOVER.search(text), text
    assert redact_obj(out) == out
    if redact_obj(value, in_place=False) is value:
        assert json.dumps(value, default=str) == json.dumps(out, default=str)
    rel_figures.add("redaction_cases")


def test_redact_obj_keeps_clean_values_identical_and_handles_depth():
    clean = {"role": "user", "content": [{"type": "text", "text": "hello"}], "n": [1, 2.5, None]}
    assert redact_obj(clean) is clean
    deep: list = []
    cursor = deep
    for _ in range(50_000):
        cursor.append([])
        cursor = cursor[0]
    cursor.append("key sk-ant-api03-" + "A" * 40)
    out = redact_obj(deep)
    assert out is not deep
    for _ in range(50_001):
        out = out[0]
    assert out == "key sk-ant-" + REDACTED


def test_nothing_with_a_live_key_is_ever_persisted(tmp_path, monkeypatch):
    """A fake key in os.environ; a tool output, an error message, tool-call arguments and a
    custom entry carry it (and other keys): the file never contains any of them."""
    monkeypatch.setenv("ACME_API_KEY", FAKE_ENV_KEY)
    anthropic = "sk-ant-api03-" + "Z" * 40
    path = tmp_path / "s.jsonl"
    tree = SessionTree.create(path, str(tmp_path))
    tree.append_message({"role": "user", "content": f"my key is {FAKE_ENV_KEY}", "timestamp": 1})
    call = {"type": "toolCall", "id": "c1", "name": "bash",
            "arguments": {"command": f"curl -H 'Authorization: Bearer {FAKE_ENV_KEY}' x"}}
    tree.append_message({"role": "assistant", "content": [call], "stopReason": "toolUse",
                         "provider": "p", "model": "m", "timestamp": 2})
    result = {"role": "toolResult", "toolCallId": "c1", "toolName": "bash",
              "content": [{"type": "text", "text": f"env: ACME_API_KEY={FAKE_ENV_KEY}\n{anthropic}"}],
              "isError": False, "timestamp": 3}
    tree.append_message(result)
    error = {"role": "assistant", "content": [], "stopReason": "error", "provider": "p",
             "model": "m", "timestamp": 4,
             "errorMessage": f"AuthenticationError: invalid x-api-key: {anthropic}"}
    tree.append_message(error)
    tree.append_custom("state", {"headers": {"Authorization": f"Bearer {FAKE_ENV_KEY}"}})
    tree.close()
    data = path.read_text(encoding="utf-8")
    assert FAKE_ENV_KEY not in data and anthropic not in data and "Z" * 20 not in data
    assert "[REDACTED:ACME_API_KEY]" in data and "sk-ant-[REDACTED]" in data
    # The objects handed over were redacted in place (nothing live left in memory either),
    # and the file re-opens to the same projection.
    assert FAKE_ENV_KEY not in json.dumps(result)
    assert anthropic not in error["errorMessage"]
    assert SessionTree.open(path).projection().messages == tree.projection().messages
    rel_figures.add("redaction_cases", 5)


def test_forks_do_not_copy_secrets_from_a_file_written_elsewhere(tmp_path, monkeypatch):
    """A session written by another tool (Pi) may hold a key: a fork never copies it."""
    key = "sk-proj-" + "k" * 40
    path = tmp_path / "pi.jsonl"
    lines = [
        {"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"},
        {"type": "message", "id": "a", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
         "message": {"role": "user", "content": f"key {key}", "timestamp": 1}},
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    tree = SessionTree.open(path)
    assert key in tree.entry("a")["message"]["content"]  # reading never alters history
    forked = tree.fork("a", path=tmp_path / "fork.jsonl")
    forked.flush()
    assert key not in (tmp_path / "fork.jsonl").read_text(encoding="utf-8")
    assert key in tree.entry("a")["message"]["content"]  # the source is left untouched


@pytest.mark.parametrize("text", ["", "plain", "x" * 10_000])
def test_redact_is_cheap_on_clean_text(text):
    assert redact(text) is text
