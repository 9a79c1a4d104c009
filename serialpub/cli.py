"""The ``serialpub`` command line.

Bad input raises :class:`serialpub.errors.InputError`; :func:`main` prints it as one
line on standard error and exits with code 2, without a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import numpy as np
import typer
from rich import box
from rich.console import Console
from rich.table import Table

from anonymizer import privacy
from serialpub.errors import InputError, ValidationFailed

if TYPE_CHECKING:
    import pandas as pd

app = typer.Typer(
    help="Serial publishing of anonymized microdata under the global guarantee.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
# a pipe or CI log gets a width that fits the release table; a terminal keeps its own
console = Console(width=None if sys.stdout.isatty() else 120)


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
    from serialpub.simulate import PRESETS, SeriesSpec, write_series

    if preset not in PRESETS:
        raise InputError(f"--preset must be one of {', '.join(PRESETS)}, got {preset!r}")
    params = dict(PRESETS[preset])
    for key, value in (("rounds", rounds), ("carry_over", carry_over), ("redraw", redraw)):
        if value is not None:
            params[key] = value
    spec = SeriesSpec(seed=seed, **params)  # type: ignore[arg-type]
    if base is None:
        table, source = adult.load_adult(), "bundled UCI Adult (cleaned, 45,222 rows)"
        qis = adult.QUASI_IDENTIFIERS if qi is None else _split(qi)
        sens = sensitive or adult.SENSITIVE
    else:
        if qi is None or sensitive is None:
            raise InputError("with --base, also give --qi and --sensitive (the columns to use)")
        table, source = _read_csv(base), str(base)
        qis, sens = _split(qi), sensitive
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
    k_prime: Annotated[int, typer.Option("--k-prime", help="k' of the constant-ratio strategy")] = 20,
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
    budget: Annotated[
        float | None,
        typer.Option("--suppression-budget", help="fraction of records (paper model only; default 0.05 there)"),
    ] = None,
    protected: Annotated[
        str | None, typer.Option("--protected", help="comma-separated occupations to protect (default: all)")
    ] = None,
    rounds: Annotated[int, typer.Option("--rounds", help="periods to simulate and publish")] = 20,
    seed: Annotated[int, typer.Option("--seed", help="seed of the simulated snapshots")] = 0,
) -> None:
    """Create a workspace from the bundled Adult data and publish its releases in order."""
    from rich.progress import Progress

    from serialpub import demo as demo_mod
    from serialpub.pipeline import Publisher

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
        protected=None if protected is None else _split(protected),
        rounds=rounds,
        seed=seed,
    )
    console.print(
        f"workspace {out}: register of 45,222 individuals, {rounds} snapshots, "
        f"{ws.config.guarantee} guarantee, ℓ = {ws.config.ell:g}, {ws.config.strategy} strategy, "
        f"{ws.config.dilution} dilution"
    )
    publisher = Publisher(ws)
    outcomes = []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("publishing", total=rounds)
        for snap in demo_mod.snapshots(ws):
            outcomes.append(publisher.publish(snap))
            progress.advance(task)
    console.print(_outcome_table(outcomes, ws.config.ell))
    from serialpub.report.series import write_series_report

    with console.status("series report (replaying the localized baseline for comparison)"):
        series = write_series_report(publisher)
    console.print(f"releases in {ws.dataset_dir}, each with its report.html; series report: {series}")
    console.print(f"check the releases independently with: serialpub audit {out}")


def _outcome_table(outcomes: list, ell: float) -> Table:
    table = Table(
        title="Published releases",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        caption=(
            f"group size in candidates (cand) and records (rec); max p: largest breach probability "
            f"over all releases so far (bound 1/ℓ = {1 / ell:.3f}); q.err: average relative error of "
            "5,000 random range-count queries; s: seconds"
        ),
        caption_justify="left",
    )
    for col in (
        "rel",
        "records",
        "groups",
        "supp",
        "cand avg",
        "cand max",
        "rec avg",
        "rec max",
        "max p",
        "q.err",
        "s",
    ):
        table.add_column(col, justify="right")
    for o in outcomes:
        table.add_row(
            str(o.seq),
            str(o.records),
            str(o.groups),
            str(o.suppressed),
            f"{o.avg_candidates:.0f}",
            str(o.max_candidates),
            f"{o.avg_records:.1f}",
            str(o.max_records),
            f"{o.max_breach:.4f}",
            f"{o.query_error:.2f}",
            f"{o.seconds:.1f}",
        )
    return table


@app.command()
def release(
    snapshot: Annotated[Path, typer.Option("--snapshot", help="the period's snapshot CSV")],
    config: Annotated[Path, typer.Option("--config", help="serialpub.yaml or its folder")] = Path("."),
    period: Annotated[str | None, typer.Option("--period", help="period label (default: from the file name)")] = None,
) -> None:
    """Prepare the next release from one snapshot: check the inputs, anonymize, validate.
    It then waits for a sign-off ('serialpub approve' or 'serialpub reject'), unless the
    configuration approves automatically (sign_off.auto_approve), when it is published."""
    from serialpub.config import load_config
    from serialpub.pipeline import Publisher

    ws = load_config(config)
    publisher = Publisher(ws)
    if ws.config.sign_off.auto_approve:
        outcome = publisher.publish(snapshot, period)
        console.print(_outcome_table([outcome], ws.config.ell))
        console.print(f"published {outcome.directory} (approved automatically: sign_off.auto_approve)")
        return
    staged = publisher.prepare(snapshot, period, owner=AWAITING_SIGN_OFF)
    console.print(_outcome_table([staged.outcome], ws.config.ell))
    report = publisher.report(staged.seq)
    console.print(
        f"release {staged.seq} (period {staged.period!r}) passed validation and waits for its sign-off.\n"
        f"read its report before deciding: {report['report_page']}\n"
        f"approve: serialpub approve --config {ws.root} --release {staged.seq} --by NAME [--comment TEXT]\n"
        f"reject:  serialpub reject --config {ws.root} --release {staged.seq} --by NAME --comment WHY"
    )


@app.command()
def approve(
    release_no: Annotated[int, typer.Option("--release", help="sequence number of the validated release")],
    by: Annotated[str, typer.Option("--by", help="who approves (recorded in the sign-off and the manifest)")],
    comment: Annotated[str, typer.Option("--comment", help="recorded with the decision")] = "",
    config: Annotated[Path, typer.Option("--config", help="serialpub.yaml or its folder")] = Path("."),
) -> None:
    """Approve the validated release and publish it. The decision, approver, time and the
    checksum of the release report they read are stored in the state and the manifest."""
    from serialpub.config import load_config
    from serialpub.pipeline import Publisher

    ws = load_config(config)
    publisher = Publisher(ws)
    publisher.recover()
    sign_off = publisher.approve(release_no, by, comment)
    final = publisher.finish(release_no)
    console.print(f"release {release_no} of {ws.config.dataset!r} approved by {sign_off.approver}; published {final}")


@app.command()
def report(
    config: Annotated[Path, typer.Option("--config", help="serialpub.yaml or its folder")] = Path("."),
    release_no: Annotated[
        int | None, typer.Option("--release", help="show this release's report instead of writing the series report")
    ] = None,
    baseline: Annotated[
        bool, typer.Option("--baseline/--no-baseline", help="replay the localized baseline for comparison")
    ] = True,
    figures: Annotated[
        Path | None, typer.Option("--figures", help="also write the series figures as PNG files into this folder")
    ] = None,
) -> None:
    """Write the series report (every published release, with the localized baseline), or
    with --release print where that release's report is (written when it was validated)."""
    from serialpub.config import load_config
    from serialpub.pipeline import Publisher
    from serialpub.report.series import write_series_report

    ws = load_config(config)
    publisher = Publisher(ws)
    if release_no is not None:
        console.print(str(publisher.report_page(release_no)))
        return
    console.print(f"series report: {write_series_report(publisher, baseline=baseline, png_dir=figures)}")


@app.command()
def history(
    config: Annotated[Path, typer.Option("--config", help="serialpub.yaml or its folder")] = Path("."),
) -> None:
    """List the published releases of the configured dataset with their parameters."""
    from serialpub.config import load_config
    from state.store import StateStore, open_engine

    ws = load_config(config)
    rows = StateStore(open_engine(ws.database_url)).published(ws.config.dataset)
    if not rows:
        console.print(f"dataset {ws.config.dataset!r}: nothing published yet")
        return
    table = Table(title=f"Releases of {ws.config.dataset}")
    for col in ("release", "period", "published (UTC)", "records", "groups", "suppressed", "max p", "parameters"):
        table.add_column(col)
    for r in rows:
        p = r.params
        strategy_param = f"k'={p['k_prime']}" if p["strategy"] == "constant" else f"α={p['alpha']:g}"
        imported = ", imported" if r.imported else ""
        param = f"{p['guarantee']}, ℓ={p['l']:g}, {p['strategy']} {strategy_param}, {p['dilution']}{imported}"
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


@app.command()
def audit(
    workspace: Annotated[Path, typer.Argument(help="workspace folder (register.csv, hierarchies/, releases/)")],
    dataset: Annotated[str | None, typer.Option("--dataset", help="dataset name if there are several")] = None,
    snapshots: Annotated[
        Path | None,
        typer.Option(
            "--snapshots",
            help="folder with snapshot-<period>.csv of every release: the data holder's exact, mechanism-aware audit",
        ),
    ] = None,
) -> None:
    """Recompute every breach probability from the register, hierarchies and published files
    alone (not the state); exit 1 on any violation or overlapping regions. With --snapshots,
    also count the records each release did not publish (an adversary who knows the
    algorithm can infer them) and, under presence, only the present individuals."""
    from serialpub.audit import audit_workspace, format_report

    result = audit_workspace(workspace, dataset, snapshots=snapshots)
    console.print(format_report(result))
    if not result.ok:
        raise typer.Exit(1)


db_app = typer.Typer(help="The state database.", no_args_is_help=True)
app.add_typer(db_app, name="db")


@db_app.command("upgrade")
def db_upgrade(
    config: Annotated[Path, typer.Option("--config", help="serialpub.yaml or its folder")] = Path("."),
) -> None:
    """Migrate the state database to the schema this serialpub needs (back it up first)."""
    from serialpub.config import load_config
    from state.engine import create, masked, upgrade

    ws = load_config(config)
    before, after = upgrade(create(ws.database_url))
    console.print(f"{masked(ws.database_url)}: schema {before or 'empty'} -> {after}", soft_wrap=True)


state_app = typer.Typer(help="The statistics file (the state) of a dataset.", no_args_is_help=True)
app.add_typer(state_app, name="state")


@state_app.command("verify")
def state_verify(
    config: Annotated[Path, typer.Option("--config", help="serialpub.yaml or its folder")] = Path("."),
) -> None:
    """Rebuild the state from the register, the hierarchies and the published releases and
    compare it with the database; exit 1 on any difference or unverifiable pair."""
    from serialpub.config import load_config
    from serialpub.verify import verify_state

    report = verify_state(load_config(config))
    console.print(report.format(), markup=False, highlight=False)
    if not report.ok:
        raise typer.Exit(1)


@app.command("import-release")
def import_release_command(
    data: Annotated[
        Path, typer.Option("--data", help="the release as published: Parquet or CSV, QI node labels + sensitive")
    ],
    period: Annotated[str, typer.Option("--period", help="its period label (later than the last published)")],
    ell: Annotated[float, typer.Option("--l", help="ℓ the other tool enforced")],
    protected: Annotated[str, typer.Option("--protected", help="'all' or comma-separated protected values")],
    dilution: Annotated[str, typer.Option("--dilution", help="register or presence")],
    config: Annotated[Path, typer.Option("--config", help="serialpub.yaml or its folder")] = Path("."),
    snapshot: Annotated[
        Path | None, typer.Option("--snapshot", help="CSV of the present individuals (needed for presence)")
    ] = None,
    strategy_name: Annotated[
        str | None, typer.Option("--strategy", help="constant or geometric (default: the configuration's)")
    ] = None,
    k_prime: Annotated[int | None, typer.Option("--k-prime", help="k' of the constant-ratio strategy")] = None,
    alpha: Annotated[float | None, typer.Option("--alpha", help="α of the geometric strategy")] = None,
) -> None:
    """Record a release published with another tool as the dataset's next release."""
    from serialpub.config import load_config
    from serialpub.importing import import_release

    ws = load_config(config)
    values: str | list[str] = "all" if protected.strip() == "all" else _split(protected)
    o = import_release(ws, data, period, ell, values, dilution, snapshot, strategy_name, k_prime, alpha)
    console.print(
        f"imported {data} as release {o.seq} (period {o.period!r}): {o.records} records in {o.groups} groups, "
        f"{o.avg_candidates:.0f} candidates per group on average (max {o.max_candidates}), "
        f"max p = {o.max_breach:.4f} (bound 1/ℓ = {1 / ell:.4f})",
        markup=False,
        highlight=False,
    )
    console.print(f"published {o.directory}", markup=False, highlight=False)
    if o.exceeds_bound:
        console.print(
            "warning: after this release some individual's breach probability exceeds 1/ℓ; the tables are "
            "public already, so the state records it; later releases cannot lower it",
            markup=False,
            highlight=False,
        )


@app.command()
def reject(
    release_no: Annotated[int, typer.Option("--release", help="sequence number of the open release")],
    by: Annotated[str, typer.Option("--by", help="who rejects (recorded in the sign-off)")],
    comment: Annotated[str, typer.Option("--comment", help="why (recorded)")] = "",
    config: Annotated[Path, typer.Option("--config", help="serialpub.yaml or its folder")] = Path("."),
) -> None:
    """Reject the release being prepared: its staged files are removed, the state is unchanged."""
    from serialpub.config import load_config
    from serialpub.pipeline import reject_release

    ws = load_config(config)
    rejected = reject_release(ws, release_no, by, comment)
    console.print(f"release {rejected.seq} (period {rejected.period!r}) of {ws.config.dataset!r} rejected by {by}")


#: owner of a release that waits for a sign-off from the command line (recovery leaves it)
AWAITING_SIGN_OFF = "awaiting sign-off (serialpub approve / reject)"


def _split(text: str) -> list[str]:
    return [c.strip() for c in text.split(",") if c.strip()]


def _read_csv(path: Path) -> pd.DataFrame:
    import pandas as pd

    try:
        return pd.read_csv(path, dtype=str, na_filter=False)
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: the file is empty; it needs a header row and data rows") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a readable CSV file ({exc}); save it as UTF-8 CSV") from None


def main() -> None:
    """Entry point of the ``serialpub`` command."""
    from state.engine import StateError

    try:
        app()  # standalone mode: typer handles usage errors (exit 2) and --help itself
    except (InputError, StateError) as exc:
        print(f"serialpub: error: {exc}", file=sys.stderr)
        for line in getattr(exc, "failures", []):  # InputChecksFailed: one line per failed expectation
            print(f"  - {line}", file=sys.stderr)
        sys.exit(2)
    except ValidationFailed as exc:
        print(f"serialpub: validation failed: {exc}", file=sys.stderr)
        for line in exc.failures:
            print(f"  - {line}", file=sys.stderr)
        sys.exit(3)


if __name__ == "__main__":
    main()
