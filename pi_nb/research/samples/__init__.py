"""Small sample transcripts of other agents (hand-written in their public formats)."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).parent
_FILES = {
    "claude-code": "claude_code_session.jsonl",
    "codex": "codex_rollout.jsonl",
    "openai": "openai_messages.json",
}


def sample_transcript(kind: str) -> str:
    """Path of the bundled sample transcript for ``kind`` (claude-code, codex, openai)."""
    if kind not in _FILES:
        raise ValueError(f"no sample transcript for {kind!r} (have: {', '.join(_FILES)})")
    return str(_HERE / _FILES[kind])
