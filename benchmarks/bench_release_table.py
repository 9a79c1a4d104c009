"""Building the release table's QI columns (``serialpub.workflow.drafting.published_table``):
one label per published record from its group's node id, for the eight Adult QIs, the way
the table is built now (Arrow takes the labels by node id) against the way it was built
before 19c508d (a numpy array of labels, indexed, then ``astype(str)``). Both must give the
same columns; best of ``--repeat``.

Usage::

    uv run python benchmarks/bench_release_table.py [--records 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
import pyarrow as pa

from serialpub.datasets import adult
from serialpub.io.hierarchies import read_hierarchies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    hierarchies = read_hierarchies(adult.hierarchy_dir(), adult.QUASI_IDENTIFIERS)
    rng = np.random.default_rng(0)
    nodes = {q: rng.integers(0, h.n_nodes, args.records) for q, h in hierarchies.items()}

    def numpy_strings() -> dict[str, object]:
        return {q: np.asarray(h.labels, dtype=object)[nodes[q]].astype(str) for q, h in hierarchies.items()}

    def arrow_take() -> dict[str, object]:
        return {
            q: pd.array(pa.DictionaryArray.from_arrays(pa.array(nodes[q].astype(np.int32)),
                                                       pa.array(list(h.labels), pa.string())).dictionary_decode(),
                        dtype="str")
            for q, h in hierarchies.items()
        }  # fmt: skip

    best = {}
    for name, build in (("numpy strings (before)", numpy_strings), ("arrow take (now)", arrow_take)):
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            frame = pd.DataFrame(build())
            times.append(time.perf_counter() - t)
        best[name] = frame
        print(f"{name:<24} {min(times):6.2f} s for {args.records:,} records x {len(hierarchies)} QIs")
    before, now = best.values()
    assert before.equals(now), "the two ways give different tables"


if __name__ == "__main__":
    main()
