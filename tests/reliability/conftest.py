"""Reliability suite: crash safety, concurrent writers, hostile input, secrets, provider
faults and resume. Figures (kills survived, fuzz cases, faults) are printed at the end."""

from __future__ import annotations

import os
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from rel_figures import dump, summary_lines  # noqa: E402


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = summary_lines()
    if lines:
        terminalreporter.section("pi_nb reliability figures")
        for line in lines:
            terminalreporter.write_line(line)
        dump()


def _compat_module():
    """The Pi oracle kit (tests/fixtures/pi_oracle_kit.py: its PiOracle and installer)."""
    import pi_oracle_kit

    return pi_oracle_kit


def _oracle_context(version: str):
    """``context(path) -> dict``: Pi ``version``'s context for a file (the oracle's ``context``
    command), or ``{"error": message}`` when Pi fails on it. Same availability policy as the
    compat tests: without node they fail, unless PI_NB_SKIP_COMPAT=1 (then skip)."""
    compat = _compat_module()
    oracle = compat.PiOracle(compat.node_or_fail(), compat._ensure_installed(version), version)

    def context(path) -> dict:
        try:
            return oracle.context(path)
        except RuntimeError as exc:
            lines = [x for x in str(exc).splitlines() if x.strip() and not x.startswith("    at ")]
            return {"error": lines[-1] if lines else str(exc)}

    return context


# One test instance per Pi release (``[pi1.3.0]``, ``[pi1.6.0]``), as in tests/compat.
pi_version = _compat_module().pi_version


@pytest.fixture(scope="session")
def pi_context(pi_version: str):
    """``pi_context(path) -> dict`` for the release of this test instance (see _oracle_context)."""
    return _oracle_context(pi_version)


@pytest.fixture(scope="session")
def pi_contexts() -> dict:
    """``{version: context}`` for every release in PI_VERSIONS: for tests whose expensive part
    (a real agent run) should run once and then be checked against each release."""
    return {v: _oracle_context(v) for v in _compat_module().PI_VERSIONS}


@pytest.fixture(scope="session")
def describe_mismatch():
    return _compat_module().describe_mismatch

