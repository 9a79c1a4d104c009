"""The small per-process costs of issue 20's second pass, each against the way it was done
before (the old way inline here), best of ``--repeat``:

* looking 1,000,000 snapshot ids up among 5,000,000 register ids: pandas' hash table (built
  anew, as every fresh process did) against :class:`anonymizer.arrays.IdLookup`;
* turning the register cache entry's leaf codes into one int64 array in a fresh process (the
  scaling study's workspace, when ``bench_release_steps.py`` has written its entry): stacked
  int64 copies as before, filled column by column now;
* building a suite of 30 expectations: ``add_expectation`` one by one against the
  constructor;
* the register-id fingerprint of 5M ids, computed and taken from the per-Index memo;
* (third pass) filtering the scaling study's first snapshot of ``--records`` records with an
  all-False mask, as each Great Expectations map expectation does three times: the table
  as pyarrow's reader returns it (one chunk per block) against one chunk per column, which
  ``serialpub.io.inputs.read_csv`` now returns.

Usage::

    .venv/bin/python benchmarks/bench_lookups.py [--register 5000000] [--records 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
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


def leaf_codes(entry: Path, way: str) -> float:
    """Seconds to turn the entry's int32 leaf-code columns into one int64 (N, d) array."""
    with pa.memory_map(str(entry)) as source:
        table = pa.ipc.open_file(source).read_all()
    qis = [c for c in table.column_names[1:] if not c.startswith("__")]
    t = time.perf_counter()
    if way == "stacked":
        np.stack([table.column(q).to_numpy().astype(np.int64) for q in qis], axis=1)
    else:
        keys = np.empty((table.num_rows, len(qis)), dtype=np.int64)
        for i, q in enumerate(qis):
            keys[:, i] = table.column(q).to_numpy()
    return time.perf_counter() - t


def leaf_codes_in_a_fresh_process(entry: Path, way: str) -> float:
    out = subprocess.run([sys.executable, __file__, "--leaf-codes", way, str(entry)], capture_output=True,
                         text=True, check=True)  # fmt: skip
    return float(out.stdout.strip())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--register", type=int, default=5_000_000)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--leaf-codes", nargs=2, metavar=("WAY", "ENTRY"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.leaf_codes:
        print(leaf_codes(Path(args.leaf_codes[1]), args.leaf_codes[0]))
        return
    print(machine())
    text = np.arange(1, args.register + 1).astype(str).astype(object)
    wanted = pd.Series(text[np.random.default_rng(0).choice(args.register, args.records, replace=False)])
    lookup = IdLookup.of(text)
    assert lookup is not None
    cold = best(lambda: pd.Index(text, dtype=object).get_indexer(pd.Index(wanted)), args.repeat)
    built = best(lambda: IdLookup.of(text), args.repeat)
    found = best(lambda: lookup.find(text, wanted.to_numpy(dtype=object)), args.repeat)
    print(f"ids: pandas hash table, built and used {cold:.2f} s; lookup built {built:.2f} s (once per register "
          f"version, kept in the cache), used {found:.2f} s")

    entries = sorted((SCALING / f"N-{args.register}").glob("cache/register-*.arrow"))
    if entries:
        # each in a fresh process, as a task meets it: the mapped pages are faulted in anew
        runs = {way: [leaf_codes_in_a_fresh_process(entries[0], way) for _ in range(args.repeat)]
                for way in ("stacked", "filled")}  # fmt: skip
        print("register cache entry, leaf codes in a fresh process: "
              + ", ".join(f"{way} (before: stacked int64 copies) {min(t):.2f} s" if way == "stacked"
                          else f"{way} column by column (now) {min(t):.2f} s" for way, t in runs.items()))  # fmt: skip

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

    print(f"suite of 30: add_expectation {best(lambda: suite(True), args.repeat):.3f} s, "
          f"constructor {best(lambda: suite(False), args.repeat):.3f} s")
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
        print(f"filtering {len(whole):,} rows: {table.column(0).num_chunks} chunks per column "
              f"{best(lambda: chunked[none], 10 * args.repeat) * 1000:.2f} ms, one chunk "
              f"{best(lambda: whole[none], 10 * args.repeat) * 1000:.2f} ms")


if __name__ == "__main__":
    main()
