"""The projected cut (Pi 1.3's findProjectedCutPoint)."""

from __future__ import annotations

from compaction_helpers import add_turn
from pinb_testkit import assistant, tool_call, tool_result, user

from pi_nb.compaction import CompactionSettings, find_cut_point, prepare_compaction
from pi_nb.compaction.cut import valid_cut_points
from pi_nb.projection import build_session_projection


def _projected(tree):
    return build_session_projection(tree.get_branch()).entries


def _role(entry):
    message = entry.get("message")
    return message.get("role") if isinstance(message, dict) else entry["type"]


def _twenty_messages(tree):
    for i in range(4):
        add_turn(
            tree,
            f"question {i} " + "q" * 200,
            steps=[
                ("read", {"path": f"f{i}.py"}, "r" * 300),
                ("bash", {"command": "ls"}, "b" * 250),
            ],
            reply="answer " + "a" * 150,
        )


def test_cut_never_lands_on_a_tool_result(tree):
    _twenty_messages(tree)
    entries = _projected(tree)
    assert len(entries) == 24
    seen = set()
    for keep in range(0, 1200, 7):
        cut = find_cut_point(entries, 0, len(entries), keep)
        kept = entries[cut.first_kept_index].entry
        assert _role(kept) != "toolResult", keep
        seen.add(_role(kept))
    assert seen == {"user", "assistant"}  # both kinds of cut happen in the sweep


def test_everything_fits_keeps_everything(tree):
    add_turn(tree, "small", reply="tiny")
    entries = _projected(tree)
    cut = find_cut_point(entries, 0, len(entries), 20000)
    assert (cut.first_kept_index, cut.is_split_turn) == (0, False)
    assert prepare_compaction(tree.get_branch(), CompactionSettings()) is None


def test_no_cut_point_keeps_from_start(tree):
    tree.append_model_change("openai", "gpt-4o")
    tree.append_message(tool_result("orphan", "x" * 4000))
    entries = _projected(tree)
    cut = find_cut_point(entries, 0, len(entries), 10)
    assert (cut.first_kept_index, cut.turn_start_index, cut.is_split_turn) == (0, -1, False)


def test_huge_trailing_tool_results_fall_back_to_the_last_cut_point(tree):
    add_turn(tree, "earlier work " + "e" * 400, reply="ok " * 50)
    ask = tree.append_message(user("read the big file"))
    call = tree.append_message(assistant("", calls=[tool_call("c1", "read", path="big.log")]))
    tree.append_message(tool_result("c1", "L" * 40000))
    prep = prepare_compaction(tree.get_branch(), CompactionSettings(keep_recent_tokens=1000))
    # 1.3 keeps the assistant that made the call (0.58 would keep everything from the start)
    assert prep.first_kept_entry_id == call["id"]
    assert prep.is_split_turn
    assert [m["role"] for m in prep.turn_prefix_messages] == ["user"]
    assert prep.turn_prefix_messages[0] is ask["message"]
    assert [m["role"] for m in prep.messages_to_summarize] == ["user", "assistant"]


def test_split_turn_detection(tree):
    turn = add_turn(
        tree,
        "refactor everything",
        steps=[
            ("read", {"path": "a.py"}, "A" * 2000),
            ("read", {"path": "b.py"}, "B" * 2000),
            ("edit", {"path": "c.py", "oldText": "x", "newText": "y"}, "C" * 2000),
        ],
        reply="all done",
    )
    entries = _projected(tree)
    cut = find_cut_point(entries, 0, len(entries), 700)
    assert cut.is_split_turn
    assert entries[cut.turn_start_index].entry is turn[0]
    assert _role(entries[cut.first_kept_index].entry) == "assistant"
    assert cut.first_kept_index == 5  # the call whose result pushed the sum over 700 tokens


def test_cut_on_user_message_is_not_split(tree):
    add_turn(tree, "one " + "1" * 2000, reply="r1")
    second = add_turn(tree, "two " + "2" * 2000, reply="r2")
    entries = _projected(tree)
    cut = find_cut_point(entries, 0, len(entries), 400)
    assert entries[cut.first_kept_index].entry is second[0]
    assert (cut.turn_start_index, cut.is_split_turn) == (-1, False)


def test_cut_extends_back_over_metadata(tree):
    add_turn(tree, "one " + "1" * 2000, reply="r1")
    model_change = tree.append_model_change("openai", "gpt-4o")
    tree.append_label(model_change["id"], "switch")
    add_turn(tree, "two " + "2" * 2000, reply="r2")
    prep = prepare_compaction(tree.get_branch(), CompactionSettings(keep_recent_tokens=400))
    assert prep.first_kept_entry_id == model_change["id"]
    # Pi 1.3 quirk (checked against the oracle): the extended cut entry does not start a
    # turn, so the previous turn counts as the prefix of a split turn
    assert prep.is_split_turn
    assert (len(prep.messages_to_summarize), len(prep.turn_prefix_messages)) == (0, 2)


def test_omitted_entries_cost_nothing_and_are_not_cut_points(tree):
    add_turn(tree, "one " + "1" * 400, reply="r1")
    big = tree.append_message(user("huge paste " + "z" * 40000))
    noted = tree.append_message(assistant("noted"))
    settings = CompactionSettings(keep_recent_tokens=150)
    # before the edit the 10k-token paste alone exceeds the budget and is the cut
    before = prepare_compaction(tree.get_branch(noted["id"]), settings)
    assert before is not None and before.first_kept_entry_id == big["id"]
    tree.append_context_edit(big["id"], None)
    # omitted, it costs nothing: everything left fits, there is nothing to summarize
    assert prepare_compaction(tree.get_branch(), settings) is None
    entries = _projected(tree)
    index = next(i for i, pe in enumerate(entries) if pe.entry is big)
    assert entries[index].messages == []
    assert index not in valid_cut_points(entries, 0, len(entries))


def test_recovery_omission_suffix_moves_the_cut(tree):
    tree.append_message(user("a" * 8000))
    tree.append_message(assistant("ok"))
    tree.append_message(user("b" * 8000))
    failed = tree.append_message(assistant("", stop="error", tokens=0))
    tree.append_context_edit(failed["id"], None)
    prep = prepare_compaction(tree.get_branch(), CompactionSettings(keep_recent_tokens=1000))
    # checked against Pi 1.3.0: the cut moves past the visible user message onto the
    # omitted failed attempt, so that user message becomes the split turn's prefix
    assert prep.to_dict() == {
        "firstKeptEntryId": failed["id"],
        "isSplitTurn": True,
        "tokensBefore": 4001,
        "messagesToSummarize": 2,
        "turnPrefixMessages": 1,
        "previousSummary": False,
        "readFiles": [],
        "modifiedFiles": [],
    }
