"""Fixtures for the Pi compatibility tests (Pi 1.3.0 and Pi 1.6.0).

``pi_oracle`` runs ``tests/compat/oracle/pi_oracle.mjs`` (which calls the published
``@earendil-works/pi-coding-agent`` modules) under Node. It is parametrized over
``PI_VERSIONS``: every comparison runs once per Pi release, with the release in the test id
(``[pi1.3.0-…]``, ``[pi1.6.0-…]``).

Where each release comes from: the first directory named by ``$PI_ORACLE_DIR`` (1.3.0 by
convention) or ``$PI_ORACLE_DIR_1_6`` (1.6.0) that holds that version; otherwise
``<repo>/.pi-oracle/`` (1.3.0) or ``<repo>/.pi-oracle-<version>/`` (gitignored), installed
from npm on first use.

Without ``node`` on PATH every compat test FAILS (so CI cannot silently pass), unless
``PI_NB_SKIP_COMPAT=1`` is set, in which case they are skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ORACLE_SCRIPT = Path(__file__).resolve().parent / "oracle" / "pi_oracle.mjs"
PI_PACKAGE = "@earendil-works/pi-coding-agent"
#: Every Pi release the compat suites compare against (also checked by pi_oracle.mjs).
PI_VERSIONS = ("1.3.0", "1.6.0")
#: Environment variables that may name an install (any of them may hold any version).
ORACLE_DIR_VARS = ("PI_ORACLE_DIR", "PI_ORACLE_DIR_1_6")
PKG_REL = Path("node_modules") / "@earendil-works" / "pi-coding-agent" / "package.json"

GEN_SEED = 20260115
GEN_COUNT = 12


def default_oracle_dir(version: str) -> Path:
    """Where the test run installs ``version`` when no configured directory holds it."""
    return REPO / (".pi-oracle" if version == "1.3.0" else f".pi-oracle-{version}")


def _unavailable(msg: str) -> None:
    if os.environ.get("PI_NB_SKIP_COMPAT") == "1":
        pytest.skip(f"{msg} (PI_NB_SKIP_COMPAT=1)")
    pytest.fail(
        f"Pi compatibility tests need it: {msg}. Install Node.js >= 20 and npm, "
        "or set PI_NB_SKIP_COMPAT=1 to skip these tests.",
        pytrace=False,
    )


def _installed_version(oracle_dir: Path) -> str | None:
    pkg = oracle_dir / PKG_REL
    if not pkg.is_file():
        return None
    try:
        return json.loads(pkg.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None


def _install(oracle_dir: Path, version: str) -> None:
    npm = shutil.which("npm")
    if npm is None:
        _unavailable(f"`npm` is not on PATH (needed once to install the Pi {version} oracle)")
    oracle_dir.mkdir(parents=True, exist_ok=True)
    # A package.json pins npm's prefix to this directory (otherwise npm may walk up and
    # install into an ancestor that has node_modules/ or a package.json).
    pj = oracle_dir / "package.json"
    if not pj.exists():
        pj.write_text('{"name": "pi-oracle", "private": true}\n', encoding="utf-8")
    cmd = [
        npm,
        "install",
        "--ignore-scripts",
        "--no-audit",
        "--no-fund",
        "--prefix",
        str(oracle_dir),
        f"{PI_PACKAGE}@{version}",
    ]
    proc = subprocess.run(cmd, cwd=oracle_dir, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(
            f"installing the Pi oracle failed ({' '.join(cmd)}):\n{proc.stdout}\n{proc.stderr}",
            pytrace=False,
        )


def _ensure_installed(version: str) -> Path:
    """A directory holding Pi ``version`` (a configured one, else the default, installed)."""
    for var in ORACLE_DIR_VARS:
        env_dir = os.environ.get(var)
        if env_dir and _installed_version(Path(env_dir)) == version:
            return Path(env_dir).resolve()
    oracle_dir = default_oracle_dir(version)
    if _installed_version(oracle_dir) == version:
        return oracle_dir
    try:
        from filelock import FileLock
    except ImportError:  # pragma: no cover - filelock is a pi_nb dependency
        FileLock = None
    if FileLock is not None:
        oracle_dir.mkdir(parents=True, exist_ok=True)
        with FileLock(str(oracle_dir / ".install.lock")):
            if _installed_version(oracle_dir) != version:
                _install(oracle_dir, version)
    else:
        _install(oracle_dir, version)
    if _installed_version(oracle_dir) != version:
        pytest.fail(f"Pi {version} not found under {oracle_dir} after npm install", pytrace=False)
    return oracle_dir


def node_or_fail() -> str:
    """The ``node`` executable (>= 20); fails (or skips with PI_NB_SKIP_COMPAT=1) otherwise."""
    node = shutil.which("node")
    if node is None:
        _unavailable("`node` is not on PATH")
    proc = subprocess.run([node, "--version"], capture_output=True, text=True)
    version = proc.stdout.strip().lstrip("v")
    try:
        major = int(version.split(".")[0])
    except ValueError:
        major = 0
    if major < 20:
        _unavailable(f"Node >= 20 required, found {proc.stdout.strip() or proc.stderr.strip()}")
    return node


class PiOracle:
    """Runs the Node oracle script; every method returns parsed JSON."""

    def __init__(self, node: str, oracle_dir: Path, version: str):
        self.node = node
        self.oracle_dir = oracle_dir
        self.version = version
        # the script refuses any other version than the one asked for
        self.env = {
            **os.environ,
            "PI_ORACLE_DIR": str(oracle_dir),
            "PI_ORACLE_VERSION": version,
        }

    def run(self, *args: str, stdin: str | None = None) -> Any:
        cmd = [self.node, str(ORACLE_SCRIPT), *args]
        proc = subprocess.run(
            cmd, input=stdin, capture_output=True, text=True, encoding="utf-8", env=self.env
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"Pi {self.version} oracle failed (exit {proc.returncode}): {' '.join(cmd)}\n"
                f"--- stderr ---\n{proc.stderr.strip()}"
            )
        return json.loads(proc.stdout)

    # --- single requests -------------------------------------------------------------------
    def context(self, path: str | os.PathLike, leaf: str | None = None) -> dict:
        args = ["context", str(path)]
        if leaf is not None:
            args += ["--leaf", leaf]
        return self.run(*args)

    def cut(
        self,
        path: str | os.PathLike,
        leaf: str | None = None,
        keep: int | None = None,
        reserve: int | None = None,
    ) -> dict:
        args = ["cut", str(path)]
        if leaf is not None:
            args += ["--leaf", leaf]
        if keep is not None:
            args += ["--keep", str(keep)]
        if reserve is not None:
            args += ["--reserve", str(reserve)]
        return self.run(*args)

    def gen(self, outdir: str | os.PathLike, seed: int, count: int) -> list[str]:
        return self.run("gen", str(outdir), "--seed", str(seed), "--count", str(count))

    def serialize(self, message_lists: list[list[dict]]) -> list[str]:
        """Pi's ``serializeConversation(convertToLlm(messages))`` for each list (one process)."""
        return self.run("serialize", stdin=json.dumps(message_lists))

    # --- batched (one node process for many requests) ----------------------------------------
    def batch(self, requests: list[dict]) -> list[Any]:
        """Each request: {"cmd": "context"|"cut", "file", "leaf"?, "keep"?, "reserve"?}.
        A failed request yields {"error": message} instead of raising."""
        reqs = [{**r, "file": str(r["file"])} for r in requests]
        return self.run("batch", stdin=json.dumps(reqs))

    def context_many(self, path: str | os.PathLike, leaves: list[str | None]) -> list[dict]:
        return self.batch([{"cmd": "context", "file": path, "leaf": leaf} for leaf in leaves])

    def cut_many(self, requests: list[dict]) -> list[dict]:
        return self.batch([{"cmd": "cut", **r} for r in requests])


@pytest.fixture(scope="session", params=PI_VERSIONS, ids=lambda v: f"pi{v}")
def pi_version(request: pytest.FixtureRequest) -> str:
    """The Pi release a compat test compares against (one test instance per release)."""
    return request.param


@pytest.fixture(scope="session")
def pi_oracle(pi_version: str) -> PiOracle:
    return PiOracle(node_or_fail(), _ensure_installed(pi_version), pi_version)


@pytest.fixture(scope="session")
def pi_oracles() -> dict[str, PiOracle]:
    """``{version: PiOracle}`` for every release: for a test whose costly part (a real model
    run) should happen once and then be checked against each release."""
    node = node_or_fail()
    return {v: PiOracle(node, _ensure_installed(v), v) for v in PI_VERSIONS}


@pytest.fixture(scope="session")
def generated_sessions(pi_oracle: PiOracle, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """~12 varied session files written by Pi's own SessionManager (deterministic seed)."""
    outdir = tmp_path_factory.mktemp("pi_generated")
    files = pi_oracle.gen(outdir, GEN_SEED, GEN_COUNT)
    assert len(files) == GEN_COUNT, files
    return files


# ---------------------------------------------------------------------------------------------
# helpers shared by the compat tests (exposed through the `compat` fixture so that they work
# under any pytest import mode)

_MISSING = object()


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "str"
    if isinstance(v, list):
        return "list"
    if isinstance(v, dict):
        return "dict"
    return type(v).__name__


def first_difference(a: Any, b: Any, path: str = "$") -> tuple[str, Any, Any] | None:
    """First place where two parsed JSON values differ, type-strictly (1 != 1.0 != True)."""
    ka, kb = _kind(a), _kind(b)
    if ka != kb:
        return path, a, b
    if ka == "dict":
        for k in list(a) + [k for k in b if k not in a]:
            va, vb = a.get(k, _MISSING), b.get(k, _MISSING)
            if va is _MISSING or vb is _MISSING:
                return f"{path}.{k}", va, vb
            d = first_difference(va, vb, f"{path}.{k}")
            if d:
                return d
        return None
    if ka == "list":
        for i, (va, vb) in enumerate(zip(a, b, strict=False)):
            d = first_difference(va, vb, f"{path}[{i}]")
            if d:
                return d
        if len(a) != len(b):
            return f"{path}.length", len(a), len(b)
        return None
    return None if a == b else (path, a, b)


def _short(v: Any, limit: int = 300) -> str:
    if v is _MISSING:
        return "<missing>"

    def trim(x: Any) -> Any:
        if isinstance(x, str) and len(x) > 60:
            return x[:40] + f"…(+{len(x) - 40})"
        if isinstance(x, list):
            return [trim(y) for y in x]
        if isinstance(x, dict):
            return {k: trim(y) for k, y in x.items()}
        return x

    s = json.dumps(trim(v), ensure_ascii=False)
    return s if len(s) <= limit else s[:limit] + "…"


def describe_mismatch(ours: Any, pi: Any) -> str | None:
    """Compact description of the first difference (None when equal)."""
    d = first_difference(ours, pi)
    if d is None:
        return None
    path, va, vb = d
    lines = [f"first difference at {path}: pi_nb={_short(va)}  pi={_short(vb)}"]
    if path.startswith("$.messages[") and isinstance(ours, dict) and isinstance(pi, dict):
        idx = int(path[len("$.messages[") :].split("]")[0])
        om, pm = ours.get("messages", []), pi.get("messages", [])
        lines.append(f"  message #{idx} (pi_nb has {len(om)} messages, pi has {len(pm)})")
        lines.append(f"  pi_nb: {_short(om[idx] if idx < len(om) else _MISSING, 600)}")
        lines.append(f"  pi   : {_short(pm[idx] if idx < len(pm) else _MISSING, 600)}")
    return "\n".join(lines)


def load_entries(path: str | os.PathLike) -> tuple[dict | None, list[dict]]:
    """Header and entries, read like Pi (blank and unparsable lines skipped)."""
    objs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                objs.append(json.loads(line))
            except ValueError:
                continue
    if not objs or objs[0].get("type") != "session":
        return None, []
    return objs[0], objs[1:]


def path_ids(entries: list[dict], leaf: str | None) -> list[str]:
    by_id = {e["id"]: e for e in entries}
    out: list[str] = []
    cur = by_id.get(leaf) if leaf else None
    while cur is not None:
        out.append(cur["id"])
        cur = by_id.get(cur.get("parentId")) if cur.get("parentId") else None
    out.reverse()
    return out


def pick_leaves(entries: list[dict], seed: int, max_random: int = 3) -> list[str | None]:
    """None (= no --leaf: the last entry), the last entry, entries just at/after compactions
    and context edits, off-branch entries, branch summaries and a few random ones."""
    import random

    rng = random.Random(seed)
    if not entries:
        return [None]
    last = entries[-1]["id"]
    children: dict[str, list[str]] = {}
    for e in entries:
        children.setdefault(e.get("parentId"), []).append(e["id"])
    picked: list[str | None] = [None, last]

    def sample(ids: list[str], n: int) -> list[str]:
        return rng.sample(ids, min(n, len(ids)))

    for kind, n in (("compaction", 3), ("context_edit", 3)):
        marks = [e["id"] for e in entries if e["type"] == kind]
        for mid in sample(marks, n):
            picked.append(mid)
            picked.extend(children.get(mid, [])[:1])
    systems = [
        e["id"] for e in entries if e["type"] == "message" and e["message"].get("role") == "system"
    ]
    for sid in sample(systems, 2):
        picked.extend(children.get(sid, [])[:1])
    on_branch = set(path_ids(entries, last))
    picked.extend(sample([e["id"] for e in entries if e["id"] not in on_branch], 2))
    picked.extend(sample([e["id"] for e in entries if e["type"] == "branch_summary"], 1))
    picked.extend(sample([e["id"] for e in entries], max_random))
    seen: set = set()
    out = []
    for p in picked:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


class CompatTools:
    first_difference = staticmethod(first_difference)
    describe_mismatch = staticmethod(describe_mismatch)
    load_entries = staticmethod(load_entries)
    path_ids = staticmethod(path_ids)
    pick_leaves = staticmethod(pick_leaves)

    def __init__(self) -> None:
        pp = os.environ.get("PYTHONPATH")
        self.env = {**os.environ, "PYTHONPATH": str(REPO) + (os.pathsep + pp if pp else "")}
        self._memo: dict[tuple[str, ...], Any] = {}

    def run_pi_nb(self, args: list[str]) -> Any:
        """Run `python -m pi_nb ARGS` and parse its JSON stdout (raises with stderr on failure)."""
        import sys

        cmd = [sys.executable, "-m", "pi_nb", *args]
        proc = subprocess.run(
            cmd, capture_output=True, text=True, encoding="utf-8", cwd=REPO, env=self.env
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"pi_nb failed (exit {proc.returncode}): {' '.join(args)}\n{proc.stderr.strip()[-3000:]}"
            )
        try:
            return json.loads(proc.stdout)
        except ValueError as e:
            raise RuntimeError(
                f"pi_nb printed invalid JSON for {' '.join(args)}: {e}\n{proc.stdout[:500]}"
            ) from e

    def _run_file_command(self, cmd: str, path: str | os.PathLike, options: list[str]) -> Any:
        """``python -m pi_nb CMD PATH OPTIONS --json``, memoized on the file's bytes: the same
        file is compared against each Pi release, and pi_nb's answer cannot depend on which
        release it is compared with, so it is computed once (halves the second release's cost).
        A changed file (or other options) is a new key."""
        import hashlib

        key = (cmd, hashlib.sha256(Path(path).read_bytes()).hexdigest(), *options)
        if key not in self._memo:
            self._memo[key] = self.run_pi_nb([cmd, str(path), *options, "--json"])
        # a deep copy: callers may edit what they get (e.g. pop "leafId")
        return json.loads(json.dumps(self._memo[key]))

    def pi_nb_context(self, path: str | os.PathLike, leaf: str | None = None) -> Any:
        return self._run_file_command("context", path, [] if leaf is None else ["--leaf", leaf])

    def pi_nb_cut(
        self,
        path: str | os.PathLike,
        leaf: str | None = None,
        keep: int | None = None,
        reserve: int | None = None,
    ) -> Any:
        options: list[str] = []
        if leaf is not None:
            options += ["--leaf", leaf]
        if keep is not None:
            options += ["--keep", str(keep)]
        if reserve is not None:
            options += ["--reserve", str(reserve)]
        return self._run_file_command("cut", path, options)

    @staticmethod
    def parallel(fn, items: list) -> list:
        """fn(item) for every item, in a thread pool; exceptions are returned, not raised."""
        from concurrent.futures import ThreadPoolExecutor

        def safe(item):
            try:
                return fn(item)
            except Exception as e:  # reported by the caller
                return e

        with ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 2))) as ex:
            return list(ex.map(safe, items))


@pytest.fixture(scope="session")
def compat() -> CompatTools:
    return CompatTools()
