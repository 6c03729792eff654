#!/usr/bin/env bash
# The main job: set up, then run the quickstart offline on the embedded local model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh local
if [ -f notebooks/01_quickstart.ipynb ] && .venv/bin/python -c "import nbconvert" 2>/dev/null; then
  .venv/bin/jupyter nbconvert --to html --execute notebooks/01_quickstart.ipynb \
    --output-dir build --ExecutePreprocessor.timeout=900
  echo "quickstart executed: build/01_quickstart.html"
else
  .venv/bin/pi-nb demo
fi
