"""Does the guarantee hold against the learning adversary? Four demo series
(docs/threat-model.md, "Measured on four series").

Per series it runs ``serialpub demo``, then the audit with the snapshots and every learner
of ``serialpub audit --learners all``, each fitted on all the releases, and prints one table
row: groups per release, the uniform charge's max, the audit's own max p, per learner its
max P', the pairs with P' > 1/ℓ and the true ones among them; the fraction true among the
pairs *any* learner rates above 1/ℓ; and
the utility figures of docs/data-users.md's six-series table (groups, register-joint query
error, the gain over the histogram-only release, max p; from ``demo_utility.py``).

Series: ``demo-all`` (the demo, every occupation protected), ``demo-five-rarest`` (the five
rarest), ``seed1-three`` (seed 1, three rare values, k' = 12) and ``seed2-four`` (seed 2,
four values, two of them common).

Usage::

    uv run python benchmarks/learner_guarantee.py [--out /tmp/lg] [--only NAME ...] [--propensity-ratio RHO]

With ``--propensity-ratio RHO`` (above 1) every series is published with that ρ
(docs/threat-model.md, "The propensity ratio"); its rows are named ``NAME ρ=RHO``. RHO may
also give one ρ per protected value, ``value=ρ`` items joined by commas (the others 1), as
``serialpub demo --propensity-ratio`` takes it. Each row also keeps, per learner and
protected value, the learner's max P' and its realized within-group ratio max π / mean π.

Writes ``benchmarks/out/learner_guarantee.json`` (rows of earlier runs are kept unless
rerun) and prints the Markdown table of docs/threat-model.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from demo_utility import measure  # noqa: E402

from anonymizer.learners.core import LEARNERS, posteriors  # noqa: E402
from anonymizer.learners.ratios import realized_ratios  # noqa: E402
from serialpub.analysis.audit import audit_workspace  # noqa: E402

RESULT = HERE / "out" / "learner_guarantee.json"
FIVE_RAREST = "Armed-Forces,Farming-fishing,Priv-house-serv,Protective-serv,Tech-support"
SERIES: dict[str, list[str]] = {
    "demo-all": [],
    "demo-five-rarest": ["--protected", FIVE_RAREST],
    "seed1-three": ["--seed", "1", "--k-prime", "12", "--protected", "Armed-Forces,Priv-house-serv,Protective-serv"],
    "seed2-four": ["--seed", "2", "--protected", "Farming-fishing,Handlers-cleaners,Sales,Tech-support"],
}


def learner_rows(ws: Path) -> dict[str, object]:
    """The audit (with the snapshots) and every learner on workspace ``ws``."""
    t = time.perf_counter()
    result = audit_workspace(ws, snapshots=ws / "snapshots", learners=("nb",))
    report = result.learners
    assert report is not None
    series = report.inputs
    assert series.truth is not None
    weight = np.broadcast_to(series.counts[:, None], series.truth.shape)
    bound = 1.0 / series.ell
    figures: dict[str, dict[str, float | int | None]] = {}
    anyone = np.zeros(series.truth.shape, dtype=bool)
    for name, p, _, pi in posteriors(series, LEARNERS):
        above = p > bound
        if name != "uniform":
            anyone |= above
        figures[name] = {"max_p": float(p.max(initial=0.0)), "above": int(weight[above].sum()),
                         "true": int(series.truth[above].sum())}  # fmt: skip
        per_value = {v: round(float(p[:, k].max(initial=0.0)), 4) for k, v in enumerate(series.values)}
        figures[name]["max_p_per_value"] = per_value  # type: ignore[assignment]
        if pi is not None:
            ratio = realized_ratios(series, pi).max(axis=0, initial=0.0)
            figures[name]["ratio_per_value"] = {
                v: round(float(r), 2) for v, r in zip(series.values, ratio, strict=True)
            }  # type: ignore[assignment]
    pairs_any = int(weight[anyone].sum())
    return {
        "verdict": str(result.verdict),
        "audit_max_p": result.max_p,
        "violations": result.violations,
        "learners": figures,
        "any_above": pairs_any,
        "any_true": int(series.truth[anyone].sum()),
        "audit_seconds": time.perf_counter() - t,
    }


def run(name: str, out: Path, reuse: bool, rho: str = "1") -> dict[str, object]:
    folder = out / (name if rho == "1" else f"{name}-rho{rho.replace('=', '').replace(',', '-')}")
    exe = Path(sys.executable).with_name("serialpub")
    args = SERIES[name] + ([] if rho == "1" else ["--propensity-ratio", rho])
    t = time.perf_counter()
    stopped = None
    if not (reuse and (folder / "snapshots").is_dir()):
        proc = subprocess.run([str(exe), "demo", "--out", str(folder), *args], capture_output=True, text=True)
        # a series the anonymizer refuses part-way (exit 2) is measured over what it published
        stopped = None if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["?"])[-1]
        if proc.returncode not in (0, 2):
            raise SystemExit(f"serialpub demo {' '.join(args)} failed: {stopped}")
    demo_s = time.perf_counter() - t
    util = measure(folder)
    groups = [
        json.loads(m.read_text(encoding="utf-8"))["groups"]
        for m in sorted((folder / "releases").glob("*/release-*/manifest.json"))
    ]
    series = name if rho == "1" else f"{name} ρ={rho}"
    return {"series": series, "args": " ".join(args), "stopped": stopped, "demo_seconds": demo_s,
            "groups_range": [min(groups), max(groups)], **util, **learner_rows(folder)}  # fmt: skip


def cell(f: dict[str, float | int | None]) -> str:
    return f"{f['max_p']:.3f}, {f['above']:,} ({f['true']:,} true)"


def table(rows: list[dict[str, object]]) -> None:
    print(
        "| series | releases | groups per release | uniform, max | audit max p | `nb` | `nb-em3` | `nb-em10` "
        "| `logistic-pairs` | any learner > 1/ℓ: true | joint | gain | max p |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        lf = r["learners"]
        assert isinstance(lf, dict)
        g = r["groups_range"]
        assert isinstance(g, list)
        anyp, anyt = int(r["any_above"]), int(r["any_true"])  # type: ignore[call-overload]
        frac = f"{anyt:,}/{anyp:,} ({anyt / anyp:.2f})" if anyp else "none"
        print(
            f"| {r['series']} | {r['releases']}{', then refused' if r.get('stopped') else ''} "
            f"| {g[0]:,}-{g[1]:,} | {lf['uniform']['max_p']:.3f} "
            f"| {r['audit_max_p']:.3f} | " + " | ".join(cell(lf[n]) for n in LEARNERS) + f" | {frac} "
            f"| {r['joint_median']:.3f} | {r['gain_median']:.3f} | {r['max_p']:.3f} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/learner_guarantee"))
    ap.add_argument("--only", nargs="*", help="series names to run (default: all four)")
    ap.add_argument("--reuse", action="store_true", help="measure existing workspaces instead of remaking them")
    ap.add_argument("--table", action="store_true", help="print the table of the stored rows only")
    ap.add_argument(
        "--propensity-ratio", default="1", help="ρ of every series (default 1), or value=ρ items joined by commas"
    )
    ap.add_argument(
        "--result", type=Path, nargs="*", default=[RESULT], help="JSON file(s) of rows (the first is written)"
    )
    args = ap.parse_args()
    rows = [r for f in args.result if f.exists() for r in json.loads(f.read_text())]
    result = args.result[0]
    if not args.table:
        for name in SERIES:
            if args.only and name not in args.only:
                continue
            row = run(name, args.out, args.reuse, args.propensity_ratio)
            rows = [r for r in rows if r["series"] != row["series"]] + [row]
            result.parent.mkdir(exist_ok=True)
            result.write_text(json.dumps(rows, indent=2))
            print(json.dumps({k: row[k] for k in ("series", "any_above", "any_true")}), flush=True)
    order = list(SERIES)
    rows.sort(key=lambda r: (order.index(str(r["series"]).split(" ")[0]), str(r["series"])))
    table(rows)


if __name__ == "__main__":
    main()
