#!/usr/bin/env bash
# Train on one GPU.
#   scripts/train_gpu.sh [extra mt train arguments...]
# Environment knobs:
#   CONFIG   YAML config            (default: config/gpu.yaml)
#   RUN_DIR  run directory          (default: runs/<config name>-gpu)
#   SETS     extra overrides, space-separated, e.g. "train.max_steps=2000 model.d_model=512"
#   PYTHON   interpreter            (default: .venv/bin/python if present, else python3)
set -euo pipefail
SCRIPT=$0 RUN_SUFFIX=gpu
source "$(dirname "$0")/common.sh"
exec "$PYTHON" -m transformer_mt "${TRAIN_ARGS[@]}" "$@"
