# The step invariant of the running job (issue 29): every stage's step is the trainers' count of
# completed global batches, or differs by what the registry's counters account for. Sourced by
# cluster_e2e_test.sh (needs k, log, fail, $OUT, $BUILD, $SRC, $JOB). Reads each trainer's
# /metrics, the registry's /v1/stats, then the trainers' /metrics again (what they completed
# meanwhile counts as in flight), and runs `swarm step-check` on them; prints its verdict as a
# FIGURE line and fails when a stage admitted more than is accounted (the upper bound: a stage that
# closed steps it did not fill, the drift issue 29 found). A stage under the trainers' count
# (steps closed short of the global batch; seen in 1 of 2 runs on 2026-12-07, 8 samples; cause
# open in issue 29, as in tests/local/step_accounting_test.cc) is printed as "short", not failed.
#   step_check LABEL REGISTRY_RESTARTS
step_check() {
  local label=$1 restarts=$2 reg tips i args=() rc
  reg=$(k get pod -l swarm-operator.io/job=$JOB,swarm-operator.io/role=registry -o jsonpath='{.items[0].status.podIP}')
  mapfile -t tips < <(k get pod -l swarm-operator.io/job=$JOB,swarm-operator.io/role=trainer -o jsonpath='{range .items[*]}{.status.podIP}{"\n"}{end}')
  [ -n "$reg" ] && [ ${#tips[@]} -ge 1 ] || fail "step check ($label): no registry or no trainer pod IP"
  for i in "${!tips[@]}"; do
    curl -fsS --max-time 3 "http://${tips[$i]}:9400/metrics" >"$OUT/tm-$label-$i-before" || fail "step check ($label): trainer ${tips[$i]} /metrics"
    args+=(--trainer-metrics "$OUT/tm-$label-$i-before")
  done
  curl -fsS --max-time 3 "http://$reg:7400/v1/stats" >"$OUT/stats-$label.json" || fail "step check ($label): registry /v1/stats"
  for i in "${!tips[@]}"; do
    curl -fsS --max-time 3 "http://${tips[$i]}:9400/metrics" >"$OUT/tm-$label-$i-after" || fail "step check ($label): trainer ${tips[$i]} /metrics"
    args+=(--trainer-metrics-after "$OUT/tm-$label-$i-after")
  done
  "$BUILD/bin/swarm" step-check --job "$SRC/examples/local-cluster.yaml" --stats "$OUT/stats-$label.json" \
    --registry-restarts "$restarts" --allow-short "${args[@]}" >"$OUT/step-check-$label.json" 2>&1
  rc=$?
  log "FIGURE step_invariant_$label $(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print("%s: completed global batches %d; stage steps %s; extra samples %s; accounted %d (%s), may take away %d; "
      "short %d" % ("ok" if r["ok"] else "none over, short" if r["none_over"] else "BAD", r["completed_global_batches"],
    json.dumps({s: v["step"] for s, v in r["stages"].items()}),
    json.dumps({s: v["extra_samples"] for s, v in r["stages"].items()}), r["accounted_samples"]["total"],
    ", ".join("%s %d" % (k, v) for k, v in r["accounted_samples"].items() if k not in ("total", "may_take_away") and v),
    r["accounted_samples"]["may_take_away"], r["short_samples"]))' "$OUT/step-check-$label.json" 2>&1)"
  [ "$rc" -eq 0 ] || { cat "$OUT/step-check-$label.json"; fail "step invariant ($label): swarm step-check exited $rc"; }
}
