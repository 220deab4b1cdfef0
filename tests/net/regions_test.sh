#!/usr/bin/env bash
# bench/net/regions.sh, the emulated regions (ctest label integration; needs root):
#   - bad settings are refused, naming the setting and its value;
#   - `run` brings the regions up, checks the emulation (iperf3 rate, latency probe round trip, no
#     path around the emulated links: it fails otherwise), trains `swarm local` through it with the
#     children in their namespaces, and leaves nothing behind;
#   - a command that fails, and Ctrl-C, leave nothing behind either;
#   - a child whose namespace is missing is refused by enter.sh with its name.
#   regions_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
SRC=$(cd "${1:?usage: regions_test.sh SOURCE_DIR BUILD_DIR}" && pwd)
BUILD=$(cd "${2:?}" && pwd)
R="$SRC/bench/net/regions.sh"
OUT=$(mktemp -d /tmp/swarm-regions-test.XXXXXX)
export SWARM_NET_STATE="$OUT/state"
trap 'bash "$R" down >/dev/null 2>&1; rm -rf "$OUT"' EXIT

fail() { echo "FAIL: $*"; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (network namespaces)"
leftovers() {
  { ip netns list | awk '{print $1}' | grep '^sw-'; ip -o link show | awk -F': ' '{print $2}' | grep '^sw-'; } || true
  [ -e "$SWARM_NET_STATE" ] && echo "$SWARM_NET_STATE"
  pgrep -f toxiproxy-server || true
}
expect_clean() { local l; l=$(leftovers); [ -z "$l" ] || fail "$1: left behind: $l"; }
regions=(--region a=trainer0,stage0-w0 --region b=stage1-w0)

echo "== bad settings are refused by name"
msg=$(bash "$R" up "${regions[@]}" --inter 100mbps:25 2>&1) && fail "--inter 100mbps:25 accepted"
grep -q -- '--inter.*100mbps:25' <<<"$msg" || fail "no clear error for --inter 100mbps:25: $msg"
msg=$(bash "$R" up "${regions[@]}" --intra 1gbit:0.3 2>&1) && fail "--intra 1gbit:0.3 accepted"
grep -q -- '--intra.*0.3' <<<"$msg" || fail "no clear error for --intra 1gbit:0.3: $msg"
msg=$(bash "$R" up --region 'a=trainer0,bad/id' 2>&1) && fail "an ID with / accepted"
grep -q 'bad/id' <<<"$msg" || fail "no clear error for ID bad/id: $msg"
expect_clean "a refused up"

echo "== enter.sh refuses a child without a namespace"
msg=$("$SRC/bench/net/enter.sh" worker stage7-w3 /bin/true 2>&1) && fail "enter.sh started a child without a namespace"
grep -q 'stage7-w3' <<<"$msg" || fail "enter.sh: no clear error: $msg"

echo "== swarm local through 50 Mbit/s and 10 ms between regions (200 Mbit/s, 0.5 ms inside)"
cat >"$OUT/run.sh" <<EOF
set -e
"$BUILD/bin/swarm" local "$SRC/examples/tiny-lm.yaml" --steps 3 --no-progress --no-checkpoints \
  --child-wrapper "$SRC/bench/net/enter.sh" --registry-host 10.78.0.1 --summary "$OUT/summary.json" \
  --log-dir "$OUT/logs" >/dev/null
# every child ran in its own namespace, at its address there
for id in trainer0 stage0-w0 stage1-w0; do grep -q . "$OUT/logs/\$id.log"; done
EOF
bash "$R" run "${regions[@]}" --intra 200mbit:0.5 --inter 50mbit:10 -- bash "$OUT/run.sh" >"$OUT/run.log" 2>&1 ||
  { cat "$OUT/run.log"; fail "regions.sh run with swarm local failed"; }
cat "$OUT/run.log"
grep -q 'between regions: .* round trip' "$OUT/run.log" || fail "the emulation was not checked"
python3 - "$OUT/summary.json" "$OUT/logs" <<'PY' || fail "the run through the emulated regions is wrong"
import json, sys, glob
s = json.load(open(sys.argv[1]))
assert s["steps"] == 3, s["steps"]
assert s["wire_bytes"] > 0 and s["samples"] >= 3 * 64, (s["wire_bytes"], s["samples"])
assert s["unaveraged_steps"] == 0, s
log = open(sys.argv[2] + "/stage1-w0.log").read()
assert "10.77.2." in log, "stage1-w0 did not announce its region-b address"
print("swarm local through the regions: steps", s["steps"], "samples/s", round(s["samples_per_second"], 1),
      "wire bytes/sample", round(s["wire_bytes_per_sample"]))
PY
expect_clean "after run"

echo "== a failing command: its status, nothing left"
bash "$R" run --region a=x1 --region b=x2 --inter 100mbit:1 -- false >"$OUT/fail.log" 2>&1
st=$?
[ "$st" = 1 ] || { cat "$OUT/fail.log"; fail "run -- false returned $st, not 1"; }
expect_clean "after a failing command"

echo "== Ctrl-C: nothing left"
# With job control the run gets its own process group and SIGINT is not ignored in it, as in a
# terminal where Ctrl-C signals the foreground group.
set -m
bash "$R" run --region a=x1 --region b=x2 --inter 100mbit:1 -- sleep 300 >"$OUT/int.log" 2>&1 &
pid=$!
set +m
for _ in $(seq 300); do pgrep -fx 'sleep 300' >/dev/null && break; sleep 0.2; done
pgrep -fx 'sleep 300' >/dev/null || { cat "$OUT/int.log"; fail "run did not get to its command"; }
kill -INT -- "-$pid"
wait "$pid"
st=$?
[ "$st" = 130 ] || { cat "$OUT/int.log"; fail "Ctrl-C: status $st, not 130"; }
expect_clean "after Ctrl-C"
echo "PASS"
