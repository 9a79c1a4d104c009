#!/usr/bin/env bash
# A fresh 'serialpub release' (release 1 of a new state, the 1M-record diagnosis snapshot over
# the 5M register, register cache warm) with an older checkout and this one, alternated; each
# on its own copy of the workspace so that each keeps its register cache entry (the two
# codes' cache keys differ). Prints wall seconds and peak KB per run (docs/benchmarks.md,
# "Fifth pass"). Usage: git worktree add /tmp/old <commit>; bash benchmarks/ab_command.sh /tmp/old [rounds]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
old="${1:?the older checkout (git worktree add /tmp/old <commit>)}"
rounds="${2:-3}"
new_ws="$here/benchmarks/out/scaling/N-5000000"
old_ws="$here/benchmarks/out/ab-command-old"
if [ ! -d "$old_ws" ]; then
  mkdir -p "$old_ws"
  cp -r "$new_ws"/{register.csv,hierarchies,serialpub.yaml,snapshots,protected-diagnosis.txt} "$old_ws"/
fi
run() {  # label workspace pythonpath
  (cd "$2" && rm -rf releases state.sqlite* cache/snapshot-* \
    && PYTHONPATH="$3" /usr/bin/time -f "$1 %e s wall, %M KB peak" "$here/.venv/bin/python" -m serialpub.cli release \
      --snapshot snapshots/diagnosis-1000000/snapshot-1.csv --config . --period 0001 2>&1 | grep -E "wall")
}
run warmup-old "$old_ws" "$old"; run warmup-new "$new_ws" "$here"
for _ in $(seq "$rounds"); do run old "$old_ws" "$old"; run new "$new_ws" "$here"; done
