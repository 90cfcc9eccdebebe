#!/usr/bin/env bash
# Score a checkpoint on its config's test sets with sacreBLEU (BLEU and chrF).
#   scripts/evaluate.sh CHECKPOINT [extra mt evaluate arguments...]
# Environment knobs:
#   SPLITS   test sets to score     (default: every data.test set of the checkpoint's config;
#                                    for Multi30k "test_2016_flickr test_2017_flickr")
#   BEAM     beam size              (default: the checkpoint's decode.beam_size)
#   OUT_DIR  where hypotheses go    (default: the checkpoint's directory)
#   PYTHON   interpreter            (default: .venv/bin/python if present, else python3)
set -euo pipefail
usage() { sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; }
case "${1:-}" in -h|--help) usage; exit 0 ;; "") usage >&2; exit 2 ;; esac
CKPT=$1; shift
[ -f "$CKPT" ] || { echo "evaluate.sh: checkpoint '$CKPT' not found" >&2; exit 2; }
CKPT=$(realpath "$CKPT")
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
OUT_DIR=${OUT_DIR:-$(dirname "$CKPT")}
if [ -z "${SPLITS:-}" ]; then
  SPLITS=$("$PYTHON" -c 'import sys
from transformer_mt.checkpoint import checkpoint_config, load_checkpoint
print(" ".join(checkpoint_config(load_checkpoint(sys.argv[1])).data.test_sets()))' "$CKPT")
fi
[ -n "$SPLITS" ] || { echo "evaluate.sh: the checkpoint names no test sets; set SPLITS" >&2; exit 2; }
for split in $SPLITS; do
  args=(evaluate --checkpoint "$CKPT" --split "$split" --output "$OUT_DIR/$split.hyp.txt")
  [ -n "${BEAM:-}" ] && args+=(--beam-size "$BEAM")
  "$PYTHON" -m transformer_mt "${args[@]}" "$@"
done
