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

import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..display import to_html
from ..entries import Entry, Message
from ..events import ErrorEvent
from ..hooks import Hooks
from ..models import default_model, default_model_notice
from ..session.tree import SessionTree
from ..tokens import ContextTokens
from . import recovery
from .auto_compaction import CompactionDriver
from .bus import EventBus, Listener
from .config import SessionConfig, default_system_prompt
from .loop import AgentLoop, LoopConfig, LoopResult, MessageQueue, QueueMode, now_ms, user_message
from .next_call import NextCallTokens, next_call_of
from .overflow import RetryPolicy
from .recovery import LENGTH_RECOVERY_FAILED, OVERFLOW_RECOVERY_FAILED, RecoveryState
from .result import RunResult, above_threshold_note, text_of, usage_total
from .retries import RetryDriver
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


class SessionBusyError(RuntimeError):
    """A prompt is already running on this session."""


class Session(SessionConfig):
    """An agent bound to a session file.

    A façade: configuration (:class:`~pi_nb.agent.config.SessionConfig`), the event bus
    (:mod:`pi_nb.agent.bus`), compactions (:mod:`pi_nb.agent.auto_compaction`), the
    next-call figure (:mod:`pi_nb.agent.next_call`) and the recovery rules
    (:mod:`pi_nb.agent.recovery`) each live in their own module.

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
        # the retry / overflow memory (pi_nb.agent.recovery) and the current run
        self._recovery = RecoveryState()
        self._bus = EventBus(lambda: self.hooks, self._recovery.observe)
        self._compactor = CompactionDriver(self)
        self._retries = RetryDriver(self)
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
    def path(self) -> str | None:
        return self.tree.path

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

    def context_tokens(self) -> ContextTokens:
        """Pi 1.3's projected context estimate (usage-first, stale usage ignored).

        When the figure is a pure estimate (no trusted usage) it includes the system prompt
        and tool declarations, which provider-reported usage already covers.
        :meth:`next_call_tokens` gives the same figure with its parts.
        """
        return recovery.projected_tokens(self.tree, self._run_overhead)

    def next_call_tokens(self) -> NextCallTokens:
        """The context of the next model call and its parts — the one basis every token
        figure of pi_nb shows (``%pi tokens``, ``pi-nb tokens``, the explorer, the bar)."""
        return next_call_of(self.tree, lambda: self._request_overhead_parts(self._run_system_prompt))

    # --- events, queues and abort -------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` for every event of every run; returns an unsubscribe function."""
        return self._bus.subscribe(listener)

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
            prepare_next_turn=self._compactor.between_turns,
        )
        return AgentLoop(
            self.tree,
            config,
            emit=self._bus.emit,
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
        self._bus.on_event = on_event
        self._abort.clear()
        self._compactor.start_run()
        self._recovery.start_run()
        replies: list[Message] = []
        aborted = False
        try:
            last = self._last_assistant()
            if last is not None:
                self._compactor.check(last[0], last[1], skip_aborted=False, tool_results=[])
            extra, system_prompt = self._before_agent_start(text)
            self._run_system_prompt = system_prompt
            prompts: list[Message] = [user_message(text), *extra]
            loop = self._loop(system_prompt)
            result: LoopResult | None = loop.run(prompts)
            while result is not None:
                replies += [m for m, _ in result.messages if m.get("role") == "assistant"]
                if result.aborted or self._abort.is_set():
                    aborted = True
                    self._retries.finish_cancelled()
                    break
                if not self._retries.after_run(result):
                    self._record_final_error(result)
                    break
                if self._abort.is_set():
                    aborted = True
                    break
                result = loop.continue_()
        finally:
            unsubscribe()
            self._bus.on_event = None
            self._run_system_prompt = None
            self._run_lock.release()
        error = self._compactor.run_error
        if error:
            self._bus.emit_to(on_event, ErrorEvent(message=error))
        final = next((m for m in reversed(replies) if m.get("stopReason") not in ("error", "aborted")), None)
        last_reply = replies[-1] if replies else None
        return RunResult(
            entries=appended,
            text=text_of(final if not aborted else last_reply),
            usage=usage_total(replies),
            compactions=list(self._compactor.compactions),
            error=error,
            aborted=aborted,
            replies=replies,
        )

    def _record_final_error(self, result: LoopResult) -> None:
        reply = result.last_assistant
        if self._compactor.run_error is None and reply is not None and reply.get("stopReason") == "error":
            self._compactor.run_error = reply.get("errorMessage") or "the model call failed"

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

    # --- manual operations ----------------------------------------------------------------------------

    def _require_idle(self, what: str) -> None:
        if self.is_running:
            raise SessionBusyError(f"cannot {what} while a prompt is running")

    def compact(self, focus: str | None = None, preview: bool = False) -> Any:
        """Compact now (Pi's ``/compact [focus]``), or with ``preview=True`` show what would be
        summarized and kept without changing the session."""
        self._require_idle("compact")
        return self._compactor.manual(focus, preview)

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
        self._require_idle("navigate")
        return self._compactor.navigate(self.resolve(target), summarize, focus, label)

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

    def _repr_html_(self) -> str | None:
        # The renderer lives in the notebook layer, which registers it (pi_nb.display).
        return to_html(self)

    def __repr__(self) -> str:
        where = self.tree.path or "in memory"
        window = self._window if self._window is not None else self._window_cache.get(self._model, "?")
        return f"<Session {self._model} W={window} entries={len(self.tree)} {where}>"

