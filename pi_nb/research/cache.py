"""A disk cache of model calls, keyed by what was asked: rerunning a study costs nothing.

:class:`CachedCompletion` wraps a model call ``fn(model, messages, **options) -> message``
(the summarizer's, the judge's, the replay's — or :func:`pi_nb.llm.complete` when none is
given). The key is the sha256 of the request content: the model, the messages and every
option that can change the answer (``max_tokens``, ``tools``, ``temperature``,
``mock_response`` …) plus the name of the wrapped call. Credentials and transport options
(:data:`NOT_IN_KEY`: API key, base URL, timeouts, retries …) are never part of the key, and
are never written: the same request through another endpoint or key is the same answer.

A hit returns the stored reply (byte-identical, usage included), so a rerun reproduces the
first run exactly. :class:`CallCount` counts hits and sent calls; a study puts them in its
rows (``model_calls_cached``, ``model_calls_sent``).

The cache is a folder of ``<key>.json`` files written atomically (safe for several processes
sharing it). Workers on other machines use it when the folder is on a shared filesystem;
otherwise each machine keeps its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..entries import Message

__all__ = ["NOT_IN_KEY", "CachedCompletion", "CallCount", "request_key"]

#: Bump when the key or the stored format changes.
CALL_CACHE_VERSION = 1

#: Options that do not change the answer (credentials, endpoint, transport): left out of
#: the key and never stored.
NOT_IN_KEY = frozenset(
    {
        "api_key",
        "api_base",
        "base_url",
        "api_version",
        "organization",
        "azure_ad_token",
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
        "extra_headers",
        "headers",
        "timeout",
        "num_retries",
        "max_retries",
        "metadata",
        "stream",
        "stream_options",
        "on_text",
        "should_abort",
    }
)


def _callable_name(fn: Any) -> str | None:
    if fn is None:
        return None
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def request_key(
    model: str,
    messages: Sequence[Mapping[str, Any]],
    options: Mapping[str, Any],
    via: str | None = None,
) -> str:
    """sha256 (hex) of a model request's content: ``model``, ``messages``, the options
    that change the answer (all but :data:`NOT_IN_KEY`) and ``via`` (the wrapped call)."""
    kept = {
        k: (_callable_name(v) if callable(v) else v)
        for k, v in options.items()
        if k not in NOT_IN_KEY
    }
    text = json.dumps(
        [CALL_CACHE_VERSION, model, list(messages), kept, via],
        sort_keys=True,
        default=str,
        ensure_ascii=False,
    )
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class CallCount:
    """Model calls answered from the cache (``cached``) and sent to the model (``sent``)."""

    cached: int = 0
    sent: int = 0


def _default_completion(model: str, messages: Sequence[dict[str, Any]], **options: Any) -> Message:
    from ..llm import complete

    return complete(model, messages, stream=False, **options)


class CachedCompletion:
    """A model call with a disk cache in front of it (picklable when ``inner`` is).

    Args:
        directory: the cache folder (created on the first write); None only counts the
            calls (nothing is cached).
        inner: the call to make on a miss (default: :func:`pi_nb.llm.complete`, not streamed).
        count: shared hit/sent counter (default: a new one, on :attr:`count`).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] | None,
        inner: Callable[..., Message] | None = None,
        count: CallCount | None = None,
    ) -> None:
        self.directory = Path(directory) if directory is not None else None
        self.inner = inner
        self.count = count if count is not None else CallCount()
        # The wrapped call is part of the key: another function may answer differently.
        self.via = _callable_name(inner)

    def __call__(self, model: str, messages: Sequence[dict[str, Any]], **options: Any) -> Message:
        if self.directory is None:
            self.count.sent += 1
            return (self.inner or _default_completion)(model, messages, **options)
        key = request_key(model, messages, options, self.via)
        path = self.directory / key[:2] / f"{key}.json"
        if path.is_file():
            try:
                stored = json.loads(path.read_text(encoding="utf-8"))
            except ValueError:  # a torn or foreign file: ask again and overwrite it
                stored = None
            if isinstance(stored, dict) and isinstance(stored.get("reply"), dict):
                self.count.cached += 1
                return stored["reply"]
        reply = (self.inner or _default_completion)(model, messages, **options)
        self.count.sent += 1
        # Failed calls are not cached: a rerun tries them again.
        if not isinstance(reply, Mapping) or reply.get("stopReason") in ("error", "aborted"):
            return reply
        text = json.dumps({"model": model, "reply": reply}, ensure_ascii=False)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
        # The reply as stored: a first run and a rerun see the very same data.
        return json.loads(text)["reply"]
