#!/usr/bin/env bash
# Loopback TCP ceiling (iperf3, one stream, 3 s) next to swarm_net's echo throughput (wire_bench)
# with each transport (authenticated: every byte AES-256-GCM authenticated; encrypted: also
# encrypted), and their ratios: wire bytes/s / iperf3 bytes/s (goal >= 0.5, encrypted included).
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

declare -A wire
for t in authenticated encrypted; do
  out=$("$bin" --transport "$t" "$@")
  echo "$out"
  echo
  wire[$t]=$(sed -n 's/^WIRE_BYTES_PER_SEC=//p' <<<"$out")
  [ -n "${wire[$t]}" ] || { echo "wire_vs_iperf: wire_bench printed no WIRE_BYTES_PER_SEC" >&2; exit 1; }
done

awk -v i="$iperf_Bps" -v a="${wire[authenticated]}" -v e="${wire[encrypted]}" 'BEGIN {
  printf "iperf3 loopback, 1 stream, 3 s             : %10.1f MB/s (%.2f Gbit/s)\n", i / 1e6, i * 8 / 1e9;
  printf "wire_bench echo, authenticated, both ways  : %10.1f MB/s (%.2f Gbit/s)\n", a / 1e6, a * 8 / 1e9;
  printf "wire_bench echo, encrypted, both ways      : %10.1f MB/s (%.2f Gbit/s)\n", e / 1e6, e * 8 / 1e9;
  printf "ratio authenticated / iperf3               : %10.2f   (goal >= 0.5)\n", a / i;
  printf "ratio encrypted / iperf3                   : %10.2f   (goal >= 0.5)\n", e / i;
}'
