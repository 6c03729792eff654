"""How fast the session explorer renders a 10,000-entry session in a real browser.

Builds the widget's synced state in Python (timed), then loads js/session_explorer.js in
headless Chromium (Debian's /usr/bin/chromium driven by Playwright) with a minimal stand-in
for the anywidget model, and times ``render()`` with ``performance.now()``: the synchronous
build, and until the next animation frame (first paint).

    python bench/bench_widget_render.py [--entries 10000] [--runs 5] [--theme light|dark]
                                        [--screenshot out.png] [--session file.jsonl]

Needs: pip install playwright; apt-get install chromium (never ``playwright install``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
ORIGIN = "http://pinb.bench"

PAGE = """<!doctype html>
<html><head><meta charset="utf-8">
<link rel="stylesheet" href="/theme.css">
<link rel="stylesheet" href="/session_explorer.css">
<style>body{margin:0;padding:16px;background:var(--jp-layout-color0,#fff);}
#out{width:1060px}</style></head>
<body data-jp-theme-light="__LIGHT__"><div id="out"></div>
<script type="module">
import widget from "/session_explorer.js";
const state = await (await fetch("/state.json")).json();
const listeners = {};
window.sent = [];
const model = {
  get: (k) => state[k],
  set: (k, v) => { state[k] = v; for (const f of listeners["change:" + k] || []) f(); },
  save_changes() {},
  on(e, f) { (listeners[e] ||= []).push(f); },
  off(e, f) { listeners[e] = (listeners[e] || []).filter((g) => g !== f); },
  send(m) { window.sent.push(m); },
};
window.model = model;
const el = document.getElementById("out");
const t0 = performance.now();
const cleanup = widget.render({ model, el });
const t1 = performance.now();
await new Promise((r) => requestAnimationFrame(() => r()));
const t2 = performance.now();
window.result = { render_ms: t1 - t0, paint_ms: t2 - t0, cleanup: typeof cleanup };
</script></body></html>
"""


def theme_css(theme: str) -> str:
    """JupyterLab's own theme variables (from the installed jupyterlab), if available."""
    name = "theme-dark-extension" if theme == "dark" else "theme-light-extension"
    for base in (Path(sys.prefix), Path(sys.base_prefix)):
        css = base / "share/jupyter/lab/themes/@jupyterlab" / name / "index.css"
        if css.is_file():
            return css.read_text()
    return ""


def build_state(
    entries: int, session: str | None = None
) -> tuple[dict[str, Any], dict[str, float]]:
    from pi_nb.notebook.widget_state import explorer_state, synthetic_session
    from pi_nb.session.tree import SessionTree

    t0 = time.perf_counter()
    tree = SessionTree.open(session) if session else synthetic_session(entries)
    t1 = time.perf_counter()
    state = explorer_state(tree)
    t2 = time.perf_counter()
    synced = {
        "_tree": state["tree"],
        "_context": state["context"],
        "_tokens": state["tokens"],
        "_info": state["info"],
        "_caps": {"session": False, "compact": False, "summarize": False},
        "_preview": {},
        "_ack": 0,
        "selected_id": None,
        "leaf_id": state["leaf_id"],
        "status": "",
    }
    size = len(json.dumps(synced))
    return synced, {"generate_s": t1 - t0, "state_s": t2 - t1, "json_bytes": size}


def run_browser(
    state: dict[str, Any], runs: int, theme: str = "light", screenshot: str | None = None
) -> list[dict[str, float]]:
    from playwright.sync_api import sync_playwright

    files = {
        "/": ("text/html", PAGE.replace("__LIGHT__", "false" if theme == "dark" else "true")),
        "/session_explorer.js": ("text/javascript", (REPO / "js/session_explorer.js").read_text()),
        "/session_explorer.css": ("text/css", (REPO / "js/session_explorer.css").read_text()),
        "/theme.css": ("text/css", theme_css(theme)),
        "/state.json": ("application/json", json.dumps(state)),
    }

    def serve(route: Any) -> None:
        path = route.request.url[len(ORIGIN) :] or "/"
        kind, body = files.get(path, ("text/plain", ""))
        route.fulfill(status=200 if path in files else 404, content_type=kind, body=body)

    results = []
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1100, "height": 800},
        )
        try:
            page = browser.new_page()
            page.route(f"{ORIGIN}/**", serve)
            for _ in range(runs):
                page.goto(f"{ORIGIN}/")
                page.wait_for_function("window.result !== undefined", timeout=30_000)
                results.append(page.evaluate("window.result"))
            if screenshot:
                page.locator(".pinb-explorer").screenshot(path=screenshot)
        finally:
            browser.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--theme", choices=("light", "dark"), default="light")
    parser.add_argument("--screenshot", default=None)
    parser.add_argument("--session", default=None, help="render this session file instead")
    args = parser.parse_args(argv)
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} not found: apt-get install chromium", file=sys.stderr)
        return 2
    state, py = build_state(args.entries, args.session)
    print(
        f"python: {len(state['_tree'])} entries generated in {py['generate_s']:.2f} s; "
        f"state built in {py['state_s'] * 1000:.0f} ms; synced JSON {py['json_bytes'] / 1e6:.2f} MB"
    )
    results = run_browser(state, args.runs, args.theme, args.screenshot)
    render = [r["render_ms"] for r in results]
    paint = [r["paint_ms"] for r in results]
    print(
        f"browser render of {len(state['_tree'])} entries: median {statistics.median(render):.1f} ms "
        f"(min {min(render):.1f}, max {max(render):.1f}); to first paint: median "
        f"{statistics.median(paint):.1f} ms over {len(results)} runs"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
