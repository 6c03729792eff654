"""Shared helpers for the agent tests: sessions on real files in tmp_path, the scripted model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pi_nb.agent import RetryPolicy, Session
from pi_nb.events import PiEvent
from pi_nb.models.scripted import Script


class Recorder:
    """Collects events; ``types`` lists their names in order."""

    def __init__(self) -> None:
        self.events: list[PiEvent] = []

    def __call__(self, event: PiEvent) -> None:
        self.events.append(event)

    @property
    def types(self) -> list[str]:
        return [e["type"] for e in self.events]

    def of(self, kind: str) -> list[PiEvent]:
        return [e for e in self.events if e["type"] == kind]


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def make_session(tmp_path, sleeps) -> Callable[..., Session]:
    """``make_session(turns, **opts)``: a new session file in tmp_path with a Script."""

    def make(turns: list[Any] | Script | None = None, *, name: str = "session.jsonl", **opts: Any) -> Session:
        script = turns if isinstance(turns, Script) else Script(turns or [])
        opts.setdefault("tools", [])
        opts.setdefault("retry", RetryPolicy(sleep=sleeps.append))
        opts.setdefault("window", 32768)
        return Session.new(tmp_path / name, cwd=tmp_path, script=script, **opts)

    return make
