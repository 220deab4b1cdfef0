#!/usr/bin/env bash
# Builds MinIO (a real S3-compatible server) from the Go module proxy, once per version, into
# ~/.cache/swarm-operator/tools/minio-<version>/bin/minio (override the tools cache:
# SWARM_TOOLS_CACHE). The object-storage tests (ctest -L integration, tests/storage) and
# bench/checkpoint-s3.sh run checkpoints against it. Idempotent: a binary already in the cache is
# not rebuilt (about 4 minutes cold on 2 cores, a 150 MB binary). Prints the binary's path on its
# last line of stdout; progress goes to stderr. The module proxy lists no tagged versions of
# github.com/minio/minio; the pseudo-version below is what it serves as @latest (2026-02-12).
set -euo pipefail

MINIO_VERSION=${SWARM_MINIO_VERSION:-v0.0.0-20260212201848-7aac2a2c5b7c}
CACHE=${SWARM_TOOLS_CACHE:-$HOME/.cache/swarm-operator/tools}/minio-$MINIO_VERSION
JOBS=${SWARM_K8S_BUILD_JOBS:-1}
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
[ -x "$GO" ] || { echo "build-minio: no Go toolchain (set GO=/path/to/go)" >&2; exit 1; }

BIN="$CACHE/bin"
if [ ! -x "$BIN/minio" ]; then
  mkdir -p "$BIN"
  start=$(date +%s)
  echo "[build-minio $(date +%T)] minio $MINIO_VERSION" >&2
  # GOBIN is a temporary folder so that an interrupted build never leaves a half-written binary.
  tmp=$(mktemp -d "$CACHE/tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  GOBIN="$tmp" GOFLAGS="-p=$JOBS -buildvcs=false" CGO_ENABLED=0 GOTOOLCHAIN=${GOTOOLCHAIN:-local} \
    "$GO" install -trimpath -ldflags=-s "github.com/minio/minio@$MINIO_VERSION" >&2
  mv "$tmp/minio" "$BIN/minio"
  echo "[build-minio $(date +%T)] done in $(( $(date +%s) - start )) s" >&2
fi
echo "$BIN/minio"
