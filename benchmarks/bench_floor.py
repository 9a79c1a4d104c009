"""The floor of a release at scale: one vectorized pass over the register and the snapshot,
the least any release must do (docs/scaling.md, "Where the next release's time goes").

What is timed, per round: reading the snapshot's CSV (pyarrow), finding every record's row in
the register by its id (one hash lookup per record), the register individuals and the records
per cell (one ``bincount`` over the register's coded QI combinations, one over the records'),
and the (cell, sensitive value) pairs of the records. Not timed: the register read and coded
once (what the register cache keeps). Wall and CPU seconds of the process, and its peak.

Set-up: the scaling study's register and diagnosis snapshots (``bench_scaling.py`` builds
``out/scaling/N-<register>``).

Usage::

    uv run python benchmarks/bench_floor.py [--register 5000000] [--records 1000000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
from bench_scaling import register_root, snapshot_pair


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--register", type=int, default=5_000_000)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    root = register_root(args.register)
    snapshot = snapshot_pair(root, "diagnosis", args.records)[1]
    ids_as_text = pcsv.ConvertOptions(column_types={"id": pa.string()})
    register = pcsv.read_csv(root / "register.csv", convert_options=ids_as_text)
    ids = register.column("id").combine_chunks()
    joined = pc.binary_join_element_wise(
        *[pc.cast(register.column(c), pa.string()) for c in register.column_names[1:]], "|"
    )
    codes = pc.dictionary_encode(joined).combine_chunks().indices.to_numpy().astype(np.int64)
    cells = int(codes.max()) + 1
    del register, joined
    print(f"register {len(ids):,} individuals, {cells:,} cells; snapshot {snapshot.name}")
    for i in range(args.rounds):
        t, cpu = time.perf_counter(), _cpu_seconds()
        snap = pcsv.read_csv(snapshot, convert_options=ids_as_text)
        rows = pc.index_in(snap.column("id"), value_set=ids).to_numpy(zero_copy_only=False)
        np.bincount(codes, minlength=cells)  # register individuals per cell
        np.bincount(codes[rows], minlength=cells)  # records per cell
        value = pc.dictionary_encode(snap.column("diagnosis")).combine_chunks().indices.to_numpy()
        np.unique(codes[rows] * (int(value.max()) + 1) + value)  # the records' (cell, value) pairs
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB
        wall, cpu = time.perf_counter() - t, _cpu_seconds() - cpu
        print(f"round {i + 1}: {wall:.2f} s wall, {cpu:.2f} CPU s, peak {peak:.2f} GiB")


if __name__ == "__main__":
    main()
