"""pi_nb.agent.config: the settings a session runs with (alone, without a Session)."""

from __future__ import annotations

from pi_nb.agent.config import SettingOverride, settings_in_force
from pi_nb.compaction.settings import CompactionSettings


def test_pi_defaults_scale_to_a_small_window_unless_given():
    base = CompactionSettings()  # Pi's 16384 / 20000
    small = settings_in_force(base, "pinb/scripted", lambda: 2048)
    assert (small.reserve_tokens, small.keep_recent_tokens) == (512, 512)
    given = settings_in_force(base, "pinb/scripted", lambda: 2048, explicit=True)
    assert (given.reserve_tokens, given.keep_recent_tokens) == (16384, 20000)
    wide = settings_in_force(base, "pinb/scripted", lambda: 200_000)
    assert (wide.reserve_tokens, wide.keep_recent_tokens) == (16384, 20000)


def test_explicit_reserve_and_keep_win_and_the_window_is_read_only_when_needed():
    asked = []

    def window() -> int:
        asked.append(1)
        return 2048

    out = settings_in_force(CompactionSettings(), "pinb/scripted", window, reserve=100, keep=200)
    assert (out.reserve_tokens, out.keep_recent_tokens) == (100, 200)
    settings_in_force(CompactionSettings(), "pinb/scripted", window, explicit=True)
    assert len(asked) == 1  # only the non-explicit call resolved the window


def test_tiny_local_model_keeps_capped_summaries():
    assert settings_in_force(CompactionSettings(), "pinb/smollm2", lambda: 2048).accept_truncated
    assert not settings_in_force(CompactionSettings(), "pinb/scripted", lambda: 2048).accept_truncated


def test_setting_override_reads_the_settings_in_force_and_none_drops_the_override():
    class Holder:
        reserve = SettingOverride("reserve_tokens", "R")
        _reserve: int | None = None

        @property
        def settings(self) -> CompactionSettings:
            return settings_in_force(CompactionSettings(), "pinb/scripted", lambda: 10**6, reserve=self._reserve)

    holder = Holder()
    assert holder.reserve == 16384
    holder.reserve = 1000
    assert holder.reserve == 1000 and holder._reserve == 1000
    holder.reserve = None
    assert holder.reserve == 16384
    assert Holder.reserve.__doc__ == "R"
