#!/usr/bin/env bash
# Elastic swarm benchmark: preemption, loss parity under preemption, and adaptive rebalancing.
# Prints figures and asserts nothing. Runs are measured side by side and alternating (the machine
# is shared and noisy); every figure is given per run, then as median and range.
#
#   bench/elastic.sh [OUTDIR]
#
#   A. Preemption (bench/jobs/elastic-3stage-static.yaml, 2/2/2 workers, rebalancing off): the job
#      trains PREEMPT_SECONDS undisturbed, then again to the same number of optimizer steps with
#      `--preempt-every 20 --respawn-after 5 --seed SEED` (SIGKILL, no notice). Reports samples/s of
#      both, the raw ratio and the ratio adjusted for the capacity actually alive:
#        (sps_preempt / sps_undisturbed) / (mean_serving_workers_preempt / mean_serving_workers_undisturbed)
#      (goal >= 0.85), and the loss after the same number of steps (eval_loss) and at the same
#      number of samples (mean training loss over the last LOSS_WINDOW samples both runs reached,
#      from loss_curve) (goal: within 3%).
#   B. Rebalancing, 4/1/1 start over 3 stages: (i) the best static assignment 2/2/2 (with 6 equal
#      peers every other assignment leaves a stage with one peer, i.e. half the bottleneck
#      capacity), (ii) 4/1/1 with rebalancing (bench/jobs/elastic-3stage.yaml: periodSeconds 10,
#      cooldownSeconds 30), (iii) 4/1/1 without. Throughput in the window from two rebalance
#      periods after training began to its end, from the summary's `progress` series
#      (goal: (ii) >= 0.95 x (i)).
#   C. Rebalancing, one peer slowed 3x more than the others, 7 peers: (i) best static 3/2/2 with the
#      slow peer on the 3-peer stage (stage capacities 2.33/2/2 peers' worth), (ii) 3/2/2 with the
#      slow peer on stage 1 (3/1.33/2) with rebalancing (one move 0 -> 1 gives 2/2.33/2),
#      (iii) the same without. Same window.
#
# Emulated machines: on a 2-core machine every worker process shares the same cores, so a stage's
# capacity is not proportional to its number of peers (4/1/1 runs about as fast as 2/2/2 unslowed:
# the cores, not the peers, are the bottleneck). Every worker, respawned joiners included, is
# therefore slowed SLOW times (`--slow-worker NAME=SLOW`: it sleeps SLOW-1 times each request's
# compute time), so that each peer behaves as a machine of its own and the cores are not saturated
# by the swarm. SLOW=1 turns this off.
#
# Environment (defaults): SLOW=4 REPEATS=2 (rebalancing triples) PREEMPT_REPEATS=1
# PREEMPT_SECONDS=110 SEED=7 REBAL_SECONDS=50 SLOWPEER=1 (0 skips part C) SLOWPEER_REPEATS=2
# LOSS_WINDOW=640 SWARM=build-lead/bin/swarm (else build/bin/swarm). About 16 minutes on 2 cores.
set -uo pipefail
cd "$(dirname "$0")/.."
SWARM="${SWARM:-build-lead/bin/swarm}"
[ -x "$SWARM" ] || SWARM=build/bin/swarm
SLOW="${SLOW:-4}"
REPEATS="${REPEATS:-2}"
PREEMPT_REPEATS="${PREEMPT_REPEATS:-1}"
PREEMPT_SECONDS="${PREEMPT_SECONDS:-110}"
SEED="${SEED:-7}"
REBAL_SECONDS="${REBAL_SECONDS:-50}"
SLOWPEER="${SLOWPEER:-1}"
SLOWPEER_REPEATS="${SLOWPEER_REPEATS:-2}"
LOSS_WINDOW="${LOSS_WINDOW:-640}"
out="${1:-$(mktemp -d /tmp/swarm-elastic.XXXXXX)}"
mkdir -p "$out"
static=bench/jobs/elastic-3stage-static.yaml
rebal=bench/jobs/elastic-3stage.yaml
period=$(sed -n 's/^ *periodSeconds: *\([0-9.]*\).*/\1/p' "$rebal")
began=$(date +%s)

# --slow-worker arguments: every possible worker name at SLOW, NAME=FACTOR overrides from "$@".
slow_args() {
  python3 - "$SLOW" "$@" <<'PY'
import sys
base = float(sys.argv[1]); f = {}
for s in range(3):
    for i in range(6): f[f"stage{s}-w{i}"] = base
for i in range(40): f[f"joiner{i}"] = base
for o in sys.argv[2:]:
    k, v = o.split("="); f[k] = float(v)
print(" ".join(f"--slow-worker {k}={v:g}" for k, v in f.items() if v > 1))
PY
}

# run NAME TIMEOUT ARGS...: one `swarm local`, summary in $out/NAME.json, logs in $out/NAME/.
run() {
  local name="$1" limit="$2"; shift 2
  local t0=$(date +%s)
  timeout -s INT -k 30 "$limit" "$SWARM" local "$@" --summary "$out/$name.json" --log-dir "$out/$name" \
    --no-progress >"$out/$name.out" 2>&1
  local rc=$?
  cut -d' ' -f1 /proc/loadavg >"$out/$name.load"
  echo "  $name: rc $rc, $(($(date +%s) - t0)) s wall, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  [ $rc -eq 0 ] || tail -5 "$out/$name.out" >&2
}

echo "swarm elastic benchmark: $(nproc) cores, SLOW=$SLOW, output in $out" >&2
# A. Preemption and loss parity (undisturbed and preempted alternate). The undisturbed run trains
# for PREEMPT_SECONDS; the preempted one then trains to the same number of optimizer steps, so both
# losses are taken after the same steps, and the preempted run lasts long enough for
# PREEMPT_SECONDS/20 preemptions or more whatever the machine's load.
for i in $(seq 1 "$PREEMPT_REPEATS"); do
  run "calm-$i" 900 "$static" --workers-per-stage 2,2,2 --max-seconds "$PREEMPT_SECONDS" $(slow_args)
  steps=$(python3 -c "import json; print(max(1, json.load(open('$out/calm-$i.json'))['steps']))" 2>/dev/null || echo 30)
  run "preempt-$i" 900 "$static" --workers-per-stage 2,2,2 --steps "$steps" \
    --preempt-every 20 --respawn-after 5 --seed "$SEED" $(slow_args)
done
# B. 4/1/1 start: best static, rebalancing on, rebalancing off; the order rotates every repeat.
kinds=(best rebal norebal)
for i in $(seq 1 "$REPEATS"); do
  for k in 0 1 2; do
    case "${kinds[$(((k + i - 1) % 3))]}" in
      best) run "b-best-$i" 300 "$static" --workers-per-stage 2,2,2 --max-seconds "$REBAL_SECONDS" $(slow_args) ;;
      rebal) run "b-rebal-$i" 300 "$rebal" --workers-per-stage 4,1,1 --max-seconds "$REBAL_SECONDS" $(slow_args) ;;
      norebal) run "b-norebal-$i" 300 "$static" --workers-per-stage 4,1,1 --max-seconds "$REBAL_SECONDS" $(slow_args) ;;
    esac
  done
done
# C. One peer slowed 3x (relative to the others), 7 peers; the order rotates every repeat.
if [ "$SLOWPEER" = 1 ]; then
  x3=$(python3 -c "print($SLOW * 3)")
  for i in $(seq 1 "$SLOWPEER_REPEATS"); do
    for k in 0 1 2; do
      case "${kinds[$(((k + i - 1) % 3))]}" in
        best) run "c-best-$i" 300 "$static" --workers-per-stage 3,2,2 --max-seconds "$REBAL_SECONDS" $(slow_args "stage0-w0=$x3") ;;
        rebal) run "c-rebal-$i" 300 "$rebal" --workers-per-stage 3,2,2 --max-seconds "$REBAL_SECONDS" $(slow_args "stage1-w0=$x3") ;;
        norebal) run "c-norebal-$i" 300 "$static" --workers-per-stage 3,2,2 --max-seconds "$REBAL_SECONDS" $(slow_args "stage1-w0=$x3") ;;
      esac
    done
  done
fi

python3 - "$out" "$PREEMPT_REPEATS" "$REPEATS" "$SLOWPEER" "$period" "$PREEMPT_SECONDS" "$LOSS_WINDOW" "$SLOW" "$SLOWPEER_REPEATS" \
  "$SWARM" <<'PY'
import json, os, re, statistics, sys, time
out, np_, nb, slowpeer, period, secs, lw, slow, nc, swarm = sys.argv[1:11]
nc = int(nc)
np_, nb, period, lw = int(np_), int(nb), float(period), int(lw)

def load(name):
    try:
        return json.load(open(f"{out}/{name}.json"))
    except Exception:
        return None

def med(xs):
    xs = [x for x in xs if x == x]
    if not xs: return "n/a"
    return f"{statistics.median(xs):.3f} [{min(xs):.3f}..{max(xs):.3f}]" if len(xs) > 1 else f"{xs[0]:.3f}"

def window_rate(d, start):
    """samples/s from the first progress point at or after `start` s to the last one."""
    pts = [p for p in d.get("progress", []) if p[0] >= start]
    if len(pts) < 2 or pts[-1][0] <= pts[0][0]: return float("nan")
    return (pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0])

def tail_loss(d, upto, width):
    """mean training loss of the loss_curve points with samples in (upto - width, upto]."""
    xs = [l for s, l in d.get("loss_curve", []) if max(0, upto - width) < s <= upto]
    return statistics.mean(xs) if xs else float("nan")

def moves(name):
    try:
        lines = open(f"{out}/{name}/registry.log").read().splitlines()
    except OSError:
        return []
    return [re.sub(r" \(bottleneck.*", "", l.split("rebalance: ", 1)[1]) for l in lines if "rebalance: " in l]

def first_drain(name):
    """time (HH:MM:SS.mmm) of the first worker's "draining" line: the end of training."""
    ts = []
    for f in os.listdir(f"{out}/{name}") if os.path.isdir(f"{out}/{name}") else []:
        if f.endswith(".log") and f not in ("registry.log", "trainer0.log"):
            for l in open(f"{out}/{name}/{f}", errors="replace"):
                if "draining" in l: ts.append(l[12:24]); break
    return min(ts) if ts else "99"

def moves_marked(name):
    end = first_drain(name)
    try:
        lines = open(f"{out}/{name}/registry.log").read().splitlines()
    except OSError:
        return []
    res = []
    for l in lines:
        if "rebalance: " not in l: continue
        m = re.sub(r" \(bottleneck.*", "", l.split("rebalance: ", 1)[1]).replace(" stage ", " ")
        res.append(m + (" [after training ended]" if l[12:24] >= end else ""))
    return res

def preempt_trace(name):
    """'killed stage2-w0 (stage 2) -> joiner0 joined stage 0; ...' from the logs."""
    d = f"{out}/{name}"
    stage_of = {}
    try:
        for f in sorted(os.listdir(d)):
            if f.endswith(".log") and (f.startswith("stage") or f.startswith("joiner")):
                for l in open(f"{d}/{f}", errors="replace"):
                    m = re.search(r"serving stage (\d+) from step", l)
                    if m: stage_of.setdefault(f[:-4], []).append(m.group(1))
        ev = []
        for l in open(f"{d}/../{name}.out", errors="replace"):
            m = re.search(r"preempting worker (\S+)", l)
            if m: ev.append((l[12:24], f"killed {m.group(1)} (stage {'/'.join(stage_of.get(m.group(1), ['?']))})"))
        for f in os.listdir(d):
            if f.startswith("joiner") and f.endswith(".log"):
                for l in open(f"{d}/{f}", errors="replace"):
                    m = re.search(r"serving stage (\d+) from step", l)
                    if m: ev.append((l[12:24], f"{f[:-4]} joined stage {m.group(1)}")); break
        return "; ".join(e for _, e in sorted(ev))
    except OSError:
        return ""

def killed(name):
    try:
        return open(f"{out}/{name}.out").read().count("did not stop within")
    except OSError:
        return 0

print(f"\nswarm elastic benchmark ({os.cpu_count()} cores, every worker slowed {slow}x to emulate one machine each;")
print(f"  {swarm} built {time.strftime('%Y-%m-%d %H:%M', time.localtime(os.path.getmtime(swarm)))}; "
      f"load = 1-min load average at the end of each run)")

def load_avg(name):
    try:
        return float(open(f"{out}/{name}.load").read())
    except (OSError, ValueError):
        return float("nan")
print(f"\nA. preemption every 20 s, respawn after 5 s; 2/2/2 workers, rebalancing off;")
print(f"   undisturbed run {secs} s, the preempted one to the same number of steps")
print(f"{'run':<11}{'samples/s':>10}{'serving':>9}{'preempt':>8}{'lost':>6}{'empty s':>8}{'restores':>9}{'eval':>8}{'wall s':>8}{'load':>6}")
raw, adj, ev, tl = [], [], [], []
for i in range(1, np_ + 1):
    c, p = load(f"calm-{i}"), load(f"preempt-{i}")
    for n, d in ((f"calm-{i}", c), (f"preempt-{i}", p)):
        if d: print(f"{n:<11}{d['samples_per_second']:>10.1f}{d['mean_serving_workers']:>9.2f}{d['preemptions']:>8}"
                    f"{d['samples_lost']:>6}{d['stage_empty_seconds']:>8.1f}{d['checkpoint_restores']:>9}"
                    f"{d['eval_loss']:>8.4f}{d['wall_seconds']:>8.1f}{load_avg(n):>6.1f}")
        else: print(f"{n:<11} failed (see {out}/{n}.out)")
    if not (c and p): continue
    r = p["samples_per_second"] / c["samples_per_second"]
    raw.append(r)
    adj.append(r / (p["mean_serving_workers"] / c["mean_serving_workers"]))
    ev.append(abs(p["eval_loss"] - c["eval_loss"]) / c["eval_loss"] * 100)
    upto = min(c["samples"], p["samples"])
    lc, lp = tail_loss(c, upto, lw), tail_loss(p, upto, lw)
    tl.append(abs(lp - lc) / lc * 100)
    print(f"  pair {i} preemptions: {preempt_trace(f'preempt-{i}')}; final peers {p['peers_per_stage']}")
    print(f"  pair {i}: steps {c['steps']}/{p['steps']}, samples {c['samples']}/{p['samples']}; train loss over samples "
          f"({max(0, upto - lw)}, {upto}]: calm {lc:.4f}, preempted {lp:.4f}")
print(f"samples/s preempted/undisturbed, raw:               {med(raw)}")
print(f"  adjusted for serving workers (goal >= 0.85):      {med(adj)}")
print(f"eval loss after the same steps, |difference| % (goal <= 3): {med(ev)}")
print(f"train loss at equal samples, |difference| % (goal <= 3): {med(tl)}")

def triple(tag, title, n):
    print(f"\n{title}")
    print(f"throughput = samples/s from {2 * period:g} s (two rebalance periods) after training began to its end")
    print(f"{'run':<13}{'window s/s':>11}{'whole s/s':>10}{'final peers':>12}{'moves':>6}{'eval':>8}{'load':>6}  moves (registry.log)")
    ratios, ratios_off, rates = [], [], {"best": [], "rebal": [], "norebal": []}
    for i in range(1, n + 1):
        row = {}
        for kind in ("best", "rebal", "norebal"):
            name = f"{tag}-{kind}-{i}"
            d = load(name)
            if not d:
                print(f"{name:<13} failed (see {out}/{name}.out)"); continue
            w = window_rate(d, 2 * period)
            row[kind] = w
            rates[kind].append(w)
            mv = moves_marked(name)
            extra = f"; killed at exit: {killed(name)}" if killed(name) else ""
            print(f"{name:<13}{w:>11.1f}{d['samples_per_second']:>10.1f}{str(d['peers_per_stage']):>12}"
                  f"{d['rebalance_moves']:>6}{d['eval_loss']:>8.4f}{load_avg(name):>6.1f}  {'; '.join(mv) or '-'}{extra}")
        if "best" in row and "rebal" in row: ratios.append(row["rebal"] / row["best"])
        if "best" in row and "norebal" in row: ratios_off.append(row["norebal"] / row["best"])
    print(f"rebalanced / best static (goal >= 0.95): {med(ratios)}")
    print(f"not rebalanced / best static:            {med(ratios_off)}")
    if n > 1 and all(rates.values()):
        m = {k: statistics.median(v) for k, v in rates.items()}
        print(f"medians of the window rates: best {m['best']:.1f}, rebalanced {m['rebal']:.1f} ({m['rebal'] / m['best']:.3f}), "
              f"not rebalanced {m['norebal']:.1f} ({m['norebal'] / m['best']:.3f})")

triple("b", "B. imbalanced start 4/1/1 (best static 2/2/2)", nb)
if slowpeer == "1":
    triple("c", "C. one peer slowed 3x, 3/2/2 with the slow peer on stage 1 (best static: slow peer on stage 0)", nc)
PY
echo "total $(($(date +%s) - began)) s; runs, logs and summaries in $out" >&2
