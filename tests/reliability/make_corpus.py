"""Regenerate tests/reliability/corpus/: the nastiest session files, one case per file.

Run ``python tests/reliability/make_corpus.py`` (deterministic). EXPECTED.json is written by
hand-checked rules, not by pi_nb: see test_reliability_corpus.py for what is asserted.
"""

from __future__ import annotations

import json
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "corpus"
T = "2026-01-15T09:00:00.000Z"


def header(version: object = 3, **extra: object) -> dict:
    h = {"type": "session", "version": version, "id": "corpus-session", "timestamp": T, "cwd": "/tmp"}
    if version is None:
        del h["version"]
    h.update(extra)
    return h


def msg(eid: object, parent: object, role: str = "user", content: object = "hi", **extra: object) -> dict:
    message = {"role": role, "content": content, "timestamp": 1}
    if role == "assistant":
        message.update(provider="openai", model="gpt-4o", stopReason="stop",
                       usage={"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15})
    message.update(extra)
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": T, "message": message}


def line(value: object) -> bytes:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: written as \udXXX escapes, like JSON.stringify
        return json.dumps(value, separators=(",", ":")).encode("ascii")


def text_block(text: str) -> list:
    return [{"type": "text", "text": text}]


def compaction(eid: str, parent: str, first_kept: object, **extra: object) -> dict:
    entry = {"type": "compaction", "id": eid, "parentId": parent, "timestamp": T,
             "summary": "summary so far", "firstKeptEntryId": first_kept, "tokensBefore": 1000}
    entry.update(extra)
    return entry


def edit(eid: str, parent: str, target: object, replacement: object) -> dict:
    return {"type": "context_edit", "id": eid, "parentId": parent, "timestamp": T,
            "targetId": target, "replacement": replacement}


def files() -> dict[str, bytes]:
    h = line(header())
    nested = lambda d: "[" * d + "]" * d  # noqa: E731
    out: dict[str, bytes] = {}

    def lines(*parts: object, end: bytes = b"\n") -> bytes:
        return b"\n".join(p if isinstance(p, bytes) else line(p) for p in parts) + end

    out["torn_last_line.jsonl"] = lines(h, msg("a", None), msg("b", "a", "assistant", text_block("ok")),
                                        end=b"\n") + b'{"type":"message","id":"c","parentId":"b","mess'
    out["glued_lines.jsonl"] = lines(h, msg("a", None), line(msg("b", "a")) + line(msg("c", "b")), msg("d", "a"))
    out["complete_line_without_newline.jsonl"] = lines(h, msg("a", None), msg("b", "a"), end=b"")
    out["invalid_utf8.jsonl"] = lines(h, msg("a", None), b'{"type":"message","id":"b","parentId":"a","timestamp":"'
                                      + T.encode() + b'","message":{"role":"user","content":"bad \xff\xfe bytes","timestamp":1}}',
                                      b"\xff\xfe\xfd garbage", msg("c", "b"))
    out["nul_bytes.jsonl"] = lines(h, msg("a", None), b"\x00\x00\x00",
                                   b'{"type":"message","id":"b","parentId":"a","message":{"role":"user","content":"raw \x00 nul"}}',
                                   msg("c", "a", content="escaped \u0000 nul"))
    out["lone_surrogates.jsonl"] = lines(h, msg("a", None, content="cut \ud83d"),
                                         msg("b", "a", "assistant", text_block("half \udc00 pair")))
    out["bom_header.jsonl"] = b"\xef\xbb\xbf" + lines(h, msg("a", None))
    out["crlf_line_endings.jsonl"] = lines(h, msg("a", None), msg("b", "a", "assistant", text_block("ok"))).replace(b"\n", b"\r\n")
    out["second_header.jsonl"] = lines(h, msg("a", None), line(header(id="other")), msg("b", "a"))
    out["duplicate_ids.jsonl"] = lines(h, msg("a", None, content="first a"), msg("b", "a"),
                                       msg("a", "b", content="second a"), msg("c", "a"))
    out["duplicate_id_cycle.jsonl"] = lines(h, msg("x", None), msg("y", "x"), msg("x", "y"), msg("z", "x"))
    out["parent_cycle.jsonl"] = lines(h, msg("a", "c"), msg("b", "a"), msg("c", "b"))
    out["self_parent.jsonl"] = lines(h, msg("a", "a"), msg("b", "a"))
    out["dangling_parents.jsonl"] = lines(h, msg("a", "nowhere"), msg("b", "a"), msg("c", "also-missing"))
    out["wrong_types.jsonl"] = lines(
        h, msg("a", None),
        {"type": "message", "id": "b", "parentId": "a", "timestamp": T, "message": "not a dict"},
        {"type": "message", "id": "c", "parentId": "b", "timestamp": T, "message": None},
        msg("d", "c", content=42),
        msg("e", "d", "assistant", content=7),
        msg("f", "e", "assistant", content=[1, "two", None, {"type": "text", "text": 3},
                                            {"type": "toolCall", "name": 5, "arguments": {"x": [1, {"y": None}]}}]),
        {"type": "message", "id": 123, "parentId": "f", "timestamp": T, "message": {"role": "user", "content": "numeric id"}},
        {"type": "message", "id": "g", "parentId": {"an": "object"}, "timestamp": T, "message": {"role": "user", "content": "object parent"}},
        {"type": "message", "id": "h", "parentId": ["a"], "timestamp": 5, "message": {"role": "bashExecution", "command": 1, "output": ["x"]}},
        {"type": 17, "id": "i", "parentId": "h"},
        msg("j", "h", "system", content={"not": "text"}, sections=["x"], toolsAdded="nope"),
        msg("k", "j", "assistant", text_block("usage garbage"), usage={"totalTokens": "lots", "input": [1]}),
    )
    out["compaction_first_kept_nowhere.jsonl"] = lines(
        h, msg("a", None), msg("b", "a", "assistant", text_block("one")), compaction("c", "b", "missing"),
        msg("d", "c"))
    out["compaction_first_kept_off_branch.jsonl"] = lines(
        h, msg("a", None), msg("b", "a", "assistant", text_block("main")),
        msg("x", "a", content="side branch"), compaction("c", "b", "x"), msg("d", "c"))
    out["compaction_garbage_fields.jsonl"] = lines(
        h, msg("a", None), compaction("c", "a", {"id": "a"}, summary=["not", "text"], tokensBefore="many",
                                      systemMessage=True),
        compaction("c2", "c", "c2", summary=None, systemMessage={"role": "system", "content": 5}),
        msg("d", "c2"))
    out["context_edit_targets.jsonl"] = lines(
        h, msg("a", None), msg("b", "a", "assistant", text_block("visible")),
        edit("e1", "b", "nowhere", None), edit("e2", "e1", 42, None),
        edit("e3", "e2", "b", {"content": 99}), edit("e4", "e3", "a", "not a dict"),
        msg("x", "a", content="off branch"), edit("e5", "e4", "x", None), msg("c", "e5"))
    out["labels_and_settings_garbage.jsonl"] = lines(
        h, msg("a", None),
        {"type": "label", "id": "l1", "parentId": "a", "timestamp": T, "targetId": "nowhere", "label": "ghost"},
        {"type": "label", "id": "l2", "parentId": "l1", "timestamp": T, "targetId": ["a"], "label": {"x": 1}},
        {"type": "thinking_level_change", "id": "t", "parentId": "l2", "timestamp": T, "thinkingLevel": 5},
        {"type": "model_change", "id": "m", "parentId": "t", "timestamp": T, "provider": None},
        {"type": "session_info", "id": "s", "parentId": "m", "timestamp": T, "name": ["x"]},
        {"type": "branch_summary", "id": "bs", "parentId": "s", "timestamp": 12, "summary": {"x": 1}, "fromId": 3},
        {"type": "custom_message", "id": "cm", "parentId": "bs", "timestamp": None, "customType": 1, "content": 5},
        msg("b", "cm"))
    out["huge_numbers_and_nan.jsonl"] = lines(
        h, msg("a", None, timestamp=123456789012345678901234567890),
        b'{"type":"message","id":"b","parentId":"a","timestamp":"' + T.encode() + b'","message":{"role":"user","content":"nan","timestamp":NaN}}',
        b'{"type":"message","id":"c","parentId":"a","timestamp":"' + T.encode() + b'","message":{"role":"user","content":"big exp","timestamp":1e400}}',
        msg("d", "c"))
    out["deep_nesting_ok.jsonl"] = lines(
        h, msg("a", None),
        b'{"type":"message","id":"b","parentId":"a","timestamp":"' + T.encode()
        + b'","message":{"role":"assistant","content":[{"type":"toolCall","id":"t","name":"x","arguments":'
        + nested(800).encode() + b'}],"provider":"p","model":"m","stopReason":"toolUse","timestamp":1}}',
        msg("c", "b"))
    out["deep_nesting_too_deep.jsonl"] = lines(
        h, msg("a", None),
        b'{"type":"custom","id":"b","parentId":"a","data":' + nested(50000).encode() + b"}",
        msg("c", "a"))
    out["json_scalars_and_arrays.jsonl"] = lines(h, b"null", b"[]", b"42", b'"text"', b"true", msg("a", None), b"[{}]")
    out["entries_without_ids.jsonl"] = lines(
        h, msg("a", None), {"type": "message", "parentId": "a", "message": {"role": "user", "content": "no id"}},
        {"type": "message", "id": None, "parentId": "a", "message": {"role": "user", "content": "null id"}},
        msg("b", "a"))
    out["v1_with_garbage.jsonl"] = lines(
        header(None), {"type": "message", "timestamp": T, "message": {"role": "user", "content": "v1 hello", "timestamp": 1}},
        b"not json", {"type": "message", "timestamp": T, "message": {"role": "hookMessage", "content": "hook", "timestamp": 2}},
        {"type": "compaction", "timestamp": T, "summary": "s", "firstKeptEntryIndex": 99, "tokensBefore": 1},
        {"type": "message", "timestamp": T, "message": {"role": "user", "content": "after", "timestamp": 3}})
    out["v2_weird_version.jsonl"] = lines(header("3"), msg("a", None), msg("b", "a"))
    out["header_only.jsonl"] = lines(h)
    out["empty.jsonl"] = b""
    out["only_blank_lines.jsonl"] = b"\n   \n\n"
    out["not_a_session.jsonl"] = lines(msg("a", None), h)
    out["garbage_before_header.jsonl"] = lines(b"garbage", b"{broken", h, msg("a", None))
    out["header_id_not_string.jsonl"] = lines(line(header(id=5)), msg("a", None))
    out["unicode_line_separators.jsonl"] = lines(h, msg("a", None, content="sep \u2028 and \u2029 and \x85 end"))
    return out


def main() -> None:
    CORPUS.mkdir(exist_ok=True)
    for name, data in files().items():
        (CORPUS / name).write_bytes(data)
    print(f"{len(files())} files in {CORPUS}")


if __name__ == "__main__":
    main()
