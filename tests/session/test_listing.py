"""The session browser (`pi_nb.list_sessions`, `scan_session_files`) on real files in a
temporary PI_CODING_AGENT_DIR, hostile ones included: every ``*.jsonl`` is a row, the
unreadable ones with their reason, newest activity first, nothing written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from pinb_testkit import FIXTURES, Clock, assistant, tool_result, user

import pi_nb
from pi_nb.entries import iso_to_ms
from pi_nb.session import SessionTree
from pi_nb.session.listing import (
    SESSION_COLUMNS,
    default_session_dir,
    read_session_file,
    scan_session_files,
    sessions_root,
)


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "agent"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(folder))
    return folder


def _session(cwd: str, start: datetime, turns: int, name: str | None = None,
             compact: bool = False) -> SessionTree:
    tree = SessionTree.create(None, cwd, clock=Clock(start))
    for n in range(turns):
        tree.append_message(user(f"question {n}"))
        tree.append_message(assistant(f"answer {n}"))
    if compact:
        first = tree.entries[-2]["id"]
        tree.append_compaction("summary of the start", first, 1234)
    if name:
        tree.append_session_info(name)
    tree.close()
    return tree


def test_rows_count_entries_and_are_newest_first(agent: Path, tmp_path: Path) -> None:
    old = _session(str(tmp_path / "a"), datetime(2026, 1, 1, tzinfo=timezone.utc), 2)
    new = _session(str(tmp_path / "b"), datetime(2026, 3, 1, tzinfo=timezone.utc), 3,
                   name="the newest", compact=True)
    mid = _session(str(tmp_path / "a"), datetime(2026, 2, 1, tzinfo=timezone.utc), 1)
    # file times say the opposite: the order must come from the entries' own times
    os.utime(old.path, (2_000_000_000, 2_000_000_000))
    os.utime(new.path, (1_000_000_000, 1_000_000_000))

    rows = scan_session_files()
    assert [r.path for r in rows] == [new.path, mid.path, old.path]
    top = rows[0]
    assert top.error is None and top.readable
    assert (top.entries, top.messages, top.compactions) == (8, 6, 1)
    assert top.name == "the newest"
    assert top.id == new.session_id and top.cwd == os.path.abspath(tmp_path / "b")
    assert top.size == os.path.getsize(new.path)
    assert top.file == os.path.basename(new.path)
    assert top.last_activity_ms == iso_to_ms(new.entries[-1]["timestamp"])
    assert (rows[2].entries, rows[2].messages, rows[2].compactions) == (4, 4, 0)
    # one Pi session folder per working folder; both are listed from the sessions root
    assert os.path.dirname(old.path) == default_session_dir(str(tmp_path / "a"))
    assert sessions_root() == str(agent / "sessions")
    # a project folder can be listed on its own
    project = scan_session_files(default_session_dir(str(tmp_path / "a")))
    assert [r.path for r in project] == [mid.path, old.path]


def _hostile_folder(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True)
    files = {
        "garbage": folder / "garbage.jsonl",
        "v1": folder / "v1.jsonl",
        "torn": folder / "torn.jsonl",
        "text": folder / "notes.jsonl",
        "empty": folder / "empty.jsonl",
        "binary": folder / "binary.jsonl",
        "array": folder / "array.jsonl",
        "dir": folder / "folder.jsonl",
        "broken": folder / "broken.jsonl",
    }
    shutil.copy(FIXTURES / "garbage_lines.jsonl", files["garbage"])
    shutil.copy(FIXTURES / "v1_session.jsonl", files["v1"])
    good = (FIXTURES / "v2_hook_message.jsonl").read_bytes()
    files["torn"].write_bytes(good + b'{"type":"message","id":"zz","parentId":nu')
    files["text"].write_text("just some notes\n", encoding="utf-8")
    files["empty"].write_bytes(b"")
    files["binary"].write_bytes(os.urandom(64).replace(b"\n", b"x") + b"\xff\xfe\n")
    files["array"].write_text('[{"type":"session","id":"x"}]\n', encoding="utf-8")
    files["dir"].mkdir()
    (files["dir"] / "inside.txt").write_text("x", encoding="utf-8")
    files["broken"].symlink_to(folder / "gone.jsonl")
    (folder / "readme.txt").write_text("not listed", encoding="utf-8")
    return files


def test_hostile_files_are_rows_with_the_reason(agent: Path) -> None:
    folder = agent / "sessions" / "--hostile--"
    files = _hostile_folder(folder)
    before = {k: p.read_bytes() for k, p in files.items() if p.is_file()}
    rows = {Path(r.path).name: r for r in scan_session_files()}

    assert set(rows) == {p.name for p in files.values()}  # readme.txt is not a session file
    garbage = rows["garbage.jsonl"]
    assert garbage.readable and garbage.entries == 3
    assert garbage.error.startswith("3 line(s) skipped: line 3: not valid JSON")
    torn = rows["torn.jsonl"]
    assert torn.messages == 3  # the three whole messages of the file
    assert torn.error == "1 line(s) skipped: line 5: not valid JSON (Input data was truncated)"
    v1 = rows["v1.jsonl"]
    assert v1.error is None and v1.compactions == 1 and v1.messages == 6
    assert "not a Pi session file" in rows["notes.jsonl"].error
    assert "not a Pi session file" in rows["binary.jsonl"].error
    assert "not a Pi session file" in rows["array.jsonl"].error
    assert rows["empty.jsonl"].error == "empty file (no session header)"
    assert rows["folder.jsonl"].error == "a directory, not a file"
    assert rows["broken.jsonl"].error == "broken symlink"
    for name in ("notes.jsonl", "binary.jsonl", "empty.jsonl", "folder.jsonl", "broken.jsonl"):
        assert rows[name].entries is None and not rows[name].readable
    # the reason does not repeat the path the row already shows
    assert str(folder) not in rows["notes.jsonl"].error
    # readable sessions first (newest first), the unreadable after them
    order = [Path(r.path).name for r in scan_session_files()]
    assert order[:3] == ["garbage.jsonl", "torn.jsonl", "v1.jsonl"]  # 2026-01, 2025-07, 2025-06
    # listing writes nothing: no migration of the v1 file, no repair of the torn one
    assert {k: p.read_bytes() for k, p in files.items() if p.is_file()} == before


def test_unreadable_file_and_folder_say_permission_denied(tmp_path: Path) -> None:
    # A real permission error. Root reads everything, so as root the listing runs in a
    # process without the capabilities that bypass file permissions.
    project = tmp_path / "sessions" / "--p--"
    project.mkdir(parents=True)
    shutil.copy(FIXTURES / "v1_session.jsonl", project / "ok.jsonl")
    shutil.copy(FIXTURES / "v1_session.jsonl", project / "secret.jsonl")
    closed = tmp_path / "sessions" / "--closed--"
    closed.mkdir()
    os.chmod(project / "secret.jsonl", 0o000)
    os.chmod(closed, 0o000)
    code = (
        "import json, sys; from pi_nb.session.listing import scan_session_files;"
        "print(json.dumps([[r.file, r.error, r.entries] for r in "
        "scan_session_files(sys.argv[1])]))"
    )
    command = [sys.executable, "-c", code, str(tmp_path / "sessions")]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        assert setpriv, "as root this test needs util-linux setpriv to drop CAP_DAC_*"
        command = [setpriv, "--bounding-set=-dac_override,-dac_read_search", *command]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
    finally:
        os.chmod(closed, 0o755)
    assert proc.returncode == 0, proc.stderr
    rows = {file: (error, entries) for file, error, entries in json.loads(proc.stdout)}
    assert rows["ok.jsonl"] == (None, 8)
    assert rows["secret.jsonl"] == ("permission denied", None)
    assert rows["--closed--"] == ("folder not readable (permission denied)", None)


def test_list_sessions_is_a_frame_numbered_from_one(agent: Path, tmp_path: Path) -> None:
    new = _session(str(tmp_path / "b"), datetime(2026, 3, 1, tzinfo=timezone.utc), 1, name="n")
    _session(str(tmp_path / "a"), datetime(2026, 1, 1, tzinfo=timezone.utc), 2)
    (Path(new.path).parent / "bad.jsonl").write_text("nope\n", encoding="utf-8")
    frame = pi_nb.list_sessions()
    assert tuple(frame.columns) == SESSION_COLUMNS
    assert list(frame.index) == [1, 2, 3] and frame.index.name == "#"
    assert frame.loc[1, "path"] == new.path and frame.loc[1, "name"] == "n"
    assert list(frame["messages"].astype("object").where(frame["messages"].notna(), None)) == [
        2, 4, None,
    ]
    assert str(frame["entries"].dtype) == "Int64"  # counts stay integers beside a failed row
    assert frame.loc[3, "error"].startswith("not a Pi session file")
    stamp = frame.loc[1, "last_activity"]
    assert stamp.tzinfo is not None and int(stamp.timestamp() * 1000) == iso_to_ms(
        new.entries[-1]["timestamp"]
    )
    # an explicit folder
    assert list(pi_nb.list_sessions(Path(new.path).parent)["file"]) == [
        os.path.basename(new.path), "bad.jsonl",
    ]


def test_missing_folders(agent: Path, tmp_path: Path) -> None:
    assert scan_session_files() == []  # Pi never ran here: an empty listing
    assert pi_nb.list_sessions().empty
    assert tuple(pi_nb.list_sessions().columns) == SESSION_COLUMNS
    with pytest.raises(FileNotFoundError, match="no such folder"):
        scan_session_files(tmp_path / "nowhere")
    (tmp_path / "f.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(NotADirectoryError, match="not a folder"):
        scan_session_files(tmp_path / "f.jsonl")


def test_last_activity_falls_back_to_header_then_file_time(tmp_path: Path) -> None:
    header = {"type": "session", "version": 3, "id": "h", "timestamp": "2026-05-01T00:00:00.000Z",
              "cwd": "/x"}
    path = tmp_path / "h.jsonl"
    path.write_text(json.dumps(header) + "\n" + json.dumps(
        {"type": "label", "id": "l1", "parentId": None, "timestamp": 17, "targetId": "x"}
    ) + "\n", encoding="utf-8")
    row = read_session_file(str(path))
    assert row.last_activity_ms == iso_to_ms(header["timestamp"]) and row.entries == 1
    del header["timestamp"]
    path.write_text(json.dumps(header) + "\n", encoding="utf-8")
    os.utime(path, (1_700_000_000, 1_700_000_000))
    assert read_session_file(str(path)).last_activity_ms == 1_700_000_000_000


def test_message_entries_are_read_light(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The browser reuses the store's light reader: a message's content is never materialized.
    from pi_nb.session import jsonl

    tree = SessionTree.create(str(tmp_path / "s.jsonl"), "/p")
    tree.append_message(user("q"))
    tree.append_message(assistant("a", calls=[]))
    tree.append_message(tool_result("c", "x" * 10_000))
    tree.close()
    full: list[bytes] = []
    real = jsonl._decode_line

    def spy(line, fresh=False):  # type: ignore[no-untyped-def]
        full.append(bytes(line))
        return real(line, fresh)

    monkeypatch.setattr(jsonl, "_decode_line", spy)
    row = read_session_file(tree.path)
    assert row.messages == 3 and row.error is None
    assert not [line for line in full if b'"message"' in line]


def test_listing_does_not_import_pandas(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "v1_session.jsonl", tmp_path / "a.jsonl")
    code = (
        "import sys; from pi_nb.session.listing import scan_session_files;"
        f"rows = scan_session_files({str(tmp_path)!r}); assert rows[0].messages == 6;"
        "print('pandas' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"
