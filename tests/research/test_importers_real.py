"""Importers on realistic transcripts beyond the first samples: Claude Code auto-compact
continuations, sidechains and mid-turn starts, older compact summaries, legacy and
pretty-printed Codex rollouts with tool search / web search, missing tool ids, and the
``pi-nb import`` command's summary and refusals."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from pi_nb.research.cli import import_command
from pi_nb.research.importers import (
    TranscriptImportError,
    detect_format,
    import_claude_code,
    import_codex,
    import_openai,
    import_transcript,
)
from pi_nb.session import SessionTree


def _open(path: Path) -> SessionTree:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return SessionTree.open(path)


def _texts(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")


def _tool_ids(tree: SessionTree) -> tuple[list[str], list[str]]:
    calls, results = [], []
    for entry in tree.entries:
        if entry["type"] != "message":
            continue
        message = entry["message"]
        if message["role"] == "assistant":
            calls += [b["id"] for b in message["content"] if b.get("type") == "toolCall"]
        elif message["role"] == "toolResult":
            results.append(message["toolCallId"])
    return calls, results


# --- item 1: pi-nb import pi / auto on a Pi file -------------------------------------------


@pytest.mark.parametrize("kind", ["pi", "auto"])
def test_cli_imports_a_pi_file(transcripts: Path, tmp_path: Path, kind: str, capsys) -> None:
    out = tmp_path / "copy.jsonl"
    assert import_command(kind, str(transcripts / "pi_session.jsonl"), str(out)) == 0
    assert capsys.readouterr().out.startswith("pi: ")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert SessionTree.open(out).entry("a1000007")["type"] == "lint_report"
    # --costs is refused for a Pi file (Pi already priced it), in one line, nothing written.
    out.unlink()
    assert (
        import_command(
            kind, str(transcripts / "pi_session.jsonl"), str(out), costs=True, overwrite=True
        )
        == 2
    )
    assert "--costs" in capsys.readouterr().err and not out.exists()


# --- item 2: openai refuses other agents' files; auto knows every format ---------------------


@pytest.mark.parametrize(
    "name",
    [
        "claude_code_session.jsonl",
        "claude_code_autocompact.jsonl",
        "codex_rollout.jsonl",
        "codex_legacy_rollout.jsonl",
        "codex_pretty_printed.json",
    ],
)
def test_openai_refuses_files_without_messages(
    transcripts: Path, tmp_path: Path, name: str, capsys
) -> None:
    out = tmp_path / "oa.jsonl"
    assert import_command("openai", str(transcripts / name), str(out)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "it looks like a " in err, err
    assert not out.exists()


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("claude_code_autocompact.jsonl", "claude-code"),
        ("claude_code_old_compact.jsonl", "claude-code"),
        ("codex_legacy_rollout.jsonl", "codex"),
        ("codex_pretty_printed.json", "codex"),
    ],
)
def test_auto_recognises_every_layout(
    transcripts: Path, tmp_path: Path, name: str, kind: str
) -> None:
    assert detect_format(transcripts / name) == kind
    result = import_transcript(transcripts / name, tmp_path / "out.jsonl")
    assert result.report.format == kind
    assert _open(tmp_path / "out.jsonl").projection().messages


# --- item 3: the agents' own compactions stay compactions -----------------------------------


def test_claude_code_auto_compact_is_a_compaction_on_one_branch(transcripts: Path) -> None:
    result = import_claude_code(transcripts / "claude_code_autocompact.jsonl")
    tree = result.tree
    (compaction,) = [e for e in tree.entries if e["type"] == "compaction"]
    assert compaction["summary"].startswith("This session is being continued")
    assert "round half-even" in compaction["summary"]
    assert compaction["tokensBefore"] == 155012  # compactMetadata.preTokens
    assert compaction["details"]["trigger"] == "auto"
    after = tree.children(compaction["id"])
    assert compaction["firstKeptEntryId"] == after[0]["id"]
    assert after[0]["message"]["content"] == "Continue with fees.py."
    # No plain user message carries the summary; the summary is not a root.
    assert not any(
        e["type"] == "message" and _texts(e["message"]).startswith("This session is being")
        for e in tree.entries
    )
    # One branch from the first record to the leaf, through the compaction.
    branch = tree.get_branch()
    assert compaction in branch
    assert branch[0]["customType"] == "import:origin"
    assert branch[1]["message"]["role"] == "toolResult"  # the file starts mid-turn
    before = [e for e in branch[: branch.index(compaction)] if e["type"] == "message"]
    assert len(before) == 8
    roles = [m["role"] for m in tree.projection().messages]
    assert roles == ["compactionSummary", "user", "assistant", "toolResult", "assistant"]
    assert tree.projection().messages[0]["summary"] == compaction["summary"]
    assert any("firstKeptEntryId = the first entry after" in n for n in result.report.notes)


def test_claude_code_compact_summary_without_boundary(transcripts: Path) -> None:
    """Older Claude Code: the isCompactSummary record starts a new chain by itself."""
    result = import_claude_code(transcripts / "claude_code_old_compact.jsonl")
    tree = result.tree
    (compaction,) = [e for e in tree.entries if e["type"] == "compaction"]
    assert "rename `amt` to `amount`" in compaction["summary"]
    branch = tree.get_branch()
    assert branch[1]["message"]["content"].startswith("Rename the `amt` column")
    assert branch.index(compaction) == 5
    # No token count in the file: Pi's estimate (the last usage before it: 2100 + 12).
    assert compaction["tokensBefore"] == 2112
    assert compaction["details"]["tokensBeforeEstimated"] is True
    assert any("tokensBefore 2112 is Pi's estimate" in n for n in result.report.notes)
    assert [m["role"] for m in tree.projection().messages] == [
        "compactionSummary",
        "user",
        "assistant",
    ]
    assert result.report.orphans == 0  # the new chain is re-attached, not an orphan


def test_codex_compacted_with_replacement_history(transcripts: Path) -> None:
    tree = import_codex(transcripts / "codex_pretty_printed.json").tree
    (compaction,) = [e for e in tree.entries if e["type"] == "compaction"]
    # An empty message: the summary is the replacement history's text.
    assert "deploy_status (MCP) reports prod on v2.9.4" in compaction["summary"]
    assert compaction["tokensBefore"] == 49100  # last token_count: input + output
    assert compaction["firstKeptEntryId"] == tree.children(compaction["id"])[0]["id"]
    messages = tree.projection().messages
    assert [m["role"] for m in messages] == ["compactionSummary", "user", "assistant"]
    assert messages[1]["content"][0]["text"] == "Does anything here still call the v1 API?"
    assert compaction in tree.get_branch()


# --- item 4: unmatched tool results are said; missing ids are generated ---------------------


def test_mid_turn_start_is_in_the_summary_line(transcripts: Path, tmp_path: Path, capsys) -> None:
    src = transcripts / "claude_code_autocompact.jsonl"
    assert import_command("claude-code", str(src), str(tmp_path / "o.jsonl")) == 0
    line = capsys.readouterr().out.splitlines()[0]
    assert "1 tool result(s) without their call in the file (kept as toolResult messages)" in line
    assert "1 record(s) whose parent is not in the file" in line


def _claude(records: list[dict]) -> str:
    base = {"isSidechain": False, "sessionId": "s1", "cwd": "/w"}
    return "".join(json.dumps({**base, **r}) + "\n" for r in records)


def test_missing_tool_ids_are_generated_and_unmatched(tmp_path: Path) -> None:
    cc = tmp_path / "cc.jsonl"
    cc.write_text(
        _claude(
            [
                {
                    "type": "user",
                    "uuid": "u1",
                    "parentUuid": None,
                    "message": {"role": "user", "content": "go"},
                },
                {
                    "type": "assistant",
                    "uuid": "a1",
                    "parentUuid": "u1",
                    "message": {
                        "id": "m1",
                        "role": "assistant",
                        "model": "claude-x",
                        "content": [
                            {"type": "tool_use", "name": "Bash", "input": {"command": "ls"}}
                        ],
                    },
                },
                {
                    "type": "user",
                    "uuid": "u2",
                    "parentUuid": "a1",
                    "message": {
                        "role": "user",
                        "content": [{"type": "tool_result", "content": "a b"}],
                    },
                },
            ]
        )
    )
    oa = tmp_path / "oa.json"
    oa.write_text(
        json.dumps(
            [
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"type": "function", "function": {"name": "ls", "arguments": "{}"}}
                    ],
                },
                {"role": "tool", "content": "a b"},
            ]
        )
    )
    cx = tmp_path / "cx.jsonl"
    cx.write_text(
        "".join(
            json.dumps({"timestamp": "2026-01-01T00:00:00Z", "type": t, "payload": p}) + "\n"
            for t, p in [
                ("session_meta", {"id": "x", "cwd": "/w"}),
                (
                    "response_item",
                    {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": "go"}],
                    },
                ),
                ("response_item", {"type": "function_call", "name": "shell", "arguments": "{}"}),
                ("response_item", {"type": "function_call_output", "output": "a b"}),
            ]
        )
    )
    for importer, src in [(import_claude_code, cc), (import_openai, oa), (import_codex, cx)]:
        out = tmp_path / f"{src.stem}.pi.jsonl"
        report = importer(src, out).report
        text = out.read_text()
        assert '"None"' not in text and '"toolCallId":null' not in text, importer
        calls, results = _tool_ids(_open(out))
        assert len(calls) == 1 and len(results) == 1 and calls[0] != results[0]
        assert all(i.startswith("pinb-missing-") for i in calls + results)
        assert report.generated_ids == 2
        assert report.unanswered_calls == 1 and report.unmatched_results == 1
        assert "2 tool call/result id(s) missing, generated" in report.summary()


# --- item 5: not one record per line ---------------------------------------------------------


def test_pretty_printed_rollout_is_read_and_said(transcripts: Path) -> None:
    report = import_codex(transcripts / "codex_pretty_printed.json").report
    assert report.records["session_meta"] == 1 and report.records["compacted"] == 1
    assert "read as 13 concatenated JSON value(s)" in report.summary()
    assert report.invalid_lines == []


def test_broken_pretty_printed_file_says_what_and_where(transcripts: Path, tmp_path: Path) -> None:
    text = (transcripts / "codex_pretty_printed.json").read_text()
    broken = tmp_path / "broken.json"
    lines = text.splitlines()
    lines[30] = lines[30].replace('"', "", 1)  # one key loses its opening quote
    broken.write_text("\n".join(lines) + "\n")
    with pytest.raises(TranscriptImportError) as caught:
        import_codex(broken)
    message = str(caught.value)
    assert "not one JSON record per line" in message
    assert "line 31, column" in message
    assert "not a Codex rollout" not in message
    assert import_command("codex", str(broken), str(tmp_path / "o.jsonl")) == 2


def test_concatenated_objects_on_shared_lines(tmp_path: Path) -> None:
    src = tmp_path / "cat.jsonl"
    records = [
        {"type": "session_meta", "payload": {"id": "c1", "cwd": "/w"}},
        {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "hi"}],
            },
        },
        {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "yo"}],
            },
        },
    ]
    src.write_text(
        "\n"
        + json.dumps(records[0], indent=1)
        + json.dumps(records[1])
        + " "
        + json.dumps(records[2])
    )
    tree = import_transcript(src).tree
    assert [_texts(m) for m in tree.projection().messages] == ["hi", "yo"]


# --- item 6: Codex tool-like records are tool calls; legacy models --------------------------


def test_codex_tool_search_and_web_search_are_tool_calls(transcripts: Path) -> None:
    result = import_codex(transcripts / "codex_pretty_printed.json")
    tree, report = result.tree, result.report
    assert not any(k.startswith("import:response_item") for k in report.custom)
    calls = {
        b["name"]: b
        for e in tree.entries
        if e["type"] == "message" and e["message"]["role"] == "assistant"
        for b in e["message"]["content"]
        if b.get("type") == "toolCall"
    }
    assert calls["tool_search"]["arguments"] == {"query": "deploy status", "limit": 5}
    assert calls["web_search"]["arguments"] == {"type": "search", "query": "Atlas changelog v3"}
    results = {
        e["message"]["toolCallId"]: e["message"]
        for e in tree.entries
        if e["type"] == "message" and e["message"]["role"] == "toolResult"
    }
    found = results[calls["tool_search"]["id"]]
    assert found["toolName"] == "tool_search" and "deploy_status" in _texts(found)
    searched = results[calls["web_search"]["id"]]
    assert _texts(searched).startswith("web search completed: Atlas changelog v3")
    assert report.unanswered_calls == 0 and report.unmatched_results == 0


def test_legacy_rollout_model_and_cwd(transcripts: Path, tmp_path: Path) -> None:
    src = transcripts / "codex_legacy_rollout.jsonl"
    result = import_codex(src)
    assert result.tree.header["cwd"] == "/home/omar/scraper"  # from <environment_context>
    calls = [
        b["name"]
        for e in result.tree.entries
        if e["type"] == "message" and e["message"]["role"] == "assistant"
        for b in e["message"]["content"]
        if b.get("type") == "toolCall"
    ]
    assert calls == ["local_shell", "shell"]
    assert result.report.unanswered_calls == 0 and result.report.unmatched_results == 0
    # This legacy file names no model: said, not hidden.
    assert 'the rollout names no model: 3 assistant message(s) have model ""' in (
        result.report.summary()
    )
    # With a model in the legacy first line, every assistant message gets it.
    lines = src.read_text().splitlines()
    head = json.loads(lines[0])
    head["model"] = "codex-mini-latest"
    named = tmp_path / "named.jsonl"
    named.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    result = import_codex(named)
    models = {
        e["message"]["model"]
        for e in result.tree.entries
        if e["type"] == "message" and e["message"]["role"] == "assistant"
    }
    assert models == {"codex-mini-latest"}
    assert "names no model" not in result.report.summary()


def test_assistant_before_turn_context_gets_the_first_model(tmp_path: Path) -> None:
    src = tmp_path / "late.jsonl"
    rows = [
        ("session_meta", {"id": "l1", "cwd": "/w"}),
        (
            "response_item",
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        ),
        (
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "yo"}],
            },
        ),
        ("turn_context", {"model": "gpt-5", "cwd": "/w"}),
    ]
    src.write_text("".join(json.dumps({"type": t, "payload": p}) + "\n" for t, p in rows))
    result = import_codex(src)
    (assistant,) = [m for m in result.tree.projection().messages if m["role"] == "assistant"]
    assert assistant["model"] == "gpt-5"
    assert any("before the first model record" in n for n in result.report.notes)


# --- item 8: the imported agent's file tools, only for imported trees, named -----------------


def test_cut_and_compact_name_the_imported_tool_mapping(
    transcripts: Path, tmp_path: Path, capsys
) -> None:
    from pi_nb.agent.cli import compact_cli
    from pi_nb.cli import main

    out = tmp_path / "cc.jsonl"
    import_claude_code(transcripts / "claude_code_autocompact.jsonl", out)
    tree = _open(out)
    (compaction,) = [e for e in tree.entries if e["type"] == "compaction"]
    # Where Claude Code compacted: the files its Read / Edit calls touched.
    assert main(["cut", str(out), "--leaf", compaction["parentId"], "--keep", "10", "--json"]) == 0
    cut = json.loads(capsys.readouterr().out)
    assert cut["fileTools"] == "claude-code"
    assert cut["modifiedFiles"] == ["/home/lena/ledger/report.py"]
    assert cut["readFiles"] == ["/home/lena/ledger/ledger/fees.py"]
    assert main(["cut", str(out), "--leaf", compaction["parentId"], "--keep", "10"]) == 0
    assert "fileTools           : claude-code" in capsys.readouterr().out

    legacy = tmp_path / "legacy.jsonl"
    import_codex(transcripts / "codex_legacy_rollout.jsonl", legacy)
    status = compact_cli(
        str(legacy),
        preview=True,
        model="pinb/scripted",
        keep=10,
        script=["The timeout is None on the reused session."],
    )
    assert status == 0
    assert "file lists from codex file tools" in capsys.readouterr().out


def test_compact_of_a_pi_session_does_not_name_a_mapping(
    transcripts: Path, tmp_path: Path, capsys
) -> None:
    from pi_nb.agent.cli import compact_cli

    src = tmp_path / "pi.jsonl"
    src.write_bytes((transcripts / "pi_session.jsonl").read_bytes())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        status = compact_cli(
            str(src), preview=True, model="pinb/scripted", keep=10, script=["Summary."]
        )
    assert status == 0
    assert "file lists from" not in capsys.readouterr().out


def test_a_truncated_first_line_is_kept_raw_not_an_error(transcripts: Path, tmp_path: Path) -> None:
    lines = (transcripts / "claude_code_autocompact.jsonl").read_text().splitlines()
    src = tmp_path / "cut.jsonl"
    src.write_text("\n".join([lines[0][40:], *lines[1:]]) + "\n")  # a file cut mid-record
    assert detect_format(src) == "claude-code"
    report = import_claude_code(src).report
    assert report.invalid_lines == [1]
    assert not any("concatenated" in w for w in report.warnings)
