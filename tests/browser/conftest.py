"""Real-browser tests: JupyterLab (pip) + Debian's /usr/bin/chromium driven by Playwright.

Registers the ``browser`` marker. Without chromium or playwright every browser test FAILS
with a clear message (so CI cannot silently pass) unless ``PI_NB_SKIP_BROWSER=1`` is set, in
which case they are skipped. Never run ``playwright install``: we launch Debian's chromium.

Fixtures:
- ``lab``: a JupyterLab server on a free port with a random token and temporary runtime,
  config, settings and workspace folders; stopped by its PID at the end of the module.
- ``browser_context``: a headless chromium context with a fresh user data dir.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

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
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "tests" / "artifacts"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "browser: drives the widget in JupyterLab + headless chromium (slow, ~40 s)"
    )


def _missing() -> str | None:
    problems = []
    if not Path(CHROMIUM).exists():
        problems.append(f"{CHROMIUM} is missing (apt-get install -y chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        problems.append(
            "playwright is missing (pip install playwright; never 'playwright install')"
        )
    if shutil.which("jupyter-lab", path=os.path.dirname(sys.executable)) is None:
        try:
            import jupyterlab  # noqa: F401
        except ImportError:
            problems.append("jupyterlab is missing (pip install jupyterlab)")
    return "; ".join(problems) or None


@pytest.fixture(scope="session")
def browser_ready() -> None:
    problem = _missing()
    if problem is None:
        return
    if os.environ.get("PI_NB_SKIP_BROWSER") == "1":
        pytest.skip(f"browser test skipped (PI_NB_SKIP_BROWSER=1): {problem}")
    pytest.fail(
        f"browser test cannot run: {problem}. Set PI_NB_SKIP_BROWSER=1 to skip.", pytrace=False
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Lab:
    url: str
    token: str
    root: Path
    pid: int
    log: Path

    def open_url(self, notebook: str) -> str:
        """The notebook in a workspace of its own (no tabs restored from other tests)."""
        workspace = "ws-" + "".join(c if c.isalnum() else "-" for c in notebook)
        return f"{self.url}/lab/workspaces/{workspace}/tree/{notebook}?token={self.token}"

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def _write_settings(folder: Path) -> None:
    """Quiet JupyterLab: no news / update toasts (they can cover the widget)."""
    target = folder / "@jupyterlab" / "apputils-extension"
    target.mkdir(parents=True, exist_ok=True)
    (target / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )


@pytest.fixture(scope="module")
def lab(browser_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    base = tmp_path_factory.mktemp("lab")
    root = base / "root"
    for name in ("root", "runtime", "config", "settings", "workspaces"):
        (base / name).mkdir()
    _write_settings(base / "settings")
    port = free_port()
    token = secrets.token_hex(16)
    env = {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
        "JUPYTER_CONFIG_DIR": str(base / "config"),
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("JUPYTER_TOKEN", None)
    log = base / "lab.log"
    command = [
        sys.executable, "-m", "jupyterlab",
        "--allow-root", "--no-browser",
        "--ip", "127.0.0.1", "--port", str(port),
        f"--ServerApp.token={token}",
        f"--ServerApp.root_dir={root}",
        f"--LabApp.user_settings_dir={base / 'settings'}",
        f"--LabApp.workspaces_dir={base / 'workspaces'}",
        "--ServerApp.open_browser=False",
        "--LabApp.news_url=",
    ]  # fmt: skip
    with open(log, "wb") as out:
        process = subprocess.Popen(command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
    server = Lab(f"http://127.0.0.1:{port}", token, root, process.pid, log)
    try:
        deadline = time.monotonic() + 90
        while True:
            if process.poll() is not None:
                pytest.fail(f"jupyter lab exited with {process.returncode}:\n{server.log_tail()}")
            try:
                with urllib.request.urlopen(
                    f"{server.url}/api/status?token={token}", timeout=2
                ) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"jupyter lab did not start in 90 s:\n{server.log_tail()}")
            time.sleep(0.3)
        yield server
    finally:
        _stop(process)


def _stop(process: subprocess.Popen[Any]) -> None:
    """Stop the server by its PID (SIGTERM: it shuts its kernels down itself)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


@pytest.fixture
def browser_context(browser_ready: None, tmp_path: Path) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 1000},
        )
        try:
            yield context
        finally:
            context.close()
