"""The session explorer widget: the session tree, the live projection and the token bar.

``SessionExplorer(session_or_tree)`` is an anywidget. It takes a
:class:`pi_nb.session.tree.SessionTree` or a high-level session object (anything with a
``.tree``, like ``pi_nb.agent.Session``). With a session, the buttons call its
``navigate`` / ``compact`` / ``edit``; with a bare tree, branching and context edits go to the
tree and the model-backed actions (summaries, compaction) say so in the status line.

The synced state is built by :mod:`pi_nb.notebook.widget_state` (previews only) and refreshed
when the tree grows, coalesced to at most one refresh per ``throttle`` seconds. Errors from
actions never reach the comm: they become one line in :attr:`status`.

This module imports anywidget; nothing else in pi_nb imports it at package import.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from ..compaction import AlreadyCompacted, NothingToCompact
from ..entries import Entry
from ..session.tree import SessionTree
from ..tokens import TokenCache
from . import widget_state

__all__ = ["SessionExplorer", "explore"]

_ASSET = "session_explorer"


def asset_dir() -> Path:
    """The folder holding session_explorer.js/.css: ``pi_nb/_js`` in an installed wheel
    (pyproject force-includes ``js/`` there), ``<repo>/js`` in a source checkout."""
    package = Path(__file__).resolve().parent.parent
    for folder in (package / "_js", package.parent / "js"):
        if (folder / f"{_ASSET}.js").is_file():
            return folder
    raise FileNotFoundError(
        f"{_ASSET}.js not found in {package / '_js'} or {package.parent / 'js'}; "
        "reinstall pi_nb (the wheel ships it as pi_nb/_js)"
    )


def _one_line(error: BaseException, limit: int = 240) -> str:
    from ..redact import redact

    text = redact(" ".join(str(error).split())) or type(error).__name__
    text = f"{type(error).__name__}: {text}" if not isinstance(error, ActionError) else text
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ActionError(Exception):
    """A user-facing refusal (shown as is in the status line)."""


class SessionExplorer(anywidget.AnyWidget):
    """Explore a session: tree, live projection, tokens; branch, compact and edit context.

    Parameters
    ----------
    session_or_tree:
        A ``SessionTree`` or a session object exposing ``.tree`` (``pi_nb.agent.Session``).
    window, reserve:
        Context window ``W`` and reserve ``R`` for the token bar. Default: the session's
        ``.window`` / ``.reserve``, else 128,000 and 16,384 (Pi's defaults).
    throttle:
        Seconds over which appends are coalesced into one refresh.
    follow:
        Follow a file another process (Pi in a terminal) is writing: ``True`` re-reads it
        every :data:`FOLLOW_INTERVAL` seconds, a number every that many seconds. A kernel
        thread calls :meth:`SessionTree.refresh` and updates tree, context and token bar
        when entries arrived; it stops when the widget is closed (:meth:`close`,
        :meth:`stop_following`). A replaced or rewritten file, or a failed read, shows in
        the status line.
    """

    _esm = asset_dir() / f"{_ASSET}.js"
    _css = asset_dir() / f"{_ASSET}.css"

    _tree = traitlets.List().tag(sync=True)
    _context = traitlets.List().tag(sync=True)
    _tokens = traitlets.Dict().tag(sync=True)
    _info = traitlets.Dict().tag(sync=True)
    _caps = traitlets.Dict().tag(sync=True)
    _preview = traitlets.Dict().tag(sync=True)
    _ack = traitlets.Int(0).tag(sync=True)
    selected_id = traitlets.Unicode(None, allow_none=True).tag(sync=True)
    leaf_id = traitlets.Unicode(None, allow_none=True).tag(sync=True)
    status = traitlets.Unicode("").tag(sync=True)
    #: Seconds between re-reads of the file while following (0: not following).
    following = traitlets.Float(0.0).tag(sync=True)
    #: Marks this explorer's static snapshot output: the live view hides that output.
    _snapshot_id = traitlets.Unicode("").tag(sync=True)

    def __init__(
        self,
        session_or_tree: Any,
        window: int | None = None,
        reserve: int | None = None,
        *,
        throttle: float = 0.25,
        follow: bool | float = False,
        **kwargs: Any,
    ) -> None:
        if isinstance(session_or_tree, SessionTree):
            session, tree = None, session_or_tree
        elif isinstance(getattr(session_or_tree, "tree", None), SessionTree):
            session, tree = session_or_tree, session_or_tree.tree
        else:
            raise TypeError(
                "SessionExplorer needs a SessionTree or a session with a .tree "
                f"(got {type(session_or_tree).__name__})"
            )
        self.session = session
        self.tree: SessionTree = tree
        self._window = window
        self._reserve = reserve
        self.throttle = throttle
        self._rows: dict[str, dict[str, Any]] = {}
        self._token_cache = TokenCache()
        self._follow_stop = threading.Event()
        self._follow_thread: threading.Thread | None = None
        self._lock = threading.RLock()  # one refresh at a time
        self._timer_lock = threading.Lock()  # guards _timer; never held while refreshing
        self._timer: threading.Timer | None = None
        self._in_action = False
        self._closed = False
        self._overhead = 0
        self._last_refresh_s = 0.0
        self._session_window: int | None = None
        self._unsubscribe: Callable[[], None] | None = None
        interval = _follow_interval(follow)
        if interval and tree.path is None:
            raise ValueError("follow needs a session file (this SessionTree is in memory)")
        if session is not None and window is None and _window_is_cheap(session):
            self._session_window = _session_window(session)
        caps = {
            "session": session is not None,
            "compact": session is not None and callable(getattr(session, "compact", None)),
            "summarize": session is not None and callable(getattr(session, "navigate", None)),
        }
        # the comm opens inside super().__init__: give it the whole state in one message
        self._snapshot_handle: Any = None
        super().__init__(
            **self._state_values(), _caps=caps, _snapshot_id=uuid.uuid4().hex, **kwargs
        )
        self._unsubscribe = tree.on_append(_weak_listener(self))
        self.on_msg(self._on_custom_msg)
        if interval:
            self.follow(interval)
        if session is not None and window is None and self._session_window is None:
            threading.Thread(
                target=self._resolve_session_window, name="pi_nb-explorer-window", daemon=True
            ).start()

    # --- state --------------------------------------------------------------------------

    @property
    def window(self) -> int:
        """W for the token bar: explicit, else the session's, else 128,000."""
        value = self._window or self._session_window
        return int(value) if value else widget_state.DEFAULT_WINDOW

    @property
    def reserve(self) -> int:
        value = (
            self._reserve if self._reserve is not None else getattr(self.session, "reserve", None)
        )
        return int(value) if value is not None else widget_state.DEFAULT_RESERVE

    def _resolve_session_window(self) -> None:
        """Background: the first ``session.window`` lookup imports litellm (seconds)."""
        value = _session_window(self.session)
        if value:
            self._session_window = value
            self._timer_refresh()

    def _session_overhead(self) -> int:
        """Tokens a session adds to the tree's estimate (system prompt, tool declarations).

        Read on the main thread only (it touches the tree's projection cache); background
        refreshes reuse the last value.
        """
        if threading.current_thread() is not threading.main_thread():
            return self._overhead
        if self.session is None:
            # a bare tree is counted as Session.open would continue it: one basis everywhere
            try:
                from ..agent.session import next_call_tokens

                call = next_call_tokens(self.tree)
                self._overhead = 0 if call.reported else call.system_prompt + call.tools
            except Exception as exc:  # shown, not swallowed: the figure lacks the overhead
                self.status = (
                    f"Error: the token figure leaves out the system prompt and tools: {exc}"
                )
            return self._overhead
        counter = getattr(self.session, "context_tokens", None)
        if not callable(counter):
            return 0
        try:
            session_figure = counter()
            tree_figure = self.tree.context_tokens()
            if getattr(session_figure, "lastUsageIndex", None) is None:
                self._overhead = max(0, int(session_figure.tokens) - int(tree_figure.tokens))
            else:
                self._overhead = 0
        except Exception as exc:  # shown, not swallowed
            self.status = f"Error: the token figure leaves out the system prompt and tools: {exc}"
        return self._overhead

    def _state_values(self) -> dict[str, Any]:
        """The synced trait values for the tree as it is now."""
        if len(self._token_cache) > 2 * len(self.tree.entries) + 1000:
            self._token_cache = TokenCache()  # drop estimates of superseded projections
        from ..redact import redact_obj

        state = redact_obj(widget_state.explorer_state(
            self.tree,
            self.window,
            self.reserve,
            self._rows,
            self._token_cache,
            overhead=self._session_overhead(),
        ))  # a key in a file written elsewhere (Pi) never reaches the front end
        tokens = state["tokens"]
        tokens["window_source"] = (
            "explicit"
            if self._window
            else "session"
            if self._session_window
            else "pending"
            if self.session is not None
            else "default"
        )
        if self.session is not None and getattr(self.session, "model", None):
            # the model the next call uses, not the last model_change in the file
            state["info"]["model"] = str(self.session.model)
            state["info"]["model_source"] = "session"
        return {
            "_tree": state["tree"],
            "_context": state["context"],
            "_tokens": tokens,
            "_info": state["info"],
            "leaf_id": state["leaf_id"],
        }

    def _repr_mimebundle_(self, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The live widget view and a ``text/plain`` summary (the snapshot is its own
        output: see :meth:`_ipython_display_`)."""
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        from .html import explorer_text

        return {**data, "text/plain": explorer_text(self._snapshot_state())}, metadata

    def _ipython_display_(self) -> None:
        """Two outputs: the live view, then a static ``text/html`` snapshot of the explorer.

        The snapshot is a separate output because nbconvert renders a widget output as the
        widget alone whenever the notebook saved widget state (``--execute`` saves it),
        and offline that widget needs a CDN it cannot reach: a blank gap. The live view
        hides its own snapshot (a style rule keyed by ``_snapshot_id``), so Jupyter shows
        one explorer, while a page without the widget runtime shows the snapshot. Each
        refresh updates it by display id, so a saved notebook holds the explorer as the
        last refresh run from a cell left it.
        """
        from IPython.display import display

        bundle = self._repr_mimebundle_()
        if bundle is None:
            return
        data, metadata = bundle
        display(data, metadata=metadata, raw=True)
        self._snapshot_handle = display(self._snapshot_bundle(), raw=True, display_id=True)

    def _snapshot_state(self) -> dict[str, Any]:
        return {"tree": self._tree, "context": self._context, "tokens": self._tokens, "info": self._info}

    def _snapshot_bundle(self) -> dict[str, str]:
        from .html import explorer_snapshot_html

        return {
            "text/html": f'<div data-pi-nb-snapshot="{self._snapshot_id}">'
            f"{explorer_snapshot_html(self._snapshot_state())}</div>"
        }

    def _update_snapshot(self) -> None:
        if self._snapshot_handle is not None:
            self._snapshot_handle.update(self._snapshot_bundle(), raw=True)

    def refresh(self) -> None:
        """Rebuild and sync the state now (safe from any thread)."""
        self._cancel_timer()
        with self._lock:
            if self._closed:
                return
            start = time.perf_counter()
            values = self._state_values()
            with self.hold_sync():
                for name, value in values.items():
                    setattr(self, name, value)
                if self.selected_id is not None and self.selected_id not in self.tree:
                    self.selected_id = None
            self._update_snapshot()
            self._last_refresh_s = time.perf_counter() - start

    def _appended(self, entry: Entry) -> None:
        """on_append listener: schedule one trailing refresh per ``throttle`` seconds."""
        if self._in_action or self._closed:
            return  # the action refreshes when it is done
        with self._timer_lock:  # cheap: appends never wait for a refresh in progress
            if self._timer is not None:
                return
            # at most ~1/3 of the time goes to refreshing, however big the session
            delay = max(self.throttle, 2 * self._last_refresh_s)
            timer = threading.Timer(delay, self._timer_refresh)
            timer.daemon = True
            self._timer = timer
            timer.start()

    def _cancel_timer(self) -> None:
        with self._timer_lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def _timer_refresh(self) -> None:
        try:
            self.refresh()
        except Exception as error:  # a background refresh must never raise
            self.status = f"Error: refresh failed: {_one_line(error)}"

    # --- following a file another process writes ------------------------------------------

    def follow(self, interval: float = 0.0) -> None:
        """Start following the file (re-read every ``interval`` seconds, default
        :data:`FOLLOW_INTERVAL`); restarts with the new interval when already following."""
        interval = _follow_interval(interval or True)
        if self.tree.path is None:
            raise ValueError("follow needs a session file (this SessionTree is in memory)")
        self.stop_following()
        stop = threading.Event()
        self._follow_stop = stop
        thread = threading.Thread(
            target=_follow_loop,
            args=(weakref.ref(self), stop, interval),
            name="pi_nb-explorer-follow",
            daemon=True,  # never keeps the kernel from exiting
        )
        self._follow_thread = thread
        self.following = interval
        thread.start()

    def stop_following(self) -> None:
        """Stop re-reading the file (the thread ends within one read)."""
        self._follow_stop.set()
        thread, self._follow_thread = self._follow_thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        if not self._closed:
            self.following = 0.0

    def poll(self) -> int:
        """Read what another process appended (once, now) and update the view when the tree
        changed; returns the number of entries added. What the follow thread calls."""
        leaf = self.tree.leaf_id
        try:
            added = self.tree.refresh()
        except Exception as error:  # shown, and tried again at the next interval
            self.status = f"Error: following the file: {_one_line(error)}"
            return 0
        reloaded = self.tree.reloaded
        if added or reloaded or self.tree.leaf_id != leaf:
            self.refresh()
        if reloaded:
            self.status = f"Following: {_one_line(ActionError(reloaded))}"
        elif self.status.startswith("Error: following the file"):
            self.status = ""  # the file reads again
        return added

    @property
    def selected(self) -> Entry | None:
        """The selected entry (None when nothing is selected)."""
        return self.tree.get(self.selected_id) if self.selected_id else None

    def close(self) -> None:
        """Stop following the tree and close the comm."""
        lock = getattr(self, "_lock", None)
        if lock is not None:  # None: __init__ failed before the widget was set up
            self.stop_following()  # outside the lock: a poll in progress may need it
            with lock:
                self._closed = True
                self._cancel_timer()
                if self._unsubscribe is not None:
                    with contextlib.suppress(ValueError):  # already removed
                        self._unsubscribe()
                    self._unsubscribe = None
        super().close()

    # --- actions ------------------------------------------------------------------------

    def _on_custom_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict) or "action" not in content:
            return
        self.perform(content)

    def perform(self, message: dict[str, Any]) -> str:
        """Run one action message (as sent by the front end) and return the status line.

        ``{"action": "branch", "id", "summarize"?, "focus"?}``, ``{"action": "compact",
        "preview"?, "focus"?}``, ``{"action": "omit", "id"}``, ``{"action": "replace",
        "id", "text"}``, ``{"action": "pin", "id"}``, ``{"action": "discard_preview"}``, ``{"action": "refresh"}``.
        Never raises: an error becomes a one-line ``Error: …`` status.
        """
        action = message.get("action")
        handler = getattr(self, f"_do_{action}", None) if isinstance(action, str) else None
        self._in_action = True
        try:
            if handler is None:
                raise ActionError(f"Unknown action {action!r}")
            status = handler(message) or ""
        except Exception as error:
            status = f"Error: {_one_line(error)}"
        finally:
            self._in_action = False
        try:
            self.refresh()
        except Exception as error:
            status = f"Error: refresh failed: {_one_line(error)}"
        with self.hold_sync():
            self.status = status
            seq = message.get("seq")
            self._ack = seq if isinstance(seq, int) else self._ack + 1
        return status

    def _target(self, message: dict[str, Any]) -> str:
        eid = message.get("id") or self.selected_id
        if not eid:
            raise ActionError("Select an entry in the tree first.")
        if eid not in self.tree:
            raise ActionError(f"Entry {eid} is not in this session.")
        return str(eid)

    def _do_refresh(self, _message: dict[str, Any]) -> str:
        return "Refreshed."

    def _do_select(self, message: dict[str, Any]) -> str:
        self.selected_id = self._target(message)
        return ""

    def _do_branch(self, message: dict[str, Any]) -> str:
        eid = self._target(message)
        summarize = bool(message.get("summarize"))
        focus = message.get("focus") or None
        old = self.tree.leaf_id
        if eid == old:
            return f"{eid} is already the leaf."
        if self.session is not None:
            result = self.session.navigate(eid, summarize=summarize, focus=focus)
        elif summarize:
            raise ActionError(
                "Summarizing the abandoned branch needs a pi_nb.agent.Session (a model writes "
                "the summary); uncheck 'summarize' to branch this bare SessionTree."
            )
        else:
            self.tree.branch(eid)
            result = None
        # result: a NavigateResult (pi_nb.compaction), or None for a bare branch move.
        if result is not None and result.cancelled:
            return "Navigation cancelled by a session_before_tree hook; nothing changed."
        new = self.tree.leaf_id
        summary = result.summary_entry if result is not None else None
        note = f" with branch summary {summary['id']}" if summary is not None else ""
        text = result.editor_text if result is not None else None
        from .widget_state import with_warnings

        if isinstance(text, str) and text:
            flat = " ".join(text.split())
            flat = flat if len(flat) <= 60 else flat[:59] + "…"
            return with_warnings(
                f"Leaf moved {old} → {new}{note} (before the user message {eid}, whose text "
                f'you can send again or edit: "{flat}").',
                result,
            )
        return with_warnings(
            f"Leaf moved {old} → {new}{note}; the next message continues from there "
            "(the old branch is kept).",
            result,
        )

    def _do_compact(self, message: dict[str, Any]) -> str:
        preview = bool(message.get("preview"))
        focus = message.get("focus") or None
        if self.session is None or not callable(getattr(self.session, "compact", None)):
            raise ActionError(
                "Compaction needs a pi_nb.agent.Session (a model writes the summary); "
                "this explorer shows a bare SessionTree."
            )
        try:
            result = self.session.compact(focus=focus, preview=preview)
        except (NothingToCompact, AlreadyCompacted) as error:
            self._preview = {}
            return _one_line(error).split(": ", 1)[-1]
        if result is None:
            self._preview = {}
            return "Nothing to compact."
        from ..compaction.compact import result_figures
        from .widget_state import with_warnings

        # result: a CompactionResult (its attributes; a stand-in session returns the same).
        change = result.change  # both sides estimated: the basis of %pi diff
        before = change.before if change is not None else result.tokens_before
        after = change.after if change is not None else result.tokens_after
        first = result.first_kept_entry_id
        summary = result.summary
        numbers = result_figures(result)  # one basis, as %pi diff and the magics show
        if preview:
            text = str(summary or "")
            self._preview = {
                "summary": text if len(text) <= 8000 else text[:7999] + "…",
                "first_kept_id": first,
                "tokens_before": before,
                "tokens_after": after,
            }
            return with_warnings(
                f"Preview (nothing written): {numbers}, keeps from {first}.", result
            )
        self._preview = {}
        entry = result.entry
        where = f" as {entry['id']}" if entry is not None else ""
        return with_warnings(f"Compacted{where}: {numbers}, keeps from {first}.", result)

    def _do_discard_preview(self, _message: dict[str, Any]) -> str:
        self._preview = {}
        return "Preview discarded."

    def _do_omit(self, message: dict[str, Any]) -> str:
        eid = self._target(message)
        if any(pe.id == eid and pe.status == "omitted" for pe in self.tree.projection().entries):
            return f"{eid} is already omitted from the context; nothing written."
        entry = self._edit(eid, None)
        return f"Omitted {eid} from the context (edit {entry['id']}; history unchanged)."

    def _do_pin(self, message: dict[str, Any]) -> str:
        eid = self._target(message)
        if self.session is None:
            raise ActionError("Pinning needs a pi_nb.agent.Session (pins act at compaction).")
        from ..policies import enable_pins, pin

        enable_pins(self.session)
        pin(self.session, entry_id=eid)
        return f"Pinned {eid}: later compactions keep it verbatim."

    def _do_replace(self, message: dict[str, Any]) -> str:
        eid = self._target(message)
        text = message.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ActionError("Replace needs a non-empty text.")
        entry = self._edit(eid, text)
        return (
            f"Replaced {eid} in the context (edit {entry['id']}; history unchanged)."
        )

    def _edit(self, eid: str, text: str | None) -> Any:
        if self.session is not None and callable(getattr(self.session, "edit", None)):
            if text is None:
                return self.session.edit(eid, omit=True)
            return self.session.edit(eid, replace=text)
        return self.tree.append_context_edit(eid, None if text is None else {"content": text})


def _window_is_cheap(session: Any) -> bool:
    """Can ``session.window`` be read now without a slow lookup (litellm's first import)?"""
    if not isinstance(getattr(type(session), "window", None), property):
        return True  # a plain attribute
    known = getattr(session, "known_window", None)  # pi_nb.agent.Session: given or resolved
    return isinstance(known, int) or "litellm" in sys.modules


def _session_window(session: Any) -> int | None:
    try:
        value = getattr(session, "window", None)
        return int(value) if value else None
    except Exception:
        return None


#: Seconds between re-reads of a followed file (``follow=True``).
FOLLOW_INTERVAL = 1.0
MIN_FOLLOW_INTERVAL = 0.05


def _follow_interval(follow: bool | float | None) -> float:
    """``follow`` as seconds (0: do not follow); a one-line ValueError for bad values."""
    if follow is None or follow is False:
        return 0.0
    if follow is True:
        return FOLLOW_INTERVAL
    if isinstance(follow, (int, float)) and follow >= MIN_FOLLOW_INTERVAL:
        return float(follow)
    raise ValueError(
        f"follow must be True, False or an interval of at least {MIN_FOLLOW_INTERVAL} s, "
        f"not {follow!r}"
    )


def _follow_loop(ref: weakref.ref[SessionExplorer], stop: threading.Event, interval: float) -> None:
    """The follow thread: one poll per interval until stopped or the widget is forgotten
    (it holds the widget only weakly, for the length of one poll)."""
    while not stop.wait(interval):
        widget = ref()
        if widget is None or widget._closed:
            return
        try:
            widget.poll()
        except Exception as error:  # never let the thread die silently
            with contextlib.suppress(Exception):
                widget.status = f"Error: following the file: {_one_line(error)}"
        del widget


def _weak_listener(widget: SessionExplorer) -> Callable[[Entry], None]:
    """An on_append listener that does not keep a forgotten widget alive."""
    ref = weakref.ref(widget)

    def listener(entry: Entry) -> None:
        target = ref()
        if target is not None:
            target._appended(entry)

    return listener


def explore(
    session_or_tree: Any,
    window: int | None = None,
    reserve: int | None = None,
    follow: bool | float = False,
) -> SessionExplorer:
    """A :class:`SessionExplorer` for a session, a SessionTree or a session file path
    (``follow``: re-read the file as another process writes it)."""
    if isinstance(session_or_tree, (str, Path)):
        session_or_tree = SessionTree.open(session_or_tree)
    return SessionExplorer(session_or_tree, window=window, reserve=reserve, follow=follow)
