"""Hostile input: property-based fuzzing of the reader and the projection, plus the extremes
(100k-level trees, a 100 MB line, deep nesting, values that cannot be written).

Zero uncaught exceptions from SessionTree.open / projection / context_tokens / tree() /
render / get_branch / fork; a refused file raises a typed one-line error naming the file
(and the line of its first JSON object); whatever can be loaded is loaded (the entry count
equals an independent reading of Pi's rules).
"""

from __future__ import annotations

import json
import math
import os
import re
import time
import warnings
from pathlib import Path

import pytest
import rel_figures
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from rel_hostile import (
    IDS,
    check_rejection,
    context_dict,
    entries,
    exercise,
    expected_entry_count,
    session_files,
)

from pi_nb.render import render_context, render_tree
from pi_nb.session import SessionError, SessionTree
from pi_nb.session.jsonl import EntryEncodeError

FUZZ_EXAMPLES = int(os.environ.get("PI_NB_FUZZ_EXAMPLES", "200"))
# Shrinking a failure can take minutes: off unless asked for (PI_NB_FUZZ_SHRINK=1), so a
# failing run stays within the CI budget (the unshrunk case is still printed).
PHASES = tuple(Phase) if os.environ.get("PI_NB_FUZZ_SHRINK") else (Phase.explicit, Phase.generate)
FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    database=None,
    phases=PHASES,
    derandomize=True,  # the same cases on every CI run; raise PI_NB_FUZZ_EXAMPLES to explore
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture],
)


def _refuse(name: str) -> None:
    raise ValueError(name)  # NaN / Infinity are not JSON (JSON.parse refuses them)


def first_object_line(data: bytes) -> int | None:
    for number, line in enumerate(data.split(b"\n"), 1):
        try:
            if isinstance(json.loads(line.decode("utf-8", "replace"), parse_constant=_refuse), dict):
                return number
        except (ValueError, RecursionError):
            continue
    return None


@FUZZ
@given(data=session_files())
def test_fuzzed_files_load_or_are_refused(data, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz")
    path = tmp / "s.jsonl"
    path.write_bytes(data)
    rel_figures.add("fuzz_cases")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tree = SessionTree.open(path)
        except SessionError as exc:
            rel_figures.add("fuzz_rejected")
            check_rejection(exc, str(path))
            assert expected_entry_count(data) is None, "a loadable file was refused"
            line = first_object_line(data)
            if line is not None:
                assert re.search(rf"{re.escape(str(path))}:{line}:", str(exc)), str(exc)
            return
    rel_figures.add("fuzz_skipped_lines", len(tree.report.skipped))
    lines = data.split(b"\n")
    for skipped in tree.report.skipped:
        assert skipped.file == str(path)
        assert 1 <= skipped.line <= len(lines)
    assert len(tree.entries) == expected_entry_count(data), "an entry Pi would keep was lost"
    exercise(tree, tmp, ["zz-missing", None, *IDS[:3]])
    # The file can be continued, and re-opens to exactly the same context.
    tree.append_message({"role": "user", "content": "continue", "timestamp": 1})
    expected = context_dict(tree)
    tree.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = SessionTree.open(path)
    assert context_dict(again) == expected


@FUZZ
@given(items=st.lists(entries(), max_size=25), leaf=st.one_of(st.sampled_from(IDS), st.none()))
def test_fuzzed_entry_lists_project(items, leaf, tmp_path_factory):
    """The projection and token count straight from entry dicts (no file in between)."""
    from pi_nb.projection import build_session_projection
    from pi_nb.tokens import estimate_projected_context_tokens

    rel_figures.add("fuzz_entry_lists")
    usable = [e for e in items if isinstance(e.get("id"), str)]
    projection = build_session_projection(usable, leaf)
    assert all(isinstance(m, dict) for m in projection.messages)
    estimate_projected_context_tokens(projection)
    header = {"type": "session", "version": 3, "id": "mem", "timestamp": "t", "cwd": "/tmp"}
    tree = SessionTree(header, usable, None)
    exercise(tree, tmp_path_factory.mktemp("entries"), [leaf])


def write_session(path: Path, entries_iter, header_id: str = "deep") -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"type": "session", "version": 3, "id": header_id,
                             "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/tmp"}) + "\n")
        for entry in entries_iter:
            fh.write(json.dumps(entry) + "\n")


def chain(n: int, ring: bool = False):
    for i in range(n):
        parent = f"{i - 1:08x}" if i else (f"{n - 1:08x}" if ring else None)
        if i % 2 == 0:
            message = {"role": "user", "content": f"m{i}", "timestamp": i}
        else:
            message = {"role": "assistant", "content": [{"type": "text", "text": "ok"}],
                       "usage": {"input": 1, "output": 1, "totalTokens": i}, "stopReason": "stop",
                       "provider": "p", "model": "m", "timestamp": i}
        yield {"type": "message", "id": f"{i:08x}", "parentId": parent,
               "timestamp": "2026-01-01T00:00:00.000Z", "message": message}
        if i % 1000 == 999 and i != n - 1:  # a side branch now and then: the tree forks
            yield {"type": "label", "id": f"l{i:07x}", "parentId": f"{i:08x}",
                   "timestamp": "2026-01-01T00:00:01.000Z", "targetId": f"{i:08x}", "label": f"at {i}"}


def test_100k_level_tree_has_no_recursion_limit(tmp_path):
    n = 100_000
    path = tmp_path / "deep.jsonl"
    write_session(path, chain(n))
    started = time.monotonic()
    tree = SessionTree.open(path)
    last = f"{n - 1:08x}"
    assert tree.leaf_id == last
    projection = tree.projection()
    assert len(projection.messages) == n
    assert tree.context_tokens().tokens > 0
    roots = tree.tree()
    assert len(roots) == 1
    depth, node = 0, roots[0]
    while node.children:
        node = node.children[0]
        depth += 1
    assert depth == n - 1
    text = render_tree(tree)
    assert text.count("\n") == len(tree) - 1
    render_context(tree)
    assert len(tree.get_branch()) == n
    assert len(tree.children(f"{n // 2:08x}")) == 1
    tree.fork(last, path=tmp_path / "fork.jsonl")
    labels = len(tree.labels)
    assert labels == 99
    # The fork holds the path (labels dropped) and one fresh label entry per label on it.
    assert len(SessionTree.open(tmp_path / "fork.jsonl").get_branch()) == n + labels
    tree.append_message({"role": "user", "content": "one more", "timestamp": 1})
    assert len(tree.projection().messages) == n + 1
    print(f"100k levels: all operations in {time.monotonic() - started:.1f}s")


def test_100k_parent_ring_terminates(tmp_path):
    """Every entry's parent exists and they form one big cycle: no root at all."""
    n = 100_000
    path = tmp_path / "ring.jsonl"
    write_session(path, (e for e in chain(n, ring=True) if e["type"] == "message"))
    tree = SessionTree.open(path)
    assert len(tree) == n
    assert len(tree.get_branch()) == n  # the walk stops where it started
    assert len(tree.projection().messages) == n
    tree.context_tokens()
    assert tree.tree() == []  # no root: Pi's getTree() shows nothing either
    render_tree(tree)
    tree.append_message({"role": "user", "content": "x", "timestamp": 1})


def test_gigantic_line_100mb_tool_output(tmp_path):
    """One 100 MB tool output, written through SessionTree and read back (run once)."""
    path = tmp_path / "big.jsonl"
    tree = SessionTree.create(path, str(tmp_path))
    tree.append_message({"role": "user", "content": "print a lot", "timestamp": 1})
    call = {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "yes"}}
    tree.append_message({"role": "assistant", "content": [call], "stopReason": "toolUse",
                         "provider": "p", "model": "m", "timestamp": 2,
                         "usage": {"input": 1, "output": 1, "totalTokens": 2}})
    output = "y" * 100_000_000
    started = time.monotonic()
    tree.append_message({"role": "toolResult", "toolCallId": "c1", "toolName": "bash",
                         "content": [{"type": "text", "text": output}], "isError": False,
                         "timestamp": 3})
    expected = tree.context_tokens().tokens
    tree.close()
    del output
    assert os.path.getsize(path) > 100_000_000
    again = SessionTree.open(path)
    assert again.report.clean
    messages = again.projection().messages
    assert len(messages[-1]["content"][0]["text"]) == 100_000_000
    assert again.context_tokens().tokens == expected >= 25_000_000
    again.tree()
    render_tree(again)
    print(f"100 MB line: written and read back in {time.monotonic() - started:.1f}s")


def test_values_that_cannot_be_written_are_refused_before_anything_changes(tmp_path):
    path = tmp_path / "s.jsonl"
    tree = SessionTree.create(path, str(tmp_path))
    tree.append_message({"role": "user", "content": "start", "timestamp": 1})
    size, leaf, count = path.stat().st_size, tree.leaf_id, len(tree)
    deep: list = []
    cursor = deep
    for _ in range(100_000):
        cursor.append([])
        cursor = cursor[0]
    circular: dict = {}
    circular["self"] = circular
    for bad in (deep, circular, {1, 2}, object()):
        with pytest.raises(EntryEncodeError) as info:
            tree.append_custom("bad", {"value": bad})
        assert "\n" not in str(info.value)
        assert (path.stat().st_size, tree.leaf_id, len(tree)) == (size, leaf, count)
    # What JSON.stringify would write instead of failing: NaN/Infinity as null, lone
    # surrogates escaped (both read back by Pi and pi_nb).
    entry = tree.append_custom("odd", {"nan": math.nan, "inf": -math.inf, "cut": "emoji \ud83d"})
    tree.close()
    raw = path.read_bytes().split(b"\n")[-2]
    assert b'"nan":null' in raw and b'"inf":null' in raw and b"\\ud83d" in raw
    raw.decode("utf-8")  # valid UTF-8
    again = SessionTree.open(path)
    assert again.report.clean
    assert again.entry(entry["id"])["data"] == {"nan": None, "inf": None, "cut": "emoji \ud83d"}
