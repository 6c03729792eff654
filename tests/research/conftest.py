"""Shared fixtures of the research tests: the sample transcripts and a fixed history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pinb_testkit import new_tree
from research_kit import TRANSCRIPTS, build_history


@pytest.fixture
def history() -> tuple[Any, dict[str, str]]:
    tree = new_tree()
    return tree, build_history(tree)


@pytest.fixture
def transcripts() -> Path:
    return TRANSCRIPTS
