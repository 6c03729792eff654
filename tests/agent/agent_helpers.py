"""Helpers for the agent tests (imported by module name; pytest puts this folder on sys.path)."""

from __future__ import annotations

from typing import Any

from pi_nb.agent import Session
from pi_nb.models.scripted import Script


def script_of(session: Session) -> Script:
    script = session.llm_kwargs["script"]
    assert isinstance(script, Script)
    return script


def turn_requests(session: Session) -> list[list[dict[str, Any]]]:
    """The message lists of the scripted model's replayed (non-summary) requests."""
    return [r["messages"] for r in script_of(session).requests if r["turn"] is not None]


def texts(request: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(role, text) pairs of an OpenAI-format request."""
    out = []
    for m in request:
        content = m.get("content")
        if isinstance(content, list):
            content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
        out.append((m["role"], content or ""))
    return out
