"""The ``serialpub`` command line.

Bad input raises :class:`serialpub.errors.InputError`; :func:`main` prints it as one
line on standard error and exits with code 2, without a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import numpy as np
import pandas as pd
import typer
from rich.console import Console
from rich.table import Table

from anonymizer import privacy
from serialpub.errors import InputError

app = typer.Typer(
    help="Serial publishing of anonymized microdata under the global guarantee.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console()


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


def _split(text: str) -> list[str]:
    return [c.strip() for c in text.split(",") if c.strip()]


def _read_csv(path: Path) -> pd.DataFrame:
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
    try:
        app()  # standalone mode: typer handles usage errors (exit 2) and --help itself
    except InputError as exc:
        print(f"serialpub: error: {exc}", file=sys.stderr)
        sys.exit(2)

if __name__ == "__main__":
    main()
