"""pi_nb's context (messages, settings, token estimate) must equal Pi 1.3.0's and Pi 1.6.0's,
exactly (every test runs once per release: ``[pi1.3.0-…]``, ``[pi1.6.0-…]``).

* Sessions written by Pi's own SessionManager (``generated_sessions``) are read by
  ``python -m pi_nb context FILE --leaf ID --json`` and by the Pi oracle.
* Sessions written by pi_nb's SessionTree are opened by Pi and must yield the same context.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

pytestmark = pytest.mark.compat

GEN_INDEXES = list(range(12))  # conftest.GEN_COUNT files are generated


def _compare_leaves(compat, pi_oracle, path, leaves):
    expected = pi_oracle.context_many(path, leaves)
    actual = compat.parallel(lambda leaf: compat.pi_nb_context(path, leaf), leaves)
    problems = []
    for leaf, exp, act in zip(leaves, expected, actual, strict=True):
        where = f"{Path(path).name} leaf={leaf or '<default>'}"
        if "error" in exp and set(exp) == {"error"}:
            problems.append(f"{where}: Pi oracle failed: {exp['error']}")
            continue
        if isinstance(act, Exception):
            problems.append(f"{where}: {act}")
            continue
        diff = compat.describe_mismatch(act, exp)
        if diff:
            problems.append(f"{where}: {diff}")
    return expected, problems


# ---------------------------------------------------------------------------------------------
# Pi-written files read by pi_nb


@pytest.mark.parametrize("index", GEN_INDEXES)
def test_context_matches_pi_on_generated_session(index, generated_sessions, pi_oracle, compat):
    if index >= len(generated_sessions):
        pytest.skip("fewer generated sessions")
    path = generated_sessions[index]
    _, entries = compat.load_entries(path)
    leaves = compat.pick_leaves(entries, seed=index)
    _, problems = _compare_leaves(compat, pi_oracle, path, leaves)
    assert not problems, f"{len(problems)}/{len(leaves)} leaves differ:\n" + "\n\n".join(problems)


def _message_key(entry):
    """(role, timestamp) of the context message an entry produces (timestamps are unique in
    generated files)."""
    from datetime import datetime

    if entry["type"] == "message":
        return entry["message"]["role"], entry["message"]["timestamp"]
    ms = round(datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00")).timestamp() * 1000)
    return "custom", ms


def test_generated_sessions_look_right(generated_sessions, pi_oracle, compat):
    """Sanity of the harness itself (oracle only, no pi_nb): the generated files cover the
    features we rely on and Pi's context behaves as pi-format.md describes."""
    seen = set()
    plan = []
    for path in generated_sessions:
        header, entries = compat.load_entries(path)
        assert header["version"] == 3
        # every compaction / edit (and the entry after it) plus an even sample of the rest
        marks = {e["id"] for e in entries if e["type"] in ("compaction", "context_edit")}
        marks |= {e["id"] for e in entries if e.get("parentId") in marks}
        step = max(1, len(entries) // 40)
        leaves = [e["id"] for i, e in enumerate(entries) if e["id"] in marks or i % step == 0]
        leaves.append(entries[-1]["id"])
        plan.append((path, entries, list(dict.fromkeys(leaves))))
    all_results = iter(
        pi_oracle.batch(
            [
                {"cmd": "context", "file": path, "leaf": leaf}
                for path, _, leaves in plan
                for leaf in leaves
            ]
        )
    )
    for path, entries, leaves in plan:
        by_id = {e["id"]: e for e in entries}
        for leaf in leaves:
            ctx = next(all_results)
            assert "error" not in ctx, ctx
            assert ctx["leafId"] == leaf
            branch = compat.path_ids(entries, leaf)
            comps = [by_id[i] for i in branch if by_id[i]["type"] == "compaction"]
            msgs = ctx["messages"]
            if comps:
                seen.add("compaction")
                c = comps[-1]
                # [systemMessage?, compactionSummary] first
                first = (
                    msgs[1]
                    if msgs and msgs[0]["role"] == "system" and "systemMessage" in c
                    else msgs[0]
                )
                assert first["role"] == "compactionSummary" and first["summary"] == c["summary"]
                if c["firstKeptEntryId"] == c["id"]:
                    seen.add("compaction-self")
            # without a compaction every edit on the branch acts; the last one per target wins
            if not comps:
                last_edit = {}
                for i in branch:
                    if by_id[i]["type"] == "context_edit":
                        last_edit[by_id[i]["targetId"]] = by_id[i]
                for tid, e in last_edit.items():
                    key = _message_key(by_id[tid])
                    found = [m for m in msgs if (m["role"], m.get("timestamp")) == key]
                    if e["replacement"] is None:
                        seen.add("edit-null")
                        assert not found, (path, leaf, tid)
                    else:
                        seen.add("edit-replace")
                        rep = e["replacement"]["content"]
                        assert len(found) == 1 and found[0]["content"] == rep, (path, leaf, tid)
                        if isinstance(rep, list) and key[0] in ("assistant", "toolResult"):
                            seen.add("edit-replace-blocks")
            assert set(ctx["tokens"]) == {
                "tokens",
                "usageTokens",
                "trailingTokens",
                "lastUsageIndex",
            }
            if ctx["tokens"]["lastUsageIndex"] is not None:
                seen.add("usage-trusted")
                assert msgs[ctx["tokens"]["lastUsageIndex"]]["role"] == "assistant"
            else:
                seen.add("usage-untrusted")
            if any(m["role"] == "branchSummary" for m in msgs):
                seen.add("branch-summary")
            if any(m["role"] == "custom" for m in msgs):
                seen.add("custom")
            if any(m["role"] == "bashExecution" and m.get("excludeFromContext") for m in msgs):
                seen.add("bash-excluded")
    for feature in (
        "compaction",
        "compaction-self",
        "edit-null",
        "edit-replace",
        "edit-replace-blocks",
        "usage-trusted",
        "usage-untrusted",
        "branch-summary",
        "custom",
        "bash-excluded",
    ):
        assert feature in seen, f"generated sessions never exercise {feature}"


# ---------------------------------------------------------------------------------------------
# pi_nb-written files opened by Pi

T0 = 1_700_000_000_000


def _usage(rng, zero=False):
    if zero:
        n = dict(input=0, output=0, cacheRead=0, cacheWrite=0, totalTokens=0)
    else:
        i, o = rng.randint(10, 9000), rng.randint(1, 900)
        n = dict(input=i, output=o, cacheRead=0, cacheWrite=0, totalTokens=i + o)
    return {**n, "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}


class _Writer:
    """Drives pi_nb's SessionTree with deterministic content."""

    def __init__(self, path, seed):
        from pi_nb.session import SessionTree

        self.t = SessionTree.create(str(path), cwd="/tmp/x")
        self.rng = random.Random(seed)
        self.clock = T0 + seed * 1_000_000
        self.n = 0

    def ts(self):
        self.clock += self.rng.randint(1, 5000)
        return self.clock

    def user(self, text=None):
        content = (
            text
            if text is not None
            else self.rng.choice(
                [
                    f"question {self.n} naïve 😀 𝄞",
                    [
                        {"type": "text", "text": f"array question {self.n}"},
                        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
                    ],
                ]
            )
        )
        self.n += 1
        return self.t.append_message({"role": "user", "content": content, "timestamp": self.ts()})

    def assistant(self, tool=None, stop="stop", zero=False):
        content = [
            {"type": "thinking", "thinking": "hmm", "thinkingSignature": "sig"},
            {"type": "text", "text": f"answer {self.n} 日本語"},
        ]
        if tool:
            content.append(
                {
                    "type": "toolCall",
                    "id": f"call_{self.n}",
                    "name": tool,
                    "arguments": {"path": f"src/f{self.n % 3}.py"},
                }
            )
        self.n += 1
        return self.t.append_message(
            {
                "role": "assistant",
                "content": content,
                "api": "anthropic-messages",
                "provider": "anthropic",
                "model": "claude-sonnet-4-5",
                "usage": _usage(self.rng, zero),
                "stopReason": "toolUse" if tool else stop,
                "timestamp": self.ts(),
            }
        )

    def tool_result(self, call_entry, big=0, error=False):
        call = call_entry["message"]["content"][-1]
        text = ("x" * big) if big else f"result of {call['name']}"
        return self.t.append_message(
            {
                "role": "toolResult",
                "toolCallId": call["id"],
                "toolName": call["name"],
                "content": [{"type": "text", "text": text}],
                "isError": error,
                "timestamp": self.ts(),
            }
        )

    def turn(self, tool=None, big=0):
        u = self.user()
        if tool:
            a = self.assistant(tool)
            self.tool_result(a, big=big)
        last = self.assistant()
        return u, last


def _scenario_linear(w):
    w.t.append_model_change("openai", "gpt-5")
    w.t.append_thinking_level_change("high")
    for tool in (None, "read", "write", "edit", "bash"):
        w.turn(tool)
    w.t.append_message(
        {
            "role": "bashExecution",
            "command": "ls",
            "output": "a\nb",
            "exitCode": 0,
            "cancelled": False,
            "truncated": False,
            "timestamp": w.ts(),
        }
    )
    w.assistant(stop="error", zero=True)


def _scenario_compaction(w):
    ids = []
    for i in range(6):
        u, _ = w.turn("read" if i % 2 else None, big=3000 if i == 2 else 0)
        ids.append(u["id"])
    w.t.append_compaction(
        "## Goal\nfirst summary",
        ids[3],
        12345,
        details={"readFiles": ["src/f1.py"], "modifiedFiles": []},
    )
    for _ in range(3):
        w.turn("edit")
    # second compaction keeps from inside the first one's kept range
    w.t.append_compaction("## Goal\nsecond summary", ids[4], 23456, from_hook=True)
    w.turn()
    # retain-nothing compaction: first kept = its own id
    c = w.t.append_compaction("third summary", None, 345)
    assert c["firstKeptEntryId"] == c["id"]
    w.turn("read")


def _scenario_edits(w):
    u, a = w.turn("read")
    u2, _ = w.turn("write")
    branch_entries = [e for e in w.t.entries if e["type"] == "message"]
    tr = next(e for e in branch_entries if e["message"]["role"] == "toolResult")
    w.t.append_context_edit(u["id"], None)
    w.t.append_context_edit(a["id"], {"content": "string replacement on assistant"})
    w.t.append_context_edit(tr["id"], {"content": "string replacement on toolResult"})
    w.t.append_context_edit(u2["id"], {"content": "first"})
    w.t.append_context_edit(u2["id"], {"content": [{"type": "text", "text": "second 𝄞"}]})
    w.t.append_custom_message("reminder", "remember the tests", True, details={"k": 1})
    cm = w.t.entries[-1]
    w.t.append_context_edit(cm["id"], {"content": "edited custom message"})
    w.turn()


def _scenario_branches(w):
    u1, a1 = w.turn()
    w.turn("read")
    w.t.append_label(u1["id"], "start")
    w.t.append_custom("state", {"n": 1})
    before = w.t.leaf_id
    w.t.branch(a1["id"])
    w.turn("edit")
    w.t.append_label(u1["id"], None)
    leaf_before = w.t.leaf_id
    bs = w.t.branch_with_summary(
        a1["id"], "explored another approach", details={"readFiles": [], "modifiedFiles": ["a.py"]}
    )
    if isinstance(bs, dict) and "fromId" in bs:
        assert bs["fromId"] == leaf_before, "Pi 1.3 records the abandoned leaf as fromId"
    w.turn()
    w.t.branch_with_summary(None, "", None)  # empty summary at the root: no context message
    w.turn()
    w.t.branch(before)
    w.t.append_custom_message("plan", [{"type": "text", "text": "plan text"}], False)
    w.turn("bash")


SCENARIOS = {
    "linear": _scenario_linear,
    "compaction": _scenario_compaction,
    "edits": _scenario_edits,
    "branches": _scenario_branches,
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_pi_reads_pi_nb_sessions_identically(name, tmp_path, pi_oracle, compat):
    path = tmp_path / f"{name}.jsonl"
    w = _Writer(path, seed=sorted(SCENARIOS).index(name))
    SCENARIOS[name](w)
    assert path.exists()

    header, entries = compat.load_entries(path)
    assert header is not None and header["type"] == "session" and header["version"] == 3
    assert header["cwd"] == "/tmp/x"
    assert [e["id"] for e in entries] == [e["id"] for e in w.t.entries]
    ids = set()
    for e in entries:
        assert len(e["id"]) == 8 and all(c in "0123456789abcdef" for c in e["id"]), e["id"]
        assert e["id"] not in ids
        assert e["parentId"] is None or e["parentId"] in ids, "parents precede children"
        ids.add(e["id"])
    # every line is compact JSON, one object per line
    raw = path.read_text(encoding="utf-8")
    assert raw.endswith("\n")
    for line in raw.splitlines():
        json.loads(line)

    leaves = [None, w.t.leaf_id, *compat.pick_leaves(entries, seed=7)]
    leaves = list(dict.fromkeys(leaves))
    expected, problems = _compare_leaves(compat, pi_oracle, path, leaves)
    assert not problems, "\n\n".join(problems)
    assert all(ctx.get("messages") is not None for ctx in expected)


def test_session_file_is_created_lazily(tmp_path):
    from pi_nb.session import SessionTree

    path = tmp_path / "lazy.jsonl"
    t = SessionTree.create(str(path), cwd="/tmp/x")
    t.append_model_change("anthropic", "claude-sonnet-4-5")
    t.append_thinking_level_change("low")
    assert not path.exists(), "Pi 1.3 writes nothing before the first user/assistant message"
    t.append_message({"role": "user", "content": "hi", "timestamp": T0})
    assert path.exists()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4 and json.loads(lines[0])["type"] == "session"
