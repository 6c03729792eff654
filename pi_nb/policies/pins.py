"""Protected facts: pins that survive every compaction.

A *pin* is either a free-text fact ("Money is always Decimal, never float") or a whole message
of the session (by entry id). Pins are stored in the session file as ``custom`` entries —
``customType`` :data:`PIN_TYPE` / :data:`UNPIN_TYPE` — which Pi 1.3 never puts in the model's
context, so a file with pins opens in Pi and projects exactly as in pi_nb. The active pins are
reconstructed from the current branch (pins made on another branch do not apply).

:class:`PinPolicy` is a ``session_before_compact`` handler (installed with
:meth:`~pi_nb.hooks.Hooks.on`, nothing else). When the branch has pins it makes the compaction
itself and returns it as ``{"compaction": ...}`` (so the entry has ``fromHook: true``):

1. it runs the default summarization (Pi's prompts, the same cut) — or a summarizer you
   supply, which it wraps;
2. **pinned messages** that fall in the summarized range are re-injected *verbatim* after the
   summary, in a ``## Pinned messages`` section of the summary text. Pi 1.3 projects a
   compaction as one ``compactionSummary`` message built from ``summary``, so anything in the
   summary text reaches the model identically in Pi and pi_nb. (Moving ``firstKeptEntryId``
   back to the pinned message instead would keep *everything* after it — the context could
   never shrink below an old pin — and the cut would have to obey Pi's turn rules.) Pinned
   messages still in the kept range are already verbatim and are left alone;
3. each **pinned fact** is checked in the produced summary (case, punctuation and spacing
   folded, see :func:`fact_in`); missing ones are restored — appended under ``## Pinned
   facts`` (default), or first asked for in a second, focused summary call
   (``restore="focused"``) and appended only if still missing;
4. what it did goes into the compaction's ``details["pins"]`` (facts present, restored,
   messages re-injected) next to Pi's ``readFiles`` / ``modifiedFiles``, and into
   :attr:`PinPolicy.outcomes`.

Pinned sections are rebuilt from the pins at every compaction (any copy the summarizer made of
an earlier one is removed first), so an unpinned fact stops being restored at once.

Python API: :func:`pin`, :func:`unpin`, :func:`pins`, :func:`enable_pins`.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

from ..entries import Entry, Message, js_stringify
from ..hooks import SESSION_BEFORE_COMPACT, Event
from ..messages import content_text
from ._base import HookedPolicy, check_choice, custom_entries, tree_of

if TYPE_CHECKING:
    from ..compaction import CompactionPreparation, PromptSet
    from ._base import PolicySession, SessionOrTree

__all__ = [
    "PINNED_FACTS_HEADING",
    "PINNED_MESSAGES_HEADING",
    "PIN_TYPE",
    "UNPIN_TYPE",
    "Pin",
    "PinOutcome",
    "PinPolicy",
    "default_compaction",
    "disable_pins",
    "enable_pins",
    "fact_in",
    "normalize_fact",
    "pin",
    "pins",
    "pins_from_entries",
    "render_pinned_message",
    "strip_pinned_sections",
    "unpin",
]

#: ``customType`` of the entry that creates a pin (``data``: {kind, text | entryId}).
PIN_TYPE = "pi_nb.pin"
#: ``customType`` of the entry that removes one (``data``: {pinId}).
UNPIN_TYPE = "pi_nb.unpin"
#: Headings of the sections the policy writes into summaries.
PINNED_FACTS_HEADING = "## Pinned facts"
PINNED_MESSAGES_HEADING = "## Pinned messages"
_FACTS_INTRO = "Facts the user pinned (authoritative; keep them in every summary):"
_MESSAGES_INTRO = "Messages the user pinned, kept verbatim:"
# Pi's separator between the history summary and a split turn's prefix summary.
_TURN_CONTEXT_RULE = "\n\n---\n\n**Turn Context (split turn):**\n\n"
_FOCUS = (
    "The user pinned the following facts. Each of them must appear in the summary word for "
    "word (under Constraints & Preferences or Critical Context):\n"
)
_PINNABLE_ROLES = ("user", "assistant", "toolResult")

Restore = Literal["append", "focused"]
#: ``summarizer(event) -> {"summary", "firstKeptEntryId"?, "tokensBefore"?, "details"?,
#: "usage"?, "calls"?}`` — what a ``session_before_compact`` hook would return.
Summarizer = Callable[[Event], Mapping[str, Any]]


# --- pins in the session -------------------------------------------------------------------------


@dataclass(frozen=True)
class Pin:
    """One active pin.

    Attributes:
        id: the id of the ``custom`` entry that created it (used by :func:`unpin`).
        kind: ``"fact"`` (free text) or ``"message"`` (an entry, kept verbatim).
        text: the fact (kind ``"fact"``).
        entry_id: the pinned message's entry (kind ``"message"``).
        timestamp: when it was pinned (ISO).
    """

    id: str
    kind: Literal["fact", "message"]
    text: str | None = None
    entry_id: str | None = None
    timestamp: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "kind": self.kind}
        if self.text is not None:
            out["text"] = self.text
        if self.entry_id is not None:
            out["entryId"] = self.entry_id
        return out

    def __str__(self) -> str:
        what = self.text if self.kind == "fact" else f"message {self.entry_id}"
        return f"[{self.id}] {what}"


def pins_from_entries(entries: Iterable[Entry]) -> list[Pin]:
    """The pins active at the end of ``entries`` (a branch, root→leaf), oldest first."""
    active: dict[str, Pin] = {}
    for entry in custom_entries(entries, PIN_TYPE, UNPIN_TYPE):
        data = entry.get("data")
        if not isinstance(data, Mapping):
            continue
        if entry.get("customType") == PIN_TYPE:
            pin_kind = data.get("kind")
            text, target = data.get("text"), data.get("entryId")
            if pin_kind == "fact" and isinstance(text, str) and text.strip():
                active[entry["id"]] = Pin(
                    entry["id"], "fact", text=text, timestamp=entry.get("timestamp")
                )
            elif pin_kind == "message" and isinstance(target, str):
                active[entry["id"]] = Pin(
                    entry["id"], "message", entry_id=target, timestamp=entry.get("timestamp")
                )
        elif isinstance(data.get("pinId"), str):  # an unpin
            active.pop(data["pinId"], None)
    return list(active.values())


def pins(session: SessionOrTree) -> list[Pin]:
    """The pins active on the current branch of ``session`` (a Session or SessionTree)."""
    return pins_from_entries(tree_of(session).get_branch())


def _resolve(session: SessionOrTree, target: str) -> str:
    resolve = getattr(session, "resolve", None)
    if callable(resolve):
        return str(resolve(target))
    tree = tree_of(session)
    if target in tree:
        return target
    found = tree.find_label(target)
    if found is None:
        raise KeyError(f"Entry {target} not found (no entry or label with that name)")
    return found


def pin(session: SessionOrTree, text: str | None = None, entry_id: str | None = None) -> Pin:
    """Pin a fact (``text``) or a message (``entry_id``, an id or a label).

    The pin is appended to the session as a ``custom`` entry (Pi ignores it). Pinning the same
    fact or message twice returns the existing pin.

    Raises:
        ValueError: neither or both of ``text`` / ``entry_id``; an empty fact; an entry that
            is not a message the model sees (user / assistant / tool result / custom message)
            or not on the current branch.
    """
    if (text is None) == (entry_id is None):
        raise ValueError("pin() needs exactly one of text= or entry_id=")
    tree = tree_of(session)
    current = pins(tree)
    if text is not None:
        fact = " ".join(str(text).split())
        if not fact:
            raise ValueError("cannot pin an empty fact")
        for existing in current:
            if existing.kind == "fact" and normalize_fact(existing.text or "") == normalize_fact(
                fact
            ):
                return existing
        entry = tree.append_custom(PIN_TYPE, {"kind": "fact", "text": fact})
        return Pin(entry["id"], "fact", text=fact, timestamp=entry.get("timestamp"))
    assert entry_id is not None
    target_id = _resolve(session, entry_id)
    target = tree.entry(target_id)
    kind = target.get("type")
    message = target.get("message") if kind == "message" else None
    role = message.get("role") if isinstance(message, Mapping) else None
    if not (kind == "custom_message" or role in _PINNABLE_ROLES):
        raise ValueError(f"Entry {target_id} is not a message the model sees; it cannot be pinned")
    if not any(e["id"] == target_id for e in tree.get_branch()):
        raise ValueError(f"Entry {target_id} is not on the current branch")
    for existing in current:
        if existing.kind == "message" and existing.entry_id == target_id:
            return existing
    entry = tree.append_custom(PIN_TYPE, {"kind": "message", "entryId": target_id})
    return Pin(entry["id"], "message", entry_id=target_id, timestamp=entry.get("timestamp"))


def unpin(session: SessionOrTree, pin_id: str) -> Pin:
    """Remove a pin, by its id (or by the entry id of a pinned message, or the fact's text).

    Appends a ``custom`` :data:`UNPIN_TYPE` entry; returns the pin removed.

    Raises:
        KeyError: no active pin matches.
    """
    tree = tree_of(session)
    current = pins(tree)
    match = next((p for p in current if p.id == pin_id), None)
    if match is None:
        match = next((p for p in current if p.kind == "message" and p.entry_id == pin_id), None)
    if match is None:
        wanted = normalize_fact(pin_id)
        match = next(
            (p for p in current if p.kind == "fact" and normalize_fact(p.text or "") == wanted),
            None,
        )
    if match is None:
        raise KeyError(f"no active pin {pin_id!r}")
    tree.append_custom(UNPIN_TYPE, {"pinId": match.id})
    return match


# --- matching facts ------------------------------------------------------------------------------


def normalize_fact(text: str) -> str:
    """Case, accents, punctuation and spacing folded: what :func:`fact_in` compares."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    folded = folded.replace("’", "'").replace("'", "")
    return " ".join(re.sub(r"[^\w]+", " ", folded).split())


def fact_in(fact: str, text: str) -> bool:
    """True when ``fact`` occurs in ``text`` once both are normalized (:func:`normalize_fact`)."""
    wanted = normalize_fact(fact)
    return bool(wanted) and f" {wanted} " in f" {normalize_fact(text)} "


# --- summary text --------------------------------------------------------------------------------


_PINNED_BLOCK = re.compile(r"<pinned-message\b[^>]*>.*?</pinned-message>\s*", re.S)
_FILE_LISTS = re.compile(
    r"(?:\n\n<(?:read-files|modified-files)>\n.*?\n</(?:read-files|modified-files)>)+\s*\Z", re.S
)


def strip_pinned_sections(summary: str) -> str:
    """``summary`` without the ``## Pinned …`` sections (and ``<pinned-message>`` blocks)
    an earlier compaction of this policy wrote (a summarizer may copy them)."""
    has_section = any(
        line.strip() in (PINNED_FACTS_HEADING, PINNED_MESSAGES_HEADING)
        for line in summary.split("\n")
    )
    if not has_section and not _PINNED_BLOCK.search(summary):
        return summary
    text = _PINNED_BLOCK.sub("", summary)
    lines = text.split("\n")
    out: list[str] = []
    skipping = False
    for line in lines:
        stripped = line.strip()
        if stripped in (PINNED_FACTS_HEADING, PINNED_MESSAGES_HEADING):
            skipping = True
            continue
        if skipping and (
            stripped.startswith("## ")
            or stripped.startswith("<read-files>")
            or stripped.startswith("<modified-files>")
            or re.fullmatch(r"-{3,}", stripped)
        ):
            skipping = False
        if not skipping:
            out.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip("\n")


def _split_file_lists(summary: str) -> tuple[str, str]:
    """(summary body, trailing ``<read-files>`` / ``<modified-files>`` blocks)."""
    match = _FILE_LISTS.search(summary)
    if match is None:
        return summary.rstrip(), ""
    return summary[: match.start()].rstrip(), match.group(0).rstrip()


def render_pinned_message(entry: Entry) -> str:
    """A pinned entry as a ``<pinned-message>`` block: its text exactly as written (tool calls
    as ``name(arguments-json)`` lines), not truncated."""
    from ..projection import entry_messages

    parts: list[str] = []
    role = "message"
    for message in entry_messages(entry):
        role = str(message.get("role") or role)
        parts.append(_message_text(message))
    if entry.get("type") == "custom_message":
        role = f"custom:{entry.get('customType')}"
    attrs = f'entry="{html.escape(str(entry.get("id")))}" role="{html.escape(role)}"'
    message = entry.get("message") if isinstance(entry.get("message"), Mapping) else {}
    if message.get("role") == "toolResult" and message.get("toolName"):
        attrs += f' tool="{html.escape(str(message["toolName"]))}"'
    body = "\n".join(p for p in parts if p)
    return f"<pinned-message {attrs}>\n{body}\n</pinned-message>"


def _message_text(message: Message) -> str:
    content = message.get("content")
    if message.get("role") != "assistant" or not isinstance(content, list):
        return content_text(content, "\n")
    lines = []
    for block in content:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text" and block.get("text"):
            lines.append(str(block["text"]))
        elif block.get("type") == "toolCall":
            lines.append(f"{block.get('name', '')}({js_stringify(block.get('arguments', {}))})")
    return "\n".join(lines)


# --- the default summarization -------------------------------------------------------------------


def _carried_file_ops(preparation: CompactionPreparation, branch: Sequence[Entry]) -> Any:
    """The preparation's file operations, plus the lists of the previous compaction when this
    policy made it (Pi ignores a hook compaction's details; ours have the same lists)."""
    from ..compaction import FileOps

    ops = FileOps(
        set(preparation.file_ops.read),
        set(preparation.file_ops.written),
        set(preparation.file_ops.edited),
        tools=preparation.file_ops.tools,
    )
    previous = next((e for e in reversed(branch) if e.get("type") == "compaction"), None)
    details = previous.get("details") if previous is not None else None
    if (
        previous is not None
        and previous.get("fromHook")
        and isinstance(details, Mapping)
        and "pins" in details
    ):
        ops.add_details(details)
    return ops


def default_compaction(
    event: Mapping[str, Any],
    *,
    model: str,
    prompts: PromptSet | None = None,
    window: int | None = None,
    completion: Callable[..., Message] | None = None,
) -> dict[str, Any]:
    """Pi's summarization for a ``session_before_compact`` payload, through public functions:
    the history summary (updating the previous one), the split turn's prefix summary, then the
    file lists — the result :func:`pi_nb.compaction.compact` would have written.

    Returns ``{"summary", "firstKeptEntryId", "tokensBefore", "details", "usage", "calls"}``.
    """
    from ..compaction import format_file_operations, generate_summary
    from ..compaction.compact import NO_PRIOR_HISTORY
    from ..compaction.summarize import combine_usage

    preparation: CompactionPreparation = event["preparation"]
    focus = event.get("custom_instructions")
    reserve = preparation.settings.reserve_tokens
    common: dict[str, Any] = {
        "reserve_tokens": reserve,
        "prompts": prompts,
        "window": window,
        "completion": completion,
        # The same allowance as the built-in compaction (tiny local models hit the cap).
        "accept_truncated": preparation.settings.accept_truncated,
        "pi_release": preparation.settings.pi_release,  # budget rule, turn-prefix focus
    }
    results = []
    history: str | None = None
    if preparation.messages_to_summarize or not preparation.turn_prefix_messages:
        done = generate_summary(
            preparation.messages_to_summarize,
            model,
            previous_summary=preparation.previous_summary,
            focus=focus,
            kind="history",
            **common,
        )
        results.append(done)
        history = done.text
    if preparation.is_split_turn and preparation.turn_prefix_messages:
        if history is None:
            previous = preparation.previous_summary
            history = previous if previous is not None else NO_PRIOR_HISTORY
        prefix = generate_summary(
            preparation.turn_prefix_messages, model, kind="turn_prefix", focus=focus, **common
        )
        results.append(prefix)
        summary = history + _TURN_CONTEXT_RULE + prefix.text
    else:
        summary = history or ""
    ops = _carried_file_ops(preparation, event.get("branch_entries") or [])
    details = ops.details()
    summary += format_file_operations(details["readFiles"], details["modifiedFiles"])
    return {
        "summary": summary,
        "firstKeptEntryId": preparation.first_kept_entry_id,
        "tokensBefore": preparation.tokens_before,
        "details": details,
        "usage": combine_usage(*(r.usage for r in results)),
        "calls": sum(r.calls for r in results),
    }


# --- the policy ----------------------------------------------------------------------------------


@dataclass
class PinOutcome:
    """What :class:`PinPolicy` did at one compaction.

    Attributes:
        facts: the pinned facts checked.
        present: facts the summarizer kept on its own.
        restored: facts the policy had to restore (``how``: ``"appended"`` or ``"focused"``).
        verbatim: pinned messages re-injected verbatim (they were in the summarized range).
        kept: pinned messages left alone (still in the kept range).
        missing: pinned messages whose entry is not on the branch.
        calls: summary model calls made (focused retries included).
        summary: the summary written.
    """

    facts: list[Pin] = field(default_factory=list)
    present: list[Pin] = field(default_factory=list)
    restored: list[dict[str, Any]] = field(default_factory=list)
    verbatim: list[Pin] = field(default_factory=list)
    kept: list[Pin] = field(default_factory=list)
    missing: list[Pin] = field(default_factory=list)
    calls: int = 0
    summary: str = ""

    def to_details(self) -> dict[str, Any]:
        """The ``details["pins"]`` record written into the compaction entry."""
        return {
            "policy": "pi_nb.pins/1",
            "facts": [p.to_dict() for p in self.facts],
            "present": [p.id for p in self.present],
            "restored": list(self.restored),
            "verbatim": [{"id": p.id, "entryId": p.entry_id} for p in self.verbatim],
            "kept": [{"id": p.id, "entryId": p.entry_id} for p in self.kept],
            "missing": [{"id": p.id, "entryId": p.entry_id} for p in self.missing],
        }


@dataclass(eq=False, repr=False, kw_only=True)
class PinPolicy(HookedPolicy):
    """The ``session_before_compact`` handler that keeps pins through compactions.

    Args:
        session: a Session to take the summarizer's model, prompts, window and model kwargs
            from (read at each compaction, so a model switch is followed); optional when
            ``model`` is given.
        model / prompts / window / completion: the summarizer (override the session's; a
            payload that carries ``model`` / ``prompts`` / ``window`` / ``completion`` wins
            over both).
        summarizer: replaces the default summarization: ``summarizer(event)`` returns the
            compaction dict a hook would return (``summary`` at least); pins are applied on
            top of it.
        restore: ``"append"`` (default) appends missing facts under ``## Pinned facts``;
            ``"focused"`` first makes one more summary call asking for them.

    Install with :meth:`install` (``hooks.on`` only) or :func:`enable_pins`. Without active
    pins on the branch the handler returns None and the default compaction runs unchanged.
    When the handler fails (a summary call refused, say) the compaction is made without
    the pins and its result carries a warning built from :attr:`failure_effect`.
    """

    kind = "pins"
    #: What a failure of this handler costs (shown in the compaction's warnings).
    failure_effect = (
        "the compaction was made WITHOUT the pins: pinned facts and messages before the cut "
        "are in the summary only if the model kept them (the next compaction applies them "
        "again)"
    )

    session: PolicySession | None = field(default=None, kw_only=False)
    model: str | None = None
    prompts: PromptSet | None = None
    window: int | None = None
    completion: Callable[..., Message] | None = None
    summarizer: Summarizer | None = None
    restore: Restore = "append"
    #: One :class:`PinOutcome` per compaction this policy made, oldest first.
    outcomes: list[PinOutcome] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        super().__init__()
        check_choice("restore", self.restore, get_args(Restore))

    def handlers(self) -> list[tuple[str, Callable[[Any], Any]]]:
        return [(SESSION_BEFORE_COMPACT, self.on_before_compact)]

    # --- the summarizer -----------------------------------------------------------------------

    def _setting(self, event: Mapping[str, Any], name: str) -> Any:
        value = event.get(name)
        if value is None:
            value = getattr(self, name)
        if value is None and self.session is not None:
            value = getattr(self.session, name, None)
        return value

    def _completion(self, event: Mapping[str, Any], model: str) -> Callable[..., Message] | None:
        completion = event.get("completion") or self.completion
        if completion is not None or self.session is None:
            return completion
        kwargs = dict(getattr(self.session, "llm_kwargs", {}) or {})

        def call(name: str, messages: Sequence[dict[str, Any]], **options: Any) -> Message:
            from ..llm import call_options, complete

            return complete(name, messages, **call_options(kwargs, **{"stream": False, **options}))

        return call

    def summarize(self, event: Event) -> dict[str, Any]:
        """The base compaction (before pins): the supplied summarizer, or the default."""
        if self.summarizer is not None:
            return dict(self.summarizer(event))
        model = self._setting(event, "model")
        if not model:
            raise ValueError("PinPolicy needs a model (pass model= or a session)")
        return default_compaction(
            event,
            model=model,
            prompts=self._setting(event, "prompts"),
            window=self._setting(event, "window"),
            completion=self._completion(event, model),
        )

    # --- the handler --------------------------------------------------------------------------

    def on_before_compact(self, event: Event) -> dict[str, Any] | None:
        """``session_before_compact``: make the compaction with every pin preserved."""
        branch: list[Entry] = list(event.get("branch_entries") or [])
        preparation: CompactionPreparation = event["preparation"]
        active = pins_from_entries(branch)
        previous = next((e for e in reversed(branch) if e.get("type") == "compaction"), None)
        ours_before = bool(
            previous is not None
            and previous.get("fromHook")
            and isinstance(previous.get("details"), Mapping)
            and "pins" in previous["details"]
        )
        if not active and not ours_before:
            return None  # nothing to protect: Pi's default compaction, unchanged

        base = self.summarize(event)
        outcome = PinOutcome(calls=int(base.get("calls") or 0))
        usage = base.get("usage")
        body, file_lists = _split_file_lists(strip_pinned_sections(str(base.get("summary", ""))))
        first_kept = base.get("firstKeptEntryId") or preparation.first_kept_entry_id

        facts = [p for p in active if p.kind == "fact"]
        outcome.facts = facts
        missing = [p for p in facts if not fact_in(p.text or "", body)]
        outcome.present = [p for p in facts if p not in missing]
        if missing and self.restore == "focused":
            wanted = "\n".join(f"- {p.text}" for p in missing)
            extra = event.get("custom_instructions")
            focus = (f"{extra}\n\n" if extra else "") + _FOCUS + wanted
            retry = self.summarize(Event({**event, "custom_instructions": focus}))
            outcome.calls += int(retry.get("calls") or 0)
            from ..compaction.summarize import combine_usage

            usage = combine_usage(usage, retry.get("usage"))
            retry_body, retry_lists = _split_file_lists(
                strip_pinned_sections(str(retry.get("summary", "")))
            )
            recovered = [p for p in missing if fact_in(p.text or "", retry_body)]
            if recovered:
                body, file_lists = retry_body, retry_lists or file_lists
                still = [p for p in facts if not fact_in(p.text or "", body)]
                focused = [p for p in missing if p not in still]
                outcome.restored += [
                    {"id": p.id, "text": p.text, "how": "focused"} for p in focused
                ]
                outcome.present = [p for p in facts if p not in still and p not in focused]
                missing = still
        outcome.restored += [{"id": p.id, "text": p.text, "how": "appended"} for p in missing]

        sections: list[str] = []
        if missing:
            lines = "\n".join(f"- {p.text}" for p in missing)
            sections.append(f"{PINNED_FACTS_HEADING}\n{_FACTS_INTRO}\n{lines}")

        position = {e["id"]: i for i, e in enumerate(branch)}
        cut = position.get(first_kept, len(branch))
        blocks: list[str] = []
        for p in (p for p in active if p.kind == "message"):
            index = position.get(p.entry_id or "")
            if index is None:
                outcome.missing.append(p)
            elif index >= cut:
                outcome.kept.append(p)
            else:
                outcome.verbatim.append(p)
                blocks.append(render_pinned_message(branch[index]))
        if blocks:
            sections.append(
                f"{PINNED_MESSAGES_HEADING}\n{_MESSAGES_INTRO}\n\n" + "\n\n".join(blocks)
            )

        summary = body
        if sections:
            summary += "\n\n" + "\n\n".join(sections)
        summary += file_lists
        outcome.summary = summary

        details = base.get("details")
        details = dict(details) if isinstance(details, Mapping) else {}
        details["pins"] = outcome.to_details()
        compaction: dict[str, Any] = {
            "summary": summary,
            "firstKeptEntryId": first_kept,
            "tokensBefore": int(base.get("tokensBefore", preparation.tokens_before)),
            "details": details,
        }
        if usage is not None:
            compaction["usage"] = usage
        self.outcomes.append(outcome)
        return {"compaction": compaction}

    __call__ = on_before_compact

    def __repr__(self) -> str:
        return (
            f"<PinPolicy {self._state}, restore={self.restore}, {len(self.outcomes)} compactions>"
        )


def enable_pins(session: PolicySession, **options: Any) -> PinPolicy:
    """Install a :class:`PinPolicy` on ``session.hooks`` (once; the same policy is returned
    when it already is). ``options`` go to :class:`PinPolicy`."""
    return PinPolicy.enable(session, **options)


def disable_pins(session: PolicySession) -> bool:
    """Remove the policy :func:`enable_pins` installed; True if there was one. Pins stay in
    the session (and apply again once re-enabled)."""
    return PinPolicy.disable(session)
