#!/usr/bin/env bash
# Builds the container images with buildah (no Docker engine needed):
#   localhost/swarm-base:<key>      minimal Debian bookworm, debootstrapped from this machine's apt
#                                   mirror (cached: made once per key, see BASE_KEY below)
#   localhost/swarm-worker:dev      Dockerfile.worker   (swarm: registry, worker, trainer, local)
#   localhost/swarm-operator:dev    Dockerfile.operator (swarm-operator; no libtorch)
#   localhost/swarm-worker-cuda:dev Dockerfile.worker with TORCH=cuda (--torch cuda): swarm against
#                                   PyTorch's CUDA libtorch from the PyPI wheels, for GPU pools
#
#   scripts/build-images.sh                      full multi-stage builds: CMake compiles inside
#   scripts/build-images.sh --prebuilt build/bin the runtime stages of the same Dockerfiles, plus
#                                                the binaries already built on this machine (same
#                                                Debian release and libraries, and the PyPI
#                                                libtorch they link): what the tests use
#   scripts/build-images.sh --torch cuda         the CUDA worker image only (full build; no GPU
#                                                needed): the wheels of TORCH_VERSION below are
#                                                downloaded once into ~/.cache/swarm-operator/wheels/
#                                                (~2.8 GB) and mounted into the build, and a ccache
#                                                for it is kept in ~/.cache/swarm-operator/ccache-cuda
#   localhost/kueue:<version>       --only kueue: Kueue's controller manager (scripts/k8s/build-kueue.sh,
#                                   a static binary from the Go module proxy) FROM scratch, as its
#                                   release image is, for scripts/k8s/kueue.sh; not built otherwise
#   options: --tag TAG (default dev), --only worker|operator|kueue, --torch cpu|cuda (default cpu);
#   SWARM_IMAGE_JOBS=N limits the CUDA build's compile jobs (default: every core)
#
# Idempotent: the base image is made only when missing; in --prebuilt mode the runtime stage is
# kept under a key of its Dockerfile text and rebuilt only when that changes; a full build uses
# buildah's layer cache (--layers). An image replaced under the same tag is removed (vfs storage
# keeps a full copy of each layer). Storage: vfs, chroot isolation (works inside a
# container, without fuse-overlayfs or user namespaces). Needs root (or sudo), buildah and
# debootstrap (scripts/install-deps.sh installs them). Prints the image names on stdout, progress
# and timings on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

TAG=dev
PREBUILT=""
ONLY=""
TORCH=cpu
# The CUDA image's PyTorch: 2.11.0, whose default PyPI wheel is built for CUDA 13.0 (the toolkit
# release it pins, 13.0.2) with cuDNN 9.19; nvcc's NVVM is pinned to the same 13.0 release (nvcc's
# own requirement is unpinned and would pull a newer, incompatible one).
TORCH_VERSION=2.11.0
CUDA_TOOLKIT_VERSION=13.0.2
NVVM_VERSION=13.0.88
CACHE_ROOT=${SWARM_CACHE_DIR:-$HOME/.cache/swarm-operator}
while (($#)); do
  case "$1" in
    --prebuilt) PREBUILT=$(realpath "$2"); shift 2 ;;
    --tag) TAG=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --torch) TORCH=$2; shift 2 ;;
    *) echo "build-images: unknown argument $1" >&2; exit 2 ;;
  esac
done

case "$ONLY" in
  ""|worker|operator|kueue) ;;
  *) echo "build-images: --only worker|operator|kueue, not $ONLY" >&2; exit 2 ;;
esac
case "$TORCH" in
  cpu) ;;
  cuda)
    [ -z "$PREBUILT" ] || { echo "build-images: --torch cuda is a full build (it compiles against the CUDA libtorch), no --prebuilt" >&2; exit 2; }
    [ "$ONLY" != operator ] || { echo "build-images: --torch cuda builds the worker image only" >&2; exit 2; }
    ONLY=worker ;;
  *) echo "build-images: --torch cpu|cuda, not $TORCH" >&2; exit 2 ;;
esac

export STORAGE_DRIVER=vfs BUILDAH_ISOLATION=chroot
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo -E"
BUILDAH="$SUDO buildah --storage-driver vfs"
log() { echo "[build-images $(date +%T)] $*" >&2; }
command -v buildah >/dev/null && command -v debootstrap >/dev/null || bash scripts/install-deps.sh

# Kueue's image: its binary as /manager (the release's Deployment runs /manager), a non-root user
# (the Deployment says runAsNonRoot), nothing else. Remade when the binary changes (its digest is a
# label of the image); tagged with Kueue's version, not --tag.
kueue_image() {
  local dir version image digest ctr start
  start=$(date +%s)
  dir=$(bash scripts/k8s/build-kueue.sh | tail -n 1)
  version=$(basename "$dir")
  image=localhost/kueue:$version
  digest=$(sha256sum "$dir/bin/kueue" | cut -c1-16)
  if [ "$($BUILDAH inspect --type image --format '{{index .ImageAnnotations "io.swarm-operator.binary"}}' "$image" 2>/dev/null || true)" = "$digest" ]; then
    log "$image is cached"
  else
    ctr=$($BUILDAH from scratch)
    $BUILDAH copy --chown 0:0 "$ctr" "$dir/bin/kueue" /manager >/dev/null
    $BUILDAH config --entrypoint '["/manager"]' --cmd '[]' --user 65532:65532 \
      --annotation io.swarm-operator.binary="$digest" "$ctr"
    replace_tag "$image" "$($BUILDAH commit --quiet --rm "$ctr")"
    log "$image built in $(( $(date +%s) - start )) s"
  fi
  echo "$image"
}

# replace_tag IMAGE NEW_ID: tags NEW_ID as IMAGE and removes the image IMAGE named before, unless
# another tag still uses it (vfs storage keeps a full copy of every layer: old images add up fast).
replace_tag() {
  local image=$1 new=$2 old
  old=$($BUILDAH images --noheading --quiet --no-trunc "$image" 2>/dev/null | head -1 || true)
  $BUILDAH tag "$new" "$image"
  if [ -n "$old" ] && [ "$old" != "$new" ] && [ "${old#sha256:}" != "${new#sha256:}" ]; then
    $BUILDAH rmi "$old" >/dev/null 2>&1 || true
  fi
}

if [ "$ONLY" = kueue ]; then kueue_image; exit 0; fi

# The base image: Debian bookworm minbase from the mirror (and with the apt sources) this machine
# uses, so that images get the same package versions as the host build. Its key changes with the
# sources, the package list and BASE_VERSION (bump it to force a rebuild).
BASE_VERSION=1
SUITE=bookworm
BASE_PACKAGES=ca-certificates
sources_file=""
for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
  if [ -s "$f" ] && grep -q '^[^#]' "$f"; then sources_file=$f; break; fi
done
[ -n "$sources_file" ] || { echo "build-images: no apt sources found on this machine" >&2; exit 1; }
MIRROR=$(sed -n 's#^URIs:[[:space:]]*\([^[:space:]]*\).*#\1#p; s#^deb[[:space:]]\+\(http[^[:space:]]*\)[[:space:]]\+'"$SUITE"'[[:space:]].*#\1#p' \
  "$sources_file" | grep -v security | head -1)
[ -n "$MIRROR" ] || { echo "build-images: no $SUITE mirror in $sources_file" >&2; exit 1; }
BASE_KEY="$SUITE-v$BASE_VERSION-$( (echo "$MIRROR $BASE_PACKAGES"; cat "$sources_file") | sha256sum | cut -c1-12)"
BASE_IMAGE="localhost/swarm-base:$BASE_KEY"

image_exists() { $BUILDAH images --noheading --quiet "$1" >/dev/null 2>&1; }

if image_exists "$BASE_IMAGE"; then
  log "base image $BASE_IMAGE is cached"
else
  start=$(date +%s)
  log "debootstrap $SUITE (minbase) from $MIRROR"
  rootfs=$(mktemp -d /tmp/swarm-base-rootfs.XXXXXX)
  trap '$SUDO rm -rf "$rootfs" "$rootfs.tar"' EXIT
  $SUDO debootstrap --variant=minbase --include="$BASE_PACKAGES" "$SUITE" "$rootfs" "$MIRROR" >&2
  # apt inside the images uses the same sources as this machine (updates and security included).
  $SUDO rm -f "$rootfs/etc/apt/sources.list"
  $SUDO cp "$sources_file" "$rootfs/etc/apt/$( [ "${sources_file##*.}" = sources ] && echo sources.list.d/debian.sources || echo sources.list)"
  # Smaller images: no downloaded packages, lists, docs or locales beyond what apt needs.
  $SUDO rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* \
               "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/var/log/*.log
  printf 'path-exclude /usr/share/doc/*\npath-exclude /usr/share/man/*\npath-exclude /usr/share/info/*\n' \
    | $SUDO tee "$rootfs/etc/dpkg/dpkg.cfg.d/01-nodoc" >/dev/null
  $SUDO tar -C "$rootfs" --numeric-owner -cf "$rootfs.tar" .
  ctr=$($BUILDAH from scratch)
  $BUILDAH add "$ctr" "$rootfs.tar" / >/dev/null
  $BUILDAH config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd /bin/bash \
    --label io.swarm-operator.base-key="$BASE_KEY" "$ctr"
  $BUILDAH commit --quiet --rm "$ctr" "$BASE_IMAGE" >/dev/null
  $BUILDAH tag "$BASE_IMAGE" localhost/swarm-base:$SUITE
  log "base image $BASE_IMAGE made in $(( $(date +%s) - start )) s"
fi

# The wheels of the CUDA image, downloaded once per version into WHEELS (for the Python and
# platform of the image: CPython 3.11, glibc 2.36, x86_64; Debian bookworm's).
WHEELS="$CACHE_ROOT/wheels/torch-$TORCH_VERSION-cuda-toolkit-$CUDA_TOOLKIT_VERSION-cp311-x86_64"
fetch_wheels() {
  if [ -f "$WHEELS/.complete" ]; then
    log "wheels for torch $TORCH_VERSION are cached ($WHEELS, $(du -sh "$WHEELS" | cut -f1))"
    return
  fi
  local start platforms="" v
  start=$(date +%s)
  for v in $(seq 5 36); do platforms="$platforms --platform manylinux_2_${v}_x86_64"; done
  python3 -m pip --version >/dev/null 2>&1 || { echo "build-images: --torch cuda downloads wheels with python3 -m pip (not found)" >&2; exit 1; }
  log "downloading torch $TORCH_VERSION and its CUDA wheels into $WHEELS"
  mkdir -p "$WHEELS"
  python3 -m pip download -q --disable-pip-version-check --only-binary=:all: --implementation cp \
    --python-version 3.11 $platforms --platform manylinux2014_x86_64 --platform manylinux2010_x86_64 \
    --platform manylinux1_x86_64 --platform linux_x86_64 -d "$WHEELS" "torch==$TORCH_VERSION" \
    "cuda-toolkit[nvcc,crt]==$CUDA_TOOLKIT_VERSION" "nvidia-nvvm==$NVVM_VERSION" >&2
  touch "$WHEELS/.complete"
  log "wheels downloaded in $(( $(date +%s) - start )) s ($(du -sh "$WHEELS" | cut -f1))"
}

# build_image NAME DOCKERFILE BINARY
build_image() {
  local name=$1 dockerfile=$2 binary=$3 image="localhost/$1:$TAG" start id args=()
  start=$(date +%s)
  if [ -z "$PREBUILT" ]; then
    log "$image: full build ($dockerfile)"
    if [ "$dockerfile" = Dockerfile.worker ]; then
      # buildah 1.28 resolves `FROM worker-${TORCH}` only from an explicit build argument.
      args+=(--build-arg TORCH="$TORCH")
      if [ "$TORCH" = cuda ]; then
        mkdir -p "$CACHE_ROOT/ccache-cuda"
        args+=(--build-arg TORCH_VERSION="$TORCH_VERSION" --build-arg CUDA_TOOLKIT_VERSION="$CUDA_TOOLKIT_VERSION"
               --build-arg NVVM_VERSION="$NVVM_VERSION" --build-arg BUILD_JOBS="${SWARM_IMAGE_JOBS:-}"
               -v "$WHEELS:/wheels:ro" -v "$CACHE_ROOT/ccache-cuda:/ccache")
      fi
    fi
    $BUILDAH bud --layers --isolation chroot --build-arg BASE_IMAGE="$BASE_IMAGE" "${args[@]}" -f "$dockerfile" \
      --iidfile "/tmp/$name.iid" . >&2
    id=$(cat "/tmp/$name.iid")
    # buildah 1.28 leaves the working container of a final stage that is only a FROM (`FROM
    # worker-${TORCH}`) behind: a full vfs copy of the image (3.5 GB for the CUDA one) per build.
    local c
    for c in $($BUILDAH containers --noheading --format '{{.ContainerID}} {{.ImageID}} {{.ContainerName}}' \
                 | awk -v id="${id#sha256:}" 'index(id, $2) == 1 && $3 == substr(id, 1, 12) "-working-container" {print $1}'); do
      $BUILDAH rm "$c" >/dev/null
    done
    replace_tag "$image" "$id"
  else
    [ -x "$PREBUILT/$binary" ] || { echo "build-images: no $PREBUILT/$binary (build it first)" >&2; exit 1; }
    # The runtime stage, keyed by its Dockerfile text and the base: built once per change.
    local stage_key runtime
    stage_key=$( (echo "$BASE_KEY"; sed -n '/^FROM .* AS runtime/,/^FROM /p' "$dockerfile") | sha256sum | cut -c1-12)
    runtime="localhost/$name-runtime:$stage_key"
    if image_exists "$runtime"; then
      log "$image: runtime stage of $dockerfile is cached ($runtime)"
    else
      log "$image: runtime stage of $dockerfile"
      $BUILDAH bud --isolation chroot --build-arg BASE_IMAGE="$BASE_IMAGE" -f "$dockerfile" --target runtime \
        -t "$runtime" . >&2
    fi
    log "$image: $runtime + $PREBUILT/$binary"
    local ctr tmp
    tmp=$(mktemp -d)
    # The binary as the build stage would leave it: stripped, owned by root.
    cp "$PREBUILT/$binary" "$tmp/$binary"
    strip "$tmp/$binary"
    ctr=$($BUILDAH from "$runtime")
    # A binary linked against PyPI's libtorch (scripts/install-torch.sh, the default build) gets
    # the libraries it loads from there: libtorch_cpu, libc10, libgomp and the CUDA runtime and
    # CUPTI libtorch_cpu asks for, under /opt/pytorch in the wheel's own layout (libtorch_cpu's
    # RPATH finds nvidia/cu13/lib beside torch/lib), and its RUNPATH pointed there.
    local torch_lib site lib
    torch_lib=$(ldd "$PREBUILT/$binary" | awk '$1 == "libtorch_cpu.so" && $3 ~ /\/torch\/lib\// {print $3}')
    if [ -n "$torch_lib" ]; then
      site=$(realpath "$(dirname "$torch_lib")/../..")
      mkdir -p "$tmp/opt/pytorch"
      for lib in $(ldd "$PREBUILT/$binary" | awk '{print $3}' | grep "^/" | xargs -r realpath | grep "^$site/"); do
        install -D -m 0644 "$lib" "$tmp/opt/pytorch/${lib#"$site"/}"
      done
      patchelf --set-rpath /opt/pytorch/torch/lib "$tmp/$binary"
      $BUILDAH copy --chown 0:0 "$ctr" "$tmp/opt/pytorch" /opt/pytorch >/dev/null
      log "$image: + PyPI libtorch from $site ($(du -sh "$tmp/opt/pytorch" | cut -f1))"
    fi
    $BUILDAH copy --chown 0:0 "$ctr" "$tmp/$binary" "/usr/local/bin/$binary" >/dev/null
    id=$($BUILDAH commit --quiet --rm "$ctr")
    replace_tag "$image" "$id"
    rm -rf "$tmp"
  fi
  log "$image built in $(( $(date +%s) - start )) s"
  echo "$image"
}

if [ "$TORCH" = cuda ]; then
  fetch_wheels
  build_image swarm-worker-cuda Dockerfile.worker swarm
  exit 0
fi
[ "$ONLY" = operator ] || build_image swarm-worker Dockerfile.worker swarm
[ "$ONLY" = worker ] || build_image swarm-operator Dockerfile.operator swarm-operator
