"""Three parts of a release timed alone, old way against new
(docs/benchmarks.md): the release contract suite on the rows against its distinct values,
``check_generalizes`` record by record against distinct (leaf, node) pairs, and the
register's CSV parsed as text against QI columns as dictionaries.

Set-up: the scaling study's workspace (``bench_scaling.py`` builds ``out/scaling/N-<register>``)
with release 2 published (``bench_release_steps.py`` publishes it).

Usage::

    uv run python benchmarks/bench_check_parts.py [--register 5000000] [--repeat 2]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from bench_scaling import ROOT, print_runs
from machine_info import machine

from anonymizer.measures._checks import check_generalizes
from checks import distinct
from checks.gx import run_suite
from checks.release_suites import contract_expectations
from serialpub.config import load_config
from serialpub.io.inputs import read_csv
from serialpub.workflow.publisher import Publisher


def _generalizes_per_record(hs: list[Any], nodes: np.ndarray, leaves: np.ndarray) -> None:
    """check_generalizes as it was: every record, one depth row at a time."""
    for j, h in enumerate(hs):
        ok = np.zeros(nodes.shape[0], dtype=bool)
        for column in h.leaf_nodes:
            ok |= column[leaves[:, j]] == nodes[:, j]
        assert ok.all()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--register", type=int, default=5_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    root = ROOT / f"N-{args.register}"
    ctx = Publisher(load_config(root))
    cfg = ctx.ws.config
    print(machine())
    rel = next(r for r in ctx.store.published(cfg.dataset) if r.seq == 2)
    table = pd.read_parquet(Path(rel.directory) / "data.parquet")
    hierarchies = ctx.read_hierarchies(table)

    def contract() -> list[Any]:
        return contract_expectations(ctx.qis, cfg.sensitive, hierarchies, cfg.id_column, ctx.sensitive_domain)

    print(f"release contract suite on release 2 ({len(table):,} records)")
    print_runs("on the rows", lambda: run_suite("contract", table, contract()), args.repeat)
    print_runs(
        "on distinct values",
        lambda: distinct.run_suite_on_distinct_values("contract", table, contract(), [*ctx.qis, cfg.sensitive]),
        args.repeat,
    )

    hs = list(ctx.search_hierarchies)
    rng = np.random.default_rng(0)
    n = 1_000_000
    leaves = np.stack([rng.integers(0, h.n_leaves, n) for h in hs], axis=1)
    nodes = np.stack([h.leaf_nodes[rng.integers(0, h.depth, n), leaves[:, j]] for j, h in enumerate(hs)], axis=1)
    print(f"check_generalizes, {n:,} records, {len(hs)} QIs, each published at a random level")
    print_runs("record by record", lambda: _generalizes_per_record(hs, nodes, leaves), args.repeat)
    print_runs("distinct (leaf, node) pairs", lambda: check_generalizes(hs, nodes, leaves), args.repeat)

    path = root / "register.csv"
    content = path.read_bytes()
    print(f"register parse, {args.register:,} individuals ({len(content) / 1e9:.2f} GB)")
    print_runs("as text", lambda: read_csv(path, "register", content), args.repeat)
    print_runs(
        "QI columns as dictionaries", lambda: read_csv(path, "register", content, dictionary=ctx.qis), args.repeat
    )


if __name__ == "__main__":
    main()
