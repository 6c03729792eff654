"""The typed ``append_*`` methods and :meth:`SessionTree.compaction_entry` write Pi's keys in
Pi's order, optional fields only when set (one builder, ``_append``, serves them all)."""

from __future__ import annotations

import itertools
import json

import pytest
from pinb_testkit import assistant, new_tree, user

from pi_nb.session import EntryNotFoundError

COMMON = ["type", "id", "parentId", "timestamp"]


def test_typed_appends_write_their_fields_after_the_common_keys_in_order():
    tree = new_tree()
    first = tree.append_message(user("a"))
    cases = [
        (tree.append_thinking_level_change("high"), ["thinkingLevel"]),
        (tree.append_model_change("openai", "gpt-4o"), ["provider", "modelId"]),
        (tree.append_usage("summary", "openai", "gpt-4o", {"input": 1}), ["kind", "provider", "model", "usage"]),
        (tree.append_usage("summary", "openai", "gpt-4o", {"input": 1}, note=""), ["kind", "provider", "model", "usage"]),
        (
            tree.append_usage("summary", "openai", "gpt-4o", {"input": 1}, note="n"),
            ["kind", "provider", "model", "usage", "note"],
        ),
        (tree.append_session_info("a\nb"), ["name"]),
        (tree.append_label(first["id"], "start"), ["targetId", "label"]),
        (tree.append_label(first["id"], None), ["targetId"]),
        (tree.append_context_edit(first["id"], None), ["targetId", "replacement"]),
    ]
    for entry, fields in cases:
        assert list(entry) == COMMON + fields, entry["type"]
    assert tree.get(cases[-1][0]["id"])["replacement"] is None  # a null replacement is written
    assert cases[5][0]["name"] == "a b"


def test_summary_entries_write_optional_fields_only_when_set():
    tree = new_tree()
    a = tree.append_message(user("a"))
    tree.append_message(assistant("b"))
    bare = tree.branch_with_summary(a["id"], "s")
    assert list(bare) == [*COMMON, "fromId", "summary"]
    full = tree.branch_with_summary(a["id"], "s", {"readFiles": []}, False, {"input": 1})
    assert list(full) == [*COMMON, "fromId", "summary", "details", "usage", "fromHook"]
    comp = tree.append_compaction("S", a["id"], 5, {"readFiles": []}, True, {"input": 2})
    assert list(comp) == [*COMMON, "summary", "firstKeptEntryId", "tokensBefore", "details", "usage", "fromHook"]


def test_a_drafted_compaction_entry_is_the_written_one_without_drawing_an_id_or_a_time():
    ids = itertools.count()
    stamps = itertools.count()
    tree = new_tree(
        clock=lambda: f"2026-01-15T09:00:{next(stamps):02d}.000Z", id_source=lambda: f"e{next(ids):07d}"
    )
    a = tree.append_message(user("a"))
    tree.append_message(assistant("b"))
    draft = tree.compaction_entry("S", a["id"], 7, None, None, None, draft=True)
    written = tree.append_compaction("S", a["id"], 7)
    # the draft drew nothing: the written entry takes the next id and time of the sequence
    assert written["id"] == "e0000002" and written["timestamp"] == "2026-01-15T09:00:02.000Z"
    assert draft["id"] != written["id"] and draft["parentId"] == written["parentId"]

    def same(entry):
        return json.dumps({k: v for k, v in entry.items() if k not in ("id", "timestamp")})

    assert same(draft) == same(written)


def test_compaction_entry_refuses_an_unknown_first_kept_entry():
    tree = new_tree()
    tree.append_message(user("a"))
    with pytest.raises(EntryNotFoundError, match="Entry nope not found"):
        tree.compaction_entry("S", "nope", 1, None, None, None, draft=True)
    with pytest.raises(EntryNotFoundError):
        tree.append_compaction("S", "nope", 1)
    assert len(tree) == 1  # nothing written
