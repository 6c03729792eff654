"""End to end on the real local model: SmolLM2 talks until W − R is crossed, the session
compacts for real, the conversation continues, and Pi (1.3.0 and 1.6.0) projects the file
exactly as pi_nb does."""

from __future__ import annotations

import json

import pytest

from pi_nb.session.tree import SessionTree

pytestmark = [pytest.mark.compat, pytest.mark.slow]

PROMPTS = [
    "Tell me a short story about a cat named Luna.",
    "Now a story about a dog named Rex.",
    "And one about a bird called Kiwi.",
    "Describe a lighthouse on a stormy night.",
    "Write a poem about autumn leaves.",
    "Explain how bread rises.",
    "Tell me about the planet Mars.",
    "Describe a busy market in the morning.",
]


def test_smollm2_crosses_the_threshold_compacts_and_pi_agrees(tmp_path, pi_oracles, compat):
    from pi_nb.agent import Session
    from pi_nb.models.smollm2 import LocalModelUnavailableError, gguf_path

    try:
        gguf_path()
    except LocalModelUnavailableError as exc:
        pytest.fail(f"the local extra must be installed for this test: {exc}")
    path = tmp_path / "smol.jsonl"
    session = Session.new(
        path, cwd=tmp_path, model="pinb/smollm2", window=1024, reserve=256, keep=128,
        max_tokens=96, temperature=0,
    )
    threshold = session.window - session.reserve
    peak = 0
    turns_after = 0
    for text in PROMPTS:
        result = session.prompt(text)
        assert result.ok, result.error
        peak = max(peak, max((r["usage"]["input"] for r in result.replies), default=0))
        if any(e.get("type") == "compaction" for e in session.tree.get_branch()):
            turns_after += 1
            if turns_after == 2:  # one more turn after the compaction happened
                break
    branch = session.tree.get_branch()
    compactions = [e for e in branch if e.get("type") == "compaction"]
    assert compactions, f"no compaction in {len(PROMPTS)} turns (threshold {threshold})"
    assert compactions[0]["summary"].strip()
    assert branch[-1]["type"] == "message" and branch[-1]["message"]["role"] == "assistant"
    # After compacting, the context starts with the summary and is under the threshold again.
    assert session.context().messages[0]["role"] == "compactionSummary"
    assert session.context_tokens().tokens <= threshold

    ours = compat.pi_nb_context(path)
    # the model run is the costly part: check its file against every release in one test
    problems = {v: compat.describe_mismatch(ours, o.context(path)) for v, o in pi_oracles.items()}
    assert not any(problems.values()), "\n".join(f"Pi {v}: {d}" for v, d in problems.items() if d)
    reopened = SessionTree.open(path)
    assert json.dumps(reopened.projection().messages) == json.dumps(ours["messages"])
