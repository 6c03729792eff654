"""CompactionSettings: defaults, per-model overrides, validation, the trigger."""

from __future__ import annotations

import dataclasses

import pytest

from pi_nb.compaction import (
    DEFAULT_PROMPTS,
    CompactionSettings,
    PromptSet,
    SettingsError,
    resolve_window,
    should_compact,
)


def test_defaults():
    s = CompactionSettings()
    assert (s.enabled, s.reserve_tokens, s.keep_recent_tokens) == (True, 16384, 20000)
    assert s.pi_release == "1.6"
    assert s.to_dict() == {
        "enabled": True,
        "reserveTokens": 16384,
        "keepRecentTokens": 20000,
        "piRelease": "1.6",
    }


def test_pi_release_from_dict_and_validated():
    assert CompactionSettings.from_dict({}).pi_release == "1.6"
    old = CompactionSettings.from_dict({"piRelease": "1.3"})
    assert old.pi_release == "1.3" and CompactionSettings.from_dict(old.to_dict()) == old
    assert old.for_model("gpt-4o").pi_release == "1.3"
    for bad in ("1.6.0", "1.4", 1.6, None):
        with pytest.raises(SettingsError, match="piRelease"):
            CompactionSettings(pi_release=bad)  # type: ignore[arg-type]


def test_model_overrides():
    s = CompactionSettings(
        model_overrides={
            "anthropic/claude-sonnet-4-5": {"reserveTokens": 8000},
            "openai/gpt-4o": {"keepRecentTokens": 5000, "reserveTokens": 0},
        }
    )
    claude = s.for_model("anthropic/claude-sonnet-4-5")
    assert (claude.reserve_tokens, claude.keep_recent_tokens) == (8000, 20000)
    gpt = s.for_model("gpt-4o")  # a bare litellm name is looked up as provider/model
    assert (gpt.reserve_tokens, gpt.keep_recent_tokens) == (0, 5000)
    assert s.for_model("other/model") is s and s.for_model(None) is s
    assert CompactionSettings.from_dict(s.to_dict()) == s


@pytest.mark.parametrize(
    "overrides",
    [
        {"a/b": {"reserveTokens": -1}},
        {"a/b": {"keepRecentTokens": 1.5}},
        {"a/b": {"keepRecentTokens": True}},
        {"a/b": {"keepRecentTokens": "100"}},
        {"a/b": {"reserve": 100}},
        {"a/b": 100},
    ],
)
def test_invalid_overrides_are_refused_clearly(overrides):
    with pytest.raises(SettingsError, match='modelOverrides\\["a/b"\\]'):
        CompactionSettings(model_overrides=overrides)


def test_invalid_budgets():
    with pytest.raises(SettingsError, match="reserveTokens"):
        CompactionSettings(reserve_tokens=-5)
    with pytest.raises(SettingsError, match="keepRecentTokens"):
        CompactionSettings(keep_recent_tokens=None)  # type: ignore[arg-type]


def test_should_compact():
    s = CompactionSettings(reserve_tokens=10000)
    assert should_compact(95000, 100000, 10000) and s.should_compact(95000, 100000)
    assert not s.should_compact(89000, 100000) and not s.should_compact(90000, 100000)
    assert not dataclasses.replace(s, enabled=False).should_compact(95000, 100000)


def test_resolve_window_explicit():
    assert resolve_window("anything", 2048) == 2048
    assert resolve_window(None) == 128000
    with pytest.raises(SettingsError):
        resolve_window("m", -1)


def test_prompt_sets_are_frozen_and_replaceable():
    mine = dataclasses.replace(DEFAULT_PROMPTS, update="merge it")
    assert mine.update == "merge it" and DEFAULT_PROMPTS.update != "merge it"
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_PROMPTS.initial = "x"  # type: ignore[misc]
    assert PromptSet.from_dict({"system": "S"}).system == "S"
    with pytest.raises(ValueError, match="unknown prompt fields"):
        PromptSet.from_dict({"sytem": "S"})
