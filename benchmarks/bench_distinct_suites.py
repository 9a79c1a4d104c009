"""The input suites with their per-value expectations on distinct values against the same
suites row by row (``checks.distinct``): the register suite on the scaling study's
register and the snapshot suite on its first diagnosis snapshot, alternated in one process.

"Row by row" replaces ``checks.input_suites.run_suite_on_distinct_values`` with
``checks.gx.run_suite`` (what the suites ran before); both verdicts are printed and must agree.

Usage::

    .venv/bin/python benchmarks/bench_distinct_suites.py [--register 5000000] [--records 1000000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from bench_scaling import register_root, snapshot_pair, write_config

import checks.input_suites as suites
from checks import distinct, gx
from serialpub.config import load_config
from serialpub.io.inputs import read_csv
from serialpub.workflow.input_checks import _order_and_key
from serialpub.workflow.publisher import Publisher
from serialpub.workflow.register_reader import by_file_line


def _rows(name: str, table: Any, expectations: Any, columns: Any, row_label: str = "row") -> Any:
    return gx.run_suite(name, table, expectations, row_label)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--register", type=int, default=5_000_000)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    root = register_root(args.register)
    first = snapshot_pair(root, "diagnosis", args.records)[0]
    for stale in root.glob("state.sqlite*"):
        stale.unlink()
    write_config(root, "diagnosis", "register")
    ctx = Publisher(load_config(root))
    register = ctx.register
    order = _order_and_key(ctx.ws.config, ctx.register_reader, "0001", [], None)[0]
    snapshot = by_file_line(read_csv(first, "snapshot"))
    table = by_file_line(read_csv(root / "register.csv", "population register"))
    runs = {
        "register": lambda: suites.register_suite(table, ctx.inputs.columns, row_label="line"),
        "snapshot": lambda: suites.snapshot_suite(
            snapshot, ctx.inputs.columns, register.ids, order, row_label="line", id_lookup=register.id_lookup
        ),
    }
    for name, run in runs.items():
        for _ in range(args.repeat):
            for mode, impl in (("distinct values", distinct.run_suite_on_distinct_values), ("row by row", _rows)):
                suites.run_suite_on_distinct_values = impl  # type: ignore[assignment]
                t = time.perf_counter()
                outcome = run()
                print(f"{name} suite, {mode:<15} {time.perf_counter() - t:6.2f} s  passed: {outcome.success}")
    suites.run_suite_on_distinct_values = distinct.run_suite_on_distinct_values


if __name__ == "__main__":
    main()
