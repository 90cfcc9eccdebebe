#!/usr/bin/env bash
# Train on one GPU.
#   scripts/train_gpu.sh [extra mt train arguments...]
# Environment knobs:
#   CONFIG   YAML config            (default: config/multi30k.yaml)
#   RUN_DIR  run directory          (default: runs/<config name>-gpu)
#   SETS     extra overrides, space-separated, e.g. "train.max_steps=2000 model.d_model=512"
#   PYTHON   interpreter            (default: .venv/bin/python if present, else python3)
set -euo pipefail
usage() { sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; }
case "${1:-}" in -h|--help) usage; exit 0 ;; esac
cd "$(dirname "$0")/.."
CONFIG=${CONFIG:-config/multi30k.yaml}
[ -f "$CONFIG" ] || { echo "train_gpu.sh: config '$CONFIG' not found" >&2; usage >&2; exit 2; }
RUN_DIR=${RUN_DIR:-runs/$(basename "$CONFIG" .yaml)-gpu}
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
args=(train --config "$CONFIG" --run-dir "$RUN_DIR" --set train.device=cuda)
for s in ${SETS:-}; do args+=(--set "$s"); done
exec "$PYTHON" -m transformer_mt "${args[@]}" "$@"
