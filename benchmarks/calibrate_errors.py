"""Calibration of the register-joint estimator's error figure on published demo series
(docs/data-users.md, "How far to trust the error figure").

For every release of each workspace given (a ``serialpub demo`` folder: the releases, and
the snapshots they were made from, which hold the truth), draws the utility measure's
random range-count queries on the release's snapshot (:func:`anonymizer.queries.draw_workload`,
the workload of docs/design.md section 8: ``--queries`` per release and per ``--qd``,
selectivity 0.05, seed ``--seed`` + the release number, so the set is deterministic;
queries whose true count is 0 are redrawn, as there). Answers them on the release, read
from the workspace as a data user reads a public copy
(:func:`serialpub.analysis.reader.open_releases`, :func:`anonymizer.joint.joint_answers`),
and reports how often the snapshot's true count falls inside the nominal 90 % and 95 %
intervals (estimate ± z · se clipped to the certain bounds), overall and split by whether
the query's QI condition cuts a generalized value of a group with an uncertain count
(:attr:`anonymizer.joint.JointAnswers.generalized`: there the estimate rests on the
within-region model); with the share of misses where the truth lies above the interval
(a bias toward independence under-estimates where a value concentrates). A second table
splits the one-condition queries (qd 1) by the QI they condition on.

Usage::

    uv run --frozen serialpub demo --out /tmp/e-demo
    uv run --frozen python benchmarks/calibrate_errors.py /tmp/e-demo [more workspaces] \\
        [--queries 500] [--qd 1,3] [--seed 0] [--json benchmarks/out/calibration.json]

Prints one Markdown table (the one in docs/data-users.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from anonymizer.joint import Z_90, Z_95, joint_answers  # noqa: E402
from anonymizer.queries import draw_workload  # noqa: E402
from anonymizer.workload import QueryRanges  # noqa: E402
from serialpub.analysis.reader import PublishedRelease, open_releases  # noqa: E402

SELECTIVITY = 0.05


def release_rows(workspace: Path, r: PublishedRelease, n_queries: int, qd: int, seed: int) -> pd.DataFrame:
    """One row per drawn query of release ``r``: truth, estimate, se, bounds, intervals and
    whether the condition cuts a generalized value."""
    snapshot = pd.read_csv(workspace / "snapshots" / f"snapshot-{r.manifest.period}.csv", dtype=str)
    qis = r.qis
    work = draw_workload(
        snapshot[[*qis, r.sensitive]],
        {q: r.hierarchies[q] for q in qis},
        r.sensitive,
        n_queries,
        qd,
        SELECTIVITY,
        seed + r.number,
    )
    ranges = work.ranges
    text = QueryRanges(ranges.qi, tuple(str(v) for v in ranges.sensitive_values), ranges.sensitive)
    a = joint_answers(r.joint(), text)
    lo90, hi90 = a.interval(Z_90)
    lo95, hi95 = a.interval(Z_95)
    truth = work.actual.astype(np.float64)
    constrained = np.stack([~ranges.qi[q].all(axis=1) for q in qis], axis=1)
    on = [",".join(q for q, c in zip(qis, row, strict=True) if c) for row in constrained]
    return pd.DataFrame(
        {
            "on": on,
            "release": r.number,
            "qd": qd,
            "truth": truth,
            "estimate": a.estimate,
            "se": a.se,
            "in_bounds": (truth >= a.lower) & (truth <= a.upper),
            "in90": (truth >= lo90) & (truth <= hi90),
            "in95": (truth >= lo95) & (truth <= hi95),
            "above90": truth > hi90,
            "generalized": a.generalized.any(axis=1),
        }
    )


def summary(rows: pd.DataFrame) -> dict[str, float]:
    miss = ~rows["in90"]
    return {
        "queries": len(rows),
        "cover90": float(rows["in90"].mean()) if len(rows) else float("nan"),
        "cover95": float(rows["in95"].mean()) if len(rows) else float("nan"),
        "above_of_misses90": float(rows.loc[miss, "above90"].mean()) if miss.any() else float("nan"),
        "median_se": float(rows["se"].median()) if len(rows) else float("nan"),
        "median_abs_error": float((rows["estimate"] - rows["truth"]).abs().median()) if len(rows) else float("nan"),
        "in_bounds": float(rows["in_bounds"].mean()) if len(rows) else float("nan"),
    }


def calibrate(workspace: Path, n_queries: int, qds: list[int], seed: int) -> dict[str, object]:
    copy = open_releases(workspace)
    frames = [release_rows(workspace, r, n_queries, qd, seed) for qd in qds for r in copy.releases]
    rows = pd.concat(frames, ignore_index=True)
    out: dict[str, object] = {"workspace": str(workspace), "releases": len(copy.releases), "by_qd": {}}
    single = rows[rows["qd"] == 1]
    out["by_qi"] = {q: summary(part) for q, part in single.groupby("on")}
    for qd in qds:
        part = rows[rows["qd"] == qd]
        out["by_qd"][qd] = {  # type: ignore[index]
            "all": summary(part),
            "generalized": summary(part[part["generalized"]]),
            "not generalized": summary(part[~part["generalized"]]),
        }
    return out


def _pct(x: float) -> str:
    return "–" if x != x else f"{100 * x:.1f} %"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workspaces", nargs="+", type=Path)
    ap.add_argument("--queries", type=int, default=500, help="queries per release and per qd (default 500)")
    ap.add_argument("--qd", default="1,3", help="QI conditions per query, comma-separated (default 1,3)")
    ap.add_argument("--seed", type=int, default=0, help="base seed; release n draws with seed + n (default 0)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    qds = [int(x) for x in args.qd.split(",")]
    results = [calibrate(ws, args.queries, qds, args.seed) for ws in args.workspaces]
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2, default=str))
    stats = "| 90 % covers | 95 % covers | misses above | median se | median abs error |"
    print("| series | qd | queries | split | share " + stats)
    print("|---|---|---|---|---|---|---|---|---|---|")
    for res in results:
        for qd, parts in res["by_qd"].items():  # type: ignore[attr-defined]
            total = parts["all"]["queries"]
            for split, s in parts.items():
                print(
                    f"| {Path(str(res['workspace'])).name} ({res['releases']} releases) | {qd} | {s['queries']:,} "
                    f"| {split} | {_pct(s['queries'] / total if total else float('nan'))} | {_pct(s['cover90'])} "
                    f"| {_pct(s['cover95'])} | {_pct(s['above_of_misses90'])} | {s['median_se']:.2f} "
                    f"| {s['median_abs_error']:.2f} |"
                )
    print()
    print("| series | one condition on | queries " + stats)
    print("|---|---|---|---|---|---|---|---|")
    for res in results:
        for qi, s in res["by_qi"].items():  # type: ignore[attr-defined]
            print(
                f"| {Path(str(res['workspace'])).name} | {qi} | {s['queries']:,} | {_pct(s['cover90'])} "
                f"| {_pct(s['cover95'])} | {_pct(s['above_of_misses90'])} | {s['median_se']:.2f} "
                f"| {s['median_abs_error']:.2f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
