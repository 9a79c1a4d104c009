#!/usr/bin/env bash
# Release 2 of the scaling study's diagnosis series (1M records over the 5M register) in a
# fresh `serialpub release` process, as a scheduled task runs it: release 1 is published by
# a process before it (not timed), the register cache is warm. Prints per run the wall and
# CPU seconds and the peak resident memory of the release 2 process (docs/scaling.md,
# "Where release 2 stands"). Not a timed test: read it beside `uptime`'s load, which it prints.
#
# Usage: bash benchmarks/fresh_next_release.sh [TREE [ROUNDS]]
#   TREE: a checkout's folder (default: this one); ROUNDS: default 2.
# The workspace is a copy under /tmp/fresh-next/ (hard links to the register and snapshots).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
tree="$(cd "${1:-$here}" && pwd)"
rounds="${2:-2}"
python="$here/.venv/bin/python"
base="$here/benchmarks/out/scaling/N-5000000"
if [ ! -f "$base/snapshots/diagnosis-1000000/snapshot-2.csv" ]; then  # the scaling study's register and snapshots
  (cd "$here/benchmarks" && PYTHONPATH="$here" "$python" -c \
    "import bench_scaling as b; b.snapshot_pair(b.register_root(5_000_000), 'diagnosis', 1_000_000)")
fi
ws="/tmp/fresh-next/ws-$(echo "$tree" | sha256sum | cut -c1-12)"
if [ ! -d "$ws" ]; then
  mkdir -p "$ws"
  cp -al "$base"/{register.csv,hierarchies,values.parquet,snapshots,protected-diagnosis.txt} "$ws"/
fi
(cd "$tree/benchmarks" && PYTHONPATH="$tree" "$python" -c \
  "import bench_scaling as b; from pathlib import Path; b.write_config(Path('$ws'), 'diagnosis', 'register')")
release() {  # period snapshot-number
  (cd "$ws" && OPENBLAS_NUM_THREADS=1 PYTHONPATH="$tree" "$python" -m serialpub.cli release \
    --snapshot "snapshots/diagnosis-1000000/snapshot-$2.csv" --config . --period "$1" >/dev/null)
}
for i in $(seq "$rounds"); do
  rm -rf "$ws"/releases "$ws"/state.sqlite* "$ws"/cache/snapshot-*
  release 0001 1  # and fills the register cache on the first round
  echo "run $i, load $(cut -d' ' -f1-3 /proc/loadavg)"
  (cd "$ws" && OPENBLAS_NUM_THREADS=1 PYTHONPATH="$tree" /usr/bin/time -f "  release 2, fresh process: %e s wall, %U user + %S sys CPU s, %M KB peak" \
    "$python" -m serialpub.cli release --snapshot snapshots/diagnosis-1000000/snapshot-2.csv --config . --period 0002 2>&1 >/dev/null | grep "release 2")
done
