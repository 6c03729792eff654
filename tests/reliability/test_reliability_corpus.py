"""The corpus of nasty session files (tests/reliability/corpus/, made by make_corpus.py).

Every file either loads — with exactly the expected lines skipped and reported as (file,
line), every read operation working — or is refused with a typed one-line error naming the
file. Where Pi (1.3.0 and 1.6.0, one test instance each) can read the file too, pi_nb's
context must be Pi's; where it cannot (Pi throws, or loops forever on a parent cycle), pi_nb
must still work.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest
import rel_figures
from rel_hostile import check_rejection, context_dict, exercise, expected_entry_count

from pi_nb.session import NotASessionError, SessionTree

CORPUS = Path(__file__).resolve().parent / "corpus"
FILES = sorted(p.name for p in CORPUS.glob("*.jsonl"))

REFUSED = {"bom_header.jsonl", "not_a_session.jsonl", "header_id_not_string.jsonl",
           "only_blank_lines.jsonl"}
# Skipped (reported) line numbers, checked by hand against the file.
SKIPPED = {
    "torn_last_line.jsonl": [4],
    "glued_lines.jsonl": [3],
    "invalid_utf8.jsonl": [3, 4, 4],  # 3: replaced by U+FFFD and kept; 4: replaced, not JSON
    "nul_bytes.jsonl": [3, 4],
    "second_header.jsonl": [3],
    "deep_nesting_too_deep.jsonl": [3],
    "entries_without_ids.jsonl": [3, 4],
    "garbage_before_header.jsonl": [1, 2],
    "huge_numbers_and_nan.jsonl": [3],
    "json_scalars_and_arrays.jsonl": [2, 3, 4, 5, 6, 8],
    "wrong_types.jsonl": [8],
    "v1_with_garbage.jsonl": [3],
}
# How Pi 1.3.0 and Pi 1.6.0 (alike) fare on the file. "same": identical context (messages, settings, tokens);
# "same-messages": identical apart from ids (a v1 migration draws random ids);
# "pi-fails": Pi throws; "pi-loops": Pi's branch walk never ends (not run);
# anything else: a documented difference.
PI = {
    "parent_cycle.jsonl": "pi-loops",
    "duplicate_id_cycle.jsonl": "pi-loops",
    "duplicate_ids.jsonl": "pi-loops",
    "self_parent.jsonl": "pi-loops",
    "compaction_garbage_fields.jsonl": "pi-fails",
    "context_edit_targets.jsonl": "pi-fails",
    "labels_and_settings_garbage.jsonl": "pi-fails",
    "wrong_types.jsonl": "pi-fails",
    "v1_with_garbage.jsonl": "same-messages",
    "huge_numbers_and_nan.jsonl": "differs: integers beyond 2**53 stay exact (Pi: float)",
    "json_scalars_and_arrays.jsonl": "differs: Pi keeps non-object lines as id-less entries "
                                     "(the last one becomes its leaf); pi_nb skips and reports them",
}


def copy(name: str, tmp_path: Path) -> Path:
    """A copy: opening may repair (newline) or migrate (rewrite) the file."""
    target = tmp_path / name
    shutil.copyfile(CORPUS / name, target)
    return target


def test_corpus_is_complete():
    from make_corpus import files

    assert sorted(files()) == FILES, "run tests/reliability/make_corpus.py"
    for name, data in files().items():
        assert (CORPUS / name).read_bytes() == data, f"{name} differs from make_corpus.py"


@pytest.mark.parametrize("name", FILES)
def test_corpus_file_loads_or_is_refused(name, tmp_path):
    path = copy(name, tmp_path)
    data = path.read_bytes()
    rel_figures.add("corpus_files")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name in REFUSED:
            with pytest.raises(NotASessionError) as info:
                SessionTree.open(path)
            check_rejection(info.value, str(path))
            assert expected_entry_count(data) is None
            return
        tree = SessionTree.open(path)
    assert [s.line for s in tree.report.skipped] == SKIPPED.get(name, [])
    assert all(s.file == str(path) for s in tree.report.skipped)
    assert len(tree.entries) == expected_entry_count(data)
    exercise(tree, tmp_path, ["nowhere", None, "a"])
    # Appending works and the result re-opens to the same projection (resume).
    before = context_dict(tree)
    tree.append_message({"role": "user", "content": "appended after load", "timestamp": 9})
    after = context_dict(tree)
    tree.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = SessionTree.open(path)
    assert context_dict(again) == after
    assert after["messages"][: len(before["messages"])] == before["messages"] or name in (
        "compaction_first_kept_nowhere.jsonl",
    )


@pytest.mark.compat
@pytest.mark.parametrize("name", [n for n in FILES if n not in REFUSED])
def test_corpus_file_projects_like_pi(
    name, tmp_path, pi_version, pi_context, describe_mismatch
):
    expectation = PI.get(name, "same")
    if expectation == "pi-loops":
        pytest.skip(f"Pi {pi_version} loops forever on this file (no cycle guard); pi_nb loads it")
    ours_path = copy(name, tmp_path / "ours") if (tmp_path / "ours").mkdir() is None else None
    pi_path = copy(name, tmp_path / "pi") if (tmp_path / "pi").mkdir() is None else None
    assert ours_path is not None and pi_path is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = context_dict(SessionTree.open(ours_path))
    theirs = pi_context(pi_path)
    rel_figures.add("oracle_checks")
    if expectation == "pi-fails":
        assert set(theirs) == {"error"}, f"Pi {pi_version} now reads this file: compare it"
        return
    assert set(theirs) != {"error"}, theirs
    if expectation == "same-messages":
        ours.pop("leafId")
        theirs.pop("leafId")
    elif expectation != "same":
        assert describe_mismatch(ours, theirs) is not None, "no longer differs: mark it same"
        return
    problem = describe_mismatch(ours, theirs)
    assert problem is None, problem
