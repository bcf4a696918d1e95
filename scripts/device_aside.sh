#!/usr/bin/env bash
# Set aside what a device call does not need, so that the working tree that travels (tracked and untracked files that
# git does not ignore, plus the carried paths) stays under the device's 64 MiB, and put it back after the call.
#   aside  moves the PATHS (default: what a pocket2 grid call can do without: the pocket grids, the pocket model's
#          weights and the committed pocket2 runs' evaluations, which resuming never reads) to STASH, then prints the
#          size that will travel with the carried .whl and .debs; it refuses to start over a stash not yet put back.
#   back   moves everything in STASH back to where it was.
# While paths are set aside a pre-commit hook refuses every commit: git sees them as deleted, and a commit then would
# record their deletion (and the next one their return), doubling the size a submission carries.
# Usage, from the repository root:  [STASH=/tmp/gq_aside] bash scripts/device_aside.sh aside [PATH ...] | back
set -euo pipefail
stash=${STASH:-/tmp/gq_aside}
hook=$(git rev-parse --git-path hooks)/pre-commit
guard="# gq device_aside guard"
case ${1:-} in
  aside)
    shift
    [ -e "$stash" ] && { echo "$stash exists: put it back first (bash $0 back)" >&2; exit 1; }
    paths=("$@")
    [ ${#paths[@]} -eq 0 ] && paths=(runs/answer runs/answer_starved runs/grid runs/confirm
                                     gradient_quarantine/pocket_model runs/pocket2/*/eval)
    for p in "${paths[@]}"; do [ -e "$p" ] || { echo "no such path: $p" >&2; exit 1; }; done
    [ -e "$hook" ] && ! grep -q "$guard" "$hook" && { echo "$hook exists: the guard would replace it" >&2; exit 1; }
    mkdir -p "$(dirname "$hook")"
    printf '#!/bin/sh\n%s\necho "paths are set aside in %s: put them back first (bash %s back)" >&2\nexit 1\n' \
           "$guard" "$stash" "$0" > "$hook"
    chmod +x "$hook"
    for p in "${paths[@]}"; do
      mkdir -p "$stash/$(dirname "$p")" && mv "$p" "$stash/$p"
    done
    bytes=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } \
             | { xargs -0 -r stat -c %s 2>/dev/null || true; } | awk '{s += $1} END {print s + 0}')   # set aside: gone
    carried=$( { du -sb .whl .debs 2>/dev/null || true; } | awk '{s += $1} END {print s + 0}')   # absent: 0
    echo "set aside ${#paths[@]} paths in $stash; the tree travels $(( (bytes + carried) / 1048576 )) MiB" \
         "with .whl and .debs (limit 64)"
    ;;
  back)
    [ -d "$stash" ] || { echo "nothing set aside in $stash" >&2; exit 1; }
    (cd "$stash" && find . -mindepth 1 \( -type f -o -type l \) -print0) | while IFS= read -r -d '' f; do
      mkdir -p "$(dirname "$f")" && mv "$stash/$f" "$f"
    done
    rm -rf "$stash"; echo "put back from $stash"
    if grep -qs "$guard" "$hook"; then rm -f "$hook"; fi
    ;;
  *) echo "usage: bash $0 aside [PATH ...] | back" >&2; exit 2 ;;
esac
