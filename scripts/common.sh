# Shared by the training scripts (sourced, not run): usage text, repo root, config, interpreter,
# and the `mt train` arguments. Expects SCRIPT (the script's path) and RUN_SUFFIX to be set.
usage() { sed -n '2,/^set -euo/p' "$SCRIPT" | grep '^#' | sed 's/^# \{0,1\}//'; }
case "${1:-}" in -h|--help) usage; exit 0 ;; esac
cd "$(dirname "$SCRIPT")/.."
CONFIG=${CONFIG:-config/gpu.yaml}
if [ ! -f "$CONFIG" ]; then
  echo "$(basename "$SCRIPT"): config '$CONFIG' not found" >&2; usage >&2; exit 2
fi
RUN_DIR=${RUN_DIR:-runs/$(basename "$CONFIG" .yaml)-$RUN_SUFFIX}
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
TRAIN_ARGS=(train --config "$CONFIG" --run-dir "$RUN_DIR" --set train.device=cuda)
for s in ${SETS:-}; do TRAIN_ARGS+=(--set "$s"); done
