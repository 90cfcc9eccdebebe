#!/bin/bash
# vocab 16k, 3 seeds sharing the GPU, training only: the runs' own val curves (greedy).
PY=${PY:-python3}; OUT=${OUT:?}; RUNS=${RUNS:-/tmp/runs}; CACHE=${CACHE:-/tmp/mtcache}
start=$(date +%s)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; $PY -c 'import torch; print(torch.__version__)'; } > $OUT/environment.txt 2>&1
$PY -c "import tarfile; tarfile.open('.gpu/cache16.tar.xz').extractall('$CACHE', filter='data')" || exit 1
find $CACHE -type f ! -name "*.lock" | sort > /tmp/cache_before.txt
echo "unpacked $(( $(date +%s) - start )) s" >> $OUT/environment.txt
for s in 1234 1 2; do
  ( t0=$(date +%s); MT_DATA_DIR=$PWD/.gpu/data/multi30k MT_CACHE_DIR=$CACHE timeout -s INT ${LIMIT:-320} \
    $PY -m transformer_mt train --config config/gpu.yaml --run-dir $RUNS/seed-$s --set train.seed=$s \
    --set data.vocab_size=16000 $EXTRA > $OUT/seed-$s.log 2>&1; \
    echo "seed $s rc=$? wall=$(( $(date +%s) - t0 )) s" >> $OUT/environment.txt ) &
done
wait
for s in 1234 1 2; do cp $RUNS/seed-$s/metrics.jsonl $OUT/seed-$s.jsonl; done
find $CACHE -type f ! -name "*.lock" | sort | diff /tmp/cache_before.txt - > $OUT/cache_diff.txt
echo "done at $(( $(date +%s) - start )) s" >> $OUT/environment.txt
cat $OUT/environment.txt
