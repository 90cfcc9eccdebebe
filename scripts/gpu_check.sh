#!/usr/bin/env bash
# The first thing to run on a new GPU machine (a few minutes): environment, attention kernels,
# host syncs, loss parity, a DDP run and its resume, a speed sweep; JSON on stdout. Without a
# GPU the GPU-only parts say "skipped: no GPU found". See bench/gpu_check.py.
#   scripts/gpu_check.sh [--out gpu_check.json] [--smoke]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
exec "$PY" bench/gpu_check.py "$@"
