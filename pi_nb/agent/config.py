"""What configures a session: its model, window, compaction settings, system prompt and
tools (:class:`SessionConfig`, the configuration half of
:class:`~pi_nb.agent.session.Session`), and the settings rule: explicit R / keep,
per-model overrides and pi_nb's scaling of Pi's defaults to small windows.

Kept apart from the session's running so the rule is one function, and the ``reserve`` /
``keep`` properties one descriptor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .next_call import request_overhead_parts
from .recovery import Limits
from .tools import Tool

if TYPE_CHECKING:
    from ..compaction import CompactionSettings
    from ..session.tree import SessionTree

__all__ = [
    "TINY_LOCAL_MODELS",
    "SessionConfig",
    "SettingOverride",
    "default_system_prompt",
    "settings_in_force",
]

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


def default_system_prompt(cwd: str, tools: Sequence[Tool]) -> str:
    """pi_nb's short default system prompt (our own wording)."""
    if not tools:
        return "You are a helpful assistant. Answer concisely and accurately."
    names = ", ".join(t.name for t in tools)
    return (
        "You are an AI coding assistant working in the folder "
        f"{cwd}. You can call these tools: {names}. Work in small, verifiable steps: read "
        "before you edit, check the result of commands, and say briefly what you changed."
    )


class SessionConfig:
    """The configuration of a :class:`~pi_nb.agent.session.Session`: model, server, window,
    compaction settings, system prompt and tools, as properties (see the Session docstring
    for the options). The session sets the fields; this class reads them consistently."""

    tree: SessionTree
    cwd: str
    tools: list[Tool]
    max_tokens: int | None
    compaction_settings: CompactionSettings
    window_note: str | None
    _model: str
    _window: int | None
    _window_cache: dict[str, int]
    _reserve: int | None
    _keep: int | None
    _settings_explicit: bool
    _tools_explicit: bool
    _system_prompt: str | None
    _run_system_prompt: str | None
    _llm_kwargs: dict[str, Any]

    @property
    def llm_kwargs(self) -> dict[str, Any]:
        """Extra options for every model call (see the class docstring); assigning replaces
        them all (``{}`` clears them)."""
        return self._llm_kwargs

    @llm_kwargs.setter
    def llm_kwargs(self, value: dict[str, Any]) -> None:
        from ..llm import check_call_options

        kwargs = dict(value or {})
        check_call_options(kwargs)
        self._llm_kwargs = kwargs
        self._adapt_script()

    def _adapt_script(self) -> None:
        """A list script for pinb/scripted becomes a stateful Script (one turn per call).

        A list is replayed by counting assistant messages in the request, which a retry, an
        omitted failure or a compaction changes; a session needs call order. Building the
        Script checks every turn, so a malformed script fails here, before any call.
        """
        script = self._llm_kwargs.get("script")
        if isinstance(script, (list, tuple)) and self._model.startswith("pinb/"):
            from ..models.scripted import Script

            self._llm_kwargs["script"] = Script(script)

    @property
    def model(self) -> str:
        return self._model

    @model.setter
    def model(self, value: str) -> None:
        self._model = self._served(value)
        self._adapt_script()

    @property
    def api_base(self) -> str | None:
        """The OpenAI-compatible server the model calls go to (``llm_kwargs["api_base"]``),
        or None; setting it applies the model-name rule of :func:`pi_nb.llm.served_model`."""
        return self._llm_kwargs.get("api_base") or None

    @api_base.setter
    def api_base(self, value: str | None) -> None:
        if value:
            self._llm_kwargs["api_base"] = value
            self._model = self._served(self._model)
        else:
            self._llm_kwargs.pop("api_base", None)
        self._window_cache.clear()  # another server may report another window
        self.window_note = None

    def _served(self, model: str) -> str:
        from ..llm import served_model

        return served_model(model, self.api_base) if self.api_base else model

    @property
    def window(self) -> int:
        """Context window W: explicit, else the model's (litellm's table; pinb/smollm2 → 2048)."""
        if self._window is not None:
            return self._window
        cached = self._window_cache.get(self._model)
        if cached is None:
            if self.api_base:
                import warnings

                from ..llm import endpoint_window

                # Ask the server; never assume a window silently (the note says so).
                cached, self.window_note = endpoint_window(self._model, self.api_base)
                if self.window_note:
                    warnings.warn(self.window_note, UserWarning, stacklevel=2)
            else:
                from ..compaction.settings import resolve_window

                cached = resolve_window(self._model)
            self._window_cache[self._model] = cached
        return cached

    @window.setter
    def window(self, value: int | None) -> None:
        self._window = value

    @property
    def known_window(self) -> int | None:
        """The context window when already known (given, or resolved earlier), else None;
        unlike :attr:`window` it never resolves (a display must not look the model up)."""
        return self._window if self._window is not None else self._window_cache.get(self._model)

    @property
    def settings(self) -> CompactionSettings:
        """Compaction settings in force for the current model (explicit reserve/keep applied)."""
        return settings_in_force(
            self.compaction_settings,
            self._model,
            lambda: self.window,
            reserve=self._reserve,
            keep=self._keep,
            explicit=self._settings_explicit,
        )

    reserve = SettingOverride("reserve_tokens", "R: tokens kept free for the reply and the summary call.")
    keep = SettingOverride("keep_recent_tokens", "Recent tokens kept verbatim by a compaction.")

    @property
    def threshold(self) -> int:
        """W − R: a context estimate above it triggers compaction."""
        return self.window - self.reserve

    @property
    def system_prompt(self) -> str | None:
        """The system prompt sent with requests.

        Default: pi_nb's short prompt — unless the transcript carries its own system messages
        (a Pi 1.3 session), which then stand alone.
        """
        if self._system_prompt is not None:
            return self._system_prompt or None
        if any(m.get("role") == "system" for m in self.tree.projection().messages):
            return None
        return default_system_prompt(self.cwd, self._effective_tools())

    @system_prompt.setter
    def system_prompt(self, value: str | None) -> None:
        self._system_prompt = value

    def _effective_tools(self) -> list[Tool]:
        """Tools sent to the model; default tools are dropped for models without tool calling."""
        if not self.tools or self._tools_explicit:
            return self.tools
        if self._model.startswith("pinb/") and self._model != "pinb/scripted":
            from ..models import model_info_entries

            info = model_info_entries().get(self._model, {})
            if info.get("supports_function_calling") is False:
                return []
        return self.tools

    def _request_overhead_parts(self, system_prompt: str | None = None) -> tuple[int, int]:
        """(system prompt, tool declarations) estimated tokens: sent with every request but
        not stored in the transcript (:func:`~pi_nb.agent.next_call.request_overhead_parts`)."""
        prompt = system_prompt if system_prompt is not None else (self.system_prompt or "")
        return request_overhead_parts(prompt, self._effective_tools())

    def _run_overhead(self) -> int:
        """Estimated tokens of the system prompt and tool declarations of the current run."""
        return sum(self._request_overhead_parts(self._run_system_prompt))

    def _desired_output(self) -> int | None:
        """The output cap of the agent's replies: ``max_tokens`` or one in ``llm_kwargs``
        (the smaller when both are set, as :func:`pi_nb.llm.call_options` sends it)."""
        caps = [v for v in (self.max_tokens, self.llm_kwargs.get("max_tokens")) if v]
        return min(caps) if caps else None

    def _limits(self) -> Limits:
        settings = self.settings
        return Limits(
            model=self._model,
            window=self.window,
            reserve=settings.reserve_tokens,
            enabled=settings.enabled,
            desired_output=self._desired_output(),
        )
