"""Fixtures of the policy tests (helpers live in policy_helpers.py), with the Pi oracle
fixtures (``pi_version``, ``pi_oracle``, ``compat``) of tests/fixtures/pi_oracle_kit.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pi_oracle_kit import compat, pi_oracle, pi_version
from pinb_testkit import new_tree

__all__ = ["compat", "mem_tree", "pi_oracle", "pi_version", "tree"]


@pytest.fixture
def tree(tmp_path: Path) -> Any:
    return new_tree(str(tmp_path / "session.jsonl"))


@pytest.fixture
def mem_tree() -> Any:
    return new_tree()
