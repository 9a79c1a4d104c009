"""What numeric interval splits on age could gain: the demo series with a binary age hierarchy.

An estimate for the next step of the top-down search, not a feature: the age hierarchy
of the demo (5-year, 10-year and 20-year bands) is replaced, in memory, by a binary tree
over the sorted ages (each node halves its range, labels ``[lo, hi]``), which is what
median interval splits would produce. The 20 demo snapshots are then published in memory
with ``benchmarks/experiments.py``'s runner under the top-down search (constant ratio
k' = 20 and geometric α = 2, ℓ = 2, every occupation protected, register dilution), and
the median over releases of each release's average relative query error is printed beside
the same series with the bundled hierarchy.

Usage::

    .venv/bin/python benchmarks/bench_binary_age.py
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT, ROOT / "benchmarks"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import experiments as ex  # noqa: E402

from anonymizer.hierarchy import Hierarchy  # noqa: E402
from anonymizer.release import PrivacyParams  # noqa: E402


def binary_hierarchy(h: Hierarchy) -> Hierarchy:
    """A binary interval tree over ``h``'s leaves sorted by value; leaf ids keep ``h``'s order."""
    values = sorted(h.leaves, key=float)
    ancestors: dict[str, list[str]] = {v: [] for v in values}

    def split(lo: int, hi: int) -> None:
        if hi - lo <= 1:
            return
        label = "*" if (lo, hi) == (0, len(values)) else f"[{values[lo]}, {values[hi - 1]}]"
        for v in values[lo:hi]:
            ancestors[v].append(label)
        mid = (lo + hi) // 2
        split(lo, mid)
        split(mid, hi)

    split(0, len(values))
    depth = 1 + max(len(a) for a in ancestors.values())
    rows = []
    for line, leaf in enumerate(h.leaves, start=1):
        chain = [leaf, *reversed(ancestors[leaf])]  # leaf, then up to the root
        rows.append((line, [leaf] * (depth - len(chain)) + chain))  # a leaf repeated is a chain
    return Hierarchy.from_rows(h.attribute, rows, "binary age (in memory)")


def main() -> int:
    ws, paths = ex.build_workspace("adult")
    scenario = ex.Scenario.from_workspace("adult", ws, paths)
    series = {
        "constant k'=20": PrivacyParams(ell=2.0, strategy="constant", k_prime=20),
        "geometric α=2": PrivacyParams(ell=2.0, strategy="geometric", k_prime=None, alpha=2.0),
    }
    bundled = scenario.publisher.hierarchies["age"]
    for name, hierarchy in (("bundled age hierarchy", bundled), ("binary age tree", binary_hierarchy(bundled))):
        scenario.publisher.hierarchies["age"] = hierarchy
        for strategy, params in series.items():
            rows = [r for r in ex.run_series(scenario, params, 20, budget=0.0) if r["feasible"]]
            print(f"{name:22} {strategy:15} median error {statistics.median(r['query_error'] for r in rows):.3f} "
                  f"groups {statistics.median(r['groups'] for r in rows):6.0f} releases {len(rows)}", flush=True)
    scenario.publisher.hierarchies["age"] = bundled
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
