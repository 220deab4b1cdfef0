#!/usr/bin/env bash
# Builds what scripts/k8s/cluster.sh needs beyond the test control plane, from the Go module proxy,
# once per version, into the same cache as scripts/k8s/build-testenv.sh
# (~/.cache/swarm-operator/k8s/<version>/bin; override: SWARM_K8S_CACHE):
#   etcd, kube-apiserver, kube-scheduler    (scripts/k8s/build-testenv.sh, run first)
#   kubelet, kube-proxy, kube-controller-manager
#                                           (k8s.io/kubernetes, staging modules pinned by `replace`,
#                                            versioned with -ldflags -X so nodes report the release)
#   coredns                                 (github.com/coredns/coredns)
#   prometheus                              (github.com/prometheus/prometheus, Kubernetes discovery)
#   pause                                   (a static C program, for the pods' sandbox image)
# Idempotent: a binary already in the cache is not rebuilt. Prints the bin directory on its last
# line of stdout; progress goes to stderr. One build job (GOFLAGS -p=1) unless
# SWARM_K8S_BUILD_JOBS says otherwise.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)

K8S_VERSION=${SWARM_K8S_VERSION:-v1.36.3}
COREDNS_VERSION=${SWARM_COREDNS_VERSION:-v1.15.0}
PROMETHEUS_VERSION=${SWARM_PROMETHEUS_VERSION:-3.16.0}
PROMETHEUS_MODULE_VERSION=v0.$(( ${PROMETHEUS_VERSION%%.*} * 100 + $(echo "$PROMETHEUS_VERSION" | cut -d. -f2) )).$(echo "$PROMETHEUS_VERSION" | cut -d. -f3)
CACHE=${SWARM_K8S_CACHE:-$HOME/.cache/swarm-operator/k8s}
JOBS=${SWARM_K8S_BUILD_JOBS:-1}
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
[ -x "$GO" ] || { echo "build-cluster: no Go toolchain (set GO=/path/to/go; Go >= 1.26 is needed)" >&2; exit 1; }

BIN="$CACHE/$K8S_VERSION/bin"
log() { echo "[build-cluster $(date +%T)] $*" >&2; }
start=$(date +%s)

# The control plane of the tests first (same cache, same pins).
[ "${SWARM_CLUSTER_SKIP_TESTENV:-0}" = 1 ] || bash "$HERE/build-testenv.sh" >/dev/null
mkdir -p "$BIN"
export GOFLAGS="-p=$JOBS -buildvcs=false -mod=mod"
export CGO_ENABLED=0
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}

# A module of its own (not build-testenv's src-kubernetes), so that the two scripts never edit one
# go.mod at the same time; the pins are the same, so the build cache is shared.
build_k8s_nodes() {
  local need=()
  for b in kube-proxy kubelet kube-controller-manager; do [ -x "$BIN/$b" ] || need+=("$b"); done
  [ ${#need[@]} -eq 0 ] && return 0
  local staging="v0.${K8S_VERSION#v1.}"
  local dir="$CACHE/$K8S_VERSION/src-kubernetes-nodes"
  log "kubernetes $K8S_VERSION (staging $staging): ${need[*]}"
  mkdir -p "$dir"
  local gomod
  gomod=$(cd "$dir" && "$GO" mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [ -s "$gomod" ] || { log "FAILED: go mod download k8s.io/kubernetes@$K8S_VERSION (no go.mod)"; return 1; }
  {
    echo "module swarm-testenv/src-kubernetes-nodes"
    echo
    grep -m1 '^go ' "$gomod"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    sed -n 's#^[[:space:]]*\([^[:space:]]*\)[[:space:]]*=>[[:space:]]*\.\{1,2\}/.*#replace \1 => \1 '"$staging"'#p' "$gomod" \
      | grep -v "^replace k8s.io/kubernetes " || true
  } > "$dir/go.mod"
  (cd "$dir" && "$GO" get "k8s.io/kubernetes/cmd/kubelet@$K8S_VERSION" \
                         "k8s.io/kubernetes/cmd/kube-proxy@$K8S_VERSION" \
                         "k8s.io/kubernetes/cmd/kube-controller-manager@$K8S_VERSION" >&2)
  local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local ver="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1"
  ver+=" -X k8s.io/component-base/version.gitMinor=$minor"
  for b in "${need[@]}"; do
    log "go build $b"
    (cd "$dir" && "$GO" build -trimpath -ldflags="-s $ver" -o "$BIN/$b.tmp" "k8s.io/kubernetes/cmd/$b" >&2)
    mv "$BIN/$b.tmp" "$BIN/$b"
  done
}

build_coredns() {
  [ -x "$BIN/coredns" ] && return 0
  local dir="$CACHE/$K8S_VERSION/src-coredns"
  log "coredns $COREDNS_VERSION"
  mkdir -p "$dir"
  [ -f "$dir/go.mod" ] || (cd "$dir" && "$GO" mod init swarm-testenv/coredns >&2)
  (cd "$dir" && "$GO" get "github.com/coredns/coredns@$COREDNS_VERSION" >&2)
  (cd "$dir" && "$GO" build -trimpath -ldflags=-s -o "$BIN/coredns.tmp" github.com/coredns/coredns >&2)
  mv "$BIN/coredns.tmp" "$BIN/coredns"
}

# The pods' sandbox ("pause") program: sleeps until a signal ends it, reaps children. Static, so
# that its image is just the binary.
build_pause() {
  [ -x "$BIN/pause" ] && return 0
  log "pause"
  local tmp
  tmp=$(mktemp -d)
  cat > "$tmp/pause.c" <<'C'
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static void quit(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }
int main(void) {
  signal(SIGINT, quit);
  signal(SIGTERM, quit);
  signal(SIGCHLD, reap);
  for (;;) pause();
}
C
  cc -static -O2 -o "$tmp/pause" "$tmp/pause.c"
  strip "$tmp/pause"
  mv "$tmp/pause" "$BIN/pause"
  rm -rf "$tmp"
}

# Prometheus with Kubernetes service discovery: Debian's `prometheus` package is built without it
# (its config parser says "field kubernetes_sd_configs not found in type config.ScrapeConfig"), so
# scripts/k8s/prometheus.sh runs this one. Build tags keep only the Kubernetes, file and HTTP
# discovery; no web UI assets (the HTTP API is what the dashboard and the tests use).
build_prometheus() {
  [ -x "$BIN/prometheus" ] && return 0
  local dir="$CACHE/$K8S_VERSION/src-prometheus" tags=remove_all_sd,enable_kubernetes_sd
  log "prometheus $PROMETHEUS_MODULE_VERSION (Prometheus $PROMETHEUS_VERSION, tags $tags)"
  mkdir -p "$dir"
  [ -f "$dir/go.mod" ] || (cd "$dir" && "$GO" mod init swarm-testenv/prometheus >&2)
  (cd "$dir" && GOFLAGS="$GOFLAGS -tags=$tags" "$GO" get "github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_MODULE_VERSION" >&2)
  (cd "$dir" && "$GO" build -tags "$tags" -trimpath \
     -ldflags="-s -X github.com/prometheus/common/version.Version=$PROMETHEUS_VERSION" \
     -o "$BIN/prometheus.tmp" github.com/prometheus/prometheus/cmd/prometheus >&2)
  mv "$BIN/prometheus.tmp" "$BIN/prometheus"
}

build_pause
build_k8s_nodes
build_coredns
build_prometheus
log "done in $(( $(date +%s) - start )) s"
echo "$BIN"
