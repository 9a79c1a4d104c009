"""The three query-error estimators, the histogram-only baseline and the gain on six demo
series (docs/data-users.md, "How much a release tells").

Runs ``serialpub demo`` six times (the defaults; ``--partition-model parts``; ``--guarantee
localized``; ``--strategy geometric --alpha 2``; ``--rounds 30``; only the five rarest
occupations protected, rarest by records over the default series' snapshots, as ``serialpub
plan``'s ``rarest:5`` picks them) and reads each series with ``demo_utility.py``. Per
series: the median over releases of each release's mean relative error of 5,000 range-count
queries under the register-joint estimator, the register-marginal one and paper 001's
uniform one; the baseline (joint estimator on a release of the sensitive histogram only);
the gain (baseline − joint); groups per release; the largest breach probability; and the
learning adversary's largest posterior P' after the last release under the one-pass learners
``nb`` and ``logistic-pairs``, fitted on every release (with the pairs above 1/ℓ), by the
release report's code, which equals ``serialpub audit --learners`` (docs/threat-model.md,
"The learning adversary").

Usage::

    uv run python benchmarks/estimators_table.py [--out /tmp/estimators] [--only NAME ...] [--reuse]

``--reuse`` measures the series already under ``--out`` instead of making them again (a
series the anonymizer refused part-way is then measured over what it published, without
the refusal's note).

Writes ``benchmarks/out/estimators.json`` and prints the Markdown table of the docs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from demo_utility import measure  # noqa: E402

RESULT = HERE / "out" / "estimators.json"
#: the learners of the table's last columns: the one-pass ones
LEARNERS = ("nb", "logistic-pairs")
SERIES: dict[str, list[str]] = {
    "demo defaults": [],
    "--partition-model parts": ["--partition-model", "parts"],
    "--guarantee localized": ["--guarantee", "localized"],
    "--strategy geometric --alpha 2": ["--strategy", "geometric", "--alpha", "2"],
    "--rounds 30": ["--rounds", "30"],
    "five rarest protected": [],  # filled from the default series' snapshots
}


def rarest(workspace: Path, m: int = 5) -> list[str]:
    """The m occupations with the fewest records over the workspace's snapshots (ties in
    domain order), as ``serialpub plan``'s ``rarest:m``."""
    from serialpub.config import load_config

    ws = load_config(workspace)
    sensitive = ws.config.sensitive
    files = sorted((workspace / "snapshots").glob("*.csv"))
    counts = pd.concat([pd.read_csv(f, dtype=str, usecols=[sensitive])[sensitive] for f in files]).value_counts()
    domain = sorted(counts.index)  # every occupation occurs in the demo's snapshots
    per = counts.reindex(domain, fill_value=0)
    return sorted(per.sort_values(kind="stable").index[:m].tolist())


def run(name: str, args: list[str], out: Path, reuse: bool = False) -> dict[str, object]:
    folder = out / name.replace(" ", "_").replace("-", "").strip("_")
    exe = Path(sys.executable).with_name("serialpub")
    t = time.perf_counter()
    if reuse and (folder / "releases").is_dir():
        return {"series": name, "args": " ".join(args), "seconds": None, "stopped": None, **measure(folder, LEARNERS)}
    proc = subprocess.run([str(exe), "demo", "--out", str(folder), *args], capture_output=True, text=True)
    # a series the anonymizer refuses part-way (exit 2) is measured over what it published
    stopped = None if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["?"])[-1]
    if proc.returncode not in (0, 2):
        raise SystemExit(f"serialpub demo {' '.join(args)} failed: {stopped}")
    row = measure(folder, LEARNERS)
    return {"series": name, "args": " ".join(args), "seconds": time.perf_counter() - t, "stopped": stopped, **row}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/estimators"))
    ap.add_argument("--only", nargs="*", help="series names to run (default: all six)")
    ap.add_argument("--reuse", action="store_true", help="measure the series under --out instead of remaking them")
    args = ap.parse_args()
    rows = json.loads(RESULT.read_text()) if RESULT.exists() and args.only else []
    rows = [r for r in rows if not args.only or r["series"] not in args.only]
    for name, extra in SERIES.items():
        if args.only and name not in args.only:
            continue
        if name == "five rarest protected":
            defaults = args.out / "demo_defaults"
            if not (defaults / "snapshots").is_dir():
                run("demo defaults", [], args.out)
            extra = ["--protected", ",".join(rarest(defaults))]
        rows.append(run(name, extra, args.out, args.reuse))
        RESULT.parent.mkdir(exist_ok=True)
        RESULT.write_text(json.dumps(rows, indent=2))
    order = list(SERIES)
    rows.sort(key=lambda r: order.index(str(r["series"])))
    print(
        "| series | releases | groups (median) | joint | marginal | uniform (paper 001) | baseline | gain | max p "
        "| `nb` max P' | `logistic-pairs` max P' |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['series']} | {r['releases']}{' (then refused)' if r.get('stopped') else ''} "
            f"| {r['groups_median']:,} | **{r['joint_median']:.3f}** | "
            f"{r['weighted_error_median']:.3f} | {r['error_median']:.2f} | {r['baseline_median']:.3f} | "
            f"{r['gain_median']:.3f} | {r['max_p']:.3f} | {_learned(r, 'nb')} | {_learned(r, 'logistic-pairs')} |"
        )


def _learned(row: dict[str, object], name: str) -> str:
    """A learner's cell: max P' and, when any, the pairs above 1/ℓ ("-" for a row measured
    before the column existed)."""
    figures = row.get("learners")
    if not isinstance(figures, dict) or name not in figures:
        return "-"
    f = figures[name]
    return f"{f['max_p']:.3f}" + (f" ({f['above']:,} > 1/ℓ)" if f["above"] else "")


if __name__ == "__main__":
    main()
