#!/usr/bin/env bash
# SWARM against the synchronous GPipe baseline (`swarm local --baseline gpipe`) on loopback, with
# and without a slowed peer, with the same workers on both sides, measured in one run (the machine
# is shared and noisy):
#   swarm        every stage served by WORKERS_PER_STAGE workers, stochastic wiring
#   swarm slow   the same, stage0-w1 slowed SLOWDOWN x (--slow-worker): stage 0's capacity falls to
#                (WORKERS_PER_STAGE - 1 + 1/SLOWDOWN) / WORKERS_PER_STAGE of the unslowed
#   gpipe        WORKERS_PER_STAGE fixed pipelines (data-parallel GPipe: each pipeline one pinned
#                worker a stage, each step's share of microbatches all in flight, a flush)
#   gpipe slow   the same with stage0-w1 slowed SLOWDOWN x (the pipeline holding it is slow, and
#                the step waits for it)
# The four configurations run in rounds, REPEATS rounds (default 3), so each one's runs are spread
# over the whole measurement; printed: each run, and per configuration the median samples/s and the
# spread (min..max); the ratios are of medians.
#   bench/schedules.sh [JOB.yaml] [STEPS] [WORKERS_PER_STAGE] [SLOWDOWN]     REPEATS=N
# Defaults: examples/tiny-lm.yaml, 40 steps, 2 workers a stage, 3x. Emulated slow links between
# regions: bench/network.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
job="${1:-examples/tiny-lm.yaml}"
steps="${2:-40}"
per_stage="${3:-2}"
slow="${4:-3}"
repeats="${REPEATS:-3}"
swarm="${SWARM_BIN:-build/bin/swarm}"
[ -x "$swarm" ] || bash scripts/build.sh >/dev/null
[ "$per_stage" -ge 2 ] || { echo "bench/schedules.sh: WORKERS_PER_STAGE must be >= 2 (a slowed peer beside another)" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
stages=$(sed -n 's/^ *stages: *\([0-9]*\).*/\1/p' "$job" | head -1)
counts=$(python3 -c "print(','.join(['$per_stage'] * ${stages:-2}))")
run() { # NAME ARGS...: a run that fails or ends without a summary is recorded as failed, never skipped
  local name=$1
  shift
  echo "[$(date +%T)] $name: swarm local $job --steps $steps $*" >&2
  if ! timeout 1800 "$swarm" local "$job" --steps "$steps" --summary "$out/$name.json" --log-dir "$out/logs-$name" \
      --no-progress --no-checkpoints "$@" >/dev/null 2>"$out/$name.err"; then
    echo '{"failed": true}' > "$out/$name.json"
  fi
}
for r in $(seq 1 "$repeats"); do
  run "swarm.$r" --workers-per-stage "$counts"
  run "gpipe.$r" --baseline gpipe --workers-per-stage "$counts"
  run "swarm-slow.$r" --workers-per-stage "$counts" --slow-worker "stage0-w1=$slow"
  run "gpipe-slow.$r" --baseline gpipe --workers-per-stage "$counts" --slow-worker "stage0-w1=$slow"
done
python3 - "$out" "$steps" "$counts" "$slow" "$repeats" <<'PY'
import json, statistics, sys
out, steps, counts, slow, repeats = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
names = ("swarm", "gpipe", "swarm-slow", "gpipe-slow")
runs = {n: [json.load(open(f"{out}/{n}.{r}.json")) for r in range(1, repeats + 1)] for n in names}
print(f"{steps} steps each, {repeats} rounds alternating; workers per stage {counts} on both sides; slowed peer stage0-w1 {slow:g}x")
print(f"{'run':>11} {'samples/s (each round)':>34} {'median':>8} {'spread':>15} {'eval loss':>10} {'lost':>5} {'failed':>6}")
med = {}
for n, vs in runs.items():
    ok = [v for v in vs if not v.get("failed")]
    sps = [v["samples_per_second"] for v in ok]
    med[n] = statistics.median(sps) if sps else 0.0
    spread = f"{min(sps):.1f}..{max(sps):.1f}" if sps else "-"
    loss = statistics.median([v["eval_loss"] for v in ok]) if ok else float("nan")
    lost = sum(v.get("microbatches_lost", 0) for v in ok)
    each = " ".join(f"{v['samples_per_second']:.1f}" if not v.get("failed") else "FAILED" for v in vs)
    print(f"{n:>11} {each:>34} {med[n]:>8.1f} {spread:>15} {loss:>10.4f} {lost:>5} {len(vs) - len(ok):>6}")
def ratio(a, b):
    return med[a] / med[b] if med[b] else 0.0
per = int(counts.split(',')[0])
cap = (per - 1 + 1 / slow) / per
print(f"swarm / gpipe, unslowed                 : {ratio('swarm', 'gpipe'):.2f}")
print(f"swarm slowed / swarm                    : {ratio('swarm-slow', 'swarm'):.2f}  (stage 0's capacity: {cap:.2f} x; goal >= 0.6)")
print(f"gpipe slowed / gpipe                    : {ratio('gpipe-slow', 'gpipe'):.2f}  (a step waits for the slow pipeline)")
print(f"swarm slowed / gpipe slowed             : {ratio('swarm-slow', 'gpipe-slow'):.2f}")
PY
