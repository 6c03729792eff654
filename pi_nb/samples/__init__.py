"""Sample session files shipped with pi_nb (used by the demo, notebooks and tests)."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).parent


def sample_session_path(name: str = "refactor_session") -> str:
    """Path of a bundled sample session file (read-only; copy it before appending)."""
    path = _HERE / f"{name}.jsonl"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in _HERE.glob("*.jsonl")))
        raise FileNotFoundError(f"no sample session {name!r} (have: {known})")
    return str(path)
