"""Why the 1M/5M release collapses to a few groups: the top-down search's per-level account
of the requirements that blocked its splits (:func:`anonymizer.topdown.level_report`).

Builds in memory the scale set-up of ``bench_search.py`` (a register of N individuals
resampling the bundled Adult rows under fresh ids, a snapshot of R of them), protects the
``--protect`` occupations (``rarest5``: the five with the fewest records in the snapshot,
as ``bench_data_user.py --variant rarest5`` does; ``all``: every one), and publishes
release 1 with the demo's parameters (ℓ = 2, constant ratio k' = 20, register dilution,
mechanism-aware counts, age cut into register intervals), with ``explain`` on (off under
``--no-explain``, to measure what it costs). Prints one JSON line per release (groups, max
p, wall and CPU seconds of the anonymization) and the levels.

Usage::

    .venv/bin/python benchmarks/bench_collapse.py [--register 5000000] [--records 1000000]
        [--protect rarest5] [--model published] [--noisy EPSILON] [--no-explain]
"""

from __future__ import annotations

import argparse
import json
import math
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
from anonymizer.noisy_split import noise_generator  # noqa: E402
from anonymizer.release import History, PrivacyParams, SnapshotCodes, anonymize_history  # noqa: E402
from anonymizer.topdown import name_values  # noqa: E402
from serialpub.datasets import adult  # noqa: E402
from serialpub.io.hierarchies import read_hierarchy  # noqa: E402


def scale_inputs(
    n_register: int, n_records: int, protect: str, seed: int = 0, intervals: bool = True
) -> dict[str, object]:
    """The register's leaf codes (N, d), the snapshot (individuals, value sets), the protected
    names and the search hierarchies (age as register intervals unless ``intervals`` is
    False: then its hierarchy file's levels, as a workspace without ``numeric: [age]``)."""
    base = adult.load_adult()
    qis = adult.QUASI_IDENTIFIERS
    hierarchies = [read_hierarchy(adult.hierarchy_dir() / f"{q}.csv", q) for q in qis]
    base_keys = np.stack([h.leaf_codes(base[q].astype(str)) for h, q in zip(hierarchies, qis, strict=True)], axis=1)
    occupations = base[adult.SENSITIVE].astype(str).to_numpy()
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, len(base), size=n_register)
    keys = base_keys[rows]
    present = np.sort(rng.choice(n_register, size=n_records, replace=False))
    names, counts = np.unique(occupations[rows[present]], return_counts=True)
    if protect == "rarest5":
        protected = sorted(names[np.argsort(counts, kind="stable")[:5]].tolist())
    else:
        protected = sorted(names.tolist())
    index = {v: i for i, v in enumerate(protected)}
    value_set = np.array([index.get(v, -1) for v in names])[np.searchsorted(names, occupations[rows[present]])]
    searched = [
        quantile_hierarchy(h, np.bincount(keys[:, a], minlength=h.n_leaves)) if intervals and q in adult.NUMERIC else h
        for a, (h, q) in enumerate(zip(hierarchies, qis, strict=True))
    ]
    return {"keys": keys, "present": present, "value_set": value_set.astype(np.int64), "protected": protected,
            "hierarchies": searched}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--register", type=int, default=5_000_000)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--protect", choices=["rarest5", "all"], default="rarest5")
    parser.add_argument("--model", choices=["published", "parts"], default="published")
    parser.add_argument(
        "--no-intervals", action="store_true", help="age along its hierarchy file (a workspace without numeric: [age])"
    )
    parser.add_argument(
        "--noisy",
        type=float,
        metavar="EPSILON",
        help="partition_test: noisy at this ε (noise seeded by --noise-seed, not a secret here)",
    )
    parser.add_argument("--noise-seed", default="bench")
    parser.add_argument(
        "--no-explain",
        action="store_true",
        help="the search without its per-level account (what explain costs: compare cpu_seconds)",
    )
    args = parser.parse_args()
    inputs = scale_inputs(args.register, args.records, args.protect, intervals=not args.no_intervals)
    print(json.dumps(machine()))
    protected: list[str] = inputs["protected"]  # type: ignore[assignment]
    noisy = args.noisy is not None
    params = PrivacyParams(
        ell=2.0,
        strategy="constant",
        k_prime=20,
        partition_model=args.model,
        partition_test="noisy" if noisy else "sound",
        partition_epsilon=args.noisy,
    )
    noise = noise_generator(args.noise_seed.encode(), "adult", 1) if noisy else None
    history = History.empty(np.full(args.register, 2.0), len(protected))
    snapshot = SnapshotCodes(inputs["present"], inputs["value_set"], len(protected))  # type: ignore[arg-type]
    started, cpu = time.perf_counter(), time.process_time()
    result = anonymize_history(
        inputs["keys"],
        snapshot,
        history,
        params,
        inputs["hierarchies"],
        False,  # type: ignore[arg-type]
        seed=1,
        explain=not args.no_explain,
        noise=noise,
    )
    # CPU seconds of every thread of the process (the search splits on two): the figure that
    # holds on a loaded machine, where the wall clock does not
    cpu_seconds = time.process_time() - cpu
    test = params.noisy_test()
    charge = float((result.group_counts / result.group_candidates[:, None]).max()) if result.group_counts.size else 0.0
    print(
        json.dumps(
            {
                "protected": protected,
                "records_per_value": np.bincount(
                    inputs["value_set"][inputs["value_set"] >= 0], minlength=len(protected)
                ).tolist(),  # type: ignore[index]
                "groups": int(result.group_nodes.shape[0]),
                "max_p": round(result.max_breach, 4),
                "max_charge": round(charge, 4),
                "epsilon": None if test is None else round(test.epsilon, 4),
                "posterior_bound": round(charge * (math.exp(test.epsilon) if test else 1.0), 4),
                "noisy_taken": sum(int(lv.get("noisy_taken", 0)) for lv in result.generalization.levels or []),  # type: ignore[call-overload]
                "seconds": round(time.perf_counter() - started, 2),
                "cpu_seconds": round(cpu_seconds, 2),
                "explain": not args.no_explain,
            }
        )
    )
    for level in name_values(result.generalization.levels or [], protected):
        print(json.dumps(level))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
