#!/usr/bin/env bash
# Install the PyTorch build that fits this machine into the Python given as $1 (a venv's).
#
#   an NVIDIA GPU (nvidia-smi)  -> the CUDA build of torch==$TORCH_VERSION for the newest CUDA
#                                  the driver supports (nvidia-smi's "CUDA Version"), from
#                                  PyTorch's index; a CPU build, or a build for a CUDA newer
#                                  than the driver's, already installed is replaced
#   no NVIDIA GPU               -> any torch already installed stays; else a wheel pip finds
#                                  locally (find-links, as on CI), else the CPU build from
#                                  PyTorch's CPU index (~200 MB instead of the several GB of
#                                  CUDA packages a plain `pip install torch` pulls)
#   WHEELHOUSE=DIR              -> only from that folder, no network (scripts/wheelhouse.sh)
#
# TORCH_CUDA_BUILDS lists the CUDA versions PyTorch publishes builds of $TORCH_VERSION for.
set -euo pipefail
PY=${1:?usage: scripts/install_torch.sh PYTHON}
VERSION=${TORCH_VERSION:-2.13.0}
CUDA_BUILDS=${TORCH_CUDA_BUILDS:-"13.0 12.8 12.6"}
say() { echo "install_torch: $*" >&2; }

# the CUDA version of the torch already installed: "None" for a CPU build, "" for no torch
have=$("$PY" -c "import torch; print(torch.version.cuda)" 2>/dev/null || true)

driver=""
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  driver=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9][0-9.]*\).*/\1/p' | head -n1)
  driver=${driver:-unknown}
fi

# "A.B" -> A*100+B, for comparing CUDA versions
num() { local major=${1%%.*} minor=${1#*.}; [ "$minor" = "$1" ] && minor=0; echo $((major * 100 + ${minor%%.*})); }

if [ -n "${WHEELHOUSE:-}" ]; then
  if [ -n "$have" ]; then exit 0; fi
  say "installing torch==$VERSION from the wheelhouse $WHEELHOUSE (no network)"
  exec "$PY" -m pip install --quiet --no-index --find-links "$WHEELHOUSE" "torch==$VERSION"
fi

if [ -n "$driver" ]; then
  if [ "$driver" = unknown ]; then
    say "nvidia-smi lists GPUs but not the CUDA version its driver supports; assuming ${CUDA_BUILDS%% *}"
    driver=${CUDA_BUILDS%% *}
  fi
  if [ -n "$have" ] && [ "$have" != None ] && [ "$(num "$have")" -le "$(num "$driver")" ]; then
    exit 0  # a CUDA build the driver runs
  fi
  pick=""
  for cuda in $CUDA_BUILDS; do  # newest first
    if [ "$(num "$cuda")" -le "$(num "$driver")" ]; then pick=$cuda; break; fi
  done
  if [ -z "$pick" ]; then
    say "the NVIDIA driver supports CUDA $driver, older than every CUDA build of" \
        "torch==$VERSION ($CUDA_BUILDS); update the NVIDIA driver, or set TORCH_VERSION to an" \
        "older torch and TORCH_CUDA_BUILDS to its builds"
    exit 1
  fi
  tag="cu${pick/./}"
  case "$have" in
    "") why="no torch installed" ;;
    None) why="the torch installed is a CPU build: replacing it" ;;
    *) why="the torch installed is built for CUDA $have, newer than the driver's: replacing it" ;;
  esac
  say "NVIDIA GPU with a driver for CUDA $driver ($why): installing torch==$VERSION+$tag"
  exec "$PY" -m pip install --quiet --force-reinstall "torch==$VERSION+$tag" \
    --index-url "https://download.pytorch.org/whl/$tag" --extra-index-url https://pypi.org/simple
fi

if [ -n "$have" ]; then
  exit 0  # no NVIDIA GPU: whatever torch is installed serves
fi
local_dir=$(mktemp -d)
trap 'rm -rf "$local_dir"' EXIT
if "$PY" -m pip download --quiet --no-index --no-deps -d "$local_dir" "torch==$VERSION" \
    >/dev/null 2>&1; then
  say "installing torch==$VERSION from the local wheel pip finds"
  "$PY" -m pip install --quiet "torch==$VERSION"
  exit 0
fi
if [ "$(uname -s)" = "Darwin" ]; then  # PyPI's macOS wheels are CPU/MPS builds already
  exec "$PY" -m pip install --quiet "torch==$VERSION"
fi
say "no NVIDIA GPU: installing the CPU build of torch==$VERSION"
exec "$PY" -m pip install --quiet "torch==$VERSION" --index-url https://download.pytorch.org/whl/cpu
