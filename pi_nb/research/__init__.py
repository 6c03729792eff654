"""The research bench: compaction strategies side by side, probe-based quality, prompt tuning,
and importers for other agents' transcripts.

Submodules (all imported here; none imports pandas or matplotlib before a function needs it):

- :mod:`.importers` — Pi / Claude Code / Codex / OpenAI transcripts → Pi session trees;
- :mod:`.strategies` — the :class:`~.strategies.Compactor` protocol and the strategies;
- :mod:`.probes` — probes extracted from the compacted span (and the facts the continuation
  used again), offline scoring;
- :mod:`.judge` — the LLM judge: answers from the compacted context, 0–5 grades, audit log;
- :mod:`.replay` — continuation replay: the next step with the full and the compacted context;
- :mod:`.survival` — fact survival over repeated compactions;
- :mod:`.synthetic` — generated long sessions with planted facts;
- :mod:`.compare` — the batch runner (executors, cache, resume) and its plots;
- :mod:`.tuning` — prompt variants compared on one frozen history;
- :mod:`.cli` — ``pi-nb import`` / ``pi-nb compare``.
"""

from __future__ import annotations

from .compare import compare_strategies, plot_comparison
from .importers import (
    ImportReport,
    ImportResult,
    detect_format,
    import_claude_code,
    import_codex,
    import_openai,
    import_pi,
    import_transcript,
)
from .judge import judge_probes, judge_scores
from .probes import (
    CompactionPoint,
    Probe,
    compacted_span,
    compaction_point,
    extract_probes,
    needed_later_probes,
    probe_recall,
    score_probes,
)
from .replay import replay_continuation
from .strategies import (
    STRATEGIES,
    CallableStrategy,
    Compactor,
    Extractive,
    Hybrid,
    ObservationMasking,
    PinnedSummary,
    PiSummary,
    RelevancePruning,
    SlidingWindow,
    StrategyResult,
    callable_strategy,
    get_strategy,
)
from .survival import fact_survival, plot_survival
from .synthetic import generate_session
from .tuning import TuningResult, prompt_editor, tune

__all__ = [
    "STRATEGIES",
    "CallableStrategy",
    "CompactionPoint",
    "Compactor",
    "Extractive",
    "Hybrid",
    "ImportReport",
    "ImportResult",
    "ObservationMasking",
    "PiSummary",
    "PinnedSummary",
    "Probe",
    "RelevancePruning",
    "SlidingWindow",
    "StrategyResult",
    "TuningResult",
    "callable_strategy",
    "compacted_span",
    "compaction_point",
    "compare_strategies",
    "detect_format",
    "extract_probes",
    "fact_survival",
    "generate_session",
    "get_strategy",
    "import_claude_code",
    "import_codex",
    "import_openai",
    "import_pi",
    "import_transcript",
    "judge_probes",
    "judge_scores",
    "needed_later_probes",
    "plot_comparison",
    "plot_survival",
    "probe_recall",
    "prompt_editor",
    "replay_continuation",
    "score_probes",
    "tune",
]
