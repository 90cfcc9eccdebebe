#!/usr/bin/env bash
# Download Multi30k (Task 1, raw, de/en) from the official multi30k/dataset repository into a
# directory and verify the SHA-256 sums. Point MT_DATA_DIR (or --data-dir) at it afterwards.
#   scripts/download_data.sh [DIR]      (default: data/multi30k)
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
cd "$(dirname "$0")/.."
DIR=${1:-data/multi30k}
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
mkdir -p "$DIR"
MT_DOWNLOAD_TARGET=$(cd "$DIR" && pwd) "$PYTHON" - <<'PY'
import os, shutil
from pathlib import Path
from transformer_mt.data import multi30k

target = Path(os.environ["MT_DOWNLOAD_TARGET"])
for name in sorted(multi30k.SHA256):
    dest = target / name
    if dest.is_file() and multi30k.sha256_of(dest) == multi30k.SHA256[name]:
        print(f"ok        {dest}")
        continue
    path = multi30k.locate(name)  # found locally or downloaded into the cache, verified
    shutil.copyfile(path, dest)
    print(f"verified  {dest}")
PY
echo "Multi30k is in $DIR; use: export MT_DATA_DIR=$(cd "$DIR" && pwd)"
