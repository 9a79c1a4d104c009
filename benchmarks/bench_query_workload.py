"""The query workload of one large release: 5,000 range-count queries answered on
the raw snapshot and on the release, with the paper's uniform and the register-weighted
estimators, exactly as drafting runs them (``serialpub.workflow.measuring``): the queries and
their answers on the snapshot (drawn while the snapshot is anonymized), then the estimates on
the release.

Set-up: the scaling study's 5,000,000-person register and a release of its 1,000,000-record
diagnosis snapshot (``bench_scaling.py`` builds the register; publish release 2 with
``serialpub release`` as docs/benchmarks.md says). Prints the two mean errors (so two
versions of the code can be checked to give the same figures) and the seconds.

Usage::

    uv run python benchmarks/bench_query_workload.py [WORKSPACE] [--release 2] [--repeat 5]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from anonymizer.queries import draw_workload, estimate_workload
from serialpub.config import load_config
from serialpub.io.inputs import read_csv
from serialpub.workflow import measuring
from serialpub.workflow.publisher import Publisher

DEFAULT = Path(__file__).resolve().parent / "out" / "scaling" / "N-5000000"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workspace", type=Path, nargs="?", default=DEFAULT)
    ap.add_argument("--release", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1, help="times to run it; the fastest is printed last")
    args = ap.parse_args()
    ctx = Publisher(load_config(args.workspace))
    rel = next(r for r in ctx.store.published(ctx.ws.config.dataset) if r.seq == args.release)
    if rel.params.snapshot is None:
        raise SystemExit(f"release {args.release} records no snapshot (an import); give a drafted one with --release")
    raw = read_csv(Path(rel.params.snapshot), "snapshot")
    table = pd.read_parquet(Path(rel.directory) / "data.parquet")
    cfg = ctx.ws.config
    weights = ctx.register_reader.register_leaf_counts  # read (and the register coded) before the clock starts
    best = float("inf")
    for _ in range(args.repeat):
        t = time.perf_counter()
        workload = draw_workload(
            raw[[*ctx.qis, cfg.sensitive]],
            ctx.hierarchies,
            cfg.sensitive,
            n_queries=measuring.QUERY_COUNT,
            qd=measuring.QUERY_DIMENSIONS,
            selectivity=measuring.QUERY_SELECTIVITY,
            seed=cfg.query_seed,
        )
        t_release = time.perf_counter()
        query = estimate_workload(workload, table, ctx.read_hierarchies(table), cfg.sensitive, leaf_weights=weights)
        end = time.perf_counter()
        seconds = end - t
        best = min(best, seconds)
        weighted = query.weighted.mean if query.weighted else float("nan")
        print(
            f"{len(table):,} records: mean error {query.mean!r}, register-weighted {weighted!r}; {seconds:.2f} s "
            f"(snapshot {t_release - t:.2f} s, release {end - t_release:.2f} s)"
        )
    if args.repeat > 1:
        print(f"fastest of {args.repeat}: {best:.2f} s")


if __name__ == "__main__":
    main()
