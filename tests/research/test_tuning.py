"""Prompt tuning on a frozen history: one row per variant, diffs, and nothing written."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pi_nb.compaction import DEFAULT_PROMPTS, CompactionSettings
from pi_nb.research.synthetic import generate_session
from pi_nb.research.tuning import follow_layout, prompt_editor, tune

SETTINGS = CompactionSettings(keep_recent_tokens=1500, reserve_tokens=2000)
# The section that carries exact names and errors (the extractive stand-in's Key Decisions
# no longer matter here: generated sessions avoid its decision trigger words).
NO_CONTEXT = replace(
    DEFAULT_PROMPTS,
    initial=DEFAULT_PROMPTS.initial.replace(
        "## Critical Context\n- Exact paths, names, values and error messages needed to go on, "
        'or "(none)".\n\n',
        "",
    ),
)


def test_one_row_per_variant_and_the_file_is_untouched(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    generate_session(10, seed=1, path=str(path))
    before = path.read_bytes()
    result = tune(
        str(path),
        {"default": DEFAULT_PROMPTS, "no context": NO_CONTEXT},
        settings=SETTINGS,
        completion=follow_layout(),
    )
    assert path.read_bytes() == before
    frame = result.frame
    assert list(frame["variant"]) == ["default", "no context"]
    assert list(frame["changed"]) == ["—", "initial"]
    assert {"summary_tokens", "calls", "probe_recall", "probe_all"} <= set(frame.columns)
    assert "## Critical Context" in result.summaries["default"]
    assert "## Critical Context" not in result.summaries["no context"]
    default, edited = frame.set_index("variant").loc[["default", "no context"], "probe_recall"]
    assert edited < default
    assert "-## Critical Context" in result.diff("no context")
    assert result.diff("default") == ""
    assert len(result.missed("no context")) > len(result.missed("default"))
    html = result._repr_html_()
    assert "no context" in html and "line-through" in html


def test_list_of_variants_and_baseline() -> None:
    session = generate_session(8, seed=2)
    terse = replace(DEFAULT_PROMPTS, system="Be terse.")
    result = tune(session, [DEFAULT_PROMPTS, terse], settings=SETTINGS)
    assert list(result.frame["variant"]) == ["default", "variant 1"]
    assert list(result.frame["changed"]) == ["—", "system"]
    assert result.baseline == "default"
    with pytest.raises(ValueError, match="baseline"):
        tune(session, [DEFAULT_PROMPTS], settings=SETTINGS, baseline="nope")
    with pytest.raises(TypeError, match="not a PromptSet"):
        tune(session, {"x": "a prompt"}, settings=SETTINGS)  # type: ignore[dict-item]


def test_prompt_editor_returns_the_edited_prompt_set() -> None:
    editor = prompt_editor(fields=("initial",))
    assert editor.prompts == DEFAULT_PROMPTS
    editor.areas["initial"].value = "Summarize in three bullet points."
    assert editor.prompts.initial == "Summarize in three bullet points."
    assert editor.prompts.update == DEFAULT_PROMPTS.update
    editor.reset()
    assert editor.value == DEFAULT_PROMPTS
    assert "application/vnd.jupyter.widget-view+json" in editor._repr_mimebundle_()
    with pytest.raises(ValueError, match="unknown prompt fields"):
        prompt_editor(fields=("nope",))


def test_rows_name_the_stand_in_and_unknown_prices_are_nan() -> None:
    import math

    session = generate_session(10, seed=1)
    offline = tune(session, [DEFAULT_PROMPTS], settings=SETTINGS).frame
    assert offline["summarizer"][0] == "extractive stand-in" and offline["cost"][0] == 0.0
    unknown = tune(
        session,
        [DEFAULT_PROMPTS],
        "no-such-model-xyz",
        settings=SETTINGS,
        completion=follow_layout(lambda model, messages, **kw: _scripted(messages, **kw)),
    ).frame
    assert unknown["summarizer"][0] == "no-such-model-xyz (custom completion)"
    assert math.isnan(unknown["cost"][0])
    assert "no-such-model-xyz" in unknown["cost_note"][0]


def _scripted(messages, **kwargs):
    from pi_nb.llm import complete

    return complete("pinb/scripted", messages, stream=False, **kwargs)
