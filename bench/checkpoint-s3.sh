#!/usr/bin/env bash
# Checkpoints in object storage against a local folder, side by side: seconds to write and to
# restore one stage's checkpoint (parameters + AdamW moments), and the bytes uploaded per step, for
# the default job (hidden 192) and the same model at hidden 1024, on a real MinIO server on loopback
# (scripts/build-minio.sh) and on this machine's disk. Prints one table.
#   bench/checkpoint-s3.sh [REPEATS]      (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-5}
bench=build/bin/checkpoint_bench
[ -x "$bench" ] || { echo "build first: scripts/build.sh (needs $bench)" >&2; exit 1; }
minio=$(bash scripts/build-minio.sh)
work=$(mktemp -d /tmp/swarm-ckpt-bench.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export MINIO_ROOT_USER=bench-access MINIO_ROOT_PASSWORD=bench-secret-key MINIO_BROWSER=off
"$minio" server "$work/minio" --quiet --address "127.0.0.1:$port" --console-address "127.0.0.1:$((port + 1))" \
  >"$work/minio.log" 2>&1 &
minio_pid=$!
trap 'kill $minio_pid 2>/dev/null; wait $minio_pid 2>/dev/null; rm -rf "$work"' EXIT
export AWS_ENDPOINT_URL="http://127.0.0.1:$port" AWS_ACCESS_KEY_ID=$MINIO_ROOT_USER \
  AWS_SECRET_ACCESS_KEY=$MINIO_ROOT_PASSWORD AWS_REGION=us-east-1
for _ in $(seq 100); do
  curl -sf -o /dev/null "$AWS_ENDPOINT_URL/minio/health/live" && break
  sleep 0.2
done
curl -sf -o /dev/null --aws-sigv4 "aws:amz:us-east-1:s3" -u "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
  -X PUT "$AWS_ENDPOINT_URL/bench" || { cat "$work/minio.log" >&2; exit 1; }
printf '%-8s %-7s %14s %12s %12s %14s %18s\n' hidden where "ckpt MB/stage" "in step s" "write s" "restore s" \
  "MB up per step"
for hidden in 192 1024; do
  for where in s3 disk; do
    loc="s3://bench/h$hidden"
    [ "$where" = disk ] && loc="$work/disk-h$hidden"
    line=$("$bench" --job examples/tiny-lm.yaml --hidden "$hidden" --repeats "$repeats" --location "$loc" | tail -n 1)
    python3 - "$hidden" "$where" "$line" <<'PY'
import json, sys
h, where, s = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
per_stage = s["checkpoint_bytes"] / s["stages"] / 1e6
print(f'{h:<8} {where:<7} {per_stage:14.1f} {s["save_s_median_per_stage"]:12.3f} {s["write_s_median_per_stage"]:12.3f} '
      f'{s["restore_s_median_per_stage"]:14.3f} {s["bytes_up_per_step"] / 1e6:18.2f}')
PY
  done
done
echo "(medians over $repeats writes and restores of each of the job's stages; in step: the state copy the"
echo " step's thread makes, the rest is written by the worker's checkpoint thread; write: both; MB up per"
echo " step = the stages' checkpoints / spec.checkpoint.everySteps; the default job checkpoints every 50 steps)"
