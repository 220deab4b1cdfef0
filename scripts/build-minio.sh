#!/usr/bin/env bash
# Builds MinIO (a real S3-compatible server) from the Go module proxy, once per version, into
# ~/.cache/swarm-operator/tools/minio-<version>/bin/minio (override the tools cache:
# SWARM_TOOLS_CACHE). The object-storage tests (tests/storage, the cluster e2e) and
# bench/checkpoint-s3.sh run checkpoints against it. Idempotent: a binary already in the cache is
# not rebuilt (about 4 minutes cold on 2 cores, a 150 MB binary). Prints the binary's path on its
# last line of stdout; progress goes to stderr. The module proxy lists no tagged versions of
# github.com/minio/minio; the pseudo-version below is what it serves as @latest (2026-02-12).
set -euo pipefail
MINIO_VERSION=${SWARM_MINIO_VERSION:-v0.0.0-20260212201848-7aac2a2c5b7c}
BIN=${SWARM_TOOLS_CACHE:-$HOME/.cache/swarm-operator/tools}/minio-$MINIO_VERSION/bin
. "$(dirname "$0")/go-install.sh"
go_install_once build-minio "github.com/minio/minio@$MINIO_VERSION" "$BIN" minio
echo "$BIN/minio"
