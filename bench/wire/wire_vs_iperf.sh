#!/usr/bin/env bash
# Loopback TCP ceiling (iperf3, one stream, 3 s) next to swarm_net's echo throughput (wire_bench),
# and their ratio: wire bytes/s / iperf3 bytes/s (goal >= 0.5).
#
#   bench/wire/wire_vs_iperf.sh [path/to/wire_bench] [wire_bench args...]
#
# wire bytes/s = tensor payload bytes sent + received / wall time (see wire_bench.cc);
# iperf3 bytes/s = end.sum_received.bits_per_second / 8 of `iperf3 -c 127.0.0.1 -t 3 -J`.
# Figures, not assertions: the script fails only if a tool is missing or fails.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${1:-$root/build/bin/wire_bench}
[ $# -gt 0 ] && shift
if [ ! -x "$bin" ]; then
  echo "wire_vs_iperf: no wire_bench at $bin (build it: cmake --build build --target wire_bench)" >&2
  exit 1
fi
command -v iperf3 >/dev/null || { echo "wire_vs_iperf: iperf3 is not installed" >&2; exit 1; }

port=${IPERF_PORT:-5299}
iperf3 -s -p "$port" >/dev/null 2>&1 &
srv=$!
trap 'kill "$srv" 2>/dev/null || true; wait "$srv" 2>/dev/null || true' EXIT
for _ in $(seq 50); do  # wait for the listener without connecting to it
  if command -v ss >/dev/null; then ss -ltn 2>/dev/null | grep -q "[:.]$port " && break; else sleep 1; break; fi
  sleep 0.1
done

json=$(iperf3 -c 127.0.0.1 -p "$port" -t 3 -J)
if command -v jq >/dev/null; then
  iperf_bps=$(jq -r '.end.sum_received.bits_per_second' <<<"$json")
else
  iperf_bps=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"])' <<<"$json")
fi
iperf_Bps=$(awk -v b="$iperf_bps" 'BEGIN { printf "%.0f", b / 8 }')

out=$("$bin" "$@")
echo "$out"
wire_Bps=$(sed -n 's/^WIRE_BYTES_PER_SEC=//p' <<<"$out")
[ -n "$wire_Bps" ] || { echo "wire_vs_iperf: wire_bench printed no WIRE_BYTES_PER_SEC" >&2; exit 1; }

echo
awk -v i="$iperf_Bps" -v w="$wire_Bps" 'BEGIN {
  printf "iperf3 loopback, 1 stream, 3 s       : %10.1f MB/s (%.2f Gbit/s)\n", i / 1e6, i * 8 / 1e9;
  printf "wire_bench echo, payload both ways   : %10.1f MB/s (%.2f Gbit/s)\n", w / 1e6, w * 8 / 1e9;
  printf "ratio wire / iperf3                  : %10.2f   (goal >= 0.5)\n", w / i;
}'
