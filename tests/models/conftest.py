"""Fixtures for the pinb model tests."""

from __future__ import annotations

from types import ModuleType

import pytest


@pytest.fixture(scope="session")
def litellm() -> ModuleType:
    """litellm with the ``pinb`` provider registered (imported once per test session)."""
    from pi_nb.models import ensure_litellm, register

    register()
    return ensure_litellm()
