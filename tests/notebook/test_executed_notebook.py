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


def _static_html(nb: Any) -> str:
    """The HTML export as scripts/quickstart.sh makes it (its nbconvert config)."""
    import json

    from nbconvert import HTMLExporter
    from traitlets.config import Config

    config = json.loads((ROOT / "scripts" / "nbconvert_static.json").read_text())
    body, _ = HTMLExporter(config=Config(config)).from_notebook_node(nb)
    return body


def test_html_export_shows_the_reply_in_one_block(executed: Any) -> None:
    from nbconvert import HTMLExporter

    for body in (HTMLExporter().from_notebook_node(executed)[0], _static_html(executed)):
        assert REPLY in body  # one <pre>, not one per flush


def test_html_export_shows_the_explorer_snapshot(executed: Any) -> None:
    data = executed.cells[4].outputs[0]["data"]
    assert "application/vnd.jupyter.widget-view+json" in data  # live Jupyter: the widget
    body = _static_html(executed)
    assert 'class="pi-nb-explorer-snapshot"' in body
    assert "Tell me a long story." in body  # the tree / context rows, readable without JS


def test_markdown_export_has_no_object_repr(executed: Any) -> None:
    from nbconvert import MarkdownExporter

    body, _ = MarkdownExporter().from_notebook_node(executed)
    assert not re.search(r"object at 0x", body)
    assert "Session explorer" in body and "entries" in body  # the snapshot (text/html)
