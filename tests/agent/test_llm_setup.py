"""The first model call's global side effects (issue 12): the environment variable that makes
litellm's import offline is scoped to that import, and the ``pinb`` provider is registered
once, without touching other entries of ``litellm.custom_provider_map``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pi_nb.llm import litellm_module

REPO = Path(__file__).resolve().parents[2]

_SCOPED = """
import os, sys
os.environ.pop("LITELLM_LOCAL_MODEL_COST_MAP", None)
import {module}
{call}
from litellm.litellm_core_utils import get_model_cost_map as g
info = g._cost_map_source_info
print(os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP"), info.source, info.is_env_forced,
      "litellm" in sys.modules)
"""


@pytest.mark.parametrize(
    ("module", "call"),
    [
        ("pi_nb.llm", "pi_nb.llm.litellm_module()"),
        ("pi_nb.models.provider", "pass"),  # importing the provider imports litellm too
    ],
)
def test_offline_import_leaves_the_environment_as_it_was(module, call):
    code = _SCOPED.format(module=module, call=call)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=180)
    assert done.returncode == 0, done.stderr
    # Unset again afterwards, yet litellm loaded its bundled table because it was forced.
    assert done.stdout.split() == ["None", "local", "True", "True"], done.stdout + done.stderr


@pytest.fixture
def provider_map():
    """litellm.custom_provider_map and provider_list, restored after the test."""
    litellm = litellm_module()
    entries, providers = list(litellm.custom_provider_map), list(litellm.provider_list)
    customs = list(litellm._custom_providers)
    yield litellm
    litellm.custom_provider_map[:] = entries
    litellm.provider_list[:] = providers
    litellm._custom_providers[:] = customs


def test_register_is_idempotent_and_touches_only_its_own_entry(provider_map):
    from pi_nb.models import register

    litellm = provider_map
    mine = {"provider": "users-own", "custom_handler": object()}
    litellm.custom_provider_map.insert(0, mine)
    before = list(litellm.custom_provider_map)
    register()
    register()
    assert litellm.custom_provider_map == before  # same entries, same order, same handler
    assert litellm.custom_provider_map[0] is mine
    assert [e["provider"] for e in litellm.custom_provider_map].count("pinb") == 1
    # The user's provider is left for litellm to set up; pi_nb registers only "pinb".
    assert "users-own" not in litellm.provider_list and "pinb" in litellm.provider_list


def test_register_refuses_to_clobber_a_foreign_pinb_handler(provider_map):
    from pi_nb.models import register

    litellm = provider_map
    theirs = {"provider": "pinb", "custom_handler": object()}
    litellm.custom_provider_map[:] = [e for e in litellm.custom_provider_map if e["provider"] != "pinb"]
    litellm.custom_provider_map.append(theirs)
    with pytest.raises(ValueError, match="pinb") as info:
        register()
    assert "\n" not in str(info.value)
    assert theirs in litellm.custom_provider_map
    assert [e for e in litellm.custom_provider_map if e["provider"] == "pinb"] == [theirs]
