"""Compaction: cut, summarize and checkpoint long sessions (Pi semantics: cut, trigger and
format as in Pi 1.3.0 and 1.6.0; summary requests as in 1.6.0, or 1.3.0 with
``CompactionSettings(pi_release="1.3")``).

- :mod:`.settings` — budgets (reserve, keep-recent), per-model overrides, the trigger.
- :mod:`.cut` — where the kept part starts; split turns.
- :mod:`.prepare` — what to summarize, what to keep, file operations.
- :mod:`.prompts` — the editable prompt texts.
- :mod:`.summarize` — serialization and the summary model calls (window-fitted).
- :mod:`.compact` — compact / preview; branch summaries when navigating the tree.

Nothing here imports litellm until a model is called.
"""

from __future__ import annotations

from .compact import (
    AlreadyCompacted,
    BranchPreparation,
    CompactionCancelled,
    CompactionError,
    CompactionResult,
    CompactOptions,
    ContextChange,
    NavigateOptions,
    NavigateResult,
    NothingToCompact,
    PreviewOptions,
    TreePreparation,
    collect_branch_entries,
    compact,
    context_change,
    failure_events,
    hook_warnings,
    navigate,
    prepare_branch_entries,
    preview_compaction,
    result_figures,
    result_warnings,
)
from .cut import CutPoint, find_cut_point
from .prepare import (
    CompactionPreparation,
    FileOps,
    cut_command,
    format_file_operations,
    prepare_compaction,
)
from .prompts import DEFAULT_PROMPTS, PromptSet
from .settings import CompactionSettings, SettingsError, resolve_window, should_compact
from .summarize import (
    SummarizationError,
    SummaryResult,
    generate_summary,
    serialize_conversation,
)

__all__ = [
    "DEFAULT_PROMPTS",
    "AlreadyCompacted",
    "BranchPreparation",
    "CompactOptions",
    "CompactionCancelled",
    "CompactionError",
    "CompactionPreparation",
    "CompactionResult",
    "CompactionSettings",
    "ContextChange",
    "CutPoint",
    "FileOps",
    "NavigateOptions",
    "NavigateResult",
    "NothingToCompact",
    "PreviewOptions",
    "PromptSet",
    "SettingsError",
    "SummarizationError",
    "SummaryResult",
    "TreePreparation",
    "collect_branch_entries",
    "compact",
    "context_change",
    "cut_command",
    "failure_events",
    "find_cut_point",
    "format_file_operations",
    "generate_summary",
    "hook_warnings",
    "navigate",
    "prepare_branch_entries",
    "prepare_compaction",
    "preview_compaction",
    "resolve_window",
    "result_figures",
    "result_warnings",
    "serialize_conversation",
    "should_compact",
]
