#!/usr/bin/env bash
# The main job: set up, then execute the quickstart notebook offline on the embedded local
# model (pinb/smollm2) and write an HTML copy to build/01_quickstart.html.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh local,notebook
# Run in notebooks/ (as nbval does); the notebook keeps its files in build/notebooks/.
# A plain nbconvert, as a user would run it: the explorer's static snapshot is an output of
# its own, so the page shows it without the widget runtime (no CDN needed).
.venv/bin/jupyter nbconvert --to html --execute \
  notebooks/01_quickstart.ipynb --output-dir build --ExecutePreprocessor.timeout=1200 --ExecutePreprocessor.kernel_name=python3
echo "quickstart executed: build/01_quickstart.html"
