# Object storage on real kubelets, a phase of cluster_e2e_test.sh (sourced; it uses that script's
# k, log, fail, wait_until, now, since, $SRC, $OUT): a MinIO server (scripts/build-minio.sh) on the
# control plane's address, which the pods reach through their node's bridge; a Secret with its
# credentials; a 2-stage job on the on-demand pool whose checkpoint path is s3:// with
# spec.checkpoint.s3.credentialsSecret. It trains to its last step; trainer 0 exports the model to
# the bucket and status.exportedModel names it; the checkpoints and the model are in the bucket
# (each stage's manifest of the last step); the job is deleted. MinIO is stopped by the e2e's
# cleanup (it kills its background jobs) or at the end of the phase.
s3_phase() {
  local job=s3-lm creds=e2e-minio-creds host port ep minio t sig expect
  host=$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}' | sed -E 's#^https?://([^:/]+).*#\1#')
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  ep="http://$host:$port"
  minio=$(bash "$SRC/scripts/build-minio.sh" | tail -n 1) || fail "scripts/build-minio.sh"
  MINIO_ROOT_USER=e2e-access MINIO_ROOT_PASSWORD=e2e-secret-key MINIO_BROWSER=off \
    "$minio" server "$OUT/minio" --quiet --address "$host:$port" --console-address "127.0.0.1:$((port + 1))" \
    >"$OUT/minio.log" 2>&1 &
  local minio_pid=$!
  wait_until 60 "MinIO at $ep" curl -sf -o /dev/null "$ep/minio/health/live"
  sig=(--aws-sigv4 "aws:amz:us-east-1:s3" -u e2e-access:e2e-secret-key)
  curl -sf -o /dev/null "${sig[@]}" -X PUT "$ep/e2e" || { cat "$OUT/minio.log"; fail "create bucket e2e"; }
  k create secret generic $creds --from-literal=AWS_ACCESS_KEY_ID=e2e-access \
    --from-literal=AWS_SECRET_ACCESS_KEY=e2e-secret-key >/dev/null || fail "create secret $creds"
  t=$(now)
  k apply -f - >/dev/null <<YAML || fail "kubectl apply $job"
apiVersion: swarm-operator.io/v1alpha1
kind: SwarmJob
metadata: {name: $job}
spec:
  model: {vocabSize: 256, hiddenSize: 64, numHeads: 4, layersPerStage: 1, sequenceLength: 64}
  pipeline: {stages: 2}
  training:
    globalBatch: 16
    microbatch: 4
    maxSteps: 40
    dataset: {path: /usr/share/games/fortunes}
    schedule: {kind: constant, warmupSteps: 5}
  workers:
    perStage: 1
    device: cpu
    threads: 1
    image: localhost/swarm-worker:dev
    resources: {requests: {cpu: 100m, memory: 256Mi}, limits: {memory: 1Gi}}
  trainers:
    count: 1
    resources: {requests: {cpu: 100m, memory: 128Mi}, limits: {memory: 1Gi}}
  rebalancing: {enabled: false}
  checkpoint:
    path: s3://e2e/runs
    everySteps: 10
    s3: {endpoint: "$ep", credentialsSecret: $creds}
  nodePools:
  - name: on-demand
    region: us-central1
    nodeSelector: {swarm-operator.io/node-class: on-demand}
    preemptible: false
    priority: 10
YAML
  expect="s3://e2e/runs/$job/export/model.safetensors"
  exported() { [ "$(kubectl get swarmjob "$1" -o jsonpath='{.status.exportedModel}')" = "$2" ]; }
  wait_until 420 "status.exportedModel = $expect" exported $job "$expect"
  log "FIGURE s3_apply_to_exported_model_seconds $(since "$t") (status.exportedStep $(k get swarmjob $job -o jsonpath='{.status.exportedStep}'))"
  [ "$(k get swarmjob $job -o jsonpath='{.status.exportedStep}')" -ge 40 ] || fail "exportedStep below maxSteps 40"
  for key in runs/$job/export/model.safetensors runs/$job/export/config.json \
             runs/$job/stage-0/step-000000040.manifest.json runs/$job/stage-1/step-000000040.manifest.json; do
    curl -sf -o /dev/null "${sig[@]}" "$ep/e2e/$key" || fail "s3://e2e/$key is not in the bucket"
  done
  grep -q ModelExported <<<"$(k get events --field-selector involvedObject.name=$job -o jsonpath='{.items[*].reason}')" ||
    fail "no ModelExported event for $job"
  log "s3 job: checkpoints and the exported model in MinIO; $(k get swarmjob $job -o jsonpath='{.status.exportedModel}')"
  k delete swarmjob $job --wait=false >/dev/null || fail "delete swarmjob $job"
  s3_job_gone() { [ -z "$(kubectl get pods -l swarm-operator.io/job=$1 -o name 2>/dev/null)" ]; }
  wait_until 120 "every pod of $job gone" s3_job_gone $job
  k delete secret $creds >/dev/null || fail "delete secret $creds"
  kill "$minio_pid" 2>/dev/null
  wait "$minio_pid" 2>/dev/null
  return 0
}
