#!/usr/bin/env bash
# Builds Berth's images from images/Containerfile with Docker or Podman, whichever is installed:
#   platform      $IMAGE_REPOSITORY/platform:$IMAGE_TAG
#   agent-server  $IMAGE_REPOSITORY/agent-server:$IMAGE_TAG
# Overridable: IMAGE_REPOSITORY (default berth), IMAGE_TAG (default dev), CONTAINER_ENGINE (a command,
# e.g. "podman --root /some/storage"), BUILD_ARGS (extra build flags, e.g. --isolation=chroot).
set -euo pipefail
cd "$(dirname "$0")/.."
repository=${IMAGE_REPOSITORY:-berth}
tag=${IMAGE_TAG:-dev}

if [ -n "${CONTAINER_ENGINE:-}" ]; then
  read -r -a engine <<<"$CONTAINER_ENGINE"
elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  engine=(docker)
elif command -v podman >/dev/null; then
  # Checked after Docker: a docker client without a reachable engine (as on CI machines) is no use.
  engine=(podman)
elif command -v docker >/dev/null; then
  echo "images: docker is installed but its engine does not answer (docker info failed), and podman is not installed" >&2
  exit 1
else
  echo "images: neither docker nor podman is installed: install one of them to build the images" >&2
  exit 1
fi
read -r -a extra <<<"${BUILD_ARGS:-}"

for target in platform agent-server; do
  image="$repository/$target:$tag"
  echo "images: building $image with ${engine[0]}…"
  start=$SECONDS
  # The stages before the targets are shared: the second image reuses the first one's layers.
  "${engine[@]}" build "${extra[@]}" --file images/Containerfile --target "$target" --tag "$image" .
  echo "images: built $image in $((SECONDS - start)) s"
done
