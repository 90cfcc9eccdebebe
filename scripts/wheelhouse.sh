#!/usr/bin/env bash
# Download every wheel transformer_mt needs into a folder, for machines without internet
# (clusters, lent GPU machines). Then, on that machine, with the folder copied beside the repo:
#
#   make setup WHEELHOUSE=wheelhouse       # installs from it only (pip --no-index)
#
# Usage: scripts/wheelhouse.sh DIR [PYTHON_VERSION [PLATFORM]]
#   PYTHON_VERSION  e.g. 3.12 (default: this Python's)
#   PLATFORM        e.g. manylinux_2_28_x86_64,manylinux_2_17_x86_64 (default: this
#                   machine's; several, comma-separated: wheels of any); with either of these
#                   two, only binary wheels are taken (pip cannot build for another machine)
#   WHEEL_TORCH     none: no torch (the target has one, e.g. a GPU image: then create the venv
#                   with VENV_ARGS=--system-site-packages); cpu (default): the CPU build;
#                   cu126, cu128, ...: that CUDA build (several GB)
#   TORCH_VERSION   default 2.13.0
#   WHEEL_EXTRAS    e.g. serve,shared: the package's own dependencies and these extras only
#                   (default: everything the tests need too; deploy/build.sh's image: serve)
#   PYTHON          the interpreter whose pip downloads (default: .venv/bin/python if
#                   present, else python3)
set -euo pipefail
DIR=${1:?usage: scripts/wheelhouse.sh DIR [PYTHON_VERSION [PLATFORM]]}
PYVER=${2:-}
PLATFORM=${3:-}
TORCH=${WHEEL_TORCH:-cpu}
VERSION=${TORCH_VERSION:-2.13.0}
cd "$(dirname "$0")/.."
# the venv's Python (its pip; a system python3 may have none), else python3
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
mkdir -p "$DIR"

target=()
if [ -n "$PYVER" ] || [ -n "$PLATFORM" ]; then
  target=(--only-binary=:all:)
  [ -n "$PYVER" ] && target+=(--python-version "$PYVER" --implementation cp)
  for platform in ${PLATFORM//,/ }; do  # several: any of them (older manylinux tags too)
    target+=(--platform "$platform")
  done
fi

# the project's dependencies (and the dev extras the tests need), read from pyproject.toml
requirements=$(mktemp)
trap 'rm -f "$requirements"' EXIT
"$PY" - "$requirements" "${WHEEL_EXTRAS:-}" <<'EOF'
import sys

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    try:
        import tomli as tomllib
    except ModuleNotFoundError:
        sys.exit("wheelhouse: reading pyproject.toml needs Python 3.11 or later, or tomli "
                 "(pip install tomli); or run it with PYTHON=python3.11")

project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = project["optional-dependencies"]
needs = [r for r in project["dependencies"] if not r.startswith("torch")]
wanted = [f"transformer_mt[{sys.argv[2]}]"] if sys.argv[2] else extras["dev"]
for r in wanted:
    if r.startswith("transformer_mt["):  # the dev extra names other extras: theirs too
        for name in r[len("transformer_mt["):].rstrip("]").split(","):
            needs += extras[name.strip()]
    else:
        needs.append(r)
needs += ["setuptools>=68", "wheel"]  # to install the project itself (an editable install builds)
open(sys.argv[1], "w").write("\n".join(needs) + "\n")
EOF

echo "wheelhouse: the project's dependencies${PYVER:+ for Python $PYVER}${PLATFORM:+ on $PLATFORM}" >&2
"$PY" -m pip download --quiet --disable-pip-version-check -d "$DIR" "${target[@]}" \
  -r "$requirements"
"$PY" -m pip wheel --quiet --disable-pip-version-check --no-deps -w "$DIR" .

case "$TORCH" in
  none) echo "wheelhouse: no torch (WHEEL_TORCH=none)" >&2 ;;
  cpu)
    echo "wheelhouse: torch==$VERSION, CPU build" >&2
    # a torch wheel pip finds without the network (find-links, as on this project's CI), else
    # PyTorch's CPU index (PyPI's Linux wheel is the CUDA build)
    if ! "$PY" -m pip download --quiet --no-index --no-deps -d "$DIR" "${target[@]}" \
        "torch==$VERSION" 2>/dev/null; then
      "$PY" -m pip download --quiet --no-deps -d "$DIR" "${target[@]}" "torch==$VERSION" \
        --index-url https://download.pytorch.org/whl/cpu
    fi
    "$PY" -m pip download --quiet -d "$DIR" "${target[@]}" "torch==$VERSION" \
      --find-links "$DIR" ;;  # its dependencies (sympy, networkx, ...)
  cu*)
    echo "wheelhouse: torch==$VERSION+$TORCH (several GB)" >&2
    "$PY" -m pip download --quiet -d "$DIR" "${target[@]}" "torch==$VERSION+$TORCH" \
      --index-url "https://download.pytorch.org/whl/$TORCH" \
      --extra-index-url https://pypi.org/simple ;;
  *) echo "wheelhouse: WHEEL_TORCH must be none, cpu or cuXYZ, not '$TORCH'" >&2; exit 2 ;;
esac
echo "wheelhouse: $(ls "$DIR" | wc -l) files, $(du -sh "$DIR" | cut -f1) in $DIR" >&2
