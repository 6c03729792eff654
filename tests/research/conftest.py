"""Shared fixtures of the research tests: the sample transcripts, a fixed history and two
generated session files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pinb_testkit import new_tree
from research_kit import TRANSCRIPTS, build_history

from pi_nb.research.synthetic import generate_session


@pytest.fixture
def history() -> tuple[Any, dict[str, str]]:
    tree = new_tree()
    return tree, build_history(tree)


@pytest.fixture
def transcripts() -> Path:
    return TRANSCRIPTS


@pytest.fixture
def sessions(tmp_path: Path) -> dict[str, str]:
    """Two generated sessions (10 and 12 turns) as files, by label."""
    out = {}
    for seed in (1, 2):
        path = tmp_path / f"s{seed}.jsonl"
        generate_session(8 + 2 * seed, seed=seed, path=str(path))
        out[f"s{seed}"] = str(path)
    return out
