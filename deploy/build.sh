#!/usr/bin/env bash
# Build the server's image with podman (ENGINE=docker works too), from no registry: a Debian
# base made by debootstrap (once; kept as $BASE), and the wheels of transformer_mt[serve,shared]
# for its Python (scripts/wheelhouse.sh). Run as root (debootstrap).
#
#   deploy/build.sh                      # -> localhost/transformer-mt:latest
#   TAG=localhost/transformer-mt:test MIRROR=http://deb.debian.org/debian deploy/build.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ENGINE=${ENGINE:-podman}
BASE=${BASE:-localhost/transformer-mt-base:bookworm-tcmalloc}
TAG=${TAG:-localhost/transformer-mt:latest}
PYTHON_IN_IMAGE=3.11.2  # bookworm's python3
PLATFORMS=manylinux_2_28_x86_64,manylinux_2_17_x86_64,manylinux2014_x86_64
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! $ENGINE image inspect "$BASE" > /dev/null 2>&1; then
  echo "build: the base, $BASE, with debootstrap" >&2
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates,redis-server,libtcmalloc-minimal4 \
    bookworm "$work/root" "${MIRROR:-http://deb.debian.org/debian}" > "$work/debootstrap.log"
  tar -C "$work/root" -c . | $ENGINE import - "$BASE" > /dev/null
  rm -rf "$work/root"
fi
WHEEL_EXTRAS=serve,shared bash scripts/wheelhouse.sh "$work/wheels" "$PYTHON_IN_IMAGE" "$PLATFORMS"
# redis's dependency for Pythons before 3.11.3, which pip cannot tell for another interpreter
python3 -m pip download --quiet --only-binary=:all: --no-deps -d "$work/wheels" \
  "async-timeout>=4.0.3"
cp deploy/Containerfile "$work/"
$ENGINE build --quiet --build-arg "BASE=$BASE" -t "$TAG" "$work"
echo "build: $TAG" >&2
