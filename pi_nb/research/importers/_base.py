"""What every importer shares: the report, deterministic ids and the entry builder.

An importer reads a foreign transcript into a list of Pi entries (built in memory, so that
records can be merged or re-parented before anything is written), then writes them as a Pi
session file. Nothing is dropped silently: records the importer does not map become
``custom`` entries (``customType = "import:<kind>"``, ``data`` = the record) and lines that
are not JSON become ``custom`` entries holding the raw text; the :class:`ImportReport` counts
all of it.
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import itertools
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ...entries import CURRENT_SESSION_VERSION, Entry, Message, empty_usage, iso_to_ms

#: A path argument: text or any os.PathLike of text.
StrPath = str | os.PathLike[str]

if TYPE_CHECKING:
    import pandas as pd

    from ...session.tree import SessionTree

__all__ = [
    "IMPORT_PREFIX",
    "ImportReport",
    "ImportResult",
    "StrPath",
    "TranscriptImportError",
    "TranscriptImporter",
    "TreeBuilder",
    "read_json_lines",
    "read_records",
    "stable_ids",
    "transcript_importer",
]

#: customType prefix of entries that keep records the importer did not map.
IMPORT_PREFIX = "import:"
#: Timestamps given to records that carry none (sources such as a plain messages list).
_NO_TIME_BASE = datetime(2000, 1, 1, tzinfo=timezone.utc)


def stable_ids(seed: str) -> Callable[[], str]:
    """Deterministic 8-hex entry ids: the n-th call returns ``sha1(f"{seed}:{n}")[:8]``, so
    the same seed (a transcript's path and format, a generated session's parameters) always
    gives the same ids — an import or a generated session is the same file byte for byte."""
    counter = itertools.count(1)
    return lambda: hashlib.sha1(f"{seed}:{next(counter)}".encode()).hexdigest()[:8]


class TranscriptImportError(ValueError):
    """A transcript that cannot be imported (shown to users as one line)."""


@dataclass
class ImportReport:
    """What an import read and what it made of it.

    Attributes:
        format: ``"pi"``, ``"claude-code"``, ``"codex"`` or ``"openai"``.
        source: the file read.
        output: the session file written (None for an in-memory import).
        records: source records by kind (``"assistant"``, ``"response_item:function_call"``…).
        entries: entries written by kind (``"message:user"``, ``"compaction"``, ``"custom"``…).
        custom: records kept as ``custom`` entries, by customType.
        invalid_lines: line numbers that were not JSON objects (kept as custom entries).
        orphans: records whose parent is not in the file (they start a new root).
        unanswered_calls: tool calls with no result in the file.
        unmatched_results: tool results whose call is not in the file.
        notes: anything else worth knowing, one sentence each.
        warnings: what the user asked for or may expect but did not fully happen (shown in
            :meth:`summary`, so ``pi-nb import`` prints them).
        generated_ids: tool calls / results without an id in the source, given a generated
            one (they never pair, so each counts as unanswered / unmatched).
        id_map: source record id → entry id.
        cost_notes: with ``costs``, one line per model litellm has no price for (its
            messages keep Pi's zero cost in the file: the cost is unknown, not 0);
            shown in :meth:`summary`; ``pi-nb import`` prints them on stderr too.
    """

    format: str
    source: str
    output: str | None = None
    records: Counter[str] = field(default_factory=Counter)
    entries: Counter[str] = field(default_factory=Counter)
    custom: Counter[str] = field(default_factory=Counter)
    invalid_lines: list[int] = field(default_factory=list)
    orphans: int = 0
    unanswered_calls: int = 0
    unmatched_results: int = 0
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    generated_ids: int = 0
    id_map: dict[str, str] = field(default_factory=dict)
    cost_notes: list[str] = field(default_factory=list)

    def to_dict(self, with_ids: bool = False) -> dict[str, Any]:
        """A JSON-ready dict (``id_map`` only when asked: it can be large)."""
        out: dict[str, Any] = {
            "format": self.format,
            "source": self.source,
            "output": self.output,
            "records": dict(sorted(self.records.items())),
            "entries": dict(sorted(self.entries.items())),
            "custom": dict(sorted(self.custom.items())),
            "invalidLines": list(self.invalid_lines),
            "orphans": self.orphans,
            "unansweredCalls": self.unanswered_calls,
            "unmatchedResults": self.unmatched_results,
            "notes": list(self.notes),
            "warnings": list(self.warnings),
            "generatedIds": self.generated_ids,
        }
        if self.cost_notes:  # only imports that priced an unknown model carry the key
            out["costNotes"] = list(self.cost_notes)
        if with_ids:
            out["idMap"] = dict(self.id_map)
        return out

    def summary(self) -> str:
        """One line: records read, entries written, what was kept as custom."""
        made = ", ".join(f"{n} {k}" for k, n in sorted(self.entries.items()))
        text = f"{self.format}: {sum(self.records.values())} records → {made or 'no entries'}"
        if self.custom:
            kept = ", ".join(f"{k} ×{n}" for k, n in sorted(self.custom.items()))
            text += f"; kept as custom: {kept}"
        if self.invalid_lines:
            text += f"; {len(self.invalid_lines)} invalid line(s) kept raw"
        for part in self.problems():
            text += f"; {part}"
        return text

    def problems(self) -> list[str]:
        """What a reader of the import must know, one phrase each: tool results without
        their call, calls without a result, ids the importer generated, records whose
        parent is missing, the :attr:`warnings` and the :attr:`cost_notes`."""
        out: list[str] = []
        if self.unmatched_results:
            out.append(
                f"{self.unmatched_results} tool result(s) without their call in the file "
                "(kept as toolResult messages)"
            )
        if self.unanswered_calls:
            out.append(f"{self.unanswered_calls} tool call(s) without a result in the file")
        if self.generated_ids:
            out.append(f"{self.generated_ids} tool call/result id(s) missing, generated")
        if self.orphans:
            out.append(f"{self.orphans} record(s) whose parent is not in the file")
        out.extend(self.warnings)
        out.extend(self.cost_notes)
        return out

    def frame(self) -> pd.DataFrame:
        """One row per source kind: ``kind, count`` plus one per entry kind written
        (:attr:`cost_notes` in ``frame.attrs["notes"]``)."""
        import pandas as pd

        rows = [{"side": "source", "kind": k, "count": n} for k, n in sorted(self.records.items())]
        rows += [
            {"side": "written", "kind": k, "count": n} for k, n in sorted(self.entries.items())
        ]
        rows += [{"side": "custom", "kind": k, "count": n} for k, n in sorted(self.custom.items())]
        frame = pd.DataFrame(rows, columns=["side", "kind", "count"])
        frame.attrs["notes"] = list(self.cost_notes)
        return frame

    def _repr_html_(self) -> str:
        def table(title: str, counts: Counter[str]) -> str:
            body = "".join(
                f"<tr><td>{html.escape(k)}</td><td style='text-align:right'>{n}</td></tr>"
                for k, n in sorted(counts.items())
            )
            return f"<table><tr><th colspan=2>{html.escape(title)}</th></tr>{body}</table>"

        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        extra = (
            f"<p>orphans: {self.orphans}, unanswered tool calls: {self.unanswered_calls}, "
            f"results without call: {self.unmatched_results}, invalid lines: "
            f"{len(self.invalid_lines)}</p>"
        )
        extra += "".join(f"<p><b>{html.escape(w)}</b></p>" for w in self.warnings)
        return (
            f"<div class='pi-nb-import'><b>Import ({html.escape(self.format)})</b> "
            f"{html.escape(self.source)} → {html.escape(str(self.output or 'memory'))}"
            f"<div style='display:flex;gap:2em'>{table('source records', self.records)}"
            f"{table('entries written', self.entries)}{table('kept as custom', self.custom)}"
            f"</div>{extra}<ul>{notes}</ul></div>"
        )


@dataclass
class ImportResult:
    """An imported session and its report."""

    tree: SessionTree
    report: ImportReport

    def _repr_html_(self) -> str:
        return self.report._repr_html_()

    def __repr__(self) -> str:
        return f"<ImportResult {self.report.summary()}>"


def read_json_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any, str]]:
    """``(line number, parsed value or None, raw line)`` for every non-blank line."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, raw in enumerate(handle, 1):
            line = raw.strip()
            if not line:
                continue
            try:
                value = json.loads(line)
            except ValueError:
                value = None
            yield number, value, line


def read_records(
    path: str | os.PathLike[str], report: ImportReport | None = None
) -> list[tuple[int, Any, str]]:
    """The records of a JSONL transcript: ``(line number, value or None, raw text)``.

    A file whose first line is a JSON value, or whose lines are mostly JSON objects, is read
    one record per line (a line that is not JSON — e.g. a truncated line — comes back with
    value None).
    Otherwise (a transcript saved pretty-printed, or JSON values written one after the
    other) it is read as concatenated JSON values (a top-level array gives its items),
    and ``report`` gets a warning saying so; when even that fails,
    :class:`TranscriptImportError` says so and where.
    """
    with open(path, encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    lines = [
        (number, raw.strip()) for number, raw in enumerate(text.splitlines(), 1) if raw.strip()
    ]
    if not lines:
        return []
    first_number = lines[0][0]
    if one_record_per_line([line for _, line in lines]):
        return list(read_json_lines(path))
    values = _concatenated(text, os.fspath(path), first_number)
    if report is not None:
        report.warnings.append(
            f"not one JSON record per line (line {first_number} is not a JSON value): "
            f"read as {len(values)} concatenated JSON value(s)"
        )
    return values


def one_record_per_line(lines: list[str]) -> bool:
    """JSONL: the first non-blank line is JSON, or most lines are JSON objects on their own
    (a truncated first line). A pretty-printed file has neither."""
    if not lines:
        return True
    try:
        json.loads(lines[0])
        return True
    except ValueError:
        pass
    objects = 0
    for line in lines:
        if line.startswith("{") and line.endswith("}"):
            with contextlib.suppress(ValueError):
                objects += isinstance(json.loads(line), dict)
    return objects * 2 > len(lines)


def _concatenated(text: str, path: str, first_line: int) -> list[tuple[int, Any, str]]:
    """JSON values one after the other (any whitespace between them), with their lines."""
    decoder = json.JSONDecoder()
    out: list[tuple[int, Any, str]] = []
    position, size = 0, len(text)
    while True:
        while position < size and text[position] in " \t\r\n\ufeff":
            position += 1
        if position >= size:
            return out
        line = text.count("\n", 0, position) + 1
        try:
            value, end = decoder.raw_decode(text, position)
        except ValueError as exc:
            where = exc.lineno if isinstance(exc, json.JSONDecodeError) else line
            column = exc.colno if isinstance(exc, json.JSONDecodeError) else 1
            raise TranscriptImportError(
                f"{path}: not one JSON record per line (line {first_line} is not JSON on its "
                f"own), and not concatenated JSON values either: invalid JSON at line {where}, "
                f"column {column}"
            ) from None
        items = value if isinstance(value, list) else [value]
        out.extend((line, item, "") for item in items)
        position = end


def _iso(value: Any) -> str | None:
    """A source timestamp as JavaScript's ISO form, or None when it is not a time."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = value / 1000 if value > 1e11 else value
        stamp = datetime.fromtimestamp(seconds, tz=timezone.utc)
    elif isinstance(value, str) and iso_to_ms(value) is not None:
        text = value.strip()
        text = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
        stamp = datetime.fromisoformat(text)
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=timezone.utc)
    else:
        return None
    utc = stamp.astimezone(timezone.utc)
    return utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TreeBuilder:
    """Collects Pi entries for one import, with deterministic ids, then writes the file.

    Ids are 8 hex characters derived from a hash of the source (so importing the same file
    twice gives the same session byte for byte). Entries may be edited until :meth:`write`.
    """

    def __init__(self, report: ImportReport, seed: str) -> None:
        self.report = report
        self.entries: list[Entry] = []
        self.by_id: dict[str, Entry] = {}
        self._seed = seed
        self._ids = stable_ids(seed)
        self._last_time: str | None = None
        self._origin: str | None = None

    def origin(self, fmt: str, timestamp: Any = None) -> Entry:
        """The first entry: a ``custom`` :data:`IMPORT_ORIGIN` naming the source format and
        the file-tool mapping compaction file lists use for this tree; every later root
        hangs under it, so every branch starts with it."""
        from ...compaction.prepare import FILE_TOOL_MAPPINGS, IMPORT_ORIGIN

        tools = fmt if fmt in FILE_TOOL_MAPPINGS else "pi"
        entry = self.add(
            "custom",
            None,
            self.time(timestamp),
            customType=IMPORT_ORIGIN,
            data={"format": fmt, "fileTools": tools},
        )
        self._origin = entry["id"]
        self._last_time = None  # the first record's own time still counts as the first
        return entry

    # --- ids and times ------------------------------------------------------------------

    def new_id(self) -> str:
        """A fresh, deterministic 8-hex id (:func:`stable_ids` of the seed, redrawn on a
        collision)."""
        while True:
            digest = self._ids()
            if digest not in self.by_id:
                return digest

    def time(self, value: Any = None) -> str:
        """The ISO timestamp for a record: its own, else one millisecond after the last."""
        stamp = _iso(value)
        if stamp is None:
            if self._last_time is None:
                base = _NO_TIME_BASE + timedelta(seconds=len(self.entries))
            else:
                base = datetime.fromisoformat(self._last_time.replace("Z", "+00:00"))
                base += timedelta(milliseconds=1)
            stamp = base.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        self._last_time = stamp
        return stamp

    # --- entries ------------------------------------------------------------------------

    def add(self, kind: str, parent: str | None, timestamp: str, **payload: Any) -> Entry:
        """Append an entry of any type (``parent`` is an entry id or None for a root)."""
        entry: Entry = {
            "type": kind,
            "id": self.new_id(),
            "parentId": parent if parent is not None else self._origin,
            "timestamp": timestamp,
            **payload,
        }
        self.entries.append(entry)
        self.by_id[entry["id"]] = entry
        return entry

    def message(self, message: Message, parent: str | None, timestamp: str) -> Entry:
        """A ``message`` entry; the message gets the entry's time in ms unless it has one."""
        message.setdefault("timestamp", iso_to_ms(timestamp))
        return self.add("message", parent, timestamp, message=message)

    def tool_id(self, value: Any, what: str = "call") -> str:
        """A source tool call / result id as a string; a missing one (None, "") gets a
        generated id that pairs with nothing, counted in the report — never "None"."""
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
            return str(value)
        self.report.generated_ids += 1
        return f"pinb-missing-{what}-id-{self.report.generated_ids}"

    def custom(self, kind: str, data: Any, parent: str | None, timestamp: str) -> Entry:
        """Keep a record the importer does not map: ``custom`` with ``import:<kind>``."""
        custom_type = IMPORT_PREFIX + kind
        self.report.custom[custom_type] += 1
        return self.add("custom", parent, timestamp, customType=custom_type, data=data)

    def invalid_line(self, number: int, raw: str, parent: str | None) -> Entry:
        """A line that is not a JSON object, kept verbatim."""
        self.report.invalid_lines.append(number)
        return self.custom("invalid-line", {"line": number, "text": raw}, parent, self.time())

    # --- writing ------------------------------------------------------------------------

    def _count(self) -> None:
        counts: Counter[str] = Counter()
        for entry in self.entries:
            kind = entry["type"]
            if kind == "message":
                kind = f"message:{entry['message'].get('role')}"
            counts[kind] += 1
        self.report.entries = counts

    def _pair_tool_calls(self) -> None:
        calls: set[str] = set()
        results: set[str] = set()
        for entry in self.entries:
            message = entry.get("message") if entry["type"] == "message" else None
            if not isinstance(message, dict):
                continue
            if message.get("role") == "assistant":
                for block in message.get("content") or []:
                    if isinstance(block, dict) and block.get("type") == "toolCall":
                        calls.add(str(block.get("id")))
            elif message.get("role") == "toolResult":
                results.add(str(message.get("toolCallId")))
        self.report.unanswered_calls = len(calls - results)
        self.report.unmatched_results = len(results - calls)

    def write(
        self,
        out: str | os.PathLike[str] | None,
        *,
        cwd: str | None,
        session_id: str | None = None,
        leaf: str | None = None,
        overwrite: bool = False,
        header: dict[str, Any] | None = None,
    ) -> SessionTree:
        """Write the session (or build it in memory when ``out`` is None).

        ``header`` supplies extra header fields (a native file's own header).
        A last ``custom`` entry ``import:report`` (the report's counts) is appended as a
        child of ``leaf`` (default: the last entry), so that the file's leaf — the last entry
        in file order — is on the branch the source was on.
        """
        from ...session.listing import validate_session_id
        from ...session.tree import SessionTree

        if leaf is None and self.entries:
            leaf = self.entries[-1]["id"]
        self._count()
        self._pair_tool_calls()
        self.report.output = os.path.abspath(os.fspath(out)) if out is not None else None
        self.report.entries["custom"] += 1  # the import:report entry below
        self.add(
            "custom",
            leaf,
            self._last_time or self.time(),
            customType=IMPORT_PREFIX + "report",
            # No absolute paths: importing the same file anywhere gives the same session.
            data={
                **self.report.to_dict(),
                "source": os.path.basename(self.report.source),
                "output": None,
            },
        )
        first_time = self.entries[0]["timestamp"]
        try:
            if session_id is not None:
                validate_session_id(session_id)
        except Exception:
            session_id = None
        sid = session_id or hashlib.sha1(self._seed.encode()).hexdigest()[:32]
        header = {
            **(header or {}),
            "type": "session",
            "version": CURRENT_SESSION_VERSION,
            "id": sid,
            "timestamp": (header or {}).get("timestamp") or first_time,
            "cwd": cwd or os.getcwd(),
        }
        if out is None:
            return SessionTree(header, list(self.entries), None)
        path = Path(out)
        if path.exists() and path.stat().st_size > 0:
            if not overwrite:
                raise TranscriptImportError(f"{path}: output file already exists")
            path.unlink()
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written by the session store's writer (redacted, 0600, atomic) but not through
        # SessionTree.create, so the header keeps the source's id and time, and the file is
        # complete even without a user or assistant message.
        from ...session.jsonl import Appender

        Appender(os.fspath(path)).create([header, *self.entries])
        return SessionTree.open(path)


def finish_compactions(builder: TreeBuilder, compactions: list[Entry], source: str) -> None:
    """Fill what an agent's own compaction record does not say, the same way for every
    importer (both derived, and said so in the report's notes):

    - ``firstKeptEntryId``: the first entry after the compaction (its first child in file
      order) — Claude Code and Codex keep nothing of the old history verbatim, so the
      projection at the leaf is [summary, messages after]; a compaction with nothing after
      it keeps its own id.
    - ``tokensBefore`` (when the record had no figure: entries carry ``None`` until here):
      Pi's estimate of the context on the compaction's branch just before it.
    """
    from ...projection import build_session_projection
    from ...tokens import estimate_projected_context_tokens

    first_child: dict[str, str] = {}
    for entry in builder.entries:
        parent = entry.get("parentId")
        if isinstance(parent, str) and parent not in first_child:
            first_child[parent] = entry["id"]
    for entry in compactions:
        entry["firstKeptEntryId"] = first_child.get(entry["id"], entry["id"])
        if entry.get("tokensBefore") is None:
            path: list[Entry] = []
            cursor = entry.get("parentId")
            while isinstance(cursor, str) and cursor in builder.by_id:
                path.append(builder.by_id[cursor])
                cursor = builder.by_id[cursor].get("parentId")
            path.reverse()
            projection = build_session_projection(path) if path else None
            tokens = estimate_projected_context_tokens(projection, path).tokens if projection else 0
            entry["tokensBefore"] = int(tokens)
            entry.setdefault("details", {})["tokensBeforeEstimated"] = True
            builder.report.notes.append(
                f"compaction {entry['id']}: {source} recorded no token count; tokensBefore "
                f"{tokens} is Pi's estimate of the context before it"
            )
    if compactions:
        builder.report.notes.append(
            f"{len(compactions)} {source} compaction(s) imported as Pi compactions: summary = "
            f"{source}'s own summary, firstKeptEntryId = the first entry after the compaction "
            "(derived: nothing before it is kept verbatim)"
        )


def pi_usage(
    input_tokens: int = 0,
    output_tokens: int = 0,
    cache_read: int = 0,
    cache_write: int = 0,
    *,
    model: str | None = None,
    costs: bool = False,
    report: ImportReport | None = None,
) -> dict[str, Any]:
    """A Pi usage dict; with ``costs`` priced through litellm's table
    (:func:`~pi_nb.llm.price_usage`, cached input at the cache-read rate).

    A model without a price keeps Pi's zero costs in the file (what Pi itself records; NaN
    is not JSON) and its note goes to ``report.cost_notes`` once per model, so that the
    import says the cost is unknown instead of summing a made-up 0.
    """
    usage = empty_usage()
    usage.update(
        input=int(input_tokens or 0),
        output=int(output_tokens or 0),
        cacheRead=int(cache_read or 0),
        cacheWrite=int(cache_write or 0),
    )
    usage["totalTokens"] = (
        usage["input"] + usage["output"] + usage["cacheRead"] + usage["cacheWrite"]
    )
    if costs and model:
        from ...llm import price_usage

        cost, note = price_usage(model, usage)
        if cost is not None:
            usage["cost"] = cost
        if note and report is not None and note not in report.cost_notes:
            report.cost_notes.append(note)
    return usage


def text_blocks(text: Any) -> list[dict[str, Any]]:
    """``[{"type": "text", "text": ...}]`` for a non-empty string, else []."""
    return [{"type": "text", "text": text}] if isinstance(text, str) and text else []


def file_seed(path: str | os.PathLike[str], fmt: str) -> str:
    """The id seed of an import: the format plus a hash of the file's bytes."""
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return f"{fmt}:{digest}"


def existing_source(src: str | os.PathLike[str]) -> str:
    """``src`` as a path string; :class:`TranscriptImportError` when it is not a file."""
    source = os.fspath(src)
    if not os.path.isfile(source):
        raise TranscriptImportError(f"{source}: no such file")
    return source


def start_import(src: str | os.PathLike[str], fmt: str) -> tuple[str, ImportReport, TreeBuilder]:
    """The source path, an empty report and the entry builder of a ``fmt`` import of ``src``
    (:class:`TranscriptImportError` when it is not a file)."""
    source = existing_source(src)
    report = ImportReport(fmt, os.path.abspath(source))
    return source, report, TreeBuilder(report, file_seed(source, fmt))


def image_block(url: str) -> dict[str, Any]:
    """A Pi image block for a ``data:…;base64,…`` URL, else a text block naming the URL."""
    match = re.match(r"data:([^;]+);base64,(.*)", url, re.S)
    if match:
        return {"type": "image", "mimeType": match.group(1), "data": match.group(2)}
    return {"type": "text", "text": f"[image: {url}]"}


#: The entry reader of a format (its ``_Importer``): built from the builder and ``costs``.
_Reader = TypeVar("_Reader")


class TranscriptImporter(Protocol):
    """Every importer's signature (see :func:`~pi_nb.research.importers.import_transcript`)."""

    def __call__(
        self, src: StrPath, out: StrPath | None = None, *, costs: bool = False, overwrite: bool = False
    ) -> ImportResult: ...


def transcript_importer(
    fmt: str, reader: Callable[[TreeBuilder, bool], _Reader]
) -> Callable[[Callable[[str, ImportReport, _Reader], dict[str, Any]]], TranscriptImporter]:
    """Make ``body(source, report, reader)`` an importer of ``fmt`` transcripts with every
    importer's signature ``(src, out=None, *, costs=False, overwrite=False)``.

    The importer starts the import (:func:`start_import`; ``reader`` is
    ``reader(builder, costs)``), lets ``body`` read ``source`` into the builder, and writes
    the session with the :meth:`TreeBuilder.write` keywords ``body`` returns (``cwd``,
    ``session_id``, ``leaf``). Declared once so that the importers' shared opening and
    ending, and their keywords, are not re-written in each.
    """

    def wrap(body: Callable[[str, ImportReport, _Reader], dict[str, Any]]) -> TranscriptImporter:
        def run(
            src: StrPath, out: StrPath | None = None, *, costs: bool = False, overwrite: bool = False
        ) -> ImportResult:
            source, report, builder = start_import(src, fmt)
            placement = body(source, report, reader(builder, costs))
            tree = builder.write(out, overwrite=overwrite, **placement)
            return ImportResult(tree, report)

        # Not functools.wraps: its __wrapped__ would make inspect.signature show the body's.
        for name in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(run, name, getattr(body, name))
        return run

    return wrap
