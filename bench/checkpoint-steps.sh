#!/usr/bin/env bash
# What checkpoints cost in real steps, and what a restore from disk costs when the file is not in
# the page cache. Prints figures, asserts nothing:
#   1. step time: `swarm local JOB --steps STEPS` with a checkpoint every step against none, REPEATS
#      rounds (default 3) alternating; per side each run's seconds per step (train_seconds / steps),
#      the median and spread (min..max), and the ratio of medians. The writer thread's CPU is in
#      these steps (it shares the machine's cores with the stages).
#   2. restore: `swarm export --from` the last checkpointed run (it reads and authenticates every
#      stage's newest checkpoint, then writes one file) after `echo 3 > /proc/sys/vm/drop_caches`
#      (cold) and right after a read (warm), REPEATS times alternating. Where the page cache cannot
#      be dropped (no root, a read-only /proc/sys), the cold figures say so and are not printed.
#   bench/checkpoint-steps.sh [JOB.yaml] [STEPS]     defaults: examples/tiny-lm.yaml, 30; REPEATS=N
set -euo pipefail
cd "$(dirname "$0")/.."
job="${1:-examples/tiny-lm.yaml}"
steps="${2:-30}"
repeats="${REPEATS:-3}"
swarm="${SWARM_BIN:-build/bin/swarm}"
[ -x "$swarm" ] || bash scripts/build.sh >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() { # NAME ARGS...: a failed run is recorded, never skipped
  local name=$1
  shift
  echo "[$(date +%T)] $name: swarm local $job --steps $steps $*" >&2
  rm -rf "$out/logs-$name"
  if ! timeout 1800 "$swarm" local "$job" --steps "$steps" --summary "$out/$name.json" --log-dir "$out/logs-$name" \
      --no-progress "$@" >/dev/null 2>"$out/$name.err"; then
    echo '{"failed": true}' > "$out/$name.json"
  fi
}
for r in $(seq 1 "$repeats"); do
  run "none.$r" --no-checkpoints
  run "every.$r" --checkpoint-every 1
done
ckpt="$out/logs-every.$repeats/checkpoints"
secret="$out/logs-every.$repeats/job-secret"
restore() { # prints the seconds of one export from the checkpoints
  local t0 t1
  t0=$(date +%s.%N)
  "$swarm" export --job "$job" --from "$ckpt" --secret-file "$secret" --out "$out/export.safetensors" >/dev/null
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f\n", b - a}'
}
cold=() warm=() can_drop=1
if [ -d "$ckpt" ]; then
  for r in $(seq 1 "$repeats"); do
    if sync && echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then cold+=("$(restore)"); else can_drop=0; fi
    warm+=("$(restore)")
  done
fi
python3 - "$out" "$repeats" "$steps" "$can_drop" "${cold[*]:-}" "${warm[*]:-}" "$ckpt" <<'PY'
import json, os, statistics, sys
out, repeats, steps, can_drop = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
cold = [float(x) for x in sys.argv[5].split()]
warm = [float(x) for x in sys.argv[6].split()]
ckpt = sys.argv[7]
def side(name):
    runs = [json.load(open(f"{out}/{name}.{r}.json")) for r in range(1, repeats + 1)]
    per = [r["train_seconds"] / r["steps"] for r in runs if not r.get("failed") and r.get("steps")]
    return per, len(runs) - len(per)
def fmt(xs):
    return " ".join(f"{x:.3f}" for x in xs)
print(f"step time, {steps} steps a run, {repeats} rounds alternating (seconds per step):")
med = {}
for name, label in (("none", "no checkpoints"), ("every", "a checkpoint every step")):
    per, failed = side(name)
    med[name] = statistics.median(per) if per else 0.0
    spread = f"{min(per):.3f}..{max(per):.3f}" if per else "-"
    print(f"  {label:>24}: {fmt(per)}  median {med[name]:.3f} (spread {spread}), failed runs {failed}")
if med["none"]:
    print(f"  with / without          : {med['every'] / med['none']:.3f}")
size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(ckpt) for f in fs) if os.path.isdir(ckpt) else 0
print(f"restore (swarm export --from, every stage's newest checkpoint; {size / 1e6:.1f} MB on disk in all):")
if not warm:
    print("  no checkpoints were written: not measured")
else:
    print(f"  page cache warm : {fmt(warm)}  median {statistics.median(warm):.3f} s")
    if can_drop and cold:
        print(f"  page cache cold : {fmt(cold)}  median {statistics.median(cold):.3f} s (after drop_caches)")
    else:
        print("  page cache cold : not measured: /proc/sys/vm/drop_caches could not be written here")
PY
