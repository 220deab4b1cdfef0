# Kueue on real kubelets, a phase of cluster_e2e_test.sh (sourced; it uses that script's k, log,
# fail, wait_until, now, since, $SRC, $OUT, $STATE_DIR, $OPNS). Kueue v0.17.0 runs in the cluster as its
# release's Deployment (scripts/k8s/kueue.sh up, before the chart) and the operator with
# kueue.enabled. Objects in Kueue's terms for this cluster's pools: ResourceFlavors spot-us,
# spot-eu (the spot nodes of each region, their taint) and on-demand; a cohort of two
# ClusterQueues where team-a owns no quota and team-b owns all of it; a LocalQueue for each in the
# default namespace; WorkloadPriorityClasses low and high. Then:
#   low (team-a, priority low; 2 stages, minPerStage 1, perStage 2, maxPerStage 3) borrows
#     team-b's quota: its core is admitted, its extension in part (2 of the 4 workers it asks for:
#     the quota's rest), its workers on the us-central1 spot nodes (the flavor's labels), registry
#     and trainer on the on-demand node, and it trains
#   high (team-b, priority high; 4 workers) reclaims the quota: both of low's Workloads are
#     evicted, low drains (phase Draining, a checkpoint of every stage at one step), and its core's
#     admission is cleared only once none of its pods is left (polled every 0.5 s throughout)
#   high trains to its last step and finishes; low is admitted again and resumes from the drain's
#     checkpoints, at the step it drained at, not 0
#   the quota moved to team-a, the same inside one ClusterQueue (high2 in team-a's queue preempts
#     low by priority), with the operator's leading pod force-deleted as soon as low is evicted:
#     the other replica completes the drain, and the quota still goes back only once low's pods
#     are gone
# Prints FIGURE lines: admitted -> first step, evicted -> pods gone, -> quota free, re-admitted ->
# first step, steps and samples lost across each preemption.
kueue_phase() {
  local t t_low w
  local workloads=/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads
  wl() { kubectl get --raw "$workloads/$1" 2>/dev/null; }
  wl_cond() { # WORKLOAD TYPE: the Workload exists and the condition is True
    wl "$1" | python3 -c "import json,sys; t=sys.stdin.read(); d=json.loads(t) if t.strip() else {}; sys.exit(0 if any(c['type']=='$2' and c['status']=='True' for c in d.get('status',{}).get('conditions',[])) else 1)"
  }
  wl_admitted_count() { # WORKLOAD: workers admitted (the podSet's count in status.admission)
    wl "$1" | python3 -c "import json,sys; d=json.load(sys.stdin); print(sum(p.get('count',0) for p in d.get('status',{}).get('admission',{}).get('podSetAssignments',[]) if p['name'].startswith('workers')))"
  }
  wl_has_admission() { wl "$1" | python3 -c "import json,sys; t=sys.stdin.read(); sys.exit(0 if t.strip() and json.loads(t).get('status',{}).get('admission') else 1)"; }
  # The registry's own view (no poller between): its stages' steps and lost samples, as JSON.
  reg_stats() { curl -fsS --max-time 1 "http://$1:7400/v1/stats" 2>/dev/null; }
  jstatus() { kubectl get swarmjob "$1" -o jsonpath="{.status.$2}" 2>/dev/null; }
  jstep_at_least() { local s; s=$(jstatus "$1" step); [ -n "$s" ] && [ "${s%.*}" -ge "$2" ]; }
  pods_of() { kubectl get pods -l swarm-operator.io/job="$1" --no-headers 2>/dev/null | grep -c .; }

  cq() { # NAME SPOT_US_CPU ON_DEMAND_CPU: a ClusterQueue of the cohort e2e (memory 8Gi where cpu > 0)
    local m1=0 m2=0
    [ "$2" = 0 ] || m1=8Gi
    [ "$3" = 0 ] || m2=8Gi
    cat <<YAML
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: $1}
spec:
  cohortName: e2e
  namespaceSelector: {}
  preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - {name: spot-us, resources: [{name: cpu, nominalQuota: "$2"}, {name: memory, nominalQuota: "$m1"}]}
    - {name: spot-eu, resources: [{name: cpu, nominalQuota: "0"}, {name: memory, nominalQuota: "0"}]}
    - {name: on-demand, resources: [{name: cpu, nominalQuota: "$3"}, {name: memory, nominalQuota: "$m2"}]}
YAML
  }
  log "Kueue: queues for the cluster's pools"
  k apply -f - >/dev/null <<'YAML' || fail "kubectl apply Kueue's objects"
# Spot flavors carry their nodes' taint but no tolerations: Kueue counts a flavor's tolerations as
# the pods' own when it matches taints, so a tolerating flavor would take the registry and the
# trainer (which tolerate nothing) onto spot nodes. The workers tolerate the taint (their pools).
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: spot-us}
spec:
  nodeLabels: {cloud.google.com/gke-spot: "true", topology.kubernetes.io/region: us-central1}
  nodeTaints: [{key: cloud.google.com/gke-spot, value: "true", effect: NoSchedule}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: spot-eu}
spec:
  nodeLabels: {cloud.google.com/gke-spot: "true", topology.kubernetes.io/region: europe-west4}
  nodeTaints: [{key: cloud.google.com/gke-spot, value: "true", effect: NoSchedule}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: on-demand}
spec:
  nodeLabels: {swarm-operator.io/node-class: on-demand}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: team-a, namespace: default}
spec: {clusterQueue: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: team-b, namespace: default}
spec: {clusterQueue: team-b}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: low}
value: 100
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 10000
YAML
  # team-a owns no quota (low borrows all it runs on), team-b all of it.
  { cq team-a 0 0; cq team-b 1 1; } | k apply -f - >/dev/null || fail "kubectl apply the ClusterQueues"
  kjob() { # NAME QUEUE PRIORITY PER_STAGE MIN MAX MAX_STEPS
    cat <<YAML
apiVersion: swarm-operator.io/v1alpha1
kind: SwarmJob
metadata:
  name: $1
  labels: {kueue.x-k8s.io/queue-name: $2, kueue.x-k8s.io/priority-class: $3}
spec:
  model: {vocabSize: 256, hiddenSize: 64, numHeads: 4, layersPerStage: 1, sequenceLength: 64}
  pipeline: {stages: 2}
  training:
    globalBatch: 16
    microbatch: 4
    maxSteps: $7
    dataset: {path: /usr/share/games/fortunes}
    schedule: {kind: constant, warmupSteps: 5}
  workers:
    perStage: $4
    minPerStage: $5
    maxPerStage: $6
    device: cpu
    threads: 1
    image: localhost/swarm-worker:dev
    resources: {requests: {cpu: 250m, memory: 256Mi}, limits: {memory: 1Gi}}
  trainers:
    count: 1
    resources: {requests: {cpu: 100m, memory: 128Mi}, limits: {memory: 1Gi}}
  rebalancing: {enabled: false}
  averaging: {maxHandoffLagSteps: 16}
  checkpoint: {path: /tmp/swarm-checkpoints, everySteps: 100000, volumeClaimName: swarm-checkpoints}
  nodePools:
  - name: spot-us
    region: us-central1
    nodeSelector: {cloud.google.com/gke-spot: "true"}
    tolerations: [{key: cloud.google.com/gke-spot, operator: Equal, value: "true", effect: NoSchedule}]
    preemptible: true
    priority: 100
  - name: spot-eu
    region: europe-west4
    nodeSelector: {cloud.google.com/gke-spot: "true"}
    tolerations: [{key: cloud.google.com/gke-spot, operator: Equal, value: "true", effect: NoSchedule}]
    preemptible: true
    priority: 50
YAML
  }

  # ---- low borrows and trains ----
  t_low=$(now)
  kjob low team-a low 2 1 3 100000 | k apply -f - >/dev/null || fail "kubectl apply low"
  wait_until 60 "low's core Workload Admitted" wl_cond low-core Admitted
  log "FIGURE kueue_apply_to_admitted_seconds $(since "$t_low")"
  t=$(now)
  wait_until 60 "low's extension Workload Admitted" wl_cond low-ext Admitted
  [ "$(wl_admitted_count low-ext)" = 2 ] ||
    fail "low's extension admitted with $(wl_admitted_count low-ext) workers, not 2 (in part: the quota's rest)"
  wait_until 300 "low's first step" jstep_at_least low 1
  log "FIGURE kueue_admitted_to_first_step_seconds $(since "$t")"
  wait_until 120 "low's 4 workers Running" bash -c \
    "[ \"\$(kubectl get pods -l swarm-operator.io/job=low,swarm-operator.io/role=worker --no-headers | grep -c ' 1/1 *Running')\" = 4 ]"
  for w in $(k get pods -l swarm-operator.io/job=low,swarm-operator.io/role=worker -o jsonpath='{.items[*].spec.nodeName}'); do
    case $w in node-1|node-2) ;; *) fail "a worker of low runs on $w, not in the spot-us flavor (node-1, node-2)" ;; esac
  done
  for w in trainer registry; do
    [ "$(k get pods -l swarm-operator.io/job=low,swarm-operator.io/role=$w -o jsonpath='{.items[0].spec.nodeName}')" = node-4 ] ||
      fail "low's $w is not on the on-demand flavor's node"
  done
  wait_until 300 "low at step 10" jstep_at_least low 10
  k get swarmjobs -o wide

  # ---- high reclaims: low drains before its quota goes; high finishes, low resumes ----
  reclaim_round high team-b "" kueue
  # ---- again inside one ClusterQueue (team-a's: a higher priority preempts a lower one), the
  # operator's leader killed (its pod force-deleted) as soon as low is evicted: the other replica
  # takes the Lease and completes the drain. Kueue preempts inside a ClusterQueue only for a
  # Workload that fits the queue's nominal quota, so the quota moves to team-a first (low then
  # runs on its own quota, borrowing nothing) ----
  { cq team-a 1 1; cq team-b 0 1; } | k apply -f - >/dev/null || fail "kubectl apply the ClusterQueues (quota to team-a)"
  reclaim_round high2 team-a kill kueue_in_queue_operator_killed
  k delete swarmjob low high high2 --wait=false >/dev/null || fail "delete the Kueue phase's jobs"
  wait_until 120 "the Kueue phase's jobs gone, their Workloads with them" bash -c \
    "[ -z \"\$(kubectl get pods,workloads.kueue.x-k8s.io -l 'swarm-operator.io/job in (low,high,high2)' -o name 2>/dev/null)\" ] && ! kubectl get swarmjob low high high2 >/dev/null 2>&1"
  log "Kueue phase done"
}

# reclaim_round HIGH QUEUE KILL FIGURE: HIGH (priority high, 4 workers, 30 steps) applied in QUEUE
# takes low's quota: low evicted, drained (no quota back while a pod of it is left, polled every
# 0.5 s), checkpointed at one step; HIGH trains and finishes; low admitted again resumes at the
# step of that checkpoint. KILL=kill: the operator's leading pod force-deleted once low is evicted.
# FIGURE lines prefixed FIGURE.
reclaim_round() {
  local high=$1 queue=$2 kill=$3 fig=$4 t t_high reg seen="" last lowstep lost ckpt s n steps=""
  local evicted="" gone="" cleared="" early=0 draining=0 high_pod="" leader="" killed=""
  reg=$(k get pods -l swarm-operator.io/job=low,swarm-operator.io/role=registry -o jsonpath='{.items[0].status.podIP}')
  t_high=$(now)
  kjob "$high" "$queue" high 2 2 2 30 | k apply -f - >/dev/null || fail "kubectl apply $high"
  local end=$(( $(date +%s) + 240 ))
  while [ "$(date +%s)" -lt "$end" ]; do
    local lp adm=1
    [ -n "$evicted" ] || ! wl_cond low-core Evicted || evicted=$(since "$t_high")
    if [ -n "$evicted" ] && [ "$kill" = kill ] && [ -z "$killed" ]; then
      leader=$(k -n "$OPNS" get lease swarm-operator -o jsonpath='{.spec.holderIdentity}')
      k -n "$OPNS" delete pod "$leader" --grace-period=0 --force >/dev/null 2>&1 || fail "force-delete the operator's leader $leader"
      killed=$(since "$t_high")
    fi
    [ "$(jstatus low phase)" != Draining ] || draining=1
    # The last answer of low's registry before it went: every stage's step at the drain.
    [ -n "$gone" ] || { last=$(reg_stats "$reg") && seen=$last; }
    # The admission first, then the pods: a pod listed after the admission was seen cleared was
    # there after the quota went back.
    [ -z "$evicted" ] || wl_has_admission low-core || adm=0
    lp=$(pods_of low)
    if [ -n "$evicted" ] && [ -z "$gone" ] && [ "$lp" = 0 ]; then gone=$(since "$t_high"); fi
    if [ "$adm" = 0 ]; then
      [ "$lp" = 0 ] || early=1
      [ -n "$cleared" ] || cleared=$(since "$t_high")
    fi
    [ -n "$high_pod" ] || [ "$(pods_of "$high")" = 0 ] || high_pod=$(since "$t_high")
    [ -n "$high_pod" ] && [ -n "$cleared" ] && break
    sleep 0.5
  done
  [ -n "$seen" ] || fail "low's registry ($reg) never answered during the reclaim"
  read -r lowstep lost <<<"$(python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(max(d['stageSteps'].values()), d['events'].get('samples_lost', 0))" "$seen")"
  log "$high applied -> low evicted ${evicted:-never} s${killed:+, operator leader $leader killed $killed s}, low's pods gone ${gone:-never} s, quota free ${cleared:-never} s, $high's first pod ${high_pod:-never} s (low's stages at step $lowstep, samples lost $lost, in its registry's last answer)"
  [ -n "$evicted" ] || fail "low's core was not evicted within 240 s of $high"
  [ -n "$cleared" ] && [ -n "$high_pod" ] || fail "low's quota not given back or $high not started within 240 s"
  [ "$early" = 0 ] || fail "low's core admission cleared while its pods were still there"
  [ "$draining" = 1 ] || fail "low never showed phase Draining"
  ! wl_cond low-ext Admitted || fail "low's extension still admitted after the reclaim"
  log "FIGURE ${fig}_evicted_to_pods_gone_seconds $(awk -v a="$evicted" -v b="$gone" 'BEGIN{printf "%.2f", b - a}')"
  log "FIGURE ${fig}_evicted_to_quota_free_seconds $(awk -v a="$evicted" -v b="$cleared" 'BEGIN{printf "%.2f", b - a}')"
  [ "$(jstatus low phase)" = Queued ] || fail "low is $(jstatus low phase) after the reclaim, not Queued"
  # The drain's checkpoint: every stage at one step.
  for s in 0 1; do
    n=$(ls "$STATE_DIR"/shared/low/stage-$s/ 2>/dev/null | sed -n 's/^step-0*\([0-9][0-9]*\)\.ckpt$/\1/p' | sort -n | tail -1)
    [ -n "$n" ] || fail "no checkpoint of low's stage $s after its drain ($STATE_DIR/shared/low)"
    steps="$steps $n"
  done
  read -r ckpt n <<<"$steps"
  [ "$ckpt" = "$n" ] || fail "low's stages checkpointed at different steps:$steps"
  log "low drained: checkpoint of both stages at step $ckpt (its registry's last answer: step $lowstep)"
  log "FIGURE ${fig}_preemption_samples_lost $lost"
  log "FIGURE ${fig}_preemption_steps_lost $(( lowstep - ckpt ))"

  wait_until 300 "$high's first step" jstep_at_least "$high" 1
  log "FIGURE ${fig}_reclaim_to_high_first_step_seconds $(since "$t_high")"
  wait_until 300 "$high Finished" bash -c "[ \"\$(kubectl get swarmjob $high -o jsonpath='{.status.phase}')\" = Finished ]"
  t=$(now)
  wait_until 120 "low's core Admitted again" wl_cond low-core Admitted
  log "FIGURE ${fig}_high_finished_to_low_readmitted_seconds $(since "$t")"
  t=$(now)
  wait_until 300 "low training again" jstep_at_least low $((ckpt + 1))
  log "FIGURE ${fig}_readmitted_to_first_step_seconds $(since "$t")"
  # Polled: `kubectl logs -l` prints nothing while one of the pods it selects has not started.
  restored() {
    [ "$(kubectl logs -l swarm-operator.io/job=low,swarm-operator.io/role=worker --tail=-1 2>/dev/null |
         grep -c "restored from checkpoint .*step $ckpt)")" -ge 2 ]
  }
  wait_until 60 "low's workers restoring both stages from the drain's checkpoint (step $ckpt)" restored
  log "low resumed at step $ckpt (its stages were at $lowstep when it drained): now step $(jstatus low step)"
  [ "$kill" != kill ] || wait_until 120 "operator Deployment 2/2 again" bash -c \
    "[ \"\$(kubectl -n $OPNS get deploy swarm-operator -o jsonpath='{.status.readyReplicas}')\" = 2 ]"
}
