"""pi_nb.hooks: registration, notification, and the steering events' semantics."""

from __future__ import annotations

import copy

import pytest

from pi_nb.events import SessionCompact
from pi_nb.hooks import (
    BEFORE_AGENT_START,
    CONTEXT,
    HOOK_ERROR,
    SESSION_BEFORE_COMPACT,
    SESSION_BEFORE_TREE,
    SESSION_COMPACT,
    Event,
    Hooks,
)


def _boom(event):
    raise RuntimeError("boom")


COMPACTED = {"compaction_entry": {"id": "x"}, "from_extension": False, "reason": "manual", "will_retry": False}


def test_on_and_unsubscribe():
    hooks = Hooks()
    seen = []
    off = hooks.on(SESSION_COMPACT, lambda event: seen.append(event))
    hooks.emit(SESSION_COMPACT, **COMPACTED)
    assert seen == [{"type": "session_compact", **COMPACTED}]
    # A name of the vocabulary builds its typed event: the object Session listeners get.
    assert isinstance(seen[0], SessionCompact) and seen[0].compaction_entry == {"id": "x"}
    assert seen[0].type == "session_compact" and seen[0]["will_retry"] is False
    with pytest.raises(AttributeError):
        _ = seen[0].missing
    with pytest.raises(KeyError, match="will_retry"):
        seen[0].get("willRetry")  # one spelling: Pi's camelCase names the snake_case field
    off()
    off()  # twice is harmless
    hooks.emit(SessionCompact(**COMPACTED))
    assert len(seen) == 1 and not hooks.has_handlers(SESSION_COMPACT)


def test_a_misspelt_payload_is_refused_and_other_names_stay_plain_events():
    hooks = Hooks()
    seen = []
    hooks.on("session_start", seen.append)
    with pytest.raises(TypeError):
        hooks.emit(SESSION_COMPACT, compactionEntry={"id": "x"})
    hooks.emit("session_start", reason="startup")
    assert isinstance(seen[0], Event) and seen[0].reason == "startup"


def test_unknown_event_names_and_non_callables_are_refused():
    hooks = Hooks()
    with pytest.raises(ValueError, match="session_before_compat"):
        hooks.on("session_before_compat", print)
    with pytest.raises(TypeError):
        hooks.on(SESSION_COMPACT, "not callable")  # type: ignore[arg-type]


def test_listener_errors_are_reported_never_raised():
    hooks = Hooks()
    reports, after = [], []
    hooks.on(HOOK_ERROR, lambda event: reports.append(event))
    hooks.on(SESSION_COMPACT, _boom)
    hooks.on(SESSION_COMPACT, lambda event: after.append(event))
    hooks.emit(SESSION_COMPACT, **COMPACTED)
    assert after  # later listeners still run
    assert reports[0].event == SESSION_COMPACT and reports[0].handler is _boom
    assert reports[0].error == "RuntimeError: boom"
    assert len(hooks.errors) == 1 and isinstance(hooks.errors[0].error, RuntimeError)


def test_a_failing_error_listener_does_not_recurse():
    hooks = Hooks()
    hooks.on(HOOK_ERROR, _boom)
    hooks.on(SESSION_COMPACT, _boom)
    hooks.emit(SESSION_COMPACT, **COMPACTED)
    assert [e.event for e in hooks.errors] == [SESSION_COMPACT, HOOK_ERROR]


def test_before_compact_later_result_wins_and_cancel_stops():
    hooks = Hooks()
    calls = []
    hooks.on(SESSION_BEFORE_COMPACT, lambda e: calls.append(1) or {"compaction": {"summary": "a"}})
    hooks.on(SESSION_BEFORE_COMPACT, lambda e: calls.append(2))  # None: no opinion
    hooks.on(SESSION_BEFORE_COMPACT, lambda e: calls.append(3) or {"compaction": {"summary": "b"}})
    assert hooks.run_before_compact({"reason": "manual"}) == {"compaction": {"summary": "b"}}
    hooks.on(SESSION_BEFORE_COMPACT, lambda e: calls.append(4) or {"cancel": True})
    hooks.on(SESSION_BEFORE_COMPACT, lambda e: calls.append(5) or {"compaction": {"summary": "c"}})
    calls.clear()
    assert hooks.run_before_compact({"reason": "manual"}) == {"cancel": True}
    assert calls == [1, 2, 3, 4]


def test_before_handlers_that_raise_or_return_junk_are_ignored():
    hooks = Hooks()
    hooks.on(SESSION_BEFORE_TREE, lambda e: {"summary": {"summary": "s"}})
    hooks.on(SESSION_BEFORE_TREE, _boom)
    hooks.on(SESSION_BEFORE_TREE, lambda e: "junk")
    assert hooks.run_before_tree({"preparation": None}) == {"summary": {"summary": "s"}}
    assert len(hooks.errors) == 2
    assert Hooks().run_before_compact({}) is None


def _conversation():
    return [
        {"role": "system", "content": "You are terse.", "timestamp": 0},
        {"role": "user", "content": "hi", "timestamp": 1},
        {"role": "assistant", "content": [{"type": "text", "text": "hello"}], "timestamp": 2},
        {"role": "system", "content": "Later rule.", "timestamp": 3},
        {"role": "user", "content": "bye", "timestamp": 4},
    ]


def test_context_without_handlers_returns_the_messages():
    messages = _conversation()
    assert Hooks().run_context(messages) == messages


def test_context_handlers_chain_on_deep_copies():
    original = _conversation()
    frozen = copy.deepcopy(original)
    hooks = Hooks()
    seen = []

    def drop_first_user(event):
        seen.append([m["role"] for m in event.messages])
        event.messages[0]["content"] = "mutated"  # a deep copy: the caller's list is safe
        return event.messages[1:]

    def tag(event):
        seen.append([m.get("content") for m in event.messages])
        return {"messages": [*event.messages, {"role": "user", "content": "note", "timestamp": 5}]}

    hooks.on(CONTEXT, drop_first_user)
    hooks.on(CONTEXT, tag)
    out = hooks.run_context(original)
    assert original == frozen
    assert seen[0] == ["user", "assistant", "user"]  # handlers never see system messages
    assert seen[1][1] == "bye"
    # the conversation changed: the system state comes back as one leading message
    assert out[0]["role"] == "system" and out[0]["content"] == "You are terse.\n\nLater rule."
    assert [m["role"] for m in out[1:]] == ["assistant", "user", "user"]
    assert out[-1]["content"] == "note"


def test_context_none_and_in_place_edits():
    hooks = Hooks()

    def edit_in_place(event):
        event.messages[0]["content"] = "HI"

    hooks.on(CONTEXT, lambda event: None)
    hooks.on(CONTEXT, edit_in_place)
    hooks.on(CONTEXT, _boom)
    out = hooks.run_context(_conversation())
    # unchanged list: system messages stay where they were; the in-place edit is kept
    assert [m["role"] for m in out] == ["system", "user", "assistant", "system", "user"]
    assert out[1]["content"] == "HI"
    assert len(hooks.errors) == 1


def test_before_agent_start_messages_and_system_prompt_chain():
    hooks = Hooks()
    prompts = []

    def first(event):
        prompts.append(event.system_prompt)
        return {
            "message": {"customType": "rag", "content": "doc 1", "display": False},
            "systemPrompt": event.system_prompt + " +1",
        }

    def second(event):
        prompts.append(event.system_prompt)  # payloads are snake_case only
        assert event.prompt == "fix it"
        return {
            "message": {
                "customType": "memo",
                "content": [{"type": "text", "text": "m"}],
                "details": {"k": 1},
            },
            "system_prompt": event.system_prompt + " +2",
        }

    hooks.on(BEFORE_AGENT_START, first)
    hooks.on(BEFORE_AGENT_START, _boom)
    hooks.on(BEFORE_AGENT_START, second)
    hooks.on(BEFORE_AGENT_START, lambda event: {"message": "not a dict"})
    messages, system = hooks.run_before_agent_start("fix it", "BASE")
    assert prompts == ["BASE", "BASE +1"]
    assert system == "BASE +1 +2"
    assert messages == [
        {"customType": "rag", "content": "doc 1", "display": False},
        {
            "customType": "memo",
            "content": [{"type": "text", "text": "m"}],
            "display": True,
            "details": {"k": 1},
        },
    ]
    assert len(hooks.errors) == 2
    assert Hooks().run_before_agent_start("p", "S") == ([], "S")
