"""Each Pi-parity rule of pi_nb.agent.recovery, alone: the retry, overflow and auto-compaction
decisions over a small in-memory session tree (no model, no Session).

W = 10_000 and R = 2_000 (W − R = 8_000) throughout; the model is ``pinb/scripted``
(provider ``pinb``, model ``scripted``). Every guard of ``check_compaction`` /
``RecoveryState`` has a test here that fails when the guard is deleted.
"""

from __future__ import annotations

from typing import Any

import pytest

from pi_nb.agent.overflow import RetryPolicy
from pi_nb.agent.recovery import (
    LENGTH_RECOVERY_FAILED,
    OVERFLOW_RECOVERY_FAILED,
    Compact,
    GiveUp,
    Limits,
    RecoveryState,
    between_turns,
    check_compaction,
    projected_tokens,
)
from pi_nb.entries import iso_to_ms
from pi_nb.events import AutoRetryEnd, MessageEnd, MessageStart
from pi_nb.session import SessionTree

LIMITS = Limits(model="pinb/scripted", window=10_000, reserve=2_000)
OVERFLOW_TEXT = "prompt is too long: 12000 tokens > 10000 maximum"


def _user(text: str = "hi") -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}


def _reply(
    stop: str = "stop",
    *,
    tokens: int = 100,
    output: int = 10,
    error: str | None = None,
    model: str = "scripted",
    timestamp: int | None = None,
    usage: bool = True,
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": [{"type": "text", "text": "ok"}],
        "provider": "pinb",
        "model": model,
        "stopReason": stop,
        "timestamp": timestamp if timestamp is not None else 10**13,  # after any entry
    }
    if usage:
        message["usage"] = {
            "input": tokens - output,
            "output": output,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": tokens,
        }
    if error is not None:
        message["errorMessage"] = error
    return message


def _tree(*messages: dict[str, Any]) -> tuple[SessionTree, list[str]]:
    tree = SessionTree.in_memory()
    ids = [tree.append_message(m)["id"] for m in messages]
    return tree, ids


def _check(tree: SessionTree, message: dict[str, Any], entry_id: str | None, **kw: Any) -> Any:
    state = kw.pop("state", None) or RecoveryState()
    limits = kw.pop("limits", LIMITS)
    kw.setdefault("skip_aborted", True)
    return check_compaction(tree, message, entry_id, limits, state, **kw)


# --- threshold -------------------------------------------------------------------------------


def test_threshold_uses_the_replys_usage_against_w_minus_r():
    for tokens, expected in ((8_001, Compact("threshold")), (8_000, None)):
        reply = _reply(tokens=tokens)
        tree, ids = _tree(_user(), reply)
        assert _check(tree, reply, ids[1]) == expected


def test_disabled_compaction_decides_nothing_even_on_overflow():
    reply = _reply("error", error=OVERFLOW_TEXT, usage=False)
    tree, ids = _tree(_user(), reply)
    off = Limits(model=LIMITS.model, window=LIMITS.window, reserve=LIMITS.reserve, enabled=False)
    assert _check(tree, reply, ids[1], limits=off) is None
    assert _check(tree, reply, ids[1]) == Compact("overflow", will_retry=True, omit=(ids[1],))


def test_aborted_reply_is_skipped_after_a_run_but_checked_before_a_prompt():
    reply = _reply("aborted", tokens=9_000)
    tree, ids = _tree(_user(), reply)
    assert _check(tree, reply, ids[1], skip_aborted=True) is None
    assert _check(tree, reply, ids[1], skip_aborted=False) == Compact("threshold")


def test_context_edit_in_the_projection_makes_the_usage_stale_so_it_is_re_estimated():
    # The reply reported 9,000 tokens, then a big tool output was replaced by a short text:
    # the projected estimate (not the stale usage) decides.
    reply = _reply(tokens=9_000)
    tree, ids = _tree(_user("x " * 20_000), reply)
    tree.append_context_edit(ids[0], {"content": "short"})
    assert projected_tokens(tree).tokens < 8_000
    assert _check(tree, reply, ids[1]) is None


def test_error_reply_re_estimates_and_skips_usage_from_before_the_latest_compaction():
    # A kept reply that reported 9,000 tokens precedes the compaction; the error reply after
    # it has no usage: the estimate would lean on that stale 9,000, so nothing is decided.
    big = _reply(tokens=9_000, timestamp=1)
    tree, ids = _tree(_user(), big)
    tree.append_compaction("summary", ids[0], 9_000)
    error = _reply("error", error="boom", usage=False)
    error_id = tree.append_message(error)["id"]
    assert _check(tree, error, error_id) is None


def test_error_reply_without_any_usage_counts_the_request_overhead():
    error = _reply("error", error="boom", usage=False)
    tree, ids = _tree(_user(), error)
    assert _check(tree, error, ids[1]) is None
    assert _check(tree, error, ids[1], overhead=lambda: 9_000) == Compact("threshold")


# --- stale replies ---------------------------------------------------------------------------


def test_reply_before_the_latest_compaction_is_stale_by_position():
    reply = _reply(tokens=9_500)
    tree, ids = _tree(_user(), reply, _user("again"))
    tree.append_compaction("summary", ids[2], 9_500)
    assert _check(tree, reply, ids[1]) is None


def test_reply_not_on_the_branch_is_stale_by_timestamp():
    tree, ids = _tree(_user())
    compaction = tree.append_compaction("summary", ids[0], 100)
    stamp = iso_to_ms(compaction["timestamp"])
    assert _check(tree, _reply(tokens=9_500, timestamp=stamp), None) is None
    assert _check(tree, _reply(tokens=9_500, timestamp=stamp + 1), None) == Compact("threshold")


# --- overflow --------------------------------------------------------------------------------


def test_explicit_overflow_error_omits_the_reply_and_its_tool_results_and_retries():
    reply = _reply("error", error=OVERFLOW_TEXT, usage=False)
    tree, ids = _tree(_user(), reply)
    state = RecoveryState()
    decision = _check(tree, reply, ids[1], state=state, tool_results=["t1", "t2"])
    assert decision == Compact("overflow", will_retry=True, omit=(ids[1], "t1", "t2"))
    assert state.overflow_attempted


def test_overflow_kind_from_the_exception_counts_without_an_overflow_wording():
    reply = _reply("error", error="400 Bad Request", usage=False)
    tree, ids = _tree(_user(), reply)
    assert _check(tree, reply, ids[1]) is None
    assert _check(tree, reply, ids[1], error_kind="overflow") == Compact("overflow", True, (ids[1],))


def test_overflow_is_retried_once_per_user_message_then_gives_up():
    reply = _reply("error", error=OVERFLOW_TEXT, usage=False)
    tree, ids = _tree(_user(), reply)
    state = RecoveryState(overflow_attempted=True)
    assert _check(tree, reply, ids[1], state=state) == GiveUp(OVERFLOW_RECOVERY_FAILED)


def test_overflow_of_another_model_is_not_recovered():
    reply = _reply("error", error=OVERFLOW_TEXT, usage=False, model="other")
    tree, ids = _tree(_user(), reply)
    assert _check(tree, reply, ids[1]) is None


def test_explicit_overflow_that_was_omitted_is_not_recovered_again():
    reply = _reply("error", error=OVERFLOW_TEXT, usage=False)
    tree, ids = _tree(_user(), reply)
    tree.append_context_edit(ids[1], None)
    assert _check(tree, reply, ids[1]) is None


def test_silent_overflow_of_a_successful_reply_compacts_without_a_retry():
    reply = _reply(tokens=12_000)  # input 11,990 > W: the provider truncated silently
    tree, ids = _tree(_user(), reply)
    state = RecoveryState()
    assert _check(tree, reply, ids[1], state=state) == Compact("overflow")
    assert not state.overflow_attempted  # nothing retried, so nothing spent


def test_silent_overflow_needs_usage_that_still_describes_the_context():
    # A context edit after the reply: its usage no longer matches the projection, so the
    # usage-based overflow rule must not fire (the re-estimate is small).
    reply = _reply(tokens=12_000)
    tree, ids = _tree(_user(), reply, _user("more"))
    tree.append_context_edit(ids[2], {"content": "less"})
    assert _check(tree, reply, ids[1]) is None


def test_silent_overflow_needs_the_reply_in_the_projection():
    # The overflowing reply is on an abandoned branch: its usage describes another context.
    reply = _reply(tokens=12_000)
    tree, ids = _tree(_user(), reply)
    tree.branch(ids[0])
    tree.append_message(_user("elsewhere"))
    # Its usage still feeds the threshold rule (Pi reads the reply's usage), but no overflow.
    assert _check(tree, reply, ids[1]) == Compact("threshold")


def test_length_stop_below_the_output_cap_is_recovered_like_an_overflow():
    capped = Limits(model=LIMITS.model, window=LIMITS.window, reserve=LIMITS.reserve, desired_output=500)
    reply = _reply("length", tokens=300, output=200)
    tree, ids = _tree(_user(), reply)
    assert _check(tree, reply, ids[1], limits=capped) == Compact("overflow", True, (ids[1],))
    assert _check(tree, reply, ids[1], limits=capped, state=RecoveryState(overflow_attempted=True)) == GiveUp(
        LENGTH_RECOVERY_FAILED
    )
    tree.append_context_edit(ids[1], None)  # omitted: nothing to recover
    assert _check(tree, reply, ids[1], limits=capped) is None


# --- between turns ---------------------------------------------------------------------------


def test_between_turns_compacts_when_the_projected_estimate_exceeds_w_minus_r():
    tree, _ = _tree(_user("x " * 20_000))  # ~10,000 estimated tokens, no usage
    assert between_turns(tree, LIMITS) == Compact("threshold")
    small, _ = _tree(_user())
    assert between_turns(small, LIMITS) is None
    assert between_turns(small, LIMITS, overhead=lambda: 8_001) == Compact("threshold")
    off = Limits(model=LIMITS.model, window=LIMITS.window, reserve=LIMITS.reserve, enabled=False)
    assert between_turns(tree, off) is None


# --- retries -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "kind", "retry"),
    [
        (_reply("error", error="429 rate limit exceeded", usage=False), None, True),
        (_reply("error", error="something odd", usage=False), "transient", True),
        (_reply("error", error="503 service unavailable", usage=False), "fatal", False),
        (_reply("error", error=OVERFLOW_TEXT, usage=False), None, False),
        (_reply("error", error="503 service unavailable", usage=False), "overflow", False),
        (_reply("stop"), None, False),
        (_reply("stop"), "transient", False),  # only an error reply is retried
        # A transient exception class whose text is an overflow: compacted, never retried.
        (_reply("error", error=OVERFLOW_TEXT, usage=False), "transient", False),
    ],
)
def test_only_transient_errors_are_retried_never_an_overflow(reply, kind, retry):
    assert RecoveryState().should_retry(reply, kind, RetryPolicy(), LIMITS.window) is retry
    assert RecoveryState().should_retry(reply, kind, RetryPolicy(enabled=False), LIMITS.window) is False


def test_retries_back_off_exponentially_up_to_max_retries():
    state = RecoveryState()
    policy = RetryPolicy(max_retries=3, base_delay=2.0, max_delay=5.0)
    failed = _reply("error", error="503", usage=False)
    starts = [state.next_retry(failed, policy) for _ in range(4)]
    assert [(s.attempt, s.max_attempts, s.delay_ms) for s in starts[:3]] == [(1, 3, 2000), (2, 3, 4000), (3, 3, 5000)]
    assert starts[3] is None and state.retry_attempt == 3
    assert state.end_retry(success=False, final_error="503") == AutoRetryEnd(False, 3, "503")
    assert state.end_retry(success=False) is None  # nothing in progress any more


def test_a_successful_reply_closes_the_retry_sequence():
    state = RecoveryState(retry_attempt=2)
    assert state.observe(MessageEnd(message=_reply("error", error="503"))) is None
    assert state.observe(MessageEnd(message=_reply("stop"))) == AutoRetryEnd(success=True, attempt=2)
    assert state.retry_attempt == 0


def test_the_overflow_attempt_resets_on_a_user_message_and_on_a_good_reply_only():
    state = RecoveryState(overflow_attempted=True)
    for stop in ("error", "length"):
        state.observe(MessageEnd(message=_reply(stop)))
        assert state.overflow_attempted
    state.observe(MessageEnd(message=_reply("stop")))
    assert not state.overflow_attempted
    state.overflow_attempted = True
    state.observe(MessageStart(message=_reply("stop")))  # an assistant start: no reset
    assert state.overflow_attempted
    state.observe(MessageStart(message=_user()))
    assert not state.overflow_attempted
