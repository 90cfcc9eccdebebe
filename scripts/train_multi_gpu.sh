#!/usr/bin/env bash
# Train with DistributedDataParallel over several GPUs of this machine, through torchrun.
#   scripts/train_multi_gpu.sh [extra mt train arguments...]
# Environment knobs:
#   NPROC    processes, one per GPU  (default: all visible GPUs)
#   CONFIG   YAML config             (default: config/multi30k.yaml)
#   RUN_DIR  run directory           (default: runs/<config name>-ddp)
#   SETS     extra overrides, space-separated, e.g. "train.max_tokens=8192"
#   PYTHON   interpreter             (default: .venv/bin/python if present, else python3)
# Several machines: see "Several GPUs" in the README (torchrun --nnodes ... --rdzv-endpoint ...).
set -euo pipefail
usage() { sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; }
case "${1:-}" in -h|--help) usage; exit 0 ;; esac
cd "$(dirname "$0")/.."
CONFIG=${CONFIG:-config/multi30k.yaml}
[ -f "$CONFIG" ] || { echo "train_multi_gpu.sh: config '$CONFIG' not found" >&2; usage >&2; exit 2; }
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
NPROC=${NPROC:-$("$PYTHON" -c "import torch; print(torch.cuda.device_count())")}
if [ "$NPROC" -lt 1 ]; then
  echo "train_multi_gpu.sh: no CUDA GPU visible; set NPROC or use train_gpu.sh" >&2; exit 2
fi
RUN_DIR=${RUN_DIR:-runs/$(basename "$CONFIG" .yaml)-ddp}
args=(train --config "$CONFIG" --run-dir "$RUN_DIR" --set train.device=cuda)
for s in ${SETS:-}; do args+=(--set "$s"); done
exec "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node="$NPROC" \
  -m transformer_mt "${args[@]}" "$@"
