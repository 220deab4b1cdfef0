#!/usr/bin/env bash
# SWARM against PyTorch's own pipeline parallelism: `swarm local` side by side with the same model
# written in PyTorch (bench/pipeline/model.py) under torch.distributed.pipelining, ScheduleGPipe and
# Schedule1F1B, gloo on the loopback, one process per stage — on the same cores, from the same
# initial weights (`swarm export --initial`), on the same microbatches in the same order, with the
# same optimizer. Alternating (swarm, gpipe, 1f1b, swarm, ...), REPEATS runs of each; prints
# samples/s, the loss after the same steps (train loss of the first and last step, eval loss) and
# the peak PSS of each run's processes, then the medians and swarm / max(gpipe, 1f1b) samples/s.
#   bench/vs-pytorch-pipeline.sh [JOB.yaml] [STEPS] [REPEATS]
# JOB defaults to examples/tiny-lm.yaml (bench/jobs/pipeline-3stage-h512.yaml is the larger one),
# STEPS to 30, REPEATS to 2. The raw per-run JSON and logs go to a temporary folder (printed).
#
# The first run installs PyTorch (PyPI's torch==2.11.0 and its dependencies, about 4.7 GB) into a
# virtual environment of its own (bench/pipeline/install-venv.sh); later runs reuse it.
#   SWARM_BIN          the swarm binary (default build/bin/swarm)
#   SWARM_TOOLS_CACHE  where the environment goes (default ~/.cache/swarm-operator/tools)
set -euo pipefail
cd "$(dirname "$0")/.."
job="${1:-examples/tiny-lm.yaml}"
steps="${2:-30}"
repeats="${3:-2}"
usage="usage: bench/vs-pytorch-pipeline.sh [JOB.yaml] [STEPS] [REPEATS]"
[ -f "$job" ] || { echo "$usage"$'\n'"JOB: no such file: $job" >&2; exit 2; }
[[ "$steps" =~ ^[1-9][0-9]*$ ]] || { echo "$usage"$'\n'"STEPS: expected a positive integer, got '$steps'" >&2; exit 2; }
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || { echo "$usage"$'\n'"REPEATS: expected a positive integer, got '$repeats'" >&2; exit 2; }
swarm="${SWARM_BIN:-build/bin/swarm}"
[ -x "$swarm" ] || bash scripts/build.sh >/dev/null

venv=$(bash bench/pipeline/install-venv.sh)
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the source tree
out=$(mktemp -d -t vs-pytorch-pipeline.XXXXXX)
echo "raw results: $out" >&2
exec "$venv/bin/python" bench/pipeline/driver.py --job "$job" --steps "$steps" --repeats "$repeats" \
  --swarm "$(realpath "$swarm")" --python "$venv/bin/python" --out "$out"
