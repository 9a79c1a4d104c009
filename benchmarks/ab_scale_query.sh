#!/usr/bin/env bash
# The data user's 5,000 queries at 1M/5M with an older checkout and this one, alternated, each
# command in a fresh process: bench_query_targets.py's public copy of the scaling study's
# workspace (benchmarks/out/query-targets/scale-copy: `bench_query_targets.py --scale
# out/scaling/N-5000000` makes it, or `serialpub public-copy --with-register` of that
# workspace) and its 5,000 random queries (seed 0) in one --queries file on release 1, --json.
# Each side has its own verdict folder, filled by a first command; the rounds time the second
# command (verdict and arrays cached). Every round checks that both sides print the same bytes.
# Prints wall, user and system seconds and the load average per run (docs/benchmarks.md,
# "5,000 queries at 1M/5M within 10 s").
# Usage: git worktree add /tmp/old <commit>; bash benchmarks/ab_scale_query.sh /tmp/old [rounds]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
old="${1:?the older checkout (git worktree add /tmp/old <commit>)}"
rounds="${2:-3}"
py="$here/.venv/bin/python"
work="$here/benchmarks/out/ab-scale-query"
copy="$here/benchmarks/out/query-targets/scale-copy"
[ -d "$copy/releases" ] || { echo "$copy: no public copy; see the usage above" >&2; exit 2; }
mkdir -p "$work"
queries="$work/queries-5000.txt"
(cd "$here/benchmarks" && "$py" -c 'import shutil, sys, bench_query_targets as b
from pathlib import Path
shutil.copyfile(b.random_queries(Path(sys.argv[1]), 5_000), sys.argv[2])' "$copy" "$queries")
export OPENBLAS_NUM_THREADS=1
run() {  # label side
  local label="$1" side="$2" path="$here"
  [ "$side" = old ] && path="$old"
  (cd "$copy" && PYTHONPATH="$path" SERIALPUB_CACHE_DIR="$work/verdicts-$side" /usr/bin/time \
    -f "$label $side %e wall %U user %S sys %M KiB load $(cut -d' ' -f1 /proc/loadavg)" \
    "$py" -m serialpub.cli query . --queries "$queries" --release 1 --json > "$work/out-$side.json")
}
rm -rf "$work/verdicts-old" "$work/verdicts-new"
for side in old new; do  # the first command of each side verifies the copy and fills its cache
  run first "$side"
done
for _ in $(seq "$rounds"); do
  for side in old new; do
    run second "$side"
  done
  cmp -s "$work/out-old.json" "$work/out-new.json" || { echo "the two sides printed different answers" >&2; exit 1; }
done
echo "same answers on both sides, byte for byte ($(sha256sum < "$work/out-new.json" | cut -c1-16))"
