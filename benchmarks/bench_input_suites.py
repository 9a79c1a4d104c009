"""Benchmark of the input suites: ``checks.input_suites.snapshot_suite`` on a
synthetic snapshot of 1,000,000 rows (id, three QIs, sensitive value) against a population
register of 5,000,000 ids, all as strings; then ``register_suite`` on that register
(5,000,000 rows: id and three QIs), once.

Reported: building the inputs (not timed as part of the suite), the register-id fingerprint
alone, and the whole suite (fingerprint and the register ids' hash table included: every run
gets a fresh ``pd.Index`` of the ids), best and all of ``--repeat`` runs.

``--gx-fingerprint`` lets Great Expectations fingerprint each batch again (an md5 of pandas'
row hashes, which ``checks.gx`` turns off): run with and without it for that step's cost.

Usage::

    uv run python benchmarks/bench_input_suites.py [--rows 1000000] [--register 5000000] [--repeat 3] [--gx-fingerprint]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pandas as pd

from anonymizer.hierarchy import Hierarchy
from checks.input_suites import DatasetColumns, PeriodOrder, explain, reference_key, register_suite, snapshot_suite

DISEASES = ["flu", "cold", "fever", "gastritis", "hiv", "cancer"]


def hierarchies() -> dict[str, Hierarchy]:
    sex = [(1, ["M", "*"]), (2, ["F", "*"])]
    age = [(i + 1, [str(a), f"[{a // 10 * 10}, {a // 10 * 10 + 9}]", "*"]) for i, a in enumerate(range(17, 91))]
    zips = [(i + 1, [f"{z:05d}", f"{z // 10:04d}*", "*"]) for i, z in enumerate(range(10000, 10500))]
    return {
        "sex": Hierarchy.from_rows("sex", sex, "sex.csv"),
        "age": Hierarchy.from_rows("age", age, "age.csv"),
        "zipcode": Hierarchy.from_rows("zipcode", zips, "zipcode.csv"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--register", type=int, default=5_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--gx-fingerprint", action="store_true", help="GX's batch fingerprint on (as before 034b065)")
    args = parser.parse_args()
    if args.gx_fingerprint:
        from great_expectations.execution_engine import pandas_execution_engine

        pandas_execution_engine.HASH_THRESHOLD = 1e9  # GX's own default
    rng = np.random.default_rng(0)
    h = hierarchies()

    t = time.perf_counter()
    register_ids = pd.Index(np.char.add("p", np.arange(args.register).astype(str)).astype(object))
    chosen = rng.choice(args.register, size=args.rows, replace=False)
    snapshot = pd.DataFrame(
        {
            "id": pd.array(register_ids.to_numpy()[chosen], dtype="str"),
            "sex": pd.array(np.asarray(h["sex"].leaves, dtype=object)[rng.integers(0, 2, args.rows)], dtype="str"),
            "age": pd.array(np.asarray(h["age"].leaves, dtype=object)[rng.integers(0, 74, args.rows)], dtype="str"),
            "zipcode": pd.array(
                np.asarray(h["zipcode"].leaves, dtype=object)[rng.integers(0, 500, args.rows)], dtype="str"
            ),
            "disease": pd.array(np.asarray(DISEASES, dtype=object)[rng.integers(0, 6, args.rows)], dtype="str"),
        }
    )
    build = time.perf_counter() - t

    t = time.perf_counter()
    reference_key("population register", register_ids)
    fingerprint = time.perf_counter() - t

    times = []
    result = None
    for _ in range(args.repeat):
        fresh = pd.Index(register_ids.to_numpy().copy())  # no hash table cached from the last run
        t = time.perf_counter()
        result = snapshot_suite(
            snapshot,
            DatasetColumns("id", ["sex", "age", "zipcode"], h, "disease", DISEASES),
            fresh,
            PeriodOrder("2024-02", "2024-01", args.rows),
        )
        times.append(time.perf_counter() - t)
    assert result is not None
    print(explain(result))

    n = args.register
    register = pd.DataFrame(
        {
            "id": pd.array(register_ids.to_numpy(), dtype="str"),
            "sex": pd.array(np.asarray(h["sex"].leaves, dtype=object)[rng.integers(0, 2, n)], dtype="str"),
            "age": pd.array(np.asarray(h["age"].leaves, dtype=object)[rng.integers(0, 74, n)], dtype="str"),
            "zipcode": pd.array(np.asarray(h["zipcode"].leaves, dtype=object)[rng.integers(0, 500, n)], dtype="str"),
        }
    )
    t = time.perf_counter()
    reg_result = register_suite(register, DatasetColumns("id", ["sex", "age", "zipcode"], h))
    register_time = time.perf_counter() - t
    print(explain(reg_result))
    print(
        json.dumps(
            {
                "rows": args.rows,
                "register_ids": args.register,
                "build_inputs_s": round(build, 2),
                "fingerprint_s": round(fingerprint, 2),
                "snapshot_suite_s": [round(x, 2) for x in times],
                "best_s": round(min(times), 2),
                "success": result.success,
                "register_suite_s": round(register_time, 2),
                "register_success": reg_result.success,
                "expectations": result.result["statistics"]["evaluated_expectations"],
                "gx_fingerprint": args.gx_fingerprint,
            }
        )
    )


if __name__ == "__main__":
    main()
