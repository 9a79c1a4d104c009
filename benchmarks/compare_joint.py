"""The register-joint estimator of an older revision against this checkout's, on one
published release: 5,000 range-count queries (qd 3, selectivity 0.05, seed 0, drawn on the
release's snapshot), the two versions alternated in one process, and their answers
compared (the bounds must be identical; the estimates may differ in the last bits, as
the sums run in another order) (docs/benchmarks.md, "Planning").

The older ``anonymizer/joint.py`` is read with ``git show REV:anonymizer/joint.py`` and
loaded beside this one; both are given the same resolved release (their fields are in the
same order), so only :func:`joint_answers` is timed.

Usage::

    uv run python benchmarks/compare_joint.py a2c9c1e WORKSPACE [--release 1] [--repeat 3]

WORKSPACE is a workspace or public copy with the register (e.g. the localized variant of
``bench_data_user.py``: ``benchmarks/out/scale-5000000-localized``, or a demo workspace).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def older_joint(rev: str) -> ModuleType:
    """``anonymizer/joint.py`` as it stood at ``rev``, loaded as module ``joint_<rev>``."""
    text = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:anonymizer/joint.py"], check=True, capture_output=True, text=True
    ).stdout
    text = text.replace("RegisterCombos", "RegisterCells")  # the class's earlier name; the same class
    path = Path(tempfile.mkdtemp()) / "joint_before.py"
    path.write_text(text)
    name = f"joint_{rev}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", help="the older revision (a commit)")
    ap.add_argument("workspace", type=Path)
    ap.add_argument("--release", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import anonymizer.joint as now
    from anonymizer.queries import draw_workload
    from anonymizer.workload import QueryRanges
    from serialpub.analysis.reader import open_releases
    from serialpub.io.inputs import read_csv

    before = older_joint(args.before)
    release = open_releases(args.workspace).release(args.release)
    snapshot = sorted((args.workspace / "snapshots").glob("*.csv"))[args.release - 1]
    raw = read_csv(snapshot, "snapshot")
    w = draw_workload(
        raw[[*release.qis, release.sensitive]],
        {q: release.hierarchies[q] for q in release.qis},
        release.sensitive,
        n_queries=5000,
        qd=3,
        selectivity=0.05,
        seed=0,
    )
    ranges = QueryRanges(w.ranges.qi, tuple(str(v) for v in w.ranges.sensitive_values), w.ranges.sensitive)
    j = release.joint()
    old = before.JointRelease(
        j.qis,
        j.hierarchies,
        j.sensitive_values,
        j.group_nodes,
        j.counts,
        j.cell_leaves,
        j.cell_counts,
        j.group_of_cell,
        j.suppressed,
    )
    print(f"release {args.release}: {j.group_nodes.shape[0]:,} groups, {j.cell_counts.size:,} register cells")
    answers = {}
    for _ in range(args.repeat):
        for label, module, resolved in ((args.before, before, old), ("now", now, j)):
            t = time.perf_counter()
            answers[label] = module.joint_answers(resolved, ranges)
            print(f"  {label:>10}: {time.perf_counter() - t:.2f} s")
    a, b = answers[args.before], answers["now"]
    bounds = np.array_equal(a.lower, b.lower) and np.array_equal(a.upper, b.upper)
    rel = {k: float(np.max(np.abs(getattr(a, k) - getattr(b, k)) / np.maximum(np.abs(getattr(a, k)), 1e-300)))
           for k in ("estimate", "uniform")}  # fmt: skip
    print(
        f"bounds identical: {bounds}; largest relative difference: estimate {rel['estimate']:.2g}, "
        f"uniform {rel['uniform']:.2g}"
    )


if __name__ == "__main__":
    main()
