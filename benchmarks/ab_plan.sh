#!/usr/bin/env bash
# `serialpub plan` on a demo workspace with an older checkout (no learners) and this one
# (--learners none, nb, all), alternated; prints wall seconds, peak KB and the load per run
# (docs/benchmarks.md, "Planning: the learners' column").
# Usage: bash benchmarks/ab_plan.sh OLD_CHECKOUT DEMO_WORKSPACE [rounds]
#   OLD_CHECKOUT: e.g. `git worktree add /tmp/old <commit>`; DEMO_WORKSPACE: `serialpub demo --out DIR --rounds 5`
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
old="${1:?the older checkout}"
ws="$(cd "${2:?the demo workspace}" && pwd)"
rounds="${3:-2}"
grid=(--rounds 5 --l 2 --protected all,rarest:5 --jobs 2)
run() {  # label pythonpath [learners]
  local label="$1" path="$2"; shift 2
  echo "$label load $(cut -d' ' -f1 /proc/loadavg)"
  # from /tmp: `python -m` puts the working directory first on the path, before PYTHONPATH
  cd /tmp && OPENBLAS_NUM_THREADS=1 PYTHONPATH="$path" /usr/bin/time -f "$label %e s wall, %M KB peak" \
    "$here/.venv/bin/python" -m serialpub.cli plan --config "$ws" "${grid[@]}" "$@" \
    --json "/tmp/ab-plan-$label.json" 2>&1 | grep -E "wall|candidates ×"
}
for _ in $(seq "$rounds"); do
  run old "$old"
  run new-none "$here" --learners none
  run new-nb "$here" --learners nb
  run new-all "$here" --learners all
done
