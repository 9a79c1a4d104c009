"""An evolving population register for the simulator (docs/design.md section 10).

A real register changes every period: people age, die, are born, immigrate and move. From
the base table, :func:`evolve_series` makes the register of every period and a snapshot of
it. Per period (``periods_per_year`` of them in a year):

- **ageing**: everyone is a year older once a year, in the period of their birthday (a
  random phase per individual); past the oldest age of the hierarchy, they die (leave);
- **leavers**: a ``leave_per_year`` fraction of the register leaves (emigration, death)
  spread over the year's periods;
- **joiners**: as many as ``join_per_year`` of the first register join per year; half are
  born into the register at the youngest age, half immigrate at any age; their other QI
  values and their sensitive value are those of a random base individual;
- **moves**: a ``move_per_year`` fraction changes one of ``move_columns`` (a new address,
  a changed status) to the value of another random individual.

Snapshots follow paper 004's generator (:func:`serialpub.simulate.simulate_series`) on the
base table, restricted to who is in the period's register, with the QI values of that
register; joiners are in a period's snapshot with the snapshot's share of the register.
Everything is drawn from one generator seeded by the spec's seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from serialpub.errors import InputError
from serialpub.simulate import SeriesSpec, simulate_series


@dataclass(frozen=True)
class Evolution:
    """How the register changes (rates per year; recorded in ``series.json``)."""

    age_column: str | None = "age"
    min_age: int = 17
    max_age: int = 90
    periods_per_year: int = 2
    leave_per_year: float = 0.01
    join_per_year: float = 0.01
    move_per_year: float = 0.01
    move_columns: list[str] = field(default_factory=list)

    def validate(self) -> None:
        if self.periods_per_year < 1:
            raise InputError(f"periods per year must be at least 1, got {self.periods_per_year}")
        for name in ("leave_per_year", "join_per_year", "move_per_year"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise InputError(f"{name.replace('_', '-')} must be a fraction in [0, 1], got {getattr(self, name)}")


def evolve_series(
    base: pd.DataFrame, id_column: str, qis: list[str], sensitive: str, spec: SeriesSpec, ev: Evolution
) -> tuple[list[pd.DataFrame], list[pd.DataFrame]]:
    """The register (id and QIs, as text) and the snapshot (id, QIs, sensitive) of every period.

    Raises:
        InputError: rates out of range, or a QI named in the evolution missing from ``qis``.
    """
    ev.validate()
    missing = [c for c in [*([ev.age_column] if ev.age_column else []), *ev.move_columns] if c not in qis]
    if missing:
        raise InputError(f"evolving register: {', '.join(missing)} is not a quasi-identifier")
    rng = np.random.default_rng([spec.seed, 19])  # apart from the snapshot generator's stream
    base = base.reset_index(drop=True)
    population = base[[id_column, *qis]].astype(str).copy()
    sens_of = pd.Series(base[sensitive].astype(str).to_numpy(), index=base[id_column].astype(str))
    phase = pd.Series(rng.integers(0, ev.periods_per_year, size=len(population)), index=population[id_column])
    snapshots_base = simulate_series(base, sensitive, spec)
    n0 = len(population)
    base_ids = pd.Index(population[id_column])
    registers: list[pd.DataFrame] = []
    snapshots: list[pd.DataFrame] = []
    for r, snap in enumerate(snapshots_base, start=1):
        if r > 1:
            population, phase, sens_of = _one_period(
                population, phase, sens_of, base, id_column, qis, sensitive, ev, r, n0, rng
            )
        registers.append(population.reset_index(drop=True))
        present = snap[[id_column, sensitive]].astype(str)
        present = present[_isin(present[id_column], population[id_column])]
        joiners = population[id_column][~_isin(population[id_column], base_ids)]
        picked = joiners[rng.random(joiners.size) < len(snap) / len(base)].to_numpy()
        present = pd.concat(
            [present, pd.DataFrame({id_column: picked, sensitive: sens_of.reindex(picked).to_numpy()})],
            ignore_index=True,
        )
        merged = present.merge(population, on=id_column, how="inner")
        order = pd.Index(population[id_column]).get_indexer(merged[id_column])
        merged = merged.iloc[np.argsort(order, kind="stable")]
        snapshots.append(merged[[id_column, *qis, sensitive]].reset_index(drop=True))
    return registers, snapshots


def _isin(values: pd.Series | pd.Index, among: pd.Series | pd.Index) -> np.ndarray:
    """``values.isin(among)`` by hashing (pandas' isin on Arrow strings loops in Python)."""
    index = pd.Index(np.asarray(among, dtype=object))
    return np.asarray(index.get_indexer(np.asarray(values, dtype=object)) >= 0)


def _one_period(
    population: pd.DataFrame,
    phase: pd.Series,
    sens_of: pd.Series,
    base: pd.DataFrame,
    id_column: str,
    qis: list[str],
    sensitive: str,
    ev: Evolution,
    r: int,
    n0: int,
    rng: np.random.Generator,
) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """The register one period later (ageing, deaths, leavers, joiners, moves), the birthday
    phase and the sensitive value by id, both grown by the joiners."""
    pop = population.copy()
    per = ev.periods_per_year
    if ev.age_column is not None:
        birthday = phase.reindex(pop[id_column]).to_numpy() == r % per
        age = pop[ev.age_column].astype(int).to_numpy() + birthday
        pop[ev.age_column] = age.astype(str)
        pop = pop[age <= ev.max_age]  # past the hierarchy's oldest age: died
    leave = rng.random(len(pop)) < ev.leave_per_year / per
    pop = pop[~leave]
    n_join = int(rng.binomial(n0, ev.join_per_year / per))
    if n_join:
        donors = base.iloc[rng.integers(0, len(base), size=n_join)]
        new = donors[[id_column, *qis]].astype(str).reset_index(drop=True)
        new[id_column] = [f"j{r:04d}-{k}" for k in range(n_join)]
        if ev.age_column is not None:
            born = rng.random(n_join) < 0.5
            new.loc[born, ev.age_column] = str(ev.min_age)
        sens_of = pd.concat([sens_of, pd.Series(donors[sensitive].astype(str).to_numpy(), index=new[id_column])])
        phase = pd.concat([phase, pd.Series(rng.integers(0, per, size=n_join), index=new[id_column])])
        pop = pd.concat([pop, new], ignore_index=True)
    if ev.move_columns:
        movers = np.flatnonzero(rng.random(len(pop)) < ev.move_per_year / per)
        column = rng.integers(0, len(ev.move_columns), size=movers.size)
        donor = rng.integers(0, len(pop), size=movers.size)
        for k, q in enumerate(ev.move_columns):
            values = pop[q].to_numpy().copy()
            values[movers[column == k]] = values[donor[column == k]]
            pop[q] = values
    return pop.reset_index(drop=True), phase, sens_of
