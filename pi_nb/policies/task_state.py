"""An authoritative task-state note: goal, constraints, decisions — never a summary.

A compaction summary is a lossy, model-written account of the past; it should not be the
record of what the task *is*. The task state is that record: a short note the user edits
explicitly (:func:`update_task_state`) and the agent edits explicitly (the tool
``update_task_state``, see :func:`task_state_tool`). Every edit is a ``custom`` entry
(``customType`` :data:`TASK_STATE_TYPE`, ``data`` = the whole new state), which Pi 1.3 ignores;
the state is the latest such entry on the current branch, so it follows ``/tree`` navigation
and forks like everything else.

:class:`TaskStatePolicy` is a ``context`` handler (Pi's ``transformContext``, installed with
:meth:`~pi_nb.hooks.Hooks.on`): it puts the note into **every request** as a ``custom``
message (sent as a user message) — at the start of the context, or just before the current
prompt. It is never written into the session's messages and never produced by summarization,
so compactions cannot distort it.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

from ..entries import Entry, Message, iso_to_ms
from ..hooks import CONTEXT, Event
from ._base import HookedPolicy, PolicyHooks, check_choice, custom_entries, tree_of

if TYPE_CHECKING:
    from ..agent.tools import Tool
    from ._base import PolicySession, SessionOrTree

__all__ = [
    "TASK_STATE_TOOL",
    "TASK_STATE_TYPE",
    "TaskState",
    "TaskStatePolicy",
    "clear_task_state",
    "disable_task_state",
    "enable_task_state",
    "task_state",
    "task_state_from_entries",
    "task_state_tool",
    "update_task_state",
]

#: ``customType`` of a task-state entry (and of the message injected into requests).
TASK_STATE_TYPE = "pi_nb.task_state"
#: Name of the agent's tool.
TASK_STATE_TOOL = "update_task_state"
_PREAMBLE = (
    "Authoritative task state, kept explicitly by the user and the agent. It is not a "
    "summary: where older messages or summaries disagree with it, it wins. Change it with "
    f"the {TASK_STATE_TOOL} tool when the goal, a constraint or a decision changes."
)

Position = Literal["start", "before_prompt"]


@dataclass
class TaskState:
    """The task state at one point of a branch.

    Attributes:
        goal: what the user wants.
        constraints: requirements and rules that hold for the whole task.
        decisions: choices made so far (and why).
        by: who made the latest edit (``"user"`` or ``"agent"``).
        entry_id / timestamp: the entry holding this state (None for the empty state).
    """

    goal: str = ""
    constraints: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    by: str | None = None
    entry_id: str | None = None
    timestamp: str | None = None

    @property
    def empty(self) -> bool:
        return not (self.goal or self.constraints or self.decisions)

    def to_data(self) -> dict[str, Any]:
        """What a task-state entry stores in ``data``."""
        return {
            "goal": self.goal,
            "constraints": list(self.constraints),
            "decisions": list(self.decisions),
            "by": self.by,
        }

    @classmethod
    def from_entry(cls, entry: Entry) -> TaskState:
        data = entry.get("data") if isinstance(entry.get("data"), Mapping) else {}

        def strings(value: Any) -> list[str]:
            return [str(v) for v in value if str(v).strip()] if isinstance(value, list) else []

        goal = data.get("goal")
        by = data.get("by")
        return cls(
            goal=goal if isinstance(goal, str) else "",
            constraints=strings(data.get("constraints")),
            decisions=strings(data.get("decisions")),
            by=by if isinstance(by, str) else None,
            entry_id=entry.get("id"),
            timestamp=entry.get("timestamp"),
        )

    def render(self) -> str:
        """The note as sent to the model (inside ``<task-state>`` tags)."""
        lines = ["<task-state>", _PREAMBLE, ""]
        lines.append(f"Goal: {self.goal or '(not set)'}")
        lines += ["", "Constraints:"]
        lines += [f"- {c}" for c in self.constraints] or ["- (none)"]
        lines += ["", "Decisions:"]
        lines += [f"- {d}" for d in self.decisions] or ["- (none)"]
        lines.append("</task-state>")
        return "\n".join(lines)

    def message(self) -> Message:
        """The ``custom`` message injected into requests (not stored in the session)."""
        return {
            "role": "custom",
            "customType": TASK_STATE_TYPE,
            "content": [{"type": "text", "text": self.render()}],
            "display": False,
            "details": {"entryId": self.entry_id, "by": self.by},
            "timestamp": iso_to_ms(self.timestamp) or 0,
        }

    def __str__(self) -> str:
        return self.render()

    def _repr_html_(self) -> str:
        esc = html.escape

        def items(values: list[str]) -> str:
            return "".join(f"<li>{esc(v)}</li>" for v in values) or "<li><i>none</i></li>"

        who = f" (last edit by {esc(self.by)})" if self.by else ""
        return (
            f"<div class='pi-nb-task-state'><b>Task state</b>{who}"
            f"<div><b>Goal:</b> {esc(self.goal) or '<i>not set</i>'}</div>"
            f"<div><b>Constraints</b><ul>{items(self.constraints)}</ul></div>"
            f"<div><b>Decisions</b><ul>{items(self.decisions)}</ul></div></div>"
        )


def task_state_from_entries(entries: Iterable[Entry]) -> TaskState:
    """The task state at the end of ``entries`` (a branch root→leaf): its latest edit."""
    latest: Entry | None = None
    for entry in custom_entries(entries, TASK_STATE_TYPE):
        latest = entry
    return TaskState() if latest is None else TaskState.from_entry(latest)


def task_state(session: SessionOrTree) -> TaskState:
    """The task state on the current branch of ``session`` (a Session or SessionTree)."""
    return task_state_from_entries(tree_of(session).get_branch())


def _clean(values: Iterable[Any] | str | None) -> list[str]:
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    return [" ".join(str(v).split()) for v in values if str(v).strip()]


def _merge(current: list[str], add: list[str], remove: list[str]) -> list[str]:
    from .pins import normalize_fact

    dropped = {normalize_fact(r) for r in remove}
    out = [c for c in current if normalize_fact(c) not in dropped]
    seen = {normalize_fact(c) for c in out}
    for item in add:
        key = normalize_fact(item)
        if key not in seen:
            out.append(item)
            seen.add(key)
    return out


def update_task_state(
    session: SessionOrTree,
    *,
    goal: str | None = None,
    constraints: Sequence[str] | None = None,
    decisions: Sequence[str] | None = None,
    add_constraints: Sequence[str] | str = (),
    remove_constraints: Sequence[str] | str = (),
    add_decisions: Sequence[str] | str = (),
    remove_decisions: Sequence[str] | str = (),
    by: str = "user",
) -> TaskState:
    """Edit the task state; appends one entry with the whole new state (none if unchanged).

    ``goal`` / ``constraints`` / ``decisions`` replace; ``add_*`` / ``remove_*`` edit the lists
    (removal matches case- and punctuation-insensitively). Returns the new state.
    """
    tree = tree_of(session)
    current = task_state(tree)
    new_goal = current.goal if goal is None else " ".join(str(goal).split())
    base_constraints = current.constraints if constraints is None else _clean(constraints)
    base_decisions = current.decisions if decisions is None else _clean(decisions)
    new = TaskState(
        goal=new_goal,
        constraints=_merge(base_constraints, _clean(add_constraints), _clean(remove_constraints)),
        decisions=_merge(base_decisions, _clean(add_decisions), _clean(remove_decisions)),
        by=by,
    )
    if (new.goal, new.constraints, new.decisions) == (
        current.goal,
        current.constraints,
        current.decisions,
    ):
        return current
    entry = tree.append_custom(TASK_STATE_TYPE, new.to_data())
    new.entry_id, new.timestamp = entry["id"], entry.get("timestamp")
    return new


def clear_task_state(session: SessionOrTree, by: str = "user") -> TaskState:
    """Empty the task state (one entry; the history of edits stays in the file)."""
    return update_task_state(session, goal="", constraints=[], decisions=[], by=by)


# --- the agent's tool ----------------------------------------------------------------------------


def _strings(description: str) -> dict[str, Any]:
    """JSON schema of a list of strings."""
    return {"type": "array", "items": {"type": "string"}, "description": description}


_TOOL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "goal": {"type": "string", "description": "The new goal (replaces the current one)."},
        "add_constraints": _strings("Constraints to add (rules that hold for the whole task)."),
        "remove_constraints": _strings("Constraints to remove (their exact text)."),
        "add_decisions": _strings("Decisions to record, with the reason."),
        "remove_decisions": _strings("Decisions to withdraw (their exact text)."),
    },
}


def task_state_tool(session: SessionOrTree) -> Tool:
    """The ``update_task_state`` tool bound to ``session``: the agent's way to edit the note
    (each call appends a task-state entry with ``by: "agent"``)."""
    from ..agent.tools import Tool, ToolResult

    def run(
        goal: str | None = None,
        add_constraints: list[str] | None = None,
        remove_constraints: list[str] | None = None,
        add_decisions: list[str] | None = None,
        remove_decisions: list[str] | None = None,
    ) -> Any:
        before = task_state(session)
        state = update_task_state(
            session,
            goal=goal,
            add_constraints=add_constraints or (),
            remove_constraints=remove_constraints or (),
            add_decisions=add_decisions or (),
            remove_decisions=remove_decisions or (),
            by="agent",
        )
        changed = state.entry_id != before.entry_id
        head = "Task state updated." if changed else "Task state unchanged."
        return ToolResult.text(
            f"{head}\n{state.render()}", details={"entryId": state.entry_id, "changed": changed}
        )

    return Tool(
        name=TASK_STATE_TOOL,
        description=(
            "Update the authoritative task state (goal, constraints, decisions) that is shown "
            "at the start of every request. Call it when the user sets or changes the goal, "
            "states a lasting constraint, or when a decision is made."
        ),
        parameters=_TOOL_PARAMETERS,
        fn=run,
        execution_mode="sequential",
    )


# --- the policy ----------------------------------------------------------------------------------


@dataclass(eq=False, repr=False, kw_only=True)
class TaskStatePolicy(HookedPolicy):
    """The ``context`` handler that puts the task state into every request.

    Args:
        session: the Session (or SessionTree) whose branch holds the state.
        position: ``"start"`` (default: first message of the context) or
            ``"before_prompt"`` (just before the latest user message).
        tool: also give the agent the ``update_task_state`` tool (added to
            ``session.tools`` by :meth:`install`, removed by :meth:`remove`).
    """

    kind = "task_state"
    session: SessionOrTree = field(kw_only=False)
    position: Position = "start"
    tool: bool = True
    _tool: Tool | None = field(default=None, init=False)
    #: Number of requests the note was injected into.
    injected: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        super().__init__()
        check_choice("position", self.position, get_args(Position))

    def handlers(self) -> list[tuple[str, Callable[[Any], Any]]]:
        return [(CONTEXT, self.on_context)]

    def session_needs(self) -> tuple[str, ...]:
        return ("tree",)  # the state is read from the branch at every request

    def install(self, hooks: PolicyHooks) -> TaskStatePolicy:
        super().install(hooks)
        tools = getattr(self.session, "tools", None)
        if (
            self.tool
            and isinstance(tools, list)
            and not any(getattr(t, "name", None) == TASK_STATE_TOOL for t in tools)
        ):
            self._tool = task_state_tool(self.session)
            tools.append(self._tool)
        return self

    def remove(self) -> None:
        super().remove()
        tools = getattr(self.session, "tools", None)
        if self._tool is not None and isinstance(tools, list) and self._tool in tools:
            tools.remove(self._tool)
        self._tool = None

    def on_context(self, event: Event) -> list[Message] | None:
        """``context``: the messages with the task-state note inserted (None when empty)."""
        state = task_state(self.session)
        if state.empty:
            return None
        messages = list(event["messages"])
        index = 0
        if self.position == "before_prompt":
            index = next(
                (i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user"),
                0,
            )
        messages.insert(index, state.message())
        self.injected += 1
        return messages

    __call__ = on_context

    def __repr__(self) -> str:
        return (
            f"<TaskStatePolicy {self._state}, position={self.position}, injected={self.injected}>"
        )


def enable_task_state(session: PolicySession, **options: Any) -> TaskStatePolicy:
    """Install a :class:`TaskStatePolicy` on ``session.hooks`` (once) and, by default, give
    the agent the ``update_task_state`` tool. ``options`` go to :class:`TaskStatePolicy`."""
    return TaskStatePolicy.enable(session, **options)


def disable_task_state(session: PolicySession) -> bool:
    """Remove the policy :func:`enable_task_state` installed (and its tool); True if there
    was one. The state stays in the session."""
    return TaskStatePolicy.disable(session)
