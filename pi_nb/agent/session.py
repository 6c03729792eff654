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
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..display import to_html
from ..entries import Entry, Message, empty_usage
from ..models import default_model, default_model_notice
from ..session.tree import SessionTree
from ..tokens import (
    ContextTokens,
    calculate_context_tokens,
    estimate_context_tokens,
    should_compact,
)
from .loop import AgentLoop, LoopConfig, LoopResult, MessageQueue, QueueMode, now_ms, user_message
from .overflow import (
    ErrorKind,
    RetryPolicy,
    is_context_overflow,
    is_recoverable_length,
    is_retryable_error,
)
from .tools import Tool, default_tools, tool_from_function

if TYPE_CHECKING:
    from ..compaction import CompactionSettings, PromptSet
    from ..projection import Projection

__all__ = [
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

OVERFLOW_RECOVERY_FAILED = (
    "Context overflow recovery failed after one compact-and-retry attempt. "
    "Reduce the context or switch to a model with a larger context window."
)
LENGTH_RECOVERY_FAILED = "Truncated response recovery failed after one compact-and-retry attempt."

Listener = Callable[[dict[str, Any]], None]


# Local models too small to end a summary on their own (see CompactionSettings).
TINY_LOCAL_MODELS = frozenset({"pinb/smollm2"})


def _tail_positions(branch: Sequence[Entry], entry_id: str | None) -> tuple[int | None, int | None]:
    """(index of the latest compaction, index of ``entry_id``) on a branch, scanning back
    from the leaf; past the compaction only while ``entry_id`` is still unfound."""
    latest = position = None
    for index in range(len(branch) - 1, -1, -1):
        entry = branch[index]
        if position is None and entry_id is not None and entry.get("id") == entry_id:
            position = index
        if latest is None and entry.get("type") == "compaction":
            latest = index
        if latest is not None and (position is not None or entry_id is None):
            break
    return latest, position


def above_threshold_note(tokens: int | None, threshold: int | None) -> str | None:
    """The hint shown when a compaction leaves the context above W − R; None otherwise."""
    if tokens is None or threshold is None or tokens <= threshold:
        return None
    return (
        f"still above W − R = {threshold:,} after compacting ({tokens:,} tokens): the kept "
        "tail and the summary do not fit; lower keep or reserve"
    )


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


def _sum_usage(messages: Iterable[Message]) -> dict[str, Any]:
    total = empty_usage()
    calls = 0
    for message in messages:
        usage = message.get("usage")
        if message.get("role") != "assistant" or not isinstance(usage, dict):
            continue
        calls += 1
        for key in ("input", "output", "cacheRead", "cacheWrite", "totalTokens"):
            total[key] += usage.get(key) or 0  # type: ignore[literal-required]
        cost = usage.get("cost") or {}
        for key in total["cost"]:
            total["cost"][key] += cost.get(key) or 0  # type: ignore[literal-required]
    out: dict[str, Any] = dict(total)
    out["calls"] = calls
    return out


def _text_of(message: Message | None) -> str:
    if not message:
        return ""
    return "".join(
        b.get("text", "") for b in message.get("content") or [] if isinstance(b, dict) and b.get("type") == "text"
    )


@dataclass
class RunResult:
    """What one :meth:`Session.prompt` did.

    Attributes:
        entries: every entry appended during the run (messages, edits, compactions …).
        text: the text of the final model reply.
        usage: tokens and cost of the run's model replies, summed (plus ``calls``).
        compactions: compaction results produced during the run, in order.
        error: why the run failed, or None.
        aborted: the run was aborted.
        replies: the run's assistant messages.
    """

    entries: list[Entry] = field(default_factory=list)
    text: str = ""
    usage: dict[str, Any] = field(default_factory=dict)
    compactions: list[Any] = field(default_factory=list)
    error: str | None = None
    aborted: bool = False
    replies: list[Message] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None and not self.aborted

    @property
    def messages(self) -> list[Message]:
        return [e["message"] for e in self.entries if e.get("type") == "message"]

    def _repr_html_(self) -> str | None:
        # The renderer lives in the notebook layer, which registers it (pi_nb.display).
        return to_html(self)

    def __repr__(self) -> str:
        status = "aborted" if self.aborted else f"error={self.error!r}" if self.error else "ok"
        text = self.text if len(self.text) <= 60 else self.text[:57] + "..."
        return (
            f"<RunResult {status}: {len(self.entries)} entries, {len(self.compactions)} compactions, "
            f"{self.usage.get('totalTokens', 0)} tokens, text={text!r}>"
        )


class Session:
    """An agent bound to a session file.

    Make one with :meth:`new`, :meth:`open` or :meth:`in_memory` (or from a
    :class:`SessionTree`). Options (all keyword):

    * ``model`` — litellm model name (default :func:`pi_nb.models.default_model`:
      ``$PI_NB_MODEL``, else ``pinb/smollm2`` with the ``local`` extra, else ``pinb/scripted``);
    * ``window`` — context window W (default: the model's, from litellm's table);
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
        hooks: Any = None,
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
        **extra_llm_kwargs: Any,
    ) -> None:
        self.tree = tree
        self._model = model or _default_model()
        self._window = window
        self._window_cache: dict[str, int] = {}
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
        if hooks is None:
            from ..hooks import Hooks

            hooks = Hooks()
        self.hooks = hooks
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
        self._complete = complete
        self.steering = MessageQueue(steering_mode)
        self.follow_ups = MessageQueue(follow_up_mode)
        self._abort = threading.Event()
        self._run_lock = threading.Lock()
        self._listeners: list[Listener] = []
        # state of the current run
        self._on_event: Listener | None = None
        self._run_compactions: list[Any] = []
        self._run_error: str | None = None
        self._retry_attempt = 0
        self._overflow_attempted = False
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
        self._model = value
        self._adapt_script()

    @property
    def window(self) -> int:
        """Context window W: explicit, else the model's (litellm's table; pinb/smollm2 → 2048)."""
        if self._window is not None:
            return self._window
        cached = self._window_cache.get(self._model)
        if cached is None:
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
        settings = self.compaction_settings.for_model(self._model)
        changes: dict[str, Any] = {}
        if self._reserve is not None:
            changes["reserve_tokens"] = self._reserve
        if self._keep is not None:
            changes["keep_recent_tokens"] = self._keep
        if not self._settings_explicit and settings.override_for(self._model) is None:
            # Pi's defaults (16384 / 20000) exceed small windows such as pinb/smollm2's 2048,
            # which would make every check compact; scale them to the window instead.
            window = self.window
            if self._reserve is None and settings.reserve_tokens * 2 > window:
                changes["reserve_tokens"] = window // 4
            if self._keep is None and settings.keep_recent_tokens * 2 > window:
                changes["keep_recent_tokens"] = window // 4
        if self._model in TINY_LOCAL_MODELS and not settings.accept_truncated:
            # SmolLM2-135M rarely stops before its cap; keep its capped summaries.
            changes["accept_truncated"] = True
        return replace(settings, **changes) if changes else settings

    @property
    def reserve(self) -> int:
        """R: tokens kept free for the reply and the summary call."""
        return self.settings.reserve_tokens

    @reserve.setter
    def reserve(self, value: int | None) -> None:
        self._reserve = value

    @property
    def threshold(self) -> int:
        """W − R: a context estimate above it triggers compaction."""
        return self.window - self.reserve

    @property
    def keep(self) -> int:
        """Recent tokens kept verbatim by a compaction."""
        return self.settings.keep_recent_tokens

    @keep.setter
    def keep(self, value: int | None) -> None:
        self._keep = value

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
        estimate = self.tree.context_tokens()
        if estimate.lastUsageIndex is not None:
            return estimate
        overhead = self._request_overhead(self._run_system_prompt)
        return ContextTokens(estimate.tokens + overhead, 0, estimate.trailingTokens + overhead, None)

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

    def _emit(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start" and event["message"].get("role") == "user":
            self._overflow_attempted = False
        targets = ([self._on_event] if self._on_event is not None else []) + list(self._listeners)
        for listener in targets:
            try:
                listener(event)
            except Exception as exc:  # a broken listener must not break the run
                warnings.warn(f"pi_nb: event listener failed on {kind}: {exc!r}", RuntimeWarning, stacklevel=2)
        if kind in _HOOK_EVENTS:
            self._notify_hooks(kind, **{k: v for k, v in event.items() if k != "type"})
        if kind == "message_end" and event["message"].get("role") == "assistant":
            stop = event["message"].get("stopReason")
            if stop not in ("error", "length"):
                self._overflow_attempted = False
            if stop != "error" and self._retry_attempt > 0:
                attempt, self._retry_attempt = self._retry_attempt, 0
                self._emit({"type": "auto_retry_end", "success": True, "attempt": attempt})

    def _notify_hooks(self, name: str, /, **payload: Any) -> None:
        emit = getattr(self.hooks, "emit", None)
        if emit is None:
            return
        try:
            emit(name, **payload)
        except Exception as exc:  # Hooks reports handler errors itself; this is a last guard
            warnings.warn(f"pi_nb: hook failed on {name}: {exc!r}", RuntimeWarning, stacklevel=2)

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
        has = getattr(self.hooks, "has_handlers", None)
        run = getattr(self.hooks, "run_context", None)
        if run is None or (has is not None and not has("context")):
            return messages
        return run(messages)

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
        self._retry_attempt = 0
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
            self._emit_to(on_event, {"type": "error", "message": self._run_error})
        final = next((m for m in reversed(replies) if m.get("stopReason") not in ("error", "aborted")), None)
        last_reply = replies[-1] if replies else None
        return RunResult(
            entries=appended,
            text=_text_of(final if not aborted else last_reply),
            usage=_sum_usage(replies),
            compactions=list(self._run_compactions),
            error=self._run_error,
            aborted=aborted,
            replies=replies,
        )

    def _emit_to(self, on_event: Listener | None, event: dict[str, Any]) -> None:
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
        run = getattr(self.hooks, "run_before_agent_start", None)
        if run is None:
            return [], base
        extra, system_prompt = run(text, base)
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
        """Pi's post-run handling; True when the loop should continue."""
        message = result.last_assistant
        if message is None:
            return bool(self.steering or self.follow_ups)
        entry_id = result.last_assistant_entry["id"] if result.last_assistant_entry else None
        if self._is_retryable(message, result.error_kind) and self._prepare_retry(message, entry_id):
            return not self._abort.is_set()
        if self._abort.is_set():
            self._finish_cancelled_retry()
            return False
        if message.get("stopReason") == "error" and self._retry_attempt > 0:
            attempt, self._retry_attempt = self._retry_attempt, 0
            self._emit(
                {
                    "type": "auto_retry_end",
                    "success": False,
                    "attempt": attempt,
                    "finalError": message.get("errorMessage"),
                }
            )
        tool_ids = [entry["id"] for _, entry in result.tool_results]
        if self._check_compaction(
            message, entry_id, skip_aborted=True, tool_results=tool_ids, error_kind=result.error_kind
        ):
            return not self._abort.is_set()
        return not self._abort.is_set() and bool(self.steering or self.follow_ups)

    def _is_retryable(self, message: Message, kind: ErrorKind | None) -> bool:
        if not self.retry.enabled or message.get("stopReason") != "error":
            return False
        if kind == "overflow" or is_context_overflow(message, self.window):
            return False
        if kind is not None:
            return kind == "transient"
        return is_retryable_error(message)

    def _prepare_retry(self, message: Message, entry_id: str | None) -> bool:
        self._retry_attempt += 1
        if self._retry_attempt > self.retry.max_retries:
            self._retry_attempt -= 1
            return False
        delay = self.retry.delay(self._retry_attempt)
        self._emit(
            {
                "type": "auto_retry_start",
                "attempt": self._retry_attempt,
                "maxAttempts": self.retry.max_retries,
                "delayMs": int(delay * 1000),
                "errorMessage": message.get("errorMessage") or "Unknown error",
            }
        )
        if entry_id is not None:
            self._omit([entry_id])
        if not self.retry.wait(delay, self._abort):
            self._finish_cancelled_retry()
            return False
        return True

    def _finish_cancelled_retry(self) -> None:
        if self._retry_attempt:
            attempt, self._retry_attempt = self._retry_attempt, 0
            self._emit(
                {"type": "auto_retry_end", "success": False, "attempt": attempt, "finalError": "Retry cancelled"}
            )

    def _omit(self, entry_ids: Iterable[str]) -> None:
        """Append ``context_edit(null)`` for entries still visible in the context."""
        projection = self.tree.projection()
        visible = {pe.id for pe in projection.entries if pe.messages}
        for entry_id in entry_ids:
            if entry_id in visible:
                entry = self.tree.append_context_edit(entry_id, None)
                self._emit({"type": "entry_appended", "entry": entry})

    def _check_compaction(
        self,
        message: Message,
        entry_id: str | None,
        *,
        skip_aborted: bool,
        tool_results: Sequence[str],
        error_kind: ErrorKind | None = None,
    ) -> bool:
        """Pi 1.3's ``_checkCompaction``; True when the loop should continue."""
        settings = self.settings
        if not settings.enabled:
            return False
        stop = message.get("stopReason")
        if skip_aborted and stop == "aborted":
            return False
        from ..llm import split_model

        provider, model_id = split_model(self._model)
        same_model = message.get("provider") == provider and message.get("model") == model_id
        window = self.window
        # Structure only, newest first: the checks look at the tail after the latest
        # compaction, so a long history costs nothing here.
        branch = self.tree.projection().light_path
        latest_compaction, position = _tail_positions(branch, entry_id)
        # A reply from before the latest compaction carries stale usage and errors.
        if latest_compaction is not None:
            if position is not None:
                if position < latest_compaction:
                    return False
            else:
                from ..entries import iso_to_ms

                stamp = iso_to_ms(branch[latest_compaction].get("timestamp")) or 0
                if (message.get("timestamp") or 0) <= stamp:
                    return False

        projection = self.tree.projection()
        projected = entry_id is None or any(
            pe.id == entry_id and any(m.get("role") == "assistant" for m in pe.messages)
            for pe in projection.entries
        )
        after = branch[position + 1 :] if position is not None else []
        edit_after = any(e.get("type") == "context_edit" for e in after)
        own_edits = [e for e in after if e.get("type") == "context_edit" and e.get("targetId") == entry_id]
        retained = entry_id is None or (
            not any(e.get("type") == "compaction" for e in after)
            and not (own_edits and own_edits[-1].get("replacement") is None)
        )
        usage_matches = projected and not edit_after
        explicit = stop == "error" and (error_kind == "overflow" or is_context_overflow(message))
        overflow = same_model and (
            (explicit and retained) or (usage_matches and is_context_overflow(message, window))
        )
        length = same_model and projected and is_recoverable_length(message, self._desired_output())
        if overflow or length:
            will_retry = stop != "stop"
            if not will_retry:
                return self._auto_compact("overflow", will_retry=False)
            if self._overflow_attempted:
                error = OVERFLOW_RECOVERY_FAILED if overflow else LENGTH_RECOVERY_FAILED
                self._emit(
                    {
                        "type": "compaction_end",
                        "reason": "overflow",
                        "result": None,
                        "aborted": False,
                        "willRetry": False,
                        "errorMessage": error,
                    }
                )
                self._notify_hooks(
                    "compaction_end",
                    reason="overflow",
                    result=None,
                    aborted=False,
                    will_retry=False,
                    error_message=error,
                )
                self._notify_hooks(
                    "session_compact_failed",
                    reason="overflow",
                    error_message=error,
                    aborted=False,
                    will_retry=False,
                    from_extension=False,
                )
                self._run_error = error
                return False
            self._overflow_attempted = True
            if entry_id is not None:
                self._omit([entry_id, *tool_results])
            return self._auto_compact("overflow", will_retry=True)

        # Threshold.
        has_edits = any(pe.entry.get("type") == "context_edit" for pe in projection.entries)
        usage = message.get("usage") if isinstance(message.get("usage"), dict) else None
        direct = calculate_context_tokens(usage) if usage else 0
        if has_edits:
            tokens = self.context_tokens().tokens
        elif stop == "error" or direct == 0:
            estimate = estimate_context_tokens(projection.messages, self.tree.token_cache)
            if estimate.lastUsageIndex is not None and latest_compaction is not None:
                source = projection.source_of(estimate.lastUsageIndex).id
                source_position = _tail_positions(branch, source)[1]
                if (-1 if source_position is None else source_position) < latest_compaction:
                    return False
            tokens = estimate.tokens
            if estimate.lastUsageIndex is None:
                tokens += self._request_overhead(self._run_system_prompt)
        else:
            tokens = direct
        if should_compact(tokens, window, settings.reserve_tokens, settings.enabled):
            return self._auto_compact("threshold", will_retry=False)
        return False

    def _desired_output(self) -> int | None:
        """The output cap of the agent's replies: ``max_tokens`` or one in ``llm_kwargs``
        (the smaller when both are set, as :func:`pi_nb.llm.call_options` sends it)."""
        caps = [v for v in (self.max_tokens, self.llm_kwargs.get("max_tokens")) if v]
        return min(caps) if caps else None

    def _before_next_turn(self) -> None:
        """Between turns of a run: compact when the projected estimate crosses W − R."""
        settings = self.settings
        if not settings.enabled:
            return
        if should_compact(self.context_tokens().tokens, self.window, settings.reserve_tokens):
            self._auto_compact("threshold", will_retry=False)

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

        self._emit({"type": "compaction_start", "reason": reason})
        try:
            result = comp.compact(
                self.tree,
                self._model,
                settings=self.settings,
                prompts=self.prompts,
                focus=None,
                hooks=self.hooks,
                reason=reason,
                will_retry=will_retry,
                window=self.window,
                completion=self._summary_completion(),
            )
        except (comp.NothingToCompact, comp.AlreadyCompacted) as exc:
            self._emit(
                {
                    "type": "compaction_end",
                    "reason": reason,
                    "result": None,
                    "aborted": False,
                    "willRetry": False,
                    "skipped": str(exc),
                }
            )
            if reason == "overflow" and will_retry:
                self._run_error = f"Context overflow recovery failed: {exc}"
            return False
        except comp.CompactionCancelled:
            self._emit(
                {"type": "compaction_end", "reason": reason, "result": None, "aborted": True, "willRetry": False}
            )
            if reason == "overflow" and will_retry:
                self._run_error = "Context overflow recovery failed: compaction cancelled"
            return False
        except Exception as exc:
            prefix = "Context overflow recovery failed" if reason == "overflow" else "Auto-compaction failed"
            from ..redact import redact

            error = redact(f"{prefix}: {exc}")
            self._emit(
                {
                    "type": "compaction_end",
                    "reason": reason,
                    "result": None,
                    "aborted": False,
                    "willRetry": False,
                    "errorMessage": error,
                }
            )
            if reason == "overflow" and will_retry:
                self._run_error = error
            else:
                self._emit({"type": "error", "message": error, "source": "compaction"})
            return False
        self._run_compactions.append(result)
        self._emit(
            {
                "type": "compaction_end",
                "reason": reason,
                "result": result,
                "aborted": False,
                "willRetry": will_retry,
                "threshold": self.threshold,
            }
        )
        if will_retry:
            return True
        return bool(self.steering or self.follow_ups)

    # --- manual operations ----------------------------------------------------------------------------

    def _require_idle(self, what: str) -> None:
        if self.is_running:
            raise SessionBusyError(f"cannot {what} while a prompt is running")

    def compact(self, focus: str | None = None, preview: bool = False) -> Any:
        """Compact now (Pi's ``/compact [focus]``), or with ``preview=True`` show what would be
        summarized and kept without changing the session."""
        from .. import compaction as comp

        self._require_idle("compact")
        common = {
            "settings": self.settings,
            "prompts": self.prompts,
            "focus": focus,
            "hooks": self.hooks,
            "window": self.window,
            "completion": self._summary_completion(),
        }
        if preview:
            return comp.preview_compaction(self.tree, self._model, **common)
        self._emit({"type": "compaction_start", "reason": "manual"})
        try:
            result = comp.compact(self.tree, self._model, reason="manual", will_retry=False, **common)
        except BaseException as exc:
            self._emit(
                {
                    "type": "compaction_end",
                    "reason": "manual",
                    "result": None,
                    "aborted": isinstance(exc, comp.CompactionCancelled),
                    "willRetry": False,
                    "errorMessage": str(exc),
                }
            )
            raise
        self._emit(
            {
                "type": "compaction_end",
                "reason": "manual",
                "result": result,
                "aborted": False,
                "willRetry": False,
                "threshold": self.threshold,
            }
        )
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
_HOOK_EVENTS = frozenset(
    {
        "agent_start",
        "agent_end",
        "turn_start",
        "turn_end",
        "message_start",
        "message_update",
        "message_end",
        "tool_execution_start",
        "tool_execution_end",
        "auto_retry_start",
        "auto_retry_end",
        "entry_appended",
    }
)
# compaction_start / compaction_end reach hooks from pi_nb.compaction.compact itself.
