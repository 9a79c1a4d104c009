"""The register and the snapshots as the audit counts them: distinct QI combinations.

Individuals with the same QI values share every factor of p (paper 004, Lemma 4), so the
audit works on the register's distinct QI combinations ("cells") with their counts, and
reads a snapshot as the cell and protected value of every record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from anonymizer.hierarchy import Hierarchy
from serialpub.analysis.audit.geometry import column_codes, row_ids
from serialpub.analysis.audit.spellings import value_codes
from serialpub.errors import InputError, quoted

if TYPE_CHECKING:
    import pandas as pd

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Cells:
    """Distinct register QI combinations: leaves (C, d), counts (C,), a representative row,
    and the cell of every register row (N,). With ``per_individual`` every individual is
    a cell of its own (the presence audit with snapshots, where individuals with equal QI
    values differ in presence)."""

    leaves: IntArray
    counts: IntArray
    first_row: IntArray
    cell_of_row: IntArray


def register_cells(
    register: pd.DataFrame,
    id_column: str,
    qis: list[str],
    hierarchies: dict[str, Hierarchy],
    per_individual: bool = False,
) -> Cells:
    missing = [c for c in [id_column, *qis] if c not in register.columns]
    if missing:
        raise InputError(
            f"register: missing column(s) {', '.join(missing)}; it has {', '.join(map(str, register.columns))}. "
            "The register needs the id column and every quasi-identifier of the releases"
        )
    dup = register[id_column].duplicated()
    if dup.any():
        row = int(np.flatnonzero(dup.to_numpy())[0])
        raise InputError(
            f"register: id {quoted(register[id_column].iloc[row])} appears twice (data row {row + 1}); "
            "ids must be unique"
        )
    n = len(register)
    leaves = np.empty((n, len(qis)), dtype=np.int32)  # int32: every leaf id fits, at half the memory of int64
    for a, qi in enumerate(qis):
        codes, uniques = column_codes(register[qi])
        empty = (codes < 0) | np.isin(codes, [i for i, u in enumerate(uniques) if u == ""])
        if empty.any():
            row = int(np.flatnonzero(empty)[0])
            raise InputError(f"register: column '{qi}' is empty in data row {row + 1}; every QI needs a value")
        h = hierarchies[qi]
        mapped = np.array([h.node(u) if h.has_label(u) else -1 for u in uniques], dtype=np.int64)
        bad = (mapped < 0) | (mapped >= h.n_leaves)
        if bad.any():
            u = int(np.flatnonzero(bad)[0])
            row = int(np.flatnonzero(codes == u)[0])
            raise InputError(
                f"register: value {quoted(uniques[u])} of column '{qi}' (data row {row + 1}) is not a leaf of the "
                f"hierarchy of '{qi}'; add a row for it to hierarchies/{qi}.csv or correct the register"
            )
        leaves[:, a] = mapped[codes]
    if per_individual:
        rows = np.arange(n, dtype=np.int64)
        return Cells(leaves.astype(np.int64), np.ones(n, dtype=np.int64), rows, rows)
    codes, first = row_ids(leaves, [hierarchies[q].n_leaves for q in qis])
    counts = np.bincount(codes, minlength=first.size).astype(np.int64)
    return Cells(leaves[first].astype(np.int64), counts, first, codes)


@dataclass(frozen=True)
class Snapshot:
    """One release's snapshot as the data holder's audit reads it: the cell of every
    record and the index of its protected value (-1 for none), both shape (R,)."""

    cell: IntArray
    value: IntArray


def snapshot_records(
    table: pd.DataFrame,
    register: pd.DataFrame,
    id_column: str,
    sensitive: str,
    values: list[str],
    cells: Cells,
    where: str,
) -> Snapshot:
    """The records of one snapshot (id and sensitive columns as text) as cells and
    protected-value indexes; ids must be unique and in the register."""
    import pandas as pd

    for col in (id_column, sensitive):
        if col not in table.columns:
            raise InputError(f"{where}: no {col!r} column; the snapshot needs the id and the sensitive column")
    ids = table[id_column].astype(str)
    dup = ids.duplicated().to_numpy()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        raise InputError(f"{where}, line {i + 2}: id {quoted(ids.iloc[i])} appears twice; one record per individual")
    rows = pd.Index(register[id_column].astype(str)).get_indexer(pd.Index(ids))
    if (rows < 0).any():
        i = int(np.flatnonzero(rows < 0)[0])
        raise InputError(f"{where}, line {i + 2}: individual {quoted(ids.iloc[i])} is not in the population register")
    # a value spelled another way is the protected value it spells (serialpub.io.spelling)
    codes, labels = pd.factorize(table[sensitive].astype(str))
    value = value_codes(values, list(labels))[codes]
    return Snapshot(cell=cells.cell_of_row[rows], value=value)
