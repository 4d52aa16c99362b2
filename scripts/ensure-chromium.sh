#!/usr/bin/env bash
# Installs Debian's chromium when it is missing: browser tests drive it with playwright-core
# (`executablePath`), never a downloaded browser.
set -euo pipefail
for bin in /usr/bin/chromium /usr/local/bin/chromium; do
  [ -x "$bin" ] && exit 0
done
if ! command -v apt-get >/dev/null; then
  echo "chromium is missing and apt-get is not available: install Chromium yourself and set BERTH_CHROMIUM" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
echo "installing chromium (apt-get)…"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
