#!/usr/bin/env bash
# Figures of the whole system on the one-machine cluster (scripts/k8s/cluster.sh), printed, not
# asserted (docs/benchmarks.md):
#   bench/cluster.sh reclaims [N]        N spot reclaims (default 10), one at a time: GKE
#                                        impending-termination taint on a spot node with a worker ->
#                                        replacement worker Running and Ready (its data port serving,
#                                        the readiness probe), p50/p99/max; the taint is lifted after
#                                        each and the swarm settles before the next. Every attempt
#                                        counts: attempts, failures (no spot node with a worker) and
#                                        timeouts (no replacement Ready within 120 s) are printed
#                                        beside the percentiles, a timeout counted at its 120 s in
#                                        them; below 100 samples "p99" is printed as what it is, the
#                                        max
#   bench/cluster.sh churn [MINUTES] [PERIOD] [PAIRS]
#                                        PAIRS (default 3) pairs of windows of MINUTES (default 10)
#                                        each, alternating: undisturbed, then a spot reclaim every
#                                        PERIOD seconds (default 60). Samples/s of a window are the
#                                        registry's optimizer steps (status.step) times the spec's
#                                        global batch over the window; Ready workers are sampled
#                                        every second. Prints each pair's ratio, and the median and
#                                        spread (min..max) of the ratios, raw and capacity-adjusted
#                                        (per Ready worker-second)
#   bench/cluster.sh eval [STEPS] [PERIOD] [PAIRS]
#                                        eval loss at equal steps: the job run to STEPS optimizer
#                                        steps (default 3000) undisturbed, then again from scratch
#                                        with a spot reclaim every PERIOD seconds (default 60); each
#                                        run's eval loss (its trainer's evaluation after the last
#                                        step, from the trainer pod's log) and their ratio; PAIRS
#                                        (default 1) such pairs in turn, compared by their means
# Uses a running cluster (cluster.sh up) with the chart installed, or installs it; runs
# examples/local-cluster.yaml as `bench-lm` and deletes it at the end. Leaves the cluster up.
set -uo pipefail
cd "$(dirname "$0")/.."
SRC=$(pwd)
MODE=${1:-reclaims}
JOB=bench-lm
OPNS=swarm-system
WORKERS=6   # examples/local-cluster.yaml: 3 stages x perStage 2
eval "$(bash scripts/k8s/cluster.sh env)"
export KUBECONFIG
bash scripts/k8s/cluster.sh status >/dev/null 2>&1 || { echo "bench/cluster.sh: no cluster (scripts/k8s/cluster.sh up)" >&2; exit 1; }
HELM=$(bash scripts/k8s/build-helm.sh | tail -n 1)
k() { kubectl "$@"; }
now() { date +%s.%N; }
log() { echo "[bench $(date +%T)] $*" >&2; }
wait_until() { local secs=$1 what=$2; shift 2; local end=$(( $(date +%s) + secs ))
  while [ "$(date +%s)" -lt "$end" ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  log "timed out after ${secs}s: $what"; return 1; }

if ! "$HELM" status swarm-operator -n $OPNS >/dev/null 2>&1; then
  "$HELM" install swarm-operator helm/swarm-operator -n $OPNS --create-namespace \
    --set image.repository=localhost/swarm-operator --set image.tag=dev --set image.pullPolicy=Never \
    --set progress.periodSeconds=2 --wait --timeout 180s >/dev/null
fi
k apply -f examples/local-cluster-checkpoints.yaml >/dev/null
# The job: examples/local-cluster.yaml as $JOB. `eval` stops it at STEPS (maxSteps) with a cosine
# schedule, so both runs end on the same small learning rate (the final model of a constant rate
# moves by more from step to step than the 1 % compared), and evaluates EVAL_BATCHES (default 64)
# validation microbatches instead of the example's 8.
MAXSTEPS=100000
EXTRA=()
if [ "$MODE" = eval ]; then
  MAXSTEPS=${2:-3000}
  EXTRA=(-e "s/^    schedule: {kind: constant, warmupSteps: 5}/    schedule: {kind: cosine, warmupSteps: 5}/"
         -e "s/^    maxSteps: \(.*\)/    maxSteps: \1\n    evalBatches: ${EVAL_BATCHES:-64}/")
fi
apply_job() { sed -e "s/^  name: local-lm$/  name: $JOB/" -e "s/^    maxSteps: 100000 .*/    maxSteps: $MAXSTEPS/" "${EXTRA[@]}" \
  examples/local-cluster.yaml | k apply -f - >/dev/null; }
rm -rf "$(dirname "$KUBECONFIG")/shared/$JOB"   # an earlier run's checkpoints: every run starts afresh
apply_job
trap 'k delete swarmjob $JOB --wait=false >/dev/null 2>&1; for n in $(k get nodes -o name); do k taint "$n" cloud.google.com/impending-node-termination- >/dev/null 2>&1; done' EXIT
status() { k get swarmjob $JOB -o jsonpath="{.status.$1}" 2>/dev/null; }
step_at_least() { local s; s=$(status step); [ -n "$s" ] && [ "${s%.*}" -ge "$1" ]; }
ready_workers() { k get pods -l swarm-operator.io/job=$JOB,swarm-operator.io/role=worker -o jsonpath='{range .items[*]}{.spec.nodeName} {.status.conditions[?(@.type=="Ready")].status} {.metadata.deletionTimestamp}{"\n"}{end}' \
  | awk -v v="${1:-none}" '$1 != v && $2 == "True" && $3 == ""' | wc -l; }
settled() { [ "$(ready_workers)" -ge $WORKERS ] && [ -z "$(k get pods -l swarm-operator.io/job=$JOB -o jsonpath='{.items[?(@.metadata.deletionTimestamp)].metadata.name}')" ]; }
wait_until 300 "first step" step_at_least 1 || exit 1
wait_until 120 "settled" settled || exit 1

RECLAIM_LIMIT=120
reclaim_once() { # prints seconds from the taint to all workers Ready off the node; exit 1: no victim, 2: timed out
  local victim t
  victim=$(k get pods -l swarm-operator.io/job=$JOB,swarm-operator.io/role=worker -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -E 'node-[123]$' | sort | uniq -c | sort -rn | awk 'NR==1{print $2}')
  [ -n "$victim" ] || return 1
  t=$(now)
  k taint node "$victim" cloud.google.com/impending-node-termination=true:NoSchedule >/dev/null
  local end=$(( $(date +%s) + RECLAIM_LIMIT ))
  until [ "$(ready_workers "$victim")" -ge $WORKERS ]; do
    [ "$(date +%s)" -lt "$end" ] || { k taint node "$victim" cloud.google.com/impending-node-termination- >/dev/null; return 2; }
    sleep 0.1
  done
  awk -v a="$t" -v b="$(now)" 'BEGIN{printf "%.2f %s\n", b - a, ""}' | tr -d ' \n'
  echo " $victim"
  python3 tests/cluster/pod_phases.py "$t" swarm-operator.io/job=$JOB,swarm-operator.io/role=worker >&2
  # the node "comes back" (a new spot VM): lift the notice once its old workers are gone
  wait_until 90 "old workers gone" bash -c "[ -z \"\$(kubectl get pods -l swarm-operator.io/job=$JOB --field-selector spec.nodeName=$victim -o name)\" ]"
  k taint node "$victim" cloud.google.com/impending-node-termination- >/dev/null
}

case $MODE in
  reclaims)
    n=${2:-10}
    : > /tmp/bench-cluster-reclaims.txt
    failures=0 timeouts=0
    for i in $(seq 1 "$n"); do
      rc=0; r=$(reclaim_once) || rc=$?
      case $rc in
        0) log "reclaim $i: ${r% *} s (${r#* })"; echo "${r% *}" >> /tmp/bench-cluster-reclaims.txt ;;
        2) log "reclaim $i TIMED OUT: not all $WORKERS workers Ready within ${RECLAIM_LIMIT}s"
           timeouts=$((timeouts + 1)); echo "$RECLAIM_LIMIT" >> /tmp/bench-cluster-reclaims.txt ;;
        *) log "reclaim $i FAILED: no spot node with a worker to reclaim"; failures=$((failures + 1)) ;;
      esac
      wait_until 120 "settled" settled
    done
    # A timeout is in the percentiles at its limit (the replacement took at least that long).
    sort -n /tmp/bench-cluster-reclaims.txt | awk -v n="$n" -v f="$failures" -v to="$timeouts" -v lim="$RECLAIM_LIMIT" '{a[NR]=$1} END{
      printf "reclaim taint -> replacement worker Ready: attempts %d, failures %d, timeouts %d (each counted at %d s)\n", n, f, to, lim;
      if (NR == 0) { print "  no reclaim completed"; exit }
      p50=a[int((NR+1)/2)]; i99=int(NR*0.99+0.999); if(i99<1)i99=1; if(i99>NR)i99=NR;
      if (NR < 100) printf "  n=%d p50 %.2f s max %.2f s (p99 needs 100 samples: below that it is the max)\n", NR, p50, a[NR];
      else printf "  n=%d p50 %.2f s p99 %.2f s max %.2f s\n", NR, p50, a[i99], a[NR]}'
    ;;
  churn)
    mins=${2:-10}; period=${3:-60}; pairs=${4:-3}
    gb=$(k get swarmjob $JOB -o jsonpath='{.spec.training.globalBatch}')
    [ -n "$gb" ] || { echo "bench/cluster.sh: no spec.training.globalBatch on $JOB" >&2; exit 1; }
    measure() { # SECONDS [RECLAIM_PERIOD]: samples/s over the window, mean Ready workers, steps, reclaims
      local secs=$1 per=${2:-0} s0 s1 t0 t1 wsum=0 wn=0 next reclaims=0
      s0=$(status step); t0=$(now); next=$(( $(date +%s) + per ))
      local end=$(( $(date +%s) + secs ))
      while [ "$(date +%s)" -lt "$end" ]; do
        if [ "$per" -gt 0 ] && [ "$(date +%s)" -ge "$next" ]; then
          (reclaim_once >/dev/null 2>&1 &) ; next=$(( next + per )); reclaims=$((reclaims + 1))
        fi
        wsum=$(( wsum + $(ready_workers) )); wn=$(( wn + 1 ))
        sleep 1
      done
      s1=$(status step); t1=$(now)
      awk -v s0="${s0%.*}" -v s1="${s1%.*}" -v t0="$t0" -v t1="$t1" -v ws="$wsum" -v wn="$wn" -v gb="$gb" -v r="$reclaims" \
        'BEGIN{sps=(s1-s0)*gb/(t1-t0); w=ws/wn; printf "%.3f %.3f %d %d\n", sps, w, s1-s0, r}'
    }
    ratios=() adjusted=()
    for i in $(seq 1 "$pairs"); do
      read -r base wb nb _ < <(measure $((mins * 60)))
      log "pair $i undisturbed: $base samples/s, $wb Ready workers on average, $nb steps (global batch $gb)"
      read -r churn wc nc rc < <(measure $((mins * 60)) "$period")
      log "pair $i reclaim every ${period}s ($rc reclaims): $churn samples/s, $wc Ready workers on average, $nc steps"
      ratios+=("$(awk -v b="$base" -v c="$churn" 'BEGIN{printf "%.4f", b > 0 ? c/b : 0}')")
      adjusted+=("$(awk -v b="$base" -v c="$churn" -v wb="$wb" -v wc="$wc" 'BEGIN{printf "%.4f", (b > 0 && wc > 0) ? (c/wc)/(b/wb) : 0}')")
      wait_until 120 "settled" settled
    done
    python3 - "${ratios[*]}" "${adjusted[*]}" "$mins" "$period" <<'PY'
import statistics, sys
r = [float(x) for x in sys.argv[1].split()]
a = [float(x) for x in sys.argv[2].split()]
print(f"churn/undisturbed samples/s, {len(r)} alternated pairs of {sys.argv[3]} min, a reclaim every {sys.argv[4]} s:")
print(f"  raw              : {' '.join(f'{x:.3f}' for x in r)}  median {statistics.median(r):.3f} (spread {min(r):.3f}..{max(r):.3f})")
print(f"  per Ready worker : {' '.join(f'{x:.3f}' for x in a)}  median {statistics.median(a):.3f} (spread {min(a):.3f}..{max(a):.3f})")
PY
    ;;
  eval)
    period=${3:-60}
    trainer_done() { [ "$(k get pods -l swarm-operator.io/job=$JOB,swarm-operator.io/role=trainer -o jsonpath='{.items[*].status.phase}')" = Succeeded ]; }
    eval_loss() { # the mean of the trainers' "eval X" (swarm trainer's last log line)
      k logs -l swarm-operator.io/job=$JOB,swarm-operator.io/role=trainer --tail=50 \
        | sed -n 's/.* eval \([0-9.]*\).*/\1/p' | awk '{s+=$1; n++} END{if(n) printf "%.4f\n", s/n}'; }
    run_to_end() { # PERIOD (0: undisturbed): waits for the trainer to finish, reclaiming every PERIOD s
      local per=$1 next=$(( $(date +%s) + $1 )) end=$(( $(date +%s) + 3600 ))
      until trainer_done; do
        [ "$(date +%s)" -lt "$end" ] || { log "the trainer did not finish within an hour"; return 1; }
        if [ "$per" -gt 0 ] && [ "$(date +%s)" -ge "$next" ]; then
          (reclaim_once >/dev/null 2>&1 &) ; next=$(( next + per ))
        fi
        sleep 2
      done
    }
    restart_job() { # the job deleted and applied again from scratch (its checkpoints gone), settled
      sleep 5   # a reclaim still in flight lifts its notice
      for n in $(k get nodes -o name); do k taint "$n" cloud.google.com/impending-node-termination- >/dev/null 2>&1; done
      k delete swarmjob $JOB --wait=true --timeout=180s >/dev/null
      wait_until 180 "the last run's pods gone" bash -c "[ -z \"\$(kubectl get pods -l swarm-operator.io/job=$JOB -o name)\" ]" || return 1
      rm -rf "$(dirname "$KUBECONFIG")/shared/$JOB"   # the job's folder on the claim: the next run starts afresh
      apply_job
      wait_until 300 "first step" step_at_least 1 || return 1
      wait_until 120 "settled" settled
    }
    one_run() { # PERIOD: prints the run's eval loss
      local t0 loss
      t0=$(now); run_to_end "$1" || return 1
      loss=$(eval_loss)
      log "$( [ "$1" -gt 0 ] && echo "reclaim every ${1}s" || echo undisturbed): $MAXSTEPS steps in $(awk -v a="$t0" -v b="$(now)" 'BEGIN{printf "%.0f", b-a}') s, eval loss $loss"
      echo "$loss"
    }
    # PAIRS pairs, alternating (the machine is shared and noisy; two undisturbed runs differ by more
    # than 1 %: the averaging order is not deterministic), compared by their means.
    pairs=${4:-1}
    bases=() churns=()
    for i in $(seq 1 "$pairs"); do
      [ "$i" -gt 1 ] && { restart_job || exit 1; }
      b=$(one_run 0) || exit 1
      bases+=("$b")
      restart_job || exit 1
      c=$(one_run "$period") || exit 1
      churns+=("$c")
    done
    python3 - "$MAXSTEPS" "$period" "${bases[*]}" "${churns[*]}" <<'PY'
import statistics, sys
n, period = sys.argv[1], sys.argv[2]
b = [float(x) for x in sys.argv[3].split()]
c = [float(x) for x in sys.argv[4].split()]
print(f"eval loss at {n} steps, {len(b)} pair(s):")
print(f"  undisturbed          : {' '.join(f'{x:.4f}' for x in b)}  mean {statistics.mean(b):.4f}")
print(f"  reclaim every {period:>3} s : {' '.join(f'{x:.4f}' for x in c)}  mean {statistics.mean(c):.4f}")
print(f"  ratio of the means   : {statistics.mean(c) / statistics.mean(b):.4f}")
if len(b) > 1:
    print(f"  spread (max/min) of undisturbed {max(b) / min(b):.4f}, of reclaimed {max(c) / min(c):.4f}")
PY
    ;;
  *) echo "usage: bench/cluster.sh reclaims [N] | churn [MINUTES] [PERIOD] [PAIRS] | eval [STEPS] [PERIOD] [PAIRS]" >&2; exit 2 ;;
esac
