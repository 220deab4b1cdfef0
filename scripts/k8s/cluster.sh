#!/usr/bin/env bash
# A one-machine Kubernetes cluster of real components, for running the operator, its chart and
# SwarmJobs end to end (docs/operator.md, "On a local Kubernetes cluster" in README.md):
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler       (control plane, 10.77.0.1)
#   N nodes (default 4), each its own containerd + runc + kubelet       (node i: 10.77.0.1<i>)
#   CNI bridge networking (one bridge per node, pods of node i in 10.78.<i>.0/24), one kube-proxy
#   (iptables), CoreDNS as a Deployment (Service 10.79.0.10), and a ReadWriteMany PersistentVolume
#   `swarm-shared` (a folder every node sees, as a cloud file share; shared_storage below)
# Binaries: scripts/k8s/build-cluster.sh (Go module proxy, cached by version); containerd, runc and
# the CNI plugins from Debian (installed only when missing). Images: the project's
# (scripts/build-images.sh --prebuilt build/bin when missing), a pause and a CoreDNS image, all
# imported into every node's containerd (pods use them with imagePullPolicy Never/IfNotPresent).
#
# Nodes carry the labels and taints of examples/multi-region-spot.yaml's pools: node 1..N-1 are GKE
# spot nodes (cloud.google.com/gke-spot=true, taint cloud.google.com/gke-spot=true:NoSchedule), the
# first half in us-central1, the rest in europe-west4; node N is on-demand
# (swarm-operator.io/node-class=on-demand, no taint). Each has topology.kubernetes.io/region/zone.
#
#   cluster.sh up [--nodes N]   start (idempotent: what runs is kept, what is missing is started)
#   cluster.sh down             stop and remove everything `up` made: processes, pods' containers,
#                               mounts, network namespaces, iptables chains, bridges, routes,
#                               cgroups, sysctls, state (also after a failed or partial `up`)
#   cluster.sh status           processes, nodes and pods; exit 1 when the cluster is not up
#   cluster.sh leftovers        what of the cluster exists on this machine (empty after `down`);
#                               exit 1 when something is left
#   cluster.sh images [IMAGE...] (re)import the project's images into every node (after a rebuild);
#                               with IMAGEs, those (from buildah's storage) instead
#   cluster.sh node-stop I      stop node I's kubelet and containerd and kill its containers
#                               (a node lost without notice); node-start I brings it back
#   cluster.sh apiserver-restart [SECONDS]
#                               stop the API server for SECONDS (default 10), start it again
#                               (and the scheduler after it)
#   cluster.sh env              prints `export KUBECONFIG=...`
# Needs root. State: /var/lib/swarm-cluster and /run/swarm-cluster (SWARM_CLUSTER_STATE/_RUN).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

STATE=${SWARM_CLUSTER_STATE:-/var/lib/swarm-cluster}
RUN=${SWARM_CLUSTER_RUN:-/run/swarm-cluster}
NODES_DEFAULT=4
NET_PREFIX=10.77.0           # control plane .1, node i .1<i> (i < 10)
POD_PREFIX=10.78             # node i: 10.78.<i>.0/24
POD_CIDR=10.78.0.0/16
SVC_CIDR=10.79.0.0/24
SVC_API=10.79.0.1
SVC_DNS=10.79.0.10
API=$NET_PREFIX.1
NODE_BRIDGE=swc-nodes
KUBECONFIG_FILE=$STATE/kubeconfig
COREDNS_VERSION=${SWARM_COREDNS_VERSION:-v1.15.0}
PAUSE_IMAGE=localhost/swarm-pause:1
COREDNS_IMAGE=localhost/swarm-coredns:$COREDNS_VERSION
SWARM_IMAGES=(localhost/swarm-worker:dev localhost/swarm-operator:dev)
# Kernel settings the components change (kubelet, kube-proxy, the CNI bridge plugin): saved at the
# first `up`, restored by `down`.
SYSCTLS=(net.ipv4.ip_forward net.ipv4.conf.all.route_localnet vm.overcommit_memory vm.panic_on_oom
         kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes
         net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables
         net.netfilter.nf_conntrack_max)

log() { echo "[cluster $(date +%T)] $*" >&2; }
# grep that reads all its input (grep -q exits at the first match, and the writer's SIGPIPE then
# fails the pipeline under pipefail)
has() { grep "$@" >/dev/null; }
# put FILE < CONTENT: writes FILE only when CONTENT differs (kube-proxy exits when its
# configuration file changes, so a repeated `up` must leave it alone)
put() { local t; t=$(mktemp "$1.XXXXXX"); cat > "$t"; if cmp -s "$t" "$1"; then rm -f "$t"; else mv "$t" "$1"; fi; }
die() { echo "cluster.sh: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, bridges, iptables, mounts)"

KUBECTL=${KUBECTL:-$(command -v kubectl || true)}
kc() { "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

node_count() { if [ -f "$STATE/nodes" ]; then cat "$STATE/nodes"; else echo "$NODES_DEFAULT"; fi; }
node_name() { echo "node-$1"; }
node_ip() { echo "$NET_PREFIX.1$1"; }
node_dir() { echo "$STATE/node-$1"; }
node_run() { echo "$RUN/node-$1"; }
node_sock() { echo "$RUN/node-$1/containerd.sock"; }
node_bridge() { echo "swc-br$1"; }
ctr_node() { local i=$1; shift; ctr --address "$(node_sock "$i")" --namespace k8s.io "$@"; }

# The pools: node N (the last) is on-demand, the first half of the rest spot in us-central1, the
# other half spot in europe-west4.
node_pool() { # I N -> "class region zone"
  local i=$1 n=$2 us
  us=$(( n / 2 )); [ "$us" -ge 1 ] || us=1
  if [ "$i" -eq "$n" ]; then echo "on-demand us-central1 us-central1-c"
  elif [ "$i" -le "$us" ]; then echo "spot us-central1 us-central1-$(printf "\\x$(printf %x $((96 + i)))")"
  else echo "spot europe-west4 europe-west4-$(printf "\\x$(printf %x $((96 + i - us)))")"; fi
}

# --- processes ---------------------------------------------------------------------------------
alive() { local f=$1; [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null; }
# start NAME LOG COMMAND...: runs COMMAND in its own session, pid in $STATE/pids/NAME.pid; no-op
# when that process still runs.
start() {
  local name=$1 logf=$2; shift 2
  local pidf=$STATE/pids/$name.pid
  if alive "$pidf"; then return 0; fi
  mkdir -p "$STATE/pids" "$(dirname "$logf")"
  setsid --fork sh -c 'echo $$ > "$1"; shift; exec "$@"' sh "$pidf" "$@" >>"$logf" 2>&1 </dev/null
  for _ in $(seq 1 50); do [ -s "$pidf" ] && break; sleep 0.1; done
  log "started $name (pid $(cat "$pidf"))"
}
stop() { # NAME [SECONDS]
  local pidf=$STATE/pids/$1.pid wait=${2:-10} pid
  [ -f "$pidf" ] || return 0
  pid=$(cat "$pidf")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 $((wait * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    log "stopped $1"
  fi
  rm -f "$pidf"
}
wait_for() { # SECONDS WHAT COMMAND...
  local secs=$1 what=$2; shift 2
  for _ in $(seq 1 $((secs * 2))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
  die "timed out after ${secs}s waiting for $what"
}

# --- packages and binaries ---------------------------------------------------------------------
ensure_packages() {
  local missing=() p
  for p in containerd runc containernetworking-plugins iptables conntrack openssl buildah curl; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | has "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "apt-get install ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 \
    || { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2; }
}
BIN=""
ensure_binaries() {
  BIN=$(bash "$HERE/build-cluster.sh" | tail -n 1)
  local b
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy coredns pause; do
    [ -x "$BIN/$b" ] || die "$BIN/$b missing after scripts/k8s/build-cluster.sh"
  done
  [ -n "$KUBECTL" ] || KUBECTL=$BIN/kubectl
  [ -x "$KUBECTL" ] || die "no kubectl (not on PATH, not in $BIN)"
}

# --- certificates and kubeconfigs --------------------------------------------------------------
cert() { # NAME SUBJECT EXT
  local d=$STATE/pki name=$1 subj=$2 ext=$3
  [ -f "$d/$name.crt" ] && return 0
  openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -out "$d/$name.key"
  openssl req -new -key "$d/$name.key" -subj "$subj" -out "$d/$name.csr" 2>/dev/null
  printf '%s\n' "$ext" > "$d/$name.ext"
  openssl x509 -req -in "$d/$name.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 3650 -sha256 \
    -extfile "$d/$name.ext" -out "$d/$name.crt" 2>/dev/null
}
kubeconfig() { # FILE CERTNAME
  cat > "$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: swarm-cluster
  cluster: {server: "https://$API:6443", certificate-authority: "$STATE/pki/ca.crt"}
users:
- name: $2
  user: {client-certificate: "$STATE/pki/$2.crt", client-key: "$STATE/pki/$2.key"}
contexts:
- name: swarm-cluster
  context: {cluster: swarm-cluster, user: $2, namespace: default}
current-context: swarm-cluster
KC
}
make_pki() {
  local d=$STATE/pki n i
  mkdir -p "$d"
  if [ ! -f "$d/ca.crt" ]; then
    openssl ecparam -name prime256v1 -genkey -noout -out "$d/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$d/ca.key" -sha256 -days 3650 -subj "/CN=swarm-cluster-ca" -out "$d/ca.crt" 2>/dev/null
    openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
    openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
  fi
  cert apiserver "/CN=kube-apiserver" \
    "$(printf 'subjectAltName=IP:%s,IP:%s,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth' "$API" "$SVC_API")"
  cert admin "/O=system:masters/CN=swarm-cluster-admin" "extendedKeyUsage=clientAuth"
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "extendedKeyUsage=clientAuth"
  cert controller-manager "/CN=system:kube-controller-manager" "extendedKeyUsage=clientAuth"
  cert scheduler "/CN=system:kube-scheduler" "extendedKeyUsage=clientAuth"
  cert kube-proxy "/CN=system:kube-proxy" "extendedKeyUsage=clientAuth"
  kubeconfig "$KUBECONFIG_FILE" admin
  kubeconfig "$STATE/controller-manager.kubeconfig" controller-manager
  kubeconfig "$STATE/scheduler.kubeconfig" scheduler
  kubeconfig "$STATE/kube-proxy.kubeconfig" kube-proxy
  n=$(node_count)
  for i in $(seq 1 "$n"); do
    mkdir -p "$(node_dir "$i")"
    cert "node-$i" "/O=system:nodes/CN=system:node:$(node_name "$i")" "extendedKeyUsage=clientAuth"
    kubeconfig "$(node_dir "$i")/kubelet.kubeconfig" "node-$i"
  done
}

# --- host network ------------------------------------------------------------------------------
save_host_state() {
  [ -f "$STATE/host/sysctl" ] && return 0
  mkdir -p "$STATE/host"
  local s
  for s in "${SYSCTLS[@]}"; do
    [ -e "/proc/sys/${s//.//}" ] && echo "$s=$(cat "/proc/sys/${s//.//}")"
  done > "$STATE/host/sysctl.tmp"
  for d in /run/containerd /var/lib/cni /run/netns /var/run/netns /var/lib/kubelet /opt/cni /var/log/containers /var/log/pods; do
    [ -e "$d" ] && echo "$d"
  done > "$STATE/host/existed"
  ls -d /sys/fs/cgroup/*/k8s.io 2>/dev/null >> "$STATE/host/existed" || true
  mv "$STATE/host/sysctl.tmp" "$STATE/host/sysctl"
}
host_network() {
  local n i
  n=$(node_count)
  ip link show "$NODE_BRIDGE" >/dev/null 2>&1 || ip link add "$NODE_BRIDGE" type bridge
  ip link set "$NODE_BRIDGE" up
  ip addr show dev "$NODE_BRIDGE" | has "inet $API/24" || ip addr add "$API/24" dev "$NODE_BRIDGE"
  for i in $(seq 1 "$n"); do
    ip addr show dev "$NODE_BRIDGE" | has "inet $(node_ip "$i")/24" || ip addr add "$(node_ip "$i")/24" dev "$NODE_BRIDGE"
  done
  # Service addresses never leave the machine (kube-proxy rewrites them before routing).
  ip route show type blackhole | has "^blackhole $SVC_CIDR" || ip route add blackhole "$SVC_CIDR"
  # Pods of one node reach those of another through the host.
  sysctl -qw net.ipv4.ip_forward=1
  echo "nameserver $SVC_DNS" > "$STATE/resolv.conf"
}

# --- control plane -----------------------------------------------------------------------------
# --enable-aggregator-routing: the API server calls webhooks (Kueue's, scripts/k8s/kueue.sh) at
# their Service's endpoints, not its ClusterIP: this host does not reach Service addresses (their
# range is a blackhole route here; kube-proxy serves them to pods).
start_apiserver() {
  start kube-apiserver "$STATE/logs/kube-apiserver.log" "$BIN/kube-apiserver" \
    --etcd-servers "http://$API:2379" --bind-address "$API" --advertise-address "$API" --secure-port 6443 \
    --cert-dir "$STATE/pki/generated" --tls-cert-file "$STATE/pki/apiserver.crt" --tls-private-key-file "$STATE/pki/apiserver.key" \
    --client-ca-file "$STATE/pki/ca.crt" \
    --kubelet-client-certificate "$STATE/pki/apiserver-kubelet-client.crt" --kubelet-client-key "$STATE/pki/apiserver-kubelet-client.key" \
    --service-account-key-file "$STATE/pki/sa.pub" --service-account-signing-key-file "$STATE/pki/sa.key" \
    --service-account-issuer https://kubernetes.default.svc --api-audiences https://kubernetes.default.svc \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --kubelet-preferred-address-types InternalIP,Hostname \
    --service-cluster-ip-range "$SVC_CIDR" --allow-privileged \
    --enable-aggregator-routing=true --v 0
  wait_for 120 "kube-apiserver /readyz" kc get --raw /readyz
}
control_plane() {
  mkdir -p "$STATE/logs"
  start etcd "$STATE/logs/etcd.log" "$BIN/etcd" --name swarm-cluster --data-dir "$STATE/etcd" \
    --listen-client-urls "http://$API:2379" --advertise-client-urls "http://$API:2379" \
    --listen-peer-urls "http://$API:2380" --initial-advertise-peer-urls "http://$API:2380" \
    --initial-cluster "swarm-cluster=http://$API:2380" --unsafe-no-fsync --log-level warn
  wait_for 60 "etcd" curl -fsS "http://$API:2379/health"
  start_apiserver
  start kube-controller-manager "$STATE/logs/kube-controller-manager.log" "$BIN/kube-controller-manager" \
    --kubeconfig "$STATE/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$STATE/controller-manager.kubeconfig" --authorization-kubeconfig "$STATE/controller-manager.kubeconfig" \
    --bind-address "$API" --secure-port 10257 --leader-elect=false \
    --service-account-private-key-file "$STATE/pki/sa.key" --root-ca-file "$STATE/pki/ca.crt" \
    --use-service-account-credentials --service-cluster-ip-range "$SVC_CIDR" \
    --node-monitor-grace-period 20s --v 0
  start_scheduler
}
start_scheduler() {
  start kube-scheduler "$STATE/logs/kube-scheduler.log" "$BIN/kube-scheduler" \
    --kubeconfig "$STATE/scheduler.kubeconfig" \
    --authentication-kubeconfig "$STATE/scheduler.kubeconfig" --authorization-kubeconfig "$STATE/scheduler.kubeconfig" \
    --bind-address "$API" --secure-port 10259 --leader-elect=false --v 0
}

# --- images ------------------------------------------------------------------------------------
BUILDAH=(buildah --storage-driver vfs)
image_id() { { "${BUILDAH[@]}" images --noheading --quiet --no-trunc "$1" 2>/dev/null || true; } | head -1 | sed 's/^sha256://'; }
scratch_image() { # IMAGE BINARY ARGS...: a FROM-scratch image of one static binary
  local image=$1 binary=$2; shift 2
  [ -n "$(image_id "$image")" ] && return 0
  local c
  c=$("${BUILDAH[@]}" from scratch)
  "${BUILDAH[@]}" copy --chown 0:0 "$c" "$binary" "/$(basename "$binary")" >/dev/null
  local entry="[\"/$(basename "$binary")\""
  [ $# -gt 0 ] && entry+=$(printf ', "%s"' "$@")
  "${BUILDAH[@]}" config --entrypoint "$entry]" --cmd '[]' "$c"
  "${BUILDAH[@]}" commit --quiet --rm "$c" "$image" >/dev/null
  log "image $image made"
}
ensure_images() {
  export STORAGE_DRIVER=vfs BUILDAH_ISOLATION=chroot
  scratch_image "$PAUSE_IMAGE" "$BIN/pause"
  scratch_image "$COREDNS_IMAGE" "$BIN/coredns"
  local missing=0 img
  for img in "${SWARM_IMAGES[@]}"; do [ -n "$(image_id "$img")" ] || missing=1; done
  if [ "$missing" = 1 ]; then
    if [ ! -x "$ROOT/build/bin/swarm" ] || [ ! -x "$ROOT/build/bin/swarm-operator" ]; then
      log "WARNING: the project's images are missing and build/bin has no swarm/swarm-operator:" \
          "the nodes get none (run scripts/build.sh, then cluster.sh images)"
      return 0
    fi
    log "building the project's images (scripts/build-images.sh --prebuilt build/bin)"
    bash "$ROOT/scripts/build-images.sh" --prebuilt "$ROOT/build/bin" >/dev/null
  fi
}
# Each image is exported once per image ID (docker-archive) and imported into a node's containerd
# when that node does not have that ID yet. import_images [IMAGE...]: these, by default the
# cluster's own and the project's.
import_images() {
  local n i img id tar images=("$@")
  [ ${#images[@]} -gt 0 ] || images=("$PAUSE_IMAGE" "$COREDNS_IMAGE" "${SWARM_IMAGES[@]}")
  n=$(node_count)
  mkdir -p "$STATE/images"
  for img in "${images[@]}"; do
    id=$(image_id "$img")
    if [ -z "$id" ]; then log "WARNING: image $img not found in buildah's storage: not imported"; continue; fi
    tar=$STATE/images/$(echo "$img" | tr '/:' '__')-${id:0:12}.tar
    if [ ! -f "$tar" ]; then
      rm -f "$STATE/images/$(echo "$img" | tr '/:' '__')"-*.tar
      "${BUILDAH[@]}" push --quiet "$img" "docker-archive:$tar.tmp:$img" >/dev/null
      mv "$tar.tmp" "$tar"
    fi
    for i in $(seq 1 "$n"); do
      alive "$STATE/pids/containerd-$i.pid" || continue
      local mark
      mark=$(node_dir "$i")/images/$(echo "$img" | tr '/:' '__')
      if [ "$(cat "$mark" 2>/dev/null)" != "$id" ]; then
        mkdir -p "$(dirname "$mark")"
        ctr_node "$i" images import --no-unpack=false "$tar" >/dev/null
        echo "$id" > "$mark"
        log "$img (${id:0:12}) imported into $(node_name "$i")"
      fi
    done
  done
}

# --- nodes -------------------------------------------------------------------------------------
node_configs() {
  local i=$1 n d r
  n=$(node_count); d=$(node_dir "$i"); r=$(node_run "$i")
  read -r class region zone <<<"$(node_pool "$i" "$n")"
  mkdir -p "$d/cni" "$d/containerd" "$d/kubelet" "$d/pod-logs" "$d/volume-plugins" "$d/opt" "$r"
  put "$d/containerd.toml" <<TOML
version = 2
root = "$d/containerd"
state = "$r/containerd"
[grpc]
  address = "$r/containerd.sock"
[ttrpc]
  address = "$r/containerd-ttrpc.sock"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$d/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$r/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$d/cni"
TOML
  put "$d/cni/10-swarm.conflist" <<JSON
{
  "cniVersion": "0.4.0",
  "name": "swarm-node-$i",
  "plugins": [{
    "type": "bridge", "bridge": "$(node_bridge "$i")", "isGateway": true, "ipMasq": false, "hairpinMode": true,
    "ipam": {"type": "host-local", "dataDir": "$d/cni-ipam",
             "ranges": [[{"subnet": "$POD_PREFIX.$i.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}
  }]
}
JSON
  local taints=""
  # Spot nodes: the GKE spot taint, and CPU for three small workers each (examples/local-cluster.yaml
  # requests 250m per worker), so that a full pool is reached with a few pods on this one machine.
  [ "$class" = spot ] && taints='registerWithTaints: [{key: cloud.google.com/gke-spot, value: "true", effect: NoSchedule}]
systemReserved: {cpu: "'$(( $(nproc) * 1000 - 750 ))'m"}'
  put "$d/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $(node_ip "$i")
port: 10250
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$STATE/pki/ca.crt"}
authorization: {mode: Webhook}
containerRuntimeEndpoint: "unix://$r/containerd.sock"
cgroupDriver: cgroupfs
failCgroupV1: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
localStorageCapacityIsolation: false
clusterDNS: [$SVC_DNS]
clusterDomain: cluster.local
resolvConf: "$STATE/resolv.conf"
podLogsDir: "$d/pod-logs"
volumePluginDir: "$d/volume-plugins"
serializeImagePulls: false
evictionHard: {memory.available: "100Mi"}
maxPods: 40
$taints
YAML
}
start_node() {
  local i=$1 d r labels
  d=$(node_dir "$i"); r=$(node_run "$i")
  read -r class region zone <<<"$(node_pool "$i" "$(node_count)")"
  node_configs "$i"
  start "containerd-$i" "$d/containerd.log" containerd --config "$d/containerd.toml"
  wait_for 30 "containerd of $(node_name "$i")" ctr_node "$i" version
}
start_kubelet() {
  local i=$1 d labels
  d=$(node_dir "$i")
  read -r class region zone <<<"$(node_pool "$i" "$(node_count)")"
  labels="topology.kubernetes.io/region=$region,topology.kubernetes.io/zone=$zone"
  if [ "$class" = spot ]; then labels+=",cloud.google.com/gke-spot=true,cloud.google.com/gke-provisioning=spot"
  else labels+=",swarm-operator.io/node-class=on-demand"; fi
  start "kubelet-$i" "$d/kubelet.log" "$BIN/kubelet" --config "$d/kubelet.yaml" \
    --kubeconfig "$d/kubelet.kubeconfig" --root-dir "$d/kubelet" --cert-dir "$d/kubelet/pki" \
    --hostname-override "$(node_name "$i")" --node-ip "$(node_ip "$i")" --node-labels "$labels" --v 0
}
start_kube_proxy() {
  put "$STATE/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$STATE/kube-proxy.kubeconfig"}
mode: iptables
clusterCIDR: $POD_CIDR
hostnameOverride: $(node_name "$(node_count)")
bindAddress: $API
metricsBindAddress: $API:10249
healthzBindAddress: $API:10256
iptables: {masqueradeAll: true, localhostNodePorts: false}
conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
YAML
  start kube-proxy "$STATE/logs/kube-proxy.log" "$BIN/kube-proxy" --config "$STATE/kube-proxy.yaml" --v 0
}

# Shared storage, as a cloud's ReadWriteMany file share (Filestore, EFS) would be: one folder of
# this machine, which every node sees at the same path, offered as the PersistentVolume
# swarm-shared (storageClassName swarm-shared). examples/local-cluster-checkpoints.yaml claims it
# for the example's checkpoints, so a stage whose peers are all lost resumes on any node. Owned by
# the images' user (65532); removed with the rest of the state by `down`.
shared_storage() {
  mkdir -p "$STATE/shared"
  chown 65532:65532 "$STATE/shared"
  kc apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolume
metadata: {name: swarm-shared, labels: {swarm-operator.io/storage: shared}}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteMany]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: swarm-shared
  hostPath: {path: $STATE/shared, type: Directory}
YAML
}

coredns() {
  kc apply -f - >/dev/null <<YAML
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- {apiGroups: [""], resources: [endpoints, services, pods, namespaces], verbs: [list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:53 {
        errors
        health :8080
        ready :8181
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
        }
        prometheus :9153
        cache 5
    }
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      serviceAccountName: coredns
      dnsPolicy: Default
      priorityClassName: system-cluster-critical
      nodeSelector: {swarm-operator.io/node-class: on-demand}
      containers:
      - name: coredns
        image: $COREDNS_IMAGE
        imagePullPolicy: Never
        args: [-conf, /etc/coredns/Corefile]
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        - {name: metrics, containerPort: 9153, protocol: TCP}
        readinessProbe: {httpGet: {path: /ready, port: 8181}, periodSeconds: 2}
        livenessProbe: {httpGet: {path: /health, port: 8080}}
        resources: {requests: {cpu: 10m, memory: 32Mi}, limits: {memory: 128Mi}}
        volumeMounts: [{name: config, mountPath: /etc/coredns, readOnly: true}]
      volumes: [{name: config, configMap: {name: coredns}}]
---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  selector: {k8s-app: kube-dns}
  clusterIP: $SVC_DNS
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
YAML
}

# Node labels and taints once more through the API (idempotent; a kubelet may only set some of
# them at registration and a test may have changed them).
label_nodes() {
  local n i
  n=$(node_count)
  for i in $(seq 1 "$n"); do
    read -r class region zone <<<"$(node_pool "$i" "$n")"
    if [ "$class" = spot ]; then
      kc label node "$(node_name "$i")" --overwrite cloud.google.com/gke-spot=true \
        topology.kubernetes.io/region="$region" topology.kubernetes.io/zone="$zone" >/dev/null
      kc taint node "$(node_name "$i")" --overwrite cloud.google.com/gke-spot=true:NoSchedule >/dev/null
    else
      kc label node "$(node_name "$i")" --overwrite swarm-operator.io/node-class=on-demand \
        topology.kubernetes.io/region="$region" topology.kubernetes.io/zone="$zone" >/dev/null
    fi
  done
}

cmd_up() {
  local n=$NODES_DEFAULT
  while (($#)); do
    case "$1" in
      --nodes) n=${2:?--nodes needs a number}; shift 2 ;;
      *) die "up: unknown argument $1" ;;
    esac
  done
  [[ "$n" =~ ^[2-9]$ ]] || die "--nodes must be 2..9, got $n"
  if [ -f "$STATE/nodes" ] && [ "$(cat "$STATE/nodes")" != "$n" ]; then
    die "a cluster of $(cat "$STATE/nodes") nodes exists; run cluster.sh down first to change the node count"
  fi
  local t0 i
  t0=$(date +%s)
  ensure_packages
  ensure_binaries
  mkdir -p "$STATE" "$RUN"
  echo "$n" > "$STATE/nodes"
  save_host_state
  host_network
  make_pki
  control_plane
  ensure_images
  for i in $(seq 1 "$n"); do start_node "$i"; done
  import_images
  for i in $(seq 1 "$n"); do start_kubelet "$i"; done
  start_kube_proxy
  wait_for 120 "$n nodes to register" bash -c "[ \$('$KUBECTL' --kubeconfig '$KUBECONFIG_FILE' get nodes -o name | wc -l) -ge $n ]"
  label_nodes
  kc wait --for=condition=Ready node --all --timeout=120s >/dev/null
  coredns
  shared_storage
  kc -n kube-system rollout status deployment/coredns --timeout=120s >/dev/null
  log "cluster up in $(( $(date +%s) - t0 )) s: $n nodes"
  echo "export KUBECONFIG=$KUBECONFIG_FILE"
}

# --- teardown ----------------------------------------------------------------------------------
our_shims() { # pids of containerd shims started by this cluster's containerds
  local p
  for p in /proc/[0-9]*; do
    tr '\0' ' ' 2>/dev/null < "$p/cmdline" | has -- "-address $RUN/node-" && echo "${p#/proc/}"
  done
  return 0
}
our_netns() { # network namespaces (names) whose pod end is attached to one of our bridges, or dangling
  local ns peer master
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    case $ns in cni-*) ;; *) continue ;; esac
    peer=$(ip -n "$ns" -o link show eth0 2>/dev/null | sed -n 's/.*eth0@if\([0-9]*\).*/\1/p')
    if [ -z "$peer" ]; then echo "$ns"; continue; fi
    master=$(ip -o link show 2>/dev/null | awk -v idx="$peer:" '$1 == idx' | sed -n 's/.* master \([^ ]*\).*/\1/p')
    case $master in swc-br*|"") echo "$ns" ;; esac
  done
}
kill_node_containers() { # I: every container of node I's containerd, killed and removed
  local i=$1 id
  if alive "$STATE/pids/containerd-$i.pid"; then
    for id in $(ctr_node "$i" tasks ls -q 2>/dev/null); do ctr_node "$i" tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true; done
    sleep 0.5
    for id in $(ctr_node "$i" tasks ls -q 2>/dev/null); do ctr_node "$i" tasks delete -f "$id" >/dev/null 2>&1 || true; done
    for id in $(ctr_node "$i" containers ls -q 2>/dev/null); do
      echo "$id" >> "$STATE/container-ids"
      ctr_node "$i" containers delete "$id" >/dev/null 2>&1 || true
    done
  fi
}
unmount_under() { # PREFIX: every mount at or below PREFIX, deepest first
  local m
  { awk '{print $5}' /proc/self/mountinfo | grep -E "^$1(/|$)" || true; } | awk '{print length, $0}' | sort -rn | cut -d' ' -f2- |
    while read -r m; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
}
cleanup_iptables() {
  local ipt table chain rule
  for ipt in iptables ip6tables; do
    command -v "$ipt" >/dev/null || continue
    for table in filter nat mangle; do
      # Jumps from any chain into a KUBE-* chain, then the KUBE-* chains themselves.
      { "$ipt" -t "$table" -S 2>/dev/null | grep -E '^-A .* -j KUBE-' || true; } | sed 's/^-A /-D /' |
        while read -r rule; do eval "$ipt -t $table $rule" 2>/dev/null || true; done
      for chain in $("$ipt" -t "$table" -S 2>/dev/null | sed -n 's/^-N \(KUBE-[^ ]*\)$/\1/p'); do
        "$ipt" -t "$table" -F "$chain" 2>/dev/null || true
      done
      for chain in $("$ipt" -t "$table" -S 2>/dev/null | sed -n 's/^-N \(KUBE-[^ ]*\)$/\1/p'); do
        "$ipt" -t "$table" -X "$chain" 2>/dev/null || true
      done
    done
  done
  # kube-proxy's nftables tables, if one was ever made.
  if command -v nft >/dev/null; then
    local fam
    for fam in ip ip6; do nft delete table "$fam" kube-proxy 2>/dev/null || true; done
  fi
}
cleanup_cgroups() {
  local ids=() c id
  [ -f "$STATE/container-ids" ] && mapfile -t ids < <(sort -u "$STATE/container-ids")
  for c in /sys/fs/cgroup/*/ /sys/fs/cgroup/unified/; do
    [ -d "$c" ] || continue
    for id in "${ids[@]}"; do
      [ -n "$id" ] && [ -d "$c$id" ] && rmdir "$c$id" 2>/dev/null || true
    done
    # containerd's CRI puts its containers under /k8s.io (the namespace) when the kubelet gives no parent
    if [ -d "${c}k8s.io" ] && ! grep -qx "${c}k8s.io" "$STATE/host/existed" 2>/dev/null; then
      find "${c}k8s.io" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    fi
    # runc names a container's cgroup after its 64-hex ID; nothing else here does.
    find "$c" -mindepth 1 -maxdepth 2 -type d -regextype egrep -regex '.*/[0-9a-f]{64}' -empty -delete 2>/dev/null || true
    find "$c" -mindepth 1 -maxdepth 2 -type d -regextype egrep -regex '.*/[0-9a-f]{64}' 2>/dev/null |
      while read -r d; do rmdir "$d" 2>/dev/null || true; done
  done
}
cmd_down() {
  local t0 n i pid
  t0=$(date +%s)
  [ -d "$STATE" ] || [ -d "$RUN" ] || ip link show "$NODE_BRIDGE" >/dev/null 2>&1 || { log "nothing to take down"; return 0; }
  n=$(node_count)
  KUBECTL=${KUBECTL:-$(command -v kubectl || true)}
  # 0. A Prometheus of scripts/k8s/prometheus.sh, if one runs.
  bash "$HERE/prometheus.sh" down >/dev/null 2>&1 || true
  # 1. Pods, through their kubelets (CNI teardown of their network namespaces), when the API answers.
  if [ -n "$KUBECTL" ] && alive "$STATE/pids/kube-apiserver.pid" && kc get --raw /readyz >/dev/null 2>&1; then
    kc delete swarmjobs --all -A --wait=false >/dev/null 2>&1 || true
    kc delete deployments,replicasets,daemonsets,statefulsets,jobs --all -A --wait=false >/dev/null 2>&1 || true
    kc delete pods --all -A --grace-period=1 --wait=false >/dev/null 2>&1 || true
    for _ in $(seq 1 40); do
      [ -z "$(kc get pods -A -o name 2>/dev/null)" ] && break
      sleep 0.5
    done
    kc delete pods --all -A --grace-period=0 --force >/dev/null 2>&1 || true
    # the kubelets stop the sandboxes of force-deleted pods within a few seconds
    for _ in $(seq 1 20); do [ -z "$(our_shims)" ] && break; sleep 0.5; done
  fi
  # 2. kube-proxy and its rules, the kubelets, every container left, the containerds.
  stop kube-proxy 5
  [ -x "${BIN:-}/kube-proxy" ] || BIN=${SWARM_K8S_CACHE:-$HOME/.cache/swarm-operator/k8s}/${SWARM_K8S_VERSION:-v1.36.3}/bin
  [ -x "$BIN/kube-proxy" ] && "$BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
  for i in $(seq 1 "$n"); do stop "kubelet-$i" 10; done
  for i in $(seq 1 "$n"); do kill_node_containers "$i"; done
  for pid in $(our_shims); do kill -9 "$pid" 2>/dev/null || true; done
  for i in $(seq 1 "$n"); do stop "containerd-$i" 10; done
  for pid in $(our_shims); do kill -9 "$pid" 2>/dev/null || true; done
  # 3. The control plane.
  for p in kube-scheduler kube-controller-manager kube-apiserver etcd; do stop "$p" 10; done
  # Anything else with a pid file (a partial `up`).
  if [ -d "$STATE/pids" ]; then
    for f in "$STATE"/pids/*.pid; do [ -e "$f" ] && stop "$(basename "$f" .pid)" 5; done
  fi
  # 4. Network namespaces, mounts, iptables, links, routes, sysctls, cgroups, files.
  local ns
  for ns in $(our_netns); do ip netns delete "$ns" 2>/dev/null || { umount "/run/netns/$ns" 2>/dev/null; rm -f "/run/netns/$ns"; }; done
  unmount_under "$RUN"
  unmount_under "$STATE"
  cleanup_iptables
  for i in $(seq 1 9); do ip link show "$(node_bridge "$i")" >/dev/null 2>&1 && ip link delete "$(node_bridge "$i")"; done
  # veths left without a namespace end (their bridge gone)
  for l in $(ip -o link show type veth 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    [ -d "/sys/class/net/$l/brport" ] || ip link show "$l" | has 'master swc-br' && ip link delete "$l" 2>/dev/null || true
  done
  ip link show "$NODE_BRIDGE" >/dev/null 2>&1 && ip link delete "$NODE_BRIDGE"
  ip route show type blackhole | has "^blackhole $SVC_CIDR" && ip route delete blackhole "$SVC_CIDR"
  if [ -f "$STATE/host/sysctl" ]; then
    local kv k v
    while IFS= read -r kv; do
      k=${kv%%=*}; v=${kv#*=}
      [ -e "/proc/sys/${k//.//}" ] && [ "$(cat "/proc/sys/${k//.//}")" != "$v" ] && sysctl -qw "$k=$v" 2>/dev/null || true
    done < "$STATE/host/sysctl"
  fi
  cleanup_cgroups
  rm -f /var/lib/cni/results/swarm-node-* 2>/dev/null || true
  local existed=""
  [ -f "$STATE/host/existed" ] && existed=$(cat "$STATE/host/existed")
  for d in /var/lib/cni/results /var/lib/cni /run/containerd/s /run/containerd /run/netns; do
    echo "$existed" | has -x "$d" || rmdir "$d" 2>/dev/null || true
  done
  # The kubelets' fixed paths: the device-plugin socket folder and the container log links.
  if [ -n "$existed" ] || [ -f "$STATE/host/sysctl" ]; then
    echo "$existed" | has -x /var/lib/kubelet || rm -rf /var/lib/kubelet
    echo "$existed" | has -x /var/log/containers || rm -rf /var/log/containers
    echo "$existed" | has -x /var/log/pods || rmdir /var/log/pods 2>/dev/null || true
  fi
  find /var/log/containers -maxdepth 1 -xtype l -delete 2>/dev/null || true
  rm -rf "$RUN"
  # The state, except the images exported for import (kept: a cache keyed by image ID).
  if [ -d "$STATE" ]; then
    find "$STATE" -mindepth 1 -maxdepth 1 ! -name images -exec rm -rf {} + 2>/dev/null || true
  fi
  log "down in $(( $(date +%s) - t0 )) s"
}

# --- inspection --------------------------------------------------------------------------------
cmd_leftovers() {
  local out=() f p
  if [ -d "$STATE/pids" ]; then
    for f in "$STATE"/pids/*.pid; do [ -e "$f" ] && alive "$f" && out+=("process $(basename "$f" .pid) (pid $(cat "$f"))"); done
  fi
  for p in $(our_shims); do out+=("containerd shim pid $p"); done
  for p in $(pgrep -x kubelet; pgrep -x kube-proxy; pgrep -f "containerd --config $STATE" || true); do
    out+=("process $(tr '\0' ' ' 2>/dev/null < "/proc/$p/cmdline" | cut -c1-80) (pid $p)")
  done
  while read -r m; do out+=("mount $m"); done < <(awk '{print $5}' /proc/self/mountinfo | grep -E "^($STATE|$RUN)(/|$)" || true)
  for f in $(our_netns); do out+=("netns $f"); done
  while read -r l; do [ -n "$l" ] && out+=("link $l"); done < <(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E '^swc-' || true)
  ip route show type blackhole | has "^blackhole $SVC_CIDR" && out+=("route blackhole $SVC_CIDR")
  ip route show | has -E "^($POD_PREFIX|$NET_PREFIX)\." && out+=("routes: $(ip route show | grep -E "^($POD_PREFIX|$NET_PREFIX)\." | tr '\n' ';')")
  local ipt table
  for ipt in iptables ip6tables; do
    for table in filter nat mangle; do
      local ch
      ch=$("$ipt" -t "$table" -S 2>/dev/null | sed -n 's/^-N \(KUBE-[^ ]*\)$/\1/p' | tr '\n' ' ')
      [ -n "$ch" ] && out+=("$ipt $table chains: $ch")
    done
  done
  if [ -f "$STATE/host/sysctl" ]; then
    local kv k v
    while IFS= read -r kv; do
      k=${kv%%=*}; v=${kv#*=}
      [ -e "/proc/sys/${k//.//}" ] && [ "$(cat "/proc/sys/${k//.//}")" != "$v" ] && out+=("sysctl $k=$(cat "/proc/sys/${k//.//}") (was $v)")
    done < "$STATE/host/sysctl"
  fi
  [ -d "$RUN" ] && out+=("directory $RUN")
  alive "$STATE/prometheus/pid" && out+=("process prometheus (pid $(cat "$STATE/prometheus/pid"))")
  [ -e "$STATE/nodes" ] && out+=("state $STATE/nodes")
  ls /var/lib/cni/results/swarm-node-* >/dev/null 2>&1 && out+=("files /var/lib/cni/results/swarm-node-*")
  local c
  for c in /sys/fs/cgroup/*/; do
    [ -d "${c}k8s.io" ] && ! grep -qx "${c}k8s.io" "$STATE/host/existed" 2>/dev/null && out+=("cgroup ${c}k8s.io")
    f=$(find "$c" -mindepth 1 -maxdepth 2 -type d -regextype egrep -regex '.*/[0-9a-f]{64}' 2>/dev/null | head -3 | tr '\n' ' ')
    [ -n "$f" ] && out+=("cgroups $f")
  done
  if [ ${#out[@]} -eq 0 ]; then echo "nothing left"; return 0; fi
  printf '%s\n' "${out[@]}"
  return 1
}

cmd_status() {
  local n i ok=0 p
  [ -f "$STATE/nodes" ] || { echo "no cluster (run cluster.sh up)"; return 1; }
  n=$(node_count)
  for p in etcd kube-apiserver kube-controller-manager kube-scheduler kube-proxy; do
    if alive "$STATE/pids/$p.pid"; then echo "$p: running (pid $(cat "$STATE/pids/$p.pid"))"; else echo "$p: NOT RUNNING"; ok=1; fi
  done
  for i in $(seq 1 "$n"); do
    for p in containerd kubelet; do
      if alive "$STATE/pids/$p-$i.pid"; then echo "$(node_name "$i") $p: running"; else echo "$(node_name "$i") $p: NOT RUNNING"; ok=1; fi
    done
  done
  echo "export KUBECONFIG=$KUBECONFIG_FILE"
  if [ -n "$KUBECTL" ] && kc get --raw /readyz >/dev/null 2>&1; then
    kc get nodes -L cloud.google.com/gke-spot,swarm-operator.io/node-class,topology.kubernetes.io/region,topology.kubernetes.io/zone
    kc get pods -A -o wide
  else
    echo "API server not answering"; ok=1
  fi
  return $ok
}

cmd_node_stop() {
  local i=${1:?node-stop needs a node number}
  [[ "$i" =~ ^[1-9]$ ]] && [ "$i" -le "$(node_count)" ] || die "node-stop: no node $i (1..$(node_count))"
  stop "kubelet-$i" 1
  kill_node_containers "$i"
  stop "containerd-$i" 5
  local pid
  for pid in $(our_shims); do
    tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline" | has -- "-address $RUN/node-$i/" && kill -9 "$pid" 2>/dev/null || true
  done
  log "$(node_name "$i") stopped: kubelet and containerd down, its containers killed"
}
# The API server stopped for SECONDS (default 10), then started again with the same flags; returns
# once it answers /readyz (a restart of the control plane's front door: etcd, every other component
# and the pods keep running).
cmd_apiserver_restart() {
  local down=${1:-10}
  [[ "$down" =~ ^[0-9]+$ ]] || die "apiserver-restart: SECONDS must be a whole number, got '$down'"
  BIN=${SWARM_K8S_CACHE:-$HOME/.cache/swarm-operator/k8s}/${SWARM_K8S_VERSION:-v1.36.3}/bin
  [ -n "$KUBECTL" ] || KUBECTL=$BIN/kubectl
  stop kube-apiserver 10
  sleep "$down"
  start_apiserver
  # The scheduler too: after the API server came back, this cluster's kube-scheduler was once seen
  # binding no pod again for 5 minutes (a CI run of the e2e: every pod of a job applied afterwards
  # stayed Pending on Ready nodes). The test is of the operator, not of the scheduler.
  stop kube-scheduler 10
  start_scheduler
}
cmd_node_start() {
  local i=${1:?node-start needs a node number}
  [[ "$i" =~ ^[1-9]$ ]] && [ "$i" -le "$(node_count)" ] || die "node-start: no node $i (1..$(node_count))"
  BIN=${SWARM_K8S_CACHE:-$HOME/.cache/swarm-operator/k8s}/${SWARM_K8S_VERSION:-v1.36.3}/bin
  start_node "$i"
  start_kubelet "$i"
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  leftovers) cmd_leftovers ;;
  images) shift
          if [ $# -gt 0 ]; then import_images "$@"
          else BIN=${SWARM_K8S_CACHE:-$HOME/.cache/swarm-operator/k8s}/${SWARM_K8S_VERSION:-v1.36.3}/bin
               ensure_images; import_images
          fi ;;
  node-stop) cmd_node_stop "${2:-}" ;;
  node-start) cmd_node_start "${2:-}" ;;
  apiserver-restart) cmd_apiserver_restart "${2:-}" ;;
  env) echo "export KUBECONFIG=$KUBECONFIG_FILE" ;;
  *) echo "usage: cluster.sh up [--nodes N] | down | status | leftovers | images [IMAGE...] | node-stop I | node-start I | apiserver-restart [SECONDS] | env" >&2; exit 2 ;;
esac
