"""Session files: loading rules, lazy creation, migration, round trips, listing."""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
import warnings
from pathlib import Path

import pytest
from pinb_testkit import FIXTURES, Clock, assistant, new_tree, roles, texts, tool_result, user

from pi_nb.render import render_tree
from pi_nb.session import (
    NotASessionError,
    SessionError,
    SessionLoadWarning,
    SessionTree,
    list_session_infos,
)
from pi_nb.session.listing import default_session_dir, encode_cwd


def _lines(path) -> list[str]:
    return Path(path).read_text(encoding="utf-8").splitlines()


def _copy(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copy(FIXTURES / name, dest)
    return dest


def _open_quiet(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SessionLoadWarning)
        return SessionTree.open(path)


# --- opening -----------------------------------------------------------------------------------


def test_missing_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        SessionTree.open(tmp_path / "nope.jsonl")
    assert not (tmp_path / "nope.jsonl").exists()


def test_empty_file_gets_a_fresh_header(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    tree = SessionTree.open(path)
    lines = _lines(path)
    assert len(lines) == 1
    header = json.loads(lines[0])
    assert header["type"] == "session" and header["version"] == 3
    assert header["id"] == tree.session_id
    assert tree.path == str(path)
    assert list(tree.entries) == []
    # reopening the recovered file yields the same session
    assert SessionTree.open(path).session_id == tree.session_id
    # and appends go to that same path
    tree.append_message(user("hi"))
    assert [json.loads(x)["type"] for x in _lines(path)] == ["session", "message"]


@pytest.mark.parametrize("content", [
    b"just some text\n",
    b'{"type":"message","id":"x","parentId":null}\n',
    b'{"type":"session"}\n',  # no string id
    b"[1,2]\n",
])
def test_non_session_non_empty_file_raises_and_is_untouched(tmp_path, content):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(NotASessionError):
        SessionTree.open(path)
    assert path.read_bytes() == content


def test_malformed_first_line_before_header_is_skipped(tmp_path):
    path = tmp_path / "s.jsonl"
    header = {"type": "session", "version": 3, "id": "sid", "timestamp": "2026-01-01T00:00:00.000Z",
              "cwd": "/p"}
    path.write_text("{broken\n" + json.dumps(header) + "\n", encoding="utf-8")
    with pytest.warns(SessionLoadWarning):
        tree = SessionTree.open(path)
    assert tree.session_id == "sid"
    assert [(s.line, s.file) for s in tree.report.skipped] == [(1, str(path))]


def test_malformed_middle_lines_are_skipped_reported_and_warned(tmp_path):
    path = _copy("garbage_lines.jsonl", tmp_path)
    with pytest.warns(SessionLoadWarning) as caught:
        tree = SessionTree.open(path)
    assert [e["id"] for e in tree.entries] == ["b0000001", "b0000002", "b0000004"]
    skipped = tree.report.skipped
    assert [s.line for s in skipped] == [3, 6, 8]
    assert all(s.file == str(path) for s in skipped)
    assert "not valid JSON" in skipped[0].reason
    assert "not an object" in skipped[1].reason
    assert "not valid JSON" in skipped[2].reason
    message = str(caught[0].message)
    assert f"{path}:3" in message and f"{path}:8" in message
    # the leaf is the last entry in file order
    assert tree.leaf_id == "b0000004"
    assert texts(tree.projection().messages) == ["before garbage", "after garbage", "last good"]


def test_blank_lines_are_silently_fine(tmp_path):
    path = tmp_path / "s.jsonl"
    header = {"type": "session", "version": 3, "id": "sid", "timestamp": "2026-01-01T00:00:00.000Z",
              "cwd": "/p"}
    msg = {"type": "message", "id": "m1", "parentId": None,
           "timestamp": "2026-01-01T00:00:01.000Z", "message": user("x")}
    path.write_text("\n" + json.dumps(header) + "\n\n   \n" + json.dumps(msg) + "\n\n",
                    encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error", SessionLoadWarning)
        tree = SessionTree.open(path)
    assert tree.report.skipped == []
    assert tree.report.clean
    assert [e["id"] for e in tree.entries] == ["m1"]


def test_missing_final_newline_is_reported_and_next_append_repairs_it(tmp_path):
    path = tmp_path / "s.jsonl"
    tree = new_tree(str(path))
    tree.append_message(user("a"))
    tree.append_message(assistant("b"))
    tree.close()
    data = path.read_bytes()
    path.write_bytes(data.rstrip(b"\n"))
    again = SessionTree.open(path)
    assert again.report.missing_final_newline is True
    assert again.report.skipped == []
    again.append_message(user("c"))
    again.close()
    raw = path.read_bytes()
    assert raw.endswith(b"\n") and b"}{" not in raw
    lines = _lines(path)
    assert len(lines) == 4
    reread = SessionTree.open(path)
    assert reread.report.clean
    assert texts(reread.projection().messages) == ["a", "b", "c"]


def test_truncated_last_line_then_append_does_not_glue(tmp_path):
    path = tmp_path / "s.jsonl"
    tree = new_tree(str(path))
    tree.append_message(user("a"))
    tree.close()
    with open(path, "ab") as fh:
        fh.write(b'{"type":"message","id":"zz","parentId":nu')
    again = _open_quiet(path)
    assert again.report.missing_final_newline
    assert [s.line for s in again.report.skipped] == [3]
    e = again.append_message(user("b"))
    again.close()
    third = _open_quiet(path)
    assert [x.line for x in third.report.skipped] == [3]
    assert third.leaf_id == e["id"]
    assert texts(third.projection().messages) == ["a", "b"]


def test_second_header_is_skipped_and_reported(tmp_path):
    path = tmp_path / "s.jsonl"
    h = {"type": "session", "version": 3, "id": "sid", "timestamp": "2026-01-01T00:00:00.000Z",
         "cwd": "/p"}
    path.write_text(json.dumps(h) + "\n" + json.dumps({**h, "id": "other"}) + "\n",
                    encoding="utf-8")
    tree = _open_quiet(path)
    assert tree.session_id == "sid"
    assert [s.line for s in tree.report.skipped] == [2]


def test_leaf_is_last_entry_in_file_order_not_newest_or_deepest(tmp_path):
    path = tmp_path / "s.jsonl"
    h = {"type": "session", "version": 3, "id": "sid", "timestamp": "2026-01-01T00:00:00.000Z",
         "cwd": "/p"}
    e = [
        {"type": "message", "id": "r", "parentId": None, "timestamp": "2026-01-01T00:00:09.000Z",
         "message": user("root")},
        {"type": "message", "id": "d1", "parentId": "r", "timestamp": "2026-01-01T00:00:09.000Z",
         "message": user("deep1")},
        {"type": "message", "id": "d2", "parentId": "d1", "timestamp": "2026-01-01T00:00:09.000Z",
         "message": user("deep2")},
        {"type": "message", "id": "s", "parentId": "r", "timestamp": "2026-01-01T00:00:01.000Z",
         "message": user("shallow old")},
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in [h, *e]), encoding="utf-8")
    tree = SessionTree.open(path)
    assert tree.leaf_id == "s"
    assert texts(tree.projection().messages) == ["root", "shallow old"]


# --- lazy creation -------------------------------------------------------------------------------


def test_no_file_until_first_user_message_then_everything_buffered(tmp_path):
    path = tmp_path / "s.jsonl"
    tree = new_tree(str(path))
    tree.append_model_change("openai", "gpt-4o")
    tree.append_thinking_level_change("high")
    tree.append_message({"role": "system", "content": "prompt", "timestamp": 0})
    tree.append_custom_message("ext", "note")
    tree.append_message(tool_result())
    assert not path.exists() and not tree.is_persisted
    tree.append_message(user("go"))
    assert tree.is_persisted
    types = [json.loads(x)["type"] for x in _lines(path)]
    assert types == ["session", "model_change", "thinking_level_change", "message",
                     "custom_message", "message", "message"]
    tree.append_message(assistant("done"))
    assert len(_lines(path)) == 8
    assert json.loads(_lines(path)[-1])["message"]["role"] == "assistant"


def test_first_assistant_message_also_flushes(tmp_path):
    path = tmp_path / "s.jsonl"
    tree = new_tree(str(path))
    tree.append_model_change("p", "m")
    assert not path.exists()
    tree.append_message(assistant("hi"))
    assert [json.loads(x)["type"] for x in _lines(path)] == ["session", "model_change", "message"]


def test_file_lines_are_compact_json_in_append_order(tmp_path):
    path = tmp_path / "s.jsonl"
    tree = new_tree(str(path))
    a = tree.append_message(user("é 𝄞"))
    b = tree.append_message(assistant("x"))
    lines = _lines(path)
    assert lines[1] == json.dumps(a, separators=(",", ":"), ensure_ascii=False)
    assert lines[2] == json.dumps(b, separators=(",", ":"), ensure_ascii=False)
    assert "é 𝄞" in lines[1]  # not \u-escaped, like JSON.stringify


def test_create_on_existing_non_empty_file_raises(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text("something\n", encoding="utf-8")
    with pytest.raises(SessionError):
        SessionTree.create(path, "/p")
    assert path.read_text(encoding="utf-8") == "something\n"


def test_exclusive_create_refuses_a_file_that_appeared_meanwhile(tmp_path):
    path = tmp_path / "s.jsonl"
    tree = new_tree(str(path))
    tree.append_model_change("p", "m")
    path.write_text("someone else's\n", encoding="utf-8")
    with pytest.raises(FileExistsError):
        tree.append_message(user("go"))
    assert path.read_text(encoding="utf-8") == "someone else's\n"


def test_create_on_existing_empty_file_works_on_first_message(tmp_path):
    """An empty file is not a session yet: Pi gives it a fresh header; pi_nb's create()
    accepts the path, so the first message must not fail with FileExistsError."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"")
    tree = new_tree(str(path))
    tree.append_message(user("go"))
    assert [json.loads(x)["type"] for x in _lines(path)] == ["session", "message"]


def test_default_location_follows_pi_layout(tmp_path, monkeypatch):
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    tree = SessionTree.create(None, "/home/u/my:proj")
    folder = tmp_path / "agent" / "sessions" / "--home-u-my-proj--"
    assert os.path.dirname(tree.path) == str(folder)
    name = os.path.basename(tree.path)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z_" + re.escape(tree.session_id)
                        + r"\.jsonl", name)
    assert name.split("_")[0] == tree.header["timestamp"].replace(":", "-").replace(".", "-")


def test_encode_cwd_and_agent_dir_tilde(tmp_path, monkeypatch):
    assert encode_cwd("/home/u/proj") == "--home-u-proj--"
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", "~/agentdir")
    assert default_session_dir("/a/b") == str(tmp_path / "agentdir" / "sessions" / "--a-b--")


# --- ids ----------------------------------------------------------------------------------------


def test_default_session_id_is_uuid_v7():
    tree = SessionTree.in_memory("/p")
    parsed = uuid.UUID(tree.session_id)
    assert parsed.version == 7 and str(parsed) == tree.session_id


@pytest.mark.parametrize("sid", ["abc", "A1", "a.b_c-d", "x", "2026-01-01_run.7"])
def test_custom_session_id_accepted_and_written(tmp_path, sid):
    path = tmp_path / f"{sid}.jsonl"
    tree = SessionTree.create(path, "/p", session_id=sid)
    assert tree.session_id == sid
    tree.append_message(user("x"))
    assert json.loads(_lines(path)[0])["id"] == sid


@pytest.mark.parametrize("sid", ["", "-abc", "abc-", ".a", "a b", "a/b", "ä", "a\n"])
def test_custom_session_id_validated(tmp_path, sid):
    with pytest.raises(SessionError):
        SessionTree.create(tmp_path / "s.jsonl", "/p", session_id=sid)


# --- migration -----------------------------------------------------------------------------------


def test_v1_file_is_migrated_and_rewritten_at_the_first_write(tmp_path):
    path = _copy("v1_session.jsonl", tmp_path)
    original = path.read_bytes()
    tree = SessionTree.open(path)
    assert tree.report.migrated_from == 1
    assert tree.header["version"] == 3
    ids = [e["id"] for e in tree.entries]
    assert all(re.fullmatch(r"[0-9a-f]{8}", i) for i in ids) and len(set(ids)) == 8
    assert [e["parentId"] for e in tree.entries] == [None, *ids[:-1]]
    comp = tree.entries[5]
    assert comp["type"] == "compaction"
    assert "firstKeptEntryIndex" not in comp
    assert comp["firstKeptEntryId"] == ids[3]  # index 4 counts the header
    hook = tree.entries[6]["message"]
    assert hook["role"] == "custom"
    msgs = tree.projection().messages
    assert roles(msgs) == ["compactionSummary", "user", "assistant", "custom", "user"]
    assert texts(msgs)[1:3] == ["second question", "second answer"]
    assert tree.projection().thinking_level == "medium"
    # Reading never replaces the file (another process may be appending to it) ...
    assert path.read_bytes() == original
    # ... the first write rewrites it in the new format, under the writer lock.
    added = tree.append_message(user("after migration", ts=9))
    on_disk = [json.loads(x) for x in _lines(path)]
    assert on_disk[0]["version"] == 3
    assert [e["id"] for e in on_disk[1:]] == [*ids, added["id"]]
    assert on_disk[6]["firstKeptEntryId"] == ids[3]
    assert on_disk[-1]["parentId"] == ids[-1]
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]
    reopened = SessionTree.open(path)
    assert reopened.report.migrated_from is None and reopened.leaf_id == added["id"]


def test_migration_is_idempotent(tmp_path):
    path = _copy("v1_session.jsonl", tmp_path)
    data = path.read_bytes()
    first = SessionTree.open(path)
    second = SessionTree.open(path)
    # Migrated in memory by both reads, with the same ids (derived from the header), so an
    # id one command prints can be passed to the next; the file is untouched.
    assert second.report.migrated_from == 1
    assert [e["id"] for e in second.entries] == [e["id"] for e in first.entries]
    assert path.read_bytes() == data
    first.append_custom("note")
    third = SessionTree.open(path)
    assert third.report.migrated_from is None
    assert [e["id"] for e in third.entries][:-1] == [e["id"] for e in second.entries]


def test_v2_hook_message_becomes_custom(tmp_path):
    path = _copy("v2_hook_message.jsonl", tmp_path)
    tree = SessionTree.open(path)
    assert tree.report.migrated_from == 2
    assert [e["id"] for e in tree.entries] == ["a0000001", "a0000002", "a0000003"]
    assert tree.entry("a0000002")["message"]["role"] == "custom"
    tree.append_custom("note")
    on_disk = [json.loads(x) for x in _lines(path)]
    assert on_disk[0]["version"] == 3
    assert on_disk[2]["message"]["role"] == "custom"
    assert roles(tree.projection().messages) == ["user", "custom", "user"]


def test_migration_keeps_lone_surrogate_escapes(tmp_path):
    """JSON.stringify writes a lone surrogate (e.g. an emoji cut by truncation) as \\udXXX;
    rewriting a migrated file that holds one must not crash."""
    path = tmp_path / "s.jsonl"
    path.write_text(
        '{"type":"session","version":2,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}\n'
        '{"type":"message","id":"m1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",'
        '"message":{"role":"user","content":"cut \\ud83d","timestamp":1}}\n',
        encoding="utf-8",
    )
    tree = SessionTree.open(path)
    assert tree.entry("m1")["message"]["content"] == "cut \ud83d"
    tree.append_custom("note")  # the first write rewrites the migrated file
    assert '"version":3' in path.read_text(encoding="utf-8")
    assert "\\ud83d" in path.read_text(encoding="utf-8")
    assert SessionTree.open(path).entry("m1")["message"]["content"] == "cut \ud83d"


def test_v3_line_with_lone_surrogate_escape_is_kept(tmp_path):
    """JSON.parse accepts "\\ud83d"; such a line (Pi writes them) must not be dropped."""
    path = tmp_path / "s.jsonl"
    path.write_text(
        '{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}\n'
        '{"type":"message","id":"m1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",'
        '"message":{"role":"toolResult","toolCallId":"c","toolName":"bash",'
        '"content":[{"type":"text","text":"out \\ud83d"}],"isError":false,"timestamp":1}}\n'
        '{"type":"message","id":"m2","parentId":"m1","timestamp":"2026-01-01T00:00:02.000Z",'
        '"message":{"role":"user","content":"next","timestamp":2}}\n',
        encoding="utf-8",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", SessionLoadWarning)
        tree = SessionTree.open(path)
    assert tree.report.skipped == []
    assert [e["id"] for e in tree.entries] == ["m1", "m2"]
    assert texts(tree.projection().messages) == ["out \ud83d", "next"]


def test_appending_text_with_lone_surrogate_writes_an_escape(tmp_path):
    path = tmp_path / "s.jsonl"
    tree = new_tree(str(path))
    tree.append_message(user("cut \ud83d"))
    tree.append_message(assistant("fine"))
    tree.close()
    assert "\\ud83d" in path.read_text(encoding="utf-8")
    assert texts(SessionTree.open(path).projection().messages) == ["cut \ud83d", "fine"]


# --- round trips -------------------------------------------------------------------------------


def test_unknown_types_and_fields_survive_open_append_reread(tmp_path):
    path = _copy("unknown_types.jsonl", tmp_path)
    original_lines = (FIXTURES / "unknown_types.jsonl").read_bytes().split(b"\n")[:-1]
    original = [json.loads(x) for x in original_lines]
    tree = SessionTree.open(path)
    assert tree.report.clean
    assert tree.leaf_id == "c0000004"
    assert tree.entry("c0000002") == original[2]
    assert roles(tree.projection().messages) == ["user", "assistant"]
    custom = {"type": "another_future", "id": "d0000001", "parentId": tree.leaf_id,
              "timestamp": "2026-01-11T08:00:05.000Z", "x": {"y": [1, "z"]}}
    tree.append_entry(dict(custom))
    tree.append_message(user("more"))
    tree.close()
    raw_lines = path.read_bytes().split(b"\n")[:-1]
    assert raw_lines[: len(original_lines)] == original_lines
    reread = SessionTree.open(path)
    assert reread.header == original[0]
    assert list(reread.entries)[:4] == original[1:]
    assert reread.entry("d0000001") == custom
    assert json.loads(raw_lines[len(original_lines)]) == custom


def test_every_entry_type_round_trips_through_the_api(tmp_path):
    path = tmp_path / "s.jsonl"
    tree = new_tree(str(path), clock=Clock())
    u = tree.append_message(user("q"))
    a = tree.append_message(assistant("a", calls=[{"type": "toolCall", "id": "c1",
                                                    "name": "read",
                                                    "arguments": {"path": "x"}}]))
    tree.append_message(tool_result("c1", "file text"))
    tree.append_thinking_level_change("high")
    tree.append_model_change("openai", "gpt-4o")
    tree.append_custom("ext", {"s": 1})
    tree.append_custom_message("ext", [{"type": "text", "text": "cm"}], False, {"d": 2})
    tree.append_label(u["id"], "start")
    tree.append_session_info("My session")
    tree.append_usage("cache_warm", "openai", "gpt-4o", {"input": 5}, note="warm")
    tree.append_context_edit(a["id"], {"content": "shorter"})
    tree.append_compaction("sum", u["id"], 1234, details={"readFiles": ["x"],
                                                           "modifiedFiles": []},
                           from_hook=False, usage={"input": 1})
    tree.append_message({"role": "bashExecution", "command": "ls", "output": "a b",
                         "exitCode": 0, "cancelled": False, "truncated": False,
                         "timestamp": 9})
    tree.branch_with_summary(u["id"], "went elsewhere", details={"readFiles": []})
    tree.close()
    reread = SessionTree.open(path)
    assert list(reread.entries) == list(tree.entries)
    types = [e["type"] for e in reread.entries]
    assert types == ["message", "message", "message", "thinking_level_change", "model_change",
                     "custom", "custom_message", "label", "session_info", "usage",
                     "context_edit", "compaction", "message", "branch_summary"]
    assert reread.name == "My session"
    assert reread.labels == {u["id"]: "start"}
    usage_entry = reread.entries[9]
    assert usage_entry["note"] == "warm" and usage_entry["kind"] == "cache_warm"
    edit = reread.entries[10]
    assert edit["replacement"] == {"content": [{"type": "text", "text": "shorter"}]}
    comp = reread.entries[11]
    assert comp["firstKeptEntryId"] == u["id"] and comp["tokensBefore"] == 1234
    assert comp["fromHook"] is False and comp["usage"] == {"input": 1}
    bs = reread.entries[13]
    assert bs["fromId"] == reread.entries[12]["id"]
    assert reread.projection().messages == tree.projection().messages


def test_session_info_newlines_collapsed_and_empty_clears():
    tree = new_tree()
    e = tree.append_session_info("  line one\r\nline two\n\n x  ")
    assert e["name"] == "line one line two  x"
    assert tree.name == "line one line two  x"
    tree.append_session_info("")
    assert tree.name is None
    tree.append_session_info("back")
    assert tree.name == "back"


# --- listing -------------------------------------------------------------------------------------


def _session_in(cwd: str, stamps: list[int], first: str, tool_ts: int | None = None):
    tree = SessionTree.create(None, cwd)
    tree.append_message(user(first, ts=stamps[0]))
    for ts in stamps[1:]:
        tree.append_message(assistant("r", ts=ts))
    if tool_ts is not None:
        tree.append_message(tool_result(ts=tool_ts))
    tree.close()
    return tree


def test_list_sessions_sorted_by_last_message_time_not_mtime(tmp_path, monkeypatch):
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    cwd = str(tmp_path / "proj")
    newer = _session_in(cwd, [1_700_000_000_000, 1_700_000_900_000], "newer one",
                        tool_ts=1_800_000_000_000)
    older = _session_in(cwd, [1_600_000_000_000], "older one")
    # make the older session's file the most recently modified
    os.utime(older.path, (2_000_000_000, 2_000_000_000))
    os.utime(newer.path, (1_000_000_000, 1_000_000_000))
    (Path(newer.path).parent / "notes.jsonl").write_text("not a session\n", encoding="utf-8")
    (Path(newer.path).parent / "readme.txt").write_text("x", encoding="utf-8")
    found = list_session_infos(cwd)
    assert [i.path for i in found] == [newer.path, older.path]
    assert found[0].modified_ms == 1_700_000_900_000  # toolResult time does not count
    assert found[1].modified_ms == 1_600_000_000_000
    assert found[0].first_message == "newer one"
    assert found[0].id == newer.session_id and found[0].cwd == os.path.abspath(cwd)
    # every project folder when no cwd is given
    other = _session_in(str(tmp_path / "other"), [1_650_000_000_000], "x")
    assert {i.path for i in list_session_infos()} == {newer.path, older.path, other.path}


def test_list_sessions_name_and_message_count(tmp_path, monkeypatch):
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    tree = SessionTree.create(None, "/proj")
    tree.append_message(user("q"))
    tree.append_message(assistant("a", calls=[{"type": "toolCall", "id": "c", "name": "n",
                                               "arguments": {}}]))
    tree.append_message(tool_result("c"))
    tree.append_session_info("named")
    tree.close()
    (info,) = list_session_infos("/proj")
    assert info.name == "named"
    # Pi's SessionInfo.messageCount counts every `message` entry (toolResult included)
    assert info.message_count == 3


def test_list_sessions_modified_falls_back_to_header_time(tmp_path, monkeypatch):
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    tree = SessionTree.create(None, "/proj")
    tree.append_model_change("p", "m")
    tree.flush()
    (info,) = list_session_infos("/proj")
    from pi_nb.entries import iso_to_ms

    assert info.modified_ms == iso_to_ms(tree.header["timestamp"])
    assert info.message_count == 0


def test_list_sessions_empty_or_missing_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "none"))
    assert list_session_infos("/proj") == []
    assert list_session_infos() == []


def test_every_accessor_of_an_opened_file_returns_full_entries(tmp_path):
    path = tmp_path / "s.jsonl"
    tree = new_tree(str(path))
    u = tree.append_message(user("question text"))
    a = tree.append_message(assistant("answer text", calls=[{"type": "toolCall", "id": "c",
                                                             "name": "read",
                                                             "arguments": {"path": "p"}}]))
    r = tree.append_message(tool_result("c", "tool output"))
    tree.close()
    on_disk = {json.loads(x).get("id"): json.loads(x) for x in _lines(path)[1:]}

    opened = SessionTree.open(path)
    node = opened.tree()[0]
    assert node.entry == on_disk[u["id"]]
    assert node.children[0].entry == on_disk[a["id"]]
    opened = SessionTree.open(path)
    assert opened.children(u["id"]) == [on_disk[a["id"]]]
    opened = SessionTree.open(path)
    assert opened.get_branch() == [on_disk[u["id"]], on_disk[a["id"]], on_disk[r["id"]]]
    opened = SessionTree.open(path)
    assert opened.leaf == on_disk[r["id"]]
    assert opened.get(a["id"]) == on_disk[a["id"]]
    opened = SessionTree.open(path)
    assert list(opened) == list(on_disk.values())
    opened = SessionTree.open(path)
    assert opened.by_id[u["id"]] == on_disk[u["id"]]
    opened = SessionTree.open(path)
    assert "question text" in render_tree(opened)
    opened = SessionTree.open(path)
    opened.projection()
    assert list(opened.entries) == list(on_disk.values())


def test_large_v1_file_migrates_with_more_than_100_entries(tmp_path):
    path = tmp_path / "big_v1.jsonl"
    lines = [{"type": "session", "id": "old", "timestamp": "2025-01-01T00:00:00.000Z",
              "cwd": "/p"}]
    for i in range(120):
        stamp = f"2025-01-01T00:{i // 60:02d}:{i % 60:02d}.000Z"
        message = user(f"q{i}", ts=i) if i % 2 == 0 else assistant(f"a{i}", ts=i)
        lines.append({"type": "message", "timestamp": stamp, "message": message})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    tree = SessionTree.open(path)
    assert len(tree) == 120
    ids = [e["id"] for e in tree.entries]
    assert len(set(ids)) == 120
    p = tree.projection()
    assert len(p.messages) == 120
    assert p.model == {"provider": "anthropic", "modelId": "claude-x"}


def test_most_recent_session(tmp_path):
    from pi_nb.session.listing import most_recent_session

    folder = tmp_path / "sessions"
    assert most_recent_session("/p", session_dir=str(folder)) is None
    folder.mkdir()
    (folder / "notes.txt").write_text("x", encoding="utf-8")
    assert most_recent_session("/p", session_dir=str(folder)) is None
    (folder / "bad.jsonl").write_text("not a session\n", encoding="utf-8")
    assert most_recent_session("/p", session_dir=str(folder)) is None
    old = new_tree(str(folder / "old.jsonl"))
    old.append_message(user("a"))
    new = new_tree(str(folder / "new.jsonl"))
    new.append_message(user("b"))
    os.utime(old.path, (1_000, 1_000))
    os.utime(new.path, (2_000, 2_000))
    os.utime(folder / "bad.jsonl", (3_000, 3_000))
    assert most_recent_session("/p", session_dir=str(folder)) == new.path
    os.utime(old.path, (4_000, 4_000))
    assert most_recent_session("/p", session_dir=str(folder)) == old.path
