"""The utility measures of one large draft: the seconds and the traced peak
memory (``tracemalloc``, which numpy reports to) of ``serialpub.report.utility.draft_measures``
on the draft of the scaling study's first diagnosis snapshot, and the seconds of
``table_utility`` on that snapshot's (records, QIs + sensitive) table alone.

For "before", run it with ``PYTHONPATH`` pointing at a worktree of the older commit.

Usage::

    .venv/bin/python benchmarks/bench_measures.py [--register 5000000] [--records 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np
import pandas as pd
from bench_scaling import checked_first_snapshot

from anonymizer.measures.entropy_utility import table_utility
from anonymizer.release import SnapshotCodes, anonymize_history
from serialpub.report.utility import draft_measures
from serialpub.workflow.anonymizing import record_sets


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--register", type=int, default=5_000_000)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    ctx, snap = checked_first_snapshot(args.register, args.records)
    cfg = ctx.ws.config
    history = ctx.statistics.load(None, np.full(len(ctx.register.ids), float(cfg.ell)))
    codes = SnapshotCodes(snap.individual, record_sets(ctx.protected, snap), len(ctx.protected))
    result = anonymize_history(ctx.register.keys, codes, history, ctx.params, ctx.search_hierarchies, False)
    sensitive = pd.factorize(snap.value)[0].astype(np.int64)
    leaf_keys = ctx.register.keys[snap.individual]
    table = np.column_stack([leaf_keys, sensitive])
    sizes = [h.n_leaves for h in ctx.search_hierarchies] + [int(sensitive.max()) + 1]
    for _ in range(args.repeat):
        t = time.perf_counter()
        utility = table_utility(table, sizes)
        seconds = time.perf_counter() - t
        tracemalloc.start()
        t = time.perf_counter()
        draft_measures(result, leaf_keys, ctx.search_hierarchies, sensitive)
        traced = time.perf_counter() - t
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(
            f"table_utility {seconds:.2f} s (utility {utility!r}); "
            f"draft_measures {traced:.2f} s under tracemalloc, traced peak {peak / 2**20:.0f} MiB"
        )


if __name__ == "__main__":
    main()
