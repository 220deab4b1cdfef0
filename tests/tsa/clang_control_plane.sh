#!/usr/bin/env bash
# ThreadSafety.ClangControlPlane: configures and builds the control plane (common, planner,
# registry, operator: -DSWARM_CONTROL_PLANE_ONLY=ON, no tests) with clang and
# -Wthread-safety -Werror=thread-safety in its own build folder, so any locking annotation the
# code breaks fails the build. ccache (CCACHE_DIR, default ~/.cache/ccache) makes a rerun fast.
# Usage: clang_control_plane.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=${1:?usage: clang_control_plane.sh SOURCE_DIR BUILD_DIR}
bin=${2:?usage: clang_control_plane.sh SOURCE_DIR BUILD_DIR}
cxx=${TSA_CXX:-clang++}
command -v "$cxx" >/dev/null || { echo "FAIL: $cxx not found (scripts/install-deps.sh installs clang)"; exit 1; }
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$src} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
flags="-Wthread-safety -Werror=thread-safety"

# Configure once (ninja reruns cmake when a CMakeLists.txt changes); again if the compiler or the
# flags in the cache are not these.
if [ ! -f "$bin/CMakeCache.txt" ] || ! grep -qx "CMAKE_CXX_FLAGS:STRING=$flags" "$bin/CMakeCache.txt"; then
  rm -rf "$bin"
  cmake -S "$src" -B "$bin" -G Ninja \
    -DSWARM_CONTROL_PLANE_ONLY=ON -DSWARM_BUILD_TESTS=OFF \
    -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0
fi
cmake --build "$bin" -j "${TSA_JOBS:-$(nproc)}"
echo "ok: the control plane builds with $cxx $flags"
