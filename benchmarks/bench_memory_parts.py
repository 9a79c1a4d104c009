"""Resident memory inside the anonymizer's parts during one release in a fresh process:
``bench_memory_steps.py``'s release (resident memory sampled every
fiftieth of a second) with the anonymizer's functions wrapped, printing for each call its start and end,
the resident memory when it started, the highest sample inside it, and when it ended.

Usage::

    uv run python benchmarks/bench_memory_parts.py [--register 50000000] [--warm]
"""

from __future__ import annotations

import argparse
import functools
import sys
import threading
import time
from typing import Any

import bench_memory_steps

import anonymizer.release as release

T0 = time.perf_counter()
SAMPLES: list[tuple[float, float]] = []
CALLS: list[tuple[str, float, float, float, float, float]] = []


def _wrap(module: Any, name: str) -> None:
    real = getattr(module, name)

    @functools.wraps(real)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start, at_start = time.perf_counter() - T0, bench_memory_steps._rss_gib()
        try:
            return real(*args, **kwargs)
        finally:
            end = time.perf_counter() - T0
            inside = [rss for t, rss in SAMPLES if start <= t <= end]
            CALLS.append((name, start, end, at_start, max(inside, default=at_start), bench_memory_steps._rss_gib()))

    setattr(module, name, timed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--register", type=int, default=5_000_000)
    ap.add_argument("--warm", action="store_true")
    args = ap.parse_args()
    # names looked up at call time: release's own functions, and the search through its module
    for name in ("class_targets", "factorize_rows", "advance_history", "_choose_published"):
        _wrap(release, name)
    _wrap(release.topdown, "partition")

    def sample() -> None:
        while True:
            time.sleep(0.02)
            SAMPLES.append((time.perf_counter() - T0, bench_memory_steps._rss_gib()))

    threading.Thread(target=sample, daemon=True).start()
    sys.argv = [sys.argv[0], "--register", str(args.register), *(["--warm"] if args.warm else [])]
    bench_memory_steps.main()
    print(f"{'call':<22} {'start':>7} {'end':>7}  GiB at start, highest inside, at end")
    for name, start, end, at_start, peak, at_end in sorted(CALLS, key=lambda c: c[1]):
        print(f"{name:<22} {start:7.2f} {end:7.2f}  {at_start:.2f}, {peak:.2f}, {at_end:.2f}")


if __name__ == "__main__":
    main()
