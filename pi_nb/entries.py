"""Entry and message shapes, ids and timestamps, with JavaScript-compatible helpers.

Entries are plain dicts exactly as they appear on disk (so unknown fields survive a round
trip); the TypedDicts below (:data:`ENTRY_SHAPES`) are the known shapes, which the typed
appends of :class:`~pi_nb.session.tree.SessionTree` return. :func:`path_to` walks their
``parentId`` links. This is the bottom layer of pi_nb (it imports nothing of pi_nb): the
session store, the projection, the token accounting and the message conversion all build on
it, which is why it sits beside ``session/`` rather than inside it.
"""

# No ``from __future__ import annotations`` here: Python 3.11's TypedDict sees NotRequired
# only in evaluated annotations (with postponed ones every key would count as required).

import json
import math
import os
import re
import secrets
import time
import uuid
from collections.abc import Callable, Container, Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any, Literal, NotRequired, TypedDict

import msgspec

CURRENT_SESSION_VERSION = 3

ENTRY_TYPES = (
    "message",
    "thinking_level_change",
    "model_change",
    "compaction",
    "branch_summary",
    "custom",
    "custom_message",
    "label",
    "session_info",
    "usage",
    "context_edit",
)
THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh")

Entry = dict[str, Any]
Message = dict[str, Any]


class LightHead(msgspec.Struct, gc=False):
    """Stands for the message of a light entry (one loaded lazily): only its role is known.

    Not a dict, so code that needs the message itself cannot mistake it for one; untracked
    by the garbage collector, so a light entry holding it is untracked too.
    """

    role: Any = None


def message_role(entry: Entry) -> Any:
    """The role of a message entry's message, full or light (None when it has none)."""
    message = entry.get("message")
    if isinstance(message, dict):
        return message.get("role")
    if type(message) is LightHead:
        return message.role
    return None


class SessionHeader(TypedDict, total=False):
    type: Literal["session"]
    version: int
    id: str
    timestamp: str
    cwd: str
    parentSession: str


class Usage(TypedDict, total=False):
    input: int
    output: int
    cacheRead: int
    cacheWrite: int
    totalTokens: int
    cost: dict[str, float]


class EntryBase(TypedDict):
    """The fields every non-header line has (Pi's entry base)."""

    type: str
    id: str
    parentId: str | None
    timestamp: str


class MessageEntry(EntryBase):
    message: Message


class ThinkingLevelChangeEntry(EntryBase):
    thinkingLevel: str


class ModelChangeEntry(EntryBase):
    provider: str
    modelId: str


class CompactionEntry(EntryBase):
    summary: str
    firstKeptEntryId: str
    tokensBefore: int
    details: NotRequired[Any]
    usage: NotRequired[Usage]
    fromHook: NotRequired[bool]
    systemMessage: NotRequired[Message]


class BranchSummaryEntry(EntryBase):
    fromId: str
    summary: str
    details: NotRequired[Any]
    usage: NotRequired[Usage]
    fromHook: NotRequired[bool]


class CustomEntry(EntryBase):
    customType: str
    data: NotRequired[Any]


class CustomMessageEntry(EntryBase):
    customType: str
    content: str | list[dict[str, Any]]
    display: bool
    details: NotRequired[Any]


class LabelEntry(EntryBase):
    targetId: str
    label: NotRequired[str]


class SessionInfoEntry(EntryBase):
    name: NotRequired[str]


class UsageEntry(EntryBase):
    kind: str
    provider: str
    model: str
    usage: Usage
    note: NotRequired[str]


class ContextEditEntry(EntryBase):
    targetId: str
    replacement: dict[str, Any] | None


#: The payload shape of each known entry type (tests check written and Pi-written entries
#: against them); an entry of another type is kept as it is.
ENTRY_SHAPES: dict[str, type] = {
    "message": MessageEntry,
    "thinking_level_change": ThinkingLevelChangeEntry,
    "model_change": ModelChangeEntry,
    "compaction": CompactionEntry,
    "branch_summary": BranchSummaryEntry,
    "custom": CustomEntry,
    "custom_message": CustomMessageEntry,
    "label": LabelEntry,
    "session_info": SessionInfoEntry,
    "usage": UsageEntry,
    "context_edit": ContextEditEntry,
}


def empty_usage() -> Usage:
    """A zero usage record in Pi's shape."""
    return {
        "input": 0,
        "output": 0,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 0,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }


# --- ids and clocks ---------------------------------------------------------------------


def new_entry_id(taken: Container[str] = (), rand: Callable[[], str] | None = None) -> str:
    """An 8-hex id like Pi's (first 8 chars of a random UUID), redrawn on collision."""
    draw = rand or (lambda: secrets.token_hex(4))
    for _ in range(100):
        candidate = draw()
        if candidate not in taken:
            return candidate
    return str(uuid.uuid4())


def new_session_id() -> str:
    """A UUID v7 (time-ordered), as Pi 1.3 uses for session ids."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= ((rand >> 62) & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    return str(uuid.UUID(int=value))


def now_iso() -> str:
    """Current UTC time as JavaScript's `toISOString()` writes it (ms precision, `Z`)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso_to_ms(value: Any) -> int | None:
    """`new Date(value).getTime()` for ISO strings; None where JavaScript gives NaN."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        # ECMAScript reads a date-time without offset as local time.
        parsed = parsed.astimezone()
    return (parsed - _EPOCH) // timedelta(milliseconds=1)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


# --- JavaScript-compatible measurements ----------------------------------------------------


def js_len(text: str) -> int:
    """Length in UTF-16 code units, as JavaScript's `.length` counts."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _js_number(value: float) -> str:
    """Number::toString as ECMAScript defines it (shortest round-trip digits)."""
    if value != value or value in (math.inf, -math.inf):
        return "null"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    # repr gives the shortest round-tripping digits; re-lay them out the JavaScript way.
    digits, exponent = _shortest_digits(abs(value))
    k = len(digits)
    n = exponent + k  # position of the decimal point
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    e = n - 1
    mantissa = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{sign}{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"


def _shortest_digits(value: float) -> tuple[str, int]:
    """(significant digits, exponent) with value = int(digits) * 10**exponent."""
    text = repr(value)
    mantissa, _, exp = text.partition("e")
    exponent = int(exp) if exp else 0
    whole, _, frac = mantissa.partition(".")
    if frac == "0":
        frac = ""
    digits = (whole + frac).lstrip("0")
    exponent -= len(frac)
    stripped = digits.rstrip("0")
    exponent += len(digits) - len(stripped)
    return stripped or "0", exponent


_LONE_SURROGATE = re.compile("[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]")


def _js_string(text: str) -> str:
    out = json.dumps(text, ensure_ascii=False)
    if not text.isascii() and _LONE_SURROGATE.search(out):
        out = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", out)
    return out


class _Raw(str):
    """Already-serialized JSON text on js_stringify's work stack."""


def js_stringify(value: Any) -> str:
    """`JSON.stringify(value)`: compact, keys in insertion order, JS number formatting.

    Iterative, so any nesting depth works (no RecursionError on hostile values)."""
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if type(item) is _Raw:
            out.append(item)
        elif item is None or item is True or item is False:
            out.append(json.dumps(item))
        elif isinstance(item, str):
            out.append(_js_string(item))
        elif isinstance(item, int):
            # JavaScript numbers are doubles: big integers lose digits the same way.
            out.append(str(item) if abs(item) <= 2**53 else _js_number(float(item)))
        elif isinstance(item, float):
            out.append(_js_number(item))
        elif isinstance(item, dict):
            stack.append(_Raw("}"))
            pairs = list(item.items())
            for index in range(len(pairs) - 1, -1, -1):
                key, child = pairs[index]
                stack.append(child)
                stack.append(_Raw(("," if index else "") + _js_string(str(key)) + ":"))
            stack.append(_Raw("{"))
        elif isinstance(item, (list, tuple)):
            stack.append(_Raw("]"))
            for index in range(len(item) - 1, -1, -1):
                stack.append(item[index])
                if index:
                    stack.append(_Raw(","))
            stack.append(_Raw("["))
        else:
            out.append(_js_string(str(item)))
    return "".join(out)


def js_numbers(value: Any) -> Any:
    """``value`` with integral floats as ints, as JavaScript holds them (``0.0`` is ``0``).

    Containers are copied only where something changes.
    """
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) <= 2**53 else value
    if isinstance(value, dict):
        return _js_numbers_in(value, value.items(), dict)
    if isinstance(value, list):
        return _js_numbers_in(value, enumerate(value), list)
    return value


def _js_numbers_in(
    container: Any, items: Iterable[tuple[Any, Any]], copy: Callable[[Any], Any]
) -> Any:
    """:func:`js_numbers` of each ``(key, item)`` of ``container``; a ``copy`` of it is made
    at the first item that changes, so an unchanged container is returned as it is."""
    out = None
    for key, item in items:
        new = js_numbers(item)
        if new is not item:
            if out is None:
                out = copy(container)
            out[key] = new
    return container if out is None else out


def dumps_line(entry: Any) -> str:
    """Serialize one entry as a JSON line the way Pi writes it (no trailing newline)."""
    return json.dumps(entry, separators=(",", ":"), ensure_ascii=False)


def path_to(leaf: Entry | None, by_id: Mapping[str, Entry]) -> list[Entry]:
    """Root→``leaf`` through ``parentId`` links, as Pi walks them: an empty, missing or
    unknown parent ends the walk; so does the first repeated entry (a parent cycle in a
    hand-edited file)."""
    if leaf is None:
        return []
    get = by_id.get
    path = [leaf]
    append = path.append
    node = leaf
    budget = len(by_id) + 1  # more steps than entries can only mean a cycle
    try:
        while budget:
            parent = node.get("parentId")
            node = get(parent) if parent else None
            if node is None:
                path.reverse()
                return path
            append(node)
            budget -= 1
    except TypeError:  # an unhashable parentId
        pass
    return _path_to_checked(leaf, by_id)


def _path_to_checked(leaf: Entry, by_id: Mapping[str, Entry]) -> list[Entry]:
    path: list[Entry] = []
    seen: set[int] = set()
    node: Entry | None = leaf
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        path.append(node)
        parent = node.get("parentId")
        node = by_id.get(parent) if isinstance(parent, str) and parent else None
    path.reverse()
    return path
