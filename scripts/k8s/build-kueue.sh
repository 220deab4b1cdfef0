#!/usr/bin/env bash
# Builds Kueue's controller manager (sigs.k8s.io/kueue/cmd/kueue) from the Go module proxy, once
# per version, into ~/.cache/swarm-operator/kueue/<version>/bin/kueue (override the cache:
# SWARM_KUEUE_CACHE), and copies the manifests the tests apply out of the module's own config/
# tree (the module cache holds it; nothing is written by hand) into
# ~/.cache/swarm-operator/kueue/<version>/config/:
#   crd/        config/components/crd/bases/*.yaml     (the CRDs as generated: no conversion stanza;
#               crd/patches/ holds the conversion-webhook patches; crd-kustomization.yaml, the
#               crd folder's kustomization, names those the release applies: not all of them)
#   webhook/    config/components/webhook/manifests.yaml (Mutating/ValidatingWebhookConfigurations)
#   rbac/       config/components/rbac/role.yaml (the manager's ClusterRole), manager_secrets_role.yaml
#               (its Role in its own namespace), their bindings and its ServiceAccount
#   internalcert/ config/components/internalcert/secret.yaml (the empty Secret Kueue's internal
#               certificate management fills: it must exist before Kueue starts)
#   manager/    config/components/manager/controller_manager_config.yaml (the default Configuration)
#               and manager.yaml (the release's Namespace and Deployment: scripts/k8s/kueue.sh runs it)
# Idempotent: a binary or folder already in the cache is kept. Prints the version's folder on its
# last line of stdout; progress goes to stderr. One build job (GOFLAGS -p=1) unless
# SWARM_K8S_BUILD_JOBS says otherwise, under `nice`: the machine is shared.
set -euo pipefail
KUEUE_VERSION=${SWARM_KUEUE_VERSION:-v0.17.0}
ROOT=${SWARM_KUEUE_CACHE:-$HOME/.cache/swarm-operator/kueue}/$KUEUE_VERSION
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
[ -x "$GO" ] || { echo "build-kueue: no Go toolchain (set GO=/path/to/go)" >&2; exit 1; }
export GO
# The machine is shared: the build (and everything it starts) runs at a lower priority.
renice -n 10 $$ >/dev/null 2>&1 || true

CONFIG_LAYOUT=5  # crd-kustomization.yaml, crd, crd/patches, webhook, rbac (+ secrets role), manager (+ manager.yaml), internalcert

log() { echo "[build-kueue $(date +%T)] $*" >&2; }

copy_config() {
  # .complete names the layout: a cache made by an older version of this script is copied again.
  [ "$(cat "$ROOT/config/.complete" 2>/dev/null)" = "$CONFIG_LAYOUT" ] && return 0
  local src
  src=$(GOFLAGS=-mod=mod "$GO" mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" \
        | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  [ -d "$src/config/components/crd/bases" ] || { log "FAILED: no config/ in the module ($src)"; return 1; }
  log "manifests from $src/config"
  local tmp
  tmp=$(mktemp -d "$ROOT/config.XXXXXX")
  chmod 755 "$tmp"
  mkdir -p "$tmp/crd/patches" "$tmp/webhook" "$tmp/rbac" "$tmp/manager" "$tmp/internalcert"
  cp "$src"/config/components/crd/bases/*.yaml "$tmp/crd/"
  cp "$src"/config/components/crd/patches/webhook_in_*.yaml "$tmp/crd/patches/"
  cp "$src/config/components/crd/kustomization.yaml" "$tmp/crd-kustomization.yaml"
  cp "$src/config/components/webhook/manifests.yaml" "$tmp/webhook/"
  cp "$src/config/components/rbac/role.yaml" "$src/config/components/rbac/role_binding.yaml" \
     "$src/config/components/rbac/manager_secrets_role.yaml" "$src/config/components/rbac/manager_secrets_role_binding.yaml" \
     "$src/config/components/rbac/service_account.yaml" "$tmp/rbac/"
  cp "$src/config/components/manager/controller_manager_config.yaml" "$src/config/components/manager/manager.yaml" \
     "$tmp/manager/"
  cp "$src/config/components/internalcert/secret.yaml" "$tmp/internalcert/"
  chmod -R u+w "$tmp"           # the module cache is read-only
  echo "$CONFIG_LAYOUT" > "$tmp/.complete"
  rm -rf "$ROOT/config"
  mv "$tmp" "$ROOT/config"
}

mkdir -p "$ROOT"
start=$(date +%s)
copy_config
. "$(dirname "$0")/../go-install.sh"
go_install_once build-kueue "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION" "$ROOT/bin" kueue
log "ready in $(( $(date +%s) - start )) s"
echo "$ROOT"
