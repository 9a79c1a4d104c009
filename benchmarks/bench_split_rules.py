"""Split rules of the top-down search, measured on the demo series (issue: releases people can use).

For every rule of :data:`anonymizer.topdown.SPLIT_RULES` and both strategies (constant
ratio k' = 20, geometric α = 2; ℓ = 2, every occupation protected, register dilution,
mechanism-aware counts, no suppression), publishes the demo's 20 snapshots in memory with
``benchmarks/experiments.py``'s runner and prints per series: the median over releases of
each release's average relative query error (5,000 queries, qd 3, selectivity 0.05, seed
0, as the pipeline measures it), the mean of those, the median of the register-weighted
estimator's (``median w``; docs/design.md section 8), the groups per release (median) and
the largest breach probability after the last release.

Usage::

    .venv/bin/python benchmarks/bench_split_rules.py [--rounds 20] [--rules width_gain widest balanced]
        [--models published parts]

``--models`` lists the partition models to measure (``partition_model``: split decisions
on published counts only, the default, or on each part's own counts; docs/threat-model.md).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT, ROOT / "benchmarks"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import experiments as ex  # noqa: E402
from machine_info import machine  # noqa: E402

from anonymizer import topdown  # noqa: E402
from anonymizer.release import PrivacyParams  # noqa: E402
from anonymizer.settings import PartitionModel  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--rules", nargs="+", choices=topdown.SPLIT_RULES, default=list(topdown.SPLIT_RULES))
    parser.add_argument("--algorithms", nargs="+", choices=["topdown", "bottomup"], default=["topdown"])
    parser.add_argument("--models", nargs="+", choices=list(PartitionModel), default=list(PartitionModel))
    args = parser.parse_args()
    ws, paths = ex.build_workspace("adult")
    scenario = ex.Scenario.from_workspace("adult", ws, paths)
    print(machine())
    print(
        f"{'algorithm':9} {'model':9} {'rule':9} {'strategy':14} {'median err':>10} {'mean err':>9} "
        f"{'median w':>10} {'groups':>7} {'max p':>7} {'releases':>8} {'s/release':>9}"
    )
    strategies = {
        "constant k'=20": PrivacyParams(ell=2.0, strategy="constant", k_prime=20),
        "geometric α=2": PrivacyParams(ell=2.0, strategy="geometric", k_prime=None, alpha=2.0),
    }
    for algorithm in args.algorithms:
        for model in args.models if algorithm == "topdown" else ["parts"]:
            for rule in args.rules if algorithm == "topdown" else ["-"]:
                for name, params in strategies.items():
                    params = PrivacyParams(**{**params.__dict__, "algorithm": algorithm, "partition_model": model})
                    rows = ex.run_series(
                        scenario,
                        params,
                        args.rounds,
                        budget=0.0,
                        split_rule=rule if algorithm == "topdown" else topdown.DEFAULT_SPLIT_RULE,
                    )
                    done = [r for r in rows if r["feasible"]]
                    if not done:
                        print(f"{algorithm:9} {model:9} {rule:9} {name:14} refused at release 1", flush=True)
                        continue
                    errs = [r["query_error"] for r in done]
                    weighted = statistics.median(r["query_error_weighted"] for r in done)
                    print(
                        f"{algorithm:9} {model:9} {rule:9} {name:14} {statistics.median(errs):10.3f} "
                        f"{statistics.mean(errs):9.3f} {weighted:10.3f} "
                        f"{statistics.median(r['groups'] for r in done):7.0f} "
                        f"{done[-1]['max_p']:7.4f} {len(done):8d} "
                        f"{statistics.mean(r['seconds_anonymize'] for r in done):9.2f}",
                        flush=True,
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
