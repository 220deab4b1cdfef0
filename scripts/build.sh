#!/usr/bin/env bash
# Configures and builds everything into build/ (programs in build/bin, tests in build/tests).
#   scripts/build.sh          every target, with every Debian package the tests use
#   scripts/build.sh --main   only build/bin/swarm (what scripts/swarm-local.sh runs), with only
#                             the packages it needs (scripts/install-deps.sh main)
set -euo pipefail
cd "$(dirname "$0")/.."
targets=()
deps=all
case "${1:-}" in
  "") ;;
  --main) targets=(--target swarm); deps=main ;;
  *) echo "build.sh: the only option is --main, not '$1'" >&2; exit 2 ;;
esac
bash scripts/install-deps.sh "$deps"
# ccache shared by every clone on this machine (CI builds a fresh clone in another folder).
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-8G}"
# libtorch: PyTorch's, from the pinned PyPI wheel (scripts/install-torch.sh installs it once and
# prints its torch.utils.cmake_prefix_path). SWARM_TORCH=debian builds against Debian's libtorch
# 1.13 (libtorch-dev) instead: slower (cmake/SwarmTorch.cmake, docs/benchmarks.md).
case "${SWARM_TORCH:-pypi}" in
  pypi) torch_prefix=$(bash scripts/install-torch.sh) ;;
  debian) torch_prefix="" ;;
  *) echo "build.sh: SWARM_TORCH is pypi or debian, not '$SWARM_TORCH'" >&2; exit 2 ;;
esac
# Configure when there is no build yet or the libtorch changed (a full rebuild).
if [ ! -f build/CMakeCache.txt ] || ! grep -qxF "SWARM_TORCH_CMAKE_PREFIX:PATH=$torch_prefix" build/CMakeCache.txt; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSWARM_TORCH_CMAKE_PREFIX="$torch_prefix" >/dev/null
fi
cmake --build build -j "$(nproc)" "${targets[@]}"
