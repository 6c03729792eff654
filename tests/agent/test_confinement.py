"""``default_tools(root=DIR)``: read, write and edit never touch a file outside DIR.

Every escape is refused with a one-line tool error and nothing is read or written outside;
paths inside DIR keep working; the notebook's default agent is confined to its folder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pi_nb.agent import default_tools
from pi_nb.agent import tools as tools_module
from pi_nb.agent.tools import ToolError

SECRET = "outside content\n"


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    """root/ (the allowed folder) next to outside/ (with a file the tools must not touch)."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "target.txt").write_text(SECRET)
    (root / "inside.txt").write_text("inside one\n")
    return {"root": root, "outside": outside, "tmp": tmp_path}


def _tools(root: Path, **kw: Any) -> dict[str, Any]:
    return {t.name: t for t in default_tools(root=root, **kw)}


def _refused(call: Any, **arguments: Any) -> str:
    with pytest.raises(ToolError) as info:
        call(**arguments)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    assert message.startswith("Refused:"), message
    return message


def _untouched(layout: dict[str, Path]) -> None:
    outside = layout["outside"]
    assert sorted(p.name for p in outside.iterdir()) == ["target.txt"]
    assert (outside / "target.txt").read_text() == SECRET
    made = sorted(p.name for p in layout["tmp"].iterdir() if not p.name.startswith("session.jsonl"))
    assert made == ["outside", "root"]  # (the test's own session file aside)


ESCAPES = [
    "../outside/target.txt",
    "../outside/new.txt",
    "../new.txt",
    "sub/../../outside/target.txt",
    "~/pi_nb_confinement_probe.txt",
]


@pytest.mark.parametrize("path", ESCAPES)
def test_relative_escapes_are_refused(layout, path):
    tools = _tools(layout["root"])
    _refused(tools["write"], path=path, content="x")
    _refused(tools["edit"], path=path, old_text="outside", new_text="x")
    _refused(tools["read"], path=path)
    _untouched(layout)
    assert not (Path.home() / "pi_nb_confinement_probe.txt").exists()


def test_absolute_paths_outside_are_refused(layout):
    tools = _tools(layout["root"])
    target = str(layout["outside"] / "target.txt")
    message = _refused(tools["write"], path=target, content="x")
    assert "outside the allowed folder" in message and str(layout["root"]) in message
    _refused(tools["edit"], path=target, old_text="outside", new_text="x")
    _refused(tools["read"], path=target)
    _refused(tools["write"], path=str(layout["outside"] / "new.txt"), content="x")
    _refused(tools["read"], path="/etc/hostname")
    _untouched(layout)


def test_a_symlinked_file_pointing_outside_is_refused(layout):
    root = layout["root"]
    (root / "link.txt").symlink_to(layout["outside"] / "target.txt")
    (root / "dangling.txt").symlink_to(layout["outside"] / "created.txt")
    tools = _tools(root)
    message = _refused(tools["write"], path="link.txt", content="x")
    assert "symlink" in message
    _refused(tools["edit"], path="link.txt", old_text="outside", new_text="x")
    _refused(tools["read"], path="link.txt")
    _refused(tools["write"], path="dangling.txt", content="x")  # would create outside/created.txt
    _untouched(layout)


def test_a_symlinked_folder_pointing_outside_is_refused(layout):
    root = layout["root"]
    (root / "linkdir").symlink_to(layout["outside"], target_is_directory=True)
    tools = _tools(root)
    _refused(tools["write"], path="linkdir/target.txt", content="x")
    _refused(tools["write"], path="linkdir/new.txt", content="x")
    _refused(tools["write"], path="linkdir/deeper/new.txt", content="x")  # through the parent
    _refused(tools["edit"], path="linkdir/target.txt", old_text="outside", new_text="x")
    _refused(tools["read"], path="linkdir/target.txt")
    _untouched(layout)


def test_a_hard_link_to_a_file_outside_is_not_written(layout):
    root = layout["root"]
    os.link(layout["outside"] / "target.txt", root / "hard.txt")
    tools = _tools(root)
    assert "hard links" in _refused(tools["write"], path="hard.txt", content="x")
    assert "hard links" in _refused(tools["edit"], path="hard.txt", old_text="outside", new_text="x")
    assert (layout["outside"] / "target.txt").read_text() == SECRET
    assert tools["read"](path="hard.txt") == SECRET.strip()  # its content is in the folder


def test_a_symlink_swapped_in_after_the_check_is_refused(layout, monkeypatch):
    # The path is checked, then (the race) replaced by a symlink pointing outside before the
    # tool opens it: the open does not follow it.
    root = layout["root"]
    (root / "sub").mkdir()
    original = tools_module._Workspace.resolve
    swaps = {
        "new.txt": lambda: (root / "new.txt").symlink_to(layout["outside"] / "target.txt"),
        "inside.txt": lambda: (
            (root / "inside.txt").unlink(),
            (root / "inside.txt").symlink_to(layout["outside"] / "target.txt"),
        ),
        "sub/file.txt": lambda: (
            (root / "sub").rmdir(),
            (root / "sub").symlink_to(layout["outside"], target_is_directory=True),
        ),
    }

    def resolve_then_swap(self, path):
        checked = original(self, path)
        swaps.pop(path, lambda: None)()
        return checked

    monkeypatch.setattr(tools_module._Workspace, "resolve", resolve_then_swap)
    tools = _tools(root)
    assert "became a symlink" in _refused(tools["write"], path="new.txt", content="x")
    assert "became a symlink" in _refused(tools["edit"], path="inside.txt", old_text="outside", new_text="x")
    assert "became a symlink" in _refused(tools["write"], path="sub/file.txt", content="x")
    assert (layout["outside"] / "target.txt").read_text() == SECRET
    assert not (layout["outside"] / "file.txt").exists()


def test_paths_inside_the_root_work(layout):
    root = layout["root"]
    (root / "alias.txt").symlink_to("inside.txt")  # a symlink that stays inside is fine
    (root / "aliasdir").symlink_to(root, target_is_directory=True)
    tools = _tools(root)
    assert "Wrote" in tools["write"](path="a/b/new.txt", content="made\n")
    assert (root / "a" / "b" / "new.txt").read_text() == "made\n"
    assert tools["read"](path=str(root / "a/b/new.txt")) == "made"
    assert tools["read"](path="a/../inside.txt") == "inside one"
    tools["edit"](path="alias.txt", old_text="one", new_text="two")
    assert (root / "inside.txt").read_text() == "inside two\n"
    assert (root / "alias.txt").is_symlink()
    tools["write"](path="aliasdir/inside.txt", content="rewritten\n")
    assert (root / "inside.txt").read_text() == "rewritten\n"
    _untouched(layout)


def test_a_root_reached_through_a_symlink_works(layout):
    alias = layout["tmp"] / "alias_root"
    alias.symlink_to(layout["root"], target_is_directory=True)
    tools = _tools(alias)
    tools["write"](path="x.txt", content="ok")
    assert (layout["root"] / "x.txt").read_text() == "ok"
    tools["write"](path=str(alias / "y.txt"), content="ok")
    assert (layout["root"] / "y.txt").read_text() == "ok"
    _refused(tools["write"], path="../outside/target.txt", content="x")
    assert (layout["outside"] / "target.txt").read_text() == SECRET
    alias.unlink()


def test_the_root_itself_and_a_missing_root_give_one_line_errors(tmp_path):
    tools = _tools(tmp_path / "missing")
    with pytest.raises(ToolError, match=r"^The allowed folder .* does not exist$"):
        tools["write"](path="a.txt", content="x")
    assert not (tmp_path / "missing").exists()
    tools = _tools(tmp_path)
    with pytest.raises(ToolError, match="is a directory"):
        tools["write"](path=".", content="x")
    with pytest.raises(ValueError, match="outside root"):
        default_tools(tmp_path.parent, root=tmp_path)


def test_unconfined_tools_still_reach_anywhere(layout):
    # Without root the tools behave as before: the caller chose no confinement.
    tools = {t.name: t for t in default_tools(layout["root"])}
    tools["write"](path="../outside/free.txt", content="x")
    assert (layout["outside"] / "free.txt").read_text() == "x"


def test_a_refusal_reaches_the_model_as_a_one_line_tool_error(make_session, layout):
    root = layout["root"]
    calls = [
        {"name": "write", "arguments": {"path": "../outside/target.txt", "content": "x"}},
        {"name": "write", "arguments": {"path": "ok.txt", "content": "fine"}},
    ]
    session = make_session([{"tool_calls": calls}, "done"], tools=default_tools(root=root))
    results = [m for m in session.prompt("go").messages if m["role"] == "toolResult"]
    assert [r["isError"] for r in results] == [True, False]
    text = results[0]["content"][0]["text"]
    assert text.startswith("Refused:") and "\n" not in text
    assert (root / "ok.txt").read_text() == "fine"
    _untouched(layout)


def test_file_tool_failures_are_one_line_for_the_model(make_session, tmp_path):
    (tmp_path / "plain.txt").write_text("text\n")
    (tmp_path / "folder").mkdir()
    calls = [
        {"name": "read", "arguments": {"path": "missing.txt"}},
        {"name": "read", "arguments": {"path": "plain.txt/below.txt"}},
        {"name": "write", "arguments": {"path": "plain.txt/below.txt", "content": "x"}},
        {"name": "write", "arguments": {"path": "folder", "content": "x"}},
        {"name": "edit", "arguments": {"path": "folder", "old_text": "a", "new_text": "b"}},
        {"name": "read", "arguments": {"path": "folder"}},
    ]
    for tools in (default_tools(tmp_path), default_tools(root=tmp_path)):
        session = make_session([{"tool_calls": calls}, "done"], name=f"s{id(tools)}.jsonl", tools=tools)
        results = [m for m in session.prompt("go").messages if m["role"] == "toolResult"]
        assert len(results) == len(calls)
        for result in results:
            text = result["content"][0]["text"]
            assert result["isError"], text
            assert "\n" not in text and "Traceback" not in text and "Errno" not in text, text
        session.close()


# --- the notebook's default agent ----------------------------------------------------------------


def test_the_notebook_default_agent_is_confined_to_its_folder(layout, capsys):
    # The magics object the extension registers, driven the way a cell drives it (without a
    # global IPython shell, which other test files own).
    from pi_nb.notebook.magics import PiMagics

    root = layout["root"]
    (root / "link.txt").symlink_to(layout["outside"] / "target.txt")
    calls = [
        {"name": "write", "arguments": {"path": "../outside/escape.txt", "content": "x"}},
        {"name": "write", "arguments": {"path": str(layout["outside"] / "target.txt"), "content": "x"}},
        {"name": "edit", "arguments": {"path": "link.txt", "old_text": "outside", "new_text": "x"}},
        {"name": "write", "arguments": {"path": "notes/kept.txt", "content": "kept"}},
    ]
    magics = PiMagics(shell=None, model="pinb/scripted", llm_kwargs={"script": [{"tool_calls": calls}, "done"]})
    assert magics.tools  # the default: the agent gets the default tools
    magics.pi(f"new {root / 'nb.jsonl'} --cwd {root}")
    magics.pi("", "try to escape")
    session = magics.session
    try:
        assert session.cwd == str(root)
        results = [e["message"] for e in session.tree.entries if e.get("message", {}).get("role") == "toolResult"]
        assert [r["isError"] for r in results] == [True, True, True, False]
        assert all(r["content"][0]["text"].startswith("Refused:") for r in results[:3])
        assert (root / "notes" / "kept.txt").read_text() == "kept"
        _untouched(layout)
        assert "Refused:" in capsys.readouterr().out  # the user sees the refusal in the cell too
        assert all(f"Only files under {root} " in t.description for t in session.tools if t.name != "bash")
    finally:
        session.tree.close()
