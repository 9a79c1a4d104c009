"""Series generator of paper 004, section 8: periodic snapshots of one base table.

From a base table of N individuals: shuffle, cut into R partitions P1..PR of equal size
(sizes differ by at most one), set T1 = P1 and Ti = Pi plus a random ``carry_over``
fraction of T(i-1); then in Ti a random ``redraw`` fraction of rows get a sensitive value
copied from a random row of the base table (the overall distribution). Everything is
drawn from one ``numpy.random.Generator`` seeded by ``seed``, so the same seed gives the
same series. The population register is every individual of the base table with its
quasi-identifiers. :mod:`serialpub.series_files` writes a series as files.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from serialpub.errors import InputError, quoted

PRESETS = {
    # paper 004, section 8: 20 rounds, 20 % carried over, 20 % of values redrawn
    "paper": {"rounds": 20, "carry_over": 0.2, "redraw": 0.2},
    # a stress series: most individuals stay from one period to the next
    "cohort": {"rounds": 20, "carry_over": 0.8, "redraw": 0.2},
}


@dataclass(frozen=True)
class SeriesSpec:
    """Parameters of a simulated series (recorded in ``series.json``)."""

    rounds: int = 20
    carry_over: float = 0.2
    redraw: float = 0.2
    seed: int = 0

    def validate(self) -> None:
        if self.rounds < 1:
            raise InputError(f"--rounds must be at least 1, got {self.rounds}")
        for name, value in (("carry-over", self.carry_over), ("redraw", self.redraw)):
            if not 0.0 <= value <= 1.0:
                raise InputError(f"--{name} must be a fraction in [0, 1], got {value}")


def check_base_table(base: pd.DataFrame, id_column: str, columns: list[str], source: str) -> None:
    """Raise InputError if the base table is empty, lacks a declared column, or repeats an id."""
    missing = [c for c in [id_column, *columns] if c not in base.columns]
    if missing:
        raise InputError(
            f"{source}: missing column(s) {', '.join(missing)}; the file has "
            f"{', '.join(map(str, base.columns))}. Rename the columns or pass the right --qi/--sensitive/--id-column"
        )
    if base.empty:
        raise InputError(f"{source}: the table has no rows; give at least one row per period")
    dup = base[id_column].duplicated()
    if dup.any():
        row = int(np.flatnonzero(dup.to_numpy())[0])
        raise InputError(
            f"{source}: id {quoted(base[id_column].iloc[row])} appears twice (data row {row + 1}); ids must be unique"
        )


def simulate_series(base: pd.DataFrame, sensitive: str, spec: SeriesSpec) -> list[pd.DataFrame]:
    """Snapshots T1..TR, each a subset of the base rows with possibly redrawn sensitive values.

    Args:
        base: the base table, one row per individual.
        sensitive: the sensitive column whose values are redrawn.
        spec: rounds, fractions and seed.

    Returns:
        R DataFrames with the base table's columns, rows in base-table order.

    Raises:
        InputError: for parameters out of range or more rounds than rows.
    """
    spec.validate()
    n = len(base)
    if spec.rounds > n:
        raise InputError(f"--rounds {spec.rounds} exceeds the {n} rows of the base table")
    rng = np.random.default_rng(spec.seed)
    partitions = np.array_split(rng.permutation(n), spec.rounds)
    values = base[sensitive].to_numpy()
    snapshots: list[pd.DataFrame] = []
    prev_rows = np.empty(0, dtype=np.int64)
    prev_values = values[:0]
    for part in partitions:
        carried = rng.choice(prev_rows.size, size=round(spec.carry_over * prev_rows.size), replace=False)
        rows = np.concatenate([part, prev_rows[carried]])
        current = np.concatenate([values[part], prev_values[carried]])
        changed = rng.choice(rows.size, size=round(spec.redraw * rows.size), replace=False)
        current[changed] = values[rng.integers(0, n, size=changed.size)]
        order = np.argsort(rows, kind="stable")
        rows, current = rows[order], current[order]
        snap = base.iloc[rows].copy()
        snap[sensitive] = current
        snapshots.append(snap.reset_index(drop=True))
        prev_rows, prev_values = rows, current
    return snapshots
