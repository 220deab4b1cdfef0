#!/usr/bin/env bash
# Builds the binaries of the operator's integration-test control plane from the Go module proxy,
# once per version, into ~/.cache/swarm-operator/k8s/<version>/bin (override: SWARM_K8S_CACHE):
#   kube-apiserver, kube-scheduler  (k8s.io/kubernetes, staging modules pinned by `replace`)
#   etcd                            (go.etcd.io/etcd/server/v3, sibling modules pinned by `replace`)
#   kubectl                         (k8s.io/kubernetes, only when no kubectl is on PATH)
#   kwok                            (sigs.k8s.io/kwok, plain `go install`; only with SWARM_K8S_WITH_KWOK=1,
#                                    the tests simulate kubelets themselves)
# Idempotent: a binary already in the cache is not rebuilt. Prints the bin directory on its last
# line of stdout. Progress goes to stderr. Uses one build job (GOFLAGS -p=1) unless
# SWARM_K8S_BUILD_JOBS says otherwise, to leave the other cores to whoever else is busy.
set -euo pipefail

K8S_VERSION=${SWARM_K8S_VERSION:-v1.36.3}
ETCD_VERSION=${SWARM_ETCD_VERSION:-v3.6.16}
KWOK_VERSION=${SWARM_KWOK_VERSION:-v0.7.0}
CACHE=${SWARM_K8S_CACHE:-$HOME/.cache/swarm-operator/k8s}
JOBS=${SWARM_K8S_BUILD_JOBS:-1}
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
[ -x "$GO" ] || { echo "build-testenv: no Go toolchain (set GO=/path/to/go; Go >= 1.26 is needed)" >&2; exit 1; }

BIN="$CACHE/$K8S_VERSION/bin"
mkdir -p "$BIN"
export GOFLAGS="-p=$JOBS -buildvcs=false -mod=mod"
export CGO_ENABLED=0
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}

log() { echo "[build-testenv $(date +%T)] $*" >&2; }

# pinned_module DIR MODULE VERSION STAGING_PREFIX STAGING_VERSION
# Makes DIR a Go module that requires MODULE@VERSION and pins every module that MODULE's own go.mod
# replaces with a local path (staging/sibling modules) to STAGING_VERSION on the proxy instead.
pinned_module() {
  local dir=$1 module=$2 version=$3 staging_version=$4
  mkdir -p "$dir"
  local gomod
  gomod=$(cd "$dir" && "$GO" mod download -json "$module@$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [ -s "$gomod" ] || { log "FAILED: go mod download $module@$version (no go.mod)"; return 1; }
  {
    echo "module swarm-testenv/$(basename "$dir")"
    echo
    grep -m1 '^go ' "$gomod"
    echo
    echo "require $module $version"
    echo
    # `replace X => ./staging/...` or `=> ../api` in the upstream go.mod: pin to the proxy release.
    sed -n 's#^[[:space:]]*\([^[:space:]]*\)[[:space:]]*=>[[:space:]]*\.\{1,2\}/.*#replace \1 => \1 '"$staging_version"'#p' "$gomod" \
      | grep -v "^replace $module " || true
  } > "$dir/go.mod"
}

# Whether $BIN/$1 is there and reports $K8S_VERSION: built without the version -X flags (as this
# script once did) it says v0.0.0-master, which clients that check the server's version refuse to
# parse (Kueue's controller manager exits on it).
versioned() { [ -x "$BIN/$1" ] && "$BIN/$1" --version 2>/dev/null | grep -qF "$K8S_VERSION"; }

build_k8s() {
  local need=()
  versioned kube-apiserver || need+=(kube-apiserver)
  versioned kube-scheduler || need+=(kube-scheduler)
  if ! command -v kubectl >/dev/null 2>&1 && [ ! -x "$BIN/kubectl" ]; then need+=(kubectl); fi
  [ ${#need[@]} -eq 0 ] && return 0
  local staging="v0.${K8S_VERSION#v1.}"
  local dir="$CACHE/$K8S_VERSION/src-kubernetes"
  log "kubernetes $K8S_VERSION (staging $staging): ${need[*]}"
  pinned_module "$dir" k8s.io/kubernetes "$K8S_VERSION" "$staging"
  (cd "$dir" && "$GO" get "k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION" \
                         "k8s.io/kubernetes/cmd/kube-scheduler@$K8S_VERSION" \
                         "k8s.io/kubernetes/cmd/kubectl@$K8S_VERSION" >&2)
  local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local ver="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1"
  ver+=" -X k8s.io/component-base/version.gitMinor=$minor"
  for b in "${need[@]}"; do
    log "go build $b"
    (cd "$dir" && "$GO" build -trimpath -ldflags="-s $ver" -o "$BIN/$b.tmp" "k8s.io/kubernetes/cmd/$b" >&2)
    mv "$BIN/$b.tmp" "$BIN/$b"
  done
}

build_etcd() {
  [ -x "$BIN/etcd" ] && return 0
  local dir="$CACHE/$K8S_VERSION/src-etcd"
  log "etcd $ETCD_VERSION"
  pinned_module "$dir" go.etcd.io/etcd/server/v3 "$ETCD_VERSION" "$ETCD_VERSION"
  (cd "$dir" && "$GO" get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2)
  (cd "$dir" && "$GO" build -trimpath -ldflags=-s -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3 >&2)
  mv "$BIN/etcd.tmp" "$BIN/etcd"
}

build_kwok() {
  [ -x "$BIN/kwok" ] && return 0
  log "kwok $KWOK_VERSION"
  GOBIN="$BIN" GOFLAGS="-p=$JOBS -buildvcs=false" "$GO" install -trimpath -ldflags=-s \
    "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" >&2
}

start=$(date +%s)
build_etcd
build_k8s
if [ "${SWARM_K8S_WITH_KWOK:-0}" = 1 ]; then build_kwok; fi
log "done in $(( $(date +%s) - start )) s"
echo "$BIN"
