#!/usr/bin/env bash
# Learning parity and bytes of the wire compressions: `swarm local` on the same job, the same steps
# and the same workers per stage with spec.pipeline.compression and spec.averaging.compression both
# set to each of none, fp16 and blockwise8 (a copy of the job with only those two lines changed),
# alternating, REPEATS times each (the machine is shared and noisy). Prints, per setting, the eval
# loss after the same steps, its difference to none (goal for blockwise8: within 1 %), the pipeline's
# wire bytes per sample and their ratio to none (goal for blockwise8: <= 0.27), and samples/s.
#   bench/compression.sh [JOB.yaml] [STEPS] [REPEATS] [WORKERS_PER_STAGE]
# Defaults: examples/tiny-lm.yaml, 300 steps, 1 repeat, 2 workers a stage (so averaging compresses too).
set -euo pipefail
cd "$(dirname "$0")/.."
job="${1:-examples/tiny-lm.yaml}"
steps="${2:-300}"
repeats="${3:-1}"
per_stage="${4:-2}"
swarm="${SWARM_BIN:-build/bin/swarm}"
[ -x "$swarm" ] || bash scripts/build.sh >/dev/null
python3 -c 'import yaml' 2>/dev/null || apt-get install -y -qq python3-yaml >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
stages=$(python3 -c 'import sys,yaml; print(yaml.safe_load(open(sys.argv[1]))["spec"].get("pipeline",{}).get("stages",2))' "$job" 2>/dev/null || echo 2)
counts=$(python3 -c "print(','.join(['$per_stage'] * $stages))")
for c in none fp16 blockwise8; do
  python3 - "$job" "$c" "$out/job-$c.yaml" <<'PY'
import sys, yaml
job, c, dst = sys.argv[1:]
doc = yaml.safe_load(open(job))
spec = doc.setdefault("spec", {})
spec.setdefault("pipeline", {})["compression"] = c
spec.setdefault("averaging", {})["compression"] = c
yaml.safe_dump(doc, open(dst, "w"), sort_keys=False)
PY
done
for i in $(seq 1 "$repeats"); do
  for c in none fp16 blockwise8; do
    echo "run $i: $c ($steps steps, workers per stage $counts)" >&2
    "$swarm" local "$out/job-$c.yaml" --steps "$steps" --workers-per-stage "$counts" \
      --summary "$out/$c-$i.json" --log-dir "$out/logs-$c-$i" --no-progress >/dev/null
  done
done
python3 - "$out" "$repeats" "$steps" "$job" "$counts" <<'PY'
import json, sys, statistics
out, n, steps, job, counts = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
runs = {c: [json.load(open(f"{out}/{c}-{i}.json")) for i in range(1, n + 1)] for c in ("none", "fp16", "blockwise8")}
mean = lambda c, k: statistics.mean(r[k] for r in runs[c])
print(f"job {job}, {steps} steps, workers per stage {counts}, {n} run(s) of each, alternating")
print(f"{'compression':>12} {'eval loss':>10} {'vs none':>8} {'bytes/sample':>13} {'vs none':>8} {'samples/s':>10}   eval loss per run")
for c in runs:
    e, b = mean(c, "eval_loss"), mean(c, "wire_bytes_per_sample")
    de = (e - mean("none", "eval_loss")) / mean("none", "eval_loss") * 100
    rb = b / mean("none", "wire_bytes_per_sample")
    per_run = " ".join(f"{r['eval_loss']:.4f}" for r in runs[c])
    print(f"{c:>12} {e:>10.4f} {de:>+7.2f}% {b:>13.0f} {rb:>8.3f} {mean(c, 'samples_per_second'):>10.1f}   {per_run}")
print("goals (blockwise8): eval loss within 1 % of none; bytes/sample <= 0.27 x none")
PY
