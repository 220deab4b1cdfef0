#!/usr/bin/env bash
# Fuzzing: builds the libFuzzer targets of tests/fuzz (clang, ASan + UBSan + libFuzzer) in
# build-fuzz and runs each for SECONDS, one at a time; prints per target the executions, executions
# per second, coverage (libFuzzer's final cov and ft), the corpus size and the findings. Exit
# status 1 when any target had a finding; its input is saved under build-fuzz/fuzz-out/artifacts
# and replays with `build-fuzz/fuzz/<target> <artifact>`.
#
#   bench/fuzz.sh [SECONDS] [TARGET...]   SECONDS default 60; FUZZ_BUILD_DIR=dir (default
#                                         build-fuzz), FUZZ_JOBS=N targets at a time (default 1)
# Installs what is missing first (clang, libclang-rt-dev: scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
seconds=${1:-60}
(($# == 0)) || shift
exec bash tests/fuzz/fuzz.sh "${FUZZ_BUILD_DIR:-build-fuzz}" "$seconds" "$@"
