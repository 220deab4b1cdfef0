#!/usr/bin/env bash
# SWARM against the synchronous GPipe baseline (`swarm local --baseline gpipe`) on loopback, with
# and without a slowed peer, measured side by side in one run (the machine is shared and noisy):
#   swarm        every stage served by WORKERS_PER_STAGE workers, stochastic wiring
#   swarm slow   the same, stage0-w1 slowed SLOWDOWN x (--slow-worker): stage 0's capacity falls to
#                (1 + 1/SLOWDOWN) / 2 of the unslowed (0.67 x for 2 workers, 3 x)
#   gpipe        one fixed worker per stage, each step's microbatches all in flight, a flush
#   gpipe slow   the same with its stage-0 worker slowed SLOWDOWN x (its pipeline holds the slow peer)
# Prints samples/s of each and the ratios the SWARM paper's claim is about.
#   bench/schedules.sh [JOB.yaml] [STEPS] [WORKERS_PER_STAGE] [SLOWDOWN]
# Defaults: examples/tiny-lm.yaml, 40 steps, 2 workers a stage, 3x. Emulated slow links between
# regions are not part of this script.
set -euo pipefail
cd "$(dirname "$0")/.."
job="${1:-examples/tiny-lm.yaml}"
steps="${2:-40}"
per_stage="${3:-2}"
slow="${4:-3}"
swarm="${SWARM_BIN:-build/bin/swarm}"
[ -x "$swarm" ] || bash scripts/build.sh >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
stages=$(sed -n 's/^ *stages: *\([0-9]*\).*/\1/p' "$job" | head -1)
counts=$(python3 -c "print(','.join(['$per_stage'] * ${stages:-2}))")
run() { # NAME ARGS...
  local name=$1
  shift
  echo "$name: swarm local $job --steps $steps $*" >&2
  "$swarm" local "$job" --steps "$steps" --summary "$out/$name.json" --log-dir "$out/logs-$name" --no-progress "$@" >/dev/null
}
run swarm --workers-per-stage "$counts"
run gpipe --baseline gpipe
run swarm-slow --workers-per-stage "$counts" --slow-worker "stage0-w1=$slow"
run gpipe-slow --baseline gpipe --slow-worker "stage0-w0=$slow"
python3 - "$out" "$steps" "$counts" "$slow" <<'PY'
import json, sys
out, steps, counts, slow = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
r = {n: json.load(open(f"{out}/{n}.json")) for n in ("swarm", "gpipe", "swarm-slow", "gpipe-slow")}
sps = {n: v["samples_per_second"] for n, v in r.items()}
print(f"{steps} steps each; swarm with workers per stage {counts}, gpipe with 1; slowed peer {slow:g}x")
print(f"{'run':>11} {'samples/s':>10} {'eval loss':>10} {'steps':>6} {'lost':>5}")
for n, v in r.items():
    print(f"{n:>11} {sps[n]:>10.1f} {v['eval_loss']:>10.4f} {v['steps']:>6} {v['microbatches_lost']:>5}")
per = int(counts.split(',')[0])
cap = (per - 1 + 1 / slow) / per
print(f"swarm / gpipe, unslowed                 : {sps['swarm'] / sps['gpipe']:.2f}")
print(f"swarm slowed / swarm                    : {sps['swarm-slow'] / sps['swarm']:.2f}  (stage 0's capacity: {cap:.2f} x; goal >= 0.6)")
print(f"gpipe slowed / gpipe                    : {sps['gpipe-slow'] / sps['gpipe']:.2f}  (its slow peer's pace: {1 / slow:.2f} x of stage 0)")
PY
