#!/usr/bin/env bash
# Builds helm (helm.sh/helm/v3) from the Go module proxy, once per version, into
# ~/.cache/swarm-operator/helm/<version>/bin/helm (override the cache: SWARM_HELM_CACHE). The chart
# tests (tests/operator/helm_chart_test.sh) render helm/swarm-operator with it. Idempotent: a binary
# already in the cache is not rebuilt. Prints the binary's path on its last line of stdout;
# progress goes to stderr. One build job (GOFLAGS -p=1) unless SWARM_K8S_BUILD_JOBS says otherwise.
set -euo pipefail
HELM_VERSION=${SWARM_HELM_VERSION:-v3.22.0}
BIN=${SWARM_HELM_CACHE:-$HOME/.cache/swarm-operator/helm}/$HELM_VERSION/bin
. "$(dirname "$0")/../go-install.sh"
go_install_once build-helm "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" "$BIN" helm
echo "$BIN/helm"
