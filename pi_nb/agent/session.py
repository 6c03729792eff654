"""``Session``: one agent over one session file — what the notebook and the CLI drive.

The session file (a :class:`~pi_nb.session.tree.SessionTree`) is the source of truth: every
message is appended as it completes, and every model request is rebuilt from its projection.
Around the agent loop the session applies Pi 1.3's policy:

* **threshold compaction** when the context estimate exceeds ``window − reserve``: checked
  before each prompt, between turns (before every follow-on model request) and after the run;
  provider-reported usage is trusted only when it is newer than the latest compaction or
  context edit, else the projection is re-estimated;
* **transient errors** (rate limit, 5xx, dropped connection, timeout) are retried with
  exponential backoff, the failed attempt omitted from the context by a ``context_edit``;
* **overflow recovery**: a reply rejected for context overflow (or one that stopped for length
  under context pressure) is omitted with ``context_edit(null)`` edits, the session is compacted
  (reason ``"overflow"``) and the request retried once; a second overflow stops the run with an
  error. A *successful* reply that overflowed (silent overflow) is compacted without a retry.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..display import to_html
from ..entries import Entry, Message
from ..events import (
    LOOP_EVENTS,
    AutoRetryEnd,
    AutoRetryStart,
    CompactionEnd,
    CompactionStart,
    EntryAppended,
    ErrorEvent,
    PiEvent,
    SessionCompactFailed,
)
from ..hooks import Hooks
from ..models import default_model, default_model_notice
from ..session.tree import SessionTree
from ..tokens import ContextTokens
from . import recovery
from .config import SettingOverride, settings_in_force
from .loop import AgentLoop, LoopConfig, LoopResult, MessageQueue, QueueMode, now_ms, user_message
from .overflow import ErrorKind, RetryPolicy
from .recovery import (
    LENGTH_RECOVERY_FAILED,
    OVERFLOW_RECOVERY_FAILED,
    Compact,
    GiveUp,
    Limits,
    RecoveryState,
)
from .result import RunResult, above_threshold_note, text_of, usage_total
from .tools import Tool, default_tools, tool_from_function

if TYPE_CHECKING:
    from ..compaction import CompactionSettings, PromptSet
    from ..projection import Projection

__all__ = [
    "LENGTH_RECOVERY_FAILED",
    "OVERFLOW_RECOVERY_FAILED",
    "NextCallTokens",
    "RunResult",
    "Session",
    "SessionBusyError",
    "default_system_prompt",
    "next_call_tokens",
]

_NOTICE_SHOWN: set[str] = set()


@dataclass(frozen=True)
class NextCallTokens:
    """The context tokens of the next model call, with its parts.

    Estimated (``reported`` False): ``messages`` (Pi's chars/4 over the projection) +
    ``system_prompt`` + ``tools`` (the declarations sent with every request). Reported:
    the provider's usage of the last valid reply (``usage``, which covers the system prompt
    and tools) + estimates of the ``messages`` after it.
    """

    tokens: int
    messages: int
    system_prompt: int
    tools: int
    usage: int
    reported: bool

    def parts(self) -> list[tuple[str, int]]:
        """(label, tokens) pairs that add up to :attr:`tokens`."""
        if self.reported:
            return [("reported usage", self.usage), ("estimated newer messages", self.messages)]
        return [
            ("messages", self.messages),
            ("system prompt", self.system_prompt),
            ("tool declarations", self.tools),
        ]

    def label(self) -> str:
        """``1,111 tokens (estimated: messages 534 + system prompt 60 + tool declarations
        517)``, or ``677 tokens (reported usage 677 + estimated newer messages 0)`` — the
        same words on every surface."""
        parts = " + ".join(f"{name} {value:,}" for name, value in self.parts())
        if self.reported:
            return f"{self.tokens:,} tokens ({parts})"
        return f"{self.tokens:,} tokens (estimated: {parts})"


def next_call_tokens(session_or_tree: Any, model: str | None = None) -> NextCallTokens:
    """:meth:`Session.next_call_tokens` of a Session, or of a SessionTree as
    ``Session.open`` would continue it (``model``, else the default model; default system
    prompt and tools) — so a bare file is counted on the same basis."""
    if isinstance(session_or_tree, Session):
        return session_or_tree.next_call_tokens()
    return Session(session_or_tree, model=model or default_model()).next_call_tokens()


def _default_model() -> str:
    """:func:`pi_nb.models.default_model`, saying once per process (stderr) when it fell
    back to the scripted model because the local extra is missing."""
    notice = default_model_notice()
    if notice and notice not in _NOTICE_SHOWN:
        _NOTICE_SHOWN.add(notice)
        print(notice, file=sys.stderr)
    return default_model()


#: A listener gets every typed event (:mod:`pi_nb.events`).
Listener = Callable[[PiEvent], None]


class SessionBusyError(RuntimeError):
    """A prompt is already running on this session."""


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


class Session:
    """An agent bound to a session file.

    Make one with :meth:`new`, :meth:`open` or :meth:`in_memory` (or from a
    :class:`SessionTree`). Options (all keyword):

    * ``model`` — litellm model name (default :func:`pi_nb.models.default_model`:
      ``$PI_NB_MODEL``, else ``pinb/smollm2`` with the ``local`` extra, else ``pinb/scripted``);
    * ``window`` — context window W (default: the model's, from litellm's table);
    * ``api_base`` — URL of an OpenAI-compatible server (Ollama, vLLM, llama.cpp server,
      LM Studio): a bare ``model`` then means ``openai/<model>`` (see
      :func:`pi_nb.llm.served_model`), the key is ``OPENAI_API_KEY`` when set (else a
      placeholder, in the call only), and without ``window`` the server's reported window
      is used — or 128000 with a warning (:attr:`window_note`). Neither the URL nor a key is
      written to the session file;
    * ``reserve`` / ``keep`` — R and keep-recent tokens (override ``compaction``);
    * ``compaction`` — :class:`~pi_nb.compaction.CompactionSettings`;
    * ``prompts`` — summarizer :class:`~pi_nb.compaction.PromptSet`;
    * ``hooks`` — :class:`~pi_nb.hooks.Hooks` (context, before_agent_start, compaction …);
    * ``tools`` — list of :class:`Tool` or plain functions; default: read / write / edit /
      bash in ``cwd``; ``no_tools=True`` (or ``tools=[]``) for none;
    * ``system_prompt`` — default: a short prompt naming the tools;
    * ``cwd`` — working folder of the default tools (default: the session's);
    * ``retry`` — :class:`RetryPolicy`; ``max_tokens``; ``tool_timeout``;
    * ``steering_mode`` / ``follow_up_mode`` — ``"one-at-a-time"`` or ``"all"``;
    * ``complete`` — replacement for :func:`pi_nb.llm.complete` (tests);
    * anything else is passed to every model call (e.g. ``script=[…]`` for pinb/scripted,
      ``temperature=0``); ``llm_kwargs={…}`` does the same explicitly. They are merged with
      pi_nb's own call arguments by :func:`pi_nb.llm.call_options`: an explicit option wins,
      ``max_tokens`` there caps every call (summaries too; the smaller cap applies), and
      ``model`` / ``messages`` / ``tools`` are refused (``ModelConfigError``, a ValueError).
    """

    def __init__(
        self,
        tree: SessionTree,
        *,
        model: str | None = None,
        window: int | None = None,
        reserve: int | None = None,
        keep: int | None = None,
        compaction: CompactionSettings | None = None,
        prompts: PromptSet | None = None,
        hooks: Hooks | None = None,
        tools: Sequence[Tool | Callable[..., Any]] | None = None,
        no_tools: bool = False,
        system_prompt: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
        retry: RetryPolicy | None = None,
        max_tokens: int | None = None,
        tool_timeout: float | None = None,
        steering_mode: QueueMode = "one-at-a-time",
        follow_up_mode: QueueMode = "one-at-a-time",
        complete: Callable[..., Message] | None = None,
        llm_kwargs: dict[str, Any] | None = None,
        api_base: str | None = None,
        **extra_llm_kwargs: Any,
    ) -> None:
        self.tree = tree
        self._model = model or _default_model()
        self._window = window
        self._window_cache: dict[str, int] = {}
        #: Why the window is an assumption (an ``api_base`` model of unknown window), else None.
        self.window_note: str | None = None
        self._reserve = reserve
        self._keep = keep
        self._settings_explicit = compaction is not None
        if compaction is None:
            from ..compaction.settings import CompactionSettings

            compaction = CompactionSettings()
        self.compaction_settings = compaction
        if prompts is None:
            from ..compaction.prompts import DEFAULT_PROMPTS

            prompts = DEFAULT_PROMPTS
        self.prompts = prompts
        self.hooks: Hooks = hooks if hooks is not None else Hooks()
        self.cwd = os.path.abspath(os.fspath(cwd)) if cwd is not None else tree.cwd
        self._tools_explicit = tools is not None or no_tools
        if no_tools:
            self.tools: list[Tool] = []
        elif tools is None:
            # read/write/edit stay inside the working folder; bash is not confined.
            self.tools = default_tools(self.cwd, root=self.cwd)
        else:
            self.tools = [t if isinstance(t, Tool) else tool_from_function(t) for t in tools]
        self._system_prompt = system_prompt
        self.retry = retry or RetryPolicy()
        self.max_tokens = max_tokens
        self.tool_timeout = tool_timeout
        self.llm_kwargs = {**(llm_kwargs or {}), **extra_llm_kwargs}
        if api_base:
            self.api_base = api_base
        elif self.api_base:  # given in llm_kwargs: the same model-name rule
            self._model = self._served(self._model)
        self._complete = complete
        self.steering = MessageQueue(steering_mode)
        self.follow_ups = MessageQueue(follow_up_mode)
        self._abort = threading.Event()
        self._run_lock = threading.Lock()
        self._listeners: list[Listener] = []
        # the retry / overflow memory (pi_nb.agent.recovery) and the current run
        self._recovery = RecoveryState()
        self._on_event: Listener | None = None
        self._run_compactions: list[Any] = []
        self._run_error: str | None = None
        self._run_system_prompt: str | None = None

    # --- construction --------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, lock: Any = None, **opts: Any) -> Session:
        """Open an existing session file (Pi's format).

        ``lock``: what to do when another process is writing the file — ``"wait"``,
        ``"fail"`` or seconds to wait (see :mod:`pi_nb.session.lock`).
        """
        return cls(SessionTree.open(path, lock=lock), **opts)

    def close(self) -> None:
        """Release the session file (its writer lock); the object stays readable."""
        self.tree.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def new(
        cls,
        path: str | os.PathLike[str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        **opts: Any,
    ) -> Session:
        """A new session (file created on the first message; without ``path``, in Pi's
        default session folder for ``cwd``).

        Only the file named is created: a ``path`` whose folder does not exist raises
        FileNotFoundError at once (Pi's default folder is created as needed).
        """
        folder = os.fspath(cwd) if cwd is not None else None
        if path is not None:
            parent = os.path.dirname(os.path.abspath(os.path.expanduser(os.fspath(path))))
            if not os.path.isdir(parent):
                raise FileNotFoundError(
                    f"{parent}: no such folder (create it first; pi_nb creates only the session file)"
                )
        tree = SessionTree.create(path, folder)
        return cls(tree, cwd=folder, **opts)

    @classmethod
    def in_memory(cls, cwd: str | os.PathLike[str] | None = None, **opts: Any) -> Session:
        """A session that is never written to disk."""
        folder = os.fspath(cwd) if cwd is not None else None
        return cls(SessionTree.in_memory(folder), cwd=folder, **opts)

    @classmethod
    def open_or_new(cls, path: str | os.PathLike[str], **opts: Any) -> Session:
        """Open ``path`` when it holds a session, else start a new one there."""
        file = os.fspath(path)
        if os.path.exists(file) and os.path.getsize(file) > 0:
            return cls.open(file, **opts)
        if os.path.exists(file):
            os.remove(file)  # an empty file: start afresh at the same path
        return cls.new(file, **opts)

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

    # --- properties -----------------------------------------------------------------------------

    @property
    def path(self) -> str | None:
        return self.tree.path

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

    @property
    def is_running(self) -> bool:
        return self._run_lock.locked()

    @property
    def entries(self) -> list[Entry]:
        return self.tree.entries

    # --- the context ------------------------------------------------------------------------------

    def context(self) -> Projection:
        """C = P(H): what the model sees next."""
        return self.tree.projection()

    def _request_overhead_parts(self, system_prompt: str | None = None) -> tuple[int, int]:
        """(system prompt, tool declarations) estimated tokens: sent with every request but
        not stored in the transcript. Their sum is ceil(chars / 4) of both together."""
        from ..entries import js_len, js_stringify

        prompt = system_prompt if system_prompt is not None else (self.system_prompt or "")
        prompt_chars = js_len(prompt)
        chars = prompt_chars
        tools = self._effective_tools()
        if tools:
            chars += js_len(js_stringify([t.declaration() for t in tools]))
        both = math.ceil(chars / 4)
        prompt_tokens = min(both, math.ceil(prompt_chars / 4))
        return prompt_tokens, both - prompt_tokens

    def _request_overhead(self, system_prompt: str | None = None) -> int:
        """Estimated tokens of the system prompt and tool declarations together."""
        return sum(self._request_overhead_parts(system_prompt))

    def context_tokens(self) -> ContextTokens:
        """Pi 1.3's projected context estimate (usage-first, stale usage ignored).

        When the figure is a pure estimate (no trusted usage) it includes the system prompt
        and tool declarations, which provider-reported usage already covers.
        :meth:`next_call_tokens` gives the same figure with its parts.
        """
        return recovery.projected_tokens(self.tree, self._run_overhead)

    def _run_overhead(self) -> int:
        return self._request_overhead(self._run_system_prompt)

    def _limits(self) -> Limits:
        settings = self.settings
        return Limits(
            model=self._model,
            window=self.window,
            reserve=settings.reserve_tokens,
            enabled=settings.enabled,
            desired_output=self._desired_output(),
        )

    def next_call_tokens(self) -> NextCallTokens:
        """The context of the next model call and its parts — the one basis every token
        figure of pi_nb shows (``%pi tokens``, ``pi-nb tokens``, the explorer, the bar)."""
        estimate = self.tree.context_tokens()
        if estimate.lastUsageIndex is not None:
            return NextCallTokens(
                estimate.tokens, estimate.trailingTokens, 0, 0, estimate.usageTokens, True
            )
        prompt, tools = self._request_overhead_parts(self._run_system_prompt)
        total = estimate.tokens + prompt + tools
        return NextCallTokens(total, estimate.tokens, prompt, tools, 0, False)

    # --- events ----------------------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` for every event of every run; returns an unsubscribe function."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def _emit(self, event: PiEvent) -> None:
        """Deliver ``event`` to the run's ``on_event``, the listeners and the hooks, then
        let the recovery state see it (which may close a retry sequence)."""
        targets = ([self._on_event] if self._on_event is not None else []) + list(self._listeners)
        for listener in targets:
            try:
                listener(event)
            except Exception as exc:  # a broken listener must not break the run
                warnings.warn(
                    f"pi_nb: event listener failed on {event.type}: {exc!r}", RuntimeWarning, stacklevel=2
                )
        if event.type in _HOOK_EVENTS:
            self._notify_hooks(event)
        ended = self._recovery.observe(event)
        if ended is not None:
            self._emit(ended)

    def _notify_hooks(self, event: PiEvent) -> None:
        try:
            self.hooks.emit(event)
        except Exception as exc:  # Hooks reports handler errors itself; this is a last guard
            warnings.warn(f"pi_nb: hook failed on {event.type}: {exc!r}", RuntimeWarning, stacklevel=2)

    # --- queues and abort -------------------------------------------------------------------------

    def steer(self, text: str) -> None:
        """Queue a message injected before the next model call of the running prompt."""
        self.steering.push(text)

    def follow_up(self, text: str) -> None:
        """Queue a message processed when the agent would otherwise stop."""
        self.follow_ups.push(text)

    def abort(self) -> None:
        """Stop the running prompt: the partial reply is kept with stopReason "aborted"."""
        self._abort.set()

    # --- running ----------------------------------------------------------------------------------------

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

    def _loop(self, system_prompt: str | None) -> AgentLoop:
        config = LoopConfig(
            model=self._model,
            tools=self._effective_tools(),
            system_prompt=system_prompt,
            llm_kwargs=self.llm_kwargs,
            max_tokens=self.max_tokens,
            transform_context=self._transform_context,
            complete=self._complete,
            tool_timeout=self.tool_timeout,
            prepare_next_turn=self._before_next_turn,
        )
        return AgentLoop(
            self.tree,
            config,
            emit=self._emit,
            abort=self._abort,
            steering=self.steering,
            follow_up=self.follow_ups,
        )

    def _transform_context(self, messages: list[Message]) -> list[Message]:
        """The ``context`` hook (Pi's transformContext), skipped when nobody listens."""
        if not self.hooks.has_handlers("context"):
            return messages
        return self.hooks.run_context(messages)

    def prompt(self, text: str, on_event: Listener | None = None) -> RunResult:
        """Send a user prompt and run the agent until it stops.

        ``on_event`` receives this run's events (``message_update`` carries text deltas).
        Returns a :class:`RunResult`; a failed run has ``error`` set (it does not raise).
        A model that cannot be called as configured — its API key is not in the environment
        — raises :class:`pi_nb.llm.ModelConfigError` (one line naming the variable) before
        anything is sent or written.
        """
        if self._complete is None:
            from ..llm import check_environment

            check_environment(self._model, self.llm_kwargs)
        if not self._run_lock.acquire(blocking=False):
            raise SessionBusyError("a prompt is already running; use steer() or follow_up()")
        appended: list[Entry] = []
        unsubscribe = self.tree.on_append(appended.append)
        self._on_event = on_event
        self._abort.clear()
        self._run_compactions = []
        self._run_error = None
        self._recovery.start_run()
        replies: list[Message] = []
        aborted = False
        try:
            last = self._last_assistant()
            if last is not None:
                self._check_compaction(last[0], last[1], skip_aborted=False, tool_results=[])
            extra, system_prompt = self._before_agent_start(text)
            self._run_system_prompt = system_prompt
            prompts: list[Message] = [user_message(text), *extra]
            loop = self._loop(system_prompt)
            result: LoopResult | None = loop.run(prompts)
            while result is not None:
                replies += [m for m, _ in result.messages if m.get("role") == "assistant"]
                if result.aborted or self._abort.is_set():
                    aborted = True
                    self._finish_cancelled_retry()
                    break
                if not self._after_run(result):
                    self._record_final_error(result)
                    break
                if self._abort.is_set():
                    aborted = True
                    break
                result = loop.continue_()
        finally:
            unsubscribe()
            self._on_event = None
            self._run_system_prompt = None
            self._run_lock.release()
        if self._run_error:
            self._emit_to(on_event, ErrorEvent(message=self._run_error))
        final = next((m for m in reversed(replies) if m.get("stopReason") not in ("error", "aborted")), None)
        last_reply = replies[-1] if replies else None
        return RunResult(
            entries=appended,
            text=text_of(final if not aborted else last_reply),
            usage=usage_total(replies),
            compactions=list(self._run_compactions),
            error=self._run_error,
            aborted=aborted,
            replies=replies,
        )

    def _emit_to(self, on_event: Listener | None, event: PiEvent) -> None:
        previous = self._on_event
        self._on_event = on_event
        try:
            self._emit(event)
        finally:
            self._on_event = previous

    def _record_final_error(self, result: LoopResult) -> None:
        reply = result.last_assistant
        if self._run_error is None and reply is not None and reply.get("stopReason") == "error":
            self._run_error = reply.get("errorMessage") or "the model call failed"

    def _before_agent_start(self, text: str) -> tuple[list[Message], str | None]:
        base = self.system_prompt
        extra, system_prompt = self.hooks.run_before_agent_start(text, base)
        messages: list[Message] = []
        for item in extra or []:
            messages.append(
                {
                    "role": "custom",
                    "customType": item.get("customType") or "custom",
                    "content": item.get("content") if item.get("content") is not None else [],
                    "display": bool(item.get("display", True)),
                    **({"details": item["details"]} if item.get("details") is not None else {}),
                    "timestamp": now_ms(),
                }
            )
        return messages, system_prompt

    def _last_assistant(self) -> tuple[Message, str | None] | None:
        """The last assistant message in the context (aborted ones included) and its entry id."""
        for pe in reversed(self.tree.projection().entries):
            for message in reversed(pe.messages):
                if message.get("role") == "assistant":
                    return message, pe.id
        return None

    # --- after a run: retry, overflow, threshold ------------------------------------------------------

    def _after_run(self, result: LoopResult) -> bool:
        """Pi's post-run handling: retry first, then the compaction check; True when the
        loop should continue."""
        message = result.last_assistant
        if message is None:
            return bool(self.steering or self.follow_ups)
        entry_id = result.last_assistant_entry["id"] if result.last_assistant_entry else None
        state = self._recovery
        if state.should_retry(message, result.error_kind, self.retry, self.window) and self._retry(
            message, entry_id
        ):
            return not self._abort.is_set()
        if self._abort.is_set():
            self._finish_cancelled_retry()
            return False
        if message.get("stopReason") == "error":
            self._emit_if(state.end_retry(success=False, final_error=message.get("errorMessage")))
        tool_ids = [entry["id"] for _, entry in result.tool_results]
        if self._check_compaction(
            message, entry_id, skip_aborted=True, tool_results=tool_ids, error_kind=result.error_kind
        ):
            return not self._abort.is_set()
        return not self._abort.is_set() and bool(self.steering or self.follow_ups)

    def _emit_if(self, event: PiEvent | None) -> None:
        if event is not None:
            self._emit(event)

    def _retry(self, message: Message, entry_id: str | None) -> bool:
        """Announce and wait out one retry (the failed attempt omitted); False when the
        retries are spent or the wait was aborted."""
        start = self._recovery.next_retry(message, self.retry)
        if start is None:
            return False
        self._emit(start)
        if entry_id is not None:
            self._omit([entry_id])
        if not self.retry.wait(start.delay_ms / 1000, self._abort):
            self._finish_cancelled_retry()
            return False
        return True

    def _finish_cancelled_retry(self) -> None:
        self._emit_if(self._recovery.end_retry(success=False, final_error="Retry cancelled"))

    def _omit(self, entry_ids: Iterable[str]) -> None:
        """Append ``context_edit(null)`` for entries still visible in the context."""
        projection = self.tree.projection()
        visible = {pe.id for pe in projection.entries if pe.messages}
        for entry_id in entry_ids:
            if entry_id in visible:
                self._emit(EntryAppended(entry=self.tree.append_context_edit(entry_id, None)))

    def _check_compaction(
        self,
        message: Message,
        entry_id: str | None,
        *,
        skip_aborted: bool,
        tool_results: Sequence[str],
        error_kind: ErrorKind | None = None,
    ) -> bool:
        """Pi 1.3's ``_checkCompaction`` (rules in :mod:`pi_nb.agent.recovery`); True when
        the loop should continue."""
        decision = recovery.check_compaction(
            self.tree,
            message,
            entry_id,
            self._limits(),
            self._recovery,
            skip_aborted=skip_aborted,
            tool_results=tool_results,
            error_kind=error_kind,
            overhead=self._run_overhead,
        )
        return self._carry_out(decision)

    def _carry_out(self, decision: recovery.Decision) -> bool:
        """Do what the rules decided; True when the loop should continue."""
        if decision is None:
            return False
        if isinstance(decision, GiveUp):
            self._end_compaction("overflow", error_message=decision.error)
            self._notify_hooks(
                SessionCompactFailed(
                    reason="overflow",
                    error_message=decision.error,
                    aborted=False,
                    will_retry=False,
                    from_extension=False,
                )
            )
            self._run_error = decision.error
            return False
        if decision.omit:
            self._omit(decision.omit)
        return self._auto_compact(decision.reason, will_retry=decision.will_retry)

    def _desired_output(self) -> int | None:
        """The output cap of the agent's replies: ``max_tokens`` or one in ``llm_kwargs``
        (the smaller when both are set, as :func:`pi_nb.llm.call_options` sends it)."""
        caps = [v for v in (self.max_tokens, self.llm_kwargs.get("max_tokens")) if v]
        return min(caps) if caps else None

    def _before_next_turn(self) -> None:
        """Between turns of a run: compact when the projected estimate crosses W − R."""
        decision: Compact | None = recovery.between_turns(self.tree, self._limits(), self._run_overhead)
        self._carry_out(decision)

    def _end_compaction(self, reason: str, *, to_hooks: bool = True, **fields: Any) -> None:
        """The one place a session's ``compaction_end`` is built (listeners; hooks too
        unless :func:`pi_nb.compaction.compact` already told them). ``fields``: those of
        :class:`~pi_nb.events.CompactionEnd`; ``threshold`` is added to a result."""
        threshold = self.threshold if fields.get("result") is not None else None
        event = CompactionEnd(reason=reason, threshold=threshold, **fields)
        self._emit(event)
        if to_hooks:
            self._notify_hooks(event)

    def _summary_completion(self) -> Callable[..., Message]:
        """The model call compaction uses for summaries: same model, same extra kwargs."""
        from ..llm import call_options

        complete = self._complete
        kwargs = dict(self.llm_kwargs)

        def call(model: str, messages: Sequence[dict[str, Any]], **options: Any) -> Message:
            nonlocal complete
            if complete is None:
                from ..llm import complete
            return complete(model, messages, **call_options(kwargs, **{"stream": False, **options}))

        return call

    def _auto_compact(self, reason: str, *, will_retry: bool) -> bool:
        """Run an automatic compaction; True when the loop should continue afterwards."""
        from .. import compaction as comp
        from ..redact import redact

        self._emit(CompactionStart(reason=reason))
        recovering = reason == "overflow" and will_retry
        try:
            result = comp.compact(
                self.tree,
                self._model,
                reason=reason,
                will_retry=will_retry,
                **self._compaction_options(None),
            )
        except (comp.NothingToCompact, comp.AlreadyCompacted) as exc:
            self._end_compaction(reason, skipped=str(exc), to_hooks=False)
            if recovering:
                self._run_error = f"Context overflow recovery failed: {exc}"
            return False
        except comp.CompactionCancelled:
            self._end_compaction(reason, aborted=True, to_hooks=False)
            if recovering:
                self._run_error = "Context overflow recovery failed: compaction cancelled"
            return False
        except Exception as exc:
            prefix = "Context overflow recovery failed" if reason == "overflow" else "Auto-compaction failed"
            error = redact(f"{prefix}: {exc}")
            self._end_compaction(reason, error_message=error, to_hooks=False)
            if recovering:
                self._run_error = error
            else:
                self._emit(ErrorEvent(message=error, source="compaction"))
            return False
        self._run_compactions.append(result)
        self._end_compaction(reason, result=result, will_retry=will_retry, to_hooks=False)
        if will_retry:
            return True
        return bool(self.steering or self.follow_ups)

    # --- manual operations ----------------------------------------------------------------------------

    def _require_idle(self, what: str) -> None:
        if self.is_running:
            raise SessionBusyError(f"cannot {what} while a prompt is running")

    def _compaction_options(self, focus: str | None) -> dict[str, Any]:
        """What every compaction of this session passes to :func:`pi_nb.compaction.compact`."""
        return {
            "settings": self.settings,
            "prompts": self.prompts,
            "focus": focus,
            "hooks": self.hooks,
            "window": self.window,
            "completion": self._summary_completion(),
        }

    def compact(self, focus: str | None = None, preview: bool = False) -> Any:
        """Compact now (Pi's ``/compact [focus]``), or with ``preview=True`` show what would be
        summarized and kept without changing the session."""
        from .. import compaction as comp

        self._require_idle("compact")
        options = self._compaction_options(focus)
        if preview:
            return comp.preview_compaction(self.tree, self._model, **options)
        self._emit(CompactionStart(reason="manual"))
        try:
            result = comp.compact(self.tree, self._model, reason="manual", will_retry=False, **options)
        except BaseException as exc:
            self._end_compaction(
                "manual",
                aborted=isinstance(exc, comp.CompactionCancelled),
                error_message=str(exc),
                to_hooks=False,
            )
            raise
        self._end_compaction("manual", result=result, to_hooks=False)
        return result

    def above_threshold_note(self, tokens: int | None) -> str | None:
        """A one-line hint when a compaction left ``tokens`` above W − R (the kept tail plus
        the summary do not fit: the next turn would compact again); None when it fits."""
        return above_threshold_note(tokens, self.threshold)

    def resolve(self, target: str) -> str:
        """An entry id for an id or a label."""
        if target in self.tree:
            return target
        found = self.tree.find_label(target)
        if found is None:
            from ..session.tree import EntryNotFoundError

            raise EntryNotFoundError(f"Entry {target} not found (no entry or label with that name)")
        return found

    def navigate(self, target: str, summarize: bool = False, focus: str | None = None, label: str | None = None) -> Any:
        """Move to another point of the tree (Pi's ``/tree``), optionally summarizing the
        branch being left."""
        from .. import compaction as comp

        self._require_idle("navigate")
        from ..compaction.settings import DEFAULT_BRANCH_SUMMARY_RESERVE

        return comp.navigate(
            self.tree,
            self.resolve(target),
            summarize=summarize,
            model=self._model,
            focus=focus,
            hooks=self.hooks,
            label=label,
            prompts=self.prompts,
            window=self.window if summarize else None,
            reserve_tokens=min(DEFAULT_BRANCH_SUMMARY_RESERVE, self.reserve),
            completion=self._summary_completion(),
            accept_truncated=self.settings.accept_truncated,
            pi_release=self.settings.pi_release,
        )

    def label(self, entry_id: str, text: str | None) -> Entry:
        """Label an entry (None or "" clears the label)."""
        return self.tree.append_label(self.resolve(entry_id), text)

    def edit(self, entry_id: str, omit: bool = False, replace: Any = None) -> Entry:
        """A context edit: ``omit=True`` hides the message from the model, ``replace=`` swaps
        its content (a string or content blocks). The original stays in the file."""
        if omit == (replace is not None):
            raise ValueError("edit() needs exactly one of omit=True or replace=...")
        self._require_idle("edit the context")
        target = self.resolve(entry_id)
        if omit and any(
            pe.id == target and pe.status == "omitted" for pe in self.tree.projection().entries
        ):  # a second omit would only add a duplicate edit to the record
            raise ValueError(f"{target} is already omitted from the context; nothing written")
        return self.tree.append_context_edit(target, None if omit else {"content": replace})

    @property
    def known_window(self) -> int | None:
        """The context window when already known (given, or resolved earlier), else None;
        unlike :attr:`window` it never resolves (a display must not look the model up)."""
        return self._window if self._window is not None else self._window_cache.get(self._model)

    def _repr_html_(self) -> str | None:
        # The renderer lives in the notebook layer, which registers it (pi_nb.display).
        return to_html(self)

    def __repr__(self) -> str:
        where = self.tree.path or "in memory"
        window = self._window if self._window is not None else self._window_cache.get(self._model, "?")
        return f"<Session {self._model} W={window} entries={len(self.tree)} {where}>"


# Agent events forwarded to hooks (extensions see them like Pi's).
_HOOK_EVENTS = frozenset(cls.type for cls in (*LOOP_EVENTS, AutoRetryStart, AutoRetryEnd, EntryAppended))
# compaction_start / compaction_end reach hooks from pi_nb.compaction.compact itself (and
# from Session._end_compaction when recovery gives up without compacting).
