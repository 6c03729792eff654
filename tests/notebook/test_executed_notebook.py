"""A real kernel runs a small notebook (nbclient, as ``nbconvert --execute`` does): what the
stored outputs, the HTML export and the markdown export show of ``%%pi`` and ``%pi widget``."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[2]
REPLY = " ".join(f"word{i}" for i in range(120))  # many streamed pieces

CELLS = [
    "%load_ext pi_nb",
    # flush at every word: the most output messages a reply can make
    "from pi_nb.notebook.magics import StreamPrinter\nStreamPrinter.flush_interval = 0\n"
    f"turns = [{REPLY!r}, 'The second reply.']",
    "%config PiMagics.model = 'pinb/scripted'\n%config PiMagics.tools = False\n"
    "%pi model --script turns --window 4096 --reserve 512",
    "%%pi\nTell me a long story.",
    "%pi widget",
    # an explorer changed from a later cell: the saved snapshot is its last state
    "from pi_nb.notebook.magics import current_session\n"
    "from pi_nb.notebook.widget import SessionExplorer\n"
    "session = current_session()\n"
    "explorer = SessionExplorer(session)\n"
    "explorer",
    "session.label(session.tree.get_branch()[0]['id'], 'label-set-later')\nexplorer.refresh()",
]


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("nb")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    nb.cells[2].source = f"%config PiMagics.session_dir = {str(folder)!r}\n" + nb.cells[2].source
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    old = dict(os.environ)
    os.environ.update(env)  # the kernel inherits it: it must import this checkout
    try:
        client = nbclient.NotebookClient(
            nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
        )
        client.execute()
    finally:
        os.environ.clear()
        os.environ.update(old)
    return nb


def _text(output: Any) -> str:
    if output.get("output_type") == "stream":
        return output.get("text", "")
    return output.get("data", {}).get("text/plain", "")


def test_a_streamed_reply_is_one_output_block(executed: Any) -> None:
    outputs = executed.cells[3].outputs
    holding = [o for o in outputs if "word0 " in _text(o)]
    assert len(holding) == 1, [o.get("output_type") for o in outputs]
    block = holding[0]
    assert block["output_type"] == "display_data"
    assert REPLY in _text(block)  # the final update: the whole reply, not its first piece
    assert not [o for o in outputs if "word119" in _text(o) and o is not block]
    # the reply block plus the token bar, nothing else
    assert len(outputs) == 2 and "context ▕" in _text(outputs[1])


def test_html_export_shows_the_reply_in_one_block(executed: Any) -> None:
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(executed)
    assert REPLY in body  # one <pre>, not one per flush


def test_html_export_shows_the_explorer_snapshot(executed: Any) -> None:
    from nbconvert import HTMLExporter

    live, _snapshot = executed.cells[4].outputs  # the live view, then its snapshot
    assert "application/vnd.jupyter.widget-view+json" in live["data"]  # live Jupyter: the widget
    assert "text/html" not in live["data"]
    # nbclient saved the widget state, so nbconvert renders the live output as the widget
    # (a CDN page script): the snapshot must stand in an output of its own.
    state = executed.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    assert live["data"]["application/vnd.jupyter.widget-view+json"]["model_id"] in state
    body, _ = HTMLExporter().from_notebook_node(executed)  # plain: no config of ours
    assert body.count('class="pi-nb-explorer-snapshot"') == 2  # %pi widget, explorer
    assert "Tell me a long story." in body  # the tree / context rows, readable without JS


def test_the_saved_snapshot_is_the_explorers_last_state(executed: Any) -> None:
    _live, snapshot = executed.cells[5].outputs
    assert "label-set-later" in snapshot["data"]["text/html"]
    assert not executed.cells[6].outputs  # the update replaced the output, it added none


def test_markdown_export_has_no_object_repr(executed: Any) -> None:
    from nbconvert import MarkdownExporter

    body, _ = MarkdownExporter().from_notebook_node(executed)
    assert not re.search(r"object at 0x", body)
    assert "Session explorer" in body and "entries" in body  # the snapshot (text/html)
