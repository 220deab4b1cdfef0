#!/usr/bin/env bash
# The registry under load: 1,000 simulated peers, each heartbeating once a second and reporting its
# step's progress once a second (bench/registry/registry_bench.cc), against `swarm registry` pinned
# to one core (the load generator runs on another). Prints p50/p90/p99/max latency (from each
# request's due time: queueing included) and the registry's CPU. Goal: p99 <= 50 ms. Then the same
# with each heartbeat also reading its stage's peer list (what a worker's heartbeat does).
# Asserts nothing. Requests are signed with a job secret made up for the run (SWARM_JOB_SECRET,
# which the registry requires); registry_auth_bench measures what signing costs.
#
#   bench/registry/registry_load.sh [BUILD_DIR] [PEERS] [SECONDS]
set -euo pipefail
BUILD=${1:-build}
PEERS=${2:-1000}
SECONDS_=${3:-30}
SWARM=$BUILD/bin/swarm
BENCH=$BUILD/bin/registry_bench
[[ -x $SWARM && -x $BENCH ]] || { echo "build $SWARM and $BENCH first (cmake --build $BUILD --target swarm registry_bench)"; exit 1; }
cores=$(nproc)
reg_core=0
gen_cores=$([[ $cores -gt 1 ]] && echo "1-$((cores - 1))" || echo 0)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
log=$(mktemp /tmp/registry-load.XXXXXX.log)
SWARM_JOB_SECRET=${SWARM_JOB_SECRET:-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}
export SWARM_JOB_SECRET
taskset -c $reg_core "$SWARM" --log-level warn registry --host 127.0.0.1 --port "$port" --peer-expiry 4 >"$log" 2>&1 &
reg=$!
trap 'kill $reg 2>/dev/null; wait $reg 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
echo "registry pid $reg on core $reg_core, load generator on cores $gen_cores, $(nproc) cores, load average $(cut -d' ' -f1 /proc/loadavg)"
taskset -c "$gen_cores" "$BENCH" --port "$port" --registry-pid "$reg" --peers "$PEERS" --seconds "$SECONDS_"
taskset -c "$gen_cores" "$BENCH" --port "$port" --registry-pid "$reg" --peers "$PEERS" --seconds "$SECONDS_" --peer-lists
