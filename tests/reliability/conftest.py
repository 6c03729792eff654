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
    """The Pi oracle kit (tests/fixtures/pi_oracle_kit.py: PiOracle and its installer)."""
    import importlib

    fixtures = os.path.join(os.path.dirname(_HERE), "fixtures")
    if fixtures not in sys.path:
        sys.path.insert(0, fixtures)
    return importlib.import_module("pi_oracle_kit")


@pytest.fixture(scope="session")
def pi_context():
    """``pi_context(path) -> dict``: Pi 1.3.0's context for a file (the oracle's ``context``
    command), or ``{"error": message}`` when Pi fails on it. Same availability policy as the
    compat tests: without node they fail, unless PI_NB_SKIP_COMPAT=1 (then skip)."""
    import shutil
    import subprocess

    compat = _compat_module()
    node = shutil.which("node")
    if node is None:
        compat._unavailable("`node` is not on PATH")
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
    if int(version.strip().lstrip("v").split(".")[0] or 0) < 20:
        compat._unavailable(f"Node >= 20 required, found {version.strip()}")
    oracle = compat.PiOracle(node, compat._ensure_installed())

    def context(path) -> dict:
        try:
            return oracle.context(path)
        except RuntimeError as exc:
            lines = [x for x in str(exc).splitlines() if x.strip() and not x.startswith("    at ")]
            return {"error": lines[-1] if lines else str(exc)}

    return context


@pytest.fixture(scope="session")
def describe_mismatch():
    return _compat_module().describe_mismatch

