#!/usr/bin/env bash
# ctest operator_images: builds the container images (scripts/build-images.sh --prebuilt: the
# runtime stages of Dockerfile.worker / Dockerfile.operator plus the binaries of this build; the
# base image and every unchanged layer are cached after the first run) and runs what is inside:
#   worker image:   swarm --help; `swarm local` trains 2 steps of examples/tiny-lm.yaml; every
#                   shared library of swarm resolves
#   operator image: swarm-operator --help; every shared library resolves; no libtorch anywhere
# Usage: images_test.sh SOURCE_DIR BINARY_DIR   (needs root, buildah and debootstrap)
set -euo pipefail
SRC=$1
BIN=$2/bin
B="buildah --storage-driver vfs"
checks=0
fail() { echo "FAIL: $*"; exit 1; }
ok() { checks=$((checks + 1)); echo "ok: $*"; }

start=$(date +%s)
bash "$SRC/scripts/build-images.sh" --prebuilt "$BIN" --tag test
echo "images built in $(( $(date +%s) - start )) s"
$B images --format '{{.Name}}:{{.Tag}} {{.Size}}' | grep -E 'swarm-(worker|operator):test|swarm-base:' || true

containers=()
mounts=()
cleanup() {
  for c in "${containers[@]}"; do $B umount "$c" >/dev/null 2>&1 || true; $B rm "$c" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT

# --- worker image
w=$($B from localhost/swarm-worker:test)
containers+=("$w")
out=$($B run --isolation chroot "$w" -- swarm --help 2>&1 </dev/null) || fail "swarm --help (exit $?): $out"
grep -q "local" <<<"$out" && grep -q "registry" <<<"$out" || fail "swarm --help lists no subcommands: $out"
ok "worker image: swarm --help"
wm=$($B mount "$w")
missing=$(chroot "$wm" ldd /usr/local/bin/swarm | grep "not found" || true)
[ -z "$missing" ] || fail "worker image lacks libraries: $missing"
torch_so=$(chroot "$wm" ldd /usr/local/bin/swarm | awk '$1 ~ /^libtorch_cpu\.so/ {print $3}')
[ -n "$torch_so" ] && [ -f "$wm$torch_so" ] || fail "worker image: swarm's libtorch_cpu does not resolve ($torch_so)"
# A host binary linked against PyPI's libtorch (the default build) finds it under /opt/pytorch.
if ldd "$BIN/swarm" | grep -q '/torch/lib/libtorch_cpu\.so' && [ "$torch_so" != /opt/pytorch/torch/lib/libtorch_cpu.so ]; then
  fail "worker image: swarm links PyPI's libtorch, but the image resolves $torch_so"
fi
[ -s "$wm/usr/share/games/fortunes/fortunes" ] || fail "worker image has no training text"
ok "worker image: every library of swarm resolves, libtorch and the fortunes text are there"
$B copy "$w" "$SRC/examples/tiny-lm.yaml" /tmp/tiny-lm.yaml >/dev/null
t0=$(date +%s)
out=$($B run --isolation chroot "$w" -- swarm local /tmp/tiny-lm.yaml --steps 2 --threads 1 \
        --summary /tmp/summary.json --log-dir /tmp/swarm-logs 2>&1) || fail "swarm local in the worker image: $(tail -n 30 <<<"$out")"
summary=$(cat "$wm/tmp/summary.json" 2>/dev/null) || fail "no summary written: $(tail -n 30 <<<"$out")"
grep -Eq '"steps": ?2[,}]' <<<"$summary" || fail "swarm local did not take 2 steps: $summary"
grep -Eq '"loss_last": ?[0-9]' <<<"$summary" || fail "no loss in the summary: $summary"
ok "worker image: swarm local trained 2 steps in $(( $(date +%s) - t0 )) s"

# --- operator image
o=$($B from localhost/swarm-operator:test)
containers+=("$o")
out=$($B run --isolation chroot "$o" -- swarm-operator --help 2>&1 </dev/null) || fail "swarm-operator --help (exit $?): $out"
grep -q -- "--progress-period" <<<"$out" || fail "swarm-operator --help: $out"
ok "operator image: swarm-operator --help"
om=$($B mount "$o")
missing=$(chroot "$om" ldd /usr/local/bin/swarm-operator | grep "not found" || true)
[ -z "$missing" ] || fail "operator image lacks libraries: $missing"
torch=$(find "$om" -xdev \( -iname '*torch*' -o -iname 'libc10*' \) -print | head -5)
[ -z "$torch" ] || fail "operator image carries libtorch: $torch"
if chroot "$om" ldd /usr/local/bin/swarm-operator | grep -qi torch; then fail "swarm-operator links libtorch"; fi
user=$($B inspect --format '{{.OCIv1.Config.User}}' localhost/swarm-operator:test)
[ "$user" = "65532:65532" ] || fail "operator image runs as '$user', the chart expects a non-root user"
ok "operator image: every library resolves, no libtorch, non-root user"
echo "$checks passed, 0 failed"
