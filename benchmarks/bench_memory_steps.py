"""Peak resident memory per step of one release in a fresh process:
a thread samples /proc/self/statm every fiftieth of a second, and each step (serialpub.workflow.progress)
gets the highest sample inside its time. The register cache is emptied first (a new register
version) unless ``--warm``. Run it in a process that did not just build the data: a process
keeps memory it freed, so build with ``bench_scaling.py`` or ``bench_release_steps.py`` first.
With ``--next`` the first release is published untraced and the next one (the scaling
study's second snapshot, in the same process) is traced: the steady state of
``ab_release.sh``, with what the first release left in memory.

Usage::

    uv run python benchmarks/bench_memory_steps.py [--register 5000000] [--warm] [--next]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import threading
import time
from pathlib import Path

from bench_scaling import new_register_version, register_root, snapshot_pair, write_config

from serialpub.config import load_config
from serialpub.workflow import progress
from serialpub.workflow.publisher import Publisher


def _rss_gib() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize() / 2**30


class Steps:
    """Start and end of every step, by thread."""

    def __init__(self, t0: float) -> None:
        self.t0, self.open, self.rows = t0, {}, []  # type: ignore[var-annotated]

    def started(self, name: str) -> None:
        self.open[(threading.current_thread().name, name)] = time.perf_counter() - self.t0

    def ended(self, name: str, seconds: float, ok: bool) -> None:
        thread = threading.current_thread().name
        start = self.open.pop((thread, name))
        self.rows.append((start, start + seconds, thread, name))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--register", type=int, default=5_000_000)
    ap.add_argument("--warm", action="store_true")
    ap.add_argument("--next", action="store_true", help="trace the second release, not the first")
    args = ap.parse_args()
    root = register_root(args.register)
    snapshots = snapshot_pair(root, "diagnosis", 1_000_000)
    for stale in root.glob("state.sqlite*"):
        stale.unlink()
    shutil.rmtree(root / "releases", ignore_errors=True)
    if not args.warm:
        new_register_version(root)
    for verdict in root.glob("cache/snapshot-*"):
        verdict.unlink()
    write_config(root, "diagnosis", "register")
    publisher = Publisher(load_config(root)) if args.next else None
    if publisher is not None:
        publisher.publish(snapshots[0], period="0001")
        print(f"after release 1: {_rss_gib():.2f} GiB resident")
    samples: list[tuple[float, float]] = []
    done = threading.Event()
    t0 = time.perf_counter()

    def sample() -> None:
        while not done.wait(0.02):
            samples.append((time.perf_counter() - t0, _rss_gib()))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    steps = Steps(t0)
    with progress.listening(steps):
        if publisher is None:  # a fresh process: reading the register is traced too
            publisher = Publisher(load_config(root))
        publisher.publish(*((snapshots[1], "0002") if args.next else (snapshots[0], "0001")))
    done.set()
    sampler.join()
    print(f"release {2 if args.next else 1}: {time.perf_counter() - t0:.1f} s")
    for start, end, thread, name in sorted(steps.rows):
        inside = [rss for t, rss in samples if start <= t <= end]
        peak = f"{max(inside):.2f} GiB" if inside else "-"
        print(f"  {start:7.2f} {end:7.2f}  {thread[:22]:22} {name:45} max {peak}")
    at, peak = max(samples, key=lambda x: x[1])
    print(f"peak {peak:.2f} GiB at {at:.2f} s")


if __name__ == "__main__":
    main()
