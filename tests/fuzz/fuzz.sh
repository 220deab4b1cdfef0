#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/CMakeLists.txt) with clang in BUILD_DIR and runs each
# for SECONDS over a fresh working corpus seeded from tests/fuzz/corpus/<target>, then prints one
# line per target: executions, executions per second, coverage (libFuzzer's final cov and ft) and
# findings (crash, leak, timeout or out-of-memory artifacts, each saved as
# BUILD_DIR/fuzz-out/artifacts/<target>-*). Exit status 1 when any target had a finding.
# Usage: fuzz.sh BUILD_DIR SECONDS [TARGET...]   (default: every target)
# Environment: FUZZ_JOBS targets at a time (default 1), FUZZ_CXX (default clang++).
# bench/fuzz.sh runs it on build-fuzz; the ctest Fuzz.Smoke (label fuzz) on <build>/fuzz.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:?usage: fuzz.sh BUILD_DIR SECONDS [TARGET...]}
seconds=${2:?usage: fuzz.sh BUILD_DIR SECONDS [TARGET...]}
shift 2
all=(fuzz_frame fuzz_blockwise8 fuzz_http fuzz_registry fuzz_registry_wire fuzz_job_yaml fuzz_job_json fuzz_state fuzz_checkpoint fuzz_safetensors)
targets=("$@")
((${#targets[@]})) || targets=("${all[@]}")
cxx=${FUZZ_CXX:-clang++}
command -v "$cxx" >/dev/null || { echo "FAIL: $cxx not found (scripts/install-deps.sh installs clang)"; exit 1; }
rt=$("$cxx" -print-resource-dir)/lib/linux/libclang_rt.fuzzer-x86_64.a
[ -f "$rt" ] || { echo "FAIL: $rt missing (scripts/install-deps.sh installs libclang-rt-dev)"; exit 1; }
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$src} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"

# Configure once (ninja reruns cmake when a CMakeLists.txt changes); again if the compiler or the
# flags in the cache are not these.
if [ ! -f "$bin/CMakeCache.txt" ] || ! grep -qx "CMAKE_CXX_FLAGS:STRING=$flags" "$bin/CMakeCache.txt"; then
  rm -rf "$bin"
  cmake -S "$src" -B "$bin" -G Ninja -DSWARM_FUZZ=ON -DSWARM_BUILD_TESTS=OFF \
    -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" >/dev/null
fi
start=$SECONDS
nice cmake --build "$bin" -j "${FUZZ_BUILD_JOBS:-$(nproc)}" --target "${targets[@]}"
echo "built ${#targets[@]} fuzz targets in $((SECONDS - start)) s"

out=$bin/fuzz-out
rm -rf "$out/tmp"
mkdir -p "$out/artifacts" "$out/logs" "$out/tmp"
export TMPDIR=$out/tmp  # what a target that crashed leaves there (fuzz_checkpoint's folder)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

run_one() {  # run_one TARGET: fuzzes it for $seconds; its log is $out/logs/TARGET.log
  local t=$1 name=${1#fuzz_} dict=()
  [ -f "$src/tests/fuzz/dict/$name.dict" ] && dict=(-dict="$src/tests/fuzz/dict/$name.dict")
  rm -rf "$out/corpus/$t" && mkdir -p "$out/corpus/$t"
  "$bin/fuzz/$t" -max_total_time="$seconds" -print_final_stats=1 -timeout=30 -rss_limit_mb=4096 \
    -malloc_limit_mb=2048 -artifact_prefix="$out/artifacts/$t-" "${dict[@]}" \
    "$out/corpus/$t" "$src/tests/fuzz/corpus/$name" >"$out/logs/$t.log" 2>&1
}

stamp=$out/.started
touch "$stamp"
running=0
for t in "${targets[@]}"; do
  run_one "$t" &
  running=$((running + 1))
  if ((running >= ${FUZZ_JOBS:-1})); then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true
bash "$src/tests/fuzz/report.sh" "$out" "$stamp" "${targets[@]}"
