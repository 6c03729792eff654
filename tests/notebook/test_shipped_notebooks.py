"""The shipped notebooks render offline in every viewer and leave nothing in /tmp."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))

# math that needs MathJax (a CDN in nbconvert's HTML, GitHub and nbviewer differ)
DISPLAY_MATH = re.compile(r"\$\$|\\\(|\\\[|\\begin\{")
INLINE_MATH = re.compile(r"(?<![\\$\w])\$(?![\s$\d])[^$\n]+?(?<![\s\\])\$(?![\w$])")
CDN_SCRIPT = re.compile(r"<script[^>]*\bsrc\s*=\s*[\"']?[^\"'>]*(cdn|unpkg|jsdelivr)", re.I)
CODE_SPAN = re.compile(r"```.*?```|`[^`\n]*`", re.S)


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _text(value: object) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def offline_problems(path: Path) -> list[str]:
    """Math and CDN scripts in the markdown cells and rich outputs of a notebook."""
    problems = []
    for n, cell in enumerate(_cells(path)):
        where = f"{path.name} cell {n}"
        if cell["cell_type"] == "markdown":
            prose = CODE_SPAN.sub("", _text(cell["source"]))
            for pattern in (DISPLAY_MATH, INLINE_MATH, CDN_SCRIPT):
                problems += [f"{where}: {m.group(0)!r}" for m in pattern.finditer(prose)]
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            for mime in ("text/html", "text/markdown", "text/latex", "application/javascript"):
                if mime in data:
                    text = _text(data[mime])
                    problems += [
                        f"{where} {mime}: {m.group(0)!r}" for m in CDN_SCRIPT.finditer(text)
                    ]
                    if mime != "application/javascript":
                        problems += [
                            f"{where} {mime}: {m.group(0)!r}" for m in DISPLAY_MATH.finditer(text)
                        ]
    return problems


def test_the_scanner_finds_math_and_cdn_scripts(tmp_path: Path) -> None:
    cells = [
        {"cell_type": "markdown", "source": ["A projection\n", "$$C = P(H)$$\n"]},
        {"cell_type": "markdown", "source": "inline $x_1$ and \\(y\\); `$HOME` and $5 or $10 are fine"},
        {"cell_type": "code", "source": "", "outputs": [{"output_type": "display_data", "data": {
            "text/html": '<script src="https://cdn.jsdelivr.net/npm/x.js"></script>'}}]},
    ]  # fmt: skip
    path = tmp_path / "bad.ipynb"
    path.write_text(json.dumps({"cells": cells}))
    found = offline_problems(path)
    assert any("'$$'" in p for p in found) and any("'$x_1$'" in p for p in found)
    assert any("'\\\\('" in p for p in found) and any("text/html" in p for p in found)
    assert not any("HOME" in p or "$5" in p for p in found)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_renders_offline(path: Path) -> None:
    assert offline_problems(path) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_keeps_its_files_under_build(path: Path) -> None:
    code = "\n".join(_text(c["source"]) for c in _cells(path) if c["cell_type"] == "code")
    assert "mkdtemp" not in code and "gettempdir" not in code and "/tmp" not in code
    if "run_folder(" in code:
        assert f'run_folder("{path.stem}")' in code  # one folder per notebook, named after it


def test_run_folder_is_under_build_of_the_checkout_and_emptied(tmp_path: Path) -> None:
    from pi_nb.notebook import run_folder

    (tmp_path / "pyproject.toml").write_text("")
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    first = run_folder("01_quickstart", start=notebooks)  # cwd = notebooks/ (nbval, nbconvert)
    assert first == tmp_path / "build" / "notebooks" / "01_quickstart"
    (first / "old.jsonl").write_text("{}")
    assert run_folder("01_quickstart", start=tmp_path) == first  # cwd = the checkout
    assert list(first.iterdir()) == []  # emptied at the start of a run
    with pytest.raises(ValueError, match="plain folder name"):
        run_folder("../escape", start=tmp_path)
