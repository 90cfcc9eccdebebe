#!/usr/bin/env bash
# The offline install, end to end (CI runs it after `make test`): a wheelhouse built now, a new
# venv installed from it with no index and no pip configuration (so nothing but the wheelhouse
# can be used), then a tiny training and a translation with that venv.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
make --no-print-directory wheelhouse WHEELHOUSE="$work/wheelhouse"
PIP_CONFIG_FILE=/dev/null PIP_NO_INDEX=1 make --no-print-directory setup VENV="$work/venv" \
  WHEELHOUSE="$work/wheelhouse"
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider \
  "tests/integration/test_cli_end_to_end.py::test_train_writes_checkpoints_metrics_and_config"
echo "offline install: works from a wheelhouse alone" >&2
