"""The anonymizing step of one large release, alone and repeated: exactly the call
``serialpub release`` makes (:func:`anonymizer.release.anonymize_history` with the
workspace's register, snapshot, history, parameters and search hierarchies), timed
``--repeat`` times in one process so that two versions of the code can be compared without
the rest of the release's noise.

Set-up: the scaling study's register (``bench_scaling.py`` builds ``out/scaling/N-<register>``)
and its first diagnosis snapshot of ``--records`` records, on a fresh state (release 1's
history; the workspace's state and releases are removed first). Prints the groups and the largest breach
probability (equal across versions of the code that decide the same) and the seconds.

Usage::

    .venv/bin/python benchmarks/bench_anonymize.py [--register 5000000] [--records 1000000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_scaling import checked_first_snapshot

from anonymizer.release import SnapshotCodes, anonymize_history
from anonymizer.settings import Dilution
from serialpub.workflow.anonymizing import record_sets


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--register", type=int, default=5_000_000)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    ctx, snap = checked_first_snapshot(args.register, args.records)
    cfg = ctx.ws.config
    history = ctx.statistics.load(
        ctx.store.latest_statistics(cfg.dataset), np.full(len(ctx.register.ids), float(cfg.ell))
    )
    codes = SnapshotCodes(snap.individual, record_sets(ctx.protected, snap), len(ctx.protected))
    best = float("inf")
    for _ in range(args.repeat):
        t = time.perf_counter()
        result = anonymize_history(
            ctx.register.keys,
            codes,
            history,
            ctx.params,
            ctx.search_hierarchies,
            cfg.dilution is Dilution.PRESENCE,
            budget=int(np.floor(cfg.suppression_budget * len(snap.individual))),
            seed=1,
        )
        seconds = time.perf_counter() - t
        best = min(best, seconds)
        print(f"{result.group_candidates.size} groups, largest breach {result.max_breach!r}: {seconds:.2f} s")
    print(f"fastest of {args.repeat}: {best:.2f} s")


if __name__ == "__main__":
    main()
