#!/usr/bin/env bash
# Two releases of 1M records over the 5M register in one process (bench_scaling.py's case),
# alternately with an older checkout and this one, to compare them on the same machine state;
# after each run, the sha256 of both releases' data.parquet (a restructuring must not change them).
# Usage: git worktree add /tmp/old <commit>; bash benchmarks/ab_release.sh /tmp/old [rounds]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
old="${1:?the older checkout (git worktree add /tmp/old <commit>)}"
rounds="${2:-2}"
root="$here/benchmarks/out/scaling/N-5000000"
for _ in $(seq "$rounds"); do
  for tree in "$old" "$here"; do
    rm -rf "$root/cache"
    (cd "$tree/benchmarks" && PYTHONPATH="$tree" "$here/.venv/bin/python" bench_scaling.py --_one "$root" diagnosis register 1000000 \
      | tail -1 | python3 -c "import json,sys; d=json.load(sys.stdin); r=d['releases']; print('$tree', 'release 1 %.1f s, release 2 %.1f s (anonymize %.1f, state %.1f, draft %.1f, validate+report %.1f), peak %.2f GiB' % (r[0]['total_s'], r[1]['total_s'], r[1]['anonymize_s'], r[1]['state_s'], r[1]['draft_s'], r[1]['validate_report_s'], d['peak_rss_gib']))")
    (cd "$root" && sha256sum releases/diagnosis/release-*/data.parquet) | sed "s|^|$(basename "$tree") |"
  done
done
