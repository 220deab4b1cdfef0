#!/usr/bin/env bash
# Loopback TCP ceiling (iperf3, one stream) next to swarm_net's echo throughput (wire_bench) with
# each transport (authenticated: every byte AES-256-GCM authenticated; encrypted: also encrypted),
# and their ratios: wire bytes/s / iperf3 bytes/s (goal >= 0.5, encrypted included). The machine is
# shared and noisy, so the three are measured in turn, ROUNDS times (default 3), and the medians
# compared.
#
#   [ROUNDS=3] bench/wire/wire_vs_iperf.sh [path/to/wire_bench] [wire_bench args...]
#
# wire bytes/s = tensor payload bytes sent + received / wall time (see wire_bench.cc);
# iperf3 bytes/s = end.sum_received.bits_per_second / 8 of `iperf3 -c 127.0.0.1 -t 2 -J`.
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

iperf_once() {
  local json
  json=$(iperf3 -c 127.0.0.1 -p "$port" -t 2 -J)
  python3 -c 'import json,sys; print("%.0f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 8))' <<<"$json"
}
wire_once() { # TRANSPORT [wire_bench args...]
  local out t=$1
  shift
  out=$("$bin" --transport "$t" "$@")
  echo "$out" >&2
  sed -n 's/^WIRE_BYTES_PER_SEC=//p' <<<"$out"
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }

rounds=${ROUNDS:-3}
ip=() auth=() enc=()
for r in $(seq "$rounds"); do
  ip+=("$(iperf_once)")
  a=$(wire_once authenticated "$@" 2>/dev/null); e=$(wire_once encrypted "$@" 2>/dev/null)
  [ -n "$a" ] && [ -n "$e" ] || { echo "wire_vs_iperf: wire_bench printed no WIRE_BYTES_PER_SEC" >&2; exit 1; }
  auth+=("$a"); enc+=("$e")
  awk -v r="$r" -v i="${ip[-1]}" -v a="$a" -v e="$e" 'BEGIN {
    printf "round %d: iperf3 %.1f MB/s, authenticated %.1f MB/s (%.2f), encrypted %.1f MB/s (%.2f)\n", r, i/1e6, a/1e6, a/i, e/1e6, e/i }'
done
i=$(echo "${ip[*]}" | median); a=$(echo "${auth[*]}" | median); e=$(echo "${enc[*]}" | median)
echo
awk -v n="$rounds" -v i="$i" -v a="$a" -v e="$e" 'BEGIN {
  printf "medians of %d rounds (4 MiB float32 tensor echoed; payload bytes both ways / wall time)\n", n;
  printf "iperf3 loopback, 1 stream, 2 s             : %10.1f MB/s (%.2f Gbit/s)\n", i / 1e6, i * 8 / 1e9;
  printf "wire_bench echo, authenticated, both ways  : %10.1f MB/s (%.2f Gbit/s)\n", a / 1e6, a * 8 / 1e9;
  printf "wire_bench echo, encrypted, both ways      : %10.1f MB/s (%.2f Gbit/s)\n", e / 1e6, e * 8 / 1e9;
  printf "ratio authenticated / iperf3               : %10.2f   (goal >= 0.5)\n", a / i;
  printf "ratio encrypted / iperf3                   : %10.2f   (goal >= 0.5)\n", e / i;
  printf "encrypted / authenticated                  : %10.2f\n", e / a;
}'
