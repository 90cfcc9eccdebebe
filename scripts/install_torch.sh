#!/usr/bin/env bash
# Install the PyTorch build that fits this machine into the Python given as $1 (a venv's).
#
#   torch already importable  -> nothing to do
#   an NVIDIA GPU is visible  -> PyPI's default build (CUDA)
#   otherwise                 -> a wheel pip finds locally (find-links, as on CI), else the
#                                CPU build from PyTorch's CPU index (~200 MB instead of the
#                                several GB of CUDA packages a plain `pip install torch` pulls)
set -euo pipefail
PY=${1:?usage: scripts/install_torch.sh PYTHON}
VERSION=${TORCH_VERSION:-2.13.0}

if "$PY" -c "import torch" 2>/dev/null; then
  exit 0
fi
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "install_torch: NVIDIA GPU found: installing the CUDA build of torch==$VERSION" >&2
  exec "$PY" -m pip install --quiet "torch==$VERSION"
fi
local=$(mktemp -d)
trap 'rm -rf "$local"' EXIT
if "$PY" -m pip download --quiet --no-index --no-deps -d "$local" "torch==$VERSION" \
    >/dev/null 2>&1; then
  echo "install_torch: installing torch==$VERSION from the local wheel pip finds" >&2
  "$PY" -m pip install --quiet "torch==$VERSION"
  exit 0
fi
if [ "$(uname -s)" = "Darwin" ]; then  # PyPI's macOS wheels are CPU/MPS builds already
  exec "$PY" -m pip install --quiet "torch==$VERSION"
fi
echo "install_torch: no NVIDIA GPU: installing the CPU build of torch==$VERSION" >&2
exec "$PY" -m pip install --quiet "torch==$VERSION" --index-url https://download.pytorch.org/whl/cpu
