"""Benchmark of ``serialpub audit``: the independent recomputation of every breach
probability from the register, the hierarchies and the published releases.

Usage (after ``bench_release.py demo`` and ``bench_release.py scale`` made the workspaces)::

    uv run python benchmarks/bench_audit.py benchmarks/out/demo-ws benchmarks/out/scale-5000000
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

from serialpub.analysis.audit import audit_workspace


def main() -> None:
    for ws in map(Path, sys.argv[1:]):
        t = time.perf_counter()
        result = audit_workspace(ws)
        print(
            f"{ws}: {len(result.releases)} release(s), max p {result.max_p:.6f}, "
            f"{result.verdict}, {time.perf_counter() - t:.2f} s, "
            f"peak RSS so far {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB"
        )


if __name__ == "__main__":
    main()
