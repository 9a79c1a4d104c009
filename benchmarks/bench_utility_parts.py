"""The parts of release 2's query workload and utility step timed alone, in CPU seconds, on
release 2's own arguments: two releases of 1M records over the 5M register are drafted as
``ab_release.sh`` drafts them (release 1 published, release 2 drafted), the arguments of
the query workload's draw and of the utility step are kept, and each part is run again
``--repeat`` times in the same process: ``draw_workload``, ``estimate_workload`` (uniform
and register-weighted), ``JointRelease.of``, ``joint_workload_error`` (release and
baseline), ``draft_measures``. Prints a sha256 of each part's figures, so that two commits
can be checked to give the same floats to the bit.

It calls only functions both older and newer commits have: run it with ``PYTHONPATH``
pointing at a checkout of the older commit for "before" (and the same workspace copy).

Usage::

    PYTHONPATH=<tree> python benchmarks/bench_utility_parts.py <tree> <workspace> [--repeat 3]

``<workspace>``: a folder holding hard links to ``out/scaling/N-5000000``'s register.csv,
hierarchies, values.parquet, snapshots and protected-diagnosis.txt (as ``ab_release.sh``
makes them); its first run fills its register cache.
"""

from __future__ import annotations

import argparse
import hashlib
import pickle
import resource
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _digest(value: Any) -> str:
    """sha256 of the figures of a part's result: every float array and float, in order."""
    h = hashlib.sha256()

    def add(v: Any) -> None:
        if isinstance(v, np.ndarray):
            h.update(str(v.dtype).encode() + np.ascontiguousarray(v).tobytes())
        elif isinstance(v, (float, int, str, bool, np.floating, np.integer)) or v is None:
            h.update(repr(v).encode())
        elif isinstance(v, (list, tuple)):
            for x in v:
                add(x)
        elif isinstance(v, dict):
            for k in sorted(v):
                add(k)
                add(v[k])
        elif hasattr(v, "__dataclass_fields__"):
            for k in v.__dataclass_fields__:
                if k not in ("ranges", "leaves", "hierarchies"):
                    add(getattr(v, k))
        else:
            h.update(pickle.dumps(v))

    add(value)
    return h.hexdigest()[:16]


def _time(label: str, f: Callable[[], Any], repeat: int) -> None:
    cpu, out = [], None
    for _ in range(repeat):
        c = _cpu()
        out = f()
        cpu.append(_cpu() - c)
    print(f"  {label:<28} CPU s {', '.join(f'{x:.2f}' for x in cpu)}  figures {_digest(out)}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree", type=Path)
    ap.add_argument("workspace", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--save", type=Path, help="also pickle the parts' arguments there (for profiling one part)")
    args = ap.parse_args()
    root = args.workspace
    sys.path.insert(0, str(args.tree / "benchmarks"))
    import bench_scaling as b

    from anonymizer.joint import JointRelease, joint_workload_error
    from anonymizer.queries import estimate_workload
    from serialpub.config import load_config
    from serialpub.report.utility import draft_measures
    from serialpub.workflow import drafting, measuring
    from serialpub.workflow.publisher import Publisher

    for stale in root.glob("state.sqlite*"):
        stale.unlink()
    shutil.rmtree(root / "releases", ignore_errors=True)
    for verdict in root.glob("cache/snapshot-*"):
        verdict.unlink()
    b.write_config(root, "diagnosis", "register")
    publisher = Publisher(load_config(root))
    kept: dict[str, tuple[Any, ...]] = {}
    original, original_draw = measuring._measures, drafting.snapshot_workload

    def keep_measures(*a: Any) -> Any:
        kept["measures"] = a
        return original(*a)

    def keep_draw(*a: Any) -> Any:
        kept["draw"] = a
        return original_draw(*a)

    paths = b.snapshot_pair(root, "diagnosis", args.records)
    staged = publisher.draft(paths[0])
    publisher.validate(staged.seq)
    publisher.auto_approve(staged.seq)
    publisher.finish(staged.seq)
    measuring._measures, drafting.snapshot_workload = keep_measures, keep_draw
    publisher.draft(paths[1])
    measuring._measures, drafting.snapshot_workload = original, original_draw

    cfg, inputs, register, snap, result, table, workload = kept["measures"]
    print(f"release 2 of {args.records} records; tree {args.tree}")
    # the draft's own call, its settings in one place
    _time("draw_workload", lambda: measuring.snapshot_workload(cfg, inputs, snap), args.repeat)
    hs = inputs.read_hierarchies(table)
    _time(
        "estimate_workload",
        lambda: estimate_workload(workload, table, hs, cfg.sensitive, leaf_weights=register.register_leaf_counts),
        args.repeat,
    )
    qis, sensitive = inputs.qis, inputs.sensitive
    values = [str(v) for v in workload.ranges.sensitive_values]

    def joint_of() -> Any:
        return JointRelease.of(table, qis, sensitive, [hs[q] for q in qis], register.register.keys, values, 0)

    _time("JointRelease.of", joint_of, args.repeat)
    release = joint_of()
    histogram = snap.table[sensitive].astype(str).value_counts().reindex(values, fill_value=0).to_numpy()
    _time("joint_workload_error", lambda: joint_workload_error(workload, release, histogram), args.repeat)
    leaf_keys = register.register.keys[snap.individual]
    hier, codes = register.search_hierarchies(), snap.value_order[0]
    _time("draft_measures", lambda: draft_measures(result, leaf_keys, hier, codes), args.repeat)
    if args.save:
        parts = {
            "draw": (snap.table[[*inputs.qis, cfg.sensitive]], inputs.hierarchies, cfg.sensitive, cfg.query_seed),
            "estimate": (workload, table, hs, cfg.sensitive, register.register_leaf_counts),
            "joint": (table, qis, sensitive, [hs[q] for q in qis], register.register.keys, values, histogram),
            "measures": (result, leaf_keys, hier, codes),
        }
        args.save.write_bytes(pickle.dumps(parts, protocol=5))
    c = _cpu()
    measuring._measures(*kept["measures"])
    print(f"  {'the whole step (2 threads)':<28} CPU s {_cpu() - c:.2f}")


if __name__ == "__main__":
    t = time.perf_counter()
    main()
    print(f"wall {time.perf_counter() - t:.0f} s")
