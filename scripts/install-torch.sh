#!/usr/bin/env bash
# Installs the libtorch the project builds with: PyTorch's own, from the pinned `torch` wheel on
# PyPI, into a virtual environment of its own under the cache (once per version; later runs only
# print). Prints torch.utils.cmake_prefix_path of that install on stdout; scripts/build.sh passes it
# to CMake as SWARM_TORCH_CMAKE_PREFIX (cmake/SwarmTorch.cmake).
#
# What is installed, and why (PyPI's Linux torch wheel is a CUDA build):
#   torch==$TORCH_VERSION without its dependencies (530 MB download). The CPU build links only
#     libtorch_cpu.so and libc10.so from it. The libraries only CUDA or Python use (libtorch_cuda,
#     libtorch_cuda_linalg, libc10_cuda, libtorch.so, libtorch_python, libtorch_nvshmem, libcaffe2_nvrtc,
#     libshm) are
#     deleted after the install: 520 MB of disk nobody here loads.
#   nvidia-cuda-runtime and nvidia-cuda-cupti (13 MB): libtorch_cpu.so itself needs libcudart.so.13
#     (it asks whether a GPU exists) and libcupti.so.13 (its profiler) at load time. They resolve
#     through libtorch_cpu's own RPATH ($ORIGIN/../../nvidia/cu13/lib). No GPU or driver is needed.
#   torch/include/fmt is removed: libtorch bundles fmt 12, which would shadow Debian's fmt 9 that
#     spdlog is built against (no libtorch header the project includes uses fmt).
# Python cannot `import torch` from this install (libtorch_python needs cuDNN and the rest), and
# the project never does: the prefix is computed as torch.utils computes it, from the package's
# location (importlib finds it without running it).
#
#   SWARM_TORCH_VERSION  the pinned version (default below; the CUDA image pins the same one)
#   SWARM_CACHE_DIR      cache root (default ~/.cache/swarm-operator)
set -euo pipefail

TORCH_VERSION=${SWARM_TORCH_VERSION:-2.11.0}
# The CUDA runtime release torch $TORCH_VERSION pins (its cuda-toolkit==13.0.2 requirement).
CUDART_VERSION=13.0.96
CUPTI_VERSION=13.0.85
CACHE_ROOT=${SWARM_CACHE_DIR:-$HOME/.cache/swarm-operator}
VENV="$CACHE_ROOT/torch/torch-$TORCH_VERSION-cpu"
log() { echo "[install-torch $(date +%T)] $*" >&2; }

prefix_of() {
  "$VENV/bin/python" -c 'import importlib.util, os
spec = importlib.util.find_spec("torch")
print(os.path.join(os.path.dirname(spec.origin), "share", "cmake"))'
}

if [ -f "$VENV/.complete" ] && [ "$(cat "$VENV/.complete")" = "$TORCH_VERSION" ]; then
  prefix_of
  exit 0
fi

start=$(date +%s)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
"$PY" -c 'import venv, ensurepip' 2>/dev/null || {
  echo "install-torch: python3 with venv and ensurepip is needed (Debian: python3-venv)" >&2
  exit 1
}
log "torch $TORCH_VERSION (PyPI wheel) into $VENV"
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check --no-cache-dir --no-deps --only-binary=:all: \
  "torch==$TORCH_VERSION" "nvidia-cuda-runtime==$CUDART_VERSION.*" "nvidia-cuda-cupti==$CUPTI_VERSION.*"
lib=$(dirname "$(prefix_of)")/../lib
lib=$(cd "$lib" && pwd)
rm -f "$lib"/libtorch_cuda.so "$lib"/libtorch_cuda_linalg.so "$lib"/libtorch.so "$lib"/libtorch_python.so \
      "$lib"/libtorch_nvshmem.so "$lib"/libcaffe2_nvrtc.so "$lib"/libtorch_global_deps.so "$lib"/libc10_cuda.so \
      "$lib"/libshm.so
rm -rf "$lib/libshm" "$lib/libshm_windows"
rm -rf "$lib/../include/fmt"
for f in libtorch_cpu.so libc10.so; do
  [ -f "$lib/$f" ] || { echo "install-torch: the torch $TORCH_VERSION wheel has no lib/$f" >&2; exit 1; }
done
echo "$TORCH_VERSION" > "$VENV/.complete"
log "done in $(( $(date +%s) - start )) s, $(du -sh "$VENV" | cut -f1) on disk"
prefix_of
