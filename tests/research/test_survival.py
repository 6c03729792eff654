"""Generated sessions and the fact-survival curve."""

from __future__ import annotations

import pandas as pd
import pytest

from pi_nb.compaction import CompactionSettings
from pi_nb.research._sessions import tree_bytes
from pi_nb.research.probes import CATEGORIES
from pi_nb.research.survival import fact_survival, plot_survival
from pi_nb.research.synthetic import generate_session

SETTINGS = CompactionSettings(keep_recent_tokens=1500, reserve_tokens=1500)


def test_generated_sessions_are_reproducible(tmp_path) -> None:
    a = generate_session(6, seed=3)
    b = generate_session(6, seed=3)
    assert tree_bytes(a) == tree_bytes(b)
    assert tree_bytes(generate_session(6, seed=4)) != tree_bytes(a)
    on_disk = generate_session(6, seed=3, path=str(tmp_path / "s.jsonl"))
    assert (tmp_path / "s.jsonl").exists() and len(on_disk) == len(a)
    roles = [m["role"] for m in a.projection().messages]
    assert roles.count("user") == 6 and "toolResult" in roles


def test_fact_survival_curve_shape_and_baseline() -> None:
    session = generate_session(10, seed=1)
    frame = fact_survival(session, "window:1500", k=3, settings=SETTINGS, turns_between=2)
    assert list(frame["round"].unique()) == [0, 1, 2, 3]
    assert len(frame) == 4 * (len(CATEGORIES) + 1)
    overall = frame[frame["category"] == "all"].set_index("round")
    assert overall.loc[0, "recall"] == 1.0  # nothing compacted yet: every fact is there
    assert overall.loc[1, "recall"] < 0.5  # truncation forgets most of them
    assert bool(overall.loc[1, "compacted"])
    assert len(session.entries) == len(generate_session(10, seed=1).entries)  # input untouched


def test_summaries_keep_more_facts_than_truncation() -> None:
    session = generate_session(10, seed=1)
    runs = {
        spec: fact_survival(session, spec, k=2, settings=SETTINGS, turns_between=2)
        for spec in ("extractive", "window:1500")
    }
    recall = {
        spec: frame[(frame["category"] == "all") & (frame["round"] == 2)]["recall"].item()
        for spec, frame in runs.items()
    }
    assert recall["extractive"] > recall["window:1500"] + 0.3
    again = fact_survival(session, "extractive", k=2, settings=SETTINGS, turns_between=2)
    assert again.equals(runs["extractive"])  # deterministic


def test_per_probe_rows_and_plot() -> None:
    import matplotlib

    matplotlib.use("Agg")
    session = generate_session(8, seed=2)
    detail = fact_survival(session, "mask:2", k=2, settings=SETTINGS, per_probe=True)
    assert {"strategy", "round", "probe_id", "fact", "survived"} <= set(detail.columns)
    probes = detail[detail["round"] == 0]
    assert probes["survived"].all() and len(detail) == 3 * len(probes)
    frame = fact_survival(session, "mask:2", k=2, settings=SETTINGS)
    ax = plot_survival(frame)
    assert ax.get_lines() and ax.get_xlabel() == "compactions"


def test_empty_session_is_refused() -> None:
    from pinb_testkit import new_tree

    with pytest.raises(ValueError, match="empty"):
        fact_survival(new_tree(), "mask", k=1)


def test_generated_wording_varies_and_avoids_the_summarizers_triggers() -> None:
    import pi_nb.models.extractive as extractive
    from pi_nb.research.synthetic import session_source

    triggers = (extractive._CONSTRAINT, extractive._DECISION, extractive._NEXT)
    prose: list[str] = []
    for seed in range(4):
        session = generate_session(12, seed=seed)
        assert session_source(session) == "synthetic"
        for message in session.projection().messages:
            if message["role"] == "user":
                prose.append(message["content"])
            elif message["role"] == "assistant":
                prose += [b["text"] for b in message["content"] if b.get("type") == "text"]
    planted = [p for p in prose if not p.startswith(("Let me read", "Running the tests"))]
    hits = [p for p in planted for t in triggers if t.search(p)]
    assert not hits, hits[:3]
    # Several phrasings per fact kind: the same decision is worded more than one way.
    assert any("dataclass rather than a dict" in p for p in planted)
    assert any("fits" in p and "better than a dict" in p for p in planted)
    assert session_source(generate_session(2, seed=0)) == "synthetic"


def test_survival_rows_name_their_source_and_carry_judge_scores() -> None:
    from pi_nb.research.judge import JUDGE_COLUMNS

    def judge(model, messages, **_):
        prompt = messages[-1]["content"]
        text = "GRADE: 3 - partly" if "Rubric" in prompt else "an answer"
        return {"role": "assistant", "content": [{"type": "text", "text": text}]}

    session = generate_session(8, seed=2)
    frame = fact_survival(
        session, "window:1500", k=1, settings=SETTINGS, judge_model="j", judge_completion=judge
    )
    assert set(frame["source"]) == {"synthetic"}
    overall = frame[frame["category"] == "all"]
    assert list(overall["judge_score"]) == [3.0, 3.0] and overall["judge_error"].isna().all()
    log = pd.DataFrame(frame.attrs["judge_log"])
    assert list(log.columns) == ["strategy", "round", *JUDGE_COLUMNS]
    assert sorted(set(log["round"])) == [0, 1] and len(log) == 2 * overall["probes"].iloc[0]
