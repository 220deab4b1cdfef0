#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
# A real kube-apiserver, etcd and kube-scheduler for the operator's tests: built once from the Go
# module proxy and cached under ~/.cache/swarm-operator (about 7 minutes the first time).
bash scripts/k8s/build-testenv.sh >/dev/null
# helm for the chart's tests (helm lint/template): built once from the Go module proxy, cached the
# same way (about 4 minutes the first time).
bash scripts/k8s/build-helm.sh >/dev/null
# The node components of the local cluster (kubelet, kube-proxy, kube-controller-manager, CoreDNS)
# for the end-to-end test on real Kubernetes nodes (ctest -L cluster; scripts/k8s/cluster.sh): built
# the same way (about 15 minutes the first time on 2 cores, then cached).
bash scripts/k8s/build-cluster.sh >/dev/null
cd build
ctest --output-on-failure --timeout 600 -j 2 "$@"
