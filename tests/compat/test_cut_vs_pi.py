"""pi_nb's compaction cut must equal prepareCompaction() of Pi 1.3.0 and of Pi 1.6.0,
exactly (one test instance per release).

``python -m pi_nb cut FILE [--leaf ID] --keep K --reserve R --json`` prints
``{"firstKeptEntryId", "isSplitTurn", "tokensBefore", "messagesToSummarize": <count>,
"turnPrefixMessages": <count>, "previousSummary": <bool>, "readFiles", "modifiedFiles"}``
or ``{"nothingToCompact": true}`` — the same document as the oracle's ``cut``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.compat

GEN_INDEXES = list(range(12))  # conftest.GEN_COUNT files are generated
KEEPS = [50, 500, 2000, 20000]
RESERVE = 16384


def _cut_requests(compat, path, index):
    _, entries = compat.load_entries(path)
    # default leaf, plus a few interesting ones (after compactions/edits, off-branch, random)
    leaves = compat.pick_leaves(entries, seed=100 + index, max_random=1)[:5]
    reqs = [
        {"file": path, "leaf": leaf, "keep": k, "reserve": RESERVE}
        for leaf in leaves
        for k in KEEPS
    ]
    # reserveTokens does not influence the cut (Pi only passes it through)
    reqs.append({"file": path, "leaf": None, "keep": 2000, "reserve": 1})
    return reqs


@pytest.mark.parametrize("index", GEN_INDEXES)
def test_cut_matches_pi_on_generated_session(index, generated_sessions, pi_oracle, compat):
    if index >= len(generated_sessions):
        pytest.skip("fewer generated sessions")
    path = generated_sessions[index]
    reqs = _cut_requests(compat, path, index)
    expected = pi_oracle.cut_many(reqs)
    actual = compat.parallel(
        lambda r: compat.pi_nb_cut(r["file"], r["leaf"], r["keep"], r["reserve"]), reqs
    )
    problems = []
    for r, exp, act in zip(reqs, expected, actual, strict=True):
        where = f"{Path(path).name} leaf={r['leaf'] or '<default>'} keep={r['keep']} reserve={r['reserve']}"
        if set(exp) == {"error"}:
            problems.append(f"{where}: Pi oracle failed: {exp['error']}")
        elif isinstance(act, Exception):
            problems.append(f"{where}: {act}")
        else:
            diff = compat.describe_mismatch(act, exp)
            if diff:
                problems.append(f"{where}: {diff}\n  pi_nb: {act}\n  pi   : {exp}")
    assert not problems, f"{len(problems)}/{len(reqs)} cuts differ:\n" + "\n\n".join(problems)


def test_generated_sessions_exercise_cuts(generated_sessions, pi_oracle, compat):
    """Harness sanity (oracle only): the generated files make Pi cut at every keep value,
    with split turns, previous summaries and file lists."""
    reqs = [
        {"file": p, "leaf": None, "keep": k, "reserve": RESERVE}
        for p in generated_sessions
        for k in KEEPS
    ]
    results = pi_oracle.cut_many(reqs)
    by_keep: dict[int, list[dict]] = {}
    for r, res in zip(reqs, results, strict=True):
        assert set(res) != {"error"}, res
        by_keep.setdefault(r["keep"], []).append(res)
    for k in KEEPS:
        cuts = [c for c in by_keep[k] if not c.get("nothingToCompact")]
        assert cuts, f"no generated session is cut at keep={k}"
        assert any(c["messagesToSummarize"] > 0 for c in cuts), k
    everything = [c for cs in by_keep.values() for c in cs if not c.get("nothingToCompact")]
    assert any(c["isSplitTurn"] for c in everything)
    assert any(not c["isSplitTurn"] for c in everything)
    assert any(c["previousSummary"] for c in everything)
    assert any(c["readFiles"] for c in everything) and any(c["modifiedFiles"] for c in everything)
    assert any(c.get("nothingToCompact") for cs in by_keep.values() for c in cs)
    # the field set is exactly what pi_nb must print
    assert set(everything[0]) == {
        "firstKeptEntryId",
        "isSplitTurn",
        "tokensBefore",
        "messagesToSummarize",
        "turnPrefixMessages",
        "previousSummary",
        "readFiles",
        "modifiedFiles",
    }
