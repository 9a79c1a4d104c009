"""One run of ``ab_release.sh``: two releases of 1M records over the 5M register in one
process, with the checkout on ``PYTHONPATH`` (any commit: it reads only what every commit
since the scaling study has, the tree's own ``bench_scaling.py`` helpers, ``Publisher`` and
``serialpub.workflow.progress.listening``), and one JSON line: release 2's seconds per logged
step, its draft and validation, both releases' wall and CPU seconds, the peak resident memory, the
sha256 of both releases' ``data.parquet``, and of their ``report.json`` less its nonce.

Usage (``ab_release.sh`` calls it)::

    PYTHONPATH=<tree> python benchmarks/ab_steps.py <tree> <workspace root> [records]
"""

from __future__ import annotations

import hashlib
import json
import resource
import shutil
import sys
import time
from collections import defaultdict
from pathlib import Path


class _Steps:
    """Seconds per logged step (a step that runs twice, or on two threads, adds up)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def started(self, name: str) -> None:
        pass

    def ended(self, name: str, seconds: float, ok: bool) -> None:
        self.seconds[name] += seconds


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    tree, root = Path(sys.argv[1]), Path(sys.argv[2])
    records = int(sys.argv[3]) if len(sys.argv) > 3 else 1_000_000
    sys.path.insert(0, str(tree / "benchmarks"))
    import bench_scaling as b  # the tree's own: its configuration API is the tree's

    from serialpub.config import load_config
    from serialpub.workflow import progress
    from serialpub.workflow.publisher import Publisher

    for stale in root.glob("state.sqlite*"):
        stale.unlink()
    shutil.rmtree(root / "releases", ignore_errors=True)
    for verdict in root.glob("cache/snapshot-*"):  # a new period's snapshot has none
        verdict.unlink()
    b.write_config(root, "diagnosis", "register")
    t0 = time.perf_counter()
    publisher = Publisher(load_config(root))
    out: dict[str, object] = {"tree": str(tree), "load_register_s": time.perf_counter() - t0}
    for i, path in enumerate(b.snapshot_pair(root, "diagnosis", records), start=1):
        steps = _Steps()
        t, cpu = time.perf_counter(), _cpu_seconds()
        with progress.listening(steps):
            staged = publisher.draft(path)
            t_draft = time.perf_counter() - t
            publisher.validate(staged.seq)
            t_validate = time.perf_counter() - t - t_draft
            publisher.auto_approve(staged.seq)
            publisher.finish(staged.seq)
        out[f"release{i}_s"] = time.perf_counter() - t
        out[f"release{i}_cpu_s"] = _cpu_seconds() - cpu  # every thread's: steadier than wall time under load
        if i == 2:
            out["steps"] = {"draft": t_draft, "validate+report": t_validate, **steps.seconds}
    out["peak_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB
    out["data_sha256"] = [
        hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.glob("releases/*/release-*/data.parquet"))
    ]
    # the report's figures, less its random nonce (an older commit may write another format)
    out["report_sha256"] = [
        hashlib.sha256(json.dumps({k: v for k, v in json.loads(p.read_text()).items() if k != "nonce"},
                                  sort_keys=True).encode()).hexdigest()
        for p in sorted(root.glob("releases/*/release-*/report.json"))
    ]  # fmt: skip
    print(json.dumps(out))


if __name__ == "__main__":
    main()
