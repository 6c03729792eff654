"""Deterministic generator of large, realistic Pi sessions for the benchmarks.

The session is written through pi_nb's SessionTree (so it is a valid Pi 1.3 file): a system
prompt with tools, user turns with several tool-use rounds (long file reads, bash and grep
outputs), occasional errors/aborts, thinking and model changes, labels, custom entries, branches
(some with branch summaries), context edits and a few compactions.

Same arguments ⇒ byte-identical file (ids, timestamps and text all come from seeded RNGs).
Files are cached in bench/out/ with a sidecar .meta.json describing how they were made.
"""

from __future__ import annotations

import json
import os
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

from pi_nb.session import SessionTree

GENERATOR_VERSION = 4
OUT = Path(__file__).resolve().parent / "out"

_WORDS = (  # noqa: SIM905 - a word list reads better as one string
    "the a of to and in is for on with that this it as be by are from at or an not function "
    "return const let var if else import export class def self None True False await async "
    "value result error config path file test module session entry tree context token model "
    "message user assistant tool call output input buffer stream parse load write append read "
    "index cache leaf branch compaction summary usage window budget estimate projection node "
    "src lib util helpers main server client request response handler route query schema data "
    "0 1 2 3 42 100 200 404 500 1024 true false null undefined => { } ( ) [ ] ; : , . = == != "
    "+ - * / # // /* */ TODO FIXME NOTE warning info debug trace"
).split()


class _Text:
    """Slices of one big pseudo-source corpus (fast to cut, code-like lines)."""

    def __init__(self, rng: random.Random, size: int = 3_000_000) -> None:
        words = []
        total = 0
        line = 0
        while total < size:
            w = rng.choice(_WORDS)
            line += 1
            if line >= rng.randint(6, 16):
                w += "\n" + " " * (4 * rng.randint(0, 3))
                line = 0
            words.append(w)
            total += len(w) + 1
        self.corpus = " ".join(words)
        self.rng = rng

    def take(self, n: int) -> str:
        n = max(1, min(n, len(self.corpus) - 1))
        start = self.rng.randrange(0, len(self.corpus) - n)
        return self.corpus[start : start + n]


def _usage(rng: random.Random, context: int) -> dict:
    output = rng.randint(20, 1200)
    cache_read = int(context * rng.uniform(0.5, 0.95))
    inp = max(1, context - cache_read)
    return {
        "input": inp,
        "output": output,
        "cacheRead": cache_read,
        "cacheWrite": rng.randint(0, 2000),
        "totalTokens": inp + output + cache_read,
        "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.0},
    }


def generate(
    path: str | os.PathLike[str],
    entries: int = 50_000,
    seed: int = 20260115,
    tool_scale: float = 1.0,
    compactions: int = 4,
    edits: int = 30,
) -> dict:
    """Write a session with ~``entries`` entries at ``path``; returns a description."""
    rng = random.Random(seed)
    id_rng = random.Random(seed ^ 0x1D)
    text = _Text(random.Random(seed ^ 0x7E))
    clock_state = {"t": datetime(2026, 1, 15, 9, 0, 0, tzinfo=timezone.utc)}
    clock_rng = random.Random(seed ^ 0xC10C)

    def clock() -> str:
        clock_state["t"] += timedelta(milliseconds=clock_rng.randint(50, 4000))
        return clock_state["t"].isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def ms() -> int:
        return int(clock_state["t"].timestamp() * 1000)

    path = os.fspath(path)
    if os.path.exists(path):
        os.remove(path)
    header = {
        "type": "session",
        "version": 3,
        "id": f"bench-{seed}-{entries}",
        "timestamp": "2026-01-15T09:00:00.000Z",
        "cwd": "/home/dev/project",
    }
    tree = SessionTree(header, [], path, clock=clock, id_source=lambda: f"{id_rng.getrandbits(32):08x}")
    tools = [
        {"name": name, "description": f"{name} tool. " + text.take(200),
         "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}
        for name in ("read", "bash", "edit", "write", "grep")
    ]
    tree.append_model_change("anthropic", "claude-sonnet-4-5")
    tree.append_thinking_level_change("medium")
    tree.append_message({"role": "system", "content": "You are a coding agent. " + text.take(3000),
                         "sections": {"agents": text.take(1500)}, "toolsAdded": tools,
                         "timestamp": 0})
    tree.append_session_info("benchmark session")

    compaction_at = sorted(rng.sample(range(int(entries * 0.15), int(entries * 0.9)), compactions))
    edit_at = sorted(rng.sample(range(int(entries * 0.05), int(entries * 0.98)), edits))
    context = 8000
    call_n = 0
    made = {"branches": 0, "branch_summaries": 0, "compactions": 0, "edits": 0, "errors": 0}

    def big_output() -> str:
        r = rng.random()
        if r < 0.55:
            n = rng.randint(300, 2500)
        elif r < 0.9:
            n = rng.randint(2500, 9000)
        else:
            n = rng.randint(9000, 40000)
        return text.take(int(n * tool_scale))

    while len(tree) < entries:
        n = len(tree)
        if compaction_at and n >= compaction_at[0]:
            compaction_at.pop(0)
            branch = tree.get_branch()
            users = [e["id"] for e in branch[-400:] if e["type"] == "message"
                     and e["message"]["role"] == "user"]
            first_kept = users[len(users) // 2] if users else None
            tree.append_compaction("## Goal\n" + text.take(rng.randint(1500, 5000)), first_kept,
                                   context, details={"readFiles": ["src/a.py"],
                                                     "modifiedFiles": ["src/b.py"]})
            context = 12000
            made["compactions"] += 1
            continue
        if edit_at and n >= edit_at[0]:
            edit_at.pop(0)
            candidates = [e for e in tree.get_branch()[-300:] if e["type"] == "message"
                          and e["message"]["role"] == "toolResult"]
            if candidates:
                target = rng.choice(candidates)
                replacement = None if rng.random() < 0.6 else {"content": "[output elided]"}
                tree.append_context_edit(target["id"], replacement)
                made["edits"] += 1
                continue
        r = rng.random()
        if r < 0.004 and n > 200:
            # branch back to a recent user message's parent (re-prompt)
            branch = tree.get_branch()[-250:]
            users = [e for e in branch if e["type"] == "message" and e["message"]["role"] == "user"]
            if users and users[0].get("parentId"):
                target = rng.choice(users)["parentId"]
                if rng.random() < 0.5:
                    tree.branch_with_summary(target, "Explored: " + text.take(rng.randint(200, 800)))
                    made["branch_summaries"] += 1
                else:
                    tree.branch(target)
                made["branches"] += 1
                continue
        if r < 0.006:
            tree.append_thinking_level_change(rng.choice(["low", "medium", "high"]))
            continue
        if r < 0.008:
            tree.append_custom("todo-ext", {"items": [text.take(40) for _ in range(3)]})
            continue
        if r < 0.009 and tree.leaf_id:
            tree.append_label(tree.leaf_id, f"checkpoint-{n}")
            continue
        # one user turn
        tree.append_message({"role": "user", "content": text.take(rng.randint(40, 600)),
                             "timestamp": ms()})
        context += 200
        for _ in range(rng.randint(1, 6)):
            calls = []
            for _ in range(1 if rng.random() < 0.8 else rng.randint(2, 3)):
                call_n += 1
                name = rng.choice(["read", "read", "bash", "grep", "edit"])
                args = ({"path": f"src/mod{rng.randint(0, 300)}.py"} if name in ("read", "edit")
                        else {"command": text.take(rng.randint(10, 120))})
                if name == "edit":
                    args.update(oldText=text.take(rng.randint(50, 400)),
                                newText=text.take(rng.randint(50, 400)))
                calls.append({"type": "toolCall", "id": f"toolu_{call_n:07d}", "name": name,
                              "arguments": args})
            stop = "toolUse"
            if rng.random() < 0.01:
                stop = rng.choice(["error", "aborted"])
                made["errors"] += 1
            content = [{"type": "thinking", "thinking": text.take(rng.randint(50, 700)),
                        "thinkingSignature": "sig" + text.take(40)},
                       {"type": "text", "text": text.take(rng.randint(20, 300))}, *calls]
            tree.append_message({
                "role": "assistant", "content": content, "api": "anthropic-messages",
                "provider": "anthropic", "model": "claude-sonnet-4-5",
                "usage": _usage(rng, context) if stop != "error" else _usage(rng, 0),
                "stopReason": stop, "timestamp": ms(),
            })
            if stop in ("error", "aborted"):
                break
            for call in calls:
                out = big_output()
                context += len(out) // 4
                tree.append_message({
                    "role": "toolResult", "toolCallId": call["id"], "toolName": call["name"],
                    "content": [{"type": "text", "text": out}],
                    "isError": rng.random() < 0.05, "timestamp": ms(),
                })
        tree.append_message({
            "role": "assistant", "content": [{"type": "text", "text": text.take(rng.randint(50, 900))}],
            "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
            "usage": _usage(rng, context), "stopReason": "stop", "timestamp": ms(),
        })
    tree.close()
    made["entries"] = len(tree)
    made["bytes"] = os.path.getsize(path)
    return made


def cached(name: str, **kwargs) -> tuple[Path, dict]:
    """The generated file ``bench/out/<name>.jsonl`` (regenerated when the recipe changed)."""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.jsonl"
    meta_path = OUT / f"{name}.meta.json"
    recipe = {"generator": GENERATOR_VERSION, **kwargs}
    if path.exists() and meta_path.exists():
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("recipe") == recipe and meta.get("bytes") == path.stat().st_size:
            return path, meta
    tmp = OUT / f"{name}.tmp.jsonl"
    made = generate(tmp, **kwargs)
    os.replace(tmp, path)
    meta = {"recipe": recipe, **made}
    meta_path.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return path, meta
