"""The session explorer in a real browser: JupyterLab + headless chromium (Playwright).

1. A notebook copies the sample session, opens it and displays ``SessionExplorer``; the test
   clicks an entry that is NOT on the current path and "Branch here", then checks from the
   kernel (a cell printing ``tree.leaf_id``) that the leaf moved; then omits a message on the
   new path and checks the session file from the test process (the context edit hangs off the
   new leaf). It runs twice: built in Python, and as a user types it (`%load_ext pi_nb`,
   `%pi open`, `%pi widget`). Screenshots go to tests/artifacts/explorer_{python,magics}.png
   (+ explorer_dark.png).
2. A 10,000-entry session renders in < 1 s, measured in the page with performance.now().
3. Follow mode: the test process appends to the file the kernel follows (a torn line, then a
   compaction); tree, context panel and token bar update; closing the widget ends the thread.
4. The plain ``nbconvert --to html`` page of an executed notebook, opened with every
   network request refused: the explorer's snapshot shows (the widget runtime would come
   from a CDN).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from pinb_testkit import pi_turn_lines

pytestmark = pytest.mark.browser

OFF_PATH = "1a2b3c12"  # "Whitelist added" — on the abandoned currency-whitelist branch
ON_NEW_PATH = "1a2b3c10"  # an assistant message on that branch (editable once we branch)
RENDER_BUDGET_MS = 1000
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
Lab = Any  # the conftest's Lab (url, token, root, pid, log)


def write_notebook(path: Path, cells: list[str]) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nbformat.write(nb, str(path))


def open_notebook(page: Any, lab: Lab, name: str) -> None:
    page.goto(lab.open_url(name), wait_until="domcontentloaded")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    # the kernel is ready when the toolbar indicator / status bar says idle
    page.wait_for_function(
        """() => {
            const ind = document.querySelector('.jp-Notebook-ExecutionIndicator');
            if (ind && ind.getAttribute('data-status') === 'idle') return true;
            const bar = document.querySelector('#jp-main-statusbar');
            return !!bar && /\\bIdle\\b/.test(bar.textContent);
        }""",
        timeout=60_000,
    )


def run_cell(page: Any, index: int, attempts: int = 12) -> None:
    """Shift+Enter on cell ``index``, retried until its prompt shows [*] or [n] (the first
    key press right after the kernel turns idle can be dropped)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    prompt = cell.locator(".jp-InputPrompt")
    for _ in range(attempts):
        cell.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        try:
            page.wait_for_function(
                "(el) => /\\[(\\*|\\d+)\\]/.test(el.textContent)",
                arg=prompt.element_handle(),
                timeout=2_500,
            )
            return
        except PlaywrightTimeout:
            continue
    raise AssertionError(f"cell {index} never started running")


def cell_output(page: Any, index: int, pattern: str, timeout: int = 30_000) -> str:
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    out = cell.locator(".jp-OutputArea-output", has_text=re.compile(pattern)).first
    out.wait_for(timeout=timeout)
    return str(out.inner_text())


def tree_row(explorer: Any, entry_id: str) -> Any:
    return explorer.locator(
        ".pinb-tree .pinb-row", has=explorer.page.locator(".pinb-id", has_text=entry_id)
    )


def read_entries(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()][1:]


def switch_theme(page: Any, theme: str) -> bool:
    """Settings ▸ Theme ▸ <theme> through the menu bar; False when the menu is not found."""
    try:
        page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
        page.locator(".lm-Menu-itemLabel", has_text="Theme").first.hover()
        page.locator(".lm-Menu-itemLabel", has_text=theme).first.click()
        page.wait_for_function(
            "(t) => document.body.dataset.jpThemeName === t", arg=theme, timeout=10_000
        )
        page.wait_for_timeout(400)
        return True
    except Exception:
        return False


@pytest.mark.parametrize("how", ["python", "magics"])
def test_click_branch_and_omit_round_trip(
    lab: Lab, browser_context: Any, tmp_path: Path, how: str
) -> None:
    copy = tmp_path / "session.jsonl"
    setup = (
        "import shutil\n"
        "from pi_nb.samples import sample_session_path\n"
        f"shutil.copy(sample_session_path(), {str(copy)!r})\n"
    )
    if how == "python":
        cells = [
            setup + "from pi_nb.session.tree import SessionTree\n"
            "from pi_nb.notebook.widget import SessionExplorer\n"
            f"tree = SessionTree.open({str(copy)!r})\n"
            "explorer = SessionExplorer(tree)\n"
            "explorer",
            'print(f"LEAF={tree.leaf_id} SELECTED={explorer.selected_id}")',
        ]
    else:  # what a notebook user types: the magics' current session and %pi widget
        cells = [
            setup + "%load_ext pi_nb\n" + f"%pi open {copy}\n" + "%pi widget",
            "from pi_nb.notebook.magics import current_session\n"
            'print(f"LEAF={current_session().tree.leaf_id}")',
        ]
    write_notebook(lab.root / f"explorer_{how}.ipynb", cells)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = browser_context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        open_notebook(page, lab, f"explorer_{how}.ipynb")
        run_cell(page, 0)
        explorer = page.locator(".pinb-explorer.pinb-ready").first
        explorer.wait_for(timeout=60_000)
        assert "1a2b3c1b" in tree_row(explorer, "1a2b3c1b").inner_text()  # the leaf, drawn
        # the kernel displayed a static snapshot too; the live view hides it: one explorer
        snapshot = page.locator("[data-pi-nb-snapshot]").first
        snapshot.wait_for(state="attached", timeout=20_000)
        assert not snapshot.is_visible()

        # select an entry off the current path, then branch there
        row = tree_row(explorer, OFF_PATH)
        assert "pinb-path" not in (row.get_attribute("class") or "")
        row.click()
        page.wait_for_function(
            "(id) => [...document.querySelectorAll('.pinb-tree .pinb-sel .pinb-id')]"
            ".some((e) => e.textContent === id)",
            arg=OFF_PATH,
            timeout=10_000,
        )
        explorer.locator('[data-act="branch"]').click()
        explorer.locator(".pinb-status", has_text="Leaf moved").wait_for(timeout=20_000)
        assert "pinb-leaf" in (tree_row(explorer, OFF_PATH).get_attribute("class") or "")

        # the kernel agrees: the tree's leaf and the synced selection moved
        run_cell(page, 1)
        text = cell_output(page, 1, "LEAF=")
        assert f"LEAF={OFF_PATH}" in text, text
        if how == "python":
            assert f"SELECTED={OFF_PATH}" in text, text

        # omit a message on the new path: the file gains a context edit under the new leaf
        tree_row(explorer, ON_NEW_PATH).click()
        explorer.locator('[data-act="omit"]:not([disabled])').click()
        explorer.locator(".pinb-status", has_text="Omitted").wait_for(timeout=20_000)
        last = read_entries(copy)[-1]
        assert last["type"] == "context_edit"
        assert last["targetId"] == ON_NEW_PATH and last["replacement"] is None
        assert last["parentId"] == OFF_PATH  # appended on the branch we moved to
        ctx = explorer.locator(".pinb-ctx .pinb-row", has_text="omitted").first
        ctx.wait_for(timeout=10_000)

        explorer.scroll_into_view_if_needed()
        explorer.screenshot(path=str(ARTIFACTS / f"explorer_{how}.png"))
        if switch_theme(page, "JupyterLab Dark"):
            explorer.screenshot(path=str(ARTIFACTS / "explorer_dark.png"))
            switch_theme(page, "JupyterLab Light")
        assert not errors, errors
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "explorer_failure.png"), full_page=True)
        print(lab.log_tail())
        raise
    finally:
        page.close()


def test_10k_entries_render_under_a_second(lab: Lab, browser_context: Any) -> None:
    write_notebook(
        lab.root / "explorer_10k.ipynb",
        [
            "import time\n"
            "from pi_nb.notebook.widget import SessionExplorer\n"
            "from pi_nb.notebook.widget_state import synthetic_session\n"
            "big_tree = synthetic_session(10_000)\n"
            "t0 = time.perf_counter()\n"
            "big = SessionExplorer(big_tree)\n"
            'print(f"ENTRIES={len(big_tree)} STATE_MS={(time.perf_counter() - t0) * 1000:.0f}")\n'
            "big",
        ],
    )
    page = browser_context.new_page()
    try:
        open_notebook(page, lab, "explorer_10k.ipynb")
        run_cell(page, 0)
        explorer = page.locator(".pinb-explorer.pinb-ready").first
        explorer.wait_for(timeout=90_000)
        render_ms = float(explorer.get_attribute("data-render-ms") or "nan")
        paint_ms = float(explorer.get_attribute("data-paint-ms") or "nan")
        state = cell_output(page, 0, "ENTRIES=")
        rows_in_dom = explorer.locator(".pinb-tree .pinb-row").count()
        print(
            f"10k explorer: {state.strip()}; render {render_ms:.1f} ms, first paint {paint_ms:.1f} ms"
        )
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / "explorer_10k_timing.json").write_text(
            json.dumps({"render_ms": render_ms, "paint_ms": paint_ms, "kernel": state.strip()})
        )
        explorer.screenshot(path=str(ARTIFACTS / "explorer_10k.png"))
        assert rows_in_dom < 200  # virtualized: only the visible window is in the DOM
        assert render_ms < RENDER_BUDGET_MS and paint_ms < RENDER_BUDGET_MS, (render_ms, paint_ms)
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "explorer_10k_failure.png"), full_page=True)
        raise
    finally:
        page.close()


def _append(path: Path, text: str) -> None:
    """Append raw text as another writer would (this test process is not the kernel)."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text)


def test_follow_mode_updates_the_view_as_another_process_writes(
    lab: Lab, browser_context: Any, tmp_path: Path
) -> None:
    from pi_nb.notebook import widget_state
    from pi_nb.session.tree import SessionTree

    copy = tmp_path / "followed.jsonl"
    write_notebook(
        lab.root / "follow.ipynb",
        [
            "import shutil\n"
            "from pi_nb.samples import sample_session_path\n"
            "from pi_nb.session.tree import SessionTree\n"
            "from pi_nb.notebook.widget import SessionExplorer\n"
            f"shutil.copy(sample_session_path(), {str(copy)!r})\n"
            f"tree = SessionTree.open({str(copy)!r})\n"
            "explorer = SessionExplorer(tree, follow=0.2)\n"
            "explorer",
            "import threading\n"
            "explorer.close()\n"
            "alive = [t for t in threading.enumerate() if t.name == 'pi_nb-explorer-follow']\n"
            'print(f"LEAF={tree.leaf_id} FOLLOWERS={len(alive)}")',
        ],
    )
    lines = pi_turn_lines("1a2b3c1b", "FOLLOWED-PROMPT add JPY", "FOLLOWED-SUMMARY of JPY")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = browser_context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        open_notebook(page, lab, "follow.ipynb")
        run_cell(page, 0)
        explorer = page.locator(".pinb-explorer.pinb-ready").first
        explorer.wait_for(timeout=60_000)
        assert "following the file · every 0.2 s" in explorer.locator(".pinb-meta").inner_text()
        used_before = explorer.locator(".pinb-used").inner_text()

        # a turn arrives, its reply torn in two writes: the user message shows, the half line not
        _append(copy, lines[0] + lines[1][:50])
        tree_row(explorer, "f0000001").wait_for(timeout=20_000)
        page.wait_for_timeout(800)  # several more polls
        assert tree_row(explorer, "f0000002").count() == 0
        assert "pinb-leaf" in (tree_row(explorer, "f0000001").get_attribute("class") or "")

        # the rest of the reply and Pi's compaction: tree, context and token bar follow
        _append(copy, lines[1][50:] + lines[2])
        tree_row(explorer, "f0000003").wait_for(timeout=20_000)
        page.wait_for_function(
            "() => [...document.querySelectorAll('.pinb-tree .pinb-leaf .pinb-id')]"
            ".some((e) => e.textContent === 'f0000003')",
            timeout=20_000,
        )
        explorer.locator(".pinb-ctx .pinb-row", has_text="FOLLOWED-SUMMARY").first.wait_for(
            timeout=20_000
        )
        # one basis: the file's messages (as a fresh open estimates them) plus the system
        # prompt and tool declarations the bar shows as their own segment
        overhead = page.evaluate(
            "() => { const e = [...document.querySelectorAll('.pinb-explorer .pinb-leg')]"
            ".find((x) => x.textContent.startsWith('system prompt + tool declarations'));"
            " return e ? Number(e.textContent.replace(/[^0-9]/g, '')) : 0; }"
        )
        expected = widget_state.token_state(SessionTree.open(copy))["used"] + overhead
        page.wait_for_function(
            "(n) => document.querySelector('.pinb-explorer .pinb-used').textContent === n",
            arg=f"{expected:,}",
            timeout=20_000,
        )
        assert f"{expected:,}" != used_before
        explorer.scroll_into_view_if_needed()
        explorer.screenshot(path=str(ARTIFACTS / "explorer_follow.png"))

        # closing the widget stops the kernel's follow thread
        run_cell(page, 1)
        text = cell_output(page, 1, "FOLLOWERS=")
        assert "LEAF=f0000003" in text and "FOLLOWERS=0" in text, text
        assert not errors, errors
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "explorer_follow_failure.png"), full_page=True)
        print(lab.log_tail())
        raise
    finally:
        page.close()


def test_exported_page_shows_the_snapshot_offline(browser_context: Any, tmp_path: Path) -> None:
    import os

    import nbclient
    from nbconvert import HTMLExporter

    from pi_nb.samples import sample_session_path

    root = Path(__file__).resolve().parents[2]
    copy = tmp_path / "sample.jsonl"
    copy.write_bytes(Path(sample_session_path()).read_bytes())
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(src)
        for src in ("%load_ext pi_nb", f"%pi open {copy}", "%pi widget")
    ]
    old = dict(os.environ)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(root), old.get("PYTHONPATH", "")])
    try:  # the kernel inherits it: it must import this checkout
        nbclient.NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    finally:
        os.environ.clear()
        os.environ.update(old)
    assert "widgets" in nb.metadata  # nbclient saved the widget state, as --execute does
    page_path = tmp_path / "exported.html"
    page_path.write_text(HTMLExporter().from_notebook_node(nb)[0], encoding="utf-8")

    refused: list[str] = []

    def offline(route: Any) -> None:
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    browser_context.route("**/*", offline)
    page = browser_context.new_page()
    try:
        page.goto(page_path.as_uri(), wait_until="load")
        snapshot = page.locator(".pi-nb-explorer-snapshot")
        snapshot.wait_for(state="visible", timeout=10_000)
        assert "1a2b3c1b" in snapshot.inner_text()  # the leaf's row, readable without JS
        box = snapshot.bounding_box()
        assert box is not None and box["height"] > 100
        assert refused  # the page did try a CDN: without the snapshot it would be a blank gap
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "exported_offline.png"), full_page=True)
    finally:
        page.close()
