"""What a compaction summarizes and what it keeps (Pi 1.3's ``prepareCompaction``).

Works on the projection of the branch: the previous compaction is projected first, so its
kept tail is summarized again together with the previous summary (an *update*). Also
collects file operations (files read / modified) from tool calls, so the summary can list
them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..entries import Entry, Message
from ..projection import ProjectedEntry, build_session_projection
from ..tokens import estimate_projected_context_tokens
from .cut import CutPoint, find_cut_point
from .settings import CompactionSettings

__all__ = [
    "FILE_TOOL_MAPPINGS",
    "IMPORT_ORIGIN",
    "CompactionPreparation",
    "FileOps",
    "cut_command",
    "file_ops_from_message",
    "file_tools_of",
    "format_file_operations",
    "js_sorted",
    "prepare_compaction",
]


def js_sorted(items: Iterable[str]) -> list[str]:
    """Sorted like JavaScript's default ``Array.prototype.sort`` (by UTF-16 code units)."""
    return sorted(items, key=lambda s: s.encode("utf-16-be", "surrogatepass"))


# tool name -> (FileOps set, argument holding the path). Pi counts only these.
_PI_FILE_TOOLS: dict[str, tuple[str, str]] = {
    "read": ("read", "path"),
    "write": ("written", "path"),
    "edit": ("edited", "path"),
}
_CLAUDE_CODE_FILE_TOOLS: dict[str, tuple[str, str]] = {
    **_PI_FILE_TOOLS,  # a session continued in pi_nb after the import
    "Read": ("read", "file_path"),
    "Write": ("written", "file_path"),
    "Edit": ("edited", "file_path"),
    "MultiEdit": ("edited", "file_path"),
    "NotebookEdit": ("edited", "notebook_path"),
}
#: Which tool calls count in compaction file lists: ``"pi"`` (Pi's read / write / edit with
#: ``path``, exactly Pi's lists) for every Pi session; the mapping of the agent a tree was
#: imported from (Claude Code's Read / Write / Edit / MultiEdit / NotebookEdit, Codex's
#: ``apply_patch`` patches) only for trees an importer marked (see :data:`IMPORT_ORIGIN`).
FILE_TOOL_MAPPINGS: dict[str, dict[str, tuple[str, str]]] = {
    "pi": _PI_FILE_TOOLS,
    "claude-code": _CLAUDE_CODE_FILE_TOOLS,
    "codex": {**_PI_FILE_TOOLS, "apply_patch": ("patch", "input")},
}
#: customType of the first entry an importer writes (``data.fileTools`` names the mapping);
#: every root of the imported tree hangs under it, so every branch starts with it.
IMPORT_ORIGIN = "import:origin"
_PATCH_MARKERS = (
    ("*** Add File:", "written"),
    ("*** Update File:", "edited"),
    ("*** Delete File:", "edited"),
    ("*** Move to:", "written"),
)


def file_tools_of(branch: Sequence[Entry]) -> str:
    """The file-tool mapping of a branch: the one its import origin entry names, else
    ``"pi"``."""
    first = branch[0] if branch else None
    if first is None or first.get("type") != "custom" or first.get("customType") != IMPORT_ORIGIN:
        return "pi"
    data = first.get("data")
    name = data.get("fileTools") if isinstance(data, Mapping) else None
    return name if isinstance(name, str) and name in FILE_TOOL_MAPPINGS else "pi"


@dataclass
class FileOps:
    """Files touched by tool calls: ``read``, ``written`` and ``edited`` path sets.

    ``tools`` names the mapping of :data:`FILE_TOOL_MAPPINGS` that decides which calls
    count (``"pi"``: Pi's own rule)."""

    read: set[str] = field(default_factory=set)
    written: set[str] = field(default_factory=set)
    edited: set[str] = field(default_factory=set)
    tools: str = "pi"

    def add_call(self, tool_name: Any, arguments: Any) -> None:
        """Record one tool call the mapping knows (Pi: ``read`` / ``write`` / ``edit`` with
        a string ``path``)."""
        if not isinstance(arguments, Mapping) or not isinstance(tool_name, str):
            return
        known = FILE_TOOL_MAPPINGS.get(self.tools, _PI_FILE_TOOLS).get(tool_name)
        if known is None:
            return
        kind, key = known
        if kind == "patch":
            self._add_patch(arguments.get(key))
            return
        path = arguments.get(key)
        if isinstance(path, str) and path:
            getattr(self, kind).add(path)

    def _add_patch(self, patch: Any) -> None:
        """Files named by a Codex patch (``*** Add File:`` is written, the rest edited)."""
        if not isinstance(patch, str):
            return
        for line in patch.splitlines():
            for marker, kind in _PATCH_MARKERS:
                if line.startswith(marker):
                    path = line[len(marker) :].strip()
                    if path:
                        getattr(self, kind).add(path)
                    break

    def add_details(self, details: Any) -> None:
        """Carry the lists of an earlier summary's ``details`` (modified counts as edited)."""
        if not isinstance(details, Mapping):
            return
        read, modified = details.get("readFiles"), details.get("modifiedFiles")
        if isinstance(read, list):
            self.read.update(f for f in read if isinstance(f, str))
        if isinstance(modified, list):
            self.edited.update(f for f in modified if isinstance(f, str))

    @property
    def modified_files(self) -> list[str]:
        """sorted(edited ∪ written)."""
        return js_sorted(self.edited | self.written)

    @property
    def read_files(self) -> list[str]:
        """sorted(read − modified): files only read."""
        return js_sorted(self.read - self.edited - self.written)

    def details(self) -> dict[str, Any]:
        """``{"readFiles": [...], "modifiedFiles": [...]}`` as Pi stores them (plus
        ``fileTools`` when an imported tree's mapping made the lists)."""
        out: dict[str, Any] = {"readFiles": self.read_files, "modifiedFiles": self.modified_files}
        if self.tools != "pi":
            out["fileTools"] = self.tools
        return out


def format_file_operations(read_files: Sequence[str], modified_files: Sequence[str]) -> str:
    """The file lists appended to a summary: ``<read-files>`` / ``<modified-files>`` blocks
    (one path per line; empty lists omitted), after a blank line; "" when both are empty."""
    sections = []
    if read_files:
        sections.append("<read-files>\n" + "\n".join(read_files) + "\n</read-files>")
    if modified_files:
        sections.append("<modified-files>\n" + "\n".join(modified_files) + "\n</modified-files>")
    return "\n\n" + "\n\n".join(sections) if sections else ""


def file_ops_from_message(message: Message, ops: FileOps) -> None:
    """Add the file operations of an assistant's tool calls or a tool result's nested calls."""
    role = message.get("role")
    if role == "toolResult":
        nested = message.get("nestedCalls")
        calls = nested.get("calls") if isinstance(nested, Mapping) else None
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, Mapping):
                ops.add_call(call.get("name"), call.get("arguments"))
        return
    if role != "assistant" or not isinstance(message.get("content"), list):
        return
    for block in message["content"]:
        if (
            isinstance(block, Mapping)
            and block.get("type") == "toolCall"
            and "arguments" in block
            and "name" in block
        ):
            ops.add_call(block.get("name"), block.get("arguments"))


@dataclass
class CompactionPreparation:
    """Everything a compaction needs, computed without calling a model.

    Attributes:
        first_kept_entry_id: the first entry kept verbatim after the summary.
        messages_to_summarize: history messages (before the cut, or before the split turn).
        turn_prefix_messages: the part of a split turn before the cut (else empty).
        is_split_turn: the cut lands inside a turn.
        tokens_before: projected context estimate before compacting.
        previous_summary: the summary of the compaction being updated, if any.
        file_ops: files read / written / edited (carried from the previous compaction too).
        settings: the settings used.
        branch_entries: the branch root→leaf the preparation was made from.
        cut: the raw cut result (indices into ``projected``).
        projected: the projected entries of the branch.
        context_messages: the projection's messages before compacting (the "before" side
            of :func:`~pi_nb.compaction.compact.context_change`).
    """

    first_kept_entry_id: str
    messages_to_summarize: list[Message]
    turn_prefix_messages: list[Message]
    is_split_turn: bool
    tokens_before: int
    previous_summary: str | None
    file_ops: FileOps
    settings: CompactionSettings
    branch_entries: list[Entry]
    cut: CutPoint | None = None
    projected: list[ProjectedEntry] = field(default_factory=list, repr=False)
    context_messages: list[Message] = field(default_factory=list, repr=False)

    @property
    def read_files(self) -> list[str]:
        return self.file_ops.read_files

    @property
    def modified_files(self) -> list[str]:
        return self.file_ops.modified_files

    def to_dict(self) -> dict[str, Any]:
        """The ``pi-nb cut --json`` shape (counts instead of messages; ``fileTools`` only
        when the file lists use an imported tree's tool mapping, so a Pi session's document
        is Pi's)."""
        out: dict[str, Any] = {
            "firstKeptEntryId": self.first_kept_entry_id,
            "isSplitTurn": self.is_split_turn,
            "tokensBefore": self.tokens_before,
            "messagesToSummarize": len(self.messages_to_summarize),
            "turnPrefixMessages": len(self.turn_prefix_messages),
            "previousSummary": self.previous_summary is not None,
            "readFiles": self.read_files,
            "modifiedFiles": self.modified_files,
        }
        if self.file_ops.tools != "pi":
            out["fileTools"] = self.file_ops.tools
        return out


def _summary_inputs(entries: Sequence[ProjectedEntry]) -> list[Message]:
    """Messages a summary reads: no compaction summaries, no system (prompt) messages."""
    out: list[Message] = []
    for pe in entries:
        if pe.entry.get("type") == "compaction":
            continue
        out.extend(m for m in pe.messages if m.get("role") != "system")
    return out


def prepare_compaction(
    branch_entries: Sequence[Entry], settings: CompactionSettings | None = None
) -> CompactionPreparation | None:
    """Plan a compaction of a branch (entries root→leaf), as Pi 1.3 does.

    Returns None when the last entry already is a compaction, or when there is nothing to
    summarize (everything fits in ``keep_recent_tokens``, or the branch is empty).
    """
    settings = settings or CompactionSettings()
    branch = list(branch_entries)
    if branch and branch[-1].get("type") == "compaction":
        return None
    projection = build_session_projection(branch)
    projected = projection.entries

    previous_index = next(
        (
            i
            for i, pe in enumerate(projected)
            if pe.entry.get("type") == "compaction" and pe.messages
        ),
        -1,
    )
    previous_summary: str | None = None
    start = 0
    if previous_index >= 0:
        summary = projected[previous_index].entry.get("summary")
        previous_summary = summary if isinstance(summary, str) else None
        start = previous_index + 1
    end = len(projected)

    tokens_before = estimate_projected_context_tokens(projection, branch).tokens
    cut = find_cut_point(projected, start, end, settings.keep_recent_tokens)
    if cut.first_kept_index >= len(projected):
        return None
    first_kept_id = projected[cut.first_kept_index].entry.get("id")
    if not first_kept_id:
        return None

    history_end = cut.turn_start_index if cut.is_split_turn else cut.first_kept_index
    to_summarize = _summary_inputs(projected[start:history_end])
    turn_prefix = (
        _summary_inputs(projected[cut.turn_start_index : cut.first_kept_index])
        if cut.is_split_turn
        else []
    )
    if not to_summarize and not turn_prefix:
        return None

    ops = FileOps(tools=file_tools_of(branch))
    if previous_index >= 0:
        previous = projected[previous_index].entry
        if not previous.get("fromHook"):
            ops.add_details(previous.get("details"))
    for message in to_summarize:
        file_ops_from_message(message, ops)
    for message in turn_prefix:
        file_ops_from_message(message, ops)

    return CompactionPreparation(
        first_kept_entry_id=first_kept_id,
        messages_to_summarize=to_summarize,
        turn_prefix_messages=turn_prefix,
        is_split_turn=cut.is_split_turn,
        tokens_before=tokens_before,
        previous_summary=previous_summary,
        file_ops=ops,
        settings=settings,
        branch_entries=branch,
        cut=cut,
        projected=list(projected),
        context_messages=list(projection.messages),
    )


def cut_command(
    path: str | os.PathLike[str],
    leaf: str | None = None,
    keep: int | None = None,
    reserve: int | None = None,
) -> dict[str, Any]:
    """``pi-nb cut FILE [--leaf ID] [--keep N] [--reserve N] --json``: the planned cut.

    Returns :meth:`CompactionPreparation.to_dict` or ``{"nothingToCompact": True}``.
    Raises ``EntryNotFoundError`` for an unknown ``leaf``.
    """
    from ..session.tree import SessionTree

    tree = SessionTree.open(path)
    if leaf is not None:
        tree.branch(leaf)
    return planned_cut(tree, keep=keep, reserve=reserve)


def planned_cut(tree: Any, keep: int | None = None, reserve: int | None = None) -> dict[str, Any]:
    """The cut a compaction would make now on ``tree``'s current branch, as
    :func:`cut_command` reports it (defaults: Pi's keep 20000 / reserve 16384)."""
    settings = CompactionSettings(
        reserve_tokens=16384 if reserve is None else reserve,
        keep_recent_tokens=20000 if keep is None else keep,
    )
    preparation = prepare_compaction(tree.get_branch(), settings)
    if preparation is None:
        return {"nothingToCompact": True}
    return preparation.to_dict()
