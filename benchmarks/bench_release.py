"""Benchmark of publishing releases (issue: anonymizer and the main job).

Two measurements, each printed as a table and written as JSON to benchmarks/out/:

* ``demo``: the 20-release Adult demo series (register 45,222); per release the time to
  anonymize and compute the state update, the time to load and commit the state, and
  the whole publication (including the 5,000-query utility measure and file writing).
  Reported: the median of "anonymize + state" over the 20 releases.
* ``scale``: one release of R records over a register of N individuals made by resampling
  Adult rows under fresh ids (R = 100k, 300k, 1M by default; N = 5M). Each size runs in
  a fresh subprocess so the peak resident memory (ru_maxrss) is its own.

Usage::

    uv run python benchmarks/bench_release.py demo
    uv run python benchmarks/bench_release.py scale [--register 5000000] [--records 100000 300000 1000000]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from machine_info import machine

OUT = Path(__file__).resolve().parent / "out"


def run_demo() -> dict[str, object]:
    from serialpub import demo
    from serialpub.workflow.publisher import Publisher

    ws = demo.create_workspace(OUT / "demo-ws")
    publisher = Publisher(ws)
    rows = []
    for snap in demo.snapshots(ws):
        o = publisher.publish(snap)
        rows.append(
            {
                "release": o.seq,
                "records": o.records,
                "anonymize_s": o.seconds_anonymize,
                "state_s": o.seconds_state,
                "total_s": o.seconds,
            }
        )
    core = [r["anonymize_s"] + r["state_s"] for r in rows]  # type: ignore[operator]
    return {
        "rows": rows,
        "median_anonymize_plus_state_s": statistics.median(core),
        "median_total_s": statistics.median(r["total_s"] for r in rows),  # type: ignore[misc]
    }


def make_scale_workspace(n_register: int, n_records: int, seed: int = 0) -> Path:
    """A workspace whose register resamples Adult rows under fresh ids, and one snapshot."""
    from serialpub.config import CONFIG_NAME, Config, SignOffSettings
    from serialpub.config_render import render_config
    from serialpub.datasets import adult

    root = OUT / f"scale-{n_register}"
    snapshot = root / "snapshots" / f"snapshot-{n_records}.csv"
    if snapshot.exists():
        return snapshot
    root.mkdir(parents=True, exist_ok=True)
    base = adult.load_adult()
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, len(base), size=n_register)
    reg = base.iloc[rows][[*adult.QUASI_IDENTIFIERS, adult.SENSITIVE]].reset_index(drop=True)
    reg.insert(0, "id", np.arange(1, n_register + 1).astype(str))
    if not (root / "register.csv").exists():
        reg[["id", *adult.QUASI_IDENTIFIERS]].to_csv(root / "register.csv", index=False)
    present = np.sort(np.random.default_rng(seed + n_records).choice(n_register, size=n_records, replace=False))
    (root / "snapshots").mkdir(exist_ok=True)
    reg.iloc[present][["id", *adult.QUASI_IDENTIFIERS, adult.SENSITIVE]].to_csv(snapshot, index=False)
    (root / "hierarchies").mkdir(exist_ok=True)
    for col in [*adult.QUASI_IDENTIFIERS, adult.SENSITIVE]:
        (root / "hierarchies" / f"{col}.csv").write_bytes((adult.hierarchy_dir() / f"{col}.csv").read_bytes())
    if (root / CONFIG_NAME).exists():
        return snapshot
    # age declared numeric as the demo declares it: without it age splits along its hierarchy file's
    # bands, one small band blocks every split of age, and release 1 of the five rarest protected is
    # 4 groups instead of 750 (docs/anonymization.md, "At scale")
    config = Config(
        dataset="adult",
        quasi_identifiers=adult.QUASI_IDENTIFIERS,
        sensitive=adult.SENSITIVE,
        l=2,
        numeric=list(adult.NUMERIC),
        sign_off=SignOffSettings(auto_approve=True),
    )
    (root / CONFIG_NAME).write_text(render_config(config, {"sign_off.auto_approve": "A benchmark workspace."}))
    return snapshot


def scale_one(snapshot: Path) -> dict[str, object]:
    """Publish one snapshot as release 1 of a scale workspace (run in its own process)."""
    from serialpub.config import load_config

    root = snapshot.parent.parent
    from serialpub.workflow.publisher import Publisher

    for stale in (root / "state.sqlite", root / "state.sqlite-wal", root / "state.sqlite-shm"):
        stale.unlink(missing_ok=True)
    import shutil

    shutil.rmtree(root / "releases", ignore_errors=True)
    t0 = time.perf_counter()
    publisher = Publisher(load_config(root))
    t_load = time.perf_counter() - t0
    o = publisher.publish(snapshot)
    return {
        "records": o.records,
        "groups": o.groups,
        "suppressed": o.suppressed,
        "load_register_s": t_load,
        "publish_s": o.seconds,
        "anonymize_s": o.seconds_anonymize,
        "state_s": o.seconds_state,
        "wall_s": time.perf_counter() - t0,
        "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["demo", "scale", "_scale_one"])
    ap.add_argument("--register", type=int, default=5_000_000)
    ap.add_argument("--records", type=int, nargs="+", default=[100_000, 300_000, 1_000_000])
    ap.add_argument("--root")
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    if args.what == "_scale_one":
        print(json.dumps(scale_one(Path(args.root))))
        return
    if args.what == "demo":
        result = run_demo()
        print(pd.DataFrame(result["rows"]).to_string(index=False, float_format="%.3f"))  # type: ignore[arg-type]
        print(
            f"median anonymize+state: {result['median_anonymize_plus_state_s']:.3f} s; "
            f"median whole publication: {result['median_total_s']:.3f} s"
        )
    else:
        runs = []
        for n_rec in args.records:
            t = time.perf_counter()
            snapshot = make_scale_workspace(args.register, n_rec)
            made = time.perf_counter() - t
            proc = subprocess.run(
                [sys.executable, __file__, "_scale_one", "--root", str(snapshot)],
                check=True,
                capture_output=True,
                text=True,
            )
            run = {"register": args.register, "generate_s": made, **json.loads(proc.stdout.strip().splitlines()[-1])}
            runs.append(run)
            print(json.dumps(run))
        result = {"rows": runs}
        print(pd.DataFrame(runs).to_string(index=False, float_format="%.2f"))
    result["machine"] = machine()
    (OUT / f"{args.what}.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
