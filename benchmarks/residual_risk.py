"""Residual risk of the whole mechanism: how far can an adversary who knows the algorithm
get past the charge when the partition itself is evidence? (docs/threat-model.md)

For random tiny series (seeded), every world of each release is run through serialpub's
own anonymizer (``tests/mechanism_oracle.py``, the oracle of the suppression-channel gate
in ``tests/test_adversary_oracle.py``); the adversary's exact posterior P(o has s | the
whole published release) is compared with what the statistics file charges, n_{j,s}/n_j.
With the partition held fixed the two are equal (the gate); here a region left unsplit,
or a split taken, also tells which worlds were possible.

Usage (from the repository root)::

    .venv/bin/python benchmarks/residual_risk.py --series 300 --seed 0 [--model published|parts]

Prints one JSON object: releases measured, how many have some posterior above its charge,
the largest excess (posterior - charge) and ratio, and the largest posterior against 1/ℓ.
"""

from __future__ import annotations

import argparse
import json
import sys
from fractions import Fraction
from math import comb
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import mechanism_oracle as mo

from anonymizer.hierarchy import Hierarchy
from anonymizer.release import History, PrivacyParams
from anonymizer.search import InfeasibleError
from anonymizer.settings import PartitionModel

MAX_WORLDS = 1_500


def _hierarchy(attribute: str, rows: list[list[str]]) -> Hierarchy:
    return Hierarchy.from_rows(attribute, [(i + 1, r) for i, r in enumerate(rows)], f"{attribute}.csv")


AGE = _hierarchy("age", [["a", "ab", "*"], ["b", "ab", "*"], ["c", "cd", "*"], ["d", "cd", "*"]])
SEX = _hierarchy("sex", [["m", "*"], ["f", "*"]])


def random_series(
    rng: np.random.Generator, algorithm: str = "topdown", model: str = PartitionModel.PUBLISHED
) -> tuple[mo.Instance, list[mo.World]]:
    """A tiny series drawn like the gate's hypothesis strategy."""
    n = int(rng.integers(3, 9))
    keys = np.stack([rng.integers(0, AGE.n_leaves, n), rng.integers(0, SEX.n_leaves, n)], axis=1).astype(np.int64)
    domain = [("s1", "x"), ("s1", "s2", "x")][int(rng.integers(2))]
    protected = tuple(v for v in domain if v != "x")
    strategy = ["constant", "geometric"][int(rng.integers(2))]
    params = PrivacyParams(
        ell=float(rng.choice([2.0, 3.0])),
        strategy=strategy,
        k_prime=int(rng.integers(1, 4)) if strategy == "constant" else None,
        alpha=2.0 if strategy == "geometric" else None,
        algorithm=algorithm,
        partition_model=model,
    )
    presence = bool(rng.integers(2))
    inst = mo.Instance(keys, [AGE, SEX], domain, protected, params, presence, budget=0)
    series = []
    for _ in range(int(rng.integers(1, 4))):
        largest = max(r for r in range(1, n + 1) if len(domain) ** r * (1 if presence else comb(n, r)) <= MAX_WORLDS)
        r = int(rng.integers(1, largest + 1))
        rows = tuple(sorted(rng.permutation(n)[:r].tolist()))
        pool = ("x", "x", "x", *protected)
        series.append(mo.World(rows, tuple(pool[int(i)] for i in rng.integers(0, len(pool), r))))
    return inst, series


def measure(
    n_series: int, seed: int, algorithm: str = "topdown", model: str = PartitionModel.PUBLISHED
) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    releases = exceeding = above_bound = 0
    worst_excess, worst_ratio, worst_post = Fraction(0), Fraction(1), Fraction(0)
    worst_case: dict[str, Any] | None = None
    for _ in range(n_series):
        inst, series = random_series(rng, algorithm, model)
        history = History.empty(np.full(inst.keys.shape[0], inst.params.ell), len(inst.protected))
        for seq, observed in enumerate(series, start=1):
            try:
                result = mo.anonymize(inst, history, observed, seq)
            except InfeasibleError:
                break
            post, _ = mo.posterior(inst, observed, lambda w, i=inst, h=history, s=seq: mo.whole_output(i, h, w, s))
            charged = mo.charges(inst, observed, result)
            releases += 1
            over = False
            for pair, p in post.items():
                c = charged.get(pair, Fraction(0))
                if p > c:
                    over = True
                    if p - c > worst_excess:
                        worst_excess = p - c
                        worst_case = {
                            "posterior": str(p), "charge": str(c), "ell": inst.params.ell,
                            "presence": inst.presence, "register": inst.keys.tolist(),
                            "rows": list(observed.rows), "values": list(observed.values), "release": seq,
                        }  # fmt: skip
                    if c > 0 and p / c > worst_ratio:
                        worst_ratio = p / c
                if p > Fraction(1) / Fraction(inst.params.ell):
                    above_bound += 1
                worst_post = max(worst_post, p * Fraction(inst.params.ell))
            exceeding += over
            history = result.history
    return {
        "series": n_series,
        "seed": seed,
        "algorithm": algorithm,
        "partition_model": model if algorithm == "topdown" else "parts",
        "releases_measured": releases,
        "releases_with_a_posterior_above_its_charge": exceeding,
        "largest_excess_posterior_minus_charge": float(worst_excess),
        "largest_ratio_posterior_over_charge": float(worst_ratio),
        "largest_posterior_times_ell": float(worst_post),
        "pairs_with_posterior_above_1_over_ell": above_bound,
        "worst_case": worst_case,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--algorithm", choices=["topdown", "bottomup"], default="topdown")
    parser.add_argument(
        "--model",
        choices=list(PartitionModel),
        default=PartitionModel.PUBLISHED,
        help="the top-down search's partition_model",
    )
    args = parser.parse_args()
    print(json.dumps(measure(args.series, args.seed, args.algorithm, args.model), indent=2))


if __name__ == "__main__":
    main()
