"""Imported transcripts and migrated files, checked against Pi 1.3.0 itself.

* Every imported transcript (hand-written samples and the realistic fixtures: sidechains,
  mid-turn starts, compact continuations, legacy and pretty-printed Codex) is opened and
  projected by Pi's SessionManager exactly as by pi_nb, at the leaf and at other entries.
* ``cut`` of an imported tree equals Pi's except for the file lists, which use the agent's
  tool mapping (and say so); on a Pi session with Claude-Code-named tools, ``cut`` is Pi's.
* A v1 / v2 file migrated by pi_nb has the bytes of Pi's own migration (random ids aside).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import warnings
from pathlib import Path

import pytest

from pi_nb.research.importers import import_transcript
from pi_nb.session import SessionTree

pytestmark = pytest.mark.compat

TRANSCRIPTS = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"
IMPORTED = [
    "claude_code_session.jsonl",
    "claude_code_autocompact.jsonl",
    "claude_code_old_compact.jsonl",
    "codex_rollout.jsonl",
    "codex_legacy_rollout.jsonl",
    "codex_pretty_printed.json",
    "openai_messages.json",
]


def _context(path: Path, leaf: str | None) -> dict:
    """What ``pi-nb context FILE --leaf ID --json`` prints, in process."""
    from pi_nb.entries import js_numbers

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = SessionTree.open(path)
    if leaf is not None:
        tree.branch(leaf)
    projection = tree.projection()
    document = {
        "leafId": tree.leaf_id,
        "model": projection.model,
        "thinkingLevel": projection.thinking_level,
        "messages": projection.messages,
        "tokens": tree.context_tokens().to_dict(),
    }
    return json.loads(json.dumps(js_numbers(document)))


def _cut(path: Path, leaf: str | None, keep: int) -> dict:
    from pi_nb.compaction.prepare import planned_cut

    tree = SessionTree.open(path)
    if leaf is not None:
        tree.branch(leaf)
    return planned_cut(tree, keep=keep, reserve=16384)


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("imported")
    files = {}
    for name in IMPORTED:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import_transcript(TRANSCRIPTS / name, out / f"{name}.pi.jsonl")
        files[name] = out / f"{name}.pi.jsonl"
    return files


@pytest.mark.parametrize("name", IMPORTED)
def test_pi_projects_every_imported_file_like_pi_nb(name, imported, pi_oracle, compat):
    path = imported[name]
    _, entries = compat.load_entries(path)
    # The leaf, every compaction and the entry after it, every root's child, some others.
    leaves = compat.pick_leaves(entries, seed=7, max_random=4)
    leaves += [e["id"] for e in entries if e["type"] == "compaction"]
    leaves += [e["id"] for e in entries if e["parentId"] is None]
    leaves = list(dict.fromkeys(leaves))
    expected = pi_oracle.context_many(path, leaves)
    problems = []
    for leaf, exp in zip(leaves, expected, strict=True):
        diff = compat.describe_mismatch(_context(path, leaf), exp)
        if diff:
            problems.append(f"{name} leaf={leaf}: {diff}")
    assert not problems, "\n".join(problems)
    compactions = [e for e in entries if e["type"] == "compaction"]
    if compactions:  # the agent's compaction is what Pi sees at the leaf
        roles = [m["role"] for m in expected[0]["messages"]]
        assert roles[0] == "compactionSummary", roles


@pytest.mark.parametrize("name", [n for n in IMPORTED if not n.startswith("openai")])
def test_cut_of_imported_files_is_pis_but_for_the_named_file_tools(
    name, imported, pi_oracle, compat
):
    path = imported[name]
    _, entries = compat.load_entries(path)
    # Where the agent compacted (the last entry before each compaction), and a few more.
    leaves = [e["parentId"] for e in entries if e["type"] == "compaction"]
    leaves += compat.pick_leaves(entries, seed=3, max_random=2)[:4]
    requests = [
        {"file": path, "leaf": leaf, "keep": keep, "reserve": 16384}
        for leaf in dict.fromkeys(leaves)
        for keep in (10, 50, 2000)
    ]
    expected = pi_oracle.cut_many(requests)
    kind = "claude-code" if name.startswith("claude") else "codex"
    problems = []
    cuts = 0
    for request, exp in zip(requests, expected, strict=True):
        ours = _cut(path, request["leaf"], request["keep"])
        if ours.get("nothingToCompact"):
            assert exp == ours
            continue
        cuts += 1
        assert ours.pop("fileTools") == kind
        for key in ("readFiles", "modifiedFiles"):
            ours.pop(key)
            exp.pop(key)
        diff = compat.describe_mismatch(ours, exp)
        if diff:
            problems.append(f"{name} {request['leaf']} keep={request['keep']}: {diff}")
    assert not problems, "\n".join(problems)
    assert cuts >= 1, f"{name}: no request made a cut"


def test_cut_of_a_pi_session_with_claude_tool_names_is_pis(tmp_path, pi_oracle):
    """Pi counts only read / write / edit with a path, whatever else a session calls."""
    from pinb_testkit import assistant, new_tree, tool_call, tool_result, user

    path = tmp_path / "pi.jsonl"
    tree = new_tree(str(path))
    steps = [
        ("Read", {"file_path": "/r/notes.md"}),
        ("edit", {"path": "/r/bug.py", "oldText": "a", "newText": "b"}),
        ("apply_patch", {"input": "*** Update File: a.py\n"}),
        ("MultiEdit", {"file_path": "/r/old.py", "edits": []}),
    ] * 3
    for index, (name, arguments) in enumerate(steps):
        tree.append_message(user(f"step {index} " + "x" * 400))
        call = f"call_{index}"
        tree.append_message(assistant("", calls=[tool_call(call, name, **arguments)]))
        tree.append_message(tool_result(call, "ok " * 100, name=name))
        tree.append_message(assistant(f"done {index}"))
    expected = pi_oracle.cut(path, keep=50)
    ours = _cut(path, None, 50)
    assert ours == expected
    assert ours["modifiedFiles"] == ["/r/bug.py"] and ours["readFiles"] == []
    assert "fileTools" not in ours


# --- migration --------------------------------------------------------------------------------

_MIGRATE = r"""
const [core, ...files] = process.argv.slice(1);
const { SessionManager } = await import(core + "session-manager.js");
for (const file of files) SessionManager.open(file);  // migrates and rewrites in place
"""

_ID = re.compile(r'"(id|parentId|firstKeptEntryId)":"([0-9a-f]{8})"')


def _v1_and_v2(tmp: Path) -> list[Path]:
    cost = {
        "input": 5e-06,
        "output": 3.0e-05,
        "cacheRead": 0.0,
        "cacheWrite": 1.25e-07,
        "total": 3.5125e-05,
    }
    usage = {
        "input": 3,
        "output": 2,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 5,
        "cost": cost,
    }
    assistant = {
        "role": "assistant",
        "content": [{"type": "text", "text": "yo"}],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "m",
        "usage": usage,
        "stopReason": "stop",
        "timestamp": 1767225602000,
    }
    v1 = [
        {"type": "session", "id": "5e0f", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"},
        {
            "type": "message",
            "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": "hi", "timestamp": 1767225601000},
        },
        {"type": "message", "timestamp": "2026-01-01T00:00:02.000Z", "message": assistant},
        {
            "type": "compaction",
            "timestamp": "2026-01-01T00:00:03.000Z",
            "summary": "s",
            "firstKeptEntryIndex": 2,
            "tokensBefore": 10.0,
            "details": {"ratio": 1e-7},
        },
        {
            "type": "message",
            "timestamp": "2026-01-01T00:00:04.000Z",
            "message": {
                "role": "hookMessage",
                "customType": "n",
                "content": "x",
                "display": True,
                "details": {"big": 12345678901234567890, "f": 2.5e16},
                "timestamp": 1767225604000,
            },
        },
    ]
    v2 = [dict(e) for e in v1]
    v2[0] = {**v1[0], "version": 2}
    previous = None
    for index, entry in enumerate(v2[1:], 1):
        entry["id"], entry["parentId"] = f"b{index:07d}", previous
        previous = entry["id"]
    v2[3] = {k: v for k, v in v2[3].items() if k != "firstKeptEntryIndex"}
    v2[3]["firstKeptEntryId"] = "b0000002"
    paths = []
    for name, lines in (("v1", v1), ("v2", v2)):
        path = tmp / f"{name}.jsonl"
        path.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in lines))
        paths.append(path)
    return paths


def _positional_ids(text: str) -> str:
    """Ids replaced by their order of first appearance (v1 migration draws random ids)."""
    names: dict[str, str] = {}
    return _ID.sub(
        lambda m: f'"{m.group(1)}":"{names.setdefault(m.group(2), f"id{len(names)}")}"', text
    )


def test_migrated_files_have_pis_bytes(tmp_path, pi_oracle):
    ours_dir, pis_dir = tmp_path / "ours", tmp_path / "pis"
    ours_dir.mkdir()
    pis_dir.mkdir()
    sources = _v1_and_v2(tmp_path)
    for src in sources:
        shutil.copy(src, ours_dir / src.name)
        shutil.copy(src, pis_dir / src.name)
    core = (
        pi_oracle.oracle_dir / "node_modules/@earendil-works/pi-coding-agent/dist/core"
    ).resolve().as_uri() + "/"
    subprocess.run(
        [
            pi_oracle.node,
            "--input-type=module",
            "-e",
            _MIGRATE,
            core,
            *(str(pis_dir / s.name) for s in sources),
        ],
        check=True,
        capture_output=True,
    )
    for src in sources:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = SessionTree.open(ours_dir / src.name)
        assert (ours_dir / src.name).read_text() == src.read_text()  # reading never rewrites
        assert tree.migrate()  # a writer migrates, as Pi does on load
        tree.close()
        ours = (ours_dir / src.name).read_text()
        pis = (pis_dir / src.name).read_text()
        assert pis != src.read_text()  # Pi did migrate it
        if src.stem == "v2":
            assert ours == pis  # no random ids in a v2 → v3 migration: byte for byte
        assert _positional_ids(ours) == _positional_ids(pis)
        assert '"input":0.000005' in ours and "e-06" not in ours
