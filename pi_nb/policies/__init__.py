"""Context policies built only on pi_nb's public extension points.

Pi ships neither of these; its design names the two hooks where they belong, and pi_nb ships
them as working policies (and as worked examples for writing your own):

- :mod:`.pins` — **protected facts**: pin free-text facts or whole messages; a
  ``session_before_compact`` handler guarantees that every pin survives each compaction
  (pinned messages verbatim, missing facts restored) and records what it had to restore.
- :mod:`.task_state` — an **authoritative task-state note** (goal, constraints, decisions)
  edited explicitly by the user or the agent (tool ``update_task_state``) and injected into
  every request through the ``context`` hook; never produced by summarization.
- :mod:`.pruning` — **relevance pruning**: a ``context`` handler that ranks older tool results
  against the current request (BM25, optionally sentence embeddings) and replaces the least
  relevant by placeholders in the request only, under a token budget.

Every policy only calls :meth:`pi_nb.hooks.Hooks.on` (and public functions); state lives in
``custom`` entries, which Pi 1.3 ignores, so session files stay Pi-compatible. The research
bench runs pins and pruning as strategies (``"pinned"``, ``"prune"`` in
:mod:`pi_nb.research.strategies`); policies know nothing of the research layer above them.
"""

from __future__ import annotations

from .pins import (
    PIN_TYPE,
    UNPIN_TYPE,
    Pin,
    PinOutcome,
    PinPolicy,
    disable_pins,
    enable_pins,
    fact_in,
    pin,
    pins,
    unpin,
)
from .pruning import (
    PrunedItem,
    PruneReport,
    RelevancePruner,
    bm25_scores,
    disable_pruning,
    enable_pruning,
    prune_messages,
    semantic_available,
)
from .task_state import (
    TASK_STATE_TYPE,
    TaskState,
    TaskStatePolicy,
    disable_task_state,
    enable_task_state,
    task_state,
    task_state_tool,
    update_task_state,
)

__all__ = [
    "PIN_TYPE",
    "TASK_STATE_TYPE",
    "UNPIN_TYPE",
    "Pin",
    "PinOutcome",
    "PinPolicy",
    "PruneReport",
    "PrunedItem",
    "RelevancePruner",
    "TaskState",
    "TaskStatePolicy",
    "bm25_scores",
    "disable_pins",
    "disable_pruning",
    "disable_task_state",
    "enable_pins",
    "enable_pruning",
    "enable_task_state",
    "fact_in",
    "pin",
    "pins",
    "prune_messages",
    "semantic_available",
    "task_state",
    "task_state_tool",
    "unpin",
    "update_task_state",
]
