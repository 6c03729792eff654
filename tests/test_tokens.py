"""Token accounting: Pi's chars/4 estimate, usage-first totals, projected estimate, tiktoken."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap

import pytest
from pinb_testkit import assistant, new_tree, tool_call, tool_result, usage, user

from pi_nb.entries import js_len, js_stringify
from pi_nb.tokens import (
    IMAGE_CHARS,
    TokenCache,
    assistant_usage,
    calculate_context_tokens,
    count_exact,
    encoding_for,
    estimate_context_tokens,
    estimate_projected_context_tokens,
    estimate_tokens,
    last_assistant_usage,
    message_chars,
    should_compact,
)

IMG = {"type": "image", "data": "AAAA", "mimeType": "image/png"}


# --- estimate_tokens -----------------------------------------------------------------------------


def test_utf16_code_units():
    assert js_len("𝄞") == 2
    assert js_len("é") == 1
    assert js_len("a𝄞b") == 4
    assert message_chars(user("𝄞𝄞𝄞")) == 6
    assert estimate_tokens(user("𝄞𝄞𝄞")) == 2
    assert estimate_tokens(user("𝄞𝄞")) == 1
    assert estimate_tokens(user("abcde")) == 2  # ceil


def test_user_string_and_text_blocks():
    assert message_chars(user("hello")) == 5
    blocks = [{"type": "text", "text": "abc"}, {"type": "text", "text": "de"}]
    assert message_chars(user(blocks)) == 5


@pytest.mark.parametrize("role", ["user", "toolResult", "custom"])
def test_images_cost_4800_chars_for_user_tool_result_custom(role):
    message = {"role": role, "content": [{"type": "text", "text": "abcd"}, IMG, IMG],
               "timestamp": 0}
    assert IMAGE_CHARS == 4800
    assert message_chars(message) == 4 + 2 * 4800
    assert estimate_tokens(message) == math.ceil((4 + 9600) / 4)


def test_assistant_text_thinking_and_tool_call_json():
    args = {"path": "a b", "n": 1.0, "u": "é", "nested": {"x": [1, "𝄞"]}}
    message = assistant("hi", calls=[tool_call("c1", "read", **args)])
    message["content"].insert(0, {"type": "thinking", "thinking": "hmm…"})
    expected_json = '{"path":"a b","n":1,"u":"é","nested":{"x":[1,"𝄞"]}}'
    assert js_stringify(args) == expected_json
    assert message_chars(message) == 2 + 4 + len("read") + js_len(expected_json)
    # images in assistant content are not counted
    message["content"].append(IMG)
    assert message_chars(message) == 2 + 4 + len("read") + js_len(expected_json)


def test_bash_execution_and_summaries():
    bash = {"role": "bashExecution", "command": "ls -la", "output": "x" * 10, "exitCode": 0,
            "cancelled": False, "truncated": False, "timestamp": 0}
    assert message_chars(bash) == 16
    assert estimate_tokens(bash) == 4
    assert message_chars({"role": "branchSummary", "summary": "abcdefgh", "fromId": "x",
                          "timestamp": 0}) == 8
    assert message_chars({"role": "compactionSummary", "summary": "𝄞", "tokensBefore": 1,
                          "timestamp": 0}) == 2
    assert message_chars({"role": "somethingElse", "content": "long text"}) == 0


def test_system_sections_and_tools_added():
    tools = [{"name": "read", "description": "Read a file", "parameters": {"type": "object"}}]
    system = {"role": "system", "content": "Prompt", "sections": {"a": "xyz", "b": None, "c": ""},
              "toolsAdded": tools, "timestamp": 0}
    expected = 6 + 3 + len(json.dumps(tools, separators=(",", ":")))
    assert message_chars(system) == expected
    system_blocks = {"role": "system", "content": [{"type": "text", "text": "ab"}, IMG],
                     "timestamp": 0}
    assert message_chars(system_blocks) == 2 + 4800


@pytest.mark.parametrize("value, js", [
    (1.2345678901234568e20, "123456789012345680000"),
    (0.00001, "0.00001"),
    (0.000001, "0.000001"),
    (1e-7, "1e-7"),
    (1e21, "1e+21"),
    (-0.0, "0"),
    (2.5, "2.5"),
])
def test_js_stringify_numbers_like_javascript(value, js):
    assert js_stringify(value) == js


def test_js_stringify_strings_and_key_order():
    assert js_stringify({"b": 1, "a": [True, None, "x\n\"y\""]}) == '{"b":1,"a":[true,null,"x\\n\\"y\\""]}'
    assert js_stringify("\ud83d") == '"\\ud83d"'
    assert js_stringify("𝄞") == '"𝄞"'


# --- usage ----------------------------------------------------------------------------------------


def test_calculate_context_tokens():
    assert calculate_context_tokens(usage(1000, 500, 200, 100, total=0)) == 1800
    assert calculate_context_tokens(usage(1000, 500, 200, 100, total=5000)) == 5000
    assert calculate_context_tokens(usage()) == 0


def test_aborted_error_and_zero_usage_assistants_are_not_usage_sources():
    good = assistant("ok", tokens=700)
    aborted = assistant("x", stop="aborted", tokens=900)
    error = assistant("x", stop="error", tokens=900)
    zero = assistant("x", tokens=0)
    assert assistant_usage(good)["totalTokens"] == 700
    for bad in (aborted, error, zero, user("x")):
        assert assistant_usage(bad) is None
    no_usage = {k: v for k, v in good.items() if k != "usage"}
    assert assistant_usage(no_usage) is None

    def entry(m):
        return {"type": "message", "message": m}

    entries = [entry(good), entry(aborted), entry(error), entry(zero)]
    assert last_assistant_usage(entries)["totalTokens"] == 700
    assert last_assistant_usage([entry(user("x"))]) is None


def test_estimate_context_tokens_usage_plus_trailing():
    msgs = [
        user("a" * 40),
        assistant("a" * 8, tokens=1000),
        user("b" * 8),
        tool_result(text="c" * 16),
        assistant("x", stop="error", tokens=5000),
    ]
    est = estimate_context_tokens(msgs)
    trailing = 2 + 4 + 1
    assert est.to_dict() == {"tokens": 1000 + trailing, "usageTokens": 1000,
                             "trailingTokens": trailing, "lastUsageIndex": 1}


def test_estimate_context_tokens_without_usage():
    msgs = [user("a" * 40), assistant("b" * 8, tokens=0)]
    est = estimate_context_tokens(msgs)
    assert (est.tokens, est.usageTokens, est.trailingTokens, est.lastUsageIndex) == (12, 0, 12, None)
    assert estimate_context_tokens([]).tokens == 0


def test_projected_estimate_distrusts_usage_older_than_latest_edit():
    tree = new_tree()
    u = tree.append_message(user("a" * 400))
    tree.append_message(assistant("b" * 40, tokens=5000))
    assert tree.context_tokens().tokens == 5000
    tree.append_context_edit(u["id"], {"content": "short"})
    t = tree.context_tokens()
    assert t.lastUsageIndex is None and t.usageTokens == 0
    assert t.tokens == math.ceil(5 / 4) + 10
    tree.append_message(user("c" * 8))
    tree.append_message(assistant("d", tokens=300))
    tree.append_message(tool_result(text="e" * 40))
    t = tree.context_tokens()
    assert (t.tokens, t.usageTokens, t.trailingTokens, t.lastUsageIndex) == (310, 300, 10, 3)


def test_projected_estimate_distrusts_usage_kept_across_compaction():
    tree = new_tree()
    u = tree.append_message(user("a" * 400))
    tree.append_message(assistant("b" * 40, tokens=5000))
    tree.append_compaction("s" * 20, u["id"], 5000)
    t = tree.context_tokens()
    assert t.lastUsageIndex is None
    assert t.tokens == 5 + 100 + 10


def test_projected_heuristic_counts_the_replayed_system_message_once():
    tree = new_tree()
    tree.append_message({"role": "system", "content": "aaaa", "timestamp": 0})
    u = tree.append_message(user("x" * 8))
    tree.append_message({"role": "system", "content": "bbbb", "timestamp": 1})
    tree.append_message(assistant("y", tokens=999))
    tree.append_context_edit(u["id"], None)
    t = tree.context_tokens()
    # replay "aaaa\n\nbbbb" = 10 chars -> 3 tokens (separately 1 + 1); assistant "y" -> 1
    assert t.tokens == 3 + 1
    p = tree.projection()
    assert estimate_projected_context_tokens(p).to_dict() == t.to_dict()


def test_projected_estimate_trusts_usage_after_edit():
    tree = new_tree()
    u = tree.append_message(user("a" * 400))
    tree.append_context_edit(u["id"], None)
    tree.append_message(user("q"))
    tree.append_message(assistant("r", tokens=42))
    assert tree.context_tokens().tokens == 42
    assert tree.context_tokens().lastUsageIndex == 1


def test_should_compact():
    assert should_compact(95000, 100000, 10000) is True
    assert should_compact(89000, 100000, 10000) is False
    assert should_compact(90000, 100000, 10000) is False  # strictly greater
    assert should_compact(95000, 100000, 10000, enabled=False) is False
    assert should_compact(100000 - 16384 + 1, 100000) is True


def test_token_cache_by_identity():
    cache = TokenCache()
    m = user("abcdefgh")
    assert cache.estimate(m) == 2
    assert cache.estimate(m) == 2 and len(cache) == 1
    other = user("abcdefgh" * 2)
    assert cache.estimate(other) == 4 and len(cache) == 2


# --- exact counts ---------------------------------------------------------------------------------


def test_encoding_for_models():
    assert encoding_for("gpt-4o") == ("o200k_base", True)
    assert encoding_for("openai/gpt-4.1-mini") == ("o200k_base", True)
    assert encoding_for("gpt-4") == ("cl100k_base", True)
    assert encoding_for("anthropic/claude-sonnet-4") == ("o200k_base", False)
    assert encoding_for(None) == ("o200k_base", True)


def test_count_exact_offline_from_litellm_files(tmp_path):
    """No network and an empty tiktoken cache: the BPE files must come from litellm."""
    script = textwrap.dedent("""
        import json, socket, sys
        def refuse(*a, **k):
            raise OSError("network disabled in test")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from pi_nb.tokens import count_exact
        msgs = [{"role": "user", "content": "hello world", "timestamp": 0}]
        a = count_exact(msgs, "gpt-4o")
        b = count_exact(msgs, "anthropic/claude-sonnet-4")
        c = count_exact(msgs, "gpt-4")
        print(json.dumps([[a.tokens, a.encoding, a.kind], [b.tokens, b.encoding, b.kind],
                          [c.tokens, c.encoding, c.kind], "litellm" in sys.modules]))
    """)
    env = {k: v for k, v in os.environ.items()
           if k not in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR")}
    env["TMPDIR"] = str(tmp_path)  # tiktoken's default cache lives under the temp dir
    env["HTTPS_PROXY"] = env["HTTP_PROXY"] = "http://127.0.0.1:9"
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    a, b, c, litellm_imported = json.loads(proc.stdout.strip().splitlines()[-1])
    assert a == [2 + 4, "o200k_base", "exact"]  # "hello world" = 2 tokens + 4 per message
    assert b == [6, "o200k_base", "estimated"]
    assert c == [2 + 4, "cl100k_base", "exact"]
    assert litellm_imported is False  # the files are found without importing litellm
    assert not any(tmp_path.iterdir())


def test_count_exact_images_and_tool_calls():
    import tiktoken  # noqa: F401  (count_exact loads it)

    from pi_nb.tokens import get_encoding

    enc = get_encoding("o200k_base")
    args = {"path": "src/app.py"}
    msg = assistant("", calls=[tool_call("c", "read", **args)])
    expected = len(enc.encode("read" + json.dumps(args, separators=(",", ":")))) + 4
    assert count_exact([msg], "gpt-4o").tokens == expected
    with_img = {"role": "user", "content": [{"type": "text", "text": "hello world"}, IMG],
                "timestamp": 0}
    assert count_exact([with_img], "gpt-4o").tokens == 2 + 4 + 1200
