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
    check_redacted_anywhere(before, sep1, key, sep2, after)


def check_redacted_anywhere(before: str, sep1: str, key: str, sep2: str, after: str) -> None:
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
    monkeypatch.setenv("PLAIN_SETTING_NAME", "visible-value-123")
    monkeypatch.setenv("SHORT_TOKEN", "abc")  # too short to redact safely
    text = " ".join(os.environ[n] for n in ("ACME_API_KEY", "SERVICE_TOKEN", "DB_SECRET",
                                            "OPENAI_API_KEY", "PLAIN_SETTING_NAME"))
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


# --- the broad list: Stripe, Slack, JWTs, URL passwords, env names -----------------------------

B64URL = ALNUM + "_-"
new_shapes = st.one_of(
    st.tuples(st.sampled_from(["sk_live_", "rk_live_", "sk_test_", "rk_test_"]),
              st.text(alphabet=ALNUM, min_size=24, max_size=99)).map("".join),
    st.tuples(st.sampled_from(["xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-"]),
              st.text(alphabet=string.digits, min_size=10, max_size=13),
              st.just("-"), st.text(alphabet=ALNUM, min_size=24, max_size=32)).map("".join),
    st.tuples(st.just("eyJ"), st.text(alphabet=B64URL, min_size=10, max_size=40), st.just(".eyJ"),
              st.text(alphabet=B64URL, min_size=10, max_size=80), st.just("."),
              st.text(alphabet=B64URL, min_size=16, max_size=86)).map("".join),
)


@FUZZ
@given(before=surroundings, sep1=separators, key=new_shapes, sep2=separators, after=surroundings)
def test_stripe_slack_and_jwt_shapes_are_redacted_anywhere(before, sep1, key, sep2, after):
    check_redacted_anywhere(before, sep1, key, sep2, after)


url_passwords = st.text(alphabet=ALNUM + "!$%&()*+,;=~.-_:@", min_size=1, max_size=30).filter(
    lambda p: not p.startswith("[REDACTED"))


@FUZZ
@given(before=surroundings, scheme=st.sampled_from(["postgres", "postgresql", "mysql", "redis", "amqp",
                                                    "mongodb+srv", "https", "ftp"]),
       user=st.text(alphabet=ALNUM + "._-", max_size=12), password=url_passwords,
       host=st.sampled_from(["db.example.com", "localhost:5432", "10.0.0.7", "[::1]:6379"]),
       tail=st.sampled_from(["", "/app", "/app?sslmode=require", "#frag", "/"]),
       sep=separators, after=surroundings)
def test_url_passwords_are_redacted_in_any_url(before, scheme, user, password, host, tail, sep, after):
    url = f"{scheme}://{user}:{password}@{host}{tail}"
    out = redact(before + " " + url + sep + after)
    rel_figures.add("redaction_cases")
    assert f"{scheme}://{user}:{REDACTED}@{host}{tail}" in out, out
    assert redact(out) == out


def test_env_values_by_name_broad_list(monkeypatch):
    """Every name the bash tool treats as a credential, the redactor does too (one list):
    numbered suffixes, names without an underscore, PWD as a word, AUTH, PRIVATE…"""
    secret = {
        "PGPASSWORD": "pg-hunter2-Xy", "OPENAI_API_KEY_2": "second-key-value-1",
        "MYSQL_PWD": "mysql-pwd-value", "DB_PASS": "db-pass-value-9", "NPM_AUTH": "npm-auth-value",
        "GITHUB_PRIVATE": "private-value-7", "AWS_SECRET_ACCESS_KEY": "aws-secret-value",
        "STRIPE_KEY": "stripe-key-value", "SLACK_TOKEN2": "slack-token-value",
        "APIKEY": "plain-apikey-value", "SMTP_PASSWD": "smtp-passwd-value",
        "GOOGLE_CREDENTIALS": "google-cred-value", "ssh_passphrase": "lower-case-name",
        "KEY": "bare-key-value-1",
    }
    public = {
        "PWD": "/work/some/dir", "OLDPWD": "/work/other/dir", "GIT_AUTHOR_NAME": "Ada Lovelace",
        "SSH_AUTH_SOCK": "/tmp/ssh-XXXX/agent.1", "TIKTOKEN_CACHE_DIR": "/opt/tiktoken/cache",
        "KEYBOARD_LAYOUT": "dvorak-programmer", "MONKEYPATCH_MODE": "everywhere-now",
        "PASSENGER_APP_ENV": "production-env", "XAUTHORITY": "/home/u/.Xauthority",
    }
    for name, value in {**secret, **public}.items():
        monkeypatch.setenv(name, value)
    text = "\n".join(f"{n}={v}" for n, v in {**secret, **public}.items())
    out = redact(text)
    for name, value in secret.items():
        assert value not in out, name
        assert f"[REDACTED:{name}]" in out, name
    for name, value in public.items():
        assert value in out, name
    from pi_nb.agent.tools import redact_secrets

    bash = redact_secrets(text)
    for name, value in secret.items():
        assert value not in bash, name
    for name, value in public.items():
        assert value in bash, name
    rel_figures.add("redaction_cases", len(secret) + len(public))


env_names = st.lists(
    st.sampled_from(["OPENAI", "API", "KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PWD", "PASS",
                     "AUTH", "PRIVATE", "CREDENTIAL", "CREDENTIALS", "DB", "PG", "HOME", "PATH",
                     "DIR", "NAME", "USER", "2", "10", "MY", "APP", "AUTHOR", "KEYBOARD"]),
    min_size=1, max_size=4,
).flatmap(lambda words: st.sampled_from(["_", ""]).map(lambda sep: sep.join(words)))


@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(name=env_names)
def test_bash_tool_and_redactor_scrub_the_same_names(name):
    """One list everywhere: a value the bash tool scrubs from its output never reaches a
    session file through `read` or model text either, and the other way round."""
    from pi_nb.agent.tools import redact_secrets

    value = "v4lue-of-the-variable"
    env = {name: value}
    by_bash = value not in redact_secrets(f"out {value} end", env)
    by_redactor = value not in redact(f"out {value} end", env)
    assert by_bash == by_redactor, name
    rel_figures.add("redaction_cases")


def test_more_ordinary_text_is_left_alone(monkeypatch):
    """Words, URLs without credentials and short or boolean env values change nothing."""
    monkeypatch.setenv("ENABLE_TOKEN", "1")
    monkeypatch.setenv("USE_AUTH", "true")
    monkeypatch.setenv("DB_PASSWORD", "short")
    samples = [
        "Enter your password, then the token from the authenticator app.",
        "The secret key is stored in a vault; rotate credentials monthly (PASSWORD policy).",
        "1 + 1 = 2, true or false, 1 1 1 short",
        "https://example.com:8080/path?user=a@b.c and ssh://git@github.com/org/repo.git",
        "http://[::1]:8000/ and mailto:someone@example.com and user@host:22",
        "git clone git@github.com:org/repo.git; scp file user@host:/tmp/",
        "Hey Jude, eyJ is how base64 of '{\"' starts; eyJhbGciOi alone is no token.",
        "Use sk_live_ or sk_test_ prefixes; pk_live_51H8abcdefghijklmnopqrstu is public.",
        "The xoxb- prefix marks Slack bot tokens.",
        "a.b.c version 1.2.3 and file.tar.gz",
        "time 12:30@home, ratio 3:4",
    ]
    for text in samples:
        assert redact(text) is text, text
    rel_figures.add("redaction_cases", len(samples))


def test_read_output_and_model_text_are_redacted_in_the_session_file(tmp_path, monkeypatch):
    """End to end through Session and pinb/scripted: a file the `read` tool returns and a
    reply the model writes carry every new shape and env values under broad names; the
    session file holds none of them, and the next prompt still works."""
    from pi_nb.agent import Session

    pg, numbered = "pg-Hunter2-Live9", "openai-second-key-7Qx"
    monkeypatch.setenv("PGPASSWORD", pg)
    monkeypatch.setenv("OPENAI_API_KEY_2", numbered)
    stripe = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
    slack = "xoxb-123456789012-" + "AbCdEfGhIjKlMnOpQrStUvWx"
    jwt = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
           "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")
    url_password = "s3cr3t-Url-Pass"
    (tmp_path / "config.env").write_text(
        f"DATABASE_URL=postgres://app:{url_password}@db.internal:5432/app\n"
        f"STRIPE={stripe}\nSLACK={slack}\nSESSION={jwt}\nPG={pg}\n", encoding="utf-8")
    script = [
        {"text": "Reading the config.", "tool_calls": [{"name": "read", "arguments": {"path": "config.env"}}]},
        f"Found {stripe}, {slack} and the second key {numbered}; token {jwt}; "
        f"redis://:{url_password}@cache:6379",
        "next prompt answered",
    ]
    session = Session.new(tmp_path / "s.jsonl", cwd=tmp_path, script=script)
    result = session.prompt("what is in config.env?")
    assert result.error is None, result.error
    results = [m for m in session.tree.projection().messages if m.get("role") == "toolResult"]
    assert results and "DATABASE_URL=postgres://app:" in json.dumps(results)  # read really ran
    assert session.prompt("and now?").text == "next prompt answered"
    session.close()
    data = (tmp_path / "s.jsonl").read_text(encoding="utf-8")
    for secret in (pg, numbered, stripe, slack, jwt, url_password):
        assert secret not in data, secret
    assert "[REDACTED:PGPASSWORD]" in data and "[REDACTED:OPENAI_API_KEY_2]" in data
    assert "sk_live_[REDACTED]" in data and "xoxb-[REDACTED]" in data and "eyJ[REDACTED]" in data
    assert f"postgres://app:{REDACTED}@db.internal:5432/app" in data
    rel_figures.add("redaction_cases", 6)


@pytest.mark.parametrize("text", ["eyJ" * 30_000, "eyJ" * 30_000 + "." + "a" * 9, "://a:" + "b" * 100_000,
                                  "xoxb-" * 20_000, "://" * 30_000])
def test_redaction_stays_linear_on_long_key_like_runs(text):
    """A long base64 run full of "eyJ" (image data, a hostile file) must not make the JWT
    rule rescan the run from every occurrence: 90 KB took 18 s that way."""
    import time

    started = time.perf_counter()
    redact(text)
    assert time.perf_counter() - started < 2.0
