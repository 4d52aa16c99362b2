#!/usr/bin/env bash
# ensure-promtool.sh: installs promtool (Debian's prometheus package) when it is missing, for the
# chart's alert tests. Only promtool is wanted: a policy-rc.d keeps apt from starting (and
# enabling) the Prometheus server the package also brings.
set -euo pipefail
[ -x /usr/bin/promtool ] && exit 0
if ! command -v apt-get >/dev/null; then
  echo "promtool is missing and apt-get is not available: install Prometheus' promtool yourself" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
policy=/usr/sbin/policy-rc.d
ours=""
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod +x "$policy"
  ours=1
fi
cleanup() { if [ -n "$ours" ]; then $SUDO rm -f "$policy"; fi; }
trap cleanup EXIT
echo "installing promtool (apt-get install prometheus; its server is not started)…"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
