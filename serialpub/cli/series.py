"""Commands about a series as a whole: compare strategies, simulate snapshots, run the demo,
list the published releases."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from serialpub.cli.app import app, console, outcome_table, ratio_option, read_csv_table, split_list
from serialpub.errors import InputError


@app.command()
def strategy(
    ell: Annotated[float, typer.Option("--l", "--ell", help="ℓ: breach probability bound is 1/ℓ (>= 2 in practice)")],
    k_prime: Annotated[int | None, typer.Option("--k-prime", help="k' for the constant-ratio strategy")] = None,
    alpha: Annotated[float | None, typer.Option("--alpha", help="α > 1 for the geometric strategy")] = None,
    releases: Annotated[int, typer.Option("--releases", help="how many linked releases to tabulate")] = 10,
) -> None:
    """Print the group-size ratio targets of the constant-ratio and geometric strategies.

    The ratio is a group's candidates divided by its records carrying the protected value
    (paper 004, Table 1 and Figure 5).
    """
    if ell < 1:
        raise InputError(f"--l must be at least 1 (1/ℓ is a probability bound), got {ell}")
    if k_prime is None and alpha is None:
        raise InputError("give --k-prime (constant ratio) or --alpha (geometric), or both")
    if releases < 1:
        raise InputError(f"--releases must be at least 1, got {releases}")
    if alpha is not None and not alpha > 1:
        raise InputError(f"--alpha must be greater than 1 (α = 1 makes later releases infeasible), got {alpha}")
    if k_prime is not None and k_prime < 1:
        raise InputError(f"--k-prime must be at least 1, got {k_prime}")
    import numpy as np  # the publisher's commands import what they compute with when they run

    from anonymizer import privacy

    table = Table(title=f"Targets for ℓ = {ell:g} (worst case: every release links the individual to s)")
    table.add_column("linked release k", justify="right")
    columns: list[tuple[np.ndarray, np.ndarray]] = []
    if k_prime is not None:
        target = privacy.constant_ratio_target(ell, k_prime)
        console.print(
            f"constant ratio: ñ_c = {target:.4f} for ℓ = {ell:g}, k' = {k_prime} "
            f"(each of at most {k_prime} releases linking an individual to a protected value)"
        )
        ks = np.arange(1, releases + 1)
        const = np.where(ks <= k_prime, target, np.inf)
        const_p = 1.0 - np.cumprod(np.where(ks <= k_prime, 1.0 - 1.0 / target, 1.0))
        columns.append((const, const_p))
        table.add_column(f"constant ratio k'={k_prime}", justify="right")
        table.add_column("p after", justify="right")
    if alpha is not None:
        targets, breach = privacy.geometric_sequence(ell, alpha, releases)
        console.print(f"geometric: α·ñ(k) for α = {alpha:g}, first target {targets[0]:.4f}")
        columns.append((targets, breach))
        table.add_column(f"geometric α={alpha:g}", justify="right")
        table.add_column("p after", justify="right")
    for k in range(releases):
        cells = [str(k + 1)]
        for targets_col, p_col in columns:
            if np.isfinite(targets_col[k]):
                cells += [f"{targets_col[k]:.4f}", f"{p_col[k]:.4f}"]
            else:
                cells += ["never", f"{p_col[k]:.4f}"]
        table.add_row(*cells)
    console.print(table)


@app.command()
def simulate(
    out: Annotated[Path, typer.Option("--out", help="folder to write register.csv, snapshots/ and series.json")],
    base: Annotated[Path | None, typer.Option("--base", help="base table CSV; default: the bundled UCI Adult")] = None,
    id_column: Annotated[str, typer.Option("--id-column", help="column with the individual id")] = "id",
    qi: Annotated[str | None, typer.Option("--qi", help="comma-separated quasi-identifiers")] = None,
    sensitive: Annotated[str | None, typer.Option("--sensitive", help="sensitive column")] = None,
    preset: Annotated[str, typer.Option("--preset", help="paper (20 % carried over) or cohort (80 %)")] = "paper",
    rounds: Annotated[int | None, typer.Option("--rounds", help="number of periods R")] = None,
    carry_over: Annotated[float | None, typer.Option("--carry-over", help="fraction of T(i-1) carried into Ti")] = None,
    redraw: Annotated[float | None, typer.Option("--redraw", help="fraction of Ti given a new sensitive value")] = None,
    seed: Annotated[int, typer.Option("--seed", help="random seed; same seed, same files")] = 0,
) -> None:
    """Make a series of periodic snapshots and the population register (paper 004, section 8)."""
    from serialpub.datasets import adult
    from serialpub.series_files import write_series
    from serialpub.simulate import PRESETS, SeriesSpec

    if preset not in PRESETS:
        raise InputError(f"--preset must be one of {', '.join(PRESETS)}, got {preset!r}")
    params = dict(PRESETS[preset])
    for key, value in (("rounds", rounds), ("carry_over", carry_over), ("redraw", redraw)):
        if value is not None:
            params[key] = value
    spec = SeriesSpec(seed=seed, **params)  # type: ignore[arg-type]
    if base is None:
        table, source = adult.load_adult(), "bundled UCI Adult (cleaned, 45,222 rows)"
        qis = adult.QUASI_IDENTIFIERS if qi is None else split_list(qi)
        sens = sensitive or adult.SENSITIVE
    else:
        if qi is None or sensitive is None:
            raise InputError("with --base, also give --qi and --sensitive (the columns to use)")
        table, source = read_csv_table(base), str(base)
        qis, sens = split_list(qi), sensitive
    written = write_series(out, table, id_column, qis, sens, spec, source)
    console.print(f"wrote {len(written)} files to {out}:")
    console.print(f"  {written[0]}  (population register, {len(table)} individuals)")
    console.print(f"  {out / 'snapshots'}/snapshot-0001.csv .. snapshot-{spec.rounds:04d}.csv")
    console.print(f"  {written[-1]}  (parameters and row counts)")


@app.command()
def demo(
    out: Annotated[Path, typer.Option("--out", help="workspace folder to create (an earlier demo's is replaced)")],
    guarantee: Annotated[
        str, typer.Option("--guarantee", help="global, or localized (the per-release baseline)")
    ] = "global",
    dilution: Annotated[str, typer.Option("--dilution", help="register (virtual dilution) or presence")] = "register",
    ell: Annotated[float, typer.Option("--l", help="ℓ")] = 2,
    strategy_name: Annotated[str, typer.Option("--strategy", help="constant or geometric")] = "constant",
    k_prime: Annotated[
        int | None, typer.Option("--k-prime", help="k' of the constant ratio (default: 20, or --rounds if fewer)")
    ] = None,
    after_k_prime: Annotated[
        str, typer.Option("--after-k-prime", help="renew (default) or stop (paper 004's rule): a pair past k' releases")
    ] = "renew",
    alpha: Annotated[float, typer.Option("--alpha", help="α of the geometric strategy")] = 2.0,
    suppression_model: Annotated[
        str, typer.Option("--suppression-model", help="mechanism (default), or paper (paper 004's weaker model)")
    ] = "mechanism",
    algorithm: Annotated[
        str | None,
        typer.Option("--algorithm", help="topdown (default) or bottomup (paper 004's; default under the paper model)"),
    ] = None,
    partition_model: Annotated[
        str | None,
        typer.Option(
            "--partition-model",
            help="published (default) or parts (finer groups; the partition is evidence)",
        ),
    ] = None,
    split_rule: Annotated[
        str,
        typer.Option(
            "--split-rule",
            help="widest (default) or history (cuts where the published history shows the association)",
        ),
    ] = "widest",
    propensity_ratio: Annotated[
        str,
        typer.Option(
            "--propensity-ratio",
            help="ρ: each group is charged ρ times its records (default 1); or value=ρ items joined by commas, "
            "one ρ per protected value (the others 1)",
        ),
    ] = "1",
    budget: Annotated[
        float | None,
        typer.Option("--suppression-budget", help="fraction of records (paper model only; default 0.05 there)"),
    ] = None,
    protected: Annotated[
        str | None, typer.Option("--protected", help="comma-separated occupations to protect (default: all)")
    ] = None,
    rounds: Annotated[int, typer.Option("--rounds", help="periods to simulate and publish")] = 20,
    seed: Annotated[int, typer.Option("--seed", help="seed of the simulated snapshots")] = 0,
    evolving_register: Annotated[
        bool,
        typer.Option(
            "--evolving-register",
            help="the register changes every period: ages advance, 1 % leave, 1 % join, 1 % move a year",
        ),
    ] = False,
) -> None:
    """Create a workspace from the bundled Adult data and publish its releases in order."""
    from rich.progress import Progress

    from serialpub import demo as demo_mod
    from serialpub.workflow.publisher import Publisher

    ws = demo_mod.create_workspace(
        out,
        ell=ell,
        strategy=strategy_name,
        k_prime=k_prime,
        after_k_prime=after_k_prime,
        alpha=alpha,
        guarantee=guarantee,
        dilution=dilution,
        budget=budget,
        suppression_model=suppression_model,
        algorithm=algorithm,
        partition_model=partition_model,
        split_rule=split_rule,
        propensity_ratio=ratio_option(propensity_ratio),
        protected=None if protected is None else split_list(protected),
        rounds=rounds,
        seed=seed,
        evolving_register=evolving_register,
    )
    console.print(
        f"workspace {out}: register of 45,222 individuals{' (changing every period)' if evolving_register else ''}, "
        f"{rounds} snapshots, "
        f"{ws.config.guarantee} guarantee, ℓ = {ws.config.ell:g}, {ws.config.strategy} strategy, "
        f"{ws.config.dilution} dilution"
    )
    publisher = Publisher(ws)
    outcomes = []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("publishing", total=rounds)
        for snap in demo_mod.snapshots(ws):
            period_register = demo_mod.register_of(ws, snap)
            if period_register is not None:  # the office updates its register file each period
                shutil.copyfile(period_register, ws.register_path)
            outcomes.append(publisher.publish(snap))
            progress.advance(task)
    console.print(outcome_table(outcomes, ws.config.ell))
    from serialpub.known_breach import announcement

    for model in ws.config.accept_known_breach:  # every release was approved automatically
        console.print(announcement(model, automatic=True), markup=False)
    with console.status("series report (replaying the localized baseline for comparison)"):
        series = publisher.series_report()
    console.print(f"releases in {ws.dataset_dir}, each with its report.html; series report: {series}")
    key = out / "keys" / "publisher.pub"
    console.print(f"check the releases independently with: serialpub audit {out} --public-key {key}")


@app.command()
def history(
    config: Annotated[Path, typer.Option("--config", help="serialpub.yaml or its folder")] = Path("."),
    everything: Annotated[
        bool, typer.Option("--all", help="also every sign-off decision and failed attempt, from the audit log")
    ] = False,
) -> None:
    """List the published releases of the configured dataset with their parameters; with
    --all, also every decision (approved, rejected) and failed attempt with who, when and why."""
    from anonymizer.settings import Strategy
    from serialpub.config import load_config
    from state.store import StateStore, open_engine

    ws = load_config(config)
    store = StateStore(open_engine(ws.database_url))
    rows = store.published(ws.config.dataset)
    if everything:
        _decisions(store.audit_log(ws.config.dataset), ws.config.dataset)
    if not rows:
        console.print(f"dataset {ws.config.dataset!r}: nothing published yet")
        return
    table = Table(title=f"Releases of {ws.config.dataset}")
    for col in ("release", "period", "published (UTC)", "records", "groups", "suppressed", "max p", "parameters"):
        table.add_column(col)
    for r in rows:
        p = r.params
        strategy_param = f"k'={p.k_prime}" if p.strategy is Strategy.CONSTANT else f"α={p.alpha:g}"
        imported = ", imported" if r.imported else ""
        param = f"{p.guarantee}, ℓ={p.l:g}, {p.strategy} {strategy_param}, {p.dilution}{imported}"
        table.add_row(
            str(r.seq),
            r.period,
            r.published_at.strftime("%Y-%m-%d %H:%M"),
            str(r.records),
            str(r.groups),
            str(r.suppressed),
            f"{r.max_breach:.4f}",
            param,
        )
    console.print(table)


def _decisions(log: list[dict[str, object]], dataset: str) -> None:
    """The sign-off decisions and failed attempts of the append-only audit log, oldest first."""
    table = Table(title=f"Decisions on releases of {dataset} (audit log)")
    for col in ("release", "decision", "by", "at (UTC)", "comment or reason"):
        table.add_column(col)
    for e in log:
        if e["action"] not in ("approved", "rejected", "failed"):
            continue
        detail = e["detail"] if isinstance(e["detail"], dict) else {}
        at = e["at"]
        table.add_row(
            str(e["release"]),
            str(e["action"]),
            str(e["actor"]),
            at.strftime("%Y-%m-%d %H:%M:%S") if hasattr(at, "strftime") else str(at),
            str(detail.get("comment", detail.get("reason", ""))),
        )
    console.print(table)
