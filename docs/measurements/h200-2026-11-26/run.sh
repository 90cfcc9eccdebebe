#!/usr/bin/env bash
# One device call: environment, cuDNN shapes check, the CPU recipe on the GPU, its evaluation,
# decode_speed, the GPU resume tests, train_speed. Every phase has its own time limit.
set -u
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
P=$OUT/phases.txt
phase() { echo "$(date +%T) $*" >> "$P"; }
phase start
{ nvidia-smi; python3 -V; lscpu | grep -E "Model name|Flags"; } > "$OUT/env.txt" 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl >> "$OUT/env.txt" 2>&1 || { phase pip failed; exit 1; }
export PYTHONPATH=/tmp/site:$PWD MT_DATA_DIR=$PWD/.gpu/data MT_CACHE_DIR=/tmp/mtcache
cp -r .gpu/cache /tmp/mtcache
python3 -c "import torch, sentencepiece; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), torch.cuda.get_device_name(0), sentencepiece.__version__)" >> "$OUT/env.txt" 2>&1
phase shapes
for m in off on; do timeout 60 python3 .gpu/shapes.py $m 6 >> "$OUT/shapes.txt" 2>&1; echo "rc=$?" >> "$OUT/shapes.txt"; done
phase recipe
CONFIG=config/cpu.yaml RUN_DIR=/tmp/runs/cpu-gpu PYTHON=python3 timeout 250 scripts/train_gpu.sh > "$OUT/train.log" 2>&1; echo "rc=$?" >> "$OUT/train.log"
ls -la /tmp/runs/cpu-gpu >> "$OUT/train.log" 2>&1
phase average+evaluate
python3 -m transformer_mt average --output /tmp/runs/avg.pt /tmp/runs/cpu-gpu/step_*.pt > "$OUT/eval.log" 2>&1
for s in test_2016_flickr test_2017_flickr; do timeout 45 python3 -m transformer_mt evaluate --checkpoint /tmp/runs/avg.pt --split $s --beam 5 >> "$OUT/eval.log" 2>&1; echo "rc=$?" >> "$OUT/eval.log"; done
phase decode_speed
timeout 75 python3 bench/decode_speed.py --quick --sentences 100 --device cuda --checkpoint /tmp/runs/avg.pt --first-call-rounds 0 --no-compile > "$OUT/decode.json" 2>&1; echo "rc=$?" >> "$OUT/decode.json"
phase tests
timeout 75 python3 -m pytest -q -p no:cacheprovider tests/test_reliability.py -k "cuda and not spacy" > "$OUT/tests.log" 2>&1; echo "rc=$?" >> "$OUT/tests.log"
phase train_speed
timeout 50 python3 bench/train_speed.py --quick --device cuda > "$OUT/train_speed.json" 2>&1; echo "rc=$?" >> "$OUT/train_speed.json"
phase end
