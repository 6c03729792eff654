"""Fixtures for the Pi 1.3.0 compatibility tests (defined in tests/fixtures/pi_oracle_kit.py)."""

from pi_oracle_kit import compat, generated_sessions, pi_oracle

__all__ = ["compat", "generated_sessions", "pi_oracle"]
