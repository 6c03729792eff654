"""Numbers in written lines are printed as JavaScript prints them, so a file pi_nb migrates
(or appends to) has the bytes Pi's JSON.stringify would write.

Checked against ``node`` itself: a batch of hypothesis-generated floats, and v1/v2 files
migrated by pi_nb compared line by line with JSON.stringify(JSON.parse(line)).
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_nb.session import SessionTree
from pi_nb.session.jsonl import encode_line

NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")

#: JSON.stringify of each JSON.parse'd input line (the way Pi rewrites a migrated file).
_RESTRINGIFY = r"""
const lines = require("fs").readFileSync(0, "utf8").split("\n").filter(Boolean);
for (const line of lines) console.log(JSON.stringify(JSON.parse(line)));
"""


def _node_restringify(lines: list[str]) -> list[str]:
    assert NODE is not None
    proc = subprocess.run(
        [NODE, "-e", _RESTRINGIFY],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout.splitlines()


EDGES = [
    5e-06,
    1e-06,
    1e-07,
    9.99e-07,
    0.000123,
    1e-4,
    1.5e-10,
    1e16,
    1.5e16,
    1e20,
    1e21,
    1.2345e21,
    123456789012345680000.0,
    0.1 + 0.2,
    -0.0,
    1.0,
    -3.0,
    2.0**53,
    2.0**53 + 2,
    1.7976931348623157e308,
    5e-324,
    float("nan"),
    float("inf"),
]


@needs_node
def test_edge_numbers_print_like_node() -> None:
    entries = [{"n": value, "list": [value]} for value in EDGES]
    ours = [encode_line(e).decode().rstrip("\n") for e in entries]
    # JSON.parse cannot read NaN / Infinity: give node what Pi would hold, null.
    held = [v if math.isfinite(v) else None for v in EDGES]
    python_lines = [json.dumps({"n": v, "list": [v]}) for v in held]
    assert ours == _node_restringify(python_lines)
    assert ours[0] == '{"n":0.000005,"list":[0.000005]}'
    assert ours[2] == '{"n":1e-7,"list":[1e-7]}'


@needs_node
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.floats(allow_nan=False, allow_infinity=False)
        | st.integers(min_value=-(2**70), max_value=2**70),
        min_size=50,
        max_size=200,
    )
)
def test_any_number_prints_like_node(values: list[float]) -> None:
    """One node run per example checks a whole batch of numbers."""
    entries = [{"type": "x", "cost": {"total": v}, "text": "1.0, 5e-06"} for v in values]
    ours = [encode_line(e).decode().rstrip("\n") for e in entries]
    assert ours == _node_restringify([json.dumps(e, separators=(",", ":")) for e in entries])


def test_plain_entries_keep_the_fast_printer() -> None:
    entry = {"type": "message", "usage": {"input": 10, "cost": {"total": 0.25}}, "t": "x"}
    assert encode_line(entry) == (json.dumps(entry, separators=(",", ":")) + "\n").encode()


def _v2_file(path: Path) -> list[str]:
    lines = [
        {
            "type": "session",
            "version": 2,
            "id": "5e0f",
            "timestamp": "2026-01-01T00:00:00.000Z",
            "cwd": "/w",
        },
        {
            "type": "message",
            "id": "a1",
            "parentId": None,
            "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": "hi", "timestamp": 1767225601000},
        },
        {
            "type": "message",
            "id": "a2",
            "parentId": "a1",
            "timestamp": "2026-01-01T00:00:02.000Z",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "yo"}],
                "api": "anthropic-messages",
                "provider": "anthropic",
                "model": "m",
                "usage": {
                    "input": 3,
                    "output": 2,
                    "cacheRead": 0,
                    "cacheWrite": 0,
                    "totalTokens": 5,
                    "cost": {
                        "input": 5e-06,
                        "output": 3.0e-05,
                        "cacheRead": 0.0,
                        "cacheWrite": 1.25e-07,
                        "total": 3.5125e-05,
                    },
                },
                "stopReason": "stop",
                "timestamp": 1767225602000,
            },
        },
        {
            "type": "message",
            "id": "a3",
            "parentId": "a2",
            "timestamp": "2026-01-01T00:00:03.000Z",
            "message": {
                "role": "hookMessage",
                "customType": "note",
                "content": "n",
                "display": True,
                "details": {"ratio": 1e-7, "big": 12345678901234567890},
                "timestamp": 1767225603000,
            },
        },
    ]
    # Written the way Python tools write them (5e-06, 0.0), i.e. not as Pi would.
    text = [json.dumps(e, separators=(",", ":")) for e in lines]
    path.write_text("\n".join(text) + "\n")
    return text


@needs_node
def test_migrated_file_has_pis_bytes(tmp_path: Path) -> None:
    path = tmp_path / "v2.jsonl"
    original = _v2_file(path)
    assert "5e-06" in path.read_text()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = SessionTree.open(path)  # migrates v2 → v3 in memory; reading never rewrites
    assert tree.header["version"] == 3
    assert path.read_text().splitlines() == original
    assert tree.migrate()  # a writer rewrites the file, as Pi does on load
    tree.close()
    # Pi's migration: version 3, hookMessage → custom; then JSON.stringify of every line.
    expected_input = [json.loads(line) for line in original]
    expected_input[0]["version"] = 3
    expected_input[3]["message"]["role"] = "custom"
    expected = _node_restringify([json.dumps(e) for e in expected_input])
    written = path.read_text().splitlines()
    assert written == expected
    assert '"input":0.000005' in written[2] and '"cacheRead":0,' in written[2]
    assert '"ratio":1e-7' in written[3] and '"big":12345678901234567000' in written[3]
