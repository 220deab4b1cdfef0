#!/usr/bin/env bash
# The summary of a tests/fuzz/fuzz.sh run: one line per target from its libFuzzer log
# (OUT/logs/TARGET.log, run with -print_final_stats=1) and the artifacts it left under
# OUT/artifacts newer than STAMP. Exit status 1 when any target had a finding.
# Usage: report.sh OUT STAMP TARGET...
set -euo pipefail
out=$1 stamp=$2
shift 2
found=0
printf '%-20s %10s %8s %6s %7s %7s  %s\n' target execs execs/s cov ft corpus findings
for t in "$@"; do
  log=$out/logs/$t.log
  stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -n 1; }
  execs=$(stat number_of_executed_units)
  rate=$(stat average_exec_per_sec)
  last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' <<<"$last")
  mapfile -t artifacts < <(find "$out/artifacts" -name "$t-*" -newer "$stamp" 2>/dev/null)
  what=0
  if ((${#artifacts[@]})); then
    what="${#artifacts[@]}: ${artifacts[*]}"
  elif [ -z "$execs" ]; then
    what="no final stats (the target died: $log)"
  fi
  [ "$what" = 0 ] || found=1
  printf '%-20s %10s %8s %6s %7s %7s  %s\n' "$t" "${execs:--}" "${rate:--}" "${cov:--}" "${ft:--}" "${corp:--}" "$what"
  if [ "$what" != 0 ]; then
    grep -m 3 -E '^(FINDING|==[0-9]+==ERROR|.*runtime error:|SUMMARY)' "$log" | sed 's/^/    /' || true
  fi
done
exit "$found"
