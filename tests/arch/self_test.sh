#!/usr/bin/env bash
# The include checker fails when it should: a tree with one include against a direction (the
# model reaching the network) is refused, naming the file, the line and the rule; the same tree
# without it passes.
set -euo pipefail
check="$(dirname "$0")/check_includes.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/worker/model" "$tmp/worker/net" "$tmp/operator/controller"
printf '#include "worker/model/stage.h"\n#include <vector>\n' > "$tmp/worker/model/config.h"
printf '#include "common/crypto.h"\n' > "$tmp/worker/net/frame.h"
python3 "$check" "$tmp" >"$tmp/out" || { cat "$tmp/out"; echo "self_test: a clean tree was refused"; exit 1; }
printf '#include "worker/model/stage.h"\n#include "worker/net/client.h"\n' > "$tmp/worker/model/config.h"
printf '#include <torch/torch.h>\n' > "$tmp/operator/controller/reconciler.cc"
if python3 "$check" "$tmp" >"$tmp/out"; then cat "$tmp/out"; echo "self_test: broken directions passed"; exit 1; fi
grep -q "worker/model/config.h:2: includes worker/net/client.h" "$tmp/out" || { cat "$tmp/out"; exit 1; }
grep -q "operator/controller/reconciler.cc:1: includes <torch/torch.h>" "$tmp/out" || { cat "$tmp/out"; exit 1; }
echo "self_test: both broken directions named"
