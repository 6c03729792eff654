"""Hypothesis strategies for hostile session files, and the checks every loaded file must pass.

A file is a list of lines; each line is a well-formed entry with garbage in any field, a
structurally broken entry, or raw garbage (invalid UTF-8, NUL bytes, truncated or deeply
nested JSON, JSON scalars). Ids come from a small pool so duplicates, cycles, dangling
parents and off-branch references happen often.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

IDS = ["a", "b", "c", "d", "e", "f", "g", "h"]
ROLES = ["user", "assistant", "toolResult", "system", "bashExecution", "custom", "hookMessage",
         "branchSummary", "compactionSummary", "weird", ""]
TYPES = ["message", "thinking_level_change", "model_change", "compaction", "branch_summary",
         "custom", "custom_message", "label", "session_info", "usage", "context_edit", "session",
         "unknown_future_type"]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12),
)
garbage = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=6,
)
ids = st.one_of(st.sampled_from(IDS), garbage)
maybe_ids = st.one_of(st.sampled_from([*IDS, None, "zz-missing"]), garbage)
timestamps = st.one_of(
    st.sampled_from(["2026-01-01T00:00:00.000Z", "2026-01-01T00:00:05.000Z", "not a date",
                     "2026-13-45T99:99:99Z", ""]),
    garbage,
)
texts = st.one_of(st.text(max_size=20), st.sampled_from(["\ud83d", "a\x00b", "\u2028", "x" * 300]))
blocks = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.one_of(texts, garbage)}),
    st.fixed_dictionaries({"type": st.just("thinking"), "thinking": st.one_of(texts, garbage)}),
    st.fixed_dictionaries({"type": st.just("toolCall"), "id": st.one_of(st.text(max_size=4), garbage),
                           "name": st.one_of(st.text(max_size=6), garbage),
                           "arguments": garbage}),
    st.fixed_dictionaries({"type": st.just("image"), "data": st.one_of(st.just("AAAA"), garbage),
                           "mimeType": st.one_of(st.just("image/png"), garbage)}),
    garbage,
)
contents = st.one_of(texts, st.lists(blocks, max_size=4), garbage)


@st.composite
def messages(draw: Any) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(garbage)  # message is not a dict at all
    message: dict[str, Any] = {"role": draw(st.one_of(st.sampled_from(ROLES), garbage))}
    for key, value in (
        ("content", contents), ("timestamp", garbage), ("usage", st.one_of(garbage, st.fixed_dictionaries(
            {"input": garbage, "output": garbage, "totalTokens": st.one_of(st.integers(-5, 10**6), garbage)}))),
        ("stopReason", st.one_of(st.sampled_from(["stop", "error", "aborted", "toolUse", "length"]), garbage)),
        ("provider", garbage), ("model", garbage), ("errorMessage", garbage),
        ("toolCallId", garbage), ("toolName", garbage), ("isError", garbage),
        ("command", garbage), ("output", garbage), ("summary", garbage), ("sections", garbage),
        ("toolsAdded", garbage), ("excludeFromContext", garbage), ("customType", garbage),
    ):
        if draw(st.booleans()):
            message[key] = draw(value)
    return message


@st.composite
def entries(draw: Any) -> Any:
    kind = draw(st.one_of(st.sampled_from(TYPES), garbage))
    entry: dict[str, Any] = {"type": kind}
    if draw(st.integers(0, 14)):
        entry["id"] = draw(ids)
    if draw(st.integers(0, 14)):
        entry["parentId"] = draw(maybe_ids)
    if draw(st.booleans()):
        entry["timestamp"] = draw(timestamps)
    fields = {
        "message": messages(), "thinkingLevel": garbage, "provider": garbage, "modelId": garbage,
        "summary": st.one_of(texts, garbage), "firstKeptEntryId": maybe_ids, "tokensBefore": garbage,
        "systemMessage": st.one_of(messages(), garbage), "fromId": maybe_ids, "customType": garbage,
        "content": contents, "display": garbage, "details": garbage, "targetId": maybe_ids,
        "label": garbage, "name": garbage, "replacement": st.one_of(
            st.none(), st.fixed_dictionaries({"content": contents}), garbage),
        "kind": garbage, "usage": garbage, "data": garbage,
    }
    for key, strategy in fields.items():
        if draw(st.integers(0, 3)) == 0:
            entry[key] = draw(strategy)
    if kind == "message" and draw(st.integers(0, 3)):
        entry["message"] = draw(messages())
    return entry


def _dump(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


raw_lines = st.one_of(
    st.binary(max_size=40),  # invalid UTF-8, NUL bytes, anything
    st.sampled_from([
        b"", b"   ", b"\x00", b"null", b"[]", b"42", b'"str"', b"true", b"{", b'{"type":"message"',
        b'{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"x\xff\xfe"}}',
        b'{"type":"message","id":"n","message":{"role":"user","content":"a\x00b"}}',
        b'{"type":"message","id":"s","parentId":null,"message":{"role":"user","content":"\\ud83d"}}',
        b'{"type":"label","id":"h","targetId":"a","label":NaN}',
        b'{"type":"usage","id":"g","n":123456789012345678901234567890}',
        b'\xef\xbb\xbf{"type":"session","version":3,"id":"bom"}',
        b'{"type":"message","id":"d","parentId":"d","message":{"role":"user","content":"self"}}',
    ]),
    st.integers(1, 150).map(lambda d: b'{"type":"custom","id":"q","data":' + b"[" * d + b"]" * d + b"}"),
    st.integers(5000, 20000).map(lambda d: b'{"type":"custom","id":"r","data":' + b"[" * d + b"]" * d + b"}"),
    st.integers(5000, 20000).map(lambda d: b"{\"a\":" * d + b"1" + b"}" * d),
)


@st.composite
def headers(draw: Any) -> bytes:
    choice = draw(st.integers(0, 19))
    if choice == 0:
        return draw(raw_lines)
    header: dict[str, Any] = {"type": "session", "id": draw(st.one_of(st.just("sess"), garbage))
                              if choice == 1 else "sess"}
    version = draw(st.one_of(st.just(3), st.sampled_from([1, 2, None, "3", 99, -1, 2.5]))) \
        if choice < 6 else 3
    if version is not None:
        header["version"] = version
    header["timestamp"] = "2026-01-01T00:00:00.000Z"
    header["cwd"] = draw(st.one_of(st.just("/tmp"), garbage)) if choice == 2 else "/tmp"
    return _dump(header)


@st.composite
def session_files(draw: Any) -> bytes:
    lines = [draw(headers())]
    for _ in range(draw(st.integers(0, 14))):
        lines.append(draw(st.one_of(entries().map(_dump), entries().map(_dump), raw_lines)))
    data = b"\n".join(lines)
    ending = draw(st.sampled_from([b"\n", b"", b"\n\n", b"\r\n"]))
    return data + ending


# --- checks ------------------------------------------------------------------------------------

LINE_REF = re.compile(r":(\d+):")


def check_rejection(exc: BaseException, path: str) -> None:
    """A refused file: a typed SessionError whose one-line message names the file (and the
    line of the first JSON object, when there is one)."""
    from pi_nb.session import SessionError

    assert isinstance(exc, SessionError), repr(exc)
    message = str(exc)
    assert "\n" not in message
    assert path in message, message


def expected_entry_count(data: bytes) -> int | None:
    if data == b"":
        return 0  # an empty file gets a fresh header (Pi 1.3)
    """How many entries Pi's reading rules keep (None when the file is not a session):
    lines that JSON.parse accepts as objects, after the header, minus second headers
    (and, for v3 files, entries without a string id)."""
    objects: list[Any] = []
    for line in data.split(b"\n"):
        text = line.decode("utf-8", "replace")
        if not text.strip():
            continue
        try:
            value = json.loads(text, parse_constant=_refuse)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            objects.append(value)
    if not objects or objects[0].get("type") != "session" or not isinstance(objects[0].get("id"), str):
        return None
    rest = [o for o in objects[1:] if o.get("type") != "session"]
    if _version_number(objects[0].get("version")) < 2:  # v1: migration gives every entry an id
        return len(rest)
    return sum(1 for o in rest if isinstance(o.get("id"), str))


def _version_number(value: Any) -> float:
    """``header.version ?? 1`` compared the JavaScript way (enough for the fuzzed values)."""
    if value is None:
        return 1
    if isinstance(value, (bool, int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value) if re.fullmatch(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*", value) \
                else (0.0 if not value.strip() else math.nan)
        except ValueError:
            return math.nan
    if isinstance(value, list) and not value:
        return 0.0
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], (int, float, str)) \
            and not isinstance(value[0], bool):
        return _version_number(value[0])
    if isinstance(value, list) and len(value) == 1 and value[0] is None:
        return 0.0
    return math.nan


def _refuse(name: str) -> Any:
    raise ValueError(name)


def exercise(tree: Any, tmp: Path, extra_leaves: list[Any] = ()) -> dict[str, Any]:
    """Every read operation on a loaded tree; returns what it saw. Any exception fails."""
    from pi_nb.render import render_context, render_tree

    seen: dict[str, Any] = {}
    entries = tree.entries
    assert all(isinstance(e, dict) and isinstance(e.get("id"), str) for e in entries)
    projection = tree.projection()
    assert all(isinstance(m, dict) for m in projection.messages)
    tokens = tree.context_tokens()
    assert isinstance(tokens.tokens, int) and tokens.tokens >= 0
    seen["messages"] = len(projection.messages)
    seen["tokens"] = tokens.tokens
    roots = tree.tree()
    stack = list(roots)
    nodes: set[int] = set()
    while stack:
        node = stack.pop()
        assert id(node) not in nodes, "tree() is not a forest"
        nodes.add(id(node))
        stack.extend(node.children)
    assert len(nodes) <= len({e["id"] for e in entries})
    render_tree(tree)
    render_context(tree)
    leaves = [e["id"] for e in entries[-3:]] + list(extra_leaves)
    for leaf in leaves:
        branch = tree.get_branch(leaf)
        assert len({e["id"] for e in branch}) == len(branch)
        other = tree.projection(leaf)
        assert all(isinstance(m, dict) for m in other.messages)
        tree.context_tokens(leaf)
        tree.children(leaf)
    for entry in entries[-2:]:
        tree.label(entry["id"])
    if tree.leaf_id is not None:
        from pi_nb.session import SessionError

        try:
            forked = tree.fork(tree.leaf_id, path=tmp / f"fork-{os.getpid()}-{id(tree)}.jsonl")
        except SessionError:
            pass  # a typed refusal (e.g. a value nested too deeply to write back)
        else:
            forked.projection()
            forked.close()
    return seen


def context_dict(tree) -> dict:
    """pi_nb's context in the shape of the oracle's ``context`` output, through JSON."""
    import json

    projection = tree.projection()
    out = {
        "leafId": tree.leaf_id,
        "model": projection.model,
        "thinkingLevel": projection.thinking_level,
        "messages": projection.messages,
        "tokens": tree.context_tokens().to_dict(),
    }
    return json.loads(json.dumps(out))


# --- wrong field types in an otherwise valid session ------------------------------------------
#
# A well-formed session holding every entry and message type, in which a few fields (any
# field of any entry, message, content block or usage) get a value of another JSON type.
# Drives every command that reads a session, not just the reader.

WRONG_TYPES = st.one_of(
    st.sampled_from([None, True, False, 0, -1, 7, 2.5, 10**20, "", "x", "user", "text", [],
                     ["user"], ["read"], {}, {"a": 1}, {"type": "text", "text": "t"}, [[1]],
                     [{"type": "text", "text": 1}]]),
    garbage,
)


def typed_base_session(compacted: bool = True) -> list[dict[str, Any]]:
    """Header + entries of every kind with well-typed fields (one branch, leaf last).
    Without ``compacted`` the compaction is a session name: every message is in context."""
    stamp = "2026-01-01T00:00:00.000Z"
    usage = {"input": 40, "output": 10, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 50,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}

    def reply(content: list[dict[str, Any]], stop: str = "stop") -> dict[str, Any]:
        return {"role": "assistant", "content": content, "api": "openai-completions",
                "provider": "pinb", "model": "scripted", "usage": dict(usage), "stopReason": stop,
                "timestamp": 2}

    bodies: list[dict[str, Any]] = [
        {"type": "thinking_level_change", "thinkingLevel": "low"},
        {"type": "model_change", "provider": "pinb", "modelId": "scripted"},
        {"type": "message", "message": {"role": "system", "content": "be brief",
                                        "sections": {"rules": "none"}, "timestamp": 1}},
        {"type": "message", "message": {"role": "user", "content": "read a.txt", "timestamp": 1}},
        {"type": "message", "message": reply([
            {"type": "thinking", "thinking": "let me read"},
            {"type": "text", "text": "Reading."},
            {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a.txt"}},
        ], "toolUse")},
        {"type": "message", "message": {"role": "toolResult", "toolCallId": "c1", "toolName": "read",
                                        "content": [{"type": "text", "text": "alpha\nbeta"},
                                                    {"type": "image", "data": "AAAA",
                                                     "mimeType": "image/png"}],
                                        "isError": False, "timestamp": 3}},
        {"type": "message", "message": reply([{"type": "text", "text": "It says alpha."}])},
        {"type": "message", "message": {"role": "bashExecution", "command": "ls", "output": "a.txt",
                                        "exitCode": 0, "cancelled": False, "truncated": False,
                                        "timestamp": 4}},
        {"type": "custom_message", "customType": "note", "content": "a note", "display": True,
         "details": {"k": 1}},
        {"type": "branch_summary", "fromId": "e3", "summary": "explored another path"},
        {"type": "compaction", "summary": "earlier: read a.txt", "firstKeptEntryId": "e6",
         "tokensBefore": 500, "details": {"readFiles": ["a.txt"], "modifiedFiles": []}},
        {"type": "label", "targetId": "e3", "label": "start"},
        {"type": "session_info", "name": "typed"},
        {"type": "message", "message": {"role": "user", "content": [{"type": "text", "text": "more"}],
                                        "timestamp": 5}},
        {"type": "message", "message": reply([
            {"type": "text", "text": "Writing."},
            {"type": "toolCall", "id": "c2", "name": "write",
             "arguments": {"path": "b.txt", "content": "beta"}},
        ], "toolUse")},
        {"type": "message", "message": {"role": "toolResult", "toolCallId": "c2", "toolName": "write",
                                        "content": [{"type": "text", "text": "wrote b.txt"}],
                                        "isError": False, "timestamp": 6}},
        {"type": "context_edit", "targetId": "e15", "replacement": {"content": "wrote it"}},
        {"type": "message", "message": reply([{"type": "text", "text": "Done."}])},
        {"type": "message", "message": {"role": "custom", "customType": "hook", "content": "hook text",
                                        "display": False, "timestamp": 7}},
        {"type": "message", "message": {"role": "user", "content": "last question", "timestamp": 8}},
    ]
    out: list[dict[str, Any]] = [{"type": "session", "version": 3, "id": "typed", "timestamp": stamp,
                                  "cwd": "/tmp"}]
    parent = None
    if not compacted:
        bodies[10] = {"type": "session_info", "name": "not compacted"}
    for index, body in enumerate(bodies):
        entry = {"type": body["type"], "id": f"e{index}", "parentId": parent, "timestamp": stamp,
                 **{k: v for k, v in body.items() if k != "type"}}
        out.append(entry)
        parent = entry["id"]
    return out


def field_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (dict keys / list indices) to a field below ``value``, the structural
    entry fields (type, id, parentId) excluded: those are covered by the file fuzzing."""
    paths: list[tuple[Any, ...]] = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if len(prefix) == 0 and key in ("type", "id", "parentId"):
            continue
        path = (*prefix, key)
        paths.append(path)
        paths.extend(field_paths(item, path))
    return paths


def _set_path(value: Any, path: tuple[Any, ...], new: Any) -> None:
    for key in path[:-1]:
        value = value[key]
    value[path[-1]] = new


@st.composite
def wrongly_typed_sessions(draw: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """(entries with 1–3 fields given a value of another type, what was changed)."""
    entries = typed_base_session(compacted=draw(st.booleans()))
    changes: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        index = draw(st.integers(1, len(entries) - 1))
        paths = field_paths(entries[index])
        if not paths:
            continue
        path = draw(st.sampled_from(paths))
        try:
            old = entries[index]
            for key in path:
                old = old[key]
        except (KeyError, IndexError, TypeError):
            continue  # an earlier change replaced a parent of this path
        # A copy: sampled values are shared objects, and a later change may go inside one.
        new = copy.deepcopy(draw(WRONG_TYPES.filter(lambda v, old=old: type(v) is not type(old))))
        _set_path(entries[index], path, new)
        changes.append(f"{entries[index]['id']}.{'.'.join(map(str, path))} = {new!r}"[:200])
    return entries, changes


def dump_lines(entries: list[dict[str, Any]]) -> bytes:
    return b"".join(_dump(e) + b"\n" for e in entries)
