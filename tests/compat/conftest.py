"""Fixtures for the Pi compatibility tests, Pi 1.3.0 and 1.6.0 (defined in
tests/fixtures/pi_oracle_kit.py)."""

from pi_oracle_kit import compat, generated_sessions, pi_oracle, pi_oracles, pi_version

__all__ = ["compat", "generated_sessions", "pi_oracle", "pi_oracles", "pi_version"]
