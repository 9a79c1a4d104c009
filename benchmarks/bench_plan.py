"""``serialpub plan`` at scale: one candidate over four releases of 1,000,000 records over
the 5,000,000-person register (docs/choosing.md section 6, docs/benchmarks.md "Planning").

Set-up: the scale workspace of ``bench_release.py`` (a register that resamples UCI Adult
rows under fresh ids; ℓ = 2, constant ratio k' = 20, every occupation protected) and four
snapshots of ``--records`` register individuals each, drawn with seeds 1..4 (written once
to ``benchmarks/out/scale-<N>/plan-snapshots/``). The command runs as a publisher runs it,
in a child process: the wall time and the peak resident memory of the process tree are
measured; the plan's JSON gives the figures per release.

Usage::

    uv run python benchmarks/bench_plan.py [--register 5000000] [--records 1000000] [--rounds 4] [--protected all]
        [--partition-epsilon sound] [--split-rule widest]

Writes ``benchmarks/out/plan-<protected>.json`` (wall and CPU seconds, peak RSS, the load at
the start, whether the register came from the register cache, the plan's figures).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from machine_info import machine

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
RESULT = OUT / "plan.json"


def snapshots(n_register: int, n_records: int, rounds: int) -> Path:
    """The scale workspace's root, with ``rounds`` snapshots in ``plan-snapshots/``."""
    sys.path.insert(0, str(HERE))
    from bench_release import make_scale_workspace

    from serialpub.datasets import adult

    root = make_scale_workspace(n_register, n_records).parent.parent
    folder = root / "plan-snapshots"
    folder.mkdir(exist_ok=True)
    wanted = [folder / f"snapshot-{i:02d}.csv" for i in range(1, rounds + 1)]
    if all(f.exists() for f in wanted):
        return root
    # the register's rows carry the occupation the scale workspace gave each individual
    base = adult.load_adult()
    rows = np.random.default_rng(0).integers(0, len(base), size=n_register)  # as make_scale_workspace
    reg = base.iloc[rows][[*adult.QUASI_IDENTIFIERS, adult.SENSITIVE]].reset_index(drop=True)
    reg.insert(0, "id", np.arange(1, n_register + 1).astype(str))
    for i, path in enumerate(wanted, start=1):
        if path.exists():
            continue
        present = np.sort(np.random.default_rng(i).choice(n_register, size=n_records, replace=False))
        reg.iloc[present].to_csv(path, index=False)
    return root


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--register", type=int, default=5_000_000)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--protected", default="all", help="the candidate's protected set: all, rarest:m, or values")
    ap.add_argument(
        "--partition-epsilon",
        default="sound",
        help="sound, and/or ε of the noisy split test, comma-separated (one candidate each)",
    )
    ap.add_argument(
        "--split-rule",
        default="widest",
        help="widest and/or history (cuts placed by the published history), comma-separated (one candidate each)",
    )
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    root = snapshots(args.register, args.records, args.rounds)
    figures = OUT / "plan-figures.json"
    # the plan codes the register once per register version, then loads the cache entry
    # (serialpub.io.register_cache): a first plan and the next ones cost differently
    cached = any((root / "cache").glob("register-*.arrow"))
    exe = Path(sys.executable).with_name("serialpub")
    command = [
        str(exe), "plan", "--config", str(root), "--snapshots", str(root / "plan-snapshots"),
        "--rounds", str(args.rounds), "--l", "2", "--strategy", "constant", "--k", "20", "--protected", args.protected,
        "--partition-model", "published", "--partition-epsilon", args.partition_epsilon,
        "--split-rule", args.split_rule, "--jobs", "1", "--json", str(figures),
    ]  # fmt: skip
    load = os.getloadavg()[0]
    t = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    # CPU seconds: on a shared machine the wall time is the load's as much as the command's
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = {
        "machine": machine(),
        "register": args.register,
        "records": args.records,
        "rounds": args.rounds,
        "protected": args.protected,
        "command": " ".join(command[1:]),
        "wall_s": wall,
        "cpu_s": used.ru_utime + used.ru_stime,
        "load_at_start": load,
        "register_cached": cached,
        "peak_rss_gib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20,
        "plan": json.loads(figures.read_text()),
    }
    name = f"plan-{args.protected.replace(':', '')}-{args.partition_epsilon.replace(',', '_')}"
    name += "" if args.split_rule == "widest" else f"-{args.split_rule.replace(',', '_')}"
    name += ".json"
    RESULT.with_name(name).write_text(json.dumps(result, indent=2))
    print(
        f"one candidate, {args.rounds} releases of {args.records:,} records over {args.register:,}: "
        f"{wall:.1f} s ({result['cpu_s']:.1f} CPU s, load {load:.1f}, register "
        f"{'from the cache' if cached else 'coded'}), peak RSS {result['peak_rss_gib']:.2f} GiB"
    )
    plan = result["plan"]
    print(pd.json_normalize(plan["candidates"] if isinstance(plan, dict) else plan).T.to_string())


if __name__ == "__main__":
    main()
