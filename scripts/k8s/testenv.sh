#!/usr/bin/env bash
# A throwaway control plane on loopback for the operator's integration tests: etcd +
# kube-apiserver (+ kube-scheduler), real binaries from scripts/k8s/build-testenv.sh (cached).
#
#   testenv.sh prepare DIR APISERVER_PORT   certificates, service-account key, DIR/kubeconfig;
#                                           prints the bin directory (the C++ fixture then starts
#                                           the processes itself, tied to its own life)
#   testenv.sh up DIR [APISERVER_PORT]      prepare + start all three in the background, wait for
#                                           /readyz, apply crds/ (for humans: export KUBECONFIG=DIR/kubeconfig)
#   testenv.sh down DIR                     stop what `up` started
#   testenv.sh args DIR APISERVER_PORT ETCD_PORT ETCD_PEER_PORT
#                                           the command lines, one per line: etcd, apiserver, scheduler
#
# There is no kube-controller-manager and no kubelet: nodes are plain Node objects, pod status is
# set by whoever runs the test, owner-reference garbage collection never happens. The ServiceAccount
# admission plugin is off (no token controller to create `default` service accounts), and so is
# TaintNodesByCondition (no node lifecycle controller would ever lift its not-ready taint).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

cmd=${1:?usage: testenv.sh prepare|up|down|args DIR ...}
DIR=${2:?DIR required}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)

gen_certs() {
  local d=$DIR/pki
  [ -f "$d/admin.crt" ] && return 0
  mkdir -p "$d"
  (
    cd "$d"
    openssl ecparam -name prime256v1 -genkey -noout -out ca.key 2>/dev/null
    openssl req -x509 -new -key ca.key -sha256 -days 3650 -subj "/CN=swarm-testenv-ca" -out ca.crt 2>/dev/null
    openssl ecparam -name prime256v1 -genkey -noout -out server.key 2>/dev/null
    openssl req -new -key server.key -subj "/CN=kube-apiserver" -out server.csr 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' > server.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -sha256 \
      -extfile server.ext -out server.crt 2>/dev/null
    openssl ecparam -name prime256v1 -genkey -noout -out admin.key.ec 2>/dev/null
    openssl pkcs8 -topk8 -nocrypt -in admin.key.ec -out admin.key
    openssl req -new -key admin.key -subj "/O=system:masters/CN=swarm-test-admin" -out admin.csr 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\n' > admin.ext
    openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -sha256 \
      -extfile admin.ext -out admin.crt 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  )
}

write_kubeconfig() {
  local port=$1
  cat > "$DIR/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: testenv
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority: $DIR/pki/ca.crt
users:
- name: admin
  user:
    client-certificate: $DIR/pki/admin.crt
    client-key: $DIR/pki/admin.key
contexts:
- name: testenv
  context: {cluster: testenv, user: admin, namespace: default}
current-context: testenv
KC
}

bin_dir() { "$HERE/build-testenv.sh" | tail -n 1; }
# kubectl from PATH, else the one build-testenv.sh built.
kubectl() { if type -P kubectl >/dev/null; then command kubectl "$@"; else "$(bin_dir)/kubectl" "$@"; fi; }

args() {
  local bin=$1 port=$2 etcd=$3 peer=$4
  echo "$bin/etcd --name testenv --data-dir $DIR/etcd --listen-client-urls http://127.0.0.1:$etcd --advertise-client-urls http://127.0.0.1:$etcd --listen-peer-urls http://127.0.0.1:$peer --initial-advertise-peer-urls http://127.0.0.1:$peer --initial-cluster testenv=http://127.0.0.1:$peer --unsafe-no-fsync --log-level error"
  echo "$bin/kube-apiserver --etcd-servers http://127.0.0.1:$etcd --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port $port --cert-dir $DIR/pki/generated --tls-cert-file $DIR/pki/server.crt --tls-private-key-file $DIR/pki/server.key --client-ca-file $DIR/pki/ca.crt --service-account-key-file $DIR/pki/sa.pub --service-account-signing-key-file $DIR/pki/sa.key --service-account-issuer https://kubernetes.default.svc --authorization-mode RBAC --service-cluster-ip-range 10.96.0.0/16 --disable-admission-plugins ServiceAccount,TaintNodesByCondition --allow-privileged --enable-priority-and-fairness=false --v 0"
  echo "$bin/kube-scheduler --kubeconfig $DIR/kubeconfig --authentication-kubeconfig $DIR/kubeconfig --authorization-kubeconfig $DIR/kubeconfig --leader-elect=false --bind-address 127.0.0.1 --secure-port 0 --v 0"
}

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

case $cmd in
  prepare)
    port=${3:?APISERVER_PORT required}
    gen_certs
    write_kubeconfig "$port"
    bin_dir
    ;;
  args)
    args "$(bin_dir)" "${3:?}" "${4:?}" "${5:?}"
    ;;
  up)
    port=${3:-$(free_port)}
    etcd=$(free_port)
    peer=$(free_port)
    gen_certs
    write_kubeconfig "$port"
    bin=$(bin_dir)
    mapfile -t lines < <(args "$bin" "$port" "$etcd" "$peer")
    names=(etcd kube-apiserver kube-scheduler)
    for i in 0 1 2; do
      # shellcheck disable=SC2086
      setsid --fork sh -c 'echo $$ > "$1"; shift; exec "$@"' sh "$DIR/${names[$i]}.pid" ${lines[$i]} > "$DIR/${names[$i]}.log" 2>&1
      if [ "$i" = 0 ]; then sleep 1; fi
      if [ "$i" = 1 ]; then
        for _ in $(seq 1 120); do
          if kubectl --kubeconfig "$DIR/kubeconfig" get --raw /readyz >/dev/null 2>&1; then break; fi
          sleep 0.5
        done
      fi
    done
    kubectl --kubeconfig "$DIR/kubeconfig" apply -f "$ROOT/crds/" >/dev/null
    kubectl --kubeconfig "$DIR/kubeconfig" wait --for condition=established --timeout=60s crd/swarmjobs.swarm-operator.io >/dev/null
    echo "export KUBECONFIG=$DIR/kubeconfig"
    ;;
  down)
    # Reverse order; SIGKILL whatever has not exited after 5 s (an API server whose etcd is gone
    # can hang in its graceful shutdown).
    for n in kube-scheduler kube-apiserver etcd; do
      [ -f "$DIR/$n.pid" ] || continue
      pid=$(cat "$DIR/$n.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$DIR/$n.pid"
    done
    ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
