"""A register that changes between releases: time and storage at national scale.

Set-up: the 5,000,000-person register of ``bench_scaling.py`` (Adult rows resampled) and
its ``diagnosis`` scenario with 1,000,000 records per release (register dilution, ℓ = 2,
k' = 20). Release 1 is published in a fresh process; release 2 in another fresh process
(what one ``serialpub release`` per period pays), either with the same register
(*fixed*) or with a register in which ``--change`` of the individuals changed (*changing*):
a third leave, a third join (QIs of a random individual, new ids), a third are a year
older. Release 2's snapshot is the same draw in both cases, minus the leavers and with the
changed ages.

Reported: the wall time of release 2's process from reading the register to the
published release (median of ``--runs``), the kept register version's size
(``registers/<sha256>.parquet``) in bytes per changed individual, and its share of the
register file.

Usage::

    uv run python benchmarks/bench_changing_register.py                  # 5M register, 1M records
    uv run python benchmarks/bench_changing_register.py --register 500000 --records 100000

Writes ``benchmarks/out/changing_register.json``.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from bench_scaling import OUT, register_root, snapshot_pair, write_config
from machine_info import machine

RESULT = OUT / "changing_register.json"


def changed_register(
    root: Path, original: Path, fraction: float, snapshot: Path, seed: int = 0
) -> tuple[Path, Path, int]:
    """``register-changed-<f>.csv`` and the matching second snapshot; returns both and the
    number of changed individuals (made once per fraction)."""
    reg_path = root / f"register-changed-{fraction:g}.csv"
    snap_path = snapshot.parent / f"changed-{fraction:g}" / "snapshot-2.csv"  # period 2, as the original
    meta = root / f"register-changed-{fraction:g}.json"
    if reg_path.exists() and snap_path.exists() and meta.exists():
        return reg_path, snap_path, int(json.loads(meta.read_text())["changed"])
    reg = pd.read_csv(original, dtype=str, keep_default_na=False)
    rng = np.random.default_rng(seed)
    n = len(reg)
    k = round(fraction * n / 3)
    picked = rng.choice(n, size=3 * k, replace=False)
    leave, older = picked[:k], picked[k : 2 * k]
    reg.loc[older, "age"] = np.minimum(reg.loc[older, "age"].astype(int) + 1, 90).astype(str)
    joiners = reg.iloc[rng.integers(0, n, size=k)].copy()
    joiners["id"] = [f"x{i}" for i in range(k)]
    left_ids = set(reg["id"].iloc[leave])
    reg = pd.concat([reg.drop(index=leave), joiners], ignore_index=True)
    reg.to_csv(reg_path, index=False)
    snap = pd.read_csv(snapshot, dtype=str, keep_default_na=False)
    snap = snap[~snap["id"].isin(left_ids)]
    snap["age"] = reg.set_index("id")["age"].reindex(snap["id"]).to_numpy()
    snap_path.parent.mkdir(exist_ok=True)
    snap.to_csv(snap_path, index=False)
    meta.write_text(json.dumps({"changed": 3 * k}))
    return reg_path, snap_path, 3 * k


def one_release(root: Path, snapshot: Path) -> dict[str, float]:
    """Publish the next release in this process; its timings."""
    from serialpub.config import load_config
    from serialpub.workflow.publisher import Publisher

    t0 = time.perf_counter()
    publisher = Publisher(load_config(root))
    outcome = publisher.publish(snapshot)
    return {
        "total_s": time.perf_counter() - t0,
        "anonymize_s": outcome.seconds_anonymize,
        "state_s": outcome.seconds_state,
        "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    }


def release_in_process(root: Path, snapshot: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--_one", str(root), str(snapshot)], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"release failed:\n{out.stdout}\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(root: Path, original: Path, snapshots: list[Path], second_register: Path, second: Path) -> dict[str, float]:
    """Release 1 with the original register, release 2 with ``second_register``."""
    for stale in root.glob("state.sqlite*"):
        stale.unlink()
    for folder in ("releases", "registers", "hierarchy-versions"):
        shutil.rmtree(root / folder, ignore_errors=True)
    shutil.copyfile(original, root / "register.csv")
    release_in_process(root, snapshots[0])
    shutil.copyfile(second_register, root / "register.csv")
    return release_in_process(root, second)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--register", type=int, default=5_000_000)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--change", type=float, default=0.01, help="fraction of the register changed before release 2")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--_one", nargs=2, metavar=("ROOT", "SNAPSHOT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._one:
        print(json.dumps(one_release(Path(args._one[0]), Path(args._one[1]))))
        return
    root = register_root(args.register)
    snapshots = snapshot_pair(root, "diagnosis", args.records)
    write_config(root, "diagnosis", "register")
    original = root / "register-original.csv"
    if not original.exists():
        shutil.copyfile(root / "register.csv", original)
    changed_path, changed_snap, n_changed = changed_register(root, original, args.change, snapshots[1])
    fixed, changing = [], []
    for i in range(args.runs):  # interleaved, so a busy machine weighs on both alike
        fixed.append(run(root, original, snapshots, original, snapshots[1]))
        changing.append(run(root, original, snapshots, changed_path, changed_snap))
        print(f"run {i + 1}: fixed {fixed[-1]['total_s']:.1f} s, changing {changing[-1]['total_s']:.1f} s", flush=True)
    shutil.copyfile(original, root / "register.csv")
    versions = sorted((root / "registers").glob("*.parquet"), key=lambda p: p.stat().st_mtime)
    delta_bytes = versions[-1].stat().st_size
    f_med = statistics.median(r["total_s"] for r in fixed)
    c_med = statistics.median(r["total_s"] for r in changing)
    result = {
        "machine": machine(),
        "register": args.register,
        "records": args.records,
        "change": args.change,
        "changed_individuals": n_changed,
        "fixed_release2_s": [r["total_s"] for r in fixed],
        "changing_release2_s": [r["total_s"] for r in changing],
        "fixed_median_s": f_med,
        "changing_median_s": c_med,
        "slowdown": c_med / f_med - 1,
        "peak_rss_gib": {
            "fixed": max(r["peak_rss_gib"] for r in fixed),
            "changing": max(r["peak_rss_gib"] for r in changing),
        },
        "first_version_bytes": versions[0].stat().st_size,
        "changed_version_bytes": delta_bytes,
        "bytes_per_changed_individual": delta_bytes / n_changed,
        "register_file_bytes": original.stat().st_size,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=2))


if __name__ == "__main__":
    main()
