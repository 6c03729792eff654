"""One writer per session file: an OS-level lock taken by a SessionTree that writes.

The lock is a ``filelock.FileLock`` on ``<session>.jsonl.lock`` next to the file (an
``flock``/``LockFileEx`` lock: the operating system drops it when the holder exits or is
killed, so a crash never leaves a stale lock). A :class:`SessionTree` takes it lazily, on its
first write, and keeps it until :meth:`SessionTree.close` (or until it is garbage
collected, or the process ends). Readers never take it.

Why for the writing lifetime rather than per append: two live writers on one file would
each append to their own in-memory leaf, silently interleaving two conversations in one
file. Holding the lock while a tree writes makes the second writer wait, or fail with a
one-line :class:`SessionLockedError`, before anything is written.

Within one process the lock is shared (reference counted): a notebook that re-opens the
session it is writing does not lock itself out.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from typing import Any, Literal

from .jsonl import SessionError

__all__ = [
    "DEFAULT_LOCK",
    "LockMode",
    "SessionLock",
    "SessionLockWarning",
    "SessionLockedError",
    "append_mutex",
    "lock_path",
    "lock_timeout",
]

#: ``"wait"`` (block until free), ``"fail"`` (raise at once), a timeout in seconds, or
#: ``False`` (take no lock: only for files nobody else writes).
LockMode = Literal["wait", "fail"] | float | int | bool | None

#: Default: wait up to this many seconds (a writer that is just finishing hands over), then
#: raise SessionLockedError.
DEFAULT_LOCK: float = 5.0


class SessionLockedError(SessionError):
    """The session file is being written by another process."""


class SessionLockWarning(UserWarning):
    """The lock file could not be created; the session is written without a lock."""


def lock_path(path: str) -> str:
    """The lock file for a session file."""
    return os.fspath(path) + ".lock"


def lock_timeout(mode: LockMode) -> float | None:
    """Seconds to wait for ``mode`` (-1 = forever); None when no lock is taken."""
    if mode is None or mode is True:
        return DEFAULT_LOCK
    if mode is False:
        return None
    if mode == "wait":
        return -1.0
    if mode == "fail":
        return 0.0
    if isinstance(mode, (int, float)) and not isinstance(mode, bool):
        return -1.0 if mode < 0 else float(mode)
    raise ValueError(f"lock must be 'wait', 'fail', a number of seconds or False, not {mode!r}")


class _Shared:
    """The process's hold on one lock file (shared by every tree writing that file)."""

    def __init__(self, file: str) -> None:
        from filelock import FileLock

        self.file = file
        # 0600: the lock file sits next to a file that holds whole conversations.
        self.lock = FileLock(file, mode=0o600, thread_local=False)
        self.count = 0
        self.mutex = threading.Lock()
        # Serializes appends of every tree of this file in this process (threads: a widget
        # button while a cell runs), as the file lock serializes processes.
        self.appends = threading.RLock()


_registry: dict[str, _Shared] = {}
_registry_guard = threading.Lock()
_registry_pid = os.getpid()
# Lock objects inherited through fork(): never released by the child (an flock is shared
# with the parent, releasing it would release the parent's lock), never collected.
_inherited: list[Any] = []


def _shared_for(file: str) -> _Shared:
    global _registry_pid
    with _registry_guard:
        if os.getpid() != _registry_pid:  # a forked child: the parent's holds are not ours
            _inherited.extend(_registry.values())
            _registry.clear()
            _registry_pid = os.getpid()
        shared = _registry.get(file)
        if shared is None:
            shared = _registry[file] = _Shared(file)
        return shared


def append_mutex(path: str) -> threading.RLock:
    """The lock that serializes appends to ``path`` within this process (one per file,
    shared by every tree of it, like the file lock)."""
    real = lock_path(os.path.realpath(os.path.abspath(os.fspath(path))))
    return _shared_for(real).appends  # type: ignore[return-value]


class SessionLock:
    """A writer's handle on the lock of one session file (acquire once, release once)."""

    def __init__(self, path: str, mode: LockMode = None) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self.timeout = lock_timeout(mode)
        self.file = lock_path(os.path.realpath(self.path))
        self._shared: _Shared | None = None
        self._pid = 0

    @property
    def held(self) -> bool:
        return self._shared is not None and self._pid == os.getpid()

    def acquire(self) -> None:
        """Take the lock (no-op when held). Raises SessionLockedError when another process
        holds it past the timeout."""
        if self.held or self.timeout is None:
            return
        shared = _shared_for(self.file)
        with shared.mutex:
            if shared.count == 0:
                try:
                    shared.lock.acquire(timeout=self.timeout)
                except OSError as exc:
                    if _is_timeout(exc):
                        raise self._locked_error() from None
                    # No lock file possible here (read-only folder…): write unlocked.
                    warnings.warn(
                        f"{self.path}: cannot create lock file {self.file} ({exc}); "
                        "writing without a lock",
                        SessionLockWarning,
                        stacklevel=4,
                    )
                    self.timeout = None
                    return
                except Exception as exc:
                    if _is_timeout(exc):
                        raise self._locked_error() from None
                    raise
            shared.count += 1
        self._shared = shared
        self._pid = os.getpid()

    def _locked_error(self) -> SessionLockedError:
        waited = "" if not self.timeout or self.timeout < 0 else f" (waited {self.timeout:g} s)"
        return SessionLockedError(
            f"{self.path}: session is being written by another process{waited}; close it "
            f"there, or open with lock='wait' to wait for it (lock file {self.file})"
        )

    def release(self) -> None:
        """Give the lock back (the file lock is released when no tree of this process
        writes the file any more)."""
        shared, self._shared = self._shared, None
        if shared is None or self._pid != os.getpid():
            return
        with shared.mutex:
            shared.count -= 1
            if shared.count <= 0:
                shared.count = 0
                with contextlib.suppress(Exception):  # releasing must never raise
                    shared.lock.release()

    def __repr__(self) -> str:
        state = "held" if self.held else "free"
        return f"<SessionLock {self.path} {state}>"


def _is_timeout(exc: BaseException) -> bool:
    from filelock import Timeout

    return isinstance(exc, Timeout)
