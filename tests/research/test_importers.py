"""Importers on hand-written sample transcripts: counts, roles, tool pairing, custom kinds,
tree structure, and that the result is a Pi session that opens and projects."""

from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path

import pytest

from pi_nb.research.importers import (
    TranscriptImportError,
    detect_format,
    import_claude_code,
    import_codex,
    import_openai,
    import_pi,
    import_transcript,
)
from pi_nb.session import SessionTree


def _open(path: Path) -> SessionTree:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a clean Pi file: no skipped lines
        return SessionTree.open(path)


def _messages(tree: SessionTree) -> list[dict]:
    return [e["message"] for e in tree.entries if e["type"] == "message"]


def _roles(tree: SessionTree) -> Counter[str]:
    return Counter(m["role"] for m in _messages(tree))


def _pairs_ok(tree: SessionTree) -> None:
    """Every toolResult follows (on its path) the assistant message that made the call."""
    for entry in tree.entries:
        message = entry.get("message") if entry["type"] == "message" else None
        if not message or message["role"] != "toolResult":
            continue
        calls = {
            block["id"]
            for e in tree.get_branch(entry["id"])
            if e["type"] == "message" and e["message"]["role"] == "assistant"
            for block in e["message"]["content"]
            if block.get("type") == "toolCall"
        }
        assert message["toolCallId"] in calls, message


# --- Claude Code ---------------------------------------------------------------------------


def test_claude_code_counts_roles_and_custom(transcripts: Path, tmp_path: Path) -> None:
    out = tmp_path / "cc.jsonl"
    result = import_claude_code(transcripts / "claude_code_session.jsonl", out)
    report = result.report
    assert report.records["assistant"] == 14 and report.records["user"] == 12
    assert report.records["system:compact_boundary"] == 1
    assert report.records["invalid-line"] == 1
    tree = _open(out)
    # Three streamed records of msg_01Hx7Qk2 and two of msg_01Kq8Vv3 are merged.
    assert _roles(tree) == Counter({"assistant": 11, "toolResult": 7, "user": 4})
    assert report.custom == Counter(
        {
            "import:summary": 1,
            "import:file-history-snapshot": 1,
            "import:system": 1,
            "import:queue-operation": 1,
            "import:invalid-line": 1,
        }
    )
    kinds = {e["customType"] for e in tree.entries if e["type"] == "custom"}
    assert "import:report" in kinds
    assert report.unanswered_calls == 0 and report.unmatched_results == 0 and report.orphans == 0
    _pairs_ok(tree)


def test_claude_code_messages_are_pi_shaped(transcripts: Path) -> None:
    tree = import_claude_code(transcripts / "claude_code_session.jsonl").tree
    messages = _messages(tree)
    first = next(m for m in messages if m["role"] == "assistant")
    assert [b["type"] for b in first["content"]] == ["thinking", "text", "toolCall"]
    assert first["content"][0]["thinkingSignature"] == "EqQBCkYIBxgCKkD3"
    assert first["content"][2]["name"] == "Read"
    assert first["content"][2]["arguments"] == {
        "file_path": "/home/maya/httpkit/src/httpkit/retry.py"
    }
    assert first["stopReason"] == "toolUse" and first["responseId"] == "msg_01Hx7Qk2"
    assert first["usage"]["input"] == 10 and first["usage"]["output"] == 142
    assert first["usage"]["cacheRead"] == 12034 and first["usage"]["cacheWrite"] == 5210
    failed = next(m for m in messages if m["role"] == "toolResult" and m["isError"])
    assert failed["toolName"] == "Bash" and "AssertionError" in failed["content"][0]["text"]
    read = next(m for m in messages if m["role"] == "toolResult")
    assert read["details"]["file"]["numLines"] == 11  # toolUseResult kept as details
    last = [m for m in messages if m["role"] == "assistant"][-1]
    assert last["stopReason"] == "stop"


def test_claude_code_tree_compaction_sidechain_and_redo(transcripts: Path) -> None:
    tree = import_claude_code(transcripts / "claude_code_session.jsonl").tree
    compaction = next(e for e in tree.entries if e["type"] == "compaction")
    assert compaction["summary"].startswith("This session is being continued")
    assert compaction["tokensBefore"] == 19276
    # Derived: the first entry after the compaction (Claude Code keeps nothing verbatim).
    assert compaction["firstKeptEntryId"] == tree.children(compaction["id"])[0]["id"]
    # The boundary hangs under its logical parent: one path from the first prompt.
    branch = tree.get_branch()
    origin = branch[0]
    assert origin["customType"] == "import:origin" and origin["data"]["fileTools"] == "claude-code"
    assert branch[1]["type"] == "message" and "flaky" in branch[1]["message"]["content"]
    assert tree.leaf["customType"] == "import:report"
    roles = [m["role"] for m in tree.projection().messages]
    assert roles == ["compactionSummary", "user", "assistant", "toolResult", "assistant"]
    # The redo: the user message has two assistant children.
    redo = next(
        e
        for e in tree.entries
        if e["type"] == "message" and str(e["message"].get("content")).startswith("Also use")
    )
    assert len(tree.children(redo["id"])) == 2
    # The sub-agent's records form their own chain, from the import's origin entry.
    side_root = next(
        e
        for e in tree.entries
        if e["parentId"] == origin["id"]
        and e["type"] == "message"
        and str(e["message"]["content"]).startswith("Search src/")
    )
    assert [
        m["role"] for m in tree.projection(tree.children(side_root["id"])[0]["id"]).messages
    ] == [
        "user",
        "assistant",
    ]


def test_import_is_deterministic_and_refuses_to_overwrite(
    transcripts: Path, tmp_path: Path
) -> None:
    src = transcripts / "claude_code_session.jsonl"
    import_claude_code(src, tmp_path / "a.jsonl")
    import_claude_code(src, tmp_path / "b.jsonl")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    with pytest.raises(TranscriptImportError, match="already exists"):
        import_claude_code(src, tmp_path / "a.jsonl")
    import_claude_code(src, tmp_path / "a.jsonl", overwrite=True)


# --- Codex ------------------------------------------------------------------------------------


def test_codex_counts_usage_and_settings(transcripts: Path, tmp_path: Path) -> None:
    out = tmp_path / "codex.jsonl"
    report = import_codex(transcripts / "codex_rollout.jsonl", out).report
    tree = _open(out)
    assert report.records["response_item:function_call"] == 3
    assert report.records["response_item:custom_tool_call"] == 2
    assert report.records["event_msg:token_count"] == 4
    assert _roles(tree) == Counter({"assistant": 8, "toolResult": 5, "user": 4})
    assert report.custom["import:event_msg"] == 8
    assert report.custom["import:response_item:ghost_snapshot"] == 1
    assert report.custom["import:session_end"] == 1
    assert report.unanswered_calls == 0 and report.unmatched_results == 0
    _pairs_ok(tree)
    assert tree.header["cwd"] == "/home/dev/inventory"
    assert tree.header["id"] == "0199a213-81c0-7800-8aa1-bbab2a035a53"
    changes = [
        (e["type"], e.get("modelId") or e.get("thinkingLevel"))
        for e in tree.entries
        if e["type"] in ("model_change", "thinking_level_change")
    ]
    assert changes == [
        ("model_change", "gpt-5-codex"),
        ("thinking_level_change", "medium"),
        ("thinking_level_change", "high"),
        ("model_change", "gpt-5"),
        ("thinking_level_change", "low"),
    ]
    messages = _messages(tree)
    first = next(m for m in messages if m["role"] == "assistant")
    assert [b["type"] for b in first["content"]] == ["thinking", "toolCall"]
    assert first["content"][1]["arguments"]["command"][-1] == "sed -n '1,60p' scripts/sync.py"
    # token_count's last_token_usage: 6120 input of which 3072 cached.
    assert first["usage"]["input"] == 3048 and first["usage"]["cacheRead"] == 3072
    assert first["usage"]["output"] == 212 and first["usage"]["reasoning"] == 128
    patch = next(
        b
        for m in messages
        if m["role"] == "assistant"
        for b in m["content"]
        if b.get("name") == "apply_patch"
    )
    assert patch["arguments"]["input"].startswith("*** Begin Patch")
    results = [m for m in messages if m["role"] == "toolResult"]
    assert [r["isError"] for r in results] == [False, False, True, False, False]
    assert results[2]["content"][0]["text"].startswith("F.\nFAILED tests/test_sync.py")
    assert results[2]["details"]["exit_code"] == 1
    compaction = next(e for e in tree.entries if e["type"] == "compaction")
    assert compaction["summary"].startswith("Summary: added --dry-run")
    assert [m["role"] for m in tree.projection().messages] == [
        "compactionSummary",
        "user",
        "assistant",
    ]


# --- OpenAI messages ---------------------------------------------------------------------------


def test_openai_messages(transcripts: Path, tmp_path: Path) -> None:
    out = tmp_path / "oa.jsonl"
    report = import_openai(transcripts / "openai_messages.json", out).report
    tree = _open(out)
    assert sum(report.records.values()) == 12
    assert _roles(tree) == Counter({"system": 1, "user": 2, "assistant": 4, "toolResult": 4})
    assert report.custom == Counter({"import:message:critic": 1})
    # The legacy "function" message has no call: kept, and reported.
    assert report.unmatched_results == 1 and report.unanswered_calls == 0
    messages = _messages(tree)
    calls = [b for b in messages[2]["content"] if b["type"] == "toolCall"]
    assert [c["arguments"]["path"] for c in calls] == ["data/sales_2024.csv", "data/targets.json"]
    assert (
        messages[2]["model"] == "gpt-4o-mini-2024-07-18" and messages[2]["stopReason"] == "toolUse"
    )
    assert [m["toolName"] for m in messages if m["role"] == "toolResult"][:2] == ["read_file"] * 2
    image = messages[6]["content"][1]
    assert image == {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}
    projection = tree.projection()
    assert projection.messages[0]["role"] == "system"
    assert tree.context_tokens().tokens > 0


def test_openai_jsonl_conversations_become_roots(tmp_path: Path) -> None:
    src = tmp_path / "chats.jsonl"
    src.write_text(
        '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}\n'
        '{"messages": [{"role": "user", "content": "bye"}, {"role": "assistant", "content": "ciao"}]}\n'
    )
    tree = import_openai(src).tree
    roots = [e for e in tree.entries if e["parentId"] is None]
    assert len(roots) == 2
    assert [m["content"] for m in tree.projection().messages if m["role"] == "user"] == ["bye"]


# --- Pi --------------------------------------------------------------------------------------


def test_pi_native_copy_keeps_everything(transcripts: Path, tmp_path: Path) -> None:
    out = tmp_path / "pi.jsonl"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = import_pi(transcripts / "pi_session.jsonl", out)
    report = result.report
    tree = _open(out)
    original_ids = [f"a100000{i}" for i in range(1, 10)]
    assert [e["id"] for e in tree.entries][:9] == original_ids
    assert tree.entry("a1000007")["type"] == "lint_report"  # unknown type kept verbatim
    assert any("lint_report" in note for note in report.notes)
    assert report.custom == Counter({"import:invalid-line": 1})
    raw = next(e for e in tree.entries if e.get("customType") == "import:invalid-line")
    assert raw["data"] == {"line": 9, "text": "this line is not json"}
    assert tree.header["id"] == "0196f1d2-3a4b-7c5d-8e6f-0a1b2c3d4e5f"
    assert tree.label("a1000008") == "renamed"
    assert [m["role"] for m in tree.projection().messages] == [
        "user",
        "assistant",
        "toolResult",
        "assistant",
        "toolResult",
        "assistant",
    ]


# --- dispatch ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("claude_code_session.jsonl", "claude-code"),
        ("codex_rollout.jsonl", "codex"),
        ("openai_messages.json", "openai"),
        ("pi_session.jsonl", "pi"),
    ],
)
def test_detect_format_and_import_transcript(
    transcripts: Path, tmp_path: Path, name: str, kind: str
) -> None:
    assert detect_format(transcripts / name) == kind
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = import_transcript(transcripts / name, tmp_path / "out.jsonl")
    assert result.report.format == kind
    tree = _open(tmp_path / "out.jsonl")
    assert tree.projection().messages
    assert result.report.summary().startswith(kind)
    assert set(result.report.frame().columns) == {"side", "kind", "count"}
    assert "<table>" in result._repr_html_()


def test_wrong_format_and_missing_file_are_one_line_errors(transcripts: Path) -> None:
    with pytest.raises(TranscriptImportError, match="not a Codex rollout"):
        import_codex(transcripts / "claude_code_session.jsonl")
    with pytest.raises(TranscriptImportError, match="not a Claude Code transcript"):
        import_claude_code(transcripts / "codex_rollout.jsonl")
    with pytest.raises(TranscriptImportError, match="no such file"):
        import_transcript(transcripts / "missing.jsonl")
    with pytest.raises(TranscriptImportError, match="unknown transcript format"):
        import_transcript(transcripts / "codex_rollout.jsonl", kind="gemini")


def test_bundled_samples_match_the_fixtures(transcripts: Path) -> None:
    from pi_nb.research.samples import sample_transcript

    for kind, name in [
        ("claude-code", "claude_code_session.jsonl"),
        ("codex", "codex_rollout.jsonl"),
        ("openai", "openai_messages.json"),
    ]:
        assert Path(sample_transcript(kind)).read_bytes() == (transcripts / name).read_bytes()


@pytest.mark.parametrize(
    ("importer", "name"),
    [(import_claude_code, "claude_code_session.jsonl"), (import_codex, "codex_rollout.jsonl")],
)
def test_importers_keep_every_importers_signature_and_write_nothing_on_a_wrong_keyword(
    importer, name: str, transcripts: Path, tmp_path: Path
) -> None:
    import inspect

    # The shared signature is declared once (transcript_importer); introspection shows it,
    # not the body's, and the name and docstring are the importer's own.
    assert inspect.signature(importer) == inspect.signature(import_pi)
    assert importer.__name__ in repr(importer) and "every importer's" in importer.__doc__
    out = tmp_path / "out.jsonl"
    with pytest.raises(TypeError, match=r"got an unexpected keyword argument 'cost'$"):
        importer(transcripts / name, out, cost=True)
    with pytest.raises(TypeError, match=r"takes from 1 to 2 positional arguments but 3"):
        importer(transcripts / name, out, True)
    assert not out.exists()
    # out, costs and overwrite still reach the write: a second import refuses, then replaces
    first = importer(transcripts / name, out, costs=False).tree
    with pytest.raises(TranscriptImportError, match="output file already exists"):
        importer(transcripts / name, out)
    again = importer(transcripts / name, out, overwrite=True).tree
    assert again.path == first.path and [e["id"] for e in again.entries] == [e["id"] for e in first.entries]
