#!/usr/bin/env bash
# The whole system on real Kubernetes nodes (ctest label `cluster`): scripts/k8s/cluster.sh up (real
# etcd, API server, controller-manager, scheduler, kubelets + containerd + runc, CNI, kube-proxy,
# CoreDNS), the chart installed with real helm (operator in its pods, in-cluster config, leader
# election), examples/local-cluster.yaml (3 stages over the spot and on-demand pools), then:
#   pods Running in containers from the project's images; status.step rises, status.loss falls
#   Prometheus (kubernetes_sd_configs) scrapes operator, registry, workers, trainer; every dashboard
#     panel's query returns data
#   GKE impending-termination taint on the spot node with most workers: its workers are deleted
#     gracefully (SIGTERM: they drain and hand off), replacements Running elsewhere (overflowing to
#     europe-west4 when us-central1 is full), training goes on with no unaveraged step
#   a node killed outright (kubelet + containerd stopped, containers killed): NotReady, replacements
#     run, the lost peers/samples are counted by the registry
#   every worker of stage 1 force-deleted: the stage is served again from its newest checkpoint
#     within 20 s (printed with where the time goes)
#   the step invariant (`swarm step-check`): every stage's step is the trainer's completed global
#     batches, or differs by what the registry's counters account for (tests/cluster/step_check.sh)
#   the leading operator pod deleted: the other replica takes the Lease, nothing is duplicated
#   the registry pod deleted: it comes back and the step keeps rising
#   the API server stopped for 3 s and started again: status.step moves again within seconds
#     (goal 10 s, printed; fails past 60 s)
#   kubectl delete swarmjob: every object of the job is gone but its Secret (kept for its
#     checkpoints); applied again under its name, the job resumes from them; applied once more
#     without that Secret, it starts afresh beside the old files, never removing them, and says so
#     once (condition ForeignCheckpoints naming the folder, a Warning Event)
#   a job checkpointing to MinIO (s3://, credentials from a Secret): trainer 0 exports the model to
#     the bucket at the end and status.exportedModel names it (tests/cluster/s3_phase.sh)
#   Kueue v0.17.0 in the cluster (scripts/k8s/kueue.sh: its release's Deployment from an image,
#     installed before the chart; the operator with kueue.enabled): a low-priority job borrows and
#     trains, a high one reclaims the quota, low drains and checkpoints before its quota goes, high
#     finishes, low is admitted again and resumes at its step (tests/cluster/kueue_phase.sh)
# The cluster is torn down at the end, also on failure, and nothing may be left behind
# (cluster.sh leftovers). Prints FIGURE lines (bench/cluster.sh collects them).
#   cluster_e2e_test.sh SOURCE_DIR [BUILD_DIR]
set -uo pipefail
SRC=$(cd "${1:?usage: cluster_e2e_test.sh SOURCE_DIR [BUILD_DIR]}" && pwd)
BUILD=$(cd "${2:-$SRC/build}" && pwd)
WORKERS=6   # examples/local-cluster.yaml: 3 stages x perStage 2
CL="$SRC/scripts/k8s/cluster.sh"
JOB=local-lm
NS=default
OPNS=swarm-system
OUT=$(mktemp -d /tmp/swarm-cluster-e2e.XXXXXX)
T0=$(date +%s)

log() { echo "[e2e $(date +%T) +$(( $(date +%s) - T0 ))s] $*"; }
FAILED=""
fail() { FAILED="FAIL: $* (at +$(( $(date +%s) - T0 ))s)"; echo "$FAILED"; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.2f", b - a}'; }
k() { kubectl "$@"; }
# wait_until SECONDS DESCRIPTION COMMAND...: polls COMMAND every 0.5 s
wait_until() {
  local secs=$1 what=$2; shift 2
  local end=$(( $(date +%s) + secs ))
  while [ "$(date +%s)" -lt "$end" ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
  fail "timed out after ${secs}s: $what"
}

diagnostics() {
  echo "---- diagnostics ----"
  k get nodes -o wide 2>&1
  k get pods -A -o wide 2>&1
  k get swarmjob $JOB -o yaml 2>&1 | sed -n '/^status:/,$p' | head -80
  k get events -A --sort-by=.lastTimestamp 2>&1 | tail -40
  for p in $(k -n $OPNS get pods -o name 2>/dev/null); do echo "-- $p"; k -n $OPNS logs "$p" --tail 30 2>&1; done
  for p in $(k get pods -l swarm-operator.io/job=$JOB -o name 2>/dev/null); do echo "-- $p"; k logs "$p" --tail 15 2>&1; done
  echo "-- Kueue"; k get workloads.kueue.x-k8s.io,clusterqueues.kueue.x-k8s.io -A -o wide 2>&1
  k -n kueue-system logs deploy/kueue-controller-manager --tail 30 2>&1
}
all_logs() {
  for p in $(k -n $OPNS get pods -o name 2>/dev/null); do echo "-- $p"; k -n $OPNS logs "$p" --tail=-1 2>&1; done
  for p in $(k get pods -A -l swarm-operator.io/job -o name 2>/dev/null); do echo "-- $p"; k logs "$p" --tail=-1 2>&1; done
  echo "-- events"; k get events -A --sort-by=.lastTimestamp 2>&1
}
cleanup() {
  local rc=$?
  trap - EXIT
  kill $(jobs -p) 2>/dev/null
  # Kept after the run (the folder $OUT goes): the whole of each pod's log, for a failure seen in CI.
  [ "$rc" -eq 0 ] || { diagnostics 2>&1 | tee /tmp/swarm-cluster-e2e-diagnostics.log; all_logs > /tmp/swarm-cluster-e2e-logs.txt 2>&1; }
  log "tearing down"
  bash "$CL" down || rc=1
  local left
  if ! left=$(bash "$CL" leftovers); then echo "FAIL: cluster.sh down left behind:"; echo "$left"; rc=1; fi
  log "total $(( $(date +%s) - T0 )) s (FIGURE e2e_total_seconds $(( $(date +%s) - T0 )))"
  # Said again last: the diagnostics above are long, and a log cut to its tail must still say why.
  [ -z "$FAILED" ] || echo "$FAILED"
  rm -rf "$OUT"
  exit $rc
}

if bash "$CL" status >/dev/null 2>&1; then
  echo "FAIL: a cluster is already up (scripts/k8s/cluster.sh down first; this test makes and removes its own)"; exit 1
fi
trap cleanup EXIT

# ---- the images of this build, then the cluster ----
t=$(now)
bash "$SRC/scripts/build-images.sh" --prebuilt "$BUILD/bin" >/dev/null || fail "scripts/build-images.sh --prebuilt $BUILD/bin"
log "FIGURE images_seconds $(since "$t")"
t=$(now)
bash "$CL" up || fail "cluster.sh up"
log "FIGURE cluster_up_seconds $(since "$t")"
eval "$(bash "$CL" env)"
export KUBECONFIG
t=$(now)
bash "$CL" up >/dev/null || fail "cluster.sh up (second time: must be idempotent)"
log "second up (idempotent) in $(since "$t") s"
[ "$(k get nodes --no-headers | wc -l)" = 4 ] || fail "expected 4 nodes"
[ "$(k get nodes -l cloud.google.com/gke-spot=true,topology.kubernetes.io/region=us-central1 --no-headers | wc -l)" = 2 ] || fail "2 spot nodes in us-central1 expected"
[ "$(k get nodes -l cloud.google.com/gke-spot=true,topology.kubernetes.io/region=europe-west4 --no-headers | wc -l)" = 1 ] || fail "1 spot node in europe-west4 expected"
[ "$(k get nodes -l swarm-operator.io/node-class=on-demand --no-headers | wc -l)" = 1 ] || fail "1 on-demand node expected"
# (grep reads kubectl's whole output from a string: `kubectl ... | grep -q` under pipefail fails
# when grep exits at its first match while kubectl still writes, a SIGPIPE; a CI run failed so)
grep -q gke-spot <<<"$(k get node node-1 -o jsonpath='{.spec.taints}')" || fail "spot node without the gke-spot taint"
grep -q '^containerd://' <<<"$(k get node node-1 -o jsonpath='{.status.nodeInfo.containerRuntimeVersion}')" || fail "node-1 runtime is not containerd"

# ---- Kueue, as its release runs it (before the chart: the operator is installed with it on) ----
KUEUE_READY=$(bash "$SRC/scripts/k8s/kueue.sh" up | tail -n 1) || fail "scripts/k8s/kueue.sh up"
log "FIGURE kueue_install_seconds $KUEUE_READY (kueue.sh up -> its webhooks answer)"

# ---- the chart, operator in the cluster ----
HELM=$(bash "$SRC/scripts/k8s/build-helm.sh" | tail -n 1)
t=$(now)
"$HELM" install swarm-operator "$SRC/helm/swarm-operator" -n $OPNS --create-namespace \
  --set image.repository=localhost/swarm-operator --set image.tag=dev --set image.pullPolicy=Never \
  --set progress.periodSeconds=2 --set kueue.enabled=true --wait --timeout 180s >/dev/null 2>"$OUT/helm.err" || { cat "$OUT/helm.err"; fail "helm install"; }
log "FIGURE helm_install_seconds $(since "$t")"
[ "$(k -n $OPNS get deploy swarm-operator -o jsonpath='{.status.readyReplicas}')" = 2 ] || fail "operator Deployment not 2/2 ready"
wait_until 60 "operator Lease held by one of its pods" bash -c \
  "k=\$(kubectl -n $OPNS get lease swarm-operator -o jsonpath='{.spec.holderIdentity}'); [ -n \"\$k\" ] && kubectl -n $OPNS get pod \"\$k\""
LEADER=$(k -n $OPNS get lease swarm-operator -o jsonpath='{.spec.holderIdentity}')
log "operator leader: $LEADER"

# ---- the job ----
T_APPLY=$(now)
k apply -f "$SRC/examples/local-cluster-checkpoints.yaml" >/dev/null || fail "kubectl apply the checkpoint claim"
k apply -f "$SRC/examples/local-cluster.yaml" >/dev/null || fail "kubectl apply"
all_running() { # job pods all Running and Ready: the workers, 1 trainer, 1 registry
  local out
  out=$(kubectl get pods -l swarm-operator.io/job=$JOB --no-headers 2>/dev/null | grep -v Terminating)
  [ "$(echo "$out" | grep -c ' 1/1 *Running')" -ge $((WORKERS + 2)) ] && [ "$(echo "$out" | wc -l)" -eq $((WORKERS + 2)) ]
}
wait_until 300 "$((WORKERS + 2)) job pods Running and Ready" all_running
log "FIGURE apply_to_pods_running_seconds $(since "$T_APPLY")"
for p in $(k get pods -l swarm-operator.io/job=$JOB -o name); do
  img=$(k get "$p" -o jsonpath='{.status.containerStatuses[0].image}')
  cid=$(k get "$p" -o jsonpath='{.status.containerStatuses[0].containerID}')
  case "$img" in *localhost/swarm-worker:dev) ;; *) fail "$p runs image $img, not localhost/swarm-worker:dev" ;; esac
  case "$cid" in containerd://*) ;; *) fail "$p has no containerd container ($cid)" ;; esac
done
k get pods -l swarm-operator.io/job=$JOB -o wide
for p in $(k get pods -l swarm-operator.io/role=worker -o jsonpath='{.items[*].spec.nodeName}'); do
  case $p in node-1|node-2|node-3) ;; *) fail "a worker runs on $p, not on a spot node" ;; esac
done
for role in trainer registry; do
  [ "$(k get pods -l swarm-operator.io/role=$role -o jsonpath='{.items[0].spec.nodeName}')" = node-4 ] || fail "$role not on the on-demand node"
done

status() { k get swarmjob $JOB -o jsonpath="{.status.$1}" 2>/dev/null; }
step_at_least() { local s; s=$(status step); [ -n "$s" ] && [ "${s%.*}" -ge "$1" ]; }
wait_until 300 "the first optimizer step (status.step >= 1)" step_at_least 1
log "FIGURE apply_to_first_step_seconds $(since "$T_APPLY")"
wait_until 120 "a loss in status" bash -c "[ -n \"\$(kubectl get swarmjob $JOB -o jsonpath='{.status.loss}')\" ]"
LOSS0=$(status loss); STEP0=$(status step)
log "step $STEP0, loss $LOSS0"
wait_until 600 "status.step >= $((STEP0 + 20))" step_at_least $((STEP0 + 20))
loss_below() { awk -v a="$(status loss)" -v b="$1" 'BEGIN{exit !(a != "" && a + 0 < b + 0)}'; }
wait_until 300 "status.loss below $LOSS0" loss_below "$LOSS0"
log "step $(status step), loss $(status loss) (was $LOSS0 at step $STEP0); samples/s $(status samplesPerSecond)"
k get swarmjobs

REG_IP=$(k get pod -l swarm-operator.io/role=registry -o jsonpath='{.items[0].status.podIP}')
stats() { curl -fsS --max-time 3 "http://$(kubectl get pod -l swarm-operator.io/role=registry -o jsonpath='{.items[0].status.podIP}'):7400/v1/stats"; }
event() { stats | python3 -c "import json,sys; d=json.load(sys.stdin); e=d.get('events', d); print(int(e.get('$1', 0)))"; }
stats > "$OUT/stats0.json" || fail "registry /v1/stats at $REG_IP:7400"

# ---- Prometheus ----
PROM=$(bash "$SRC/scripts/k8s/prometheus.sh" up) || fail "prometheus.sh up"
promq() { curl -fsS --max-time 5 "$PROM/api/v1/query" --data-urlencode "query=$1" | python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(len(r), sum(float(x["value"][1]) for x in r))'; }
targets_up() { # JOB ROLE-REGEX COUNT: COUNT targets up
  local r
  r=$(promq "sum(up{job=\"$1\", pod=~\"$2\"})") || return 1
  [ "${r#* }" = "$3" ] || [ "$(awk -v v="${r#* }" 'BEGIN{print v+0}')" = "$3" ]
}
wait_until 90 "Prometheus: 2 operator pods up" targets_up swarm-operator '.*' 2
wait_until 90 "Prometheus: $WORKERS workers up" targets_up swarm "$JOB-w-.*" $WORKERS
wait_until 90 "Prometheus: the trainer up" targets_up swarm "$JOB-t-.*" 1
wait_until 90 "Prometheus: the registry up" targets_up swarm "$JOB-registry-.*" 1
log "Prometheus scrapes operator (2), workers ($WORKERS), trainer (1), registry (1)"

# ---- a GKE spot reclaim notice ----
# The us-central1 spot node with the most workers.
VICTIM=$(k get pods -l swarm-operator.io/role=worker -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -E 'node-[12]$' | sort | uniq -c | sort -rn | awk 'NR==1{print $2}')
[ -n "$VICTIM" ] || fail "no worker on a us-central1 spot node"
mapfile -t DOOMED < <(k get pods -l swarm-operator.io/role=worker --field-selector spec.nodeName=$VICTIM -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
UNAVERAGED0=$(event unaveraged_steps); HANDOFFS0=$(event handoffs); STEP1=$(status step)
RLOST0=$(event samples_lost); RPEERS0=$(event peers_lost)
log "reclaim notice on $VICTIM (workers ${DOOMED[*]}), step $STEP1"
# The doomed workers' logs, kept as they drain (the pods and their logs are gone afterwards).
for d in "${DOOMED[@]}"; do kubectl logs -f "$d" >"$OUT/$d.log" 2>&1 & done
T_TAINT=$(now)
k taint node "$VICTIM" cloud.google.com/impending-node-termination=true:NoSchedule >/dev/null || fail "taint"
replacements_ready() { # as many Ready workers as before, none on the victim
  local n
  n=$(kubectl get pods -l swarm-operator.io/role=worker -o jsonpath='{range .items[?(@.metadata.deletionTimestamp)]}{.metadata.name}{"\n"}{end}' | wc -l)
  local ready
  ready=$(kubectl get pods -l swarm-operator.io/role=worker -o jsonpath='{range .items[*]}{.spec.nodeName} {.status.conditions[?(@.type=="Ready")].status} {.metadata.deletionTimestamp}{"\n"}{end}' \
    | awk -v v="$VICTIM" '$1 != v && $2 == "True" && $3 == ""' | wc -l)
  [ "$ready" -ge $WORKERS ]
}
wait_until 120 "replacement workers Ready off $VICTIM" replacements_ready
log "FIGURE reclaim_to_replacement_ready_seconds $(since "$T_TAINT")"
python3 "$SRC/tests/cluster/pod_phases.py" "$T_TAINT" swarm-operator.io/job=$JOB,swarm-operator.io/role=worker
for d in "${DOOMED[@]}"; do
  # the doomed pod was deleted gracefully (SIGTERM) and its worker drained
  wait_until 60 "$d gone" bash -c "! kubectl get pod $d"
done
k get pods -l swarm-operator.io/job=$JOB -o wide
if [ ${#DOOMED[@]} -ge 1 ]; then
  grep -q '^node-3$' <<<"$(k get pods -l swarm-operator.io/role=worker -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}')" \
    || fail "with $VICTIM reclaimed and the other us-central1 node full, no worker overflowed to europe-west4 (node-3)"
  log "overflow to europe-west4: a replacement runs on node-3"
fi
[ "$(k get swarmjob $JOB -o jsonpath='{.status.preemptions}')" -ge 1 ] || fail "status.preemptions not counted"
wait_until 300 "training continues after the reclaim" step_at_least $((STEP1 + 10))
UNAVERAGED1=$(event unaveraged_steps); HANDOFFS1=$(event handoffs)
[ "$UNAVERAGED1" = "$UNAVERAGED0" ] || fail "unaveraged steps after the reclaim: $UNAVERAGED0 -> $UNAVERAGED1"
RLOST1=$(event samples_lost); RPEERS1=$(event peers_lost)
log "after the reclaim: step $(status step), hand-offs $HANDOFFS0 -> $HANDOFFS1, unaveraged steps $UNAVERAGED1, samples_lost $RLOST0 -> $RLOST1, peers_lost $RPEERS0 -> $RPEERS1"
# Reclaimed workers leave gracefully: each gives the gradient it holds to its stage on the way out
# (joins the open step or hands it off to a peer that stays), so nothing is lost and no peer is
# counted as lost. Whether a worker holds any when its notice comes is timing (one that drains
# between steps has nothing to give), so the hand-off count is reported, not asserted;
# samples_lost is the invariant. Forwards whose backward never came are not gradient (their
# trainer recomputes them elsewhere) and are not counted.
log "FIGURE graceful_reclaim_samples_lost $((RLOST1 - RLOST0))"
if [ "$RLOST1" != "$RLOST0" ]; then
  echo "registry events: $(stats | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin).get("events")))')"
  for d in "${DOOMED[@]}"; do echo "-- $d (drained)"; grep -E "leav|hand|drain|lost|dropp|step|stage" "$OUT/$d.log" | tail -25; done
  fail "samples lost across a graceful reclaim: $RLOST0 -> $RLOST1"
fi

# ---- the dashboard: every panel shows data (a preemption happened, so its panels have some) ----
# The fp16 loss scale exists only where workers run fp16 with loss scaling (CUDA); these are CPU
# workers in fp32, so that one panel may be empty. Prometheus scrapes every few seconds: the check
# is polled until every panel has data (a deadline, not a sleep), and a miss shows which panels.
dashboard() { python3 "$SRC/tests/cluster/dashboard_check.py" --allow-empty "fp16 loss scale" "$PROM" "$SRC/dashboards/swarm-operator.json" $NS $JOB $OPNS 2m; }
T_DASH=$(now)
end=$(( $(date +%s) + 120 ))
until dashboard >/dev/null 2>&1; do
  [ "$(date +%s)" -lt "$end" ] || { dashboard; fail "dashboard panels without data after 120 s"; }
  sleep 1
done
log "FIGURE dashboard_all_panels_seconds $(since "$T_DASH")"

# ---- a node killed outright ----
KILLED=$(k get pods -l swarm-operator.io/role=worker -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -v "^$VICTIM$" | grep -E 'node-[123]$' | sort | uniq -c | sort -rn | awk 'NR==1{print $2}')
[ -n "$KILLED" ] || fail "no spot node with workers left to kill"
KILLED_I=${KILLED#node-}
mapfile -t LOST < <(k get pods -l swarm-operator.io/role=worker --field-selector spec.nodeName=$KILLED -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
PEERS_LOST0=$(event peers_lost); SAMPLES_LOST0=$(event samples_lost); STEP2=$(status step)
log "killing $KILLED outright (workers ${LOST[*]}), step $STEP2"
T_KILL=$(now)
bash "$CL" node-stop "$KILLED_I" || fail "node-stop"
! pgrep -f "containerd --config /var/lib/swarm-cluster/node-$KILLED_I/" >/dev/null || fail "containerd of $KILLED still runs"
wait_until 90 "$KILLED NotReady" bash -c "[ \"\$(kubectl get node $KILLED -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}')\" != True ]"
log "FIGURE node_kill_to_notready_seconds $(since "$T_KILL")"
alive_off() { # all workers Ready on nodes other than the killed one
  [ "$(kubectl get pods -l swarm-operator.io/role=worker -o jsonpath='{range .items[*]}{.spec.nodeName} {.status.conditions[?(@.type=="Ready")].status} {.metadata.deletionTimestamp}{"\n"}{end}' \
    | awk -v v="$KILLED" '$1 != v && $2 == "True" && $3 == ""' | wc -l)" -ge $WORKERS ]
}
wait_until 180 "replacements Ready off the killed node" alive_off
log "FIGURE node_kill_to_replacement_ready_seconds $(since "$T_KILL")"
wait_until 300 "training continues after the node loss" step_at_least $((STEP2 + 10))
wait_until 60 "the registry counts the lost peers" bash -c "[ \$(curl -fsS http://\$(kubectl get pod -l swarm-operator.io/role=registry -o jsonpath='{.items[0].status.podIP}'):7400/v1/stats | python3 -c \"import json,sys; d=json.load(sys.stdin); print(int(d.get('events', d).get('peers_lost', 0)))\") -gt $PEERS_LOST0 ]"
# The checkpoints are on the claim (the cluster's shared volume), in the job's own folder, not inside the containers: every
# stage's newest is on the host folder behind the PersistentVolume, whichever node wrote it.
STATE_DIR=$(dirname "$KUBECONFIG")
for s in 0 1 2; do
  ls "$STATE_DIR"/shared/$JOB/stage-$s/step-*.ckpt >/dev/null 2>&1 || fail "no checkpoint of stage $s in the job's folder on the shared volume ($STATE_DIR/shared/$JOB)"
done
log "checkpoints in the job's folder on the shared volume: $(ls "$STATE_DIR"/shared/$JOB/stage-*/ | grep -c ckpt) files"
log "after the node loss: step $(status step), peers_lost $PEERS_LOST0 -> $(event peers_lost), samples_lost $SAMPLES_LOST0 -> $(event samples_lost)"
k get pods -l swarm-operator.io/job=$JOB -o wide

# ---- a stage lost whole: every worker of stage 1 force-deleted ----
# Both peers gone at once (`kubectl delete --force --grace-period=0`, as an operator or a cloud's
# node cleanup does it): the operator creates replacements, the first restores the stage from its
# newest checkpoint on the claim, the second downloads it from the first. Goal: served again (the
# replacements Ready and the stage stepping) within 20 s (issue 29, item 4; pod_phases.py prints
# where the time goes).
LOST_STAGE=1
stage_pods() { # name uid ready deletion of the stage's workers
  kubectl get pods -l swarm-operator.io/job=$JOB,swarm-operator.io/role=worker,swarm-operator.io/stage=$LOST_STAGE \
    -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.uid} {.status.conditions[?(@.type=="Ready")].status} {.metadata.deletionTimestamp}{"\n"}{end}'
}
stage_step() { stats | python3 -c "import json,sys; print(int(json.load(sys.stdin)['stageSteps']['$LOST_STAGE']))"; }
mapfile -t GONE < <(stage_pods | awk '$4 == "" {print $1}')
GONE_UIDS=$(stage_pods | awk '$4 == "" {print $2}' | tr '\n' ' ')
[ ${#GONE[@]} -eq 2 ] || fail "stage $LOST_STAGE has ${#GONE[@]} live workers, not 2: $(stage_pods)"
RESTORES0=$(event checkpoint_restores); LSTEP0=$(stage_step)
log "stage $LOST_STAGE lost whole: force-deleting ${GONE[*]} (stage step $LSTEP0)"
T_STAGE=$(now)
k delete pod "${GONE[@]}" --force --grace-period=0 >/dev/null 2>&1 || fail "force-delete the workers of stage $LOST_STAGE"
stage_ready_again() { # 2 workers of the stage Ready, none of them a lost one
  [ "$(stage_pods | awk -v gone="$GONE_UIDS" '$3 == "True" && $4 == "" && index(gone, $2) == 0' | wc -l)" -ge 2 ]
}
wait_until 120 "stage $LOST_STAGE's replacements Ready" stage_ready_again
STAGE_READY=$(since "$T_STAGE")
LSTEP1=$(stage_step)
stage_stepping() { [ "$(stage_step)" -gt "$LSTEP1" ]; }
wait_until 120 "stage $LOST_STAGE stepping again" stage_stepping
STAGE_BACK=$(since "$T_STAGE")
log "FIGURE stage_lost_to_replacements_ready_seconds $STAGE_READY"
log "FIGURE stage_lost_to_stepping_seconds $STAGE_BACK (stage step $LSTEP0 when lost, $LSTEP1 when its replacements were Ready, $(stage_step) now; checkpoint restores $RESTORES0 -> $(event checkpoint_restores))"
python3 "$SRC/tests/cluster/pod_phases.py" "$T_STAGE" swarm-operator.io/job=$JOB,swarm-operator.io/role=worker,swarm-operator.io/stage=$LOST_STAGE
awk -v s="$STAGE_BACK" 'BEGIN{exit !(s <= 20)}' || fail "stage $LOST_STAGE served again only $STAGE_BACK s after it was lost whole (goal 20 s)"
wait_until 120 "training continues after the stage loss" step_at_least $(( $(status step) + 10 ))

# ---- the step invariant after the faults (reclaim, node lost, stage lost whole) ----
. "$SRC/tests/cluster/step_check.sh"
step_check faults 0

# ---- the operator's leader pod deleted ----
no_duplicates() { # exactly one registry, one trainer, perStage live workers per stage label
  local pods
  pods=$(kubectl get pods -l swarm-operator.io/job=$JOB -o jsonpath='{range .items[*]}{.metadata.labels.swarm-operator\.io/role} {.metadata.labels.swarm-operator\.io/stage} {.spec.nodeName} {.metadata.deletionTimestamp}{"\n"}{end}' \
    | awk -v v="$KILLED" '$4 == "" && $3 != v')
  [ "$(echo "$pods" | grep -c '^registry')" = 1 ] && [ "$(echo "$pods" | grep -c '^trainer')" = 1 ] &&
    [ "$(echo "$pods" | awk '$1 == "worker"' | awk '{print $2}' | sort | uniq -c | awk '$1 == 2' | wc -l)" = 3 ] &&
    [ "$(echo "$pods" | awk '$1 == "worker"' | wc -l)" = $WORKERS ]
}
wait_until 60 "one pod per role/stage before the operator test" no_duplicates
LEADER=$(k -n $OPNS get lease swarm-operator -o jsonpath='{.spec.holderIdentity}')
T_OP=$(now)
k -n $OPNS delete pod "$LEADER" --wait=false >/dev/null || fail "delete operator pod $LEADER"
new_leader() { local h; h=$(kubectl -n $OPNS get lease swarm-operator -o jsonpath='{.spec.holderIdentity}'); [ -n "$h" ] && [ "$h" != "$LEADER" ]; }
wait_until 60 "another operator pod takes the Lease" new_leader
log "FIGURE operator_failover_seconds $(since "$T_OP") (lease: $LEADER -> $(k -n $OPNS get lease swarm-operator -o jsonpath='{.spec.holderIdentity}'))"
sleep 10
no_duplicates || { k get pods -l swarm-operator.io/job=$JOB -o wide; fail "duplicated or missing pods after the operator hand-over"; }
wait_until 120 "operator Deployment 2/2 again" bash -c "[ \"\$(kubectl -n $OPNS get deploy swarm-operator -o jsonpath='{.status.readyReplicas}')\" = 2 ]"

# ---- the registry pod deleted ----
REG=$(k get pod -l swarm-operator.io/role=registry -o jsonpath='{.items[0].metadata.name}')
REG_UID=$(k get pod "$REG" -o jsonpath='{.metadata.uid}')
STEP3=$(status step)
T_REG=$(now)
k delete pod "$REG" --wait=false >/dev/null || fail "delete registry pod"
registry_back() {
  local u r
  u=$(kubectl get pod -l swarm-operator.io/role=registry -o jsonpath='{.items[0].metadata.uid}')
  r=$(kubectl get pod -l swarm-operator.io/role=registry -o jsonpath='{.items[0].status.conditions[?(@.type=="Ready")].status}')
  [ -n "$u" ] && [ "$u" != "$REG_UID" ] && [ "$r" = True ]
}
wait_until 120 "the registry pod back" registry_back
log "FIGURE registry_pod_back_seconds $(since "$T_REG")"
wait_until 300 "training continues after the registry restart" step_at_least $((STEP3 + 10))
log "after the registry restart: step $(status step) (was $STEP3)"
no_duplicates || fail "duplicated or missing pods after the registry restart"

# ---- the API server restarted: the operator's view of the job moves again within seconds ----
# Training goes on while it is away (the data plane needs no API server); the operator's informers
# and work queue retry within 5 s (operator/kube/retry.h), the progress poller every 2 s here.
STEP_API=$(status step)
LEADER_API=$(k -n $OPNS get lease swarm-operator -o jsonpath='{.spec.holderIdentity}')
T_API_STOP=$(now)
bash "$CL" apiserver-restart 3 >/dev/null || fail "cluster.sh apiserver-restart"
API_AWAY=$(since "$T_API_STOP")
T_API=$(now)
STALE=$(status step)
wait_until 60 "status.step moving again after the API server restart" step_at_least $(( ${STALE%.*} + 1 ))
API_BACK=$(since "$T_API")
log "FIGURE apiserver_back_to_status_step_seconds $API_BACK (status step $STEP_API before, $STALE when it answered, $(status step) now; the API server away $API_AWAY s in all; leader $LEADER_API before, $(k -n $OPNS get lease swarm-operator -o jsonpath='{.spec.holderIdentity}') after, restarts of the operator's pods: $(k -n $OPNS get pods -o jsonpath='{range .items[*]}{.status.containerStatuses[0].restartCount} {end}'))"
# The goal is 10 s (the FIGURE line); the test fails past 60 s. Stopped for 3 s, the API server is
# usually back before the leader's renew deadline (10 s): then the informers and the work queue
# retry within 5 s (measured 9.98 s). Where starting it again takes longer (a loaded machine), the
# leader cannot renew, steps down and exits, and the standby leads once the Lease expires: a CI
# run measured 30.71 s that way (issue 29: to be made faster).
awk -v s="$API_BACK" 'BEGIN{exit !(s <= 60)}' || fail "status.step moved again only $API_BACK s after the API server came back (goal 10 s)"

# ---- the job deleted, then re-created under its name: it resumes from its checkpoints ----
# The generated Secret of a job with checkpoints outlives it (docs/operator.md, "What a SwarmJob
# owns"): the checkpoints are authenticated with it, and the re-created job takes it up.
newest_ckpt() { # the smallest over stages of each stage's newest checkpoint step
  local s m="" n
  for s in 0 1 2; do
    n=$(ls "$STATE_DIR"/shared/$JOB/stage-$s/ 2>/dev/null | sed -n 's/^step-0*\([0-9][0-9]*\)\.ckpt$/\1/p' | sort -n | tail -1)
    [ -n "$n" ] || n=0
    if [ -z "$m" ] || [ "$n" -lt "$m" ]; then m=$n; fi
  done
  echo "$m"
}
SECRET_TOKEN=$(k get secret $JOB-secret -o jsonpath='{.data.token}')
[ -n "$SECRET_TOKEN" ] || fail "no data-plane secret $JOB-secret before the delete"
k delete swarmjob $JOB --wait=false >/dev/null || fail "delete swarmjob"
job_gone() {
  [ -z "$(kubectl get pods,services,configmaps,endpointslices -l swarm-operator.io/job=$JOB -o name 2>/dev/null)" ] &&
  ! kubectl get swarmjob $JOB >/dev/null 2>&1
}
# Pods on the killed node cannot finish a graceful deletion: the operator deletes them at once.
wait_until 120 "every object of the job gone" job_gone
log "every object of $JOB is gone but its Secret"
[ "$(k get secret $JOB-secret -o jsonpath='{.data.token}')" = "$SECRET_TOKEN" ] || fail "the job's Secret went with it"
[ -n "$(k get secret $JOB-secret -o jsonpath='{.metadata.annotations.swarm-operator\.io/kept-for-checkpoints}')" ] ||
  fail "the kept Secret has no kept-for-checkpoints annotation"
CKPT=$(newest_ckpt)
[ "$CKPT" -gt 0 ] || fail "no checkpoint of every stage before the re-creation"
T_RE=$(now)
k apply -f "$SRC/examples/local-cluster.yaml" >/dev/null || fail "kubectl apply (re-created)"
wait_until 300 "the re-created job's first step" step_at_least 1
log "FIGURE recreated_job_first_step_seconds $(since "$T_RE")"
resumed() { [ "$(kubectl logs -l swarm-operator.io/job=$JOB,swarm-operator.io/role=worker --tail=-1 2>/dev/null | grep -c 'restored from checkpoint')" -ge 3 ]; }
wait_until 120 "every stage of the re-created job restored from its checkpoints" resumed
step_at_least "$CKPT" || fail "the re-created job is at step $(status step), below its checkpoints' $CKPT: it did not resume"
log "re-created: resumed at step $(status step) (newest checkpoint of every stage $CKPT) with the kept Secret"
k get events --field-selector reason=SecretKept -o name | grep -q . || fail "no SecretKept Event for the re-created job"
k delete swarmjob $JOB --wait=false >/dev/null || fail "delete swarmjob (re-created)"
wait_until 120 "every object of the re-created job gone" job_gone
k delete secret $JOB-secret >/dev/null || fail "delete the kept Secret"

# ---- applied once more without its Secret: a clean start beside the old files ----
# A new Secret, so the files in the job's folder are another instance's (docs/operator.md): the
# new job starts at step 0, never restores, counts or removes them, and says so once (condition
# ForeignCheckpoints naming the folder, a Warning Event).
# The re-created job's pods are gone, but a worker whose pod the operator force-deleted (its node
# went NotReady for a moment after the API server restart, above) may still run until its kubelet
# stops it, and write and prune checkpoints meanwhile: the files are counted once no worker
# process of the job is left on the nodes (they are processes of this machine).
no_job_process() { ! pgrep -f "swarm worker .*--peer-id $JOB-w-" >/dev/null; }
wait_until 120 "no worker process of the re-created job left on the nodes" no_job_process
mapfile -t OLD_FILES < <(ls "$STATE_DIR"/shared/$JOB/stage-*/*.ckpt)
T_FRESH=$(now)
k apply -f "$SRC/examples/local-cluster.yaml" >/dev/null || fail "kubectl apply (a clean start)"
wait_until 300 "the clean start's first step" step_at_least 1
foreign_said() { [ "$(kubectl get swarmjob $JOB -o jsonpath='{.status.conditions[?(@.type=="ForeignCheckpoints")].status}')" = True ]; }
wait_until 120 "condition ForeignCheckpoints on the clean start" foreign_said
log "FIGURE clean_start_first_step_seconds $(since "$T_FRESH") (at step $(status step); ${#OLD_FILES[@]} files of the other instance)"
step_at_least "$CKPT" && fail "the clean start is at step $(status step), not below the other instance's $CKPT: it took up files it cannot authenticate"
MSG=$(k get swarmjob $JOB -o jsonpath='{.status.conditions[?(@.type=="ForeignCheckpoints")].message}')
grep -q "/$JOB" <<<"$MSG" || fail "the ForeignCheckpoints condition does not name the job's folder: $MSG"
k get events --field-selector reason=ForeignCheckpoints -o name | grep -q . || fail "no ForeignCheckpoints Event"
# The new instance checkpoints beside them (every 50 steps) and its retention keeps 2 of its own.
own_checkpoint() { [ "$(ls "$STATE_DIR"/shared/$JOB/stage-*/*.ckpt | wc -l)" -gt "${#OLD_FILES[@]}" ]; }
wait_until 180 "the clean start's own checkpoints" own_checkpoint
for f in "${OLD_FILES[@]}"; do [ -e "$f" ] || fail "the clean start removed the other instance's $f"; done
log "clean start: condition ForeignCheckpoints ($MSG); all ${#OLD_FILES[@]} files of the other instance kept"
k delete swarmjob $JOB --wait=false >/dev/null || fail "delete swarmjob (clean start)"
wait_until 120 "every object of the clean start gone" job_gone
k delete secret $JOB-secret >/dev/null || fail "delete the clean start's Secret"

# ---- checkpoints and the exported model in object storage (MinIO) ----
. "$SRC/tests/cluster/s3_phase.sh"
s3_phase

# ---- Kueue: borrow, reclaim, drain, resume ----
# The spot nodes whole again first, as a cloud replaces reclaimed and lost nodes: the reclaimed
# node's taint goes, the killed node starts again (the phase sizes its quota to all three).
k taint node "$VICTIM" cloud.google.com/impending-node-termination- >/dev/null || fail "untaint $VICTIM"
bash "$CL" node-start "$KILLED_I" >/dev/null 2>&1 || fail "cluster.sh node-start $KILLED_I"
wait_until 120 "$KILLED Ready again" bash -c "[ \"\$(kubectl get node $KILLED -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}')\" = True ]"
. "$SRC/tests/cluster/kueue_phase.sh"
T_KUEUE=$(now)
kueue_phase
log "FIGURE kueue_phase_seconds $(since "$T_KUEUE")"
"$HELM" uninstall swarm-operator -n $OPNS >/dev/null || fail "helm uninstall"
log "PASS"
