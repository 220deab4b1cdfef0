#!/usr/bin/env bash
# Locality-aware routing (issue 33, item 1): the share of microbatch hops that cross regions with
# two regions each holding every stage, without the penalty, with it, and with it under preemption.
# Prints figures and asserts nothing.
#
#   bench/regions-routing.sh [OUTDIR]
#
# One job (bench/jobs/regions-2stage.yaml: 2 stages, 2 trainers), `swarm local --regions a,b
# --workers-per-stage WPS` (worker i of each stage and trainer t in region i / t mod 2), run
# STEPS steps each way:
#   blind     spec.trainers.routing.interRegionPenaltyMs 0: the region-blind router
#   penalty   interRegionPenaltyMs PENALTY_MS (default 50, the spec's default)
#   preempt   the same with --preempt-every PREEMPT --respawn-after 2 --seed SEED (SIGKILL): a
#             killed home peer leaves its trainer one home peer, or none, until a joiner refills it
# Loopback: no emulated WAN, so the round trips measured in the routers' EMAs are equal in both
# regions and the penalty alone keeps picks at home (bench/net/regions.sh emulates the links, root).
# Each run's cross_region_share = cross_region_hops / microbatch_hops from the run's summary
# (trainer -> stage 0 and stage k -> k+1, as the trainers routed their forwards).
#
# With WPS=2,2 each region holds one peer of each stage, so a preemption empties a region's pool of
# that stage until its replacement serves: its trainer fails over abroad meanwhile. WPS=4,4: two each.
# Environment (defaults): STEPS=40 REPEATS=2 PENALTY_MS=50 PREEMPT=8 SEED=7 WPS=2,2
# RUNS="blind penalty preempt" SWARM=build/bin/swarm
set -uo pipefail
cd "$(dirname "$0")/.."
SWARM="${SWARM:-build/bin/swarm}"
OUT="${1:-$(mktemp -d /tmp/regions-routing.XXXXXX)}"
RUNS="${RUNS:-blind penalty preempt}"
WPS="${WPS:-2,2}" STEPS="${STEPS:-40}" REPEATS="${REPEATS:-2}" PENALTY_MS="${PENALTY_MS:-50}" PREEMPT="${PREEMPT:-8}" SEED="${SEED:-7}"
mkdir -p "$OUT"

job_with_penalty() {  # $1 = penalty in ms -> a job file
  local f="$OUT/job-$1.yaml"
  sed "s/interRegionPenaltyMs: [0-9.]*/interRegionPenaltyMs: $1/" bench/jobs/regions-2stage.yaml > "$f"
  echo "$f"
}

run_one() {  # name penalty extra-args...
  local name=$1 penalty=$2; shift 2
  local dir="$OUT/$name-w${WPS/,/-}"
  rm -rf "$dir"; mkdir -p "$dir"
  local cmd=("$SWARM" local "$(job_with_penalty "$penalty")" --regions a,b --workers-per-stage "$WPS"
             --steps "$STEPS" --summary "$dir/summary.json" --log-dir "$dir/logs" --no-progress "$@")
  echo "\$ ${cmd[*]}" >> "$OUT/commands.txt"
  "${cmd[@]}" > "$dir/out.log" 2>&1 || echo "$name: exit $? (see $dir/out.log)"
  python3 - "$name" "$dir/summary.json" <<'PY'
import json, sys
name, path = sys.argv[1], sys.argv[2]
try:
    s = json.load(open(path))
except Exception as e:
    print(f"{name:10s} no summary ({e})"); sys.exit(0)
print(f"{name:10s} cross {s.get('cross_region_hops',0):5d}/{s.get('microbatch_hops',0):5d} hops = "
      f"{100*s.get('cross_region_share',0):5.1f} %   samples/s {s.get('samples_per_second',0):6.1f}   "
      f"steps {s.get('steps',0)}   lost {s.get('microbatches_lost',0)}   retried {s.get('requests_retried',0)}   "
      f"preemptions {s.get('preemptions',0)}   eval_loss {s.get('eval_loss',0):.3f}")
PY
}

for r in $(seq 1 "$REPEATS"); do
  echo "# repeat $r"
  for run in $RUNS; do
    case $run in
      blind) run_one "blind-$r" 0 ;;
      penalty) run_one "penalty$PENALTY_MS-$r" "$PENALTY_MS" ;;
      preempt) run_one "preempt$PENALTY_MS-$r" "$PENALTY_MS" --preempt-every "$PREEMPT" --respawn-after 2 --seed "$SEED" ;;
      *) echo "RUNS: blind, penalty or preempt, not '$run'" >&2; exit 2 ;;
    esac
  done
done
echo "commands: $OUT/commands.txt"
