"""Benchmark of the release suites (checks/release_suites.py) on the scale workspace:
the 1,000,000-record release 0001 of ``benchmarks/out/scale-5000000`` as the draft, its
5,000,000-person register, state before = empty (survival 1).

Usage::

    uv run python benchmarks/bench_release_suites.py benchmarks/out/scale-5000000
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from checks.breach import Draft, Population, PriorState, compute_breach, region_spans
from checks.release_suites import release_suite
from serialpub.io.hierarchies import read_hierarchy


def _rss() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main() -> None:
    ws = Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/out/scale-5000000")
    rel = ws / "releases" / "adult" / "release-0001"
    manifest = json.loads((rel / "manifest.json").read_text())
    qis, sensitive, protected = manifest["quasi_identifiers"], manifest["sensitive"], manifest["protected_values"]
    ell = float(manifest["l"])
    t = time.perf_counter()
    draft = pd.read_parquet(rel / "data.parquet")
    hierarchies = {q: read_hierarchy(ws / "hierarchies" / f"{q}.csv", q) for q in qis}
    register = pd.read_csv(ws / "register.csv", dtype=str)
    keys = np.empty((len(register), len(qis)), dtype=np.int64)
    for a, q in enumerate(qis):
        codes, uniques = pd.factorize(register[q])
        keys[:, a] = hierarchies[q].leaf_codes(list(uniques))[codes]
    ids = register["id"].to_numpy()
    # the state before release 1, in the statistics file's compact form (one history class)
    survival = np.ones((1, len(protected)))
    history_class = np.zeros(len(register), dtype=np.int64)
    print(f"load: {time.perf_counter() - t:.2f} s ({len(draft)} records, {len(register)} register rows)")

    t = time.perf_counter()
    spans = region_spans(draft, qis, hierarchies)
    print(f"region_spans: {time.perf_counter() - t:.2f} s, {len(spans)} groups")
    d = Draft(draft, qis, sensitive, hierarchies)
    population = Population(keys, ids, manifest["dilution"] == "presence", None)
    prior = PriorState(protected, survival, ell, history_class)
    # the earlier way: validation expanded the table to individuals and the report computed
    # it again per unit; now one per-unit computation serves both
    t = time.perf_counter()
    computed = compute_breach(d, population, prior)
    print(
        f"breach table per individual (validation before): {time.perf_counter() - t:.2f} s, "
        f"{len(computed.table)} rows, max p {computed.table['p'].max():.6f}, peak RSS {_rss():.2f} GiB"
    )
    del computed
    t = time.perf_counter()
    computed = compute_breach(d, population, prior, per_unit=True, unit_classes=history_class)
    print(
        f"breach table per unit (validation and report now): {time.perf_counter() - t:.2f} s, "
        f"{len(computed.table)} rows, max p {computed.table['p'].max():.6f}, peak RSS {_rss():.2f} GiB"
    )

    t = time.perf_counter()
    results = release_suite(
        d,
        computed,
        ell,
        {"max_suppression_rate": 0.05, "max_avg_group_size": None, "max_group_size": None},
        metrics={"suppression_rate": manifest["suppressed"] / (manifest["records"] + manifest["suppressed"])},
    )
    total = time.perf_counter() - t
    for r in results:
        print(f"  {r.suite}: {'PASS' if r.success else 'FAIL'} {r.failures}")
    print(f"release_suite (given the breach computation): {total:.2f} s, peak RSS {_rss():.2f} GiB")


if __name__ == "__main__":
    main()
