"""Probes: facts from the span being compacted, and whether they survive.

Factory.ai's probe-based evaluation asks four kinds of questions after compression:
**recall** (specific details), **artifact** (which files were touched), **continuation** (what
was going on / what comes next) and **decision** (what was decided, and why). A fifth
category, **needed_later**, is measured instead of guessed: at a compaction point of a
session that goes on afterwards, the facts of the compacted span that the session's own
continuation uses again (:func:`needed_later_probes`, :func:`compaction_point`).

The heuristic probes are picked by the *structure* of the conversation (who said it, where,
in which kind of message) and never by trigger words, so that no summarizer can score by
using the probe extractor's own rules. This module shares no code and no word lists with
any summarizer (the extractive baseline included; a test over both modules enforces it).

=============  ==============  ===============================================================
category       kind            picked from
=============  ==============  ===============================================================
artifact       file_modified   tool calls whose arguments carry new content or a patch
artifact       file_read       tool calls with a path and no new content, shell ``cat`` / …
recall         error           tool results flagged as errors (``isError``, non-zero exit)
recall         identifier      code names the user or assistant wrote, seen in 2+ messages
recall         value           numbers written by the user or in the assistant's prose
recall         constraint      a user message's sentences after its first one (the request)
decision       decision        the longest explanatory sentence of an assistant message
continuation   task            the last user request of the span
continuation   next_step       the last sentence the assistant wrote before the cut
needed_later   file, identifier, error, value, command — from the span, used again later
=============  ==============  ===============================================================

:func:`score_probes` checks each expected fact against a text (a summary, or the whole
post-compaction context) by **exact** substring and by a **normalized** match (case and
punctuation folded; paths by their last two components; sentences by keyword coverage).
:mod:`pi_nb.research.judge` asks a model the probe questions instead (an LLM judge).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ..compaction import CompactionSettings, prepare_compaction
from ..entries import Entry, Message, js_stringify
from ..messages import as_text, content_text

if TYPE_CHECKING:
    import pandas as pd

    from ..session.tree import SessionTree

__all__ = [
    "CATEGORIES",
    "PROBE_TYPES",
    "QUESTIONS",
    "CompactionPoint",
    "Probe",
    "compacted_span",
    "compaction_point",
    "context_text",
    "extract_probes",
    "match_probe",
    "needed_later_note",
    "needed_later_probes",
    "probe_frame",
    "probe_recall",
    "recall_columns",
    "score_probes",
]

#: Factory.ai's four probe types.
PROBE_TYPES = ("recall", "artifact", "continuation", "decision")
#: Every probe category: Factory's four, then the facts the continuation used again.
CATEGORIES = (*PROBE_TYPES, "needed_later")

#: The question asked for each probe kind (the answer is never in the question).
QUESTIONS = {
    "file_modified": "Which files were created or modified so far? List their exact paths.",
    "file_read": "Which files were read or inspected so far? List their exact paths.",
    "error": "Which error messages or failures came up? Quote them exactly.",
    "identifier": "Which functions, classes, variables or other code names were involved? "
    "Give their exact names.",
    "value": "Which specific numbers or values were mentioned (limits, sizes, counts, results)?",
    "constraint": "Which requirements, constraints or preferences did the user state?",
    "decision": "Which decisions were made, and why?",
    "task": "What is the user's current request?",
    "next_step": "Where did the work stand at the end, and what was planned?",
    "file": "Which files were read, created or modified so far? List their exact paths.",
    "command": "Which shell commands were run so far? Quote them exactly.",
}
_CATEGORY = {
    "file_modified": "artifact",
    "file_read": "artifact",
    "error": "recall",
    "identifier": "recall",
    "value": "recall",
    "constraint": "recall",
    "decision": "decision",
    "task": "continuation",
    "next_step": "continuation",
}
#: Default cap per kind (the first / most frequent are kept).
LIMITS = {
    "file_modified": 12,
    "file_read": 12,
    "error": 6,
    "identifier": 8,
    "value": 8,
    "constraint": 8,
    "decision": 6,
    "task": 1,
    "next_step": 1,
}
#: Default cap per kind of needed-later probe.
NEEDED_LATER_LIMITS = {"file": 12, "identifier": 10, "error": 4, "value": 6, "command": 6}

# Tool calls are classified by the shape of their arguments (any agent's names): a path
# plus new content or a patch is a modification, a path alone under a reading tool a read.
_PATH_ARGS = ("path", "file_path", "filepath", "filename", "notebook_path", "target_file")
_CONTENT_ARGS = (
    "oldText",
    "newText",
    "old_string",
    "new_string",
    "old_str",
    "new_str",
    "edits",
    "content",
    "file_text",
    "new_source",
)
_READING_NAMES = ("read", "view", "open", "cat")
_CHANGING_NAMES = ("write", "edit", "patch", "create", "replace")
_SHELL_ARGS = ("command", "cmd")
_PAGERS = frozenset({"cat", "sed", "head", "tail", "less", "more", "nl", "bat"})
_PATCH_HEADER = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+?)\s*$", re.M)
_FILE_SUFFIX = "py|pyi|ipynb|md|rst|txt|toml|yaml|yml|json|jsonl|cfg|ini|js|ts|tsx|jsx|rs|go|sh|c|h|cpp|java|rb|html|css|sql|csv|xml|lock|log"
_FILE = re.compile(
    rf"(?<![\w/.~:-])(?:~?/)?(?:[\w.-]+/)+[\w-]+(?:\.[\w-]+)*|(?<![\w/.~:-])[\w-][\w.-]*\.(?:{_FILE_SUFFIX})(?![\w/-])"
)
# An exception name followed by its message: "NameError: name 'x' …", "KeyError: 'id'".
_RAISED = re.compile(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+:\s+\S")
_NAME = re.compile(r"`([A-Za-z_][\w.]*\w)(?:\(\))?`|(?<![\w/.-])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)")
_NUMBER = re.compile(r"(?<![\w.:/-])(?:\d+\.\d+(?:\.\d+)*|\d{2,})(?![\w/]|\.\d)")
_MARKUP = re.compile(r"</?[A-Za-z][\w-]*>")
_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
_SENTENCE_GAP = re.compile(r"(?<=[.!?])\s+(?=[^\s])|\n\s*\n|\n(?=\s*(?:[-*•#]|\d+[.)])\s)")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)]|#+)\s+")
_FILLER = frozenset(
    [
        "this",
        "these",
        "those",
        "they",
        "them",
        "their",
        "there",
        "here",
        "into",
        "onto",
        "from",
        "with",
        "been",
        "were",
        "have",
        "which",
        "what",
        "when",
        "where",
        "also",
        "just",
        "than",
        "some",
        "each",
        "every",
        "very",
        "such",
        "please",
        "would",
        "could",
        "shall",
        "might",
        "about",
        "your",
        "yours",
        "ours",
        "make",
        "made",
        "like",
    ]
)
#: Sentences shorter than this (in words) are not decisions.
_DECISION_WORDS = 12


@dataclass(frozen=True)
class Probe:
    """One fact the compacted span contained, and the question that asks for it.

    Attributes:
        id: ``"<kind>-<n>"`` (``"needed_later-<kind>-<n>"`` for needed-later probes).
        category: one of :data:`CATEGORIES`.
        kind: what was extracted (see the module table).
        fact: the expected fact, verbatim from the conversation.
        question: the question a judge model is asked.
        keywords: the fact's distinctive words (for the normalized match of sentences).
        source: index of the message it came from (in the span).
    """

    id: str
    category: str
    kind: str
    fact: str
    question: str
    keywords: tuple[str, ...] = ()
    source: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- text helpers ----------------------------------------------------------------------------


def _norm(text: str) -> str:
    """Lower case, punctuation (except path characters inside words) folded to spaces."""
    text = text.lower().replace("\\", "/")
    text = re.sub(r"[^\w./-]+", " ", text)
    text = re.sub(r"(?<!\w)[./-]+|[./-]+(?!\w)", " ", text)
    return " " + " ".join(text.split()) + " "


def _shorten(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _split_sentences(text: str) -> list[str]:
    """Sentences of prose: code fences dropped, list markers and headings stripped."""
    out = []
    for piece in _SENTENCE_GAP.split(_FENCE.sub("\n\n", text)):
        piece = " ".join(_BULLET.sub("", piece.strip()).split())
        if piece:
            out.append(piece)
    return out


def _code_like(name: str) -> bool:
    core = name.strip("_")
    return "_" in core or "." in core or re.search(r"[a-z][A-Z]|[A-Z][a-z]+[A-Z]", core) is not None


def _names(text: str) -> list[str]:
    """Code names in ``text``: backticked names, snake_case, camelCase, CamelCase, a.b."""
    text = _MARKUP.sub(" ", text)
    out = []
    for match in _NAME.finditer(text):
        ticked, bare = match.group(1), match.group(2)
        name = (ticked or bare or "").rstrip(".")
        if len(name) < 3 or _FILE.fullmatch(name) or name[0].isdigit():
            continue
        if ticked or _code_like(name):
            out.append(name)
    return out


def _keywords(sentence: str, limit: int = 8) -> tuple[str, ...]:
    """Distinctive words of a sentence: code names, paths and numbers first, then long words."""
    special = [*_names(sentence), *(m.group(0) for m in _FILE.finditer(sentence))]
    special += re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w])", sentence)
    words = [w for w in re.findall(r"[A-Za-z][A-Za-z'-]{3,}", sentence) if w.lower() not in _FILLER]
    words.sort(key=len, reverse=True)
    out: list[str] = []
    for word in [*special, *words]:
        key = _norm(word).strip()
        if key and key not in out and key not in _FILLER:
            out.append(key)
        if len(out) >= limit:
            break
    return tuple(out)


def _plain(content: Any) -> str:
    """The text of a message's content, through the shared reader (hostile files: a
    non-string text block is skipped)."""
    return content_text(content)


def _prose(message: Message) -> str:
    """The text blocks of an assistant message."""
    return _plain(message.get("content"))


def _calls(message: Message) -> list[tuple[str, dict[str, Any]]]:
    out = []
    content = message.get("content")
    for block in content if isinstance(content, list) else ():  # hostile files
        if isinstance(block, dict) and block.get("type") == "toolCall":
            args = block.get("arguments")
            out.append((as_text(block.get("name")), args if isinstance(args, dict) else {}))
    return out


def context_text(messages: Iterable[Message]) -> str:
    """All text a model would read in these messages: summaries, user / assistant text,
    tool calls (name and JSON arguments) and tool results. Thinking is left out."""
    parts: list[str] = []
    for message in messages:
        role = message.get("role")
        if role in ("compactionSummary", "branchSummary"):
            parts.append(str(message.get("summary") or ""))
        elif role == "assistant":
            parts.append(_prose(message))
            parts += [f"{name}({js_stringify(args)})" for name, args in _calls(message)]
        elif role == "bashExecution":
            parts.append(f"{message.get('command', '')}\n{message.get('output', '')}")
        elif role in ("user", "toolResult", "custom"):
            parts.append(_plain(message.get("content")))
    return "\n\n".join(p for p in parts if p)


# --- extraction ------------------------------------------------------------------------------


def _shell_command(args: Mapping[str, Any]) -> str | None:
    for key in _SHELL_ARGS:
        value = args.get(key)
        if isinstance(value, list):
            value = " ".join(str(v) for v in value)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _call_paths(name: str, args: Mapping[str, Any]) -> list[tuple[str, str]]:
    """[(kind, path)] for one tool call: file_read or file_modified."""
    lname = name.lower()
    out: list[tuple[str, str]] = []
    path = next(
        (str(args[k]) for k in _PATH_ARGS if isinstance(args.get(k), str) and args[k]), None
    )
    sub = args.get("command")
    if path and isinstance(sub, str) and " " not in sub.strip():
        # An editor tool with sub-commands (str_replace_editor view / create / str_replace).
        out.append(("file_read" if sub == "view" else "file_modified", path))
    elif path and (
        any(k in args for k in _CONTENT_ARGS) or any(w in lname for w in _CHANGING_NAMES)
    ):
        out.append(("file_modified", path))
    elif path and any(w in lname for w in _READING_NAMES):
        out.append(("file_read", path))
    for value in args.values():
        if isinstance(value, str) and "*** " in value:
            out += [("file_modified", p) for p in _PATCH_HEADER.findall(value)]
    command = _shell_command(args) if path is None else None
    if command:
        for segment in re.split(r"&&|\|\||;|\|", command):
            words = segment.replace("bash -lc", " ").strip().strip("'\"").split()
            if words and words[0] in _PAGERS:
                out += [("file_read", m.group(0)) for m in _FILE.finditer(segment)]
    return out


def _failed(message: Message) -> bool:
    if message.get("role") == "bashExecution":
        code = message.get("exitCode")
        return code is not None and code != 0
    return message.get("role") == "toolResult" and bool(message.get("isError"))


def _failure_lines(message: Message) -> list[str]:
    """The exception messages of a failed tool result (else its first line with a colon,
    else its last non-empty line), at most two, shortened."""
    if message.get("role") == "bashExecution":
        text = str(message.get("output") or "")
    else:
        text = _plain(message.get("content"))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    raised = []
    for line in lines:
        match = _RAISED.search(line)
        if match:
            raised.append(_shorten(line[match.start() :], 160))
    if raised:
        return list(dict.fromkeys(raised))[:2]
    with_colon = [line for line in lines if ": " in line]
    chosen = with_colon[:1] or lines[-1:]
    return [_shorten(line, 160) for line in chosen]


class _Found:
    """Facts per kind in first-seen order, deduplicated by their normalized text."""

    def __init__(self, kinds: Iterable[str]) -> None:
        self.items: dict[str, list[tuple[str, int, tuple[str, ...]]]] = {k: [] for k in kinds}
        self.keys: dict[str, set[str]] = {k: set() for k in self.items}

    def add(self, kind: str, fact: str, source: int, keywords: tuple[str, ...] = ()) -> None:
        fact = fact.strip()
        key = _norm(fact).strip()
        if key and key not in self.keys[kind]:
            self.keys[kind].add(key)
            self.items[kind].append((fact, source, keywords))


def _probes(found: _Found, caps: Mapping[str, int], category: str | None = None) -> list[Probe]:
    probes: list[Probe] = []
    for kind, items in found.items.items():
        for n, (fact, source, keywords) in enumerate(items[: caps.get(kind, 0)], 1):
            probes.append(
                Probe(
                    id=f"{category}-{kind}-{n}" if category else f"{kind}-{n}",
                    category=category or _CATEGORY[kind],
                    kind=kind,
                    fact=fact,
                    question=QUESTIONS[kind],
                    keywords=keywords or _keywords(fact),
                    source=source,
                )
            )
    return probes


def extract_probes(
    messages: Sequence[Message], *, limits: Mapping[str, int] | None = None
) -> list[Probe]:
    """Probes for the facts in ``messages`` (Pi AgentMessages, e.g. the compacted span).

    Deterministic: the same messages always give the same probes, in a fixed order
    (the order of the module table).
    """
    caps = {**LIMITS, **(limits or {})}
    found = _Found(_CATEGORY)
    seen_in: dict[str, list[int]] = {}  # code name -> messages it occurs in
    talked_of: set[str] = set()  # names the user or the assistant wrote (not only tool output)
    last_user: tuple[str, int] | None = None
    last_prose: tuple[str, int] | None = None
    explanations: list[tuple[str, int]] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "user":
            text = _plain(message.get("content"))
            if text.strip():
                last_user = (text, index)
            for sentence in _split_sentences(text)[1:]:
                if len(sentence.split()) >= 3:
                    found.add("constraint", _shorten(sentence), index, _keywords(sentence))
            for match in _NUMBER.finditer(text):
                found.add("value", match.group(0), index)
            names = _names(text)
        elif role == "assistant":
            for name, args in _calls(message):
                for kind, path in _call_paths(name, args):
                    found.add(kind, path, index)
            text = _prose(message)
            sentences = _split_sentences(text)
            if sentences:
                last_prose = (sentences[-1], index)
                longest = max(sentences, key=lambda s: len(s.split()))
                if len(longest.split()) >= _DECISION_WORDS:
                    explanations.append((longest, index))
            for match in _NUMBER.finditer(text):
                found.add("value", match.group(0), index)
            code = [v for _, args in _calls(message) for v in args.values() if isinstance(v, str)]
            names = _names(text) + [n for v in code if len(v) < 2000 for n in _names(v)]
        elif role in ("toolResult", "bashExecution"):
            if _failed(message):
                for line in _failure_lines(message):
                    found.add("error", line, index, _keywords(line))
            names = _names(_plain(message.get("content")) or str(message.get("output") or ""))
        else:
            names = []
        if role in ("user", "assistant"):
            talked_of.update(names)
        for name in dict.fromkeys(names):
            seen_in.setdefault(name, []).append(index)
    modified = found.keys["file_modified"]  # modified files are not also "read" artifacts
    found.items["file_read"] = [
        i for i in found.items["file_read"] if _norm(i[0]).strip() not in modified
    ]
    recurring = [(n, s) for n, s in seen_in.items() if len(s) >= 2 and n in talked_of]
    for name, sources in sorted(recurring, key=lambda kv: (-len(kv[1]), kv[1][0])):
        found.add("identifier", name, sources[0])
    for sentence, index in explanations:
        if last_prose is None or sentence != last_prose[0]:
            found.add("decision", _shorten(sentence), index, _keywords(sentence))
    if last_prose is not None and len(last_prose[0].split()) >= 4:
        found.add("next_step", _shorten(last_prose[0]), last_prose[1], _keywords(last_prose[0]))
    if last_user is not None:
        text, index = last_user
        fact = _shorten(" ".join(_split_sentences(text)[:2]) or text)
        found.add("task", fact, index, _keywords(fact))
    return _probes(found, caps)


# --- needed later ------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompactionPoint:
    """Where a session is compacted, and what the session did afterwards.

    Attributes:
        fork_id: the entry the strategies compact at (their branches start here).
        index: its position on the branch (root = 0).
        continuation: the messages of the branch after the point (what the agent went on to
            do); empty when the point is the end of the session.
        compaction_id: the session's own ``compaction`` entry when the point is one (an
            agent's real compaction, e.g. imported from Claude Code or Codex).
    """

    fork_id: str
    index: int
    continuation: list[Message] = field(default_factory=list, repr=False)
    compaction_id: str | None = None

    @property
    def has_continuation(self) -> bool:
        return any(m.get("role") in ("user", "assistant") for m in self.continuation)


def _continuation(entries: Sequence[Entry]) -> list[Message]:
    out: list[Message] = []
    for entry in entries:
        if entry.get("type") == "message" and isinstance(entry.get("message"), dict):
            out.append(entry["message"])
    return out


def compaction_point(
    tree: SessionTree, at: str | int | None = None, *, leaf: str | None = None
) -> CompactionPoint:
    """The compaction point ``at`` of the branch ending at ``leaf`` (default: the leaf).

    ``at`` is an entry id or an index into the branch (negative counts from the end). A
    ``compaction`` entry means "just before that compaction": the strategies fork at its
    parent and the continuation is what followed it. None picks the branch's last
    compaction entry when it has one (the agent's own), else the leaf (no continuation).
    """
    branch = tree.get_branch(leaf) if leaf is not None else tree.get_branch()
    if not branch:
        raise ValueError("the session is empty")
    if at is None:
        marks = [i for i, e in enumerate(branch) if e.get("type") == "compaction" and i > 0]
        index = marks[-1] if marks else len(branch) - 1
    elif isinstance(at, bool) or not isinstance(at, (int, str)):
        raise TypeError(f"compaction point must be an entry id or an index, not {at!r}")
    elif isinstance(at, int):
        index = at + len(branch) if at < 0 else at
        if not 0 <= index < len(branch):
            raise ValueError(f"compaction point {at} is outside the branch (0..{len(branch) - 1})")
    else:
        ids = [e.get("id") for e in branch]
        if at not in ids:
            raise ValueError(f"compaction point {at!r} is not an entry of the branch")
        index = ids.index(at)
    entry = branch[index]
    after = _continuation(branch[index + 1 :])
    if entry.get("type") == "compaction":
        if index == 0:
            raise ValueError("a compaction at the root has nothing before it")
        return CompactionPoint(branch[index - 1]["id"], index - 1, after, entry.get("id"))
    return CompactionPoint(entry["id"], index, after)


def _span_facts(messages: Sequence[Message]) -> _Found:
    """Every candidate fact of the span, per needed-later kind, in span order."""
    found = _Found(NEEDED_LATER_LIMITS)
    for index, message in enumerate(messages):
        role = message.get("role")
        texts: list[str] = []
        if role == "assistant":
            for name, args in _calls(message):
                for _, path in _call_paths(name, args):
                    found.add("file", path, index)
                command = _shell_command(args)
                if command and not any(isinstance(args.get(k), str) for k in _PATH_ARGS):
                    found.add("command", _shorten(command, 160), index)
                texts += [v for v in args.values() if isinstance(v, str) and len(v) < 2000]
            prose = _prose(message)
            texts.append(prose)
            for match in _NUMBER.finditer(prose):
                found.add("value", match.group(0), index)
        elif role == "user":
            text = _plain(message.get("content"))
            texts.append(text)
            for match in _NUMBER.finditer(text):
                found.add("value", match.group(0), index)
        elif role in ("toolResult", "bashExecution"):
            if role == "bashExecution" and message.get("command"):
                found.add("command", _shorten(str(message["command"]), 160), index)
            if _failed(message):
                for line in _failure_lines(message):
                    found.add("error", line, index, _keywords(line))
            texts.append(_plain(message.get("content")) or str(message.get("output") or ""))
        for text in texts:
            for match in _FILE.finditer(text):
                if "." in match.group(0).rsplit("/", 1)[-1]:
                    found.add("file", match.group(0), index)
            for name in _names(text):
                found.add("identifier", name, index)
    return found


def needed_later_probes(
    span: Sequence[Message],
    continuation: Sequence[Message],
    *,
    limits: Mapping[str, int] | None = None,
) -> list[Probe]:
    """Facts of ``span`` (the compacted messages) that ``continuation`` (what the session did
    afterwards) uses again: files read or edited again, code names, error messages,
    values and commands that reappear after the cut. Category ``needed_later``.

    They measure what the agent actually needed rather than what a heuristic guesses might
    matter; a fact counts when :func:`match_probe` finds it in the continuation's text.
    """
    caps = {**NEEDED_LATER_LIMITS, **(limits or {})}
    later = context_text(continuation)
    later_norm = _norm(later)
    found = _span_facts(span)
    for kind, items in found.items.items():
        found.items[kind] = [
            (fact, source, keywords)
            for fact, source, keywords in items
            if match_probe(
                Probe("?", "needed_later", kind, fact, "?", keywords or _keywords(fact)),
                later,
                later_norm,
            )[1]
        ]
    return _probes(found, caps, "needed_later")


def needed_later_note(
    point: CompactionPoint, span: Sequence[Message], later: Sequence[Probe]
) -> str | None:
    """Why there are no needed-later probes at ``point`` (None when there are some).

    No needed-later probe is a finding, not a failure: the point may be the end of the
    session (nothing after it to measure), the cut may remove nothing, or the session goes
    on without using a fact of the removed span again. The comparison table shows this next
    to the NaN ``probe_needed_later`` so that the NaN reads as what it is.
    """
    if later:
        return None
    if not point.has_continuation:
        if point.compaction_id:
            return "no continuation: nothing follows the session's own compaction"
        return (
            "no continuation: no user or assistant message follows the compaction point "
            "(by default the session's leaf): nothing later to measure"
        )
    if not span:
        return "the cut removes nothing at this point (no compacted fact to look for later)"
    turns = sum(1 for m in point.continuation if m.get("role") in ("user", "assistant"))
    return (
        f"the continuation ({turns} user/assistant messages) uses no fact of the compacted "
        f"span ({len(span)} messages) again"
    )


def compacted_span(
    tree: SessionTree, settings: CompactionSettings | None = None, leaf: str | None = None
) -> list[Message]:
    """The messages Pi's compaction would remove at ``leaf`` (summarized history plus a
    split turn's prefix); [] when there is nothing to compact."""
    branch = tree.get_branch(leaf) if leaf is not None else tree.get_branch()
    preparation = prepare_compaction(branch, settings or CompactionSettings())
    if preparation is None:
        return []
    return [*preparation.messages_to_summarize, *preparation.turn_prefix_messages]


# --- scoring ----------------------------------------------------------------------------------


def _path_tail(path: str) -> str:
    parts = [p for p in re.split(r"[\\/]+", path) if p and p != "."]
    return "/".join(parts[-2:]).lower()


def match_probe(probe: Probe, text: str, normalized: str | None = None) -> tuple[bool, bool]:
    """(exact, normalized) match of the probe's fact in ``text``.

    Exact: the fact verbatim (names and values as whole words). Normalized: paths by their
    last two components; names, values and commands case- and punctuation-folded (names
    and values as whole words); sentences when at least 60 % of their keywords occur.
    """
    norm = normalized if normalized is not None else _norm(text)
    if probe.kind in ("identifier", "value"):  # short facts: whole words only ("500" ≠ "1500")
        exact = re.search(rf"(?<![\w]){re.escape(probe.fact)}(?![\w])", text) is not None
    else:
        exact = probe.fact in text
    if exact:
        return True, True
    if probe.kind in ("file_read", "file_modified", "file"):
        tail = _path_tail(probe.fact)
        return False, bool(tail) and tail in text.lower().replace("\\", "/")
    fact = _norm(probe.fact)
    if fact.strip() and fact in norm:
        return False, True
    if probe.kind in ("identifier", "value", "command") or not probe.keywords:
        return False, False
    hits = sum(1 for k in probe.keywords if f" {k} " in norm)
    return False, hits / len(probe.keywords) >= 0.6


def score_probes(probes: Sequence[Probe], text: str) -> pd.DataFrame:
    """One row per probe: ``probe_id, category, kind, fact, exact, normalized``."""
    import pandas as pd

    norm = _norm(text)
    rows = []
    for probe in probes:
        exact, normalized = match_probe(probe, text, norm)
        rows.append(
            {
                "probe_id": probe.id,
                "category": probe.category,
                "kind": probe.kind,
                "fact": probe.fact,
                "exact": exact,
                "normalized": normalized,
            }
        )
    columns = ["probe_id", "category", "kind", "fact", "exact", "normalized"]
    return pd.DataFrame(rows, columns=columns)


def probe_recall(scored: pd.DataFrame, column: str = "normalized") -> dict[str, float]:
    """Recall per category (NaN where a category has no probe) and ``"all"``."""
    out: dict[str, float] = {}
    for category in CATEGORIES:
        part = scored[scored["category"] == category][column]
        out[category] = float(part.mean()) if len(part) else float("nan")
    out["all"] = float(scored[column].mean()) if len(scored) else float("nan")
    return out


def recall_columns(scored: pd.DataFrame) -> dict[str, Any]:
    """The recall columns of a study row from :func:`score_probes`'s table: ``probes``,
    ``probe_<category>``, ``probe_heuristic`` (Factory's four types), ``probe_basis`` and
    ``probe_all`` / ``probe_all_exact`` — the needed-later recall when there are
    needed-later probes (what the agent really used again), else the heuristic one."""
    normalized, exact = probe_recall(scored), probe_recall(scored, "exact")
    heuristic = scored[scored["category"].isin(PROBE_TYPES)]
    out: dict[str, Any] = {"probes": len(scored)}
    out.update({f"probe_{category}": normalized[category] for category in CATEGORIES})
    out["probe_heuristic"] = probe_recall(heuristic)["all"]
    if (scored["category"] == "needed_later").any():
        out["probe_basis"] = "needed_later"
        out["probe_all"], out["probe_all_exact"] = normalized["needed_later"], exact["needed_later"]
    else:
        out["probe_basis"] = "heuristic"
        out["probe_all"] = out["probe_heuristic"]
        out["probe_all_exact"] = probe_recall(heuristic, "exact")["all"]
    return out


def probe_frame(probes: Sequence[Probe]) -> pd.DataFrame:
    """The probes as a DataFrame."""
    import pandas as pd

    columns = ["id", "category", "kind", "fact", "question", "keywords", "source"]
    return pd.DataFrame([p.to_dict() for p in probes], columns=columns)
