#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
# The Go-built binaries, built once from the Go module proxy and cached by version under
# ~/.cache/swarm-operator, are built beside the C++ build (cold, both together take about 25 minutes
# on 2 cores; cached, seconds):
#   build-testenv.sh   a real kube-apiserver, etcd and kube-scheduler for the operator's tests
#   build-helm.sh      helm for the chart's tests (helm lint/template)
#   build-cluster.sh   the node components of the local cluster (kubelet, kube-proxy,
#                      kube-controller-manager, CoreDNS, Prometheus) for the end-to-end test on real
#                      Kubernetes nodes (ctest -L cluster; scripts/k8s/cluster.sh)
#   build-minio.sh     MinIO, the S3 server the object-storage checkpoint tests write to
go_log=$(mktemp /tmp/swarm-go-build.XXXXXX.log)
( bash scripts/k8s/build-testenv.sh && bash scripts/k8s/build-helm.sh && bash scripts/k8s/build-cluster.sh &&
  bash scripts/build-minio.sh ) \
  >"$go_log" 2>&1 &
go_pid=$!
trap 'kill "$go_pid" 2>/dev/null || true' EXIT
bash scripts/build.sh
if ! wait "$go_pid"; then
  tail -n 40 "$go_log" >&2
  echo "scripts/test.sh: building the Go test binaries failed (log: $go_log)" >&2
  exit 1
fi
trap - EXIT
rm -f "$go_log"
cd build
ctest --output-on-failure --timeout 600 -j 2 "$@"
