"""Tools the agent can call: a small dataclass, tools made from Python functions, and the
four default tools (read, write, edit, bash) bound to a working folder.

A tool's ``fn`` receives the call's arguments as keyword arguments. It may return a string,
a list of content blocks, a :class:`ToolResult`, or any other value (rendered as JSON). An
exception raised by the tool becomes an ``isError`` result carrying the exception's
message, as in Pi's agent loop.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import inspect
import json
import os
import re
import signal
import stat
import subprocess
import threading
import time
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "DEFAULT_BASH_TIMEOUT",
    "DEFAULT_OUTPUT_CAP",
    "Tool",
    "ToolError",
    "ToolResult",
    "current_abort_event",
    "default_tools",
    "redact_secrets",
    "to_openai_tools",
    "tool",
    "tool_from_function",
    "truncate_output",
    "validate_arguments",
]

#: Characters of tool output kept (head + tail) before a truncation note is inserted.
DEFAULT_OUTPUT_CAP = 50_000
#: Seconds a bash command may run unless the call or the tool says otherwise.
DEFAULT_BASH_TIMEOUT = 120.0
#: Lines ``read`` returns when no limit is given.
DEFAULT_READ_LINES = 2000

ExecutionMode = Literal["parallel", "sequential"]


class ToolError(Exception):
    """Raise from a tool to report a failure to the model (an ``isError`` result)."""


@dataclass
class ToolResult:
    """What a tool returns when it needs more than text: content blocks, details, error flag."""

    content: list[dict[str, Any]]
    details: Any = None
    is_error: bool = False

    @classmethod
    def text(cls, text: str, *, details: Any = None, is_error: bool = False) -> ToolResult:
        return cls([{"type": "text", "text": text}], details, is_error)


@dataclass
class Tool:
    """A tool the model may call.

    Attributes:
        name: the name the model uses.
        description: what the tool does (sent to the model).
        parameters: JSON schema of the arguments (an ``object`` schema).
        fn: called with the validated arguments as keyword arguments.
        execution_mode: ``"parallel"`` (default) or ``"sequential"``; one sequential tool in a
            batch makes the whole batch run one call at a time.
        timeout: seconds before the call is reported as timed out (None: no limit).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any]
    execution_mode: ExecutionMode = "parallel"
    timeout: float | None = None

    def __post_init__(self) -> None:
        if self.execution_mode not in ("parallel", "sequential"):
            raise ValueError(
                f"execution_mode must be 'parallel' or 'sequential', not {self.execution_mode!r}"
            )

    def to_openai(self) -> dict[str, Any]:
        """The tool in OpenAI's function-calling format (what litellm sends)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def declaration(self) -> dict[str, Any]:
        """Pi's tool declaration: ``{name, description, parameters}``."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def __call__(self, **kwargs: Any) -> Any:
        return self.fn(**kwargs)

    def __repr__(self) -> str:
        return f"<Tool {self.name} ({self.execution_mode})>"


def to_openai_tools(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    """Tools in OpenAI's function-calling format."""
    return [t.to_openai() for t in tools]


# --- JSON schema from a Python signature ---------------------------------------------------

_SIMPLE_TYPES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    tuple: "array",
    set: "array",
    dict: "object",
}


def _schema_for(annotation: Any) -> dict[str, Any]:
    """JSON schema for a type hint (unknown hints give an unconstrained schema)."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}
    if annotation is type(None):
        return {"type": "null"}
    if annotation in _SIMPLE_TYPES:
        return {"type": _SIMPLE_TYPES[annotation]}
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        values = list(args)
        schema: dict[str, Any] = {"enum": values}
        kinds = {type(v) for v in values}
        if len(kinds) == 1 and next(iter(kinds)) in _SIMPLE_TYPES:
            schema["type"] = _SIMPLE_TYPES[next(iter(kinds))]
        return schema
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _schema_for(options[0])
        return {"anyOf": [_schema_for(a) for a in options]}
    if origin in (list, tuple, set, Sequence, typing.List, typing.Set):  # noqa: UP006
        schema = {"type": "array"}
        if args and args[0] is not Ellipsis:
            schema["items"] = _schema_for(args[0])
        return schema
    if origin in (dict, Mapping, typing.Dict):  # noqa: UP006
        schema = {"type": "object"}
        if len(args) == 2:
            schema["additionalProperties"] = _schema_for(args[1])
        return schema
    return {}


_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Params)\s*:?\s*$", re.I)
_OTHER_SECTION = re.compile(
    r"^\s*(Returns?|Raises?|Yields?|Examples?|Notes?|See Also|Attributes)\s*:?\s*$", re.I
)
_GOOGLE_PARAM = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^\s*:param\s+(?:[\w\[\], |]+\s+)?(\w+)\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(description, {param: description}) from a Google-, numpy- or Sphinx-style docstring."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    current: str | None = None
    mode = "description"
    indent_of_params: int | None = None
    for raw in lines:
        line = raw.rstrip()
        sphinx = _SPHINX_PARAM.match(line)
        if sphinx:
            current = sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            mode = "params"
            continue
        if _SECTION.match(line):
            mode, current, indent_of_params = "params", None, None
            continue
        if _OTHER_SECTION.match(line) or re.match(r"^\s*-{3,}\s*$", line):
            if mode == "params" and re.match(r"^\s*-{3,}\s*$", line):
                continue  # numpy underline below "Parameters"
            mode, current = "other", None
            continue
        if mode == "description":
            if line.strip().startswith(":"):
                mode = "other"
                continue
            description.append(line)
        elif mode == "params":
            if not line.strip():
                current = None
                continue
            indent = len(line) - len(line.lstrip())
            match = _GOOGLE_PARAM.match(line)
            numpy_head = re.match(r"^\s*(\w+)\s+:(\s*[\w\[\], |.]+)?$", line)
            if numpy_head and (indent_of_params is None or indent <= indent_of_params):
                current = numpy_head.group(1)
                params[current] = ""
                indent_of_params = indent
            elif match and (indent_of_params is None or indent <= indent_of_params):
                current = match.group(1)
                params[current] = match.group(2).strip()
                indent_of_params = indent
            elif current is not None:
                params[current] = (params[current] + " " + line.strip()).strip()
    text = "\n".join(description).strip()
    return text, params


def tool_from_function(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    execution_mode: ExecutionMode = "parallel",
    timeout: float | None = None,
) -> Tool:
    """A :class:`Tool` from a Python function.

    The JSON schema comes from the signature and its type hints; descriptions from the
    docstring (first part = tool description; ``Args:`` / ``:param x:`` / numpy
    ``Parameters`` = parameter descriptions). Parameters without a default are required.
    ``*args`` are not supported; ``**kwargs`` allows extra properties.
    """
    signature = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = {}
    doc_description, doc_params = parse_docstring(inspect.getdoc(fn))
    properties: dict[str, Any] = {}
    required: list[str] = []
    extra_allowed = False
    for param in signature.parameters.values():
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            raise TypeError(f"{fn.__name__}: *{param.name} cannot be a tool parameter")
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            extra_allowed = True
            continue
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(f"{fn.__name__}: positional-only {param.name} cannot be a tool parameter")
        schema = dict(_schema_for(hints.get(param.name, param.annotation)))
        if doc_params.get(param.name):
            schema["description"] = doc_params[param.name]
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
        elif param.default is not None and _json_safe(param.default):
            schema["default"] = param.default
        properties[param.name] = schema
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    if not extra_allowed:
        parameters["additionalProperties"] = False
    return Tool(
        name=name or fn.__name__,
        description=description if description is not None else doc_description,
        parameters=parameters,
        fn=fn,
        execution_mode=execution_mode,
        timeout=timeout,
    )


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    execution_mode: ExecutionMode = "parallel",
    timeout: float | None = None,
) -> Any:
    """Decorator form of :func:`tool_from_function` (``@tool`` or ``@tool(timeout=5)``)."""

    def wrap(f: Callable[..., Any]) -> Tool:
        return tool_from_function(
            f, name=name, description=description, execution_mode=execution_mode, timeout=timeout
        )

    return wrap(fn) if fn is not None else wrap


def _json_safe(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


# --- argument validation ---------------------------------------------------------------------

_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def _check(value: Any, schema: Mapping[str, Any], where: str, errors: list[str]) -> Any:
    """Check one value; returns it, coerced where a model's near-miss is unambiguous."""
    if not isinstance(schema, Mapping) or not schema:
        return value
    if "anyOf" in schema:
        for option in schema["anyOf"]:
            attempt: list[str] = []
            coerced = _check(value, option, where, attempt)
            if not attempt:
                return coerced
        errors.append(f"{where}: does not match any allowed type")
        return value
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind else []
    if kinds and not any(_JSON_TYPES.get(k, lambda v: True)(value) for k in kinds):
        coerced = _coerce(value, kinds)
        if coerced is _NO:
            errors.append(f"{where}: must be {' or '.join(kinds)}")
            return value
        value = coerced
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: must be one of {schema['enum']}")
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        value = [_check(v, schema["items"], f"{where}[{i}]", errors) for i, v in enumerate(value)]
    if isinstance(value, dict) and "properties" in schema:
        value = _check_object(value, schema, where, errors)
    return value


_NO = object()


def _coerce(value: Any, kinds: list[str]) -> Any:
    if isinstance(value, str):
        text = value.strip()
        if "integer" in kinds and re.fullmatch(r"-?\d+", text):
            return int(text)
        if "number" in kinds:
            try:
                return float(text)
            except ValueError:
                pass
        if "boolean" in kinds and text.lower() in ("true", "false"):
            return text.lower() == "true"
    if "number" in kinds and isinstance(value, int) and not isinstance(value, bool):
        return value
    if "integer" in kinds and isinstance(value, float) and value.is_integer():
        return int(value)
    return _NO


def _check_object(value: dict[str, Any], schema: Mapping[str, Any], where: str, errors: list[str]) -> dict[str, Any]:
    properties = schema.get("properties") or {}
    out = dict(value)
    prefix = f"{where}." if where else ""
    for key in schema.get("required") or []:
        if key not in value:
            errors.append(f"{prefix}{key}: required")
    if schema.get("additionalProperties") is False:
        for key in value:
            if key not in properties:
                errors.append(f"{prefix}{key}: unknown parameter")
    for key, sub in properties.items():
        if key in value:
            out[key] = _check(value[key], sub, f"{prefix}{key}", errors)
    return out


def validate_arguments(tool: Tool, arguments: Any) -> dict[str, Any]:
    """The call's arguments checked against the tool's schema (ValueError when invalid).

    Near-miss values are coerced (``"3"`` for an integer, ``"true"`` for a boolean).
    """
    if not isinstance(arguments, dict):
        raise ValueError(f'Validation failed for tool "{tool.name}": arguments must be an object')
    errors: list[str] = []
    checked = _check_object(arguments, tool.parameters or {}, "", errors)
    if errors:
        raise ValueError(f'Validation failed for tool "{tool.name}":\n' + "\n".join(f"  - {e}" for e in errors))
    return checked


# --- results ---------------------------------------------------------------------------------


def result_from_value(value: Any) -> ToolResult:
    """Whatever a tool returned, as a ToolResult."""
    if isinstance(value, ToolResult):
        return value
    if value is None:
        return ToolResult.text("")
    if isinstance(value, str):
        return ToolResult.text(value)
    if isinstance(value, list) and all(isinstance(b, dict) and "type" in b for b in value):
        return ToolResult(list(value))
    if isinstance(value, dict) and value.get("type") in ("text", "image"):
        return ToolResult([value])
    try:
        text = json.dumps(value, ensure_ascii=False, indent=2, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return ToolResult.text(text, details=value if _json_safe(value) else None)


def truncate_output(text: str, cap: int = DEFAULT_OUTPUT_CAP) -> tuple[str, bool]:
    """Keep the head and the tail of ``text`` when it is longer than ``cap`` characters."""
    if cap <= 0 or len(text) <= cap:
        return text, False
    head = cap * 2 // 5
    tail = cap - head
    dropped = len(text) - head - tail
    note = f"\n\n[... {dropped} characters truncated ({len(text)} in total) ...]\n\n"
    return text[:head] + note + text[-tail:], True


# --- abort signal seen by running tools ------------------------------------------------------

_ABORT: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "pi_nb_tool_abort", default=None
)


def current_abort_event() -> threading.Event | None:
    """Inside a tool call: the event that is set when the run is aborted (else None)."""
    return _ABORT.get()


def set_abort_event(event: threading.Event | None) -> contextvars.Token[threading.Event | None]:
    return _ABORT.set(event)


def reset_abort_event(token: contextvars.Token[threading.Event | None]) -> None:
    try:
        _ABORT.reset(token)
    except ValueError:  # set in another context
        _ABORT.set(None)


# --- secrets ---------------------------------------------------------------------------------

from ..redact import SECRET_ENV_NAME as _SECRET_NAME  # noqa: E402  (one list: the redactor's)


def secret_values(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{value: NAME}`` for environment variables that look like credentials."""
    env = os.environ if env is None else env
    out: dict[str, str] = {}
    for key, value in env.items():
        if _SECRET_NAME.search(key) and isinstance(value, str) and len(value) >= 8:
            out[value] = key
    return out


def redact_secrets(text: str, env: Mapping[str, str] | None = None) -> str:
    """Replace the values of credential-like environment variables in ``text`` (and, through
    :func:`pi_nb.redact.redact`, API keys by shape and Authorization / Bearer values)."""
    for value, name in sorted(secret_values(env).items(), key=lambda kv: -len(kv[0])):
        if value in text:
            text = text.replace(value, f"[redacted ${name}]")
    from ..redact import redact

    return redact(text, env)  # plus key shapes, bearer tokens and Authorization headers


# --- per-file mutation queue ------------------------------------------------------------------

# The tools of one reply run in parallel threads; two read-modify-write calls on one file
# would otherwise both read the old text and the second write would drop the first edit.
# As Pi's ``withFileMutationQueue``: mutations of one file (keyed by its real path, so two
# names of one file share a queue) run one at a time in arrival order; other files stay
# parallel. The queue is process-wide: two tool sets may point at the same file.
_QUEUE_GUARD = threading.Lock()
_QUEUES: dict[str, list[threading.Event]] = {}


def mutation_key(path: str) -> str:
    """The queue key of a file: its absolute path with every symlink resolved."""
    return os.path.realpath(path)


def _leave_queue(key: str, turn: threading.Event) -> None:
    with _QUEUE_GUARD:
        waiting = _QUEUES[key]
        was_head = waiting[0] is turn
        waiting.remove(turn)
        if not waiting:
            del _QUEUES[key]
        elif was_head:
            waiting[0].set()


@contextlib.contextmanager
def file_mutation_queue(path: str) -> typing.Iterator[None]:
    """Hold the mutation queue of ``path``'s file for the duration of the block.

    A call still waiting when the run is aborted leaves the queue without touching the file
    (ToolError "Operation aborted").
    """
    key = mutation_key(path)
    turn = threading.Event()
    with _QUEUE_GUARD:
        waiting = _QUEUES.setdefault(key, [])
        waiting.append(turn)
        if len(waiting) == 1:
            turn.set()
    abort = current_abort_event()
    while not turn.wait(0.05):
        if abort is not None and abort.is_set():
            _leave_queue(key, turn)
            raise ToolError("Operation aborted")
    try:
        yield
    finally:
        _leave_queue(key, turn)


# --- default tools ---------------------------------------------------------------------------


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


@dataclass
class _Workspace:
    folder: str
    output_cap: int = DEFAULT_OUTPUT_CAP
    bash_timeout: float = DEFAULT_BASH_TIMEOUT
    env: Mapping[str, str] | None = None
    shell: str = field(default_factory=lambda: os.environ.get("SHELL") or "/bin/sh")
    #: when set, read/write/edit only touch files under this folder (see :func:`default_tools`)
    root: str | None = None

    def resolve(self, path: str) -> str:
        """The absolute path of a call's ``path`` (confined: real, checked to be in root)."""
        if not isinstance(path, str) or not path.strip():
            raise ToolError("path must be a non-empty string")
        expanded = os.path.expanduser(path.strip())
        lexical = os.path.normpath(os.path.join(self.folder, expanded))
        if self.root is None:
            return lexical
        root = self._real_root()
        real = os.path.realpath(lexical)
        if not _inside(real, root):
            if _inside(lexical, self.root) or _inside(lexical, root):
                raise ToolError(
                    f"Refused: {path} leads through a symlink to {real}, outside the allowed "
                    f"folder {self.root}"
                )
            raise ToolError(f"Refused: {path} is outside the allowed folder {self.root}")
        return real

    def _real_root(self) -> str:
        assert self.root is not None
        root = os.path.realpath(self.root)
        if not os.path.isdir(root):
            raise ToolError(f"The allowed folder {self.root} does not exist")
        return root

    def open(self, path: str, flags: int, *, make_folders: bool = False) -> int:
        """A file descriptor for ``path`` (from :meth:`resolve`).

        Confined, the path is opened component by component from the root with
        ``O_NOFOLLOW``: a symlink put in place after :meth:`resolve` checked the path is
        refused instead of followed.
        """
        if self.root is None:
            if make_folders and os.path.dirname(path):
                try:
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                except FileExistsError:  # a file where a folder of the path should be
                    raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR)) from None
            return os.open(path, flags, 0o666)
        root = self._real_root()
        parts = os.path.relpath(path, root).split(os.sep)
        if parts == ["."]:
            raise ToolError(f"{self.root} is a directory, not a file")
        folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for part in parts[:-1]:
                child = self._descend(folder, part, path, make_folders)
                os.close(folder)
                folder = child
            try:
                fd = os.open(parts[-1], flags | os.O_NOFOLLOW, 0o666, dir_fd=folder)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise ToolError(f"Refused: {path} became a symlink while the tool ran") from None
                raise
        finally:
            os.close(folder)
        info = os.fstat(fd)
        if flags & (os.O_WRONLY | os.O_RDWR) and stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
            # Another name of this file may be outside the root; a write would change it there.
            os.close(fd)
            raise ToolError(
                f"Refused: {path} has {info.st_nlink} hard links; another one may be outside "
                f"the allowed folder {self.root}"
            )
        return fd

    def _descend(self, folder: int, part: str, path: str, make: bool) -> int:
        """The folder ``part`` inside the open folder ``folder``, opened without following a
        symlink (created when ``make``)."""
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
        try:
            try:
                return os.open(part, flags, dir_fd=folder)
            except FileNotFoundError:
                if not make:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=folder)
                return os.open(part, flags, dir_fd=folder)
        except OSError as exc:
            if exc.errno in (errno.ENOTDIR, errno.ELOOP) and _is_link(part, folder):
                raise ToolError(f"Refused: a folder of {path} became a symlink while the tool ran") from None
            raise

    # read ---------------------------------------------------------------------------------
    def read(self, path: str, offset: int | None = None, limit: int | None = None) -> str:
        file = self.resolve(path)
        try:
            fd = self.open(file, os.O_RDONLY)
        except FileNotFoundError:
            raise ToolError(f"File not found: {path}") from None
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            os.close(fd)
            raise ToolError(f"{path} is a directory, not a file")
        with os.fdopen(fd, "rb") as handle:
            data = handle.read()
        if b"\0" in data[:8192]:
            raise ToolError(f"{path} looks like a binary file ({len(data)} bytes); not shown")
        lines = data.decode("utf-8", errors="replace").splitlines()
        start = max(int(offset or 1), 1)
        if start > max(len(lines), 1):
            raise ToolError(f"offset {start} is beyond the end of {path} ({len(lines)} lines)")
        count = int(limit) if limit else DEFAULT_READ_LINES
        if count < 1:
            raise ToolError("limit must be at least 1")
        chosen = lines[start - 1 : start - 1 + count]
        text = "\n".join(chosen)
        end = start - 1 + len(chosen)
        text, truncated = truncate_output(text, self.output_cap)
        notes = []
        if end < len(lines):
            notes.append(
                f"[Showing lines {start}-{end} of {len(lines)}. Use offset={end + 1} to continue.]"
            )
        elif truncated:
            notes.append(f"[Output truncated to {self.output_cap} characters.]")
        return text + ("\n\n" + "\n".join(notes) if notes else "")

    # write --------------------------------------------------------------------------------
    def write(self, path: str, content: str) -> str:
        file = self.resolve(path)
        data = content.encode("utf-8", errors="surrogateescape")
        with file_mutation_queue(file):
            try:
                # Truncated only once open() has checked the file (no O_TRUNC).
                fd = self.open(file, os.O_WRONLY | os.O_CREAT, make_folders=True)
            except IsADirectoryError:
                raise ToolError(f"{path} is a directory, not a file") from None
            with os.fdopen(fd, "wb") as handle:
                handle.truncate(0)
                handle.write(data)
        return f"Wrote {len(data)} bytes to {path}"

    # edit ---------------------------------------------------------------------------------
    def edit(self, path: str, old_text: str, new_text: str) -> str:
        file = self.resolve(path)
        if old_text == "":
            raise ToolError("old_text must not be empty")
        with file_mutation_queue(file):
            try:
                fd = self.open(file, os.O_RDWR)
            except (FileNotFoundError, IsADirectoryError):
                raise ToolError(f"File not found: {path}") from None
            # One descriptor for the read and the write: the file edited is the file read.
            with os.fdopen(fd, "r+b") as handle:
                if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                    raise ToolError(f"File not found: {path}")
                text = _read_for_edit(handle)
                changed, line = _replace_once(text, old_text, new_text, path)
                handle.seek(0)
                handle.write(changed.encode("utf-8", errors="surrogateescape"))
                handle.truncate()
        return f"Edited {path} at line {line}: replaced {len(old_text)} characters with {len(new_text)}."

    # bash ---------------------------------------------------------------------------------
    def bash(self, command: str, timeout: float | None = None) -> ToolResult:
        if not isinstance(command, str) or not command.strip():
            raise ToolError("command must be a non-empty string")
        limit = float(timeout) if timeout else self.bash_timeout
        env = dict(os.environ if self.env is None else self.env)
        abort = current_abort_event()
        started = time.monotonic()
        proc = subprocess.Popen(
            [self.shell, "-c", command],
            cwd=self.folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        chunks: list[bytes] = []
        reader = threading.Thread(target=_drain, args=(proc, chunks), daemon=True)
        reader.start()
        outcome = "done"
        while True:
            try:
                proc.wait(timeout=0.05)
                break
            except subprocess.TimeoutExpired:
                pass
            if time.monotonic() - started > limit:
                outcome = "timeout"
            elif abort is not None and abort.is_set():
                outcome = "aborted"
            if outcome != "done":
                _kill_group(proc)
                break
        reader.join(timeout=2)
        output = b"".join(chunks).decode("utf-8", errors="replace")
        output = redact_secrets(output, env)
        output, truncated = truncate_output(output, self.output_cap)
        details = {"exitCode": proc.returncode, "truncated": truncated}
        text = output if output else "(no output)"
        if outcome == "timeout":
            return ToolResult.text(f"{text}\n\nCommand timed out after {limit:g} seconds", details=details, is_error=True)
        if outcome == "aborted":
            return ToolResult.text(f"{text}\n\nCommand aborted", details=details, is_error=True)
        if proc.returncode != 0:
            return ToolResult.text(
                f"{text}\n\nCommand exited with code {proc.returncode}", details=details, is_error=True
            )
        return ToolResult.text(text, details=details)


@contextlib.contextmanager
def _one_line_errors(action: str, path: Any) -> typing.Iterator[None]:
    """An OS error of a file tool as a one-line ToolError (what the model sees)."""
    try:
        yield
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise ToolError(f"Could not {action} {path}: {reason}") from None


def _is_link(name: str, folder: int) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=folder).st_mode)
    except OSError:
        return False


def _read_for_edit(handle: typing.BinaryIO) -> str:
    """The text of a file being edited (undecodable bytes kept as surrogates)."""
    return handle.read().decode("utf-8", errors="surrogateescape")


def _replace_once(text: str, old_text: str, new_text: str, path: str) -> tuple[str, int]:
    """``text`` with the one occurrence of ``old_text`` replaced, and its line number.

    In a CRLF file, ``old_text`` / ``new_text`` written with LF line ends are matched and
    inserted with CRLF; every other byte of the file stays as it was.
    """
    count = text.count(old_text)
    if count == 0 and "\r\n" in text and "\n" in old_text:
        as_crlf = old_text.replace("\r\n", "\n").replace("\n", "\r\n")
        if as_crlf in text:
            old_text, new_text = as_crlf, new_text.replace("\r\n", "\n").replace("\n", "\r\n")
            count = text.count(old_text)
    if count == 0:
        raise ToolError(
            f"Could not find old_text in {path}. It must match the file exactly, "
            "including whitespace and line breaks."
        )
    if count > 1:
        raise ToolError(
            f"old_text occurs {count} times in {path}; it must be unique. "
            "Include more surrounding lines to pick one occurrence."
        )
    if old_text == new_text:
        raise ToolError("new_text is identical to old_text; nothing to change")
    at = text.index(old_text)
    return text[:at] + new_text + text[at + len(old_text) :], text[:at].count("\n") + 1


def _drain(proc: subprocess.Popen[bytes], chunks: list[bytes]) -> None:
    assert proc.stdout is not None
    # read1 returns what is there: a blocking read(n) waits for n bytes or EOF, and a
    # background child holding the pipe means no EOF, so the output would be lost.
    for block in iter(lambda: proc.stdout.read1(65536), b""):  # type: ignore[union-attr]
        chunks.append(block)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        with contextlib.suppress(OSError):
            proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


_READ_DOC = (
    "Read a text file. Relative paths are resolved against the working folder. Returns up to "
    f"{DEFAULT_READ_LINES} lines; use offset (first line, 1-based) and limit (number of lines) "
    "to page through longer files."
)
_WRITE_DOC = (
    "Write a file (created with its folders if needed, overwritten otherwise). Relative paths "
    "are resolved against the working folder."
)
_EDIT_DOC = (
    "Edit a file by replacing one exact occurrence of old_text with new_text. old_text must "
    "match the file exactly (whitespace included) and occur exactly once."
)
_BASH_DOC = (
    "Run a shell command in the working folder and return its combined stdout and stderr. "
    "Long output keeps its beginning and end. A non-zero exit code is reported as an error."
)


def default_tools(
    cwd: str | os.PathLike[str] | None = None,
    *,
    output_cap: int = DEFAULT_OUTPUT_CAP,
    bash_timeout: float = DEFAULT_BASH_TIMEOUT,
    env: Mapping[str, str] | None = None,
    include: Sequence[str] = ("read", "write", "edit", "bash"),
    root: str | os.PathLike[str] | None = None,
) -> list[Tool]:
    """read, write, edit and bash bound to a working folder (default: ``root``, else the
    current folder).

    ``root`` confines read, write and edit to that folder: a path that leaves it (``..``, an
    absolute path, a symlink or a symlinked folder pointing outside, a symlink swapped in
    while the call runs) is refused with a one-line tool error and nothing is read or
    written. bash is not confined (it runs in the working folder; leave it out with
    ``include`` when that matters). ``output_cap`` bounds what read and bash return (head
    and tail kept, with a note); ``bash_timeout`` is bash's default time limit in seconds;
    ``env`` replaces the environment bash runs with (default: this process's). Values of
    credential-like environment variables never appear in bash output.

    write and edit calls on one file (by any name: symlinks resolved) run one at a time in
    arrival order, even within one parallel batch; calls on different files run in parallel.
    """
    base = cwd if cwd is not None else root
    folder = os.path.abspath(os.fspath(base if base is not None else os.getcwd()))
    confined = os.path.abspath(os.fspath(root)) if root is not None else None
    if confined is not None and not (
        _inside(folder, confined) or _inside(os.path.realpath(folder), os.path.realpath(confined))
    ):
        raise ValueError(f"cwd {folder} is outside root {confined}")
    ws = _Workspace(folder, output_cap, bash_timeout, env, root=confined)
    where = f" Only files under {confined} can be used." if confined is not None else ""

    def read(path: str, offset: int | None = None, limit: int | None = None) -> str:
        """Read a file.

        Args:
            path: file to read (relative to the working folder, or absolute)
            offset: first line to return, 1-based
            limit: maximum number of lines to return
        """
        with _one_line_errors("read", path):
            return ws.read(path, offset, limit)

    def write(path: str, content: str) -> str:
        """Write a file.

        Args:
            path: file to write (relative to the working folder, or absolute)
            content: the complete new content of the file
        """
        with _one_line_errors("write", path):
            return ws.write(path, content)

    def edit(path: str, old_text: str, new_text: str) -> str:
        """Edit a file.

        Args:
            path: file to edit (relative to the working folder, or absolute)
            old_text: exact text to find; must occur exactly once
            new_text: text to put in its place
        """
        with _one_line_errors("edit", path):
            return ws.edit(path, old_text, new_text)

    def bash(command: str, timeout: float | None = None) -> ToolResult:
        """Run a shell command.

        Args:
            command: the command line, run with the shell in the working folder
            timeout: seconds before the command is killed
        """
        return ws.bash(command, timeout)

    made = {
        "read": tool_from_function(read, description=_READ_DOC + where),
        "write": tool_from_function(write, description=_WRITE_DOC + where),
        "edit": tool_from_function(edit, description=_EDIT_DOC + where),
        "bash": tool_from_function(bash, description=_BASH_DOC),
    }
    unknown = set(include) - set(made)
    if unknown:
        raise ValueError(f"unknown default tools {sorted(unknown)}; known: {sorted(made)}")
    return [made[name] for name in include]
