"""The text a summary call reads must be Pi's: pi_nb's
``serialize_conversation(convert_to_llm(messages))`` against Pi's
``serializeConversation(convertToLlm(messages))``, for Pi 1.3.0 and Pi 1.6.0.

Tool results are cut to 2000 UTF-16 units. Pi 1.6.0 cuts with ``sliceHead`` (never half a
surrogate pair) and still reports ``text.length - 2000`` characters truncated; Pi 1.3.0 cut
with ``slice`` and could leave a lone high surrogate. pi_nb follows 1.6.0 (issue 13 item 9),
so on a pair straddling the cut it differs from 1.3.0 by design.

Only user / assistant / toolResult / custom messages are compared: pi_nb words the request
text of bash executions and summary wrappers its own way (README, "Where pi_nb departs").
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.compat

EMOJI = "😀"  # two UTF-16 units


def _tool_result(text: str, n: int) -> dict:
    return {
        "role": "toolResult",
        "toolCallId": f"call_{n}",
        "toolName": "read",
        "content": [{"type": "text", "text": text}],
        "isError": False,
        "timestamp": n,
    }


# name -> tool-result text, around the 2000-unit cut
CUT_CASES = {
    "ascii-1999": "a" * 1999,
    "ascii-2000": "a" * 2000,
    "ascii-2001": "a" * 2001,
    "pair-ends-at-cut": "a" * 1998 + EMOJI + "tail",
    "pair-after-cut": "a" * 2000 + EMOJI,
    "pairs-only": EMOJI * 1500,
    "pair-straddles-cut": "a" * 1999 + EMOJI + "tail",
    "pairs-straddle-cut": "a" + EMOJI * 1500,
}
# pi_nb bugs against a release, still open: (case, version) -> what is wrong. The test is an
# xfail while pi_nb still differs and FAILS once it matches (then drop the entry).
OPEN_BUGS: dict[tuple[str, str], str] = {}
# Where pi_nb knowingly differs from a release (case, version) -> why.
DIFFERS = {
    ("pair-straddles-cut", "1.3.0"): "Pi 1.3.0 leaves a lone surrogate; pi_nb follows 1.6.0",
    ("pairs-straddle-cut", "1.3.0"): "Pi 1.3.0 leaves a lone surrogate; pi_nb follows 1.6.0",
}


def _pi_nb_serialize(messages: list[dict]) -> str:
    from pi_nb.compaction.summarize import serialize_conversation
    from pi_nb.messages import convert_to_llm

    return serialize_conversation(convert_to_llm(messages))


@pytest.mark.parametrize("case", list(CUT_CASES))
def test_tool_result_cut_matches_pi(case, pi_oracle):
    messages = [
        {"role": "user", "content": "read it", "timestamp": 1},
        _tool_result(CUT_CASES[case], 2),
    ]
    (theirs,) = pi_oracle.serialize([messages])
    ours = _pi_nb_serialize(messages)
    bug = OPEN_BUGS.get((case, pi_oracle.version))
    if bug is not None:
        assert ours != theirs, f"fixed ({bug}): drop it from OPEN_BUGS"
        pytest.xfail(bug)
    why = DIFFERS.get((case, pi_oracle.version))
    if why is not None:
        assert ours != theirs, f"no longer differs ({why}): drop it from DIFFERS"
        assert not any(0xD800 <= ord(c) <= 0xDFFF for c in ours), "pi_nb split a pair"
        return
    assert ours == theirs, f"pi_nb: …{ours[-80:]!r}\npi   : …{theirs[-80:]!r}"


def test_generated_contexts_serialize_like_pi(generated_sessions, pi_oracle):
    """Every generated session's context (thinking, images, tool calls with nested
    arguments, big tool results full of astral characters) serializes identically."""
    contexts = pi_oracle.batch([{"cmd": "context", "file": p} for p in generated_sessions])
    roles = {"user", "assistant", "toolResult", "custom"}
    lists = [[m for m in ctx["messages"] if m["role"] in roles] for ctx in contexts]
    expected = pi_oracle.serialize(lists)
    problems = []
    for path, messages, theirs in zip(generated_sessions, lists, expected, strict=True):
        ours = _pi_nb_serialize(messages)
        if ours != theirs:
            at = next(
                (i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b),
                min(len(ours), len(theirs)),
            )
            lo = max(0, at - 40)
            problems.append(
                f"{path}: at {at}:\n  pi_nb {ours[lo : at + 40]!r}\n  pi    {theirs[lo : at + 40]!r}"
            )
    assert not problems, "\n".join(problems)
    assert any("[... " in t and "more characters truncated]" in t for t in expected), (
        "no generated tool result is long enough to be cut"
    )
