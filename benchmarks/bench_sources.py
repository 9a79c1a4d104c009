"""Reading the population register from each kind of source: a CSV file,
a Parquet file and a PostgreSQL table, 5,000,000 individuals (the scaling study's register,
``bench_scaling.py``). Per source: the seconds to get its canonical CSV form (the bytes that
are hashed and kept as a version) and to parse it, and the bytes of that form; the best of
``--runs`` runs, each in this process.

Usage::

    uv run python benchmarks/bench_sources.py [--register 5000000] [--runs 3]

Needs the local PostgreSQL (``SERIALPUB_TEST_POSTGRES_URL`` or postgres@127.0.0.1/test):
the table ``bench_register_<N>`` is loaded once with COPY and kept.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from bench_scaling import register_root
from machine_info import machine

from serialpub.io.inputs import read_csv
from serialpub.io.sources import parse_source

URL = os.environ.get("SERIALPUB_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def load_postgres(csv: Path, table: str) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(URL)
    with engine.begin() as conn:
        if sa.inspect(conn).has_table(table):
            return
        header = csv.open(encoding="utf-8").readline().strip().split(",")
        columns = ", ".join(f'"{c}" text' for c in header)
        conn.exec_driver_sql(f'CREATE TABLE "{table}" ({columns})')
        cur = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        with cur.copy(f'COPY "{table}" FROM STDIN (FORMAT csv, HEADER true)') as copy, csv.open("rb") as f:
            while block := f.read(1 << 22):
                copy.write(block)
    engine.dispose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--register", type=int, default=5_000_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    root = register_root(args.register)
    csv = root / "register.csv"
    parquet = root / "register.parquet"
    if not parquet.exists():
        pq.write_table(pa_csv.read_csv(csv), parquet)
    table = f"bench_register_{args.register}"
    load_postgres(csv, table)
    print(machine())
    for spec in [str(csv), str(parquet), f"sql:{table}"]:
        source = parse_source(spec, root, URL, "bench")
        best_read = best_parse = float("inf")
        for _ in range(args.runs):
            t = time.perf_counter()
            content = source.read_bytes("register", "id")
            best_read = min(best_read, time.perf_counter() - t)
            t = time.perf_counter()
            read_csv(source.label, "register", content)
            best_parse = min(best_parse, time.perf_counter() - t)
        print(
            f"{source.kind:8s} canonical form {len(content) / 1e6:7.1f} MB: read {best_read:5.2f} s, "
            f"parse {best_parse:5.2f} s"
        )


if __name__ == "__main__":
    main()
