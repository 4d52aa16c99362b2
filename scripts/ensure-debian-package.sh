#!/usr/bin/env bash
# ensure-debian-package.sh COMMAND PACKAGE...: installs PACKAGE... from Debian's packages (apt-get)
# when COMMAND is not installed. Tests need redis-server (they run their own servers, not the
# package's service) and chromium (browser tests drive it with playwright-core: never a downloaded
# browser).
set -euo pipefail
command=$1
shift
for dir in /usr/bin /usr/local/bin /usr/sbin; do
  [ -x "$dir/$command" ] && exit 0
done
if ! command -v apt-get >/dev/null; then
  echo "$command is missing and apt-get is not available: install $* yourself" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
echo "installing $* (apt-get)…"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
