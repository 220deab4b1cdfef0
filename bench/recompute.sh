#!/usr/bin/env bash
# What spec.pipeline.recomputeActivations buys and costs: the same job trained by `swarm local`
# with the activations kept (the default) and recomputed, alternating, REPEATS times each, on the
# same cores, model, data and steps. Prints, per run and as medians: samples/s, every worker's
# peak RSS (its VmHWM, from the worker's report in the log folder) and the eval loss. Nothing is
# asserted (tests/local/parity_test.cc asserts the equal losses); a run that fails or hits the
# wall-clock limit is printed as such and counted, never skipped.
#   bench/recompute.sh [JOB.yaml] [STEPS] [REPEATS] [INFLIGHT]
#     default: bench/jobs/pipeline-3stage-h512.yaml 20 3 8 (INFLIGHT: trainers.inflightMicrobatches,
#     the microbatches a stage may hold activations for at once); LIMIT: seconds per run (900)
set -euo pipefail
cd "$(dirname "$0")/.."
job="${1:-bench/jobs/pipeline-3stage-h512.yaml}"
steps="${2:-20}"
repeats="${3:-3}"
inflight="${4:-8}"
limit="${LIMIT:-900}"
swarm="${SWARM_BIN:-build/bin/swarm}"
[ -x "$swarm" ] || bash scripts/build.sh --main >/dev/null
out=$(mktemp -d /tmp/recompute.XXXXXX)
for mode in keep recompute; do
  python3 - "$job" "$out/$mode.yaml" "$mode" "$inflight" <<'PY'
import sys, yaml
src, dst, mode, inflight = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
job = yaml.safe_load(open(src))
job["spec"].setdefault("pipeline", {})["recomputeActivations"] = mode == "recompute"
job["spec"].setdefault("trainers", {})["inflightMicrobatches"] = inflight
yaml.safe_dump(job, open(dst, "w"), sort_keys=False)
PY
done
for i in $(seq 1 "$repeats"); do
  for mode in keep recompute; do
    rc=0
    timeout "$limit" "$swarm" local "$out/$mode.yaml" --steps "$steps" --threads 1 --summary "$out/$mode-$i.json" \
      --log-dir "$out/$mode-$i" --no-progress --no-checkpoints >"$out/$mode-$i.log" 2>&1 || rc=$?
    echo "$rc" >"$out/$mode-$i.rc"
  done
done
python3 - "$out" "$repeats" "$steps" "$job" "$inflight" "$limit" <<'PY'
import glob, json, os, statistics, sys
out, n, steps, job, inflight, limit = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
print(f"job {job}, {steps} steps, {inflight} microbatches in flight, 1 thread a process, {n} runs each (alternating); "
      f"output in {out}")
rows = {"keep": [], "recompute": []}
failed = 0
for i in range(1, n + 1):
    for mode in ("keep", "recompute"):
        rc = int(open(f"{out}/{mode}-{i}.rc").read())
        if rc != 0:
            failed += 1
            why = f"hit the {limit} s limit" if rc == 124 else f"exit {rc}"
            print(f"{mode:>9} run {i}: FAILED ({why}; {out}/{mode}-{i}.log)")
            continue
        s = json.load(open(f"{out}/{mode}-{i}.json"))
        rss = {}
        for p in sorted(glob.glob(f"{out}/{mode}-{i}/*.worker.json")):
            r = json.load(open(p))
            rss.setdefault(r["stage"], []).append(r["peak_rss_bytes"] / 1e6)
        peaks = [max(rss[k]) for k in sorted(rss)]
        rows[mode].append((s["samples_per_second"], peaks, s["eval_loss"]))
        print(f"{mode:>9} run {i}: {s['samples_per_second']:7.2f} samples/s, peak RSS per stage (MB) "
              f"{' / '.join(f'{p:.0f}' for p in peaks)}, eval loss {s['eval_loss']:.4f}")
for mode, r in rows.items():
    if not r:
        continue
    stages = len(r[0][1])
    med = [statistics.median(x[1][k] for x in r) for k in range(stages)]
    print(f"{mode:>9} median: {statistics.median(x[0] for x in r):7.2f} samples/s "
          f"(spread {min(x[0] for x in r):.2f}-{max(x[0] for x in r):.2f}), peak RSS per stage (MB) "
          f"{' / '.join(f'{m:.0f}' for m in med)}, eval loss {statistics.median(x[2] for x in r):.4f}")
if rows["keep"] and rows["recompute"]:
    k = statistics.median(x[0] for x in rows["keep"])
    c = statistics.median(x[0] for x in rows["recompute"])
    print(f"recompute / keep samples/s: {c / k:.3f}")
print(f"failed runs: {failed}")
PY
