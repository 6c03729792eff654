"""Shared plumbing of the policies: the tree behind a session, hook (un)registration."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from ..session.tree import SessionTree

__all__ = [
    "HookedPolicy",
    "disable_policy",
    "enable_policy",
    "hooks_of",
    "installed",
    "remember",
    "tree_of",
]


def tree_of(session: Any) -> SessionTree:
    """The :class:`~pi_nb.session.tree.SessionTree` of a Session (or the tree itself)."""
    from ..session.tree import SessionTree

    if isinstance(session, SessionTree):
        return session
    tree = getattr(session, "tree", None)
    if not isinstance(tree, SessionTree):
        raise TypeError(f"expected a Session or a SessionTree, not {type(session).__name__}")
    return tree


def hooks_of(session: Any) -> Any:
    """The :class:`~pi_nb.hooks.Hooks` of a Session."""
    hooks = getattr(session, "hooks", None)
    if hooks is None or not hasattr(hooks, "on"):
        raise TypeError(f"{type(session).__name__} has no hooks to install a policy on")
    return hooks


class HookedPolicy:
    """A policy registered on a Hooks object with :meth:`Hooks.on` (and nothing else).

    Subclasses list their ``(event, handler)`` pairs in :meth:`handlers`; :meth:`install`
    registers them and :meth:`remove` unregisters them through the functions ``on``
    returned.
    """

    def __init__(self) -> None:
        self._offs: list[Callable[[], None]] = []
        self.hooks: Any = None

    def handlers(self) -> list[tuple[str, Callable[[Any], Any]]]:
        raise NotImplementedError

    @property
    def installed(self) -> bool:
        return bool(self._offs)

    def install(self, hooks: Any) -> Any:
        """Register this policy's handlers on ``hooks`` (only ``hooks.on`` is called)."""
        if self._offs:
            raise RuntimeError(f"{type(self).__name__} is already installed; remove() it first")
        self.hooks = hooks
        self._offs = [hooks.on(event, fn) for event, fn in self.handlers()]
        return self

    def remove(self) -> None:
        """Unregister every handler installed by :meth:`install`."""
        offs, self._offs = self._offs, []
        for off in offs:
            off()
        self.hooks = None


# Policies enabled on a session by the enable_* helpers, so they are not installed twice.
_INSTALLED: weakref.WeakKeyDictionary[Any, dict[str, HookedPolicy]] = weakref.WeakKeyDictionary()


def installed(session: Any, kind: str) -> HookedPolicy | None:
    """The policy of ``kind`` enabled on ``session`` (and still installed), if any."""
    try:
        policy = _INSTALLED.get(session, {}).get(kind)
    except TypeError:  # not weak-referenceable
        return None
    return policy if policy is not None and policy.installed else None


def remember(session: Any, kind: str, policy: HookedPolicy | None) -> None:
    """Record (or forget, with None) the policy of ``kind`` enabled on ``session``."""
    try:
        slots = _INSTALLED.setdefault(session, {})
    except TypeError:
        return
    if policy is None:
        slots.pop(kind, None)
    else:
        slots[kind] = policy


_P = TypeVar("_P", bound=HookedPolicy)


def enable_policy(session: Any, kind: str, cls: type[_P], options: dict[str, Any]) -> _P:
    """Install ``cls(session, **options)`` on ``session.hooks`` as the policy of ``kind``.

    Without ``options`` the policy of ``kind`` already enabled (and still installed) is
    returned as is; with them it is removed and replaced.
    """
    existing = installed(session, kind)
    if existing is not None and not options:
        assert isinstance(existing, cls)
        return existing
    if existing is not None:
        existing.remove()
    policy = cls(session, **options).install(hooks_of(session))  # type: ignore[call-arg]
    remember(session, kind, policy)
    return policy


def disable_policy(session: Any, kind: str) -> bool:
    """Remove the policy of ``kind`` :func:`enable_policy` installed; True if there was one."""
    existing = installed(session, kind)
    if existing is None:
        return False
    existing.remove()
    remember(session, kind, None)
    return True
