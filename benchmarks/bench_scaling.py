"""Scaling study: time and peak memory per release against the number of records
and the size of the population register, in both dilution modes.

Set-up. A register of N individuals resamples UCI Adult rows under fresh ids (its QIs are
Adult's). Two sensitive attributes, fixed per individual:

* ``adult``: the individual's Adult occupation, every one of the 14 values protected (the
  demo's regime);
* ``diagnosis``: the synthetic Zipf diagnosis of :mod:`serialpub.datasets.diagnosis`
  (2,000 codes, the rarest 10 % of the N-person base protected: paper 004's regime).

A case is one (scenario, dilution) pair and one (N, R) size: a fresh process publishes two
releases of R records each (two independent random subsets of the register, so about
R²/N individuals are in both), ℓ = 2, constant ratio k' = 20, 5 % suppression budget,
automatic sign-off. Per release it times the whole publication (read + check the snapshot,
anonymize, stage, the input and release suites, the report, sign-off, commit) and its
parts; "peak RSS" is the process's maximum resident memory over both releases and the
register load. "Fresh process" = reading the register (``Publisher(...)``) + release 1
(which also runs the register suite): what one ``serialpub release`` command pays.
Release 2 is the steady state: same process, loading the statistics of release 1.

Two sweeps: records R at the largest register (``--records`` at ``--register``) and
register size N at fixed records (``--registers`` at ``--at-records``). The growth rate is
the slope b of a least-squares fit of log(time) on log(size): time ∝ size^b.

A size the suppression budget cannot meet is recorded as infeasible (the pipeline's own
refusal message), not as a time. ``adult:presence`` is infeasible at every size: without
dilution, a group's candidates are its own records, and the constant-ratio target (29.4
candidates per record of a protected value at ℓ = 2, k' = 20) cannot be met when every
occupation is protected and the most common one is 13 % of the records. ``adult:register``
needs enough dilution (N/R) for the same reason.

Usage::

    uv run python benchmarks/bench_scaling.py                 # the whole study (benchmarks/README.md: typical time)
    uv run python benchmarks/bench_scaling.py --cases diagnosis:presence --records 10000 100000
    uv run python benchmarks/bench_scaling.py --plot-only     # tables and plot from the last JSON

Writes ``benchmarks/out/scaling.json`` (after every case, so a long run can be read while
it goes), prints the tables, and draws ``docs/images/scaling.png``.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from machine_info import machine

OUT = Path(__file__).resolve().parent / "out"
ROOT = OUT / "scaling"
RESULT = OUT / "scaling.json"
PLOT = Path(__file__).resolve().parents[1] / "docs" / "images" / "scaling.png"
CASES = ["adult:register", "adult:presence", "diagnosis:register", "diagnosis:presence"]
SENSITIVE = {"adult": "occupation", "diagnosis": "diagnosis"}


def print_runs(label: str, f: Callable[[], Any], repeat: int) -> None:
    """Run ``f`` ``repeat`` times and print the label with every run's wall seconds (the
    part benchmarks: ``bench_check_parts.py``, ``bench_draft_parts.py``)."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    print(f"  {label:<52} {', '.join(f'{x:.3f}' for x in times)} s")


def register_root(n_register: int, seed: int = 0) -> Path:
    """``out/scaling/N-<n>/``: register.csv, hierarchies/, values.parquet (both sensitive
    attributes per individual) and protected-diagnosis.txt; made once per size."""
    from serialpub.datasets import adult, diagnosis

    root = ROOT / f"N-{n_register}"
    if (root / "values.parquet").exists():
        return root
    root.mkdir(parents=True, exist_ok=True)
    base = adult.load_adult()
    rows = np.random.default_rng(seed).integers(0, len(base), size=n_register)
    reg = base.iloc[rows][[*adult.QUASI_IDENTIFIERS, adult.SENSITIVE]].reset_index(drop=True)
    reg.insert(0, adult.ID_COLUMN, np.arange(1, n_register + 1).astype(str))
    reg[[adult.ID_COLUMN, *adult.QUASI_IDENTIFIERS]].to_csv(root / "register.csv", index=False)
    data = diagnosis.generate(seed=seed, base=reg)
    (root / "hierarchies").mkdir(exist_ok=True)
    for col in [*adult.QUASI_IDENTIFIERS, adult.SENSITIVE]:
        shutil.copyfile(adult.hierarchy_dir() / f"{col}.csv", root / "hierarchies" / f"{col}.csv")
    (root / "hierarchies" / "diagnosis.csv").write_text(
        "\n".join(diagnosis.hierarchy_lines(data.hierarchy)) + "\n", encoding="utf-8"
    )
    (root / "protected-diagnosis.txt").write_text("\n".join(data.protected) + "\n", encoding="utf-8")
    values = pd.DataFrame({"occupation": reg[adult.SENSITIVE], "diagnosis": data.table[diagnosis.SENSITIVE]})
    values.to_parquet(root / "values.parquet")
    return root


def new_register_version(root: Path) -> None:
    """Make the workspace at ``root`` meet its register as a new version: no register cache
    entry and no stored register or hierarchy versions, so the next release parses, checks
    and codes the register and stores its version (what a new period's register costs)."""
    for folder in ("cache", "registers", "hierarchy-versions"):
        shutil.rmtree(root / folder, ignore_errors=True)


def snapshot_pair(root: Path, scenario: str, n_records: int, seed: int = 0) -> list[Path]:
    """Two snapshots of ``n_records`` random register members each (drawn independently)
    with the scenario's sensitive attribute: ``snapshots/<scenario>-<R>/snapshot-{1,2}.csv``."""
    from serialpub.datasets import adult

    folder = root / "snapshots" / f"{scenario}-{n_records}"
    paths = [folder / "snapshot-1.csv", folder / "snapshot-2.csv"]
    if all(p.exists() for p in paths):
        return paths
    folder.mkdir(parents=True, exist_ok=True)
    reg = pd.read_csv(root / "register.csv", dtype=str, keep_default_na=False)
    sensitive = SENSITIVE[scenario]
    reg[sensitive] = pd.read_parquet(root / "values.parquet")[sensitive].to_numpy()
    for i, path in enumerate(paths):
        rng = np.random.default_rng(seed + 1000 * n_records + i)
        present = np.sort(rng.choice(len(reg), size=n_records, replace=False))
        reg.iloc[present][[adult.ID_COLUMN, *adult.QUASI_IDENTIFIERS, sensitive]].to_csv(path, index=False)
    return paths


def write_config(root: Path, scenario: str, dilution: str) -> None:
    """The case's serialpub.yaml (the diagnosis lists its protected codes)."""
    from anonymizer.settings import Dilution
    from serialpub.config import CONFIG_NAME, Config, SignOffSettings
    from serialpub.config_render import render_config
    from serialpub.datasets import adult

    notes = {"sign_off.auto_approve": "A benchmark workspace."}
    protected: list[str] | Literal["all"] = "all"
    if scenario == "diagnosis":
        protected = (root / "protected-diagnosis.txt").read_text(encoding="utf-8").split()
        notes["protected_values"] = (
            f"SYNTHETIC diagnoses: the {len(protected)} least frequent codes (10 %) of this register."
        )
    config = Config(
        dataset=scenario,
        quasi_identifiers=adult.QUASI_IDENTIFIERS,
        sensitive=SENSITIVE[scenario],
        l=2,
        protected_values=protected,
        dilution=Dilution(dilution),
        sign_off=SignOffSettings(auto_approve=True),
    )
    (root / CONFIG_NAME).write_text(render_config(config, notes), encoding="utf-8")


def checked_first_snapshot(n_register: int, n_records: int) -> tuple[Any, Any]:
    """A fresh state on the ``n_register`` register (no state, no releases, the diagnosis
    configuration) and its first ``n_records``-record snapshot checked: the Publisher and
    the coded snapshot, for the benchmarks of single steps."""
    from serialpub.config import load_config
    from serialpub.workflow.publisher import Publisher

    root = register_root(n_register)
    first = snapshot_pair(root, "diagnosis", n_records)[0]
    for stale in root.glob("state.sqlite*"):
        stale.unlink()
    shutil.rmtree(root / "releases", ignore_errors=True)
    write_config(root, "diagnosis", "register")
    ctx = Publisher(load_config(root))
    return ctx, ctx.check_inputs(first, "0001").snapshot


def run_case(root: Path, scenario: str, dilution: str, snapshots: list[Path]) -> dict[str, object]:
    """Publish ``snapshots`` as releases 1, 2, .. of a fresh state (run in its own process)."""
    from serialpub.config import load_config
    from serialpub.workflow.publisher import Publisher

    for stale in root.glob("state.sqlite*"):
        stale.unlink()
    shutil.rmtree(root / "releases", ignore_errors=True)
    write_config(root, scenario, dilution)
    t0 = time.perf_counter()
    publisher = Publisher(load_config(root))
    load_s = time.perf_counter() - t0
    releases = []
    for path in snapshots:
        t = time.perf_counter()
        staged = publisher.draft(path)
        t_draft = time.perf_counter() - t
        publisher.validate(staged.seq)
        t_validate = time.perf_counter() - t - t_draft
        publisher.auto_approve(staged.seq)
        publisher.finish(staged.seq)
        o = staged.outcome
        releases.append(
            {
                "release": o.seq,
                "published": o.records,
                "groups": o.groups,
                "suppressed": o.suppressed,
                "max_breach": o.max_breach,
                "anonymize_s": o.seconds_anonymize,
                "state_s": o.seconds_state,
                "draft_s": t_draft,
                "validate_report_s": t_validate,
                "total_s": time.perf_counter() - t,
            }
        )
    return {
        "load_register_s": load_s,
        "releases": releases,
        "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,  # Linux: KiB
    }


def growth(rows: pd.DataFrame, size: str, figure: str) -> float:
    """Slope b of log(figure) = a + b·log(size): the figure grows as size^b."""
    return float(np.polyfit(np.log(rows[size].astype(float)), np.log(rows[figure].astype(float)), 1)[0])


def tables(runs: list[dict[str, object]]) -> tuple[pd.DataFrame, list[dict[str, object]]]:
    """One row per case (release 2's timings) and the fitted growth rates per case and sweep."""
    flat = []
    for r in runs:
        if "infeasible" in r or "failed" in r:
            continue
        second = r["releases"][-1]  # type: ignore[index]
        first = r["releases"][0]  # type: ignore[index]
        flat.append(
            {
                "case": r["case"],
                "sweep": r["sweep"],
                "register": r["register"],
                "records": r["records"],
                "published": second["published"],
                "groups": second["groups"],
                "suppressed": second["suppressed"],
                "max_breach": second["max_breach"],
                "load_register_s": r["load_register_s"],
                "release1_s": first["total_s"],
                "fresh_process_s": r["load_register_s"] + first["total_s"],
                "anonymize_s": second["anonymize_s"],
                "state_s": second["state_s"],
                "draft_s": second["draft_s"],
                "validate_report_s": second["validate_report_s"],
                "release2_s": second["total_s"],
                "peak_rss_gib": r["peak_rss_gib"],
            }
        )
    df = pd.DataFrame(flat)
    rates: list[dict[str, object]] = []
    for (case, sweep), rows in df.groupby(["case", "sweep"], sort=False):
        size = "records" if sweep == "records" else "register"
        if rows[size].nunique() < 2:
            continue
        rates.append(
            {
                "case": case,
                "sweep": sweep,
                "sizes": f"{rows[size].min():,}-{rows[size].max():,}",
                "release_time_exponent": round(growth(rows, size, "release2_s"), 2),
                # over the three largest sizes, where the per-record work outweighs fixed costs
                "release_time_exponent_top3": round(growth(rows.nlargest(3, size), size, "release2_s"), 2),
                "fresh_process_time_exponent": round(growth(rows, size, "fresh_process_s"), 2),
                "anonymize_exponent": round(growth(rows, size, "anonymize_s"), 2),
                "peak_rss_exponent": round(growth(rows, size, "peak_rss_gib"), 2),
            }
        )
    return df, rates


def plot(df: pd.DataFrame) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    sweeps = [("records", "records", "register"), ("register", "register", "records")]
    for col, (sweep, size, fixed) in enumerate(sweeps):
        part = df[df["sweep"] == sweep]
        for i, (case, rows) in enumerate(part.groupby("case", sort=False)):
            rows = rows.sort_values(size)
            color = f"C{i}"
            axes[0][col].loglog(rows[size], rows["release2_s"], "o-", color=color, label=f"{case}, release 2")
            axes[0][col].loglog(
                rows[size],
                rows["fresh_process_s"],
                "s--",
                color=color,
                alpha=0.6,
                label=f"{case}, fresh process: register read + release 1",
            )
            axes[1][col].loglog(rows[size], rows["peak_rss_gib"], "o-", color=color, label=str(case))
        at = f"{part[fixed].iloc[0]:,}" if len(part) else "?"
        axes[0][col].set_title(f"time per release vs {size} ({fixed} = {at})")
        axes[1][col].set_title(f"peak RSS (both releases) vs {size} ({fixed} = {at})")
        axes[0][col].set_ylabel("seconds")
        axes[1][col].set_ylabel("GiB")
        for ax in (axes[0][col], axes[1][col]):
            ax.set_xlabel(size)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle("serialpub scaling: whole publication per release, ℓ = 2, constant ratio k' = 20, 2 vCPU")
    fig.tight_layout()
    PLOT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(PLOT, dpi=110)


def report(result: dict[str, object]) -> None:
    not_timed = {
        (r["case"], r["register"], r["records"]): r.get("infeasible") or f"failed: {r['failed']}"
        for r in result["runs"]  # type: ignore[attr-defined]
        if "infeasible" in r or "failed" in r
    }
    for (case, n_register, n_records), why in not_timed.items():
        print(f"{case} N={n_register:,} R={n_records:,}: {why}")
    df, rates = tables(result["runs"])  # type: ignore[arg-type]
    if df.empty:
        return
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(df.to_string(index=False, float_format="%.2f"))
        print(pd.DataFrame(rates).to_string(index=False))
    plot(df)
    print(f"plot: {PLOT}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", nargs="+", default=CASES, help="scenario:dilution pairs")
    ap.add_argument("--records", type=int, nargs="+", default=[10_000, 30_000, 100_000, 300_000, 1_000_000])
    ap.add_argument("--register", type=int, default=5_000_000, help="register size of the records sweep")
    ap.add_argument("--registers", type=int, nargs="*", default=[500_000, 1_000_000, 2_000_000])
    ap.add_argument("--at-records", type=int, default=100_000, help="records of the register sweep")
    ap.add_argument("--plot-only", action="store_true")
    ap.add_argument("--resume", action="store_true", help="keep the cases already in scaling.json, run the others")
    ap.add_argument("--_one", nargs=4, metavar=("ROOT", "SCENARIO", "DILUTION", "RECORDS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._one:
        from serialpub.errors import InputError

        root, scenario, dilution, n = Path(args._one[0]), args._one[1], args._one[2], int(args._one[3])
        try:
            print(json.dumps(run_case(root, scenario, dilution, snapshot_pair(root, scenario, n))))
        except InputError as exc:  # the budget check refused the size: a result, not a crash
            if "cannot publish" not in str(exc):
                raise
            print(json.dumps({"infeasible": str(exc)}))
        return
    if args.plot_only:
        report(json.loads(RESULT.read_text()))
        return
    for case in args.cases:
        if case.split(":")[0] not in SENSITIVE or case.split(":")[-1] not in ("register", "presence"):
            ap.error(f"--cases: {case!r} is not <adult|diagnosis>:<register|presence>")
    # the register sweep's last point is the records sweep's (N, at-records) point
    sizes = [("records", args.register, r) for r in args.records]
    sizes += [("register", n, args.at_records) for n in [*args.registers, args.register]]
    result: dict[str, object] = {"machine": machine(), "runs": []}
    done: dict[tuple[str, int, int], dict[str, object]] = {}
    if args.resume and RESULT.exists():
        keep = ("case", "sweep", "register", "records")
        for run in json.loads(RESULT.read_text())["runs"]:
            done[(run["case"], run["register"], run["records"])] = {k: v for k, v in run.items() if k not in keep}
    for case in args.cases:
        scenario, dilution = case.split(":")
        for sweep, n_register, n_records in sizes:
            key = (case, n_register, n_records)
            if key not in done:
                root = register_root(n_register)
                snapshot_pair(root, scenario, n_records)
                proc = subprocess.run(
                    [sys.executable, __file__, "--_one", str(root), scenario, dilution, str(n_records)],
                    capture_output=True,
                    text=True,
                )
                if proc.returncode == 0:
                    done[key] = json.loads(proc.stdout.strip().splitlines()[-1])
                else:  # e.g. killed for lack of memory: a result too, the study goes on
                    print(proc.stderr[-3000:], file=sys.stderr)
                    done[key] = {"failed": f"exit code {proc.returncode}: {proc.stderr.strip()[-300:]}"}
            run = {"case": case, "sweep": sweep, "register": n_register, "records": n_records, **done[key]}
            result["runs"].append(run)  # type: ignore[attr-defined]
            RESULT.write_text(json.dumps(result, indent=2))
            print(json.dumps({k: v for k, v in run.items() if k != "releases"})[:300], flush=True)
    report(result)


if __name__ == "__main__":
    main()
