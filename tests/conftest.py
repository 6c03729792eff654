"""Shared test setup: the default model is pinned to the scripted one.

Many tests build ``Session.new(...)`` without a model and expect ``pinb/scripted``; the real
default is ``pinb/smollm2`` whenever the ``local`` extra is installed (as in the test venv).
``PI_NB_MODEL`` (honoured by :func:`pi_nb.models.default_model`) pins it per test, for
subprocesses too; tests of the default itself unset it.
"""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _scripted_default_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PI_NB_MODEL", "pinb/scripted")
