#!/usr/bin/env bash
# Pipeline overhead and learning parity: `swarm local` (2 stages x 1 worker, 1 trainer) against
# `--baseline single-process` on the same cores, same model, same data, same steps — measured side
# by side in one run (the machine is shared and noisy), alternating, REPEATS times each.
# Prints samples/s of both, their ratio (goal >= 0.85) and the relative difference of the
# validation loss after the same steps (goal <= 3%).
#   bench/overhead.sh [JOB.yaml] [STEPS] [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
job="${1:-examples/tiny-lm.yaml}"
steps="${2:-40}"
repeats="${3:-2}"
swarm="${SWARM_BIN:-build/bin/swarm}"
[ -x "$swarm" ] || bash scripts/build.sh >/dev/null
out=$(mktemp -d)
for i in $(seq 1 "$repeats"); do
  "$swarm" local "$job" --steps "$steps" --summary "$out/swarm-$i.json" --no-progress >/dev/null
  "$swarm" local "$job" --steps "$steps" --baseline single-process --summary "$out/single-$i.json" --no-progress >/dev/null
done
python3 - "$out" "$repeats" "$steps" "$job" <<'PY'
import json, sys, statistics
out, n, steps, job = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
load = lambda p: json.load(open(p))
sw = [load(f"{out}/swarm-{i}.json") for i in range(1, n + 1)]
sp = [load(f"{out}/single-{i}.json") for i in range(1, n + 1)]
print(f"job {job}, {steps} steps, {n} runs each (alternating)")
print(f"{'run':>4} {'swarm samples/s':>16} {'single samples/s':>17} {'ratio':>6} {'swarm eval':>11} {'single eval':>12}")
ratios = []
for i, (a, b) in enumerate(zip(sw, sp), 1):
    r = a["samples_per_second"] / b["samples_per_second"]
    ratios.append(r)
    print(f"{i:>4} {a['samples_per_second']:>16.1f} {b['samples_per_second']:>17.1f} {r:>6.3f} {a['eval_loss']:>11.4f} {b['eval_loss']:>12.4f}")
ea = statistics.mean(a["eval_loss"] for a in sw)
eb = statistics.mean(b["eval_loss"] for b in sp)
print(f"throughput ratio swarm/single-process: median {statistics.median(ratios):.3f} (goal >= 0.85)")
print(f"eval loss after {steps} steps: swarm {ea:.4f}, single-process {eb:.4f}, difference {abs(ea - eb) / eb * 100:.2f}% (goal <= 3%)")
print(f"train loss, last global batch: swarm {statistics.mean(a['loss_last'] for a in sw):.4f}, single-process {statistics.mean(b['loss_last'] for b in sp):.4f}")
PY
