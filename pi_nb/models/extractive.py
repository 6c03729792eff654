"""Deterministic *extractive* summaries of serialized conversations.

This is what ``pinb/scripted`` answers to a summarization request, and a non-LLM baseline
compaction strategy in its own right. Every line it writes is copied (and at most clipped) from
the conversation or the previous summary: nothing is invented.

Input is Pi's serialized conversation (``serializeConversation``): parts separated by blank
lines, each starting with ``[User]: ``, ``[Assistant]: ``, ``[Assistant thinking]: ``,
``[Assistant tool calls]: name(k=<json>, …); …`` or ``[Tool result]: ``.

Heuristics (all deterministic):

- **Goal**: the first user text (clipped to ~300 chars); when updating, the previous Goal.
- **Constraints & Preferences**: user sentences containing must / never / always / don't /
  do not / should / prefer / only.
- **Done**: tool calls made ("read a.py", "edited b.py", "ran `pytest`") and assistant
  sentences reporting finished work (fixed, added, updated, …).
- **In Progress**: the last user request, when work on it has started.
- **Blocked**: error lines of the last tool result after the last user request.
- **Key Decisions**: assistant sentences with decide / chose / use / will / instead / because.
- **Next Steps**: the last user request, plus "next / todo / remaining" sentences of the last
  assistant text.
- **Critical Context**: file paths, error lines (Error / Exception / failed), identifiers
  (backticked code, CamelCase, camelCase, snake_case, names with digits), numbers with units.

With a previous summary the result is a merge: every item of every previous section is kept, in
order, and new items are appended when not already present. ``<read-files>`` /
``<modified-files>`` blocks of the previous summary are dropped (compaction re-appends the
cumulative lists itself); sections it does not know are kept verbatim at the end.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = [
    "SUMMARY_SECTIONS",
    "extractive_summary",
    "extractive_turn_prefix_summary",
    "parse_conversation",
    "parse_tool_calls",
]

#: The six top-level headings of a history summary, in order.
SUMMARY_SECTIONS = (
    "Goal",
    "Constraints & Preferences",
    "Progress",
    "Key Decisions",
    "Next Steps",
    "Critical Context",
)

# Caps on *new* items per section, so a long conversation still gives a bounded summary.
_MAX_CONSTRAINTS = 20
_MAX_DONE = 40
_MAX_DECISIONS = 15
_MAX_FILES = 25
_MAX_ERRORS = 10
_MAX_IDENTIFIERS = 20
_MAX_VALUES = 10
_GOAL_CHARS = 300
_ITEM_CHARS = 240

_NONE = "(none)"
_OMITTED = "(omitted for length)"

_MARKER = re.compile(
    r"^\[(User|Assistant|Assistant thinking|Assistant tool calls|Tool result)"
    r"(?: \([^\]\n]*\))?\]:[ \t]?",
    re.MULTILINE,
)
_CONSTRAINT = re.compile(
    r"\b(must|never|always|don't|don’t|do not|should|prefer|prefers|preferred|only)\b", re.I
)
_DECISION = re.compile(
    r"\b(decide|decided|decision|chose|choose|chosen|use|using|will|instead|because)\b", re.I
)
_DONE = re.compile(
    r"\b(done|fixed|added|updated|created|implemented|wrote|written|changed|removed|renamed|"
    r"refactored|passed|passes|completed|finished|installed|moved|replaced|edited|verified)\b",
    re.I,
)
_NEXT = re.compile(r"\b(next|todo|remaining|still need|then i'll|then i will|after that)\b", re.I)
_ERROR = re.compile(r"\b\w*(?:Error|Exception)\b|(?i:\bfailed\b)|^\s*(?i:error)\b")
_EXTS = (
    "py|pyi|ipynb|js|mjs|cjs|ts|tsx|jsx|json|jsonl|md|rst|txt|toml|yaml|yml|cfg|ini|sh|bash|"
    "c|h|cc|cpp|hpp|rs|go|java|kt|rb|php|html|css|scss|sql|csv|xml|lock|log|gguf|cs|swift|vue|"
    "lua|tf|proto|gradle|mk"
)
_PATH = re.compile(rf"(?<![\w/.:-])(?:~?/)?(?:[\w.-]+/)*[\w-][\w.-]*\.(?:{_EXTS})(?![\w/-])")
_ABS_PATH = re.compile(r"(?<![\w.:/~-])(?:~|\.{1,2})?/(?:[\w.-]+/)+[\w.-]+")
_IDENTIFIERS = (
    re.compile(r"`([^`\n]{2,80})`"),
    re.compile(r"\b((?:[A-Z][a-z0-9]+){2,}\w*)\b"),  # CamelCase
    re.compile(r"\b([a-z]+(?:[A-Z][a-z0-9]+)+)\b"),  # camelCase
    re.compile(r"\b(_*[a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b"),  # snake_case
    re.compile(r"\b([A-Za-z][A-Za-z_]*\d[A-Za-z0-9_]*)\b"),  # names with digits
)
_VALUE = re.compile(
    r"(?<![\w.])\d+(?:\.\d+)?\s?(?:ms|µs|us|ns|s|secs?|seconds?|min|minutes?|hours?|days?|"
    r"KB|MB|GB|TB|KiB|MiB|GiB|kB|bytes?|tokens?|chars?|characters|lines?|%|k|K|M)(?![\w%])"
)
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_ITEM = re.compile(r"^\s{0,3}(?:[-*+]\s+(?:\[[ xX]\]\s+)?|\d+[.)]\s+)(.*)$")
_FILE_TAGS = re.compile(r"<(read-files|modified-files)>.*?</\1>\s*", re.S)
_SECTION_KEYS = {
    "goal": "Goal",
    "constraints & preferences": "Constraints & Preferences",
    "constraints and preferences": "Constraints & Preferences",
    "constraints": "Constraints & Preferences",
    "progress": "Done",  # lines directly under "## Progress" count as done work
    "done": "Done",
    "in progress": "In Progress",
    "blocked": "Blocked",
    "key decisions": "Key Decisions",
    "decisions": "Key Decisions",
    "next steps": "Next Steps",
    "critical context": "Critical Context",
}
_READ_TOOLS = {"read", "read_file", "view", "cat", "open"}
_EDIT_TOOLS = {"edit", "edit_file", "str_replace", "multi_edit", "apply_patch", "patch"}
_WRITE_TOOLS = {"write", "write_file", "create", "create_file"}
_SHELL_TOOLS = {"bash", "shell", "sh", "run", "exec", "terminal", "ipython", "python"}
_PATH_KEYS = ("path", "file_path", "file", "filename", "filepath")


# ---------------------------------------------------------------------------------------------
# Parsing the serialized conversation


def parse_conversation(text: str) -> list[tuple[str, str]]:
    """Split a serialized conversation into ``(kind, text)`` parts.

    ``kind`` is ``"User"``, ``"Assistant"``, ``"Assistant thinking"``, ``"Assistant tool calls"``
    or ``"Tool result"``. Text without any marker is taken as one user part.
    """
    matches = list(_MARKER.finditer(text))
    if not matches:
        return [("User", text.strip())] if text.strip() else []
    parts = []
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        parts.append((m.group(1), text[m.end() : end].strip()))
    return parts


def parse_tool_calls(text: str) -> list[tuple[str, dict[str, object]]]:
    """Parse ``name(k=<json>, …); name2(…)`` into ``[(name, {k: value})]``.

    On text that does not follow the format, the rest is returned as one call with no
    arguments (named by the raw text, clipped), so nothing is silently lost.
    """
    decoder = json.JSONDecoder()
    calls: list[tuple[str, dict[str, object]]] = []
    name_re = re.compile(r"\s*([\w.:-]+)\(")
    key_re = re.compile(r"\s*([^=,()\s]+)=")
    pos = 0
    while pos < len(text):
        m = name_re.match(text, pos)
        if not m:
            rest = text[pos:].strip(" ;")
            if rest:
                calls.append((_clip(rest, 80), {}))
            break
        name, pos = m.group(1), m.end()
        args: dict[str, object] = {}
        ok = True
        while True:
            while pos < len(text) and text[pos] in " ,":
                pos += 1
            if pos < len(text) and text[pos] == ")":
                pos += 1
                break
            km = key_re.match(text, pos)
            if not km:
                ok = False
                break
            try:
                value, pos = decoder.raw_decode(text, km.end())
            except ValueError:
                ok = False
                break
            args[km.group(1)] = value
        calls.append((name, args))
        if not ok:
            break
        while pos < len(text) and text[pos] in "; \n":
            pos += 1
    return calls


# ---------------------------------------------------------------------------------------------
# Small text helpers


def _clip(text: str, limit: int = _ITEM_CHARS) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit - 1)
    return text[: cut if cut > limit // 2 else limit - 1] + "…"


def _norm(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()


def _dedupe(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = _norm(item)
        if key and key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _sentences(text: str) -> list[str]:
    """Sentences of prose, skipping fenced code blocks."""
    out: list[str] = []
    in_fence = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence or not line:
            continue
        line = re.sub(r"^(?:[-*•]\s+|\d+[.)]\s+|#+\s+)", "", line)
        for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(])", line):
            if sentence.strip():
                out.append(sentence.strip())
    return out


def _error_lines(text: str) -> list[str]:
    return [_clip(line.strip(), 200) for line in text.splitlines() if _ERROR.search(line)]


def _describe_call(name: str, args: dict[str, object]) -> str:
    """Short past-tense description of a tool call ("read a.py", "ran `pytest`")."""
    path = next((str(args[k]) for k in _PATH_KEYS if isinstance(args.get(k), str)), None)
    lname = name.lower()
    if path and lname in _READ_TOOLS:
        return f"read {path}"
    if path and lname in _EDIT_TOOLS:
        return f"edited {path}"
    if path and lname in _WRITE_TOOLS:
        return f"wrote {path}"
    command = args.get("command") or args.get("cmd") or args.get("code")
    if lname in _SHELL_TOOLS and isinstance(command, str):
        return f"ran `{_clip(command, 120)}`"
    shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
    return f"called {_clip(f'{name}({shown})', 140)}"


# ---------------------------------------------------------------------------------------------
# Extraction


@dataclass
class _Facts:
    """What the heuristics pull out of one serialized conversation."""

    first_user: str | None = None
    last_user: str | None = None
    in_progress: bool = False
    constraints: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    critical: list[str] = field(default_factory=list)


def _extract(conversation: str) -> _Facts:
    parts = parse_conversation(conversation)
    facts = _Facts()
    user_idx = [i for i, (kind, text) in enumerate(parts) if kind == "User" and text]
    if user_idx:
        facts.first_user = parts[user_idx[0]][1]
        facts.last_user = parts[user_idx[-1]][1]
        facts.in_progress = user_idx[-1] < len(parts) - 1
    last_user_pos = user_idx[-1] if user_idx else -1

    files: list[str] = []
    errors: list[str] = []
    prose: list[str] = []  # user + assistant text, where identifiers and values are taken from
    done: list[str] = []
    last_assistant = ""
    for i, (kind, text) in enumerate(parts):
        if kind == "User":
            prose.append(text)
            facts.constraints += [
                _clip(s) for s in _sentences(text) if _CONSTRAINT.search(s) and len(s) > 3
            ]
        elif kind == "Assistant":
            prose.append(text)
            last_assistant = text
            for s in _sentences(text):
                if s.endswith("?"):
                    continue
                if _DONE.search(s):
                    done.append(_clip(s))
                elif _DECISION.search(s):
                    facts.decisions.append(_decision(s))
        elif kind == "Assistant tool calls":
            for name, args in parse_tool_calls(text):
                done.append(_describe_call(name, args))
                files += [str(args[k]) for k in _PATH_KEYS if isinstance(args.get(k), str)]
        elif kind == "Tool result" and i > last_user_pos:
            facts.blocked = _error_lines(text)[:3]  # only the latest result counts
        if kind != "Assistant thinking":
            errors += _error_lines(text)
            files += _PATH.findall(text) + _ABS_PATH.findall(text)

    facts.constraints = _dedupe(facts.constraints)[:_MAX_CONSTRAINTS]
    facts.done = _dedupe(done)[-_MAX_DONE:]
    facts.decisions = _dedupe(facts.decisions)[-_MAX_DECISIONS:]
    facts.blocked = _dedupe(facts.blocked)

    if facts.last_user:
        request = _clip(facts.last_user, _GOAL_CHARS)
        facts.next_steps.append(f"Finish: {request}" if facts.in_progress else request)
    if last_assistant:
        facts.next_steps += [_clip(s) for s in _sentences(last_assistant) if _NEXT.search(s)]
    facts.next_steps = _dedupe(facts.next_steps)

    files = _dedupe(files)[:_MAX_FILES]
    text = "\n".join(prose)
    identifiers = []
    for m in sorted((m for rx in _IDENTIFIERS for m in rx.finditer(text)), key=lambda m: m.start()):
        ident = m.group(1)
        if not any(ident in f for f in files):
            identifiers.append(ident)
    values = [" ".join(v.split()) for v in _VALUE.findall(text)]
    facts.critical = _dedupe(
        [f"File: {f}" for f in files]
        + [f"Error: {e}" for e in _dedupe(errors)[-_MAX_ERRORS:]]
        + [f"Identifier: {x}" for x in _dedupe(identifiers)[:_MAX_IDENTIFIERS]]
        + [f"Value: {v}" for v in _dedupe(values)[:_MAX_VALUES]]
    )
    return facts


def _decision(sentence: str) -> str:
    """``**decision**: rationale`` when the sentence gives a reason, else the sentence."""
    m = re.search(r"\s(because|since|so that)\s", sentence, re.I)
    if m and m.start() > 3:
        return f"**{_clip(sentence[: m.start()], 120)}**: {_clip(sentence[m.start() + 1 :])}"
    return _clip(sentence)


# ---------------------------------------------------------------------------------------------
# The summary as sections: parse, merge, trim, render


@dataclass
class _Section:
    key: str
    heading: str
    style: str  # "para" | "dash" | "done" | "todo" | "num"
    items: list[str] = field(default_factory=list)
    pre: tuple[str, ...] = ()  # lines printed before the heading (e.g. "## Progress")
    trimmed: bool = False


def _history_sections() -> list[_Section]:
    return [
        _Section("Goal", "## Goal", "para"),
        _Section("Constraints & Preferences", "## Constraints & Preferences", "dash"),
        _Section("Done", "### Done", "done", pre=("## Progress",)),
        _Section("In Progress", "### In Progress", "todo"),
        _Section("Blocked", "### Blocked", "dash"),
        _Section("Key Decisions", "## Key Decisions", "dash"),
        _Section("Next Steps", "## Next Steps", "num"),
        _Section("Critical Context", "## Critical Context", "dash"),
    ]


def _render(sections: list[_Section], extras: list[str]) -> str:
    lines: list[str] = []
    for sec in sections:
        lines += [*sec.pre, sec.heading]
        if not sec.items:
            lines.append(_OMITTED if sec.trimmed else _NONE)
        for n, item in enumerate(sec.items, 1):
            bullet = {"para": "", "dash": "- ", "done": "- [x] ", "todo": "- [ ] "}.get(
                sec.style, f"{n}. "
            )
            lines.append(bullet + item)
        lines.append("")
    if extras:
        lines += extras
    return "\n".join(lines).strip() + "\n"


def _parse_summary(text: str) -> tuple[dict[str, list[str]], list[str]]:
    """Items per known section of a previous summary, and the unknown lines kept verbatim."""
    items: dict[str, list[str]] = {}
    extras: list[str] = []
    current: str | None = None
    for line in _FILE_TAGS.sub("", text).splitlines():
        stripped = line.strip()
        heading = _HEADING.match(line)
        if heading:
            current = _SECTION_KEYS.get(heading.group(2).strip().strip("*:").lower())
            if current is None:
                extras.append(line)
            continue
        # A rule or a bold label ends the structured part (e.g. Pi's split-turn context).
        if re.fullmatch(r"-{3,}|\*{3,}|_{3,}|\*\*[^*]+\*\*:?", stripped):
            current = None
        if current is None:
            if stripped or extras:
                extras.append(line)
            continue
        if not stripped or stripped.lower() in (_NONE, "none", _OMITTED):
            continue
        bucket = items.setdefault(current, [])
        item = _ITEM.match(line)
        if item:
            bucket.append(item.group(1).strip())
        elif line[:1].isspace() and bucket:
            bucket[-1] += "\n" + line.rstrip()  # continuation of the previous item
        else:
            bucket.append(stripped)
    while extras and not extras[-1].strip():
        extras.pop()
    return items, extras


def _trim(
    sections: list[_Section], extras: list[str], max_tokens: int | None, drop_order: list[str]
) -> tuple[list[_Section], list[str]]:
    """Drop items (never headings) until the render fits ``max_tokens`` (≈ chars / 4)."""
    if max_tokens is None:
        return sections, extras
    budget = max(0, max_tokens) * 4
    by_key = {s.key: s for s in sections}
    extras = list(extras)
    while len(_render(sections, extras)) > budget:
        if extras:
            extras.pop()
            continue
        for key in drop_order:
            sec = by_key[key]
            if sec.items:
                # Done and decisions lose their oldest items; the others their last ones.
                sec.items.pop(0 if key in ("Done", "Key Decisions") else -1)
                sec.trimmed = True
                break
        else:
            break
    return sections, extras


_HISTORY_DROP_ORDER = [
    "Done",
    "Key Decisions",
    "Critical Context",
    "Blocked",
    "In Progress",
    "Next Steps",
    "Constraints & Preferences",
    "Goal",
]


def extractive_summary(
    conversation: str, previous_summary: str | None = None, max_tokens: int | None = None
) -> str:
    """Summarize a Pi-serialized conversation extractively, in Pi's six-section layout.

    Args:
        conversation: the text Pi puts between ``<conversation>`` tags.
        previous_summary: the previous compaction summary; when given, the result keeps all of
            its items section by section and appends the new ones (deduplicated).
        max_tokens: output budget, estimated as chars / 4. Items are dropped from the least
            important sections first (old Done items, decisions, context …); headings stay.

    Returns:
        Markdown with ``## Goal``, ``## Constraints & Preferences``, ``## Progress`` (``### Done``,
        ``### In Progress``, ``### Blocked``), ``## Key Decisions``, ``## Next Steps`` and
        ``## Critical Context``.
    """
    facts = _extract(conversation)
    new = {
        "Goal": [_clip(facts.first_user, _GOAL_CHARS)] if facts.first_user else [],
        "Constraints & Preferences": facts.constraints,
        "Done": facts.done,
        "In Progress": [_clip(facts.last_user, _GOAL_CHARS)]
        if facts.in_progress and facts.last_user
        else [],
        "Blocked": facts.blocked,
        "Key Decisions": facts.decisions,
        "Next Steps": facts.next_steps,
        "Critical Context": facts.critical,
    }
    old, extras = _parse_summary(previous_summary) if previous_summary else ({}, [])
    sections = _history_sections()
    for sec in sections:
        if sec.key == "Goal" and old.get("Goal"):
            sec.items = list(old["Goal"])  # an update keeps the original goal
            continue
        sec.items = _dedupe([*old.get(sec.key, []), *new[sec.key]])
    sections, extras = _trim(sections, extras, max_tokens, _HISTORY_DROP_ORDER)
    return _render(sections, extras)


def extractive_turn_prefix_summary(
    conversation: str, max_tokens: int | None = None, *, legacy_headings: bool = False
) -> str:
    """Summarize the prefix of a split turn: ``## Original Request``, ``## Progress So Far``,
    ``## Context Needed to Continue`` (Pi 1.3 headings).

    With ``legacy_headings`` the Pi 0.58 names ``## Early Progress`` / ``## Context for
    Suffix`` are used instead.
    """
    facts = _extract(conversation)
    progress, context = (
        ("Early Progress", "Context for Suffix")
        if legacy_headings
        else ("Progress So Far", "Context Needed to Continue")
    )
    sections = [
        _Section("Original Request", "## Original Request", "para"),
        _Section(progress, f"## {progress}", "dash"),
        _Section(context, f"## {context}", "dash"),
    ]
    sections[0].items = [_clip(facts.first_user, 600)] if facts.first_user else []
    sections[1].items = _dedupe(facts.done + facts.decisions)
    sections[2].items = _dedupe(
        facts.constraints + [f"Blocked: {b}" for b in facts.blocked] + facts.critical
    )
    sections, _ = _trim(sections, [], max_tokens, [progress, context, "Original Request"])
    return _render(sections, [])
