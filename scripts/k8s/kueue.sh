#!/usr/bin/env bash
# Kueue in the cluster of scripts/k8s/cluster.sh, the way its release installs it: Kueue's own
# manifests (scripts/k8s/build-kueue.sh copies them out of the module, cached by version) with the
# names and namespace its release's kustomize gives them (prefix kueue-, namespace kueue-system),
# its controller manager as the release's Deployment, from the image scripts/build-images.sh
# --only kueue makes, imported into every node; its webhooks served by that pod through the
# Service kueue-webhook-service.
#   kueue.sh up         install or update (idempotent); returns once the webhooks answer, and
#                       prints the seconds that took on its last line
#   kueue.sh down       remove what `up` made (Kueue's CRDs with every Kueue object; the image
#                       stays imported)
#   kueue.sh manifests  print what `up` applies (after the CRDs)
# Differences from the release, each for this cluster: the serving certificate is made here with
# openssl (the release's internal certificate management writes it into the Secret, and a kubelet
# shows a Secret's change to a running pod only after its sync period, about a minute), so
# internalCertManagement is off and each webhook, and each CRD's conversion webhook, carries the
# CA; one replica without leader election; the pod runs on the on-demand node; the image is never
# pulled. The Configuration is the release's with the SwarmJob listed in
# integrations.externalFrameworks (examples/kueue/kueue-config.yaml), the frameworks cut to
# batch/job (the others' CRDs are not installed here) and VisibilityOnDemand off (its API server
# is not registered here). Only the webhooks of Kueue's own API group are installed, as the
# process-run Kueue of tests/operator/kueue_env.cc does.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
STATE=${SWARM_CLUSTER_STATE:-/var/lib/swarm-cluster}
NS=kueue-system
SERVICE=kueue-webhook-service
PKI=$STATE/kueue-pki

log() { echo "[kueue $(date +%T)] $*" >&2; }
die() { echo "kueue.sh: $*" >&2; exit 1; }
[ -f "$STATE/kubeconfig" ] || die "no cluster (run scripts/k8s/cluster.sh up)"
k() { kubectl --kubeconfig "$STATE/kubeconfig" "$@"; }

# The CA and the webhook's serving certificate, made once per cluster.
certificates() {
  [ -f "$PKI/tls.crt" ] && return 0
  local tmp
  tmp=$(mktemp -d "$STATE/kueue-pki.XXXXXX")
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=kueue-webhook-ca" \
    -keyout "$tmp/ca.key" -out "$tmp/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=$SERVICE.$NS.svc" -keyout "$tmp/tls.key" -out "$tmp/tls.csr" 2>/dev/null
  printf 'subjectAltName=DNS:%s,DNS:%s.%s,DNS:%s.%s.svc,DNS:%s.%s.svc.cluster.local\nextendedKeyUsage=serverAuth\n' \
    "$SERVICE" "$SERVICE" "$NS" "$SERVICE" "$NS" "$SERVICE" "$NS" > "$tmp/ext"
  openssl x509 -req -in "$tmp/tls.csr" -CA "$tmp/ca.crt" -CAkey "$tmp/ca.key" -CAcreateserial -days 3650 \
    -extfile "$tmp/ext" -out "$tmp/tls.crt" 2>/dev/null
  rm -rf "$PKI"
  mv "$tmp" "$PKI"
}

# manifests KIND: the CRDs (crds) or everything else (rest), as one YAML stream on stdout.
manifests() {
  python3 - "$1" "$CONFIG" "$IMAGE" "$PKI" "$NS" "$SERVICE" <<'PY'
import base64, glob, os, sys, yaml
what, config, image, pki, ns, service = sys.argv[1:]
ca = base64.b64encode(open(f"{pki}/ca.crt", "rb").read()).decode()
def named(name): return "kueue-" + name
def point(svc):
    svc["namespace"], svc["name"] = ns, service
out = []
if what == "crds":
    # The conversion webhooks the release's kustomize patches in (not every file in patches/).
    patches = {}
    for entry in yaml.safe_load(open(f"{config}/crd-kustomization.yaml")).get("patches", []):
        doc = yaml.safe_load(open(f"{config}/crd/{entry['path']}"))
        patches[doc["metadata"]["name"]] = doc["spec"]["conversion"]
    for p in sorted(glob.glob(f"{config}/crd/*.yaml")):
        crd = yaml.safe_load(open(p))
        conv = patches.get(crd["metadata"]["name"])
        if conv:
            point(conv["webhook"]["clientConfig"]["service"])
            conv["webhook"]["clientConfig"]["caBundle"] = ca
            crd["spec"]["conversion"] = conv
        out.append(crd)
else:
    out.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    sa = yaml.safe_load(open(f"{config}/rbac/service_account.yaml"))
    sa["metadata"].update(name=named(sa["metadata"]["name"]), namespace=ns)
    out.append(sa)
    for f in ("role", "role_binding", "manager_secrets_role", "manager_secrets_role_binding"):
        for doc in yaml.safe_load_all(open(f"{config}/rbac/{f}.yaml")):
            if not doc:
                continue
            doc["metadata"]["name"] = named(doc["metadata"]["name"])
            if doc["kind"] in ("Role", "RoleBinding"):
                doc["metadata"]["namespace"] = ns
            if "roleRef" in doc:
                doc["roleRef"]["name"] = named(doc["roleRef"]["name"])
                doc["subjects"] = [{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": ns}]
            out.append(doc)
    secret = yaml.safe_load(open(f"{config}/internalcert/secret.yaml"))
    secret_name = named(secret["metadata"]["name"])
    out.append({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": {"name": secret_name, "namespace": ns},
                "data": {n: base64.b64encode(open(f"{pki}/{n}", "rb").read()).decode()
                         for n in ("ca.crt", "tls.crt", "tls.key")}})
    cfg = yaml.safe_load(open(f"{config}/manager/controller_manager_config.yaml"))
    cfg["namespace"] = ns
    cfg["leaderElection"] = {"leaderElect": False}
    cfg["internalCertManagement"] = {"enable": False}
    cfg["integrations"] = {"frameworks": ["batch/job"],
                           "externalFrameworks": ["SwarmJob.v1alpha1.swarm-operator.io"]}
    cfg.setdefault("featureGates", {})["VisibilityOnDemand"] = False
    out.append({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "kueue-manager-config", "namespace": ns},
                "data": {"controller_manager_config.yaml": yaml.safe_dump(cfg, sort_keys=False)}})
    labels = {"app.kubernetes.io/name": "kueue", "control-plane": "controller-manager"}
    out.append({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": service, "namespace": ns},
                "spec": {"selector": labels,
                         "ports": [{"name": "https", "port": 443, "targetPort": 9443, "protocol": "TCP"}]}})
    for doc in yaml.safe_load_all(open(f"{config}/manager/manager.yaml")):
        if not doc or doc.get("kind") != "Deployment":
            continue
        doc["metadata"].update(name=named(doc["metadata"]["name"]), namespace=ns, labels=labels)
        spec = doc["spec"]
        spec["selector"] = {"matchLabels": labels}
        pod = spec["template"]
        pod["metadata"]["labels"] = labels
        ps = pod["spec"]
        ps["serviceAccountName"] = sa["metadata"]["name"]
        ps["nodeSelector"] = {"swarm-operator.io/node-class": "on-demand"}
        c = ps["containers"][0]
        c["image"], c["imagePullPolicy"] = image, "Never"
        c["args"] = ["--config=/controller_manager_config.yaml"] + c.get("args", [])
        # This machine's 2 cores: the release asks for 500m.
        c["resources"] = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}}
        c["ports"] = [{"containerPort": 9443, "name": "webhook-server", "protocol": "TCP"}]
        c["volumeMounts"] = [
            {"name": "cert", "mountPath": "/tmp/k8s-webhook-server/serving-certs", "readOnly": True},
            # Without internal certificate management the metrics endpoint wants one too.
            {"name": "cert", "mountPath": "/etc/kueue/metrics/certs", "readOnly": True},
            {"name": "manager-config", "mountPath": "/controller_manager_config.yaml",
             "subPath": "controller_manager_config.yaml"}]
        ps["volumes"] = [{"name": "cert", "secret": {"secretName": secret_name, "defaultMode": 420}},
                         {"name": "manager-config", "configMap": {"name": "kueue-manager-config"}}]
        out.append(doc)
    for doc in yaml.safe_load_all(open(f"{config}/webhook/manifests.yaml")):
        if not doc or "kind" not in doc:
            continue
        keep = []
        for wh in doc.get("webhooks") or []:
            if not any(g == "kueue.x-k8s.io" for r in wh.get("rules", []) for g in r.get("apiGroups", [])):
                continue
            point(wh["clientConfig"]["service"])
            wh["clientConfig"]["caBundle"] = ca
            keep.append(wh)
        doc["webhooks"] = keep
        doc["metadata"]["name"] = named(doc["metadata"]["name"])
        out.append(doc)
yaml.safe_dump_all(out, sys.stdout, sort_keys=False)
PY
}

prepare() {
  CONFIG=$(bash "$HERE/build-kueue.sh" | tail -n 1)/config
  IMAGE=$(bash "$ROOT/scripts/build-images.sh" --only kueue | tail -n 1)
  certificates
}

# Ready when the mutating webhook answers: a ResourceFlavor made now gets Kueue's finalizer.
webhooks_answer() {
  local probe=kueue-sh-readiness-probe f
  k create -f - >/dev/null 2>&1 <<YAML || true
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: $probe}
YAML
  f=$(k get resourceflavor $probe -o jsonpath='{.metadata.finalizers}' 2>/dev/null || true)
  k delete resourceflavor $probe --wait=false >/dev/null 2>&1 || true
  [ -n "$f" ]
}

cmd_up() {
  local t0 end
  t0=$(date +%s.%N)
  prepare
  bash "$HERE/cluster.sh" images "$IMAGE"
  # Server-side: the Workload CRD is larger than a client-side apply's annotation may be.
  manifests crds | k apply --server-side --force-conflicts --field-manager kueue.sh -f - >/dev/null
  k wait --for condition=established --timeout=60s $(k get crd -o name | grep 'kueue.x-k8s.io$') >/dev/null
  manifests rest | k apply --server-side --force-conflicts --field-manager kueue.sh -f - >/dev/null
  k -n $NS rollout status deploy/kueue-controller-manager --timeout=180s >&2 ||
    { k -n $NS logs deploy/kueue-controller-manager --tail 40 >&2 || true; die "Kueue's Deployment not ready"; }
  end=$(( $(date +%s) + 120 ))
  until webhooks_answer; do
    [ "$(date +%s)" -lt "$end" ] ||
      { k -n $NS logs deploy/kueue-controller-manager --tail 40 >&2 || true; die "Kueue's webhooks did not answer within 120 s"; }
    sleep 0.5
  done
  awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f\n", b - a}'
}

cmd_down() {
  # Kueue's objects first (their finalizers need Kueue), then Kueue, then its CRDs.
  local kind
  for kind in workloads localqueues clusterqueues resourceflavors workloadpriorityclasses cohorts; do
    k delete "$kind.kueue.x-k8s.io" -A --all --wait=false >/dev/null 2>&1 || true
  done
  k delete validatingwebhookconfiguration kueue-validating-webhook-configuration --ignore-not-found >/dev/null
  k delete mutatingwebhookconfiguration kueue-mutating-webhook-configuration --ignore-not-found >/dev/null
  k delete namespace $NS --ignore-not-found --wait=false >/dev/null
  k delete clusterrolebinding kueue-manager-rolebinding --ignore-not-found >/dev/null
  k delete clusterrole kueue-manager-role --ignore-not-found >/dev/null
  k get crd -o name | grep 'kueue.x-k8s.io$' | xargs -r kubectl --kubeconfig "$STATE/kubeconfig" delete --wait=false >/dev/null
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  manifests) prepare; manifests crds; echo ---; manifests rest ;;
  *) echo "usage: kueue.sh up | down | manifests" >&2; exit 2 ;;
esac
