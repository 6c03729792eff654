"""The agent loop (Pi 1.3's packages/agent semantics) over a session tree.

One run: the prompt messages are persisted, then, until the model stops calling tools and no
steering or follow-up message is waiting:

    projection of the session → transform_context (the ``context`` hook) → convert_to_llm →
    normalize → model (streamed) → persist the reply → run its tool calls → persist results

The request is rebuilt from ``tree.projection()`` before every model call — the session file
is the source of truth, so a compaction or a context edit made between two calls is seen by
the next one. Every message is appended to the tree as soon as it is complete.

Policy (retries, compaction, overflow recovery) is not decided here: the loop reports what
happened (:class:`LoopResult`) and calls ``prepare_next_turn`` before every follow-on model
request; :class:`pi_nb.agent.session.Session` owns the rest.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..entries import Entry, Message, empty_usage
from ..events import (
    AgentEnd,
    AgentStart,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    PiEvent,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
)
from ..messages import to_request
from ..session.tree import SessionTree
from .overflow import ErrorKind, classify_exception, error_message_of
from .tools import (
    Tool,
    ToolResult,
    reset_abort_event,
    result_from_value,
    set_abort_event,
    to_openai_tools,
    validate_arguments,
)

__all__ = [
    "AgentLoop",
    "LoopConfig",
    "LoopResult",
    "MessageQueue",
    "now_ms",
    "user_message",
]

Emit = Callable[[PiEvent], None]
QueueMode = Literal["one-at-a-time", "all"]

ABORTED_TOOL_TEXT = "Operation aborted"
TRUNCATED_CALL_TEXT = (
    'Tool call "{name}" was not run: the reply was cut off by the output token limit, so its '
    "arguments may be incomplete. Issue the call again with complete arguments."
)


def now_ms() -> int:
    return int(time.time() * 1000)


def user_message(text: str) -> Message:
    """A user message as Pi stores it (one text block)."""
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": now_ms()}


class MessageQueue:
    """A thread-safe queue of user messages (steering or follow-up).

    ``"one-at-a-time"`` (Pi's default) hands out one message per poll; ``"all"`` drains it.
    """

    def __init__(self, mode: QueueMode = "one-at-a-time") -> None:
        if mode not in ("one-at-a-time", "all"):
            raise ValueError(f"queue mode must be 'one-at-a-time' or 'all', not {mode!r}")
        self.mode = mode
        self._items: deque[Message] = deque()
        self._lock = threading.Lock()

    def push(self, message: str | Message) -> None:
        item = user_message(message) if isinstance(message, str) else message
        with self._lock:
            self._items.append(item)

    def take(self) -> list[Message]:
        with self._lock:
            if not self._items:
                return []
            if self.mode == "all":
                out = list(self._items)
                self._items.clear()
                return out
            return [self._items.popleft()]

    def clear(self) -> list[Message]:
        with self._lock:
            out = list(self._items)
            self._items.clear()
            return out

    def peek(self) -> list[Message]:
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def __bool__(self) -> bool:
        return len(self) > 0


@dataclass
class LoopConfig:
    """What the loop needs for its model calls and tool runs.

    Attributes:
        model: litellm model name.
        tools: tools the model may call.
        system_prompt: folded into the request's leading system message.
        llm_kwargs: extra keyword arguments for every model call (e.g. ``script=``), merged
            with the loop's own by :func:`pi_nb.llm.call_options` (explicit ones win,
            ``max_tokens`` is the smaller cap).
        max_tokens: output limit per reply (None: the provider's default).
        transform_context: Pi's ``transformContext``: gets the projected messages before they
            are converted for the provider and returns the messages to send. It must not
            change the message dicts it receives (they are the session's); ``Hooks.run_context``
            works on deep copies.
        complete: the model call (default :func:`pi_nb.llm.complete`).
        tool_timeout: seconds for tools that set no timeout of their own (None: unlimited).
        prepare_next_turn: called before every model request that follows a completed turn
            (the session's between-turn compaction check).
        stream: stream replies (text deltas become ``message_update`` events).
    """

    model: str
    tools: Sequence[Tool] = ()
    system_prompt: str | None = None
    llm_kwargs: dict[str, Any] = field(default_factory=dict)
    max_tokens: int | None = None
    transform_context: Callable[[list[Message]], list[Message]] | None = None
    complete: Callable[..., Message] | None = None
    tool_timeout: float | None = None
    prepare_next_turn: Callable[[], None] | None = None
    stream: bool = True


@dataclass
class LoopResult:
    """What one loop run did.

    Attributes:
        messages: the new messages with the entries that store them, in order.
        last_assistant / last_assistant_entry: the final model reply of the run.
        tool_results: tool results of that reply, with their entries.
        error_kind: for an error reply, what the exception behind it was
            (``overflow`` / ``transient`` / ``fatal``); None otherwise.
        exception: that exception, for debugging.
        aborted: the run was aborted.
    """

    messages: list[tuple[Message, Entry]] = field(default_factory=list)
    last_assistant: Message | None = None
    last_assistant_entry: Entry | None = None
    tool_results: list[tuple[Message, Entry]] = field(default_factory=list)
    error_kind: ErrorKind | None = None
    exception: BaseException | None = None
    aborted: bool = False


@dataclass
class _Prepared:
    index: int
    call: dict[str, Any]
    tool: Tool | None = None
    args: dict[str, Any] | None = None
    result: ToolResult | None = None
    duration_ms: int | None = None


class AgentLoop:
    """Runs turns against a session tree; see the module docstring.

    ``emit`` receives every event (plain dicts with a ``type``); ``abort`` is a
    ``threading.Event`` that stops the run (the partial reply is persisted as aborted);
    ``steering`` and ``follow_up`` are the session's queues.
    """

    def __init__(
        self,
        tree: SessionTree,
        config: LoopConfig,
        *,
        emit: Emit,
        abort: threading.Event | None = None,
        steering: MessageQueue | None = None,
        follow_up: MessageQueue | None = None,
    ) -> None:
        self.tree = tree
        self.config = config
        self._emit = emit
        self.abort = abort if abort is not None else threading.Event()
        self.steering = steering if steering is not None else MessageQueue()
        self.follow_up = follow_up if follow_up is not None else MessageQueue()
        self._tools = {t.name: t for t in config.tools}

    # --- public entry points ---------------------------------------------------------------

    def run(self, prompts: Sequence[Message]) -> LoopResult:
        """Start a run with new messages (a user prompt and any custom messages)."""
        result = LoopResult()
        self._emit(AgentStart())
        self._emit(TurnStart())
        for message in prompts:
            self._add(message, result)
        self._run_turns(result, [])
        return result

    def continue_(self) -> LoopResult | None:
        """Continue from the current context (after a retry or a recovery compaction).

        When the context ends with an assistant reply, queued steering (else follow-up)
        messages start the run; with none, there is nothing to continue and None is
        returned.
        """
        messages = self.tree.projection().messages
        last = next((m for m in reversed(messages) if m.get("role") != "system"), None)
        if last is None:
            return None
        if last.get("role") == "assistant":
            queued = self.steering.take() or self.follow_up.take()
            if not queued:
                return None
            return self.run(queued)
        result = LoopResult()
        self._emit(AgentStart())
        self._emit(TurnStart())
        self._run_turns(result, [])
        return result

    # --- the loop ------------------------------------------------------------------------------

    def _run_turns(self, result: LoopResult, pending: list[Message]) -> None:
        pending = pending or self.steering.take()
        completed_turn = False
        while True:
            more_tools = True
            while more_tools or pending:
                if completed_turn:
                    if self.config.prepare_next_turn is not None and not self.abort.is_set():
                        self.config.prepare_next_turn()
                    if not pending:
                        pending = self.steering.take()
                    self._emit(TurnStart())
                for message in pending:
                    self._add(message, result)
                pending = []

                reply, entry = self._call_model(result)
                result.last_assistant, result.last_assistant_entry = reply, entry
                result.tool_results = []
                if reply.get("stopReason") in ("error", "aborted"):
                    result.aborted = reply.get("stopReason") == "aborted"
                    self._emit(TurnEnd(message=reply, tool_results=[]))
                    self._emit(AgentEnd(messages=[m for m, _ in result.messages]))
                    return
                calls = [
                    b for b in reply.get("content") or [] if isinstance(b, dict) and b.get("type") == "toolCall"
                ]
                more_tools = bool(calls)
                if calls:
                    if reply.get("stopReason") == "length":
                        outcomes = self._fail_truncated(calls)
                    else:
                        outcomes = self._execute(calls)
                    for prepared in outcomes:
                        message = _tool_result_message(prepared)
                        self._emit(MessageStart(message=message))
                        entry_ = self._persist(message)
                        result.messages.append((message, entry_))
                        result.tool_results.append((message, entry_))
                        self._emit(MessageEnd(message=message, entry_id=entry_["id"]))
                completed_turn = True
                self._emit(TurnEnd(message=reply, tool_results=[m for m, _ in result.tool_results]))
                if self.abort.is_set():
                    # Pi's stream would end at once with an aborted reply: record it.
                    more_tools, pending = True, []
                    continue
                pending = self.steering.take()
            follow = self.follow_up.take()
            if follow:
                pending = follow
                continue
            break
        self._emit(AgentEnd(messages=[m for m, _ in result.messages]))

    # --- messages --------------------------------------------------------------------------------

    def _persist(self, message: Message) -> Entry:
        if message.get("role") == "custom":
            return self.tree.append_custom_message(
                message.get("customType") or "custom",
                message.get("content") if message.get("content") is not None else [],
                bool(message.get("display", True)),
                message.get("details"),
            )
        return self.tree.append_message(message)

    def _add(self, message: Message, result: LoopResult) -> Entry:
        self._emit(MessageStart(message=message))
        entry = self._persist(message)
        result.messages.append((message, entry))
        self._emit(MessageEnd(message=message, entry_id=entry["id"]))
        return entry

    def _request(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        messages: list[Message] = list(self.tree.projection().messages)
        if self.config.transform_context is not None:
            transformed = self.config.transform_context(messages)
            if transformed is not None:
                messages = list(transformed)
        tools = to_openai_tools(list(self.config.tools)) or None
        return to_request(messages, self.config.system_prompt, tools), tools

    def _call_model(self, result: LoopResult) -> tuple[Message, Entry]:
        from ..llm import split_model

        provider, model_id = split_model(self.config.model)
        partial: Message = {
            "role": "assistant",
            "content": [],
            "api": "litellm",
            "provider": provider,
            "model": model_id,
            "usage": empty_usage(),
            "stopReason": "pending",
            "timestamp": now_ms(),
        }
        self._emit(MessageStart(message=dict(partial)))
        deltas: list[str] = []
        error_kind: ErrorKind | None = None
        exception: BaseException | None = None
        reply: Message
        if self.abort.is_set():
            reply = {**partial, "stopReason": "aborted", "timestamp": now_ms()}
        else:
            complete = self.config.complete
            if complete is None:
                from ..llm import complete

            def on_text(delta: str) -> None:
                deltas.append(delta)
                self._emit(MessageUpdate(delta=delta, kind="text"))

            try:
                from ..llm import call_options

                request, tools = self._request()
                # One merge rule for every call (pi_nb.llm.call_options): the user's explicit
                # llm_kwargs win, max_tokens is the smaller cap.
                options = call_options(
                    self.config.llm_kwargs,
                    tools=tools,
                    max_tokens=self.config.max_tokens,
                    stream=self.config.stream,
                    on_text=on_text,
                    should_abort=self.abort.is_set,
                )
                reply = complete(self.config.model, request, **options)
            except KeyboardInterrupt:
                self.abort.set()
                reply = _with_text({**partial, "stopReason": "aborted"}, deltas)
            except Exception as exc:
                exception = exc
                error_kind = classify_exception(exc)
                reply = _with_text(
                    {**partial, "stopReason": "error", "errorMessage": error_message_of(exc)}, deltas
                )
            reply["timestamp"] = reply.get("timestamp") or now_ms()
        entry = self._persist(reply)
        result.messages.append((reply, entry))
        result.error_kind = error_kind if reply.get("stopReason") == "error" else None
        result.exception = exception
        self._emit(MessageEnd(message=reply, entry_id=entry["id"]))
        return reply, entry

    # --- tools -------------------------------------------------------------------------------------

    def _start(self, call: dict[str, Any]) -> None:
        self._emit(
            ToolExecutionStart(tool_call_id=call.get("id"), tool_name=call.get("name"), args=call.get("arguments"))
        )

    def _end(self, prepared: _Prepared) -> None:
        assert prepared.result is not None
        self._emit(
            ToolExecutionEnd(
                tool_call_id=prepared.call.get("id"),
                tool_name=prepared.call.get("name"),
                result={"content": prepared.result.content, "details": prepared.result.details},
                is_error=prepared.result.is_error,
                duration_ms=prepared.duration_ms,
            )
        )

    def _fail_truncated(self, calls: list[dict[str, Any]]) -> list[_Prepared]:
        out = []
        for index, call in enumerate(calls):
            self._start(call)
            prepared = _Prepared(
                index, call, result=ToolResult.text(TRUNCATED_CALL_TEXT.format(name=call.get("name")), is_error=True)
            )
            self._end(prepared)
            out.append(prepared)
        return out

    def _prepare(self, index: int, call: dict[str, Any]) -> _Prepared:
        prepared = _Prepared(index, call)
        name = call.get("name")
        tool = self._tools.get(name) if isinstance(name, str) else None
        if tool is None:
            prepared.result = ToolResult.text(f"Tool {name} not found", is_error=True)
            return prepared
        if call.get("argumentsError"):
            prepared.result = ToolResult.text(
                f'Invalid arguments for tool "{name}": {call["argumentsError"]}', is_error=True
            )
            return prepared
        try:
            prepared.args = validate_arguments(tool, call.get("arguments") or {})
        except ValueError as exc:
            prepared.result = ToolResult.text(str(exc), is_error=True)
            return prepared
        if self.abort.is_set():
            prepared.result = ToolResult.text(ABORTED_TOOL_TEXT, is_error=True)
            return prepared
        prepared.tool = tool
        return prepared

    def _execute(self, calls: list[dict[str, Any]]) -> list[_Prepared]:
        sequential = any(
            self._tools.get(c.get("name")) is not None
            and self._tools[c.get("name")].execution_mode == "sequential"
            for c in calls
        )
        if sequential:
            out = []
            for index, call in enumerate(calls):
                self._start(call)
                prepared = self._prepare(index, call)
                if prepared.result is None:
                    self._run_batch([prepared])
                else:
                    self._end(prepared)
                out.append(prepared)
            return out
        prepared_all = []
        for index, call in enumerate(calls):
            self._start(call)
            prepared = self._prepare(index, call)
            if prepared.result is not None:
                self._end(prepared)
            prepared_all.append(prepared)
        self._run_batch([p for p in prepared_all if p.result is None])
        return prepared_all

    def _timeout_for(self, tool: Tool) -> float | None:
        return tool.timeout if tool.timeout is not None else self.config.tool_timeout

    def _run_batch(self, batch: list[_Prepared]) -> None:
        """Run prepared calls concurrently; ``tool_execution_end`` in completion order."""
        if not batch:
            return
        executor = cf.ThreadPoolExecutor(max_workers=min(32, len(batch)), thread_name_prefix="pi-nb-tool")
        started = time.monotonic()
        futures: dict[cf.Future[tuple[ToolResult, int]], _Prepared] = {}
        deadlines: dict[cf.Future[tuple[ToolResult, int]], float | None] = {}
        try:
            for prepared in batch:
                assert prepared.tool is not None
                future = executor.submit(_invoke, prepared.tool, prepared.args or {}, self.abort)
                futures[future] = prepared
                limit = self._timeout_for(prepared.tool)
                deadlines[future] = started + limit if limit is not None else None
            pending = set(futures)
            abort_seen: float | None = None
            while pending:
                try:
                    done, _ = cf.wait(pending, timeout=0.05, return_when=cf.FIRST_COMPLETED)
                except KeyboardInterrupt:
                    self.abort.set()
                    done = set()
                for future in done:
                    prepared = futures[future]
                    prepared.result, prepared.duration_ms = future.result()
                    self._end(prepared)
                pending -= done
                now = time.monotonic()
                for future in list(pending):
                    deadline = deadlines[future]
                    if deadline is not None and now >= deadline:
                        prepared = futures[future]
                        assert prepared.tool is not None
                        prepared.result = ToolResult.text(
                            f"Tool {prepared.tool.name} timed out after {self._timeout_for(prepared.tool):g} seconds",
                            is_error=True,
                        )
                        prepared.duration_ms = int((now - started) * 1000)
                        self._end(prepared)
                        pending.discard(future)
                if pending and self.abort.is_set():
                    abort_seen = abort_seen or now
                    if now - abort_seen > 1.0:  # tools had a moment to notice the abort
                        for future in list(pending):
                            prepared = futures[future]
                            prepared.result = ToolResult.text(ABORTED_TOOL_TEXT, is_error=True)
                            self._end(prepared)
                            pending.discard(future)
        finally:
            executor.shutdown(wait=False, cancel_futures=True)


def _invoke(tool: Tool, args: dict[str, Any], abort: threading.Event) -> tuple[ToolResult, int]:
    token = set_abort_event(abort)
    started = time.monotonic()
    try:
        value = tool.fn(**args)
        result = result_from_value(value)
    except Exception as exc:
        message = str(exc) or type(exc).__name__
        result = ToolResult.text(message, is_error=True)
    finally:
        reset_abort_event(token)
    return result, int((time.monotonic() - started) * 1000)


def _tool_result_message(prepared: _Prepared) -> Message:
    assert prepared.result is not None
    message: Message = {
        "role": "toolResult",
        "toolCallId": prepared.call.get("id"),
        "toolName": prepared.call.get("name"),
        "content": prepared.result.content,
    }
    if prepared.result.details is not None:
        message["details"] = prepared.result.details
    message["isError"] = bool(prepared.result.is_error)
    if prepared.duration_ms is not None:
        message["durationMs"] = prepared.duration_ms
    message["timestamp"] = now_ms()
    return message


def _with_text(message: Message, deltas: list[str]) -> Message:
    text = "".join(deltas)
    message["content"] = [{"type": "text", "text": text}] if text else []
    return message
