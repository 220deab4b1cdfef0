#!/usr/bin/env bash
# SWARM against the synchronous GPipe baseline on emulated regions (root only), in one run:
#   1. table: {swarm, gpipe} x {loopback, 1 Gbit/s 0.5 ms, 100 Mbit/s 25 ms between regions} x
#      {none, blockwise8} (spec.pipeline and spec.averaging compression both), then at 100 Mbit/s
#      25 ms with blockwise8 one peer slowed SLOWDOWN x (stage0-w1 on both sides);
#   2. square-cube sweep at 100 Mbit/s 25 ms: hidden size 128..1024 (heads = hidden / 64), swarm and
#      gpipe, the fraction of each stage's time that it computes vs. waits (summary JSON:
#      stage_compute_seconds, stage_wait_seconds).
# Regions (bench/net/regions.sh): region a holds the trainers and stage 0's workers, region b the
# other stages' workers; inside a region 1 Gbit/s 0.5 ms. Every link is emulated by the kernel
# (tc tbf) and Toxiproxy, and checked with iperf3 and a latency probe before anything is measured.
# Both sides have the same workers: swarm WORKERS_PER_STAGE a stage with stochastic wiring, gpipe
# WORKERS_PER_STAGE fixed pipelines (data-parallel GPipe). Each configuration runs REPEATS times
# (default 3), swarm and gpipe alternating; the tables print medians and spreads (min..max).
# Prints the tables, writes docs/network-table.png and docs/network-sweep.png (matplotlib, installed
# from PyPI into a cached virtual environment), and keeps the summaries in $OUT (default a temp dir).
#   bench/network.sh [JOB.yaml] [STEPS] [SWEEP_STEPS] [WORKERS_PER_STAGE] [SLOWDOWN]
# Defaults: examples/tiny-lm.yaml, 20 steps, 3 sweep steps at hidden 1024 (x 1024 / hidden at the
# smaller sizes), 2 workers a stage (swarm), 3x.
set -euo pipefail
cd "$(dirname "$0")/.."
job="${1:-examples/tiny-lm.yaml}"
steps="${2:-20}"
sweep_steps="${3:-3}"
per_stage="${4:-2}"
slow="${5:-3}"
swarm="${SWARM_BIN:-build/bin/swarm}"
[ "$(id -u)" = 0 ] || { echo "bench/network.sh: needs root (network namespaces)" >&2; exit 1; }
[ -x "$swarm" ] || bash scripts/build.sh >/dev/null
python3 -c 'import yaml' 2>/dev/null || apt-get install -y -qq python3-yaml >/dev/null
venv=${SWARM_TOOLS_CACHE:-$HOME/.cache/swarm-operator/tools}/plot-venv
if ! "$venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
  echo "installing matplotlib from PyPI into $venv" >&2
  python3 -m venv "$venv" && "$venv/bin/pip" install -q matplotlib >&2
fi
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
regions=bench/net/regions.sh
trap 'bash "$regions" down' EXIT
trap 'exit 130' INT TERM
bash "$regions" down

# Job copies: compression, and the sweep's hidden sizes.
variant() { # DST COMPRESSION [HIDDEN]
  python3 - "$job" "$@" <<'PY'
import sys, yaml
job, dst, c = sys.argv[1:4]
doc = yaml.safe_load(open(job))
spec = doc["spec"]
spec.setdefault("pipeline", {})["compression"] = c
spec.setdefault("averaging", {})["compression"] = c
if len(sys.argv) > 4:
    h = int(sys.argv[4])
    spec["model"]["hiddenSize"] = h
    spec["model"]["numHeads"] = max(1, h // 64)
yaml.safe_dump(doc, open(dst, "w"), sort_keys=False)
PY
}
for c in none blockwise8; do variant "$out/job-$c.yaml" "$c"; done
sweep=(128 256 512 1024)
for h in "${sweep[@]}"; do variant "$out/job-h$h.yaml" none "$h"; done

stages=$(python3 -c 'import sys,yaml; print(yaml.safe_load(open(sys.argv[1]))["spec"]["pipeline"]["stages"])' "$job")
trainers=$(python3 -c 'import sys,yaml; print(yaml.safe_load(open(sys.argv[1]))["spec"].get("trainers",{}).get("count",1))' "$job")
counts=$(python3 -c "print(','.join(['$per_stage'] * $stages))")
a="a="
b="b="
for t in $(seq 0 $((trainers - 1))); do a+="trainer$t,"; done
for w in $(seq 0 $((per_stage - 1))); do a+="stage0-w$w,"; done
for s in $(seq 1 $((stages - 1))); do for w in $(seq 0 $((per_stage - 1))); do b+="stage$s-w$w,"; done; done
a=${a%,}
b=${b%,}

repeats=${REPEATS:-3}
run() { # NAME NETWORK JOB STEPS ARGS...: REPEATS runs NAME.1.. ; one that fails is recorded, never skipped
  local name=$1 net=$2 j=$3 n=$4
  shift 4
  local wrap=()
  [ "$net" != loopback ] && wrap=(--child-wrapper bench/net/enter.sh --registry-host 10.78.0.1)
  echo "[$(date +%T)] $name: swarm local $(basename "$j") --steps $n $*" >&2
  if ! timeout 1800 "$swarm" local "$j" --steps "$n" --summary "$out/$name.json" --log-dir "$out/logs-$name" --no-progress \
      --no-checkpoints "${wrap[@]}" "$@" >/dev/null 2>"$out/$name.err"; then
    echo '{"failed": true}' > "$out/$name.json"
  fi
}
pair() { # NAME-SUFFIX NETWORK JOB STEPS [SWARM-SLOW GPIPE-SLOW]: swarm and gpipe alternating, REPEATS rounds
  local sfx=$1 net=$2 j=$3 n=$4
  for r in $(seq 1 "$repeats"); do
    run "swarm-$sfx.$r" "$net" "$j" "$n" --workers-per-stage "$counts" ${5:+"$5"} ${6:+"$6"}
    run "gpipe-$sfx.$r" "$net" "$j" "$n" --baseline gpipe --workers-per-stage "$counts" ${5:+"$5"} ${6:+"$6"}
  done
}
table_runs() { # NETWORK
  for c in none blockwise8; do pair "$1-$c" "$1" "$out/job-$c.yaml" "$steps"; done
}

table_runs loopback
bash "$regions" up --region "$a" --region "$b" --intra 1gbit:0.5 --inter 1gbit:0.5
bash "$regions" check | tee "$out/check-lan.txt"
table_runs lan
bash "$regions" down
bash "$regions" up --region "$a" --region "$b" --intra 1gbit:0.5 --inter 100mbit:25
bash "$regions" check | tee "$out/check-wan.txt"
table_runs wan
pair wan-blockwise8-slow wan "$out/job-blockwise8.yaml" "$steps" --slow-worker "stage0-w1=$slow"
for h in "${sweep[@]}"; do
  n=$((sweep_steps * 1024 / h))   # about the same time for each size: compute grows faster than h
  pair "h$h" wan "$out/job-h$h.yaml" "$n"
done
bash "$regions" down

"$venv/bin/python" bench/net/network_report.py "$out" "$steps" "$sweep_steps" "$counts" "$slow" "${sweep[*]}" docs "$repeats"
echo "summaries and logs: $out" >&2
