"""Makes tests/fixtures importable (the shared builders live in fixtures/pinb_testkit.py)."""

from __future__ import annotations

import sys
from pathlib import Path

_FIXTURES = str(Path(__file__).resolve().parent / "fixtures")
if _FIXTURES not in sys.path:
    sys.path.insert(0, _FIXTURES)
