"""The research bench: compaction strategies side by side, probe-based quality, prompt tuning,
and importers for other agents' transcripts.

Submodules (all imported here; none imports pandas or matplotlib before a function needs it):

- :mod:`.importers` — Pi / Claude Code / Codex / OpenAI transcripts → Pi session trees;
- :mod:`.strategies` — the :class:`~.strategies.Compactor` protocol and the strategies;
- :mod:`.probes` — probes extracted from the compacted span, offline scoring, LLM judge;
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
from .probes import Probe, compacted_span, extract_probes, judge_probes, probe_recall, score_probes
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
    "plot_comparison",
    "plot_survival",
    "probe_recall",
    "prompt_editor",
    "score_probes",
    "tune",
]
