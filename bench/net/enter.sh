#!/usr/bin/env bash
# `swarm local --child-wrapper bench/net/enter.sh`: starts one child of the run in the network
# namespace that bench/net/regions.sh made for it (the registry stays in the host namespace, on the
# control bridge). Called as: enter.sh ROLE ID EXE ARGS...
set -euo pipefail
role=$1 id=$2
shift 2
[ "$role" = registry ] && exec "$@"
state=${SWARM_NET_STATE:-/run/swarm-regions}
ip=$(awk -v id="$id" '$2 == id {print $3}' "$state/plan" 2>/dev/null || true)
[ -n "$ip" ] || { echo "enter.sh: no namespace for $role \"$id\" in $state/plan (bench/net/regions.sh up --region ...)" >&2; exit 2; }
exec ip netns exec "sw-$id" env SWARM_HOST="$ip" SWARM_PORT=7000 "$@"
