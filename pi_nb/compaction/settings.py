"""Compaction settings: enabled, reserve and keep-recent budgets, per-model overrides.

Defaults and semantics follow Pi (1.3.0 and 1.6.0 agree here): compact when the context
estimate exceeds ``window − reserve_tokens``; keep roughly ``keep_recent_tokens`` of recent
history verbatim. A per-model override (key ``"provider/model"``) replaces either budget for
that model. ``pi_release`` selects whose summary requests to follow (1.6.0 by default).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

from ..tokens import should_compact

__all__ = [
    "DEFAULT_BRANCH_SUMMARY_RESERVE",
    "PI_RELEASES",
    "CompactionSettings",
    "PiRelease",
    "SettingsError",
    "resolve_window",
    "should_compact",
]

#: Tokens kept free when the budget for a branch summary's input is computed (Pi's default).
DEFAULT_BRANCH_SUMMARY_RESERVE = 16384

#: The Pi release whose summary requests pi_nb follows. "1.6" (Pi 1.6.0): every summary's
#: output budget is the model's output limit fitted to the window, the turn-prefix summary
#: gets the focus too, branch summaries apply context edits. "1.3" (Pi 1.3.0): budgets
#: ⌊0.8·R⌋ / ⌊0.5·R⌋ / 4096, no focus for the turn prefix, raw branch messages.
PiRelease = Literal["1.6", "1.3"]
PI_RELEASES: tuple[str, ...] = get_args(PiRelease)

_OVERRIDE_FIELDS = {"reserveTokens": "reserve_tokens", "keepRecentTokens": "keep_recent_tokens"}


class SettingsError(ValueError):
    """A compaction setting with an invalid value."""


def _check_tokens(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SettingsError(
            f"Invalid compaction setting {name}: {value!r}. Expected a non-negative integer."
        )
    return value


@dataclass(frozen=True)
class CompactionSettings:
    """When to compact and how much recent history to keep.

    Attributes:
        enabled: automatic (threshold) compaction on or off.
        reserve_tokens: R — room kept for the reply and the summary call. Under
            ``pi_release="1.3"`` the summary's output budget is derived from it (0.8·R
            history, 0.5·R turn prefix); under "1.6" it is not (see ``pi_release``).
        keep_recent_tokens: how many recent tokens stay verbatim after the cut.
        model_overrides: ``{"provider/model": {"reserveTokens": n, "keepRecentTokens": n}}``.
        accept_truncated: keep a summary that hit its token cap instead of failing (Pi
            fails). Tiny local models rarely stop on their own; the result records it.
        pi_release: ``"1.6"`` (default) or ``"1.3"`` — whose summary requests to follow
            (:data:`PiRelease`); settings.json key ``piRelease``.
    """

    enabled: bool = True
    reserve_tokens: int = 16384
    keep_recent_tokens: int = 20000
    model_overrides: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    accept_truncated: bool = False
    pi_release: PiRelease = "1.6"

    def __post_init__(self) -> None:
        if self.pi_release not in PI_RELEASES:
            raise SettingsError(
                f"Invalid compaction setting piRelease: {self.pi_release!r}. "
                f"Expected one of {', '.join(PI_RELEASES)}."
            )
        _check_tokens("reserveTokens", self.reserve_tokens)
        _check_tokens("keepRecentTokens", self.keep_recent_tokens)
        if not isinstance(self.model_overrides, Mapping):
            raise SettingsError(
                f"Invalid compaction.modelOverrides: {self.model_overrides!r}. Expected a mapping."
            )
        for key, override in self.model_overrides.items():
            if not isinstance(override, Mapping):
                raise SettingsError(
                    f'Invalid compaction.modelOverrides["{key}"]: {override!r}. Expected a mapping.'
                )
            for name, value in override.items():
                if name not in _OVERRIDE_FIELDS:
                    raise SettingsError(
                        f'Unknown compaction.modelOverrides["{key}"] field {name!r}; '
                        f"known: {sorted(_OVERRIDE_FIELDS)}"
                    )
                _check_tokens(f'modelOverrides["{key}"].{name}', value)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CompactionSettings:
        """From Pi's ``settings.json`` ``compaction`` object (camelCase keys)."""
        return cls(
            enabled=bool(data.get("enabled", True)),
            reserve_tokens=data.get("reserveTokens", 16384),
            keep_recent_tokens=data.get("keepRecentTokens", 20000),
            model_overrides=dict(data.get("modelOverrides") or {}),
            pi_release=data.get("piRelease", "1.6"),
        )

    def to_dict(self) -> dict[str, Any]:
        """Pi's camelCase form."""
        out: dict[str, Any] = {
            "enabled": self.enabled,
            "reserveTokens": self.reserve_tokens,
            "keepRecentTokens": self.keep_recent_tokens,
            "piRelease": self.pi_release,
        }
        if self.model_overrides:
            out["modelOverrides"] = {k: dict(v) for k, v in self.model_overrides.items()}
        return out

    def override_for(self, model: str | None) -> Mapping[str, int] | None:
        """The override entry that applies to ``model`` (litellm name), if any.

        Looked up as given (``"anthropic/claude-…"``) and as ``provider/model`` for bare
        names (``"gpt-4o"`` → ``"openai/gpt-4o"``).
        """
        if not model or not self.model_overrides:
            return None
        if model in self.model_overrides:
            return self.model_overrides[model]
        from ..llm import split_model

        provider, model_id = split_model(model)
        return self.model_overrides.get(f"{provider}/{model_id}")

    def for_model(self, model: str | None) -> CompactionSettings:
        """These settings with the model's override applied."""
        override = self.override_for(model)
        if not override:
            return self
        changes = {_OVERRIDE_FIELDS[k]: v for k, v in override.items()}
        return replace(self, **changes)

    def should_compact(self, tokens: int, window: int) -> bool:
        """``enabled and tokens > window − reserve_tokens``."""
        return should_compact(tokens, window, self.reserve_tokens, self.enabled)


def resolve_window(model: str | None, explicit: int | None = None, default: int = 128000) -> int:
    """The context window to use: ``explicit`` when given, else the model's (litellm table)."""
    if explicit is not None:
        return _check_tokens("window", explicit)
    if not model:
        return default
    from ..llm import context_window

    return context_window(model, default)
