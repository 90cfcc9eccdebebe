#!/bin/bash
# #57 on one H200: config/gpu.yaml (with SETS), 3 seeds sharing the GPU, each scored (last 3
# saves averaged, greedy and beam 5 at the checkpoint's alpha and at each of ALPHAS), then the three as one ensemble. The token cache (.gpu/CACHE, made on the CPU
# with sentencepiece 0.2.2) and spaCy for Python 3.12 (.gpu/site.tar.xz) travel in .gpu.
# Call 1 (as one command line, the same steps): SETS="data.vocab_size=16000 train.max_steps=4000"
#   ALPHAS=1.0,1.3,1.6,2.0 CACHE=cache.tar.xz, --train-timeout 400, timeout 550, --out vocab16k.json
# Call 2: the recipe as it is (8k, 5,000 steps): SETS="" ALPHAS=1.0,1.3,1.6 CACHE=cache8k.tar.xz
# One run alone (ENSEMBLE= leaves the ensemble out): SEEDS=3 ENSEMBLE= SETS="train.max_steps=9000"
# Another recipe: CONFIG=config/cpu.yaml (its data is config/gpu.yaml's: the same token cache)
OUT=${OUT:?}; CONFIG=${CONFIG:-config/gpu.yaml}; SEEDS=${SEEDS:-1234,1,2}; ALPHAS=${ALPHAS:-1.0,1.3,1.6}; CACHE=${CACHE:-cache8k.tar.xz}
args=(); for s in ${SETS:-}; do args+=(--set "$s"); done
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch,sentencepiece,sacrebleu;print(torch.__version__,sentencepiece.__version__,sacrebleu.__version__)'
  lscpu | grep -E 'Model name|^CPU\(s\)'; } > $OUT/environment.txt 2>&1
s=$(date +%s)
python3 -c "import tarfile
for f, to in (('.gpu/$CACHE', '/tmp/mtcache'), ('.gpu/site.tar.xz', '/tmp/site')):
    tarfile.open(f).extractall(to, filter='data')" || exit 1
echo "unpacked $(( $(date +%s) - s )) s" >> $OUT/environment.txt
find /tmp/mtcache -type f | sort > /tmp/before.txt
PYTHONPATH=/tmp/site MT_DATA_DIR=$PWD/.gpu/data/multi30k MT_CACHE_DIR=/tmp/mtcache timeout ${LIMIT:-520} \
  python3 bench/quality.py --config $CONFIG "${args[@]}" --seeds $SEEDS --jobs 3 \
  --train-timeout ${TRAIN_LIMIT:-400} --alphas $ALPHAS ${ENSEMBLE---ensemble} --run-dir /tmp/runs --out $OUT/quality.json > /dev/null 2> $OUT/quality.stderr
echo "quality rc=$? at $(( $(date +%s) - s )) s" >> $OUT/environment.txt
find /tmp/mtcache -type f ! -name '*.lock' | sort | diff /tmp/before.txt - > /tmp/runs/cache_diff.txt
for d in /tmp/runs/seed-*/; do d=${d%/}; cp $d/metrics.jsonl /tmp/runs/${d##*/}.jsonl; done
tar -C /tmp/runs -czf $OUT/logs.tgz --exclude='*.pt' --exclude='seed-*/*' .
cat $OUT/environment.txt; tail -3 $OUT/quality.stderr
