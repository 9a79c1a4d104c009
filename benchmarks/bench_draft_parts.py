"""Parts of drafting a release timed alone (docs/benchmarks.md):
coding the snapshot against the register together with the snapshot suite's lookup of the
same ids, the published table, the state's group rows and writing the statistics file.
They call functions both before and after the pass have: run it with ``PYTHONPATH``
pointing at a worktree of the older commit for "before". Two parts of the eighth pass are
timed against their former code in the same run: the snapshot's sensitive texts per record
and per distinct value (``inputs.as_text``), and the disjointness suite's check for a "cut"
column on interval rows and on int64 keys (``regions._is_cut``).

Set-up: the scaling study's register (``bench_scaling.py`` builds
``out/scaling/N-<register>``) and its first diagnosis snapshot of ``--records`` records,
anonymized as release 1.

Usage::

    uv run python benchmarks/bench_draft_parts.py [--register 5000000] [--records 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

import numpy as np
from bench_scaling import checked_first_snapshot, print_runs, register_root, snapshot_pair
from machine_info import machine

from anonymizer import arrays, regions
from anonymizer.release import SnapshotCodes, anonymize_history
from serialpub.io import inputs
from serialpub.io.inputs import read_csv, snapshot_from_table
from serialpub.workflow import release_record
from serialpub.workflow.anonymizing import record_sets
from state.store import table_to_bytes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--register", type=int, default=5_000_000)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(machine())
    ctx, snap = checked_first_snapshot(args.register, args.records)
    cfg = ctx.ws.config
    path = snapshot_pair(register_root(args.register), "diagnosis", args.records)[0]
    table = read_csv(path, "snapshot")
    register = ctx.register

    def coding() -> None:
        if hasattr(arrays, "_FIND_KEPT"):  # a new snapshot: nothing looked up yet
            arrays._FIND_KEPT = None
        snapshot_from_table(
            table, path, cfg.id_column, ctx.qis, cfg.sensitive, register, ctx.hierarchies, ctx.sensitive_domain
        )
        lookup = register.id_lookup
        assert lookup is not None
        lookup.find(register.ids, table[cfg.id_column])  # the snapshot suite's ids-in-register expectation

    print(f"{args.records:,} records over a register of {args.register:,}")
    print_runs("coding the snapshot + the suite's id lookup", coding, args.repeat)
    column = table[cfg.sensitive]
    print_runs("sensitive texts, per record (to_numpy)", lambda: column.to_numpy(dtype=str), args.repeat)
    if hasattr(inputs, "as_text"):
        print_runs("sensitive texts, per distinct value (as_text)", lambda: inputs.as_text(column), args.repeat)
    history = ctx.statistics.load(None, np.full(len(register.ids), float(cfg.ell)))
    codes = SnapshotCodes(snap.individual, record_sets(ctx.protected, snap), len(ctx.protected))
    result = anonymize_history(register.keys, codes, history, ctx.params, ctx.search_hierarchies, False)
    # a new Snapshot each time: what a release computes once per snapshot is counted once
    print_runs("published table", lambda: ctx.published_table(dataclasses.replace(snap), result), args.repeat)

    def stored_rows() -> list[Any]:  # before this pass, GroupRow objects the stage dumped
        return [r if isinstance(r, dict) else r.model_dump() for r in release_record.release_group_rows(
            ctx.search_hierarchies, result.group_nodes, result.group_candidates, result.group_records,
            result.group_counts, ctx.protected)]  # fmt: skip

    print_runs("group rows as the state stores them", stored_rows, args.repeat)
    spans = [h.index for h in ctx.search_hierarchies]
    bounds = [(sp.lo[result.group_nodes[:, a]], sp.hi[result.group_nodes[:, a]]) for a, sp in enumerate(spans)]

    def cut_on_rows() -> list[bool]:  # regions._is_cut before the eighth pass
        out = []
        for lo, hi in bounds:
            pairs = np.unique(np.stack([lo, hi], axis=1), axis=0)
            out.append(bool(np.all(pairs[1:, 0] > pairs[:-1, 1])))
        return out

    print(f"  cut check of {result.group_nodes.shape[0]:,} groups on every QI")
    print_runs("cut columns, on interval rows (np.unique axis=0)", cut_on_rows, args.repeat)
    print_runs(
        "cut columns, on int64 keys (regions._is_cut)",
        lambda: [regions._is_cut(lo, hi) for lo, hi in bounds],
        args.repeat,
    )
    assert cut_on_rows() == [regions._is_cut(lo, hi) for lo, hi in bounds]
    members, classes = ctx.statistics.tables(result.history)
    print_runs(
        f"statistics file written ({members.num_rows:,} members)",
        lambda: (table_to_bytes(members), table_to_bytes(classes)),
        args.repeat,
    )
    print(f"  statistics file: {len(table_to_bytes(members)) + len(table_to_bytes(classes)):,} bytes")


if __name__ == "__main__":
    main()
