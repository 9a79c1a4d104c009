"""Sums the lines written by the ``suite_timing`` plugin: per worker (busy, CPU, idle end),
per module (wall, CPU, CPU / wall, on which worker), and the longest setups (fixtures).

    .venv/bin/python tests/tools/suite_timing_report.py X.jsonl [--top 25]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.path.read_text().splitlines() if line.strip()]
    phases = [r for r in rows if "when" in r]
    events = [r for r in rows if "event" in r]

    begin = min(r["time"] for r in events if r["event"] == "start")
    end = max(r["time"] for r in events if r["event"] == "finish")
    print(f"run: {end - begin:7.1f} s wall from the first worker's start to the last worker's finish\n")

    # run queue: the worker's own threads runnable but not running (the machine's load)
    print(
        f"{'worker':8} {'tests':>6} {'busy s':>8} {'cpu s':>8} {'queue s':>8} {'cpu/busy':>8}"
        f" {'ends at':>8} {'idle end':>8}"
    )
    for worker in sorted({r["worker"] for r in phases}):
        mine = [r for r in phases if r["worker"] == worker]
        busy = sum(r["wall"] for r in mine)
        cpu = sum(r["cpu"] for r in mine)
        queue = sum(r.get("runqueue", 0.0) for r in mine)
        last = max(r["start"] + r["wall"] for r in mine)
        tests = len({r["nodeid"] for r in mine})
        print(
            f"{worker:8} {tests:6d} {busy:8.1f} {cpu:8.1f} {queue:8.1f} {cpu / busy if busy else 0:8.2f}"
            f" {last - begin:8.1f} {end - last:8.1f}"
        )

    modules: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 1e18, 0.0])
    for r in phases:
        m = modules[(r["module"], r["worker"])]
        m[0] += r["wall"]
        m[1] += r["cpu"]
        m[2] += 1 if r["when"] == "call" else 0
        m[3] = min(m[3], r["start"])
        m[4] = max(m[4], r["start"] + r["wall"])
    print(f"\n{'module':40} {'worker':6} {'tests':>5} {'wall s':>7} {'cpu s':>7} {'cpu/wall':>8} {'from':>6} {'to':>6}")
    for (module, worker), (wall, cpu, n, t0, t1) in sorted(modules.items(), key=lambda kv: -kv[1][0])[: args.top]:
        print(
            f"{module:40} {worker:6} {int(n):5d} {wall:7.1f} {cpu:7.1f} {cpu / wall if wall else 0:8.2f}"
            f" {t0 - begin:6.0f} {t1 - begin:6.0f}"
        )
    total_wall = sum(m[0] for m in modules.values())
    total_cpu = sum(m[1] for m in modules.values())
    print(f"{'all modules':40} {'':6} {'':5} {total_wall:7.1f} {total_cpu:7.1f} {total_cpu / total_wall:8.2f}")

    setups = sorted((r for r in phases if r["when"] == "setup"), key=lambda r: -r["wall"])[: args.top]
    print(f"\n{'longest setups (fixtures built)':70} {'wall s':>7} {'cpu s':>7}")
    for r in setups:
        print(f"{r['nodeid'][:70]:70} {r['wall']:7.1f} {r['cpu']:7.1f}")
    setup_wall = sum(r["wall"] for r in phases if r["when"] == "setup")
    setup_cpu = sum(r["cpu"] for r in phases if r["when"] == "setup")
    print(f"{'all setups':70} {setup_wall:7.1f} {setup_cpu:7.1f}")


if __name__ == "__main__":
    main()
