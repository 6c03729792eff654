"""Sample session files shipped with pi_nb (used by the demo, notebooks and tests)."""

from __future__ import annotations

import os
from pathlib import Path

_HERE = Path(__file__).parent


def sample_session_path(name: str = "refactor_session") -> str:
    """Path of a bundled sample session file (read-only; copy it before appending)."""
    path = _HERE / f"{name}.jsonl"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in _HERE.glob("*.jsonl")))
        raise FileNotFoundError(f"no sample session {name!r} (have: {known})")
    return str(path)


def is_sample_path(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is one of the bundled sample files (which nothing may write to)."""
    return os.path.dirname(os.path.realpath(path)) == os.path.realpath(_HERE)
