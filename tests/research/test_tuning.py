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


def _continued_session():
    """A fixed history that goes on after a pause: the continuation reuses the span's file,
    error, command and value (tests/research/test_needed_later.py's SPAN / CONTINUATION)."""
    from pinb_testkit import assistant, new_tree, user
    from test_needed_later import CONTINUATION, SPAN

    tree = new_tree()
    for message in SPAN:
        tree.append_message(message)
    tree.append_message(user("Stop for now."))  # a new turn: SPAN is summarized whole
    pause = tree.append_message(assistant("Pausing here.", tokens=0))["id"]
    for message in CONTINUATION:
        tree.append_message(message)
    return tree, pause


def notes_reader(model: str, messages: list[dict], **options) -> dict:
    """An offline judge stand-in: answers every question with its whole notes."""
    prompt = messages[-1]["content"]
    notes = prompt.split("<notes>\n", 1)[1].split("\n</notes>", 1)[0]
    return {"role": "assistant", "content": [{"type": "text", "text": notes}]}


def test_tune_against_needed_later_probes_and_the_judge() -> None:
    from test_needed_later import CONTINUATION

    from pi_nb.research.probes import compacted_span, needed_later_probes

    tree, pause = _continued_session()
    settings = CompactionSettings(keep_recent_tokens=10, reserve_tokens=1000)
    # Neither Progress nor Critical Context: what the agent did and hit is not asked for.
    head, _, rest = NO_CONTEXT.initial.partition("## Progress\n")
    notes_only = replace(NO_CONTEXT, initial=head + rest[rest.index("## Key Decisions") :])
    variants = {"default": DEFAULT_PROMPTS, "notes only": notes_only}
    result = tune(
        tree,
        variants,
        settings=settings,
        completion=follow_layout(),
        at=pause,
        judge_model="stand-in",
        judge_grader="match",
        judge_completion=notes_reader,
    )
    frame = result.frame.set_index("variant")
    tree.branch(pause)
    later = needed_later_probes(compacted_span(tree, settings), CONTINUATION)
    assert later and [p for p in result.probes if p.category == "needed_later"] == later
    assert set(frame["probe_basis"]) == {"needed_later"} and frame["needed_later_note"].isna().all()
    assert (frame["probe_all"] == frame["probe_needed_later"]).all()
    # Without Progress and Critical Context the summary drops the test file, the error and
    # the command the agent used again; the goal's file, name and value stay.
    missed = result.missed("notes only")
    assert set(missed[missed["category"] == "needed_later"]["fact"]) == {
        "tests/test_pricing.py",
        "NameError",
        "NameError: name 'Decimal' is not defined",
        "pytest -q tests/test_pricing.py",
    }
    assert frame.loc["default", "probe_needed_later"] == 1.0
    assert frame.loc["notes only", "probe_needed_later"] == (len(later) - 4) / len(later)
    # The judge graded every probe of every variant; its log says which variant it read.
    assert set(frame["judge_grader"]) == {"string match"} and frame["judge_error"].isna().all()
    assert len(result.judge_log) == 2 * len(result.probes)
    assert {r["variant"] for r in result.judge_log} == {"default", "notes only"}
    assert (
        frame.loc["notes only", "judge_needed_later"] < frame.loc["default", "judge_needed_later"]
    )
    # The session's leaf has no continuation: heuristic probes, and the table says why.
    end = tune(tree, variants, settings=settings, completion=follow_layout(), at=-1)
    assert set(end.frame["probe_basis"]) == {"heuristic"}
    assert end.frame["needed_later_note"][0].startswith("no continuation")
    assert "judge_score" not in end.frame


def test_tune_passes_the_judge_reply_through_mock_response() -> None:
    tree, pause = _continued_session()
    settings = CompactionSettings(keep_recent_tokens=10, reserve_tokens=1000)
    result = tune(
        tree,
        [DEFAULT_PROMPTS],
        settings=settings,
        at=pause,
        judge_model="openai/judge-x",
        judge_options={"mock_response": "GRADE: 4 - close"},
    )
    row = result.frame.iloc[0]
    assert row["judge_score"] == 4.0 and row["judge_grader"] == "judge openai/judge-x"
    assert {r["grade_reply"] for r in result.judge_log} == {"GRADE: 4 - close"}
