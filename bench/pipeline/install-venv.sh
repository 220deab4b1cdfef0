#!/usr/bin/env bash
# The PyTorch the pipeline benchmark's Python side runs on: PyPI's torch wheel (the project's pinned
# version) with all its dependencies, plus PyYAML (to read the job), in a virtual environment of its
# own. Idempotent: an environment marked complete for this version is left alone. Its path is the
# last line of stdout; what the install took (seconds, size) goes to stderr.
#
# PyPI's Linux torch wheel is a CUDA build: `import torch` loads the nvidia-* wheels' libraries
# even on a machine without a GPU, so they are installed too (pip resolves them from torch's
# requirements). Kept apart from scripts/install-torch.sh's C++ libtorch (~/.cache/swarm-operator/
# torch/), which deletes what only Python needs.
#
#   SWARM_BENCH_TORCH_VERSION  the torch version (default: 2.11.0, the project's pin)
#   SWARM_TOOLS_CACHE          tools cache (default ~/.cache/swarm-operator/tools)
set -euo pipefail
version=${SWARM_BENCH_TORCH_VERSION:-2.11.0}
pyyaml_version=6.0.2
venv=${SWARM_TOOLS_CACHE:-$HOME/.cache/swarm-operator/tools}/bench-torch-$version
stamp="torch==$version pyyaml==$pyyaml_version"

if [ -f "$venv/.complete" ] && [ "$(cat "$venv/.complete")" = "$stamp" ]; then
  echo "$venv"
  exit 0
fi
echo "installing $stamp (and torch's nvidia-* dependencies) from PyPI into $venv" >&2
SECONDS=0
rm -rf "$venv"
/usr/bin/python3 -m venv "$venv"
# --no-cache-dir: the wheels (several GB) are not kept a second time in pip's cache.
"$venv/bin/pip" install -q --no-cache-dir "torch==$version" "pyyaml==$pyyaml_version" >&2
"$venv/bin/python" -W ignore -c "import torch, torch.distributed.pipelining, yaml" >&2
echo "$stamp" >"$venv/.complete"
echo "installed in ${SECONDS} s; $(du -sm "$venv" | cut -f1) MiB on disk ($venv)" >&2
echo "$venv"
