"""Small per-process costs of a release (docs/benchmarks.md), each against the way it was done
before (the old way inline here), best of ``--repeat``:

* looking 1,000,000 snapshot ids up among 5,000,000 register ids: pandas' hash table (built
  anew, as every fresh process did) against :class:`anonymizer.arrays.IdLookup`;
* building a suite of 30 expectations: ``add_expectation`` one by one against the
  constructor;
* the register-id fingerprint of 5M ids, computed and taken from the per-Index memo;
* (third pass) filtering the scaling study's first snapshot of ``--records`` records with an
  all-False mask, as each Great Expectations map expectation does three times: the table
  as pyarrow's reader returns it (one chunk per block) against one chunk per column, which
  ``serialpub.io.inputs.read_csv`` now returns.

(The second pass also timed the register cache entry's leaf-code columns turned into one
int64 array; the entry has held them otherwise since, and now holds one code per
individual's QI combination, ``anonymizer.arrays.CodedRows``, so that comparison is gone.)

Usage::

    .venv/bin/python benchmarks/bench_lookups.py [--register 5000000] [--records 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from machine_info import machine

from anonymizer.arrays import IdLookup
from checks import input_suites

SCALING = Path(__file__).resolve().parent / "out" / "scaling"


def best(f: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--register", type=int, default=5_000_000)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(machine())
    text = np.arange(1, args.register + 1).astype(str).astype(object)
    wanted = pd.Series(text[np.random.default_rng(0).choice(args.register, args.records, replace=False)])
    lookup = IdLookup.of(text)
    assert lookup is not None
    cold = best(lambda: pd.Index(text, dtype=object).get_indexer(pd.Index(wanted)), args.repeat)
    built = best(lambda: IdLookup.of(text), args.repeat)
    found = best(lambda: lookup.find(text, wanted.to_numpy(dtype=object)), args.repeat)
    print(
        f"ids: pandas hash table, built and used {cold:.2f} s; lookup built {built:.2f} s (once per register "
        f"version, kept in the cache), used {found:.2f} s"
    )

    import great_expectations as gx

    from checks.gx import _context

    def suite(one_by_one: bool) -> None:
        exps = [gx.expectations.ExpectColumnValuesToNotBeNull(column=f"c{i}") for i in range(30)]
        context = _context()
        if one_by_one:
            s = context.suites.add(gx.ExpectationSuite(name="s"))
            for e in exps:
                s.add_expectation(e)
        else:
            context.suites.add(gx.ExpectationSuite(name="s", expectations=exps))

    print(
        f"suite of 30: add_expectation {best(lambda: suite(True), args.repeat):.3f} s, "
        f"constructor {best(lambda: suite(False), args.repeat):.3f} s"
    )
    ids = pd.Index(text, dtype=object)
    first = best(lambda: input_suites._fingerprint(ids), 1)
    input_suites.reference_key("r", ids)
    again = best(lambda: input_suites.reference_key("r", ids), args.repeat)
    print(f"register-id fingerprint: computed {first:.2f} s, memoized {again:.4f} s")

    snapshots = sorted((SCALING / f"N-{args.register}").glob(f"snapshots/diagnosis-{args.records}/snapshot-1.csv"))
    if snapshots:
        import pyarrow.csv as pa_csv

        table = pa_csv.read_csv(snapshots[0], convert_options=pa_csv.ConvertOptions(strings_can_be_null=False))
        chunked, whole = table.to_pandas(), table.combine_chunks().to_pandas()
        none = np.zeros(len(whole), dtype=bool)
        print(
            f"filtering {len(whole):,} rows: {table.column(0).num_chunks} chunks per column "
            f"{best(lambda: chunked[none], 10 * args.repeat) * 1000:.2f} ms, one chunk "
            f"{best(lambda: whole[none], 10 * args.repeat) * 1000:.2f} ms"
        )


if __name__ == "__main__":
    main()
