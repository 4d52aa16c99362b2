#!/usr/bin/env bash
# Installs what container sandboxes need when it is missing: Podman (the engine behind the Docker
# API the sandbox driver speaks), runc, busybox-static and docker-registry (the test image and
# registry), uidmap and slirp4netns (Podman's own dependencies), btrfs-progs (a btrfs storage root
# is where Podman can enforce sandbox storage quotas), gcc + libc6-dev (the static in-sandbox agent),
# iptables (the test of the Kubernetes pods' egress lock runs its script for real), mmdebstrap (the
# image tests' stand-in for the Node base image, infra/local/src/node-base-image.ts).
set -euo pipefail
declare -A packages=(
  [podman]=/usr/bin/podman
  [runc]=/usr/sbin/runc
  [docker-registry]=/usr/bin/docker-registry
  [busybox-static]=/bin/busybox
  [uidmap]=/usr/bin/newuidmap
  [slirp4netns]=/usr/bin/slirp4netns
  [btrfs-progs]=/sbin/mkfs.btrfs
  [gcc]=/usr/bin/gcc
  [libc6-dev]=/usr/lib/x86_64-linux-gnu/libc.a
  [iptables]=/usr/sbin/iptables
  [mmdebstrap]=/usr/bin/mmdebstrap
)
missing=()
for package in "${!packages[@]}"; do
  path=${packages[$package]}
  # usrmerge: /usr/sbin/x and /sbin/x are one file, but older systems have only one of them.
  [ -e "$path" ] || [ -e "${path/\/usr/}" ] || missing+=("$package")
done
# busybox-static replaces the dynamic busybox; only the static one runs in an empty image.
if [ -e /bin/busybox ] && ! dpkg -s busybox-static >/dev/null 2>&1; then missing+=(busybox-static); fi
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "container sandboxes (and their tests) need: ${missing[*]}." >&2
  echo "Install them as root with apt-get (Debian/Ubuntu): apt-get install ${missing[*]}" >&2
  echo "Without them Berth runs without sandboxes (their calls answer 503) and sandbox tests cannot run." >&2
  exit 1
fi
echo "installing ${missing[*]} (apt-get)…"
apt-get update -qq
# No recommends: podman's would pull in crun, catatonit and a CNI/netavark stack sandboxes never use.
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
