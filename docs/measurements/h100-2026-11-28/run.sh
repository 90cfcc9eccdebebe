#!/usr/bin/env bash
# #57 on one GPU: config/gpu.yaml x 3 seeds, plus R-Drop 0.5 and a 16k vocabulary (seed 1),
# all sharing the GPU; then each run's last 3 saves averaged and scored (val, 2016, 2017, beam 5).
# Knobs (for a CPU dry run): DEVICE, TRAIN_LIMIT, EVAL_LIMIT, TINY, MAXS, RUNS
set -uo pipefail
OUT=${OUT:-/tmp/gpu-out}; mkdir -p "$OUT"
DEVICE=${DEVICE:-cuda}; TRAIN_LIMIT=${TRAIN_LIMIT:-400}; EVAL_LIMIT=${EVAL_LIMIT:-120}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 MT_DATA_DIR=$PWD/.gpu/data/multi30k
export MT_CACHE_DIR=/tmp/mtcache OMP_NUM_THREADS=${THREADS:-3}
PY=${PY:-python3}
R=/tmp/runs; [ -n "${KEEP:-}" ] || rm -rf "$R"; mkdir -p "$R"
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
  $PY -c 'import torch,sentencepiece,sacrebleu;print(torch.__version__,sentencepiece.__version__,sacrebleu.__version__)'
  lscpu | grep -E 'Model name|^Model:|^CPU\(s\)'; } | tee "$OUT/env.txt"
declare -A SETS=(
  [s1234]="" [s1]="train.seed=1" [s2]="train.seed=2"
  [rdrop05]="train.rdrop_alpha=0.5" [v16k]="data.vocab_size=16000"
  [c_base]="CPU" [c_drop]="CPU model.dropout=0.2 model.attention_dropout=0.1 model.activation_dropout=0.1"
  [c_rdrop]="CPU train.rdrop_alpha=0.5 train.max_tokens=2048"
  [c_deep]="CPU model.n_encoder_layers=4 model.n_decoder_layers=4 model.dropout=0.2 model.attention_dropout=0.1 model.activation_dropout=0.1 train.max_steps=2400"
)
RUNS=${RUNS:-"s1234 s1 s2 rdrop05 v16k c_base c_drop c_rdrop c_deep"}
for n in $RUNS; do
  cfg=config/gpu.yaml; sets=${SETS[$n]}; nice=0
  case "$sets" in CPU*) cfg=config/cpu.yaml; sets=${sets#CPU}; nice=5 ;; esac
  args=(); for s in $sets ${TINY:-}; do args+=(--set "$s"); done
  ( start=$(date +%s)
    timeout -s INT "$TRAIN_LIMIT" nice -n $nice $PY -m transformer_mt train --config $cfg \
      --run-dir "$R/$n" --set train.device="$DEVICE" "${args[@]}" >"$R/$n.train.log" 2>&1
    echo "$n train rc=$? wall=$(( $(date +%s) - start ))s" >>"$R/walls.txt" ) &
done
wait
cat "$R/walls.txt"
for n in $RUNS; do
  ( d=$R/$n; ck=$(ls "$d"/step_*.pt 2>/dev/null | sort -V | tail -3)
    [ -n "$ck" ] || { echo "$n: no checkpoints" >"$d.eval.log"; exit; }
    timeout "$EVAL_LIMIT" $PY -m transformer_mt average --output "$d/avg.pt" $ck >"$d.eval.log" 2>&1
    for sp in valid test_2016_flickr test_2017_flickr; do
      timeout "$EVAL_LIMIT" $PY -m transformer_mt evaluate --checkpoint "$d/avg.pt" --split $sp \
        --beam 5 --device "$DEVICE" ${MAXS:+--max-sentences $MAXS} --json >"$d.ev.$sp" 2>&1 &
    done; wait; cat "$d".ev.* >>"$d.eval.log" ) &
done
wait
for n in $RUNS; do echo "== $n"; grep -h '^{' "$R/$n.eval.log" | cut -c1-400; tail -2 "$R/$n.train.log"; done \
  | tee "$OUT/summary.txt"
(cd "$R" && tar czf "$OUT/runs.tgz" --exclude='*.pt' .)
date -u >>"$OUT/env.txt"
