"""Fixtures for the compaction tests (helpers live in compaction_helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from compaction_helpers import FakeModel
from pinb_testkit import new_tree


@pytest.fixture
def fake() -> FakeModel:
    return FakeModel()


@pytest.fixture
def session_path(tmp_path: Path) -> Path:
    return tmp_path / "session.jsonl"


@pytest.fixture
def tree(session_path: Path):
    return new_tree(str(session_path))
