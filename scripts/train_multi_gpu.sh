#!/usr/bin/env bash
# Train with DistributedDataParallel over several GPUs of this machine, through torchrun.
#   scripts/train_multi_gpu.sh [extra mt train arguments...]
# Environment knobs:
#   NPROC    processes, one per GPU  (default: all visible GPUs)
#   CONFIG   YAML config             (default: config/gpu.yaml)
#   RUN_DIR  run directory           (default: runs/<config name>-ddp)
#   SETS     extra overrides, space-separated, e.g. "train.max_steps=3000" (train.max_tokens is
#            the budget of a whole step, all GPUs together: the same config trains the same on
#            1 or N GPUs; docs/gpu.md says what N GPUs should set)
#   PYTHON   interpreter             (default: .venv/bin/python if present, else python3)
# Several machines: see "Several GPUs" in the README (torchrun --nnodes ... --rdzv-endpoint ...).
set -euo pipefail
SCRIPT=$0 RUN_SUFFIX=ddp
source "$(dirname "$0")/common.sh"
NPROC=${NPROC:-$("$PYTHON" -c "import torch; print(torch.cuda.device_count())")}
if [ "$NPROC" -lt 1 ]; then
  echo "train_multi_gpu.sh: no CUDA GPU visible; set NPROC or use train_gpu.sh" >&2; exit 2
fi
exec "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node="$NPROC" \
  -m transformer_mt -- "${TRAIN_ARGS[@]}" "$@"  # "--": torchrun reads no option after it
