"""The entry TypedDicts of ``pi_nb.entries`` (``ENTRY_SHAPES``) are Pi's shapes: every entry
Pi 1.3.0 / 1.6.0's own SessionManager writes has every required key of its type's shape and
no key the shape does not declare; and so does every entry pi_nb's typed appends write."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pi_nb.entries import ENTRY_SHAPES
from pi_nb.session.tree import SessionTree

pytestmark = pytest.mark.compat


def shape_errors(entry: dict[str, Any]) -> list[str]:
    """What keeps ``entry`` from its type's shape ([] when it fits or the type is unknown)."""
    shape = ENTRY_SHAPES.get(entry.get("type"))  # type: ignore[arg-type]
    if shape is None:
        return []
    declared = shape.__required_keys__ | shape.__optional_keys__
    missing = sorted(shape.__required_keys__ - entry.keys())
    extra = sorted(entry.keys() - declared)
    return [f"{entry['type']} {entry.get('id')}: missing {missing}, undeclared {extra}"] * bool(
        missing or extra
    )


def _entries(path: str | Path) -> list[dict[str, Any]]:
    lines = Path(path).read_text(encoding="utf-8").split("\n")  # not splitlines: U+2028
    return [json.loads(line) for line in lines[1:] if line.strip()]


def test_every_entry_pi_writes_fits_its_shape(generated_sessions: list[str]) -> None:
    seen: set[str] = set()
    errors: list[str] = []
    for path in generated_sessions:
        for entry in _entries(path):
            seen.add(entry["type"])
            errors += shape_errors(entry)
    assert not errors, errors[:5]
    # the generator covers every shape, so the check above said something about each
    assert seen >= set(ENTRY_SHAPES), set(ENTRY_SHAPES) - seen


def test_every_typed_append_writes_its_shape(tmp_path: Path) -> None:
    tree = SessionTree.create(str(tmp_path / "s.jsonl"), cwd="/w")
    user = tree.append_message({"role": "user", "content": "hi", "timestamp": 1})
    tree.append_thinking_level_change("high")
    tree.append_model_change("openai", "gpt-4o")
    tree.append_usage("cache_warm", "openai", "gpt-4o", {"input": 1}, note="n")
    tree.append_custom("state", {"n": 1})
    tree.append_custom_message("note", "text", details={"k": 1})
    tree.append_label(user["id"], "start")
    tree.append_session_info("name")
    tree.append_context_edit(user["id"], None)
    tree.append_compaction("summary", user["id"], 10, {"readFiles": []}, True, {"input": 2})
    tree.branch_with_summary(user["id"], "left", {"readFiles": []}, False, {"input": 3})
    written = _entries(tree.path)
    assert {e["type"] for e in written} == set(ENTRY_SHAPES)
    assert [err for e in written for err in shape_errors(e)] == []


def test_a_shape_check_sees_a_wrong_entry() -> None:
    assert shape_errors({"type": "label", "id": "x", "parentId": None, "timestamp": "t"})
    assert shape_errors(
        {"type": "label", "id": "x", "parentId": None, "timestamp": "t", "targetId": "y", "z": 1}
    )
    assert not shape_errors({"type": "not-a-pi-type", "id": "x"})
