"""Shared plumbing of the policies: what they need from a session, hook (un)registration,
their state entries and the camelCase form of their reports."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from typing import TypeAlias

    from ..entries import Entry
    from ..hooks import Event
    from ..session.tree import SessionTree

__all__ = [
    "HookedPolicy",
    "PolicyHooks",
    "PolicySession",
    "camel_dict",
    "check_choice",
    "custom_entries",
    "disable_policy",
    "enable_policy",
    "installed",
    "remember",
    "require",
    "tree_of",
]


class PolicyHooks(Protocol):
    """What a policy needs from hooks (:class:`pi_nb.hooks.Hooks`): ``on(event, handler)``,
    which returns the function that removes the handler again (nothing else is called)."""

    def on(self, event: str, fn: Callable[[Event], Any], /) -> Callable[[], None]: ...


class PolicySession(Protocol):
    """What a policy needs from a session (:class:`pi_nb.agent.session.Session`): the hooks
    it is installed on and the entry tree its state lives in. Policies that only read the
    tree also take a :class:`~pi_nb.session.tree.SessionTree` itself."""

    @property
    def hooks(self) -> PolicyHooks: ...

    @property
    def tree(self) -> SessionTree: ...


if TYPE_CHECKING:
    #: A Session, or a bare SessionTree where only the entries are read or written.
    SessionOrTree: TypeAlias = "PolicySession | SessionTree"

#: The parts of :class:`PolicySession` :func:`require` can check, and how its error names them.
_PARTS = {"hooks": "hooks with on()", "tree": "tree (a SessionTree)"}


def _tree(session: Any) -> SessionTree | None:
    from ..session.tree import SessionTree

    if isinstance(session, SessionTree):
        return session
    tree = getattr(session, "tree", None)
    return tree if isinstance(tree, SessionTree) else None


def _hooks(session: Any) -> PolicyHooks | None:
    hooks = getattr(session, "hooks", None)
    return hooks if hooks is not None and callable(getattr(hooks, "on", None)) else None


def require(session: Any, parts: Sequence[str], policy: str = "a policy") -> None:
    """Check that ``session`` has the ``parts`` (``"hooks"``, ``"tree"``) of a
    :class:`PolicySession`; else one TypeError naming every part that is missing."""
    found = {"hooks": _hooks, "tree": _tree}
    missing = [_PARTS[part] for part in parts if found[part](session) is None]
    if missing:
        raise TypeError(
            f"cannot install {policy} on {type(session).__name__}: it has no "
            f"{' and no '.join(missing)} (pass a pi_nb Session)"
        )


def tree_of(session: SessionOrTree) -> SessionTree:
    """The :class:`~pi_nb.session.tree.SessionTree` of a Session (or the tree itself)."""
    tree = _tree(session)
    if tree is None:
        raise TypeError(f"expected a Session or a SessionTree, not {type(session).__name__}")
    return tree


def check_choice(name: str, value: Any, choices: Sequence[Any]) -> None:
    """ValueError ``"<name> must be 'a' or 'b', not 'c'"`` unless ``value`` is one of ``choices``
    (a policy option typed as a ``Literal``: pass ``typing.get_args`` of it)."""
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices[:-1]) + f" or {choices[-1]!r}"
        raise ValueError(f"{name} must be {allowed}, not {value!r}")


def custom_entries(entries: Iterable[Entry], *custom_types: str) -> Iterator[Entry]:
    """The ``custom`` entries of ``entries`` whose ``customType`` is one of ``custom_types``:
    where a policy keeps its state (Pi 1.3 ignores them)."""
    for entry in entries:
        if entry.get("type") == "custom" and entry.get("customType") in custom_types:
            yield entry


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def camel_dict(record: Any, names: Iterable[str]) -> dict[str, Any]:
    """``{camelCase(name): record.<name>}`` for ``names``, in order: a report's fields in the
    camelCase spelling of Pi's files (``tokens_before`` → ``tokensBefore``)."""
    return {_camel(name): getattr(record, name) for name in names}


class HookedPolicy:
    """A policy registered on a Hooks object with :meth:`Hooks.on` (and nothing else).

    Subclasses list their ``(event, handler)`` pairs in :meth:`handlers` and what their
    ``session`` must have in :meth:`session_needs`; :meth:`install` checks both ends and
    registers the handlers, :meth:`remove` unregisters them through the functions ``on``
    returned.
    """

    #: The session (or tree) the policy works on; None where it is optional.
    session: Any
    #: The name :meth:`enable` records the policy under (one policy of a kind per session).
    kind = "policy"

    def __init__(self) -> None:
        self._offs: list[Callable[[], None]] = []
        self.hooks: PolicyHooks | None = None

    def handlers(self) -> list[tuple[str, Callable[[Any], Any]]]:
        raise NotImplementedError

    def session_needs(self) -> tuple[str, ...]:
        """The parts of :class:`PolicySession` (``"tree"``) this policy's ``session`` must
        have for its handlers to work; :meth:`install` checks them."""
        return ()

    @property
    def installed(self) -> bool:
        return bool(self._offs)

    @property
    def _state(self) -> str:
        """``installed`` / ``not installed``, for the ``repr`` of every policy."""
        return "installed" if self.installed else "not installed"

    def install(self, hooks: PolicyHooks) -> Any:
        """Register this policy's handlers on ``hooks`` (only ``hooks.on`` is called).

        Raises:
            TypeError: ``hooks`` has no ``on()``, or the policy's session lacks what
                :meth:`session_needs` names (found now, not at the first request).
        """
        name = type(self).__name__
        if self._offs:
            raise RuntimeError(f"{name} is already installed; remove() it first")
        on = getattr(hooks, "on", None)
        if not callable(on):
            raise TypeError(
                f"cannot install {name} on {type(hooks).__name__}: it has no on() "
                "(pass a pi_nb.hooks.Hooks)"
            )
        require(self.session, self.session_needs(), name)
        self.hooks = hooks
        self._offs = [on(event, fn) for event, fn in self.handlers()]
        return self

    def remove(self) -> None:
        """Unregister every handler installed by :meth:`install`."""
        offs, self._offs = self._offs, []
        for off in offs:
            off()
        self.hooks = None

    @classmethod
    def enable(cls: type[_P], session: PolicySession, **options: Any) -> _P:
        """:func:`enable_policy` of this class, as the policy of its :attr:`kind`."""
        return enable_policy(session, cls.kind, cls, options)

    @classmethod
    def disable(cls, session: PolicySession) -> bool:
        """:func:`disable_policy` of this class's :attr:`kind`."""
        return disable_policy(session, cls.kind)


# Policies enabled on a session by the enable_* helpers, so they are not installed twice.
_INSTALLED: weakref.WeakKeyDictionary[PolicySession, dict[str, HookedPolicy]] = (
    weakref.WeakKeyDictionary()
)


def installed(session: PolicySession, kind: str) -> HookedPolicy | None:
    """The policy of ``kind`` enabled on ``session`` (and still installed), if any."""
    try:
        policy = _INSTALLED.get(session, {}).get(kind)
    except TypeError:  # not weak-referenceable
        return None
    return policy if policy is not None and policy.installed else None


def remember(session: PolicySession, kind: str, policy: HookedPolicy | None) -> None:
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


def enable_policy(session: PolicySession, kind: str, cls: type[_P], options: dict[str, Any]) -> _P:
    """Install ``cls(session, **options)`` on ``session.hooks`` as the policy of ``kind``.

    Without ``options`` the policy of ``kind`` already enabled (and still installed) is
    returned as is; with them it is removed and replaced.
    """
    existing = installed(session, kind)
    if existing is not None and not options:
        assert isinstance(existing, cls)
        return existing
    policy = cls(session, **options)  # type: ignore[call-arg]
    # One error naming everything the session lacks, before anything is installed (or the
    # policy enabled before is removed: a bad call leaves the session as it was).
    require(session, ("hooks", *policy.session_needs()), cls.__name__)
    if existing is not None:
        existing.remove()
    policy.install(session.hooks)
    remember(session, kind, policy)
    return policy


def disable_policy(session: PolicySession, kind: str) -> bool:
    """Remove the policy of ``kind`` :func:`enable_policy` installed; True if there was one."""
    existing = installed(session, kind)
    if existing is None:
        return False
    existing.remove()
    remember(session, kind, None)
    return True
