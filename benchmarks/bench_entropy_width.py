"""Experiment (not kept): the ``widest`` split rule with a node's width taken from the
register's entropy within it instead of its share of leaves (issue: releases people can use).

The register is public, so such a width reveals nothing; the idea is that a node whose
register mass sits on one leaf (native-country ``*``: nine in ten born in one country) is
already answered well by the register-weighted estimator and need not be split first.
Publishes the demo's snapshots in memory under the default settings (partition model
``published``, ℓ = 2, register dilution) with ``benchmarks/experiments.py``'s runner and
prints, per strategy and width, the median over releases of both query errors, the median
groups, the releases published and the largest breach probability.

Usage::

    .venv/bin/python benchmarks/bench_entropy_width.py [--rounds 20] [--widths leaves entropy]

Measured 2026-11-25 (docs/anonymization.md): entropy 0.638 register-weighted under the
constant ratio (leaves: 0.668) and 0.363 over 12 releases under geometric α = 2 (leaves:
0.295 over 10), so it was not kept.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT, ROOT / "benchmarks"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import experiments as ex  # noqa: E402
from machine_info import machine  # noqa: E402

from anonymizer import topdown  # noqa: E402
from anonymizer.hierarchy import Hierarchy  # noqa: E402
from anonymizer.release import PrivacyParams  # noqa: E402


def entropy_width(weights: dict[str, np.ndarray]):  # type: ignore[no-untyped-def]
    """A replacement for ``topdown._Tree.of`` whose node width is the normalized entropy of
    the register's individuals over the node's leaves (QIs without weights keep theirs)."""
    original = topdown._Tree.of

    def of(h: Hierarchy) -> topdown._Tree:
        tree = original(h)
        w = weights.get(h.attribute)
        if w is None or w.shape != (h.n_leaves,):  # an interval tree keeps the leaf ids
            return tree
        below = h.index.ancestor_matrix().T.astype(np.float64) * w[None, :]  # (node, leaf) mass
        p = below / np.maximum(below.sum(axis=1, keepdims=True), 1e-300)
        entropy = -(p * np.log(np.where(p > 0, p, 1.0))).sum(axis=1)
        return topdown._Tree(tree.index, entropy / np.log(max(h.n_leaves, 2)))

    return of


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--widths", nargs="+", choices=["leaves", "entropy"], default=["leaves", "entropy"])
    args = parser.parse_args()
    ws, paths = ex.build_workspace("adult")
    scenario = ex.Scenario.from_workspace("adult", ws, paths)
    weights = {q: w.astype(np.float64) for q, w in scenario.publisher.register_reader.register_leaf_counts.items()}
    original = topdown._Tree.of
    print(machine())
    print(f"{'width':8} {'strategy':10} {'median err':>10} {'median w':>9} {'groups':>7} {'releases':>8} {'max p':>7}")
    for width in args.widths:
        topdown._Tree.of = staticmethod(entropy_width(weights) if width == "entropy" else original)  # type: ignore[method-assign]
        for strategy in ("constant", "geometric"):
            params = PrivacyParams(
                ell=2.0, strategy=strategy, k_prime=20 if strategy == "constant" else None, alpha=2.0
            )
            done = [r for r in ex.run_series(scenario, params, args.rounds, budget=0.0) if r["feasible"]]
            print(
                f"{width:8} {strategy:10} {statistics.median(r['query_error'] for r in done):10.3f} "
                f"{statistics.median(r['query_error_weighted'] for r in done):9.3f} "
                f"{statistics.median(r['groups'] for r in done):7.0f} {len(done):8d} {done[-1]['max_p']:7.4f}",
                flush=True,
            )
    topdown._Tree.of = staticmethod(original)  # type: ignore[method-assign]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
