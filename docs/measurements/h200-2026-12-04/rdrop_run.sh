#!/bin/bash
# The GPU call of docs/gpu.md ("What to run first"); EXTRA and PY for a dry run on the CPU.
PY=${PY:-python3}; OUT=${OUT:?}; RUNS=${RUNS:-/tmp/runs}; CACHE=${CACHE:-/tmp/mtcache}
start=$(date +%s)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; $PY -c 'import torch,sentencepiece,sacrebleu; print(torch.__version__, sentencepiece.__version__, sacrebleu.__version__)'; nproc; lscpu | grep "Model name"; } > $OUT/environment.txt 2>&1
$PY -c "import tarfile; tarfile.open('.gpu/cache.tar.xz').extractall('$CACHE', filter='data')" || exit 1
find $CACHE -type f ! -name "*.lock" | sort > $OUT/cache_before.txt
echo "unpacked $(( $(date +%s) - start )) s" >> $OUT/environment.txt
MT_DATA_DIR=$PWD/.gpu/data/multi30k MT_CACHE_DIR=$CACHE PYTHONUNBUFFERED=1 timeout ${LIMIT:-560} $PY bench/quality.py \
  --config config/gpu.yaml --set train.rdrop_alpha=2.5 --set train.max_tokens=4096 $EXTRA \
  --seeds 1234,1,2 --jobs 3 --train-timeout ${TRAIN_LIMIT:-420} --alphas 1.0,1.3,1.6,2.0 --ensemble \
  --run-dir $RUNS --out $OUT/rdrop.json > $OUT/quality.txt 2>&1
echo "quality rc=$? at $(( $(date +%s) - start )) s" >> $OUT/environment.txt
find $CACHE -type f ! -name "*.lock" | sort | diff $OUT/cache_before.txt - > $OUT/cache_diff.txt; rm $OUT/cache_before.txt
cat $RUNS/*.log > $OUT/train_logs.txt 2>/dev/null
for d in $RUNS/seed-*/; do d=${d%/}; cp $d/metrics.jsonl $OUT/${d##*/}.jsonl; done
cat $OUT/environment.txt
