#!/usr/bin/env bash
# Emulated regions with real networking, for `swarm local` (root only; see docs/benchmarks.md).
#
#   bench/net/regions.sh up --region a=trainer0,stage0-w0 --region b=stage1-w0 \
#                           [--intra 1gbit:0.5] [--inter 100mbit:25]
#   bench/net/regions.sh check        # iperf3 and a latency probe through the emulation
#   bench/net/regions.sh down         # removes everything `up` made (also after a failed up)
#   bench/net/regions.sh run REGION-OPTIONS -- COMMAND...   # up, check, COMMAND, down (also on
#                                                           # Ctrl-C or failure); COMMAND's status
#
# What `up` makes (all names start with sw-, state in $SWARM_NET_STATE, default /run/swarm-regions):
# - one network namespace per process ID (sw-ID): its data interface on its region's bridge
#   (10.77.R.N/16), shaped by the kernel (tc tbf, both directions) to the intra-region rate, and a
#   control interface on a bridge in the host namespace (10.78.0.N/16) that reaches only the
#   registry (10.78.0.1, the launcher's --registry-host).
# - two router namespaces, each running Toxiproxy (built from the Go module proxy, cached by
#   version): sw-lan adds the intra-region latency, sw-wan the inter-region latency; sw-wan's leg on
#   each region's bridge is shaped (tc tbf) to the inter-region rate, one link per direction shared
#   by every flow between regions, as a real WAN link is.
# - in every process namespace, iptables DNAT sends each worker's data port (SWARM_PORT 7000 at its
#   own address) to the proxy of that worker in sw-lan (same region) or sw-wan (other region), so
#   every byte between processes crosses the emulated links; no sleeps are added in the project's
#   wire code.
# Latency values are one way, in milliseconds (multiples of 0.5): 25 gives a 50 ms round trip.
# bench/net/enter.sh is the `swarm local --child-wrapper` that starts a child in its namespace.
set -euo pipefail

STATE=${SWARM_NET_STATE:-/run/swarm-regions}
TOXI_VERSION=${SWARM_TOXIPROXY_VERSION:-v2.5.0}
TOXI_CACHE=${SWARM_TOOLS_CACHE:-$HOME/.cache/swarm-operator/tools}/toxiproxy-$TOXI_VERSION
DATA_PORT=7000
PROXY_BASE=20000
here=$(cd "$(dirname "$0")" && pwd)

log() { echo "[regions $(date +%T)] $*" >&2; }
die() { echo "regions: $*" >&2; exit 1; }

need_tools() {
  [ "$(id -u)" = 0 ] || die "needs root (network namespaces, tc, iptables)"
  local missing=()
  for t in ip tc iptables iperf3 curl python3; do command -v "$t" >/dev/null 2>&1 || missing+=("$t"); done
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing: iproute2 iptables iperf3 curl (missing: ${missing[*]})"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q iproute2 iptables iperf3 curl >/dev/null
  fi
  if [ ! -x "$TOXI_CACHE/bin/toxiproxy-server" ]; then
    log "building Toxiproxy $TOXI_VERSION from the Go module proxy into $TOXI_CACHE"
    local go=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
    [ -x "$go" ] || die "no Go toolchain to build Toxiproxy (set GO=/path/to/go)"
    mkdir -p "$TOXI_CACHE/bin"
    GOBIN="$TOXI_CACHE/bin" CGO_ENABLED=0 GOFLAGS="-p=1 -mod=mod" GOTOOLCHAIN=local \
      "$go" install "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXI_VERSION" >&2
    mv "$TOXI_CACHE/bin/server" "$TOXI_CACHE/bin/toxiproxy-server"
  fi
}

# RATE:LATENCY_MS, e.g. 100mbit:25 -> "100mbit 25"
parse_link() {
  local v=$1 what=$2
  [[ "$v" =~ ^([0-9]+(\.[0-9]+)?)(kbit|mbit|gbit):([0-9]+(\.[0-9]+)?)$ ]] ||
    die "$what: expected RATE:LATENCY_MS such as 100mbit:25 or 1gbit:0.5, got \"$v\""
  python3 -c "import sys; x = 2 * float(sys.argv[1]); sys.exit(0 if x == int(x) else 1)" "${BASH_REMATCH[4]}" ||
    die "$what: the latency (one way) must be a multiple of 0.5 ms, got ${BASH_REMATCH[4]}"
  echo "${BASH_REMATCH[1]}${BASH_REMATCH[3]} ${BASH_REMATCH[4]}"
}

# tbf on DEV in namespace NS ("" = host) at RATE: a burst of a few ms of traffic (at least 64 KB,
# so that a segmentation-offloaded packet fits), a queue of 50 ms.
shape() {
  local ns=$1 dev=$2 rate=$3
  local bits burst
  bits=$(python3 -c "import re,sys; m=re.match(r'([0-9.]+)(kbit|mbit|gbit)', sys.argv[1]); print(int(float(m[1]) * {'kbit':1e3,'mbit':1e6,'gbit':1e9}[m[2]]))" "$rate")
  burst=$(( bits / 8 / 250 ))
  [ "$burst" -lt 65536 ] && burst=65536
  local cmd=(tc qdisc replace dev "$dev" root tbf rate "$rate" burst "$burst" latency 50ms)
  if [ -n "$ns" ]; then ip netns exec "$ns" "${cmd[@]}"; else "${cmd[@]}"; fi
}

# A veth from namespace NS (named IFNAME there) to bridge BR, address ADDR in NS.
veth_to_bridge() {
  local ns=$1 ifname=$2 host_if=$3 br=$4 addr=$5
  ip link add "$host_if" type veth peer name "$ifname" netns "$ns"
  ip link set "$host_if" master "$br" up
  ip netns exec "$ns" ip addr add "$addr" dev "$ifname"
  ip netns exec "$ns" ip link set "$ifname" up
}

toxi() { # NS METHOD PATH [JSON]
  local ns=$1 method=$2 path=$3 body=${4:-}
  ip netns exec "$ns" curl -fsS -X "$method" "http://127.0.0.1:8474$path" ${body:+-d "$body"} >/dev/null ||
    die "toxiproxy in $ns: $method $path failed"
}

start_toxiproxy() {
  local ns=$1
  ip netns exec "$ns" "$TOXI_CACHE/bin/toxiproxy-server" -host 127.0.0.1 -port 8474 >"$STATE/$ns-toxiproxy.log" 2>&1 &
  echo $! >"$STATE/$ns-toxiproxy.pid"
  disown   # `down` kills it; no job-control notice then
  for _ in $(seq 100); do
    ip netns exec "$ns" curl -fsS http://127.0.0.1:8474/version >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "toxiproxy in $ns did not start; its log: $(tail -5 "$STATE/$ns-toxiproxy.log")"
}

# proxy NS NAME LISTEN UPSTREAM LATENCY_MS: a proxy that adds LATENCY_MS each way. Toxiproxy takes
# whole milliseconds per direction, so the round trip (2 x LATENCY_MS, whole) is split: 0.5 ms each
# way is 1 ms on the way there and 0 back.
proxy() {
  local ns=$1 name=$2 listen=$3 upstream=$4 ms=$5
  toxi "$ns" POST /proxies "{\"name\":\"$name\",\"listen\":\"$listen\",\"upstream\":\"$upstream\",\"enabled\":true}"
  local rtt there back
  rtt=$(python3 -c "import sys; print(round(2 * float(sys.argv[1])))" "$ms")
  there=$(( (rtt + 1) / 2 ))
  back=$(( rtt - there ))
  for stream in upstream:$there downstream:$back; do
    [ "${stream#*:}" -gt 0 ] || continue
    toxi "$ns" POST "/proxies/$name/toxics" \
      "{\"name\":\"lat-${stream%:*}\",\"type\":\"latency\",\"stream\":\"${stream%:*}\",\"attributes\":{\"latency\":${stream#*:},\"jitter\":0}}"
  done
}

cmd_up() {
  local regions=() intra="1gbit:0.5" inter="100mbit:25"
  while [ $# -gt 0 ]; do
    case $1 in
      --region) regions+=("$2"); shift 2 ;;
      --intra) intra=$2; shift 2 ;;
      --inter) inter=$2; shift 2 ;;
      *) die "up: unknown argument \"$1\" (expected --region NAME=ID,ID..., --intra RATE:MS, --inter RATE:MS)" ;;
    esac
  done
  [ ${#regions[@]} -ge 1 ] || die "up: at least one --region NAME=ID,... is needed"
  [ ${#regions[@]} -le 9 ] || die "up: at most 9 regions"
  local intra_rate intra_ms inter_rate inter_ms
  read -r intra_rate intra_ms <<<"$(parse_link "$intra" --intra)"
  read -r inter_rate inter_ms <<<"$(parse_link "$inter" --inter)"
  need_tools
  [ -e "$STATE/plan" ] && die "already up (state in $STATE); run down first"
  mkdir -p "$STATE"
  : >"$STATE/plan"
  echo "intra $intra_rate $intra_ms" >"$STATE/links"
  echo "inter $inter_rate $inter_ms" >>"$STATE/links"
  modprobe br_netfilter 2>/dev/null || true

  ip link add sw-ctl type bridge
  ip addr add 10.78.0.1/16 dev sw-ctl
  ip link set sw-ctl up
  ip netns add sw-lan
  ip netns add sw-wan
  for r in lan wan; do ip netns exec "sw-$r" ip link set lo up; done
  local r=0 n=2 ids=()
  for spec in "${regions[@]}"; do
    r=$((r + 1))
    local name=${spec%%=*} list=${spec#*=}
    [[ "$name" =~ ^[a-z0-9]{1,8}$ ]] || die "--region: region name \"$name\" must be 1-8 lowercase letters or digits"
    ip link add "sw-br$r" type bridge
    ip link set "sw-br$r" up
    veth_to_bridge sw-lan "lan$r" "sw-l$r" "sw-br$r" "10.77.$r.250/24"
    veth_to_bridge sw-wan "wan$r" "sw-w$r" "sw-br$r" "10.77.$r.251/24"
    shape sw-wan "wan$r" "$inter_rate"
    IFS=, read -r -a ids <<<"$list"
    for id in "${ids[@]}"; do
      [[ "$id" =~ ^[A-Za-z0-9-]{1,12}$ ]] || die "--region $name: ID \"$id\" must be 1-12 letters, digits or -"
      grep -q " $id " "$STATE/plan" && die "--region: \"$id\" is in two regions"
      local ns="sw-$id" ip="10.77.$r.$n"
      ip netns add "$ns"
      ip netns exec "$ns" ip link set lo up
      veth_to_bridge "$ns" eth0 "sw-d$n" "sw-br$r" "$ip/16"
      veth_to_bridge "$ns" ctl0 "sw-c$n" sw-ctl "10.78.0.$n/16"
      shape "$ns" eth0 "$intra_rate"
      shape "" "sw-d$n" "$intra_rate"
      echo "$r $id $ip $n $name" >>"$STATE/plan"
      n=$((n + 1))
      [ "$n" -le 240 ] || die "up: at most 238 processes"
    done
  done
  start_toxiproxy sw-lan
  start_toxiproxy sw-wan
  # Every process may connect to every other one's data port (trainers too: iperf3 uses it in check).
  while read -r wr wid wip wn _; do
    local port=$((PROXY_BASE + wn))
    proxy sw-lan "to-$wid" "10.77.$wr.250:$port" "$wip:$DATA_PORT" "$intra_ms"
    for rr in $(seq "$r"); do
      [ "$rr" = "$wr" ] && continue
      proxy sw-wan "from$rr-to-$wid" "10.77.$rr.251:$port" "$wip:$DATA_PORT" "$inter_ms"
    done
    while read -r sr sid _; do
      [ "$sid" = "$wid" ] && continue
      local via="10.77.$sr.251"
      [ "$sr" = "$wr" ] && via="10.77.$sr.250"
      ip netns exec "sw-$sid" iptables -t nat -A OUTPUT -p tcp -d "$wip" --dport "$DATA_PORT" \
        -j DNAT --to-destination "$via:$port"
    done <"$STATE/plan"
  done <"$STATE/plan"
  log "up: $(wc -l <"$STATE/plan") namespaces in $r regions; inside a region $intra_rate, $intra_ms ms; between regions $inter_rate, $inter_ms ms (each way)"
}

cmd_down() {
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^sw-' || true); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
  done
  sleep 0.2
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^sw-' || true); do ip netns del "$ns" 2>/dev/null || true; done
  for dev in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep '^sw-' || true); do
    ip link del "$dev" 2>/dev/null || true
  done
  rm -rf "$STATE"
}

ip_of() { awk -v id="$1" '$2 == id {print $3}' "$STATE/plan"; }
ns_in_region() { awk -v r="$1" '$1 == r {print $2; exit}' "$STATE/plan"; }

# One probe, from namespace FROM to the data port of TO: the rate iperf3 sees (Mbit/s) and the
# median round trip of 1-byte messages (ms). Prints "MBIT RTT_MS".
probe() {
  local from=$1 to=$2 ip
  ip=$(ip_of "$to")
  ip netns exec "sw-$to" iperf3 -s -1 -p "$DATA_PORT" -B "$ip" >/dev/null 2>&1 &
  local srv=$!
  sleep 0.5
  local mbit
  mbit=$(ip netns exec "sw-$from" iperf3 -c "$ip" -p "$DATA_PORT" -t 3 -J 2>/dev/null |
    python3 -c "import json,sys; print(round(json.load(sys.stdin)['end']['sum_received']['bits_per_second'] / 1e6, 1))") ||
    { kill "$srv" 2>/dev/null; die "check: iperf3 from $from to $to failed"; }
  wait "$srv" 2>/dev/null || true
  local rtt
  rtt=$(python3 "$here/latency_probe.py" "sw-$from" "sw-$to" "$ip" "$DATA_PORT") || die "check: latency probe from $from to $to failed"
  echo "$mbit $rtt"
}

# Within TOL (a fraction) of WANT, or at least 0.8 of a rate; prints ok or the miss.
cmd_check() {
  [ -e "$STATE/plan" ] || die "check: not up"
  local intra_rate intra_ms inter_rate inter_ms
  read -r _ intra_rate intra_ms < <(grep '^intra' "$STATE/links")
  read -r _ inter_rate inter_ms < <(grep '^inter' "$STATE/links")
  local regions first second
  regions=$(awk '{print $1}' "$STATE/plan" | sort -u | wc -l)
  first=$(ns_in_region 1)
  second=$(awk -v f="$first" '$1 == 1 && $2 != f {print $2; exit}' "$STATE/plan")
  local bad=0
  check_one() { # FROM TO RATE MS WHAT
    local got mbit rtt
    got=$(probe "$1" "$2")
    read -r mbit rtt <<<"$got"
    python3 - "$mbit" "$rtt" "$3" "$4" "$5" <<'PY' || bad=1
import re, sys
mbit, rtt, rate, ms, what = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], float(sys.argv[4]), sys.argv[5]
m = re.match(r"([0-9.]+)(kbit|mbit|gbit)", rate)
want = float(m[1]) * {"kbit": 1e-3, "mbit": 1, "gbit": 1e3}[m[2]]
want_rtt = 2 * ms
ok_rate = 0.75 * want <= mbit <= 1.1 * want
ok_rtt = want_rtt <= rtt + 0.05 and rtt <= max(want_rtt * 1.25, want_rtt + 1.5)
print(f"regions check: {what}: {mbit:.0f} Mbit/s (set {want:.0f}), round trip {rtt:.2f} ms (set {want_rtt:g})"
      f"{'' if ok_rate and ok_rtt else '  <- MISSED'}")
sys.exit(0 if ok_rate and ok_rtt else 1)
PY
  }
  if [ -n "$second" ]; then check_one "$first" "$second" "$intra_rate" "$intra_ms" "inside a region"; fi
  if [ "$regions" -ge 2 ]; then check_one "$first" "$(ns_in_region 2)" "$inter_rate" "$inter_ms" "between regions"; fi
  # Nothing bypasses the emulation: a region-2 address is unreachable without the DNAT rules.
  if [ "$regions" -ge 2 ]; then
    local other
    other=$(ip_of "$(ns_in_region 2)")
    if ip netns exec "sw-$first" python3 -c "
import socket, sys
s = socket.socket(); s.settimeout(1.0)
try:
    s.connect(('$other', 7001)); sys.exit(1)
except OSError:
    sys.exit(0)"; then
      echo "regions check: another port of another region is unreachable (no path around the emulated links)"
    else
      echo "regions check: another region is reachable around the emulated links  <- MISSED"; bad=1
    fi
  fi
  [ "$bad" = 0 ] || die "check: the emulation is not what was asked (see above)"
}

cmd_run() {
  local up_args=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do up_args+=("$1"); shift; done
  [ "${1:-}" = "--" ] || die "run: expected REGION-OPTIONS -- COMMAND..."
  shift
  trap 'cmd_down' EXIT
  trap 'exit 130' INT TERM
  cmd_up "${up_args[@]}"
  cmd_check
  local status=0
  "$@" || status=$?
  return "$status"
}

case ${1:-} in
  up) shift; trap 'status=$?; [ $status -ne 0 ] && cmd_down; exit $status' EXIT; cmd_up "$@"; trap - EXIT ;;
  down) cmd_down ;;
  check) cmd_check ;;
  run) shift; cmd_run "$@" ;;
  ip) ip_of "$2" ;;
  *) die "usage: $0 up|check|down|run|ip (see the top of this file)" ;;
esac
