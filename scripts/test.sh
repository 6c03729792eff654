#!/usr/bin/env bash
# Set up everything the tests need (venv, Pi 1.3.0 and 1.6.0 from npm as oracles, Chromium for
# the browser test) and run every test. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh test,notebook,local
# The compat suites compare against both Pi releases: 1.3.0 in .pi-oracle/, 1.6.0 in
# .pi-oracle-1.6.0/ (tests/compat/conftest.py: default_oracle_dir).
for pi in 1.3.0 1.6.0; do
  dir=.pi-oracle; [ "$pi" = 1.3.0 ] || dir=".pi-oracle-$pi"
  if ! grep -qs "\"version\": \"$pi\"" "$dir/node_modules/@earendil-works/pi-coding-agent/package.json"; then
    mkdir -p "$dir"
    [ -f "$dir/package.json" ] || echo '{"name": "pi-oracle", "private": true}' > "$dir/package.json"
    (cd "$dir" && npm install --silent --ignore-scripts --no-audit --no-fund \
       "@earendil-works/pi-coding-agent@$pi")
  fi
done
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
fi
.venv/bin/ruff check pi_nb tests bench scripts
# The import contract of pyproject.toml [tool.importlinter]: layers import one way, no circles.
.venv/bin/lint-imports --no-cache
export PI_ORACLE_DIR="$PWD/.pi-oracle" PI_ORACLE_DIR_1_6="$PWD/.pi-oracle-1.6.0"
# Notebooks run through nbval in the same session (outputs checked only where marked).
.venv/bin/python -m pytest -q -rs -p no:cacheprovider tests notebooks \
  --nbval-lax --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg "$@"
