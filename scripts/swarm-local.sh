#!/usr/bin/env bash
# The main job: installs what is missing, builds, and trains the bundled default job locally.
# Extra arguments go to `swarm local` (e.g. --steps 50, --max-seconds 60, --summary out.json).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh --main   # only build/bin/swarm, and only the packages it needs
exec build/bin/swarm local examples/tiny-lm.yaml "$@"
