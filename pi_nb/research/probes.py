"""Probes: facts extracted from the span being compacted, and whether they survive.

Factory.ai's probe-based evaluation asks four kinds of questions after compression:
**recall** (specific details), **artifact** (which files were touched), **continuation** (what
was going on / what comes next) and **decision** (what was decided, and why). Here the probes
are extracted automatically and offline from the messages a compaction removes:

=============  ==============  ===============================================================
category       kind            extracted from
=============  ==============  ===============================================================
artifact       file_modified   edit / write / apply_patch tool calls (any agent's tool names)
artifact       file_read       read / view tool calls, ``cat`` / ``sed`` shell commands
recall         error           error lines of tool results (``…Error: …``, ``failed``)
recall         identifier      code names in user / assistant text and tool arguments
recall         value           numbers the user gave, numbers with units, test tallies
recall         constraint      user sentences with must / never / always / don't / only …
decision       decision        assistant sentences with decided / chose / instead / because …
continuation   task            the last user request of the span
continuation   next_step       assistant sentences with next / todo / remaining …
=============  ==============  ===============================================================

:func:`score_probes` checks each expected fact against a text (a summary, or the whole
post-compaction context) by **exact** substring and by a **normalized** match (case and
punctuation folded; paths by their last two components; sentences by keyword coverage).
:func:`judge_probes` asks a model the probe questions instead (Factory's LLM judge); tests
run it only with ``pinb/scripted`` or litellm's ``mock_response``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ..compaction import CompactionSettings, prepare_compaction
from ..entries import Message, js_stringify
from ..messages import as_text, content_text

if TYPE_CHECKING:
    import pandas as pd

    from ..session.tree import SessionTree

__all__ = [
    "CATEGORIES",
    "QUESTIONS",
    "Probe",
    "compacted_span",
    "context_text",
    "extract_probes",
    "judge_probes",
    "match_probe",
    "probe_frame",
    "probe_recall",
    "score_probes",
]

#: Factory.ai's four probe types.
CATEGORIES = ("recall", "artifact", "continuation", "decision")

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
    "next_step": "What was planned next?",
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
    "next_step": 2,
}

_READ_TOOLS = {"read", "read_file", "readfile", "view", "view_file", "cat", "open", "notebookread"}
_EDIT_TOOLS = {
    "edit",
    "edit_file",
    "str_replace",
    "multiedit",
    "multi_edit",
    "notebookedit",
    "apply_patch",
    "patch",
}
_WRITE_TOOLS = {"write", "write_file", "create", "create_file"}
_EDITOR_TOOLS = {"str_replace_editor", "str_replace_based_edit_tool"}
_SHELL_TOOLS = {"bash", "shell", "sh", "local_shell", "exec", "run", "terminal"}
_READ_VERBS = {"cat", "sed", "head", "tail", "less", "more", "nl", "bat", "view"}
_PATH_KEYS = ("path", "file_path", "filepath", "filename", "file", "notebook_path", "target_file")

_EXTS = (
    "py|pyi|ipynb|js|mjs|cjs|ts|tsx|jsx|json|jsonl|md|rst|txt|toml|yaml|yml|cfg|ini|sh|c|h|cc|"
    "cpp|hpp|rs|go|java|kt|rb|php|html|css|scss|sql|csv|xml|lock|log|cs|swift|vue|lua|tf|proto"
)
_PATH = re.compile(rf"(?<![\w/.:-])(?:~?/)?(?:[\w.-]+/)*[\w-][\w.-]*\.(?:{_EXTS})(?![\w/-])")
_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+?)\s*$", re.M)
_ERROR_TOKEN = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b")
_ERROR_LINE = re.compile(r"\b\w*(?:Error|Exception)\b|(?i:\bfailed\b)|^\s*(?i:error)\b")
_CONSTRAINT = re.compile(
    r"\b(must|never|always|don't|don’t|do not|should not|shouldn't|only|prefer|avoid|keep)\b",
    re.I,
)
_DECISION = re.compile(
    r"\b(decided?|decision|chose|choose|chosen|instead|because|opted|going with|switch(?:ed)? to"
    r"|will use|i'll use)\b",
    re.I,
)
_NEXT = re.compile(r"\b(next|todo|remaining|still need|then i'll|then i will|after that)\b", re.I)
_IDENTIFIERS = (
    re.compile(r"`([A-Za-z_][\w.]{1,60}(?:\(\))?)`"),
    re.compile(r"\b((?:[A-Z][a-z0-9]+){2,}(?:\.[A-Za-z_]\w*)*)\b"),  # CamelCase(.attr)
    re.compile(r"\b([a-z]+(?:[A-Z][a-z0-9]+)+)\b"),  # camelCase
    re.compile(r"\b(_*[a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b"),  # snake_case
)
_UNIT_VALUE = re.compile(
    r"(?<![\w.])\d+(?:\.\d+)?\s?(?:ms|s|secs?|seconds?|min|minutes?|hours?|days?|KB|MB|GB|TB|"
    r"KiB|MiB|GiB|bytes?|tokens?|lines?|rows?|retries|attempts?|%)(?![\w%])"
)
_TALLY = re.compile(r"\b\d+ (?:passed|failed|errors?|skipped)\b")
_USER_NUMBER = re.compile(r"(?<![\w.:/-])(?:\d+\.\d+(?:\.\d+)*|\d{2,})(?![\w/]|\.\d)")
_TAG = re.compile(r"</?[A-Za-z][\w-]*>")
_STOP_WORDS = """the a an and or of to in on for with from by at as is are was were be been it its this that
    these those i you we they he she my your our their me us them not no do does did have has had
    will would can could should must may might shall also just then than so if else but all any
    some each every which what when where why how there here into onto out up down over under
    again more most very only own same such too use used using make made get got let lets please
    now file files"""
_STOP = frozenset(_STOP_WORDS.split())


@dataclass(frozen=True)
class Probe:
    """One fact the compacted span contained, and the question that asks for it.

    Attributes:
        id: ``"<kind>-<n>"``.
        category: ``recall`` | ``artifact`` | ``continuation`` | ``decision``.
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


def _clip(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _sentences(text: str) -> list[str]:
    out: list[str] = []
    fence = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("```"):
            fence = not fence
            continue
        if fence or not line:
            continue
        line = re.sub(r"^(?:[-*•]\s+|\d+[.)]\s+|#+\s+)", "", line)
        out += [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(])", line) if s.strip()]
    return out


def _keywords(sentence: str, limit: int = 8) -> tuple[str, ...]:
    """Distinctive words of a sentence: code names, numbers and paths first, then long words."""
    special: list[str] = []
    for pattern in _IDENTIFIERS:
        special += [m.group(1).strip("`()") for m in pattern.finditer(sentence)]
    special += [m.group(0) for m in _PATH.finditer(sentence)]
    special += re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w])", sentence)
    words = [w for w in re.findall(r"[A-Za-z][A-Za-z'-]{3,}", sentence) if w.lower() not in _STOP]
    words.sort(key=len, reverse=True)
    seen: set[str] = set()
    out: list[str] = []
    for word in [*special, *words]:
        key = _norm(word).strip()
        if key and key not in seen and key not in _STOP:
            seen.add(key)
            out.append(key)
        if len(out) >= limit:
            break
    return tuple(out)


def _text(content: Any) -> str:
    from ..messages import content_text

    return content_text(content)  # the shared reader: a non-string text block is skipped


def context_text(messages: Iterable[Message]) -> str:
    """All text a model would read in these messages: summaries, user / assistant text,
    tool calls (name and JSON arguments) and tool results. Thinking is left out."""
    parts: list[str] = []
    for message in messages:
        role = message.get("role")
        if role in ("compactionSummary", "branchSummary"):
            parts.append(str(message.get("summary") or ""))
        elif role == "assistant":
            content = message.get("content")
            for block in content if isinstance(content, list) else ():  # hostile files
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text":
                    parts.append(as_text(block.get("text")))
                elif block.get("type") == "toolCall":
                    parts.append(f"{as_text(block.get('name'))}({js_stringify(block.get('arguments'))})")
        elif role == "bashExecution":
            parts.append(f"{message.get('command', '')}\n{message.get('output', '')}")
        elif role in ("user", "toolResult", "custom"):
            parts.append(_text(message.get("content")))
    return "\n\n".join(p for p in parts if p)


# --- extraction ------------------------------------------------------------------------------


def _call_paths(name: str, args: Mapping[str, Any]) -> list[tuple[str, str]]:
    """[(kind, path)] for one tool call: file_read or file_modified."""
    lname = name.lower()
    out: list[tuple[str, str]] = []
    path = next(
        (str(args[k]) for k in _PATH_KEYS if isinstance(args.get(k), str) and args[k]), None
    )
    if lname in _EDITOR_TOOLS and path:
        verb = str(args.get("command", ""))
        out.append(("file_read" if verb == "view" else "file_modified", path))
    elif path and lname in _READ_TOOLS:
        out.append(("file_read", path))
    elif path and (lname in _EDIT_TOOLS or lname in _WRITE_TOOLS):
        out.append(("file_modified", path))
    if lname in ("apply_patch", "patch"):
        patch = next((v for v in args.values() if isinstance(v, str) and "*** " in v), "")
        out += [("file_modified", p) for p in _PATCH_FILE.findall(patch)]
    if lname in _SHELL_TOOLS:
        command = args.get("command") or args.get("cmd") or ""
        if isinstance(command, list):
            command = " ".join(str(c) for c in command)
        for segment in re.split(r"&&|\|\||;|\|", str(command)):
            words = segment.replace("bash -lc", " ").strip().strip("'\"").split()
            if words and words[0] in _READ_VERBS:
                out += [("file_read", m.group(0)) for m in _PATH.finditer(segment)]
    return out


def _error_fact(line: str) -> str:
    """The error from its class name on (``KeyError: 'x'``), or the whole line when the
    class name ends it (``FAILED test_x - AssertionError``)."""
    token = _ERROR_TOKEN.search(line)
    if token is None or len(line) - token.end() < 3:
        return _clip(line.strip(), 160)
    return _clip(line[token.start() :], 160)


class _Collector:
    def __init__(self, limits: Mapping[str, int]) -> None:
        self.limits = limits
        self.items: dict[str, list[tuple[str, int, tuple[str, ...]]]] = {k: [] for k in _CATEGORY}
        self.seen: dict[str, set[str]] = {k: set() for k in _CATEGORY}

    def add(self, kind: str, fact: str, source: int, keywords: tuple[str, ...] = ()) -> None:
        fact = fact.strip()
        key = _norm(fact).strip()
        if not key or key in self.seen[kind]:
            return
        self.seen[kind].add(key)
        self.items[kind].append((fact, source, keywords))


def extract_probes(
    messages: Sequence[Message], *, limits: Mapping[str, int] | None = None
) -> list[Probe]:
    """Probes for the facts in ``messages`` (Pi AgentMessages, e.g. the compacted span).

    Deterministic: the same messages always give the same probes, in a fixed order
    (the order of the module table).
    """
    caps = {**LIMITS, **(limits or {})}
    found = _Collector(caps)
    identifier_counts: dict[str, list[int]] = {}
    last_user: tuple[str, int] | None = None
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "user":
            text = _text(message.get("content"))
            if text.strip():
                last_user = (text, index)
            for sentence in _sentences(text):
                if _CONSTRAINT.search(sentence):
                    found.add("constraint", _clip(sentence), index, _keywords(sentence))
            for match in _USER_NUMBER.finditer(text):
                found.add("value", match.group(0), index)
            _count_identifiers(text, index, identifier_counts)
        elif role == "assistant":
            prose = []
            for block in message.get("content") or []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text":
                    prose.append(block.get("text", ""))
                elif block.get("type") == "toolCall":
                    args = (
                        block.get("arguments") if isinstance(block.get("arguments"), dict) else {}
                    )
                    for kind, path in _call_paths(str(block.get("name", "")), args):
                        found.add(kind, path, index)
                    for value in args.values():
                        if isinstance(value, str) and len(value) < 2000:
                            _count_identifiers(value, index, identifier_counts, code=True)
            text = "\n".join(prose)
            for sentence in _sentences(text):
                if _DECISION.search(sentence):
                    found.add("decision", _clip(sentence), index, _keywords(sentence))
                if _NEXT.search(sentence):
                    found.add("next_step", _clip(sentence), index, _keywords(sentence))
            for match in _UNIT_VALUE.finditer(text):
                found.add("value", match.group(0), index)
            _count_identifiers(text, index, identifier_counts)
        elif role == "toolResult":
            text = _text(message.get("content"))
            errors = [line for line in text.splitlines() if _ERROR_LINE.search(line)]
            with_token = [line for line in errors if _ERROR_TOKEN.search(line)]
            for line in (with_token or errors)[:2]:
                fact = _error_fact(line)
                found.add("error", fact, index, _keywords(fact))
            for match in _TALLY.finditer(text):
                found.add("value", match.group(0), index)
    # Modified files are not also "read" artifacts.
    modified = found.seen["file_modified"]
    found.items["file_read"] = [
        item for item in found.items["file_read"] if _norm(item[0]).strip() not in modified
    ]
    ranked = sorted(identifier_counts.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
    for name, sources in ranked:
        found.add("identifier", name, sources[0])
    next_steps = found.items["next_step"]
    found.items["next_step"] = next_steps[-caps["next_step"] :] if caps["next_step"] else []
    if last_user is not None:
        text, index = last_user
        fact = _clip(" ".join(_sentences(text)[:2]) or text)
        found.add("task", fact, index, _keywords(fact))
    probes: list[Probe] = []
    for kind in _CATEGORY:  # artifact, recall, decision, continuation
        for n, (fact, source, keywords) in enumerate(found.items[kind][: caps.get(kind, 0)], 1):
            probes.append(
                Probe(
                    id=f"{kind}-{n}",
                    category=_CATEGORY[kind],
                    kind=kind,
                    fact=fact,
                    question=QUESTIONS[kind],
                    keywords=keywords,
                    source=source,
                )
            )
    return probes


def _count_identifiers(
    text: str, index: int, counts: dict[str, list[int]], code: bool = False
) -> None:
    text = _TAG.sub(" ", text)
    paths = {m.group(0) for m in _PATH.finditer(text)}
    for pattern in _IDENTIFIERS[1:] if code else _IDENTIFIERS:
        for match in pattern.finditer(text):
            name = match.group(1).strip("`").removesuffix("()")
            if (
                len(name) < 3
                or name.lower() in _STOP
                or any(name in p for p in paths)
                or _PATH.fullmatch(name)
            ):
                continue
            counts.setdefault(name, []).append(index)


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

    Exact: the fact verbatim (names and values as whole words). Normalized: paths by their last two components, names and
    values case- and punctuation-folded as whole words, sentences when at least 60 % of
    their keywords occur.
    """
    norm = normalized if normalized is not None else _norm(text)
    if probe.kind in ("identifier", "value"):  # short facts: whole words only ("500" ≠ "1500")
        exact = re.search(rf"(?<![\w]){re.escape(probe.fact)}(?![\w])", text) is not None
    else:
        exact = probe.fact in text
    if exact:
        return True, True
    if probe.kind in ("file_read", "file_modified"):
        tail = _path_tail(probe.fact)
        return False, bool(tail) and tail in text.lower().replace("\\", "/")
    fact = _norm(probe.fact)
    if fact.strip() and fact in norm:
        return False, True
    if probe.kind in ("identifier", "value") or not probe.keywords:
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


def probe_frame(probes: Sequence[Probe]) -> pd.DataFrame:
    """The probes as a DataFrame."""
    import pandas as pd

    columns = ["id", "category", "kind", "fact", "question", "keywords", "source"]
    return pd.DataFrame([p.to_dict() for p in probes], columns=columns)


# --- LLM judge --------------------------------------------------------------------------------

_JUDGE_SYSTEM = (
    "You answer questions about a coding session using only the notes given. Quote names, "
    "paths, values and messages exactly. If the notes do not say, answer 'unknown'."
)
_GRADE = (
    "Expected fact:\n{fact}\n\nAnswer given:\n{answer}\n\nDoes the answer contain the expected "
    "fact? Rate from 0 (absent or wrong) to 5 (exactly right). Reply with the number only."
)


def judge_probes(
    probes: Sequence[Probe],
    context: str | Sequence[Message],
    model: str,
    *,
    grader: str = "match",
    completion: Callable[..., Message] | None = None,
    **call_options: Any,
) -> pd.DataFrame:
    """Ask ``model`` the probe questions about ``context`` (Factory.ai's LLM judge).

    One call per distinct question; each probe is then graded against the answer — by the
    offline normalized match (``grader="match"``) or by asking the model for a 0–5 score
    (``grader="llm"``, one more call per probe). Extra options (``mock_response=…``) go to
    the model call.

    Returns one row per probe: ``probe_id, category, kind, fact, question, answer, score``
    (score in 0..1).
    """
    import pandas as pd

    if grader not in ("match", "llm"):
        raise ValueError(f"grader must be 'match' or 'llm', not {grader!r}")
    text = context if isinstance(context, str) else context_text(context)

    def ask(messages: list[dict[str, Any]]) -> str:
        if completion is not None:
            reply = completion(model, messages, **call_options)
        else:
            from ..llm import complete

            reply = complete(model, messages, stream=False, **call_options)
        return content_text(reply.get("content")).strip()

    answers: dict[str, str] = {}
    for question in dict.fromkeys(p.question for p in probes):
        answers[question] = ask(
            [
                {"role": "system", "content": _JUDGE_SYSTEM},
                {"role": "user", "content": f"<notes>\n{text}\n</notes>\n\nQuestion: {question}"},
            ]
        )
    rows = []
    for probe in probes:
        answer = answers[probe.question]
        if grader == "match":
            score = 1.0 if match_probe(probe, answer)[1] else 0.0
        else:
            graded = ask(
                [{"role": "user", "content": _GRADE.format(fact=probe.fact, answer=answer)}]
            )
            number = re.search(r"\d+(?:\.\d+)?", graded)
            score = min(max(float(number.group(0)) / 5, 0.0), 1.0) if number else 0.0
        rows.append(
            {
                "probe_id": probe.id,
                "category": probe.category,
                "kind": probe.kind,
                "fact": probe.fact,
                "question": probe.question,
                "answer": answer,
                "score": score,
            }
        )
    columns = ["probe_id", "category", "kind", "fact", "question", "answer", "score"]
    return pd.DataFrame(rows, columns=columns)
