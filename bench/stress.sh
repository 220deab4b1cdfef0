#!/usr/bin/env bash
# The test suites under load (issue 28): the unit suite UNIT_RUNS times and the integration suite
# INTEGRATION_RUNS times, one after another, with `stress-ng --cpu 2 --io 1` running beside them
# the whole time. Prints one line per run (label, round, wall seconds, tests run, failures and
# their names) and a total; asserts nothing, but its figure can come out bad: every failure is
# counted, a run still going at RUN_LIMIT seconds is stopped and counted as a timeout, and nothing
# is rerun (scripts/test.sh's rerun of a failed test is exactly what this measures without).
#
#   bench/stress.sh [BUILD_DIR]     default build; UNIT_RUNS (default 20), INTEGRATION_RUNS (3),
#                                   RUN_LIMIT (seconds per run, default 3600), JOBS (ctest -j, 2),
#                                   STRESS (the stress-ng arguments, default "--cpu 2 --io 1"),
#                                   OUT (the folder for each run's ctest output)
# Needs stress-ng (Debian; installed here when missing) and the tests' Python for the
# python-labelled tests (scripts/install-python.sh, exported as scripts/test.sh does).
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
unit_runs=${UNIT_RUNS:-20}
integration_runs=${INTEGRATION_RUNS:-3}
limit=${RUN_LIMIT:-3600}
jobs=${JOBS:-2}
stress_args=${STRESS:---cpu 2 --io 1}
out=${OUT:-$(mktemp -d /tmp/stress.XXXXXX)}
mkdir -p "$out"
command -v stress-ng >/dev/null || {
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends stress-ng >/dev/null
}
SWARM_PYTHON=${SWARM_PYTHON:-$(bash scripts/install-python.sh)}
export SWARM_PYTHON SWARM_REQUIRE_PYTHON=1

# shellcheck disable=SC2086
stress-ng $stress_args --timeout 0 >"$out/stress-ng.log" 2>&1 &
stress_pid=$!
trap 'kill "$stress_pid" 2>/dev/null || true' EXIT
sleep 1
kill -0 "$stress_pid" 2>/dev/null || { echo "bench/stress.sh: stress-ng did not start ($out/stress-ng.log)" >&2; exit 1; }

total_runs=0 failed_runs=0 total_failures=0 timeouts=0
run() { # LABEL ROUND
  local label=$1 round=$2 log="$out/$1.$2.log" start rc=0 ran failures names
  start=$(date +%s)
  ( cd "$build" && timeout "$limit" ctest -L "^$label\$" -j "$jobs" --timeout 900 --output-on-failure ) >"$log" 2>&1 || rc=$?
  ran=$(sed -n 's/.*tests passed, [0-9]* tests failed out of \([0-9]*\).*/\1/p' "$log" | tail -1 || true)
  failures=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of.*/\1/p' "$log" | tail -1)
  names=$(sed -n '/The following tests FAILED:/,$p' "$log" | grep -E '^\s+[0-9]+ - ' | sed 's/^ *[0-9]* - //; s/ (.*//' | paste -sd, - || true)
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    timeouts=$((timeouts + 1)); failures=${failures:-0}; names="${names:+$names,}TIMEOUT(${limit}s)"
    failed_runs=$((failed_runs + 1))
  elif [ "$rc" -ne 0 ]; then
    failed_runs=$((failed_runs + 1))
    [ -n "$failures" ] || { failures=1; names="ctest exit $rc (no summary)"; }
  fi
  total_runs=$((total_runs + 1))
  total_failures=$((total_failures + ${failures:-0}))
  printf '%-12s round %2d  %5d s  tests %4s  failed %s  %s\n' "$label" "$round" "$(( $(date +%s) - start ))" \
    "${ran:-?}" "${failures:-0}" "$names"
}
echo "bench/stress.sh: beside stress-ng $stress_args; output in $out ($(date +%T))"
for r in $(seq 1 "$unit_runs"); do run unit "$r"; done
for r in $(seq 1 "$integration_runs"); do run integration "$r"; done
echo "total: $total_runs runs, $failed_runs with a failure, $total_failures failed tests, $timeouts timeouts ($(date +%T))"
