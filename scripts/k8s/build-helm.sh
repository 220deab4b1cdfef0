#!/usr/bin/env bash
# Builds helm (helm.sh/helm/v3) from the Go module proxy, once per version, into
# ~/.cache/swarm-operator/helm/<version>/bin/helm (override the cache: SWARM_HELM_CACHE). The chart
# tests (tests/operator/helm_chart_test.sh) render helm/swarm-operator with it. Idempotent: a binary
# already in the cache is not rebuilt. Prints the binary's path on its last line of stdout;
# progress goes to stderr. One build job (GOFLAGS -p=1) unless SWARM_K8S_BUILD_JOBS says otherwise.
set -euo pipefail

HELM_VERSION=${SWARM_HELM_VERSION:-v3.22.0}
CACHE=${SWARM_HELM_CACHE:-$HOME/.cache/swarm-operator/helm}
JOBS=${SWARM_K8S_BUILD_JOBS:-1}
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
[ -x "$GO" ] || { echo "build-helm: no Go toolchain (set GO=/path/to/go)" >&2; exit 1; }

BIN="$CACHE/$HELM_VERSION/bin"
if [ ! -x "$BIN/helm" ]; then
  mkdir -p "$BIN"
  start=$(date +%s)
  echo "[build-helm $(date +%T)] helm $HELM_VERSION" >&2
  # GOBIN is a temporary folder so that an interrupted build never leaves a half-written binary.
  tmp=$(mktemp -d "$CACHE/$HELM_VERSION/tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  GOBIN="$tmp" GOFLAGS="-p=$JOBS -buildvcs=false" CGO_ENABLED=0 GOTOOLCHAIN=${GOTOOLCHAIN:-local} \
    "$GO" install -trimpath -ldflags=-s "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
  mv "$tmp/helm" "$BIN/helm"
  echo "[build-helm $(date +%T)] done in $(( $(date +%s) - start )) s" >&2
fi
echo "$BIN/helm"
