"""How one release's time and memory grow with the register: for each register
size, a fresh process publishes two releases of ``--records`` records (the scaling study's
diagnosis scenario, register dilution), first with the register cache empty (release 1
parses, checks and codes the register), then again with the cache warm (what every later
``serialpub release`` of that register pays).

Each run is ``bench_scaling.py``'s one-case runner in its own process, so the peak memory is
that run's. Reported per size: the fresh process's time (reading the register + release 1),
release 2 (the steady state), the peak RSS, and bytes per register individual; then the growth
exponent b of each figure (figure ~ size^b, a least-squares fit on the log-log points) and a
straight-line fit of the peak (a + c·N: c is what one more individual costs) with what it
implies for a 50M-person register.

Usage::

    .venv/bin/python benchmarks/bench_register_growth.py \
        [--registers 2000000 5000000 10000000 20000000] [--records 1000000]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import subprocess
import sys
from pathlib import Path

import numpy as np
from bench_scaling import new_register_version, register_root, snapshot_pair
from machine_info import machine

HERE = Path(__file__).resolve().parent


def _run(root: Path, records: int) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, str(HERE / "bench_scaling.py"), "--_one", str(root), "diagnosis", "register", str(records)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:  # e.g. killed for lack of memory: a result too
        return {"failed": f"exit code {proc.returncode}: {proc.stderr.strip()[-300:]}"}
    run = json.loads(proc.stdout.strip().splitlines()[-1])
    first, second = run["releases"][0], run["releases"][-1]
    return {
        "fresh_s": round(run["load_register_s"] + first["total_s"], 1),
        "release2_s": round(second["total_s"], 1),
        "peak_gib": round(run["peak_rss_gib"], 2),
    }


def _prepare(n: int, records: int) -> None:
    snapshot_pair(register_root(n), "diagnosis", records)


def _prepared(n: int, records: int) -> Path:
    """The workspace of register size ``n`` with its snapshots, built in a child process when
    missing: building a 50M register holds gigabytes that this process would keep from the
    runs (its first 50M run was killed for memory while this process held them)."""
    child = multiprocessing.get_context("spawn").Process(target=_prepare, args=(n, records))
    child.start()
    child.join()
    if child.exitcode != 0:
        raise SystemExit(f"building the register of {n:,} individuals failed (exit code {child.exitcode})")
    return register_root(n)


def _slope(x: list[float], y: list[float]) -> float:
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--registers", type=int, nargs="+", default=[2_000_000, 5_000_000, 10_000_000, 20_000_000])
    ap.add_argument("--records", type=int, default=1_000_000)
    args = ap.parse_args()
    rows = []
    for n in args.registers:
        root = _prepared(n, args.records)
        new_register_version(root)
        cold = _run(root, args.records)
        warm = _run(root, args.records)
        rows.append({"register": n, "cold": cold, "warm": warm})
        print(json.dumps(rows[-1]), flush=True)
    out: dict[str, object] = {"machine": machine(), "records": args.records, "runs": rows}
    ok = [r for r in rows if "failed" not in r["cold"] and "failed" not in r["warm"]]  # type: ignore[operator]
    if len(ok) >= 2:
        n = [float(r["register"]) for r in ok]  # type: ignore[arg-type]
        fits: dict[str, object] = {}
        print(
            f"\n{'register':>12} {'fresh, cold':>12} {'fresh, warm':>12} {'release 2':>10} {'peak cold':>10} "
            f"{'peak warm':>10} {'B/indiv. warm':>14}"
        )
        for r in ok:
            c, w = r["cold"], r["warm"]
            per = w["peak_gib"] * 2**30 / r["register"]  # type: ignore[index,operator]
            print(f"{r['register']:>12,} {c['fresh_s']:>10.1f} s {w['fresh_s']:>10.1f} s {w['release2_s']:>8.1f} s "  # type: ignore[index]
                  f"{c['peak_gib']:>7.2f} GiB {w['peak_gib']:>6.2f} GiB {per:>12.0f} B")  # type: ignore[index]  # fmt: skip
        for run in ("cold", "warm"):
            for figure in ("fresh_s", "release2_s", "peak_gib"):
                fits[f"{run} {figure}"] = round(_slope(n, [float(r[run][figure]) for r in ok]), 2)  # type: ignore[index]
            peak = [float(r[run]["peak_gib"]) * 2**30 for r in ok]  # type: ignore[index]
            c, a = np.polyfit(n, peak, 1)
            fits[f"{run} peak bytes per individual (slope)"] = round(float(c))
            fits[f"{run} peak at 50M (straight line)"] = f"{(a + c * 50e6) / 2**30:.1f} GiB"
        out["growth"] = fits
        print("\ngrowth exponents (figure ~ register^b) and the peak's straight line:")
        for k, v in fits.items():
            print(f"  {k}: {v}")
    (HERE / "out" / "register_growth.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
