"""The compaction settings a session runs with: explicit R / keep, per-model overrides and
pi_nb's scaling of Pi's defaults to small windows.

Kept apart from :class:`~pi_nb.agent.session.Session` so the rule is one function, and the
``reserve`` / ``keep`` properties one descriptor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..compaction import CompactionSettings

__all__ = ["TINY_LOCAL_MODELS", "SettingOverride", "settings_in_force"]

# Local models too small to end a summary on their own (see CompactionSettings).
TINY_LOCAL_MODELS = frozenset({"pinb/smollm2"})


def settings_in_force(
    base: CompactionSettings,
    model: str,
    window: Callable[[], int],
    *,
    reserve: int | None = None,
    keep: int | None = None,
    explicit: bool = False,
) -> CompactionSettings:
    """``base`` for ``model`` with an explicit ``reserve`` / ``keep`` applied.

    Unless the settings were given (``explicit``) or the model has its own override, Pi's
    defaults (16384 / 20000) are scaled to ``window() // 4`` when they exceed half the window
    (pinb/smollm2's 2048 would otherwise compact at every check); ``window`` is called only
    then (resolving it may look the model up).
    """
    settings = base.for_model(model)
    changes: dict[str, Any] = {}
    if reserve is not None:
        changes["reserve_tokens"] = reserve
    if keep is not None:
        changes["keep_recent_tokens"] = keep
    if not explicit and settings.override_for(model) is None:
        size = window()
        if reserve is None and settings.reserve_tokens * 2 > size:
            changes["reserve_tokens"] = size // 4
        if keep is None and settings.keep_recent_tokens * 2 > size:
            changes["keep_recent_tokens"] = size // 4
    if model in TINY_LOCAL_MODELS and not settings.accept_truncated:
        # SmolLM2-135M rarely stops before its cap; keep its capped summaries.
        changes["accept_truncated"] = True
    return replace(settings, **changes) if changes else settings


class SettingOverride:
    """A session property over one field of the settings in force: reading gives the value
    used (``obj.settings.<field>``); assigning overrides it, None drops the override."""

    def __init__(self, field: str, doc: str) -> None:
        self.field = field
        self.__doc__ = doc
        self.attr = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.attr = f"_{name}"

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return int(getattr(obj.settings, self.field))

    def __set__(self, obj: Any, value: int | None) -> None:
        setattr(obj, self.attr, value)
