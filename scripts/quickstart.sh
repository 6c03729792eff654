#!/usr/bin/env bash
# The main job: set up, then execute the quickstart notebook offline on the embedded local
# model (pinb/smollm2) and write an HTML copy to build/01_quickstart.html.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh local,notebook
# Run in notebooks/ (as nbval does); the notebook keeps its files in build/notebooks/.
# scripts/nbconvert_static.json ranks text/html above the widget view: a static page has no
# kernel for the live explorer, so it shows the explorer's snapshot (no widget CDN needed).
.venv/bin/jupyter nbconvert --config scripts/nbconvert_static.json --to html --execute \
  notebooks/01_quickstart.ipynb --output-dir build --ExecutePreprocessor.timeout=1200 --ExecutePreprocessor.kernel_name=python3
echo "quickstart executed: build/01_quickstart.html"
