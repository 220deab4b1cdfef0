#!/usr/bin/env bash
# Installs the Debian packages the project builds, runs and tests with. Idempotent: packages
# already present are not downloaded again, and apt's lists are refreshed only when needed.
#
#   scripts/install-deps.sh        everything: builds, tests, benchmarks, images, the local cluster
#   scripts/install-deps.sh main   only what building and running `swarm` needs (the README's main
#                                  job: scripts/swarm-local.sh): no clang, Debian's libtorch,
#                                  Prometheus, buildah, ... (a fresh machine saves their download)
set -euo pipefail
profile=${1:-all}

# What `build/bin/swarm` needs to be configured, built and run (the default job trains on fortunes).
main_packages=(
  build-essential cmake ninja-build ccache pkg-config git
  python3-venv                                # the pinned PyPI libtorch's venv (scripts/install-torch.sh)
  libcpprest-dev libssl-dev nlohmann-json3-dev libyaml-cpp-dev
  libcurl4-openssl-dev libpugixml-dev          # object storage: libcurl (AWS SigV4), pugixml (S3 XML)
  prometheus-cpp-dev libspdlog-dev libfmt-dev libcli11-dev libasio-dev
  libgtest-dev libgmock-dev                   # the configure step finds GoogleTest (SWARM_BUILD_TESTS)
  libsentencepiece-dev                        # SentencePiece tokenizers
  fortunes fortunes-min                       # the default training text
)
# What the tests, benchmarks, images and the local cluster add.
more_packages=(
  libtorch-dev libopenblas0-openmp            # Debian's libtorch 1.13 (SWARM_TORCH=debian builds; the default is
                                              # PyTorch's from PyPI: scripts/install-torch.sh); OpenBLAS (OpenMP)
  libbenchmark-dev
  sentencepiece                               # spm_train for the tests
  iproute2 iptables                           # emulated regions (bench/net/regions.sh)
  python3-torch                               # plain PyTorch checks an exported model (tests/checkpoint)
  clang                                       # thread-safety analysis of control and data plane (tests/tsa)
  libclang-rt-dev                             # libFuzzer and the sanitizer runtimes (tests/fuzz)
  iperf3 curl openssl                         # wire benchmark reference; endpoint checks; test certificates
  prometheus                                  # promtool and a real server for the metrics tests
  buildah debootstrap                         # container images without a Docker engine (scripts/build-images.sh)
  patchelf                                    # images from host binaries: their libtorch path (scripts/build-images.sh)
)
case "$profile" in
  main) packages=("${main_packages[@]}") ;;
  all) packages=("${main_packages[@]}" "${more_packages[@]}") ;;
  *) echo "install-deps: the profile is main or all, not '$profile'" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

[ "$profile" = all ] || exit 0
# Python's safetensors (PyPI) beside Debian's PyTorch, in a venv of its own that sees the system's
# packages: what the export test loads the exported model with.
venv="$HOME/.cache/swarm-operator/tools/export-venv"
if ! "$venv/bin/python" -c "import torch, safetensors.torch" 2>/dev/null; then
  echo "install-deps: safetensors (PyPI) into $venv"
  rm -rf "$venv"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q "safetensors==0.4.5"
fi
