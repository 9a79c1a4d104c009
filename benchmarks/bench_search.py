"""Search time and group count of one release at scale (issue: releases people can use).

Builds, in memory, a register of N individuals by resampling the bundled Adult rows under
fresh ids (integer leaf codes of the 8 demo QIs), a snapshot of R of them with their
occupations (every occupation protected), and times
:func:`anonymizer.release.anonymize_history` (cells, requirement, search and state
update) for release 1 and release 2 (a fresh snapshot, with the history of release 1),
for each algorithm. Parameters are the demo's: ℓ = 2, constant ratio k' = 20, register
dilution, mechanism-aware counts, no suppression; the top-down search cuts the QIs the
demo declares numeric (age) into intervals, as the pipeline does
(:meth:`serialpub.workflow.publisher.Publisher.hierarchies_for_search`).

Usage::

    .venv/bin/python benchmarks/bench_search.py [--register 5000000] [--records 1000000]
        [--algorithms topdown bottomup]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT, ROOT / "benchmarks"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from machine_info import machine  # noqa: E402

from anonymizer.intervals import quantile_hierarchy  # noqa: E402
from anonymizer.release import History, PrivacyParams, SnapshotCodes, anonymize_history  # noqa: E402
from serialpub.datasets import adult  # noqa: E402
from serialpub.io.hierarchies import read_hierarchy  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--register", type=int, default=5_000_000)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--algorithms", nargs="+", default=["topdown", "bottomup"])
    args = parser.parse_args()
    base = adult.load_adult()
    qis = adult.QUASI_IDENTIFIERS
    hierarchies = [read_hierarchy(adult.hierarchy_dir() / f"{q}.csv", q) for q in qis]
    base_keys = np.stack([h.leaf_codes(base[q].astype(str)) for h, q in zip(hierarchies, qis, strict=True)], axis=1)
    values = sorted(base[adult.SENSITIVE].unique())
    base_value = np.searchsorted(values, base[adult.SENSITIVE].to_numpy())
    rng = np.random.default_rng(0)
    rows = rng.integers(0, len(base), size=args.register)
    keys = base_keys[rows]
    value = base_value[rows]
    snaps = [np.sort(rng.choice(args.register, size=args.records, replace=False)) for _ in range(2)]
    print(json.dumps(machine()))
    intervals = [
        quantile_hierarchy(h, np.bincount(keys[:, a], minlength=h.n_leaves)) if q in adult.NUMERIC else h
        for a, (h, q) in enumerate(zip(hierarchies, qis, strict=True))
    ]
    for algorithm in args.algorithms:
        params = PrivacyParams(ell=2.0, strategy="constant", k_prime=20, algorithm=algorithm)
        searched = intervals if algorithm == "topdown" else hierarchies
        history = History.empty(np.full(args.register, 2.0), len(values))
        for seq, present in enumerate(snaps, start=1):
            started = time.perf_counter()
            snapshot = SnapshotCodes(present, value[present], len(values))
            result = anonymize_history(keys, snapshot, history, params, searched, False, seed=seq)
            seconds = time.perf_counter() - started
            history = result.history
            print(
                json.dumps(
                    {
                        "algorithm": algorithm,
                        "release": seq,
                        "register": args.register,
                        "records": args.records,
                        "groups": int(result.group_nodes.shape[0]),
                        "seconds": round(seconds, 2),
                        "max_p": round(history.max_breach(), 4),
                        "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
                    }
                ),
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
