#!/usr/bin/env bash
# ctest operator_images_cuda (opt-in: SWARM_TEST_CUDA_IMAGE=1, else skipped): builds the CUDA worker
# image (scripts/build-images.sh --torch cuda: PyTorch's libtorch from the PyPI wheels; a full
# build, no GPU needed) and runs what is inside, on this machine's CPU:
#   swarm was linked against the CUDA libtorch (libtorch_cuda, libc10_cuda, cudart resolve), and
#   every shared library of swarm resolves; every library the image carries under /opt/pytorch
#   resolves too, except the driver's libcuda.so.1 (mounted by the NVIDIA container runtime)
#   nothing of the build-only toolkit (nvcc, headers, static libraries, Python) is in the image
#   swarm worker --help; `swarm local --baseline single-process` trains 2 steps of tiny-lm
#   (libtorch falls back to the CPU: no GPU here)
# and prints the image's size. Slow the first time (wheels download, ~3 GB; pip install; the
# compile), cached afterwards (wheels, buildah layers, ccache).
# Usage: images_cuda_test.sh SOURCE_DIR   (needs root, buildah, debootstrap, python3 -m pip)
set -euo pipefail
SRC=$1
if [ "${SWARM_TEST_CUDA_IMAGE:-0}" != 1 ]; then
  echo "skipped: the CUDA worker image test is opt-in (SWARM_TEST_CUDA_IMAGE=1 ctest -L images-cuda)"
  exit 77
fi
B="buildah --storage-driver vfs"
IMAGE=localhost/swarm-worker-cuda:test
checks=0
fail() { echo "FAIL: $*"; exit 1; }
ok() { checks=$((checks + 1)); echo "ok: $*"; }

start=$(date +%s)
bash "$SRC/scripts/build-images.sh" --torch cuda --tag test
echo "CUDA worker image built in $(( $(date +%s) - start )) s"

containers=()
cleanup() {
  for c in "${containers[@]}"; do $B umount "$c" >/dev/null 2>&1 || true; $B rm "$c" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT

w=$($B from "$IMAGE")
containers+=("$w")
wm=$($B mount "$w")

# --- libraries
libs=$(chroot "$wm" ldd /usr/local/bin/swarm)
missing=$(grep "not found" <<<"$libs" || true)
[ -z "$missing" ] || fail "CUDA worker image lacks libraries of swarm: $missing"
for lib in libtorch_cuda.so libc10_cuda.so libcudart.so libtorch_cpu.so; do
  grep -q "$lib.* => /opt/pytorch/" <<<"$libs" || fail "swarm does not load $lib from /opt/pytorch: $libs"
done
if grep -q "/usr/lib/.*libtorch" <<<"$libs"; then fail "swarm loads Debian's libtorch: $libs"; fi
ok "every library of swarm resolves ($(grep -c '=>' <<<"$libs") libraries; libtorch_cuda, c10_cuda, cudart from /opt/pytorch)"
n=0
while read -r f; do
  n=$((n + 1))
  missing=$(chroot "$wm" ldd "$f" | grep "not found" | grep -v "libcuda.so.1 " || true)
  [ -z "$missing" ] || fail "$f in the image lacks: $missing"
done < <(cd "$wm" && find opt/pytorch -name '*.so*' -type f | sed 's#^#/#')
[ "$n" -gt 10 ] || fail "only $n libraries under /opt/pytorch"
ls "$wm"/opt/pytorch/nvidia/cudnn/lib/libcudnn_engines_precompiled.so.* >/dev/null 2>&1 \
  || fail "cuDNN's engine libraries (loaded on demand) are missing"
ok "every one of the $n libraries under /opt/pytorch resolves (libcuda.so.1 aside: the driver's)"
extra=$(cd "$wm" && find . -xdev \( -name nvcc -o -name '*.a' -o -name 'cuda_runtime.h' -o -name 'torch.h' \
          -o -name 'libtorch_python.so' -o -path './usr/bin/python3*' \) -print | head -5)
[ -z "$extra" ] || fail "the image carries build-only files: $extra"
user=$($B inspect --format '{{.OCIv1.Config.User}}' "$IMAGE")
[ "$user" = "65532:65532" ] || fail "CUDA worker image runs as '$user', the chart expects a non-root user"
[ -s "$wm/usr/share/games/fortunes/fortunes" ] || fail "no training text in the image"
ok "no build-only files (nvcc, headers, static libraries, Python), non-root user, training text present"

# --- running swarm on the CPU
out=$($B run --isolation chroot "$w" -- swarm worker --help 2>&1 </dev/null) || fail "swarm worker --help (exit $?): $out"
grep -q -- "--registry" <<<"$out" && grep -q -- "--peer-id" <<<"$out" || fail "swarm worker --help: $out"
ok "swarm worker --help"
$B copy "$w" "$SRC/examples/tiny-lm.yaml" /tmp/tiny-lm.yaml >/dev/null
t0=$(date +%s)
out=$($B run --isolation chroot "$w" -- swarm local /tmp/tiny-lm.yaml --baseline single-process --steps 2 \
        --threads 1 --no-progress --summary /tmp/summary.json 2>&1) \
  || fail "swarm local --baseline single-process in the CUDA image: $(tail -n 30 <<<"$out")"
summary=$(cat "$wm/tmp/summary.json" 2>/dev/null) || fail "no summary written: $(tail -n 30 <<<"$out")"
grep -Eq '"steps": ?2[,}]' <<<"$summary" || fail "swarm local did not take 2 steps: $summary"
grep -Eq '"loss_last": ?[0-9]' <<<"$summary" || fail "no loss in the summary: $summary"
ok "swarm local --baseline single-process trained 2 steps on the CPU in $(( $(date +%s) - t0 )) s"

size=$($B images --format '{{.Size}}' "$IMAGE" | head -1)
echo "CUDA worker image size: $size ($(du -sh "$wm" 2>/dev/null | cut -f1) on disk, of which /opt/pytorch $(du -sh "$wm/opt/pytorch" | cut -f1))"
echo "$checks passed, 0 failed"
