#!/usr/bin/env bash
# The draft path's guard (docs/testing.md): two releases of 1M records over the 5M register in
# one process (bench_scaling.py's diagnosis:register case), run alternately with two commits on
# the same machine state; prints every run, then release 2's median seconds per logged step for
# each commit and their ratio (new / old), the peaks, and whether both releases' data.parquet
# are the same bytes and both reports the same figures (a restructuring must not change them). Not a timed test: read the ratios
# beside `uptime`'s load, which it prints.
#
# Usage: bash benchmarks/ab_release.sh [OLD [NEW [ROUNDS]]]
#   OLD, NEW: a commit (a detached worktree is made for it under /tmp/ab-release/) or a
#   checkout's folder. Defaults: OLD = this checkout's HEAD^ (the commit's parent), NEW = this
#   checkout's working tree, ROUNDS = 2.
# Each commit publishes on its own copy of the workspace (hard links to the register and the
# snapshots), so each keeps its own register cache entry; a first run per copy fills it.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
old_arg="${1:-HEAD^}"
new_arg="${2:-$here}"
rounds="${3:-2}"
python="$here/.venv/bin/python"
base="$here/benchmarks/out/scaling/N-5000000"
work=/tmp/ab-release
mkdir -p "$work"
if [ ! -f "$base/snapshots/diagnosis-1000000/snapshot-2.csv" ]; then  # the scaling study's register and snapshots
  (cd "$here/benchmarks" && PYTHONPATH="$here" "$python" -c \
    "import bench_scaling as b; b.snapshot_pair(b.register_root(5_000_000), 'diagnosis', 1_000_000)")
fi
tree_of() {  # a folder as it is, or a commit checked out once under $work
  if [ -d "$1" ]; then (cd "$1" && pwd); return; fi
  local sha; sha="$(git -C "$here" rev-parse --verify "$1^{commit}")"
  if [ ! -d "$work/$sha" ]; then git -C "$here" worktree add --detach "$work/$sha" "$sha" >/dev/null 2>&1; fi
  echo "$work/$sha"
}
workspace_of() {  # a copy of the workspace per tree: hard links to the inputs, its own state and cache
  local ws; ws="$work/ws-$(echo "$1" | sha256sum | cut -c1-12)"
  if [ ! -d "$ws" ]; then
    mkdir -p "$ws"
    cp -al "$base"/{register.csv,hierarchies,values.parquet,snapshots,protected-diagnosis.txt} "$ws"/
  fi
  echo "$ws"
}
old="$(tree_of "$old_arg")"; new="$(tree_of "$new_arg")"
old_ws="$(workspace_of "$old")"; new_ws="$(workspace_of "$new")"
log="$work/runs-$(date -u +%Y%m%dT%H%M%S).jsonl"
echo "old: $old_arg ($old)"; echo "new: $new_arg ($new)"; echo "runs: $log"
run() {  # label tree workspace
  echo "  $1 run, load $(cut -d' ' -f1-3 /proc/loadavg)"
  (cd "$here/benchmarks" && OPENBLAS_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$2" "$python" ab_steps.py "$2" "$3") \
    | tail -1 | "$python" -c "import json,sys; d=json.load(sys.stdin); d['label']='$1'; print(json.dumps(d))" >> "$log"
}
for tree in old new; do  # the register cache of each copy, filled once (not timed)
  if [ "$tree" = old ]; then t="$old" w="$old_ws"; else t="$new" w="$new_ws"; fi
  if [ ! -d "$w/cache" ]; then run "warmup-$tree" "$t" "$w"; fi
done
for _ in $(seq "$rounds"); do run old "$old" "$old_ws"; run new "$new" "$new_ws"; done
"$python" - "$log" <<'EOF'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
by = {k: [r for r in runs if r["label"] == k] for k in ("old", "new")}
steps = list(dict.fromkeys(s for r in by["old"] + by["new"] for s in r["steps"]))
def med(label, key):
    xs = [r["steps"].get(key) for r in by[label] if key in r["steps"]]
    return statistics.median(xs) if xs else float("nan")
print(f"{'release 2, median s':<48} {'old':>8} {'new':>8} {'new/old':>8}")
def whole(label, key):  # a run of an older ab_steps.py has no CPU seconds
    xs = [r[key] for r in by[label] if key in r]
    return statistics.median(xs) if xs else float("nan")
totals = ["release2_s", "release2_cpu_s", "release1_s", "release1_cpu_s"]
for s in [*totals, *steps]:
    o = whole("old", s) if s in totals else med("old", s)
    n = whole("new", s) if s in totals else med("new", s)
    print(f"{s:<48} {o:8.2f} {n:8.2f} {n / o if o > 0 else float('nan'):8.2f}")
for label in ("old", "new"):
    print(f"peak {label}: " + ", ".join(f"{r['peak_gib']:.2f}" for r in by[label]) + " GiB")
sums = {tuple(r["data_sha256"]) for r in runs}
print("data.parquet: the same bytes in every run" if len(sums) == 1 else f"data.parquet DIFFERS: {sorted(sums)}")
reports = {tuple(r.get("report_sha256", ())) for r in runs}
print("report.json (less its nonce): the same figures in every run" if len(reports) == 1
      else "report.json DIFFERS between runs (or an older commit writes another format)")
EOF
