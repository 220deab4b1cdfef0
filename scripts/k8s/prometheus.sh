#!/usr/bin/env bash
# A Prometheus server for the cluster of scripts/k8s/cluster.sh: it finds the pods through
# kubernetes_sd_configs against that cluster's API server and scrapes, with the labels the chart's
# PodMonitors add (namespace, swarmjob):
#   job "swarm":          every SwarmJob's pods (managed-by swarm-operator) on their ports named
#                         `metrics` (workers, trainers) and `http` (registries, at /metrics)
#   job "swarm-operator": the operator's pods on their port `metrics`
# and evaluates the alerting rules of dashboards/swarm-operator.rules.yaml.
# The binary is the one scripts/k8s/build-cluster.sh builds from the Go module proxy (Prometheus 3,
# Kubernetes discovery compiled in): Debian's `prometheus` 2.42 package is built without Kubernetes
# discovery and refuses this configuration ("field kubernetes_sd_configs not found in type
# config.ScrapeConfig").
#
#   prometheus.sh up [PORT]    start (default port 19090, on 127.0.0.1); idempotent
#   prometheus.sh down         stop it and remove its data
#   prometheus.sh config       print the configuration it runs with
# The dashboard's queries then run against http://127.0.0.1:PORT (tests/cluster/dashboard_check.py).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
STATE=${SWARM_CLUSTER_STATE:-/var/lib/swarm-cluster}
DIR=$STATE/prometheus
API=https://10.77.0.1:6443
PKI=$STATE/pki

config() {
  local sd
  sd="kubernetes_sd_configs:
  - role: pod
    api_server: $API
    tls_config: {ca_file: $PKI/ca.crt, cert_file: $PKI/admin.crt, key_file: $PKI/admin.key}"
  cat <<YAML
global: {scrape_interval: 5s, scrape_timeout: 4s, evaluation_interval: 5s}
rule_files: [$ROOT/dashboards/swarm-operator.rules.yaml]
scrape_configs:
- job_name: swarm
  $sd
  relabel_configs:
  - {source_labels: [__meta_kubernetes_pod_label_app_kubernetes_io_managed_by], regex: swarm-operator, action: keep}
  - {source_labels: [__meta_kubernetes_pod_container_port_name], regex: metrics|http, action: keep}
  - {source_labels: [__meta_kubernetes_pod_phase], regex: Running, action: keep}
  - {source_labels: [__meta_kubernetes_namespace], target_label: namespace}
  - {source_labels: [__meta_kubernetes_pod_label_swarm_operator_io_job], target_label: swarmjob}
  - {source_labels: [__meta_kubernetes_pod_name], target_label: pod}
  - {source_labels: [__meta_kubernetes_pod_node_name], target_label: node}
- job_name: swarm-operator
  $sd
  relabel_configs:
  - {source_labels: [__meta_kubernetes_pod_label_app_kubernetes_io_name], regex: swarm-operator, action: keep}
  - {source_labels: [__meta_kubernetes_pod_container_port_name], regex: metrics, action: keep}
  - {source_labels: [__meta_kubernetes_pod_phase], regex: Running, action: keep}
  - {source_labels: [__meta_kubernetes_namespace], target_label: namespace}
  - {source_labels: [__meta_kubernetes_pod_name], target_label: pod}
YAML
}

case "${1:-}" in
  config) config ;;
  up)
    port=${2:-19090}
    [ -f "$PKI/admin.crt" ] || { echo "prometheus.sh: no cluster (run scripts/k8s/cluster.sh up)" >&2; exit 1; }
    PROMETHEUS=$(bash "$HERE/build-cluster.sh" | tail -n 1)/prometheus
    [ -x "$PROMETHEUS" ] || { echo "prometheus.sh: no $PROMETHEUS after scripts/k8s/build-cluster.sh" >&2; exit 1; }
    mkdir -p "$DIR"
    config > "$DIR/prometheus.yml"
    if [ -f "$DIR/pid" ] && kill -0 "$(cat "$DIR/pid")" 2>/dev/null; then
      kill -HUP "$(cat "$DIR/pid")"   # reload the configuration
    else
      setsid --fork sh -c 'echo $$ > "$1"; shift; exec "$@"' sh "$DIR/pid" "$PROMETHEUS" \
        --config.file "$DIR/prometheus.yml" --storage.tsdb.path "$DIR/data" \
        --web.listen-address "127.0.0.1:$port" --web.enable-lifecycle >"$DIR/prometheus.log" 2>&1 </dev/null
      for _ in $(seq 1 60); do curl -fsS "http://127.0.0.1:$port/-/ready" >/dev/null 2>&1 && break; sleep 0.5; done
      curl -fsS "http://127.0.0.1:$port/-/ready" >/dev/null || { tail -20 "$DIR/prometheus.log" >&2; exit 1; }
      echo "$port" > "$DIR/port"
    fi
    echo "http://127.0.0.1:$(cat "$DIR/port")"
    ;;
  down)
    if [ -f "$DIR/pid" ]; then
      pid=$(cat "$DIR/pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -rf "$DIR"
    ;;
  *) echo "usage: prometheus.sh up [PORT] | down | config" >&2; exit 2 ;;
esac
