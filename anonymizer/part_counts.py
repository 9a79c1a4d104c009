"""The top-down search's protected-value counts and requirements, kept sparse.

A cell (a distinct QI leaf combination, :class:`anonymizer.search.Cells`) holds records
of few protected values, and cells share their requirement rows: at 1M records over the 5M
register of ``benchmarks/bench_scaling.py``, 16,581 cells hold 12,514 non-zero counts of
200 values (0.4 % of the dense (C, V) matrix), and every cell has the same requirement row.
Summing the dense counts and taking the maximum of the dense requirements of every part of
every split, for every QI at every level, was most of the search's time.

So the open cells' counts are (cell, value, count) triplets with count > 0, and their
requirements are rows of a table of distinct rows. A part's requirement for a value is the
maximum over the distinct rows of its cells, which is the dense maximum over its cells (the
same float values, so every comparison made on them is the same), read only where a
verdict needs it: where the part or its region holds records of the value
(:func:`anonymizer.privacy.meets_requirement`'s comparison ignores values with n_s = 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from anonymizer.arrays import expand_csr

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def _csr_start(sorted_rows: IntArray, n_rows: int) -> IntArray:
    """CSR row starts (n_rows + 1,) of entries sorted by row."""
    return np.searchsorted(sorted_rows, np.arange(n_rows + 1, dtype=np.int64)).astype(np.int64)


def _sum_by(row: IntArray, value: IntArray, count: IntArray, n_values: int) -> tuple[IntArray, IntArray, IntArray]:
    """Counts summed per (row, value), sorted by row then value; every sum > 0."""
    key = row * np.int64(n_values) + value
    order = np.argsort(key, kind="stable")
    key = key[order]
    if not key.size:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, empty
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    total = np.add.reduceat(count[order], starts)
    return key[starts] // n_values, key[starts] % n_values, total


@dataclass(frozen=True)
class ValueCounts:
    """The open cells' counts per protected value and their requirement rows.

    Attributes:
        cell, value, count: one entry per (cell, value) with count > 0, sorted by cell
            then value, shape (T,) each.
        req_row: the row of ``table`` holding each cell's requirement, shape (C,).
        table: the distinct requirement rows, shape (R, V).
    """

    cell: IntArray
    value: IntArray
    count: IntArray
    req_row: IntArray
    table: FloatArray

    @classmethod
    def of(cls, counts: npt.NDArray[np.integer], requirement: FloatArray) -> ValueCounts:
        """From dense counts (C, V) >= 0 and requirements (C, V) (any float, ``inf``
        included). Rows are deduplicated by their bytes, so every value is kept exactly."""
        cell, value = np.nonzero(counts)  # row-major: sorted by cell, then value
        req = np.ascontiguousarray(requirement, dtype=np.float64)
        n_cells, n_values = req.shape
        if n_values:
            rows = req.view(np.dtype((np.void, req.itemsize * n_values))).ravel()
            _, first, req_row = np.unique(rows, return_index=True, return_inverse=True)
            table = req[first]
        else:
            req_row, table = np.zeros(n_cells, dtype=np.int64), np.empty((min(n_cells, 1), 0))
        return cls(
            cell=cell.astype(np.int64),
            value=value.astype(np.int64),
            count=np.asarray(counts[cell, value], dtype=np.int64),
            req_row=np.asarray(req_row, dtype=np.int64).ravel(),
            table=table,
        )

    @property
    def n_values(self) -> int:
        return int(self.table.shape[1])

    def take(self, keep: BoolArray) -> ValueCounts:
        """The cells where ``keep`` (shape (C,)), renumbered in their order."""
        new_index = np.cumsum(keep) - 1
        entry = keep[self.cell]
        return ValueCounts(
            cell=new_index[self.cell[entry]],
            value=self.value[entry],
            count=self.count[entry],
            req_row=self.req_row[keep],
            table=self.table,
        )

    def regions(self, region_of_cell: IntArray, n_regions: int) -> RegionCounts:
        """Counts per (region, value), every cell in the region ``region_of_cell`` gives it."""
        region, value, count = _sum_by(region_of_cell[self.cell], self.value, self.count, self.n_values)
        return RegionCounts(start=_csr_start(region, n_regions), value=value, count=count)

    def parts(self, part_of_cell: IntArray, n_parts: int) -> PartCounts:
        """Counts per (part, value) and the requirement rows per part; ``part_of_cell``
        shape (C,), -1 for a cell in no part; every part in [0, n_parts) holds a cell."""
        in_part = part_of_cell[self.cell] >= 0
        part, value, count = _sum_by(
            part_of_cell[self.cell[in_part]], self.value[in_part], self.count[in_part], self.n_values
        )
        cells = np.flatnonzero(part_of_cell >= 0)
        n_rows = np.int64(self.table.shape[0])
        pair = np.unique(part_of_cell[cells] * n_rows + self.req_row[cells])  # distinct (part, row)
        return PartCounts(
            part=part,
            value=value,
            count=count,
            req_start=_csr_start(pair // n_rows, n_parts),
            req_rows=pair % n_rows,
            table=self.table,
        )


@dataclass(frozen=True)
class RegionCounts:
    """Counts per (region, value) with count > 0 as CSR: region r holds the entries
    ``start[r]:start[r + 1]`` of ``value`` and ``count``."""

    start: IntArray
    value: IntArray
    count: IntArray


@dataclass(frozen=True)
class PartCounts:
    """Counts per (part, value) with count > 0, sorted by part (shape (Q,) each), and the
    distinct requirement rows of each part's cells as CSR (``req_rows[req_start[p]:req_start[p + 1]]``)."""

    part: IntArray
    value: IntArray
    count: IntArray
    req_start: IntArray
    req_rows: IntArray
    table: FloatArray

    def requirement(self, part: IntArray, value: IntArray) -> FloatArray:
        """The requirement of part ``part[i]`` for value ``value[i]``: the maximum over the
        part's cells (``np.maximum``, so a NaN stays NaN as in the dense maximum)."""
        q, row = expand_csr(part, self.req_start, self.req_rows)
        req = self.table[row, value[q]]
        if q.size == part.size:  # one distinct row per part: nothing to take the maximum of
            return req
        per_query = self.req_start[part + 1] - self.req_start[part]
        return np.maximum.reduceat(req, np.cumsum(per_query) - per_query)


def meets(n: IntArray, requirement: FloatArray, count: IntArray) -> BoolArray:
    """``n >= requirement · n_s`` with a finite requirement, elementwise: the comparison of
    :func:`anonymizer.privacy.meets_requirement`, in the dense search's float arithmetic
    (int64 n against the float64 product)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.isfinite(requirement) & (n >= requirement * count)


def all_per_row(ok: BoolArray, row: IntArray, n_rows: int) -> BoolArray:
    """Per row in [0, n_rows), whether every entry of it is ok (True for a row without entries)."""
    out = np.ones(n_rows, dtype=bool)
    out[row[~ok]] = False
    return out
