"""The register's CSV parsed with pyarrow's default blocks against the larger blocks
``serialpub.io.inputs.read_csv`` uses, QI columns as dictionaries:
seconds to parse, to unify the chunks' dictionaries, to combine the chunks and to convert
to pandas.

Usage::

    uv run python benchmarks/bench_csv_blocks.py [--register 50000000]
"""

from __future__ import annotations

import argparse
import time

import pyarrow as pa
import pyarrow.csv as pa_csv
from bench_scaling import ROOT
from machine_info import machine


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--register", type=int, default=50_000_000)
    args = ap.parse_args()
    print(machine())
    content = (ROOT / f"N-{args.register}" / "register.csv").read_bytes()
    header = content.split(b"\n", 1)[0].decode().split(",")
    types = {h: pa.string() if h == "id" else pa.dictionary(pa.int32(), pa.string()) for h in header}
    for block in (1 << 20, 16 << 20):
        t0 = time.perf_counter()
        table = pa_csv.read_csv(
            pa.BufferReader(content),
            read_options=pa_csv.ReadOptions(block_size=block),
            convert_options=pa_csv.ConvertOptions(column_types=types, strings_can_be_null=False),
        )
        t1 = time.perf_counter()
        table = table.unify_dictionaries()
        t2 = time.perf_counter()
        columns = [table.column(i).combine_chunks() for i in range(table.num_columns)]
        t3 = time.perf_counter()
        pa.table(columns, names=table.column_names).to_pandas()
        t4 = time.perf_counter()
        print(
            f"{block >> 20} MB blocks, {table.column(1).num_chunks} chunks a column: parse {t1 - t0:.1f} s, "
            f"unify {t2 - t1:.1f} s, combine {t3 - t2:.1f} s, to pandas {t4 - t3:.1f} s"
        )
        del table, columns


if __name__ == "__main__":
    main()
