#!/usr/bin/env bash
# The data user's commands with an older checkout and this one, alternated, each in a fresh
# process, on the demo's public copy of bench_query_targets.py (made under benchmarks/out if
# missing), each side with its own verdict folder: the docs' example query from the cache (20
# releases and --release 20), the 14 x 2 occupation x sex cross-tab as a table and --json, the
# query's imports, and the floor (numpy, pandas, pyarrow, typer, rich: the same code on both
# sides, so its spread is the noise). Prints wall, user and system seconds and the load per
# run (docs/benchmarks.md, "With the resolved arrays cached").
# Usage: git worktree add /tmp/old <commit>; bash benchmarks/ab_query.sh /tmp/old [rounds]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
old="${1:?the older checkout (git worktree add /tmp/old <commit>)}"
rounds="${2:-3}"
py="$here/.venv/bin/python"
work="$here/benchmarks/out/ab-query"
mkdir -p "$work"
# the copy and the cross-tab file as bench_query_targets.py makes them
copy="$(cd "$here/benchmarks" && "$py" -c 'import bench_query_targets as b; print(b.demo_copy())')"
crosstab="$(cd "$here/benchmarks" && "$py" -c 'import sys, bench_query_targets as b; sys.stdout = sys.stderr
p = b.crosstab_file(b.demo_copy()); sys.stdout = sys.__stdout__; print(p)')"
example=(--where "age=[30,40]" --where sex=Female --sensitive Exec-managerial,Sales)
export OPENBLAS_NUM_THREADS=1
run() {  # label side command...
  local label="$1" side="$2"; shift 2
  local path="$here" cache="$work/verdicts-new"
  if [ "$side" = old ]; then path="$old"; cache="$work/verdicts-old"; fi
  (cd "$copy" && PYTHONPATH="$path" SERIALPUB_CACHE_DIR="$cache" /usr/bin/time \
    -f "$label $side %e wall %U user %S sys load $(cut -d' ' -f1 /proc/loadavg)" "$@" > /dev/null)
}
for side in old new; do  # the first query of each side verifies the copy and fills its cache
  run warm "$side" "$py" -m serialpub.cli query . "${example[@]}"
  run warm "$side" "$py" -m serialpub.cli query . --queries "$crosstab" --json
done
for _ in $(seq "$rounds"); do
  for side in old new; do
    run second-query "$side" "$py" -m serialpub.cli query . "${example[@]}"
    run second-query-r20 "$side" "$py" -m serialpub.cli query . "${example[@]}" --release 20
    run crosstab-table "$side" "$py" -m serialpub.cli query . --queries "$crosstab"
    run crosstab-json "$side" "$py" -m serialpub.cli query . --queries "$crosstab" --json
    run imports "$side" "$py" -c \
      "import serialpub.cli, serialpub.analysis.reader, serialpub.analysis.querying, serialpub.analysis.batch"
    run floor "$side" "$py" -c "import numpy, pandas, pyarrow.parquet, typer, typer._adapters, rich.table"
  done
done
