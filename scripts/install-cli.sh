#!/usr/bin/env bash
# `make install` / `make uninstall`: puts this checkout's `berth` command on the PATH as a symlink
# to cli/bin/berth.js, so it runs in any folder (the CLI loads Berth's packages from this checkout,
# which must stay where it is and be built: `make install` builds first).
#   scripts/install-cli.sh install|uninstall
# BINDIR: where the link goes (default: PREFIX/bin when PREFIX is set, else /usr/local/bin as root,
# else ~/.local/bin).
set -euo pipefail
action=${1:-install}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
target="$root/cli/bin/berth.js"
if [ -z "${BINDIR:-}" ]; then
  if [ -n "${PREFIX:-}" ]; then BINDIR="$PREFIX/bin"
  elif [ "$(id -u)" = 0 ]; then BINDIR=/usr/local/bin
  else BINDIR="$HOME/.local/bin"
  fi
fi
link="$BINDIR/berth"

# A berth of some Berth checkout (this one or another): safe to replace or remove.
is_berth_link() { [ -L "$1" ] && [[ "$(readlink "$1")" == */cli/bin/berth.js ]]; }

case $action in
  install)
    if [ ! -f "$root/cli/dist/bin.js" ]; then
      echo "install-cli: the CLI is not built: run \`make install\` (it builds first)" >&2
      exit 1
    fi
    if [ -e "$link" ] || [ -L "$link" ]; then
      if ! is_berth_link "$link"; then
        echo "install-cli: $link exists and is not a Berth checkout's berth: remove it, or choose another folder with BINDIR=..." >&2
        exit 1
      fi
      previous=$(readlink "$link")
      [ "$previous" != "$target" ] && echo "replacing $link (was $previous)"
    fi
    mkdir -p "$BINDIR"
    ln -sfn "$target" "$link"
    echo "installed $link -> $target"
    case ":$PATH:" in
      *":$BINDIR:"*)
        found=$(command -v berth || true)
        if [ -n "$found" ] && [ "$found" != "$link" ]; then
          echo "note: \`berth\` resolves to $found first on your PATH; put $BINDIR before it"
        fi
        ;;
      *) echo "note: $BINDIR is not on your PATH: add  export PATH=\"$BINDIR:\$PATH\"  to your shell profile (e.g. ~/.bashrc), then open a new shell" ;;
    esac
    ;;
  uninstall)
    if [ -L "$link" ] && [ "$(readlink "$link")" = "$target" ]; then
      rm "$link"
      echo "removed $link"
    elif [ -e "$link" ] || [ -L "$link" ]; then
      echo "install-cli: $link is not this checkout's berth (it points to $(readlink "$link" || echo 'a file')): left alone" >&2
      exit 1
    else
      echo "nothing to remove: $link does not exist"
    fi
    ;;
  *)
    echo "usage: $0 install|uninstall" >&2
    exit 2
    ;;
esac
