"""Benchmark of the utility measure: 5,000 random range-count queries (docs/design.md section 8)
comparing a raw snapshot with its published release.

Usage (after ``bench_release.py demo`` and ``bench_release.py scale``)::

    uv run python benchmarks/bench_queries.py
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from anonymizer.queries import average_relative_error
from serialpub.datasets import adult
from serialpub.io.hierarchies import read_hierarchies

OUT = Path(__file__).resolve().parent / "out"


def measure(raw_path: Path, release_dir: Path) -> None:
    hierarchies = read_hierarchies(adult.hierarchy_dir(), adult.QUASI_IDENTIFIERS)
    raw = pd.read_csv(raw_path, dtype=str)[[*adult.QUASI_IDENTIFIERS, adult.SENSITIVE]]
    published = pd.read_parquet(release_dir / "data.parquet")
    t = time.perf_counter()
    result = average_relative_error(raw, published, hierarchies, adult.SENSITIVE, seed=0)
    print(
        f"{len(raw):>9} raw / {len(published):>9} published records: mean error {result.mean:.3f}, "
        f"{time.perf_counter() - t:.2f} s"
    )


def main() -> None:
    demo = OUT / "demo-ws"
    measure(demo / "snapshots" / "snapshot-0001.csv", demo / "releases" / "adult" / "release-0001")
    scale = OUT / "scale-5000000"
    measure(scale / "snapshots" / "snapshot-1000000.csv", scale / "releases" / "adult" / "release-0001")


if __name__ == "__main__":
    main()
