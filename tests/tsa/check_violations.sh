#!/usr/bin/env bash
# ThreadSafety.ViolationsAreRejected: proves the clang check can fail. tests/tsa/violation.cc
# must compile cleanly as written (VIOLATION=0) and be rejected with a -Wthread-safety error for
# each broken locking rule (VIOLATION=1..5). Usage: check_violations.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: check_violations.sh SOURCE_DIR}
cxx=${TSA_CXX:-clang++}
command -v "$cxx" >/dev/null || { echo "FAIL: $cxx not found (scripts/install-deps.sh installs clang)"; exit 1; }
flags=(-std=c++17 -fsyntax-only -I"$src" -Wthread-safety -Werror=thread-safety)
fixture=$src/tests/tsa/violation.cc
out=$(mktemp)
trap 'rm -f "$out"' EXIT

if ! "$cxx" "${flags[@]}" -DVIOLATION=0 "$fixture" >"$out" 2>&1; then
  cat "$out"
  echo "FAIL: the correct fixture (VIOLATION=0) does not compile"
  exit 1
fi
echo "ok: VIOLATION=0 compiles"
status=0
for v in 1 2 3 4 5; do
  if "$cxx" "${flags[@]}" -DVIOLATION=$v "$fixture" >"$out" 2>&1; then
    echo "FAIL: VIOLATION=$v compiled; clang did not reject it"
    status=1
  elif ! grep -q 'error: .*\[-Werror,-Wthread-safety' "$out"; then
    cat "$out"
    echo "FAIL: VIOLATION=$v failed, but not with a thread-safety error"
    status=1
  else
    echo "ok: VIOLATION=$v rejected: $(grep -m1 'error:' "$out" | sed 's/.*error: //')"
  fi
done
exit $status
