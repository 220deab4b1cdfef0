# Sourced by the build scripts of single Go programs (scripts/build-minio.sh,
# scripts/k8s/build-helm.sh): go_install_once TAG PACKAGE@VERSION BIN_DIR NAME builds PACKAGE at
# VERSION from the Go module proxy into BIN_DIR/NAME unless it is there already. GOBIN is a
# temporary folder, so an interrupted build never leaves a half-written binary. One build job
# (GOFLAGS -p=1) unless SWARM_K8S_BUILD_JOBS says otherwise; progress on stderr.
go_install_once() {
  local tag=$1 pkg=$2 bin=$3 name=$4
  [ -x "$bin/$name" ] && return 0
  local go=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
  [ -x "$go" ] || { echo "$tag: no Go toolchain (set GO=/path/to/go)" >&2; return 1; }
  mkdir -p "$bin"
  local start tmp built
  start=$(date +%s)
  echo "[$tag $(date +%T)] $pkg" >&2
  tmp=$(mktemp -d "$bin/../tmp.XXXXXX")
  GOBIN="$tmp" GOFLAGS="-p=${SWARM_K8S_BUILD_JOBS:-1} -buildvcs=false" CGO_ENABLED=0 GOTOOLCHAIN=${GOTOOLCHAIN:-local} \
    "$go" install -trimpath -ldflags=-s "$pkg" >&2 || { rm -rf "$tmp"; return 1; }
  built=$(ls "$tmp")
  mv "$tmp/$built" "$bin/$name"
  rm -rf "$tmp"
  echo "[$tag $(date +%T)] done in $(( $(date +%s) - start )) s" >&2
}
