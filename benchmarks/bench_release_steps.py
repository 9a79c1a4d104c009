"""Per-step seconds of consecutive releases in one process: the steps that
``serialpub release`` logs (:mod:`serialpub.workflow.progress`), heard by a listener, plus the
process's peak resident memory, and the peak so far and the resident memory when each step ended.
``--timeline`` also prints when each step started and ended and on which thread (what runs
beside what, and which steps make the critical path).

Set-up: the scaling study's register (``bench_scaling.py`` builds
``out/scaling/N-<register>``) and its diagnosis snapshots of ``--records`` records. The
workspace's state, releases and register cache are reset first unless ``--keep-cache``
keeps the register cache (a fresh process whose register was coded and checked before);
snapshot verdicts are always removed (a new period's snapshot never has one).

Usage::

    uv run python benchmarks/bench_release_steps.py [--register 5000000] [--records 1000000] [--keep-cache] [--timeline]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import threading
import time
from collections import defaultdict
from pathlib import Path

from bench_scaling import new_register_version, register_root, snapshot_pair, write_config
from machine_info import machine

from serialpub.config import load_config
from serialpub.workflow import progress
from serialpub.workflow.publisher import Publisher


def _peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _cpu_seconds() -> float:
    """User plus system CPU seconds of every thread of this process so far: with two cores,
    a release cannot take less wall time than half its CPU seconds."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _rss_gib() -> float:
    """The resident memory now (Linux: /proc/self/statm's second field, in pages)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except OSError:
        return float("nan")
    return pages * resource.getpagesize() / 2**30


class Steps:
    """Seconds per step, and the process's peak and current resident memory when each step
    ended (the step during which the peak grew holds it)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.peak: dict[str, float] = {}
        self.rss: dict[str, float] = {}
        self.t0 = time.perf_counter()
        self.began: dict[tuple[str, str], float] = {}
        self.timeline: list[tuple[float, float, str, str]] = []  # start, end, thread, step

    def started(self, name: str) -> None:
        self.began[(threading.current_thread().name, name)] = time.perf_counter() - self.t0

    def ended(self, name: str, seconds: float, ok: bool) -> None:
        self.seconds[name] += seconds
        self.peak[name] = round(_peak_gib(), 2)
        self.rss[name] = round(_rss_gib(), 2)
        thread = threading.current_thread().name
        end = time.perf_counter() - self.t0
        self.timeline.append((self.began.pop((thread, name), end - seconds), end, thread, name))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--register", type=int, default=5_000_000)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--keep-cache", action="store_true")
    ap.add_argument("--timeline", action="store_true", help="print each step's start, end and thread")
    args = ap.parse_args()
    root = register_root(args.register)
    snapshots = snapshot_pair(root, "diagnosis", args.records)
    for stale in root.glob("state.sqlite*"):
        stale.unlink()
    shutil.rmtree(root / "releases", ignore_errors=True)
    if not args.keep_cache:
        new_register_version(root)
    for verdict in root.glob("cache/snapshot-*"):  # a new period's snapshot has none
        verdict.unlink()
    write_config(root, "diagnosis", "register")
    out: dict[str, object] = {"machine": machine(), "register": args.register, "records": args.records,
                              "cache_kept": args.keep_cache, "releases": []}  # fmt: skip
    t0 = time.perf_counter()
    publisher = Publisher(load_config(root))
    for i, path in enumerate(snapshots, start=1):
        steps = Steps()
        t, cpu = time.perf_counter(), _cpu_seconds()
        with progress.listening(steps):
            publisher.publish(path, period=f"{i:04d}")
        total, cpu = time.perf_counter() - t, _cpu_seconds() - cpu
        out["releases"].append(
            {
                "release": i,
                "seconds": round(total, 2),  # type: ignore[attr-defined]
                "cpu_seconds": round(cpu, 2),
                "steps": {k: round(v, 2) for k, v in steps.seconds.items()},
                "peak_gib_after": steps.peak,
                "rss_gib_after": steps.rss,
            }
        )
        start = f" (process start {time.perf_counter() - t0:.1f} s)" if i == 1 else ""
        print(f"release {i}: {total:.1f} s, {cpu:.1f} CPU s{start}")
        for name, s in steps.seconds.items():
            print(f"  {name:<45} {s:6.2f} s   peak so far {steps.peak[name]:.2f} GiB, now {steps.rss[name]:.2f} GiB")
        if args.timeline:
            for start, end, thread, name in sorted(steps.timeline):
                print(f"    {start:6.2f} -> {end:6.2f} s  {thread[:24]:<24} {name}")
    out["peak_rss_gib"] = round(_peak_gib(), 2)
    print(f"peak RSS {out['peak_rss_gib']} GiB")
    target = Path(__file__).resolve().parent / "out" / "release_steps.json"
    target.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
