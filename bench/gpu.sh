#!/usr/bin/env bash
# One prepared GPU check (docs/gpu.md). Needs only python3 with PyTorch (CUDA build), CMake and a
# C++ compiler. Finishes in under 8 minutes: every step runs under `timeout` against one budget.
#   1. builds swarm_model + stage_bench alone (-DSWARM_MODEL_ONLY=ON against PyTorch's libtorch;
#      if that CMake configure/build fails, e.g. no CUDA toolkit for TorchConfig.cmake, it compiles
#      the same sources directly with the compiler and PyTorch's include/lib paths);
#   2. stage_bench --check (autocast + staging on the device), then one middle stage's
#      forward+backward at hidden 1024, 2048, 4096 in bf16: TFLOP/s and fraction of the measured
#      bf16 matmul peak;
#   3. if the full project configures (cpprestsdk etc. present), builds `swarm` and runs a short
#      `swarm local` of bench/jobs-gpu/gpu-2stage.yaml on the GPU; otherwise says why it skipped.
# Without CUDA it runs the CPU variant with small sizes, labelled as such.
# Environment: GPU_SH_BUDGET (seconds, default 465), GPU_SH_BUILD (build-gpu), GPU_SH_FULL_BUILD
# (build-gpu-full), GPU_SH_JOBS (nproc), GPU_SH_FORCE_DIRECT=1 (skip CMake for step 1),
# GPU_SH_SKIP_FULL=1 (skip step 3), GPU_SH_PRECISION (spec.workers.precision of step 3's job,
# default auto: bf16 on CUDA, fp32 on the CPU).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
T0=$SECONDS
BUDGET=${GPU_SH_BUDGET:-465}
BUILD=${GPU_SH_BUILD:-build-gpu}
FULL=${GPU_SH_FULL_BUILD:-build-gpu-full}
JOBS=${GPU_SH_JOBS:-$(nproc 2>/dev/null || echo 4)}
LOGS=$BUILD/gpu-sh
mkdir -p "$LOGS"

log() { printf '[gpu.sh %3ds] %s\n' $((SECONDS - T0)) "$*"; }
left() { echo $((BUDGET - (SECONDS - T0))); }
# bounded CAP CMD...: runs CMD under timeout min(CAP, time left); 124 when out of time.
bounded() {
  local cap=$1 l
  shift
  l=$(left)
  ((l > cap)) && l=$cap
  if ((l < 5)); then
    log "no time left for: $*"
    return 124
  fi
  timeout --kill-after=5 "$l" "$@"
}
# fresh DIR: generator and build type for a new build folder (an existing one keeps its own, so
# re-running the script, or pointing it at a configured folder, rebuilds incrementally).
fresh() {
  [ -f "$1/CMakeCache.txt" ] && return
  command -v ninja >/dev/null 2>&1 && printf '%s\n' -G Ninja
  printf '%s\n' -DCMAKE_BUILD_TYPE=Release
}

# ---- 0. environment ----
log "repository $ROOT, $JOBS build jobs, budget ${BUDGET}s"
PREFIX="" PY_CUDA=0
if python3 -c 'import torch' >/dev/null 2>&1; then
  PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
  python3 - <<'PY' | sed 's/^/  /'
import torch
cuda = torch.cuda.is_available()
print(f"PyTorch {torch.__version__}, CUDA runtime {torch.version.cuda}, CUDA available: {cuda}")
if cuda:
    p = torch.cuda.get_device_properties(0)
    print(f"GPU 0: {p.name}, {p.total_memory / 2**30:.0f} GiB, {p.multi_processor_count} SMs")
PY
  [ "$(python3 -c 'import torch;print(int(torch.version.cuda is not None))')" = 1 ] && PY_CUDA=1
else
  log "python3 has no torch: using whatever libtorch CMake finds on its own (e.g. Debian's, CPU-only)"
fi
cmake --version | head -1 | sed 's/^/  /'
if ((PY_CUDA)) && ! command -v nvcc >/dev/null 2>&1; then
  # TorchConfig.cmake of a CUDA PyTorch looks for the CUDA toolkit; help it find one.
  for d in "${CUDA_HOME:-}" /usr/local/cuda /usr/local/cuda-*; do
    if [ -n "$d" ] && [ -x "$d/bin/nvcc" ]; then
      export PATH="$d/bin:$PATH" CUDA_HOME="$d" CUDACXX="$d/bin/nvcc"
      log "using the CUDA toolkit in $d"
      break
    fi
  done
fi

# ---- 1. build swarm_model + stage_bench ----
BENCH=""
if [ "${GPU_SH_FORCE_DIRECT:-0}" != 1 ]; then
  log "configure: cmake -S . -B $BUILD -DSWARM_MODEL_ONLY=ON ${PREFIX:+-DCMAKE_PREFIX_PATH=$PREFIX}"
  mapfile -t opts < <(fresh "$BUILD")
  if bounded 150 cmake -S . -B "$BUILD" "${opts[@]}" -DSWARM_MODEL_ONLY=ON \
      ${PREFIX:+-DCMAKE_PREFIX_PATH="$PREFIX"} >"$LOGS/configure.log" 2>&1; then
    grep -E 'swarm_model:' "$LOGS/configure.log" | sed 's/^/  /'
    log "build: stage_bench ($JOBS jobs)"
    if bounded 300 cmake --build "$BUILD" --target stage_bench -j "$JOBS" >"$LOGS/build.log" 2>&1; then
      BENCH=$BUILD/bin/stage_bench
    else
      log "CMake build failed or timed out (last lines of $LOGS/build.log):"
      tail -5 "$LOGS/build.log" | sed 's/^/  /'
    fi
  else
    log "CMake configure failed or timed out (first error in $LOGS/configure.log):"
    grep -m3 -A4 'CMake Error' "$LOGS/configure.log" | sed 's/^/  /'
  fi
fi
if [ -z "$BENCH" ]; then
  log "direct build: the same sources with the compiler and PyTorch's paths (no CMake)"
  if python3 -c 'import torch' >/dev/null 2>&1; then
    eval "$(python3 - <<'PY'
import os, torch
base = os.path.dirname(torch.__file__)
inc = [os.path.join(base, "include"), os.path.join(base, "include", "torch", "csrc", "api", "include")]
print("T_INC='%s'" % " ".join("-I" + p for p in inc))
print("T_LIB='%s'" % os.path.join(base, "lib"))
print("T_ABI=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI))
print("T_CUDA=%d" % int(torch.version.cuda is not None))
PY
)"
  else
    T_INC="-I/usr/include -I/usr/include/torch/csrc/api/include" T_ABI=1 T_CUDA=0
    T_LIB=$(dirname "$(find /usr/lib /usr/local/lib -name 'libtorch_cpu.so*' 2>/dev/null | head -1)")
  fi
  obj=$BUILD/direct
  mkdir -p "$obj" "$BUILD/bin"
  FLAGS="-std=c++17 -O2 -DNDEBUG -fPIC -D_GLIBCXX_USE_CXX11_ABI=$T_ABI -I$ROOT $T_INC"
  libs=(-ltorch -ltorch_cpu -lc10)
  if ((T_CUDA)); then
    FLAGS="$FLAGS -DSWARM_MODEL_CUDA=1"
    libs=(-ltorch -ltorch_cuda -lc10_cuda -ltorch_cpu -lc10)
  fi
  export FLAGS obj CXX="${CXX:-c++}"
  ok=1
  # shellcheck disable=SC2016
  printf '%s\n' worker/model/*.cc bench/stage_bench.cc |
    bounded 300 xargs -P "$JOBS" -I{} sh -c '$CXX $FLAGS -c "$1" -o "$obj/$(basename "$1" .cc).o"' _ {} \
      >"$LOGS/direct.log" 2>&1 || ok=0
  if ((ok)) && bounded 120 "$CXX" -o "$BUILD/bin/stage_bench" "$obj"/*.o -L"$T_LIB" \
      -Wl,-rpath,"$T_LIB" -Wl,--no-as-needed "${libs[@]}" -Wl,--as-needed -lpthread \
      >>"$LOGS/direct.log" 2>&1; then
    BENCH=$BUILD/bin/stage_bench
  else
    log "direct build failed (last lines of $LOGS/direct.log):"
    tail -8 "$LOGS/direct.log" | sed 's/^/  /'
  fi
fi
if [ -z "$BENCH" ]; then
  log "FAILED: could not build stage_bench"
  exit 1
fi
log "built $BENCH"

# ---- 2. check + stage benchmark ----
DEVICE=cpu
if bounded 120 "$BENCH" --check --device cuda >"$LOGS/check.log" 2>&1; then
  DEVICE=cuda
  cat "$LOGS/check.log"
elif grep -q '^check ' "$LOGS/check.log"; then
  DEVICE=cuda
  cat "$LOGS/check.log"
  log "WARNING: the CUDA self-check reported failures (above); benchmarking anyway"
else
  grep -q "CUDA is not available" "$LOGS/check.log" || sed 's/^/  /' "$LOGS/check.log"
  log "no usable CUDA device: running the CPU variant with small sizes (NOT GPU figures)"
  bounded 60 "$BENCH" --check --device cpu 2>&1 | tee "$LOGS/check.log"
fi
if [ "$DEVICE" = cuda ]; then
  args=(--hidden 1024,2048,4096 --layers 4 --seq 2048 --batch 4 --precision bf16 --device cuda
        --iters 10 --warmup 3 --peak-size 8192)
else
  args=(--hidden 128,256,512 --layers 2 --seq 128 --batch 4 --precision bf16 --device cpu
        --iters 3 --warmup 1 --peak-size 1024)
fi
log "stage_bench ${args[*]}"
bounded 240 "$BENCH" "${args[@]}" 2>&1 | tee "$LOGS/stage_bench.log" | grep -v '^RESULT'
echo
echo "== stage forward+backward, bf16 autocast, device $DEVICE$([ "$DEVICE" = cpu ] && echo ' (CPU: NOT a GPU figure)') =="
awk '/^RESULT kind=peak/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); p[kv[1]] = kv[2] }
       printf "measured %s matmul peak (%s^3): %s TFLOP/s\n", p["precision"], p["n"], p["tflops"] }
     /^RESULT kind=stage/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); r[kv[1]] = kv[2] }
       printf "hidden %5s: %8s TFLOP/s  %5.1f%% of peak\n", r["hidden"], r["tflops"], 100 * r["frac_of_peak"]
       if (r["hidden"] == 4096 && r["device"] ~ /cuda/)
         printf "  goal at hidden 4096: >= 50%% of the measured bf16 peak: %s\n", (r["frac_of_peak"] >= 0.5 ? "MET" : "NOT MET") }' \
  "$LOGS/stage_bench.log"
grep -q '^RESULT kind=stage' "$LOGS/stage_bench.log" || log "stage_bench produced no result (see $LOGS/stage_bench.log)"

# ---- 3. short multi-process SWARM run ----
echo
if [ "${GPU_SH_SKIP_FULL:-0}" = 1 ]; then
  log "multi-process run skipped: GPU_SH_SKIP_FULL=1"
  exit 0
fi
if (($(left) < 150)); then
  log "multi-process run skipped: only $(left)s of the budget left"
  exit 0
fi
log "multi-process run: configure the full project into $FULL"
mapfile -t opts < <(fresh "$FULL")
[ -f "$FULL/CMakeCache.txt" ] || opts+=(-DSWARM_BUILD_TESTS=OFF)
if ! bounded 90 cmake -S . -B "$FULL" "${opts[@]}" \
    ${PREFIX:+-DCMAKE_PREFIX_PATH="$PREFIX"} >"$LOGS/full-configure.log" 2>&1; then
  log "multi-process run skipped: the full project does not configure here (cpprestsdk, yaml-cpp," \
      "prometheus-cpp, CLI11, ... are needed; see $LOGS/full-configure.log):"
  grep -m2 -A3 'CMake Error' "$LOGS/full-configure.log" | sed 's/^/  /'
  exit 0
fi
log "build: swarm ($JOBS jobs, at most $(($(left) - 110))s)"
if ! bounded $(($(left) - 110)) cmake --build "$FULL" --target swarm -j "$JOBS" >"$LOGS/full-build.log" 2>&1; then
  log "multi-process run skipped: building swarm failed or did not fit in the budget; last lines:"
  tail -4 "$LOGS/full-build.log" | sed 's/^/  /'
  exit 0
fi
job=$LOGS/gpu-2stage.yaml
size=(1024 8 4 256)
[ "$DEVICE" = cpu ] && size=(128 4 2 64)
PRECISION=${GPU_SH_PRECISION:-auto}
sed -e "/^ *device: @DEVICE@/a\\    precision: $PRECISION" \
  -e "s|@DEVICE@|$DEVICE|" -e "s|@DATASET@|$ROOT/worker|" -e "s|@HIDDEN@|${size[0]}|" \
  -e "s|@HEADS@|${size[1]}|" -e "s|@LAYERS@|${size[2]}|" -e "s|@SEQ@|${size[3]}|" \
  bench/jobs-gpu/gpu-2stage.yaml >"$job"
secs=$(($(left) - 60))
((secs > 60)) && secs=60
log "swarm local $job (device $DEVICE, precision $PRECISION, hidden ${size[0]}, 2 stages x 1 worker + 1 trainer," \
    "at most ${secs}s of training)"
bounded $((secs + 50)) "$FULL/bin/swarm" local "$job" --max-seconds "$secs" --summary "$LOGS/swarm-summary.json" \
  --log-dir "$LOGS/swarm-logs" --no-progress >"$LOGS/swarm-local.log" 2>&1
rc=$?
# What the workers computed in (their start-up line: "precision bf16 on cuda:0", ...).
grep -ho 'device [^,]*, precision [^,]*' "$LOGS"/swarm-logs/stage*-w0.log 2>/dev/null | sed 's/^/  worker: /'
if [ -s "$LOGS/swarm-summary.json" ]; then
  python3 - "$LOGS/swarm-summary.json" "$DEVICE" <<'PY' || cat "$LOGS/swarm-summary.json"
import json, sys
s = json.load(open(sys.argv[1]))
keys = ["steps", "samples", "samples_per_second", "loss_first", "loss_last", "requests_retried"]
print(f"swarm local on {sys.argv[2]}: " + ", ".join(f"{k} {s[k]}" for k in keys if k in s))
PY
else
  log "swarm local exited with $rc and wrote no summary; last lines of $LOGS/swarm-local.log:"
  tail -8 "$LOGS/swarm-local.log" | sed 's/^/  /'
  report=$LOGS/swarm-logs/trainer0.json
  [ -s "$report" ] && python3 - "$report" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
curve = r.get("loss_curve", [])
print(f"  trainer report so far: {len(curve)} loss points, samples {curve[-1][0] if curve else 0}, "
      f"loss first {r.get('loss_first')}, ema {r.get('loss_ema')}")
PY
fi
log "done"
