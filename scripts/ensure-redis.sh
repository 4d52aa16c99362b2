#!/usr/bin/env bash
# Installs redis-server from Debian's packages when it is missing (tests and the Redis mode need it).
set -euo pipefail
for bin in /usr/bin/redis-server /usr/local/bin/redis-server /usr/sbin/redis-server; do
  [ -x "$bin" ] && exit 0
done
if ! command -v apt-get >/dev/null; then
  echo "redis-server is missing and apt-get is not available: install Redis 6+ yourself" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
echo "installing redis-server (apt-get)…"
$SUDO apt-get update -qq
# The package's own service start is not needed: tests run their own redis-server processes.
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends redis-server >/dev/null
