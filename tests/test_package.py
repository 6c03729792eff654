"""The package surface: what ``import pi_nb`` imports, exports and reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import pi_nb
from pi_nb.display import html_renderers, register_html, to_html

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("litellm", "pandas", "matplotlib", "networkx", "anywidget", "ipywidgets", "IPython")


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter that imports this checkout's pi_nb."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=120,
    )


def test_import_pi_nb_loads_no_heavy_library() -> None:
    proc = run_python(
        f"""
        import json, sys
        import pi_nb
        print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []


def test_all_lists_every_public_name_and_only_the_widget_is_lazy() -> None:
    assert len(pi_nb.__all__) == len(set(pi_nb.__all__))
    for name in pi_nb.__all__:
        assert getattr(pi_nb, name) is not None, name
    # Everything but the widget was imported by `import pi_nb` itself (a fresh process,
    # since this one may already have resolved the lazy names).
    proc = run_python(
        """
        import json, pi_nb
        print(json.dumps(sorted(set(pi_nb.__all__) - set(vars(pi_nb)))))
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == ["SessionExplorer", "explore"]


@pytest.mark.parametrize("package", ["pi_nb", "pi_nb.notebook"])
def test_the_widget_resolves_on_first_use_and_unknown_names_fail(package: str) -> None:
    # A fresh process: the lazy names are absent until first use, then come from the widget
    # module and stay in the package; an unknown name fails as on any module.
    proc = run_python(
        f"""
        import importlib, json, sys
        package = importlib.import_module({package!r})
        before = sorted({{"SessionExplorer", "explore"}} & set(vars(package)))
        widget_loaded = "pi_nb.notebook.widget" in sys.modules
        explorer = package.SessionExplorer
        from pi_nb.notebook import widget
        try:
            package.no_such_name
        except AttributeError as error:
            message = str(error)
        print(json.dumps({{
            "before": before,
            "widget_loaded_before": widget_loaded,
            "same": explorer is widget.SessionExplorer and package.explore is widget.explore,
            "stored": "SessionExplorer" in vars(package),
            "in_dir": "explore" in dir(package),
            "message": message,
        }}))
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "before": [],
        "widget_loaded_before": False,
        "same": True,
        "stored": True,
        "in_dir": True,
        "message": f"module {package!r} has no attribute 'no_such_name'",
    }


@pytest.mark.parametrize("broken", ["pi_nb.research.compare", "pi_nb.notebook.frames"])
def test_a_broken_module_fails_import_pi_nb(broken: str) -> None:
    # A finder that makes one submodule fail to import, as a syntax error or a missing
    # dependency would: the error must show at `import pi_nb`, not at first attribute use.
    proc = run_python(
        f"""
        import sys
        class Broken:
            def find_spec(self, name, path=None, target=None):
                if name == {broken!r}:
                    raise ImportError("simulated breakage of " + name)
        sys.meta_path.insert(0, Broken())
        import pi_nb
        """
    )
    assert proc.returncode != 0
    assert f"simulated breakage of {broken}" in proc.stderr


def test_repr_html_works_right_after_import_pi_nb(tmp_path: Path) -> None:
    proc = run_python(
        f"""
        import pi_nb
        tree = pi_nb.SessionTree.create({str(tmp_path / "s.jsonl")!r}, "/work/proj")
        tree.append_message({{"role": "user", "content": "Decimal prices", "timestamp": 1}})
        print(tree._repr_html_())
        print(tree.projection()._repr_html_())
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert 'class="pi-nb-session"' in proc.stdout
    assert 'class="pi-nb-projection"' in proc.stdout and "Decimal prices" in proc.stdout


def test_display_hook_looks_renderers_up_along_the_mro() -> None:
    class Base:
        pass

    class Child(Base):
        pass

    class Other:
        pass

    register_html(Base, lambda obj: f"<b>{type(obj).__name__}</b>")
    try:
        assert to_html(Child()) == "<b>Child</b>"
        # No renderer: None, IPython's "no HTML", so the notebook shows the plain repr.
        assert to_html(Other()) is None
    finally:
        del html_renderers[Base]
