"""The prompt texts of the summarizer — pi_nb's own wording, editable per call.

A :class:`PromptSet` is immutable; make a variant with :func:`dataclasses.replace` and pass
it to ``compact(..., prompts=...)``. Nothing is changed globally. The history prompts ask
for six sections (Goal; Constraints & Preferences; Progress with Done / In Progress /
Blocked; Key Decisions; Next Steps; Critical Context); the turn-prefix prompt for three
(Original Request; Progress So Far; Context Needed to Continue).

How a request is laid out (see :mod:`pi_nb.compaction.summarize`): one system message
(``system``) and one user message::

    <conversation>
    …serialized messages…
    </conversation>

    <previous-summary>          (only when updating)
    …
    </previous-summary>

    <instructions: initial | update | turn_prefix | branch>

    Additional focus: …         (only with a focus)
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

# One list of the headings: the extractive summarizer (a lower layer) writes the same format.
from ..models.extractive import SUMMARY_SECTIONS

__all__ = ["DEFAULT_PROMPTS", "SUMMARY_SECTIONS", "TURN_PREFIX_SECTIONS", "PromptSet"]

#: Headings of a turn-prefix summary.
TURN_PREFIX_SECTIONS = ("Original Request", "Progress So Far", "Context Needed to Continue")

_SYSTEM = (
    "You condense conversations between a user and an AI assistant into structured notes. "
    "Reply with the notes only: do not continue the conversation, do not answer questions "
    "asked in it, do not call tools."
)

_LAYOUT = """## Goal
What the user wants to achieve (several goals are fine).

## Constraints & Preferences
- Requirements and preferences the user stated, or "(none)".

## Progress
### Done
- [x] Finished work.
### In Progress
- [ ] Work under way.
### Blocked
- Open problems, or "(none)".

## Key Decisions
- **Decision**: why it was made.

## Next Steps
1. What to do next, in order.

## Critical Context
- Exact paths, names, values and error messages needed to go on, or "(none)"."""

_INITIAL = f"""Write notes on the conversation above so that another model can take over the \
work from them alone. Use exactly these sections:

{_LAYOUT}

Be brief. Copy file paths, identifiers and error messages exactly."""

_UPDATE = f"""The conversation above continues the work described in <previous-summary>. \
Rewrite those notes so they also cover the new messages: keep every earlier point that \
still matters, add new progress and decisions, move finished items to Done, and refresh \
Next Steps. Use exactly these sections:

{_LAYOUT}

Be brief. Copy file paths, identifiers and error messages exactly."""

_TURN_PREFIX = """The conversation above is the opening part of one long turn; the rest of \
that turn is kept verbatim after your notes. Record what the later messages need, using \
these sections:

## Original Request
What the user asked for in this turn.

## Progress So Far
- Work done and decisions made in these messages.

## Context Needed to Continue
- Facts from these messages that the rest of the turn relies on.

Only use what the messages above contain; do not guess what comes after them."""

_BRANCH = f"""The conversation above is a branch the user has now left. Write notes on it \
so the work there can be picked up again later. Use exactly these sections:

{_LAYOUT}

Be brief. Copy file paths, identifiers and error messages exactly."""

_BRANCH_PREAMBLE = (
    "The user left the branch below and came back to this point. "
    "Notes on what happened on that branch:\n\n"
)


@dataclass(frozen=True)
class PromptSet:
    """The texts of every summarization request.

    Attributes:
        system: the system message of every summary call.
        initial: instructions for a first history summary.
        update: instructions for merging new history into ``<previous-summary>`` (also
            used to fold later chunks when a request does not fit the model's window).
        turn_prefix: instructions for the opening part of a split turn.
        branch: instructions for summarizing an abandoned branch.
        branch_preamble: text put in front of a branch summary in the session.
    """

    system: str = _SYSTEM
    initial: str = _INITIAL
    update: str = _UPDATE
    turn_prefix: str = _TURN_PREFIX
    branch: str = _BRANCH
    branch_preamble: str = _BRANCH_PREAMBLE

    def to_dict(self) -> dict[str, str]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PromptSet:
        """From a dict with any subset of the fields (the rest stay default)."""
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown prompt fields {sorted(unknown)}; known: {sorted(known)}")
        return cls(**data)


#: The prompts pi_nb uses unless told otherwise.
DEFAULT_PROMPTS = PromptSet()
