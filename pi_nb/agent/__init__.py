"""The agent: a loop over a session file, its tools, overflow handling and the ``Session``.

``Session`` (:mod:`.session`) is a façade over one module per concept: :mod:`.config`
(model, window, settings, system prompt, tools), :mod:`.bus` (events to listeners and
hooks), :mod:`.next_call` (the next-call token figure), :mod:`.recovery` (the rules),
:mod:`.retries` and :mod:`.auto_compaction` (carrying them out).

Importing this package does not import litellm; the first model call does.
"""

from __future__ import annotations

from ..models import default_model
from .cli import compact_cli, run_prompt_cli
from .loop import AgentLoop, LoopConfig, LoopResult, MessageQueue, user_message
from .overflow import (
    RetryPolicy,
    classify_exception,
    is_context_overflow,
    is_recoverable_length,
    is_retryable_error,
)
from .session import (
    OVERFLOW_RECOVERY_FAILED,
    NextCallTokens,
    RunResult,
    Session,
    SessionBusyError,
    default_system_prompt,
    next_call_tokens,
)
from .tools import (
    Tool,
    ToolError,
    ToolResult,
    default_tools,
    to_openai_tools,
    tool,
    tool_from_function,
)

__all__ = [
    "OVERFLOW_RECOVERY_FAILED",
    "AgentLoop",
    "LoopConfig",
    "LoopResult",
    "MessageQueue",
    "NextCallTokens",
    "RetryPolicy",
    "RunResult",
    "Session",
    "SessionBusyError",
    "Tool",
    "ToolError",
    "ToolResult",
    "classify_exception",
    "compact_cli",
    "default_model",
    "default_system_prompt",
    "default_tools",
    "is_context_overflow",
    "is_recoverable_length",
    "is_retryable_error",
    "next_call_tokens",
    "run_prompt_cli",
    "to_openai_tools",
    "tool",
    "tool_from_function",
    "user_message",
]
