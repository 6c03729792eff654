"""The research bench: compaction strategies side by side, probe-based quality, prompt tuning,
and importers for other agents' transcripts.

Submodules (imported lazily, nothing heavy at ``import pi_nb.research``):

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

import importlib
from typing import Any

_EXPORTS = {
    "import_transcript": "importers",
    "import_pi": "importers",
    "import_claude_code": "importers",
    "import_codex": "importers",
    "import_openai": "importers",
    "detect_format": "importers",
    "ImportReport": "importers",
    "ImportResult": "importers",
    "Compactor": "strategies",
    "StrategyResult": "strategies",
    "PiSummary": "strategies",
    "ObservationMasking": "strategies",
    "SlidingWindow": "strategies",
    "Hybrid": "strategies",
    "Extractive": "strategies",
    "CallableStrategy": "strategies",
    "callable_strategy": "strategies",
    "get_strategy": "strategies",
    "STRATEGIES": "strategies",
    "Probe": "probes",
    "extract_probes": "probes",
    "score_probes": "probes",
    "probe_recall": "probes",
    "judge_probes": "probes",
    "compacted_span": "probes",
    "fact_survival": "survival",
    "plot_survival": "survival",
    "generate_session": "synthetic",
    "compare_strategies": "compare",
    "plot_comparison": "compare",
    "tune": "tuning",
    "TuningResult": "tuning",
    "prompt_editor": "tuning",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pi_nb.research' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
