"""The search's shared vocabulary: the *cells* a search reads (distinct QI leaf
combinations with their candidates, records per protected value and requirement), the
groups a cut or a partition makes of them, the result of a search, the suppression a group
needs to meet its requirement, and the errors of a search that cannot meet it.

Both searches use these types (the top-down partition, :mod:`anonymizer.topdown`, the
default; and the bottom-up generalization, :mod:`anonymizer.bottomup`); neither imports the
other. Terms as in docs/concepts.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from anonymizer.arrays import row_keys
from anonymizer.hierarchy import Hierarchy

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class InfeasibleError(ValueError):
    """No generalization meets the requirement within the suppression budget."""


class ValueInfeasibleError(InfeasibleError):
    """A refusal whose message names protected values, which the search knows by column
    index only: :meth:`describe` words it with the caller's names (the constructor's
    message says ``protected value <index>``).

    Attributes:
        values: the protected values named, as column indexes of ``Cells.counts``.
    """

    values: list[int]

    def describe(self, names: Sequence[str]) -> str:
        """The message with the values named (``names``: one per ``values``)."""
        raise NotImplementedError


class TableInfeasibleError(ValueInfeasibleError):
    """The table as a whole cannot meet the requirement: for some protected value, the
    candidates of all cells together are fewer than the smallest requirement of any cell
    times the value's records. Every partition then has a group that fails (the groups'
    candidates and records add up to the table's, and a group's requirement is at least
    the smallest of its cells'), so no QI cell is to blame.

    Attributes:
        values: the failing protected values' column indexes in ``Cells.counts``.
        records: their records in the table, one per value.
        candidates: the table's candidates (register individuals, or present ones).
        requirement: the smallest requirement of any cell, one per value.
    """

    def __init__(self, values: list[int], records: list[int], candidates: int, requirement: list[float]) -> None:
        self.values, self.records, self.candidates, self.requirement = values, records, candidates, requirement
        super().__init__(self.describe([f"protected value {v}" for v in values]))

    def describe(self, names: Sequence[str]) -> str:
        """The message with the failing values named (``names``: one per ``values``)."""
        v, c, r = names[0], self.records[0], self.requirement[0]
        more = f" (and {len(self.values) - 1} more value(s))" if len(self.values) > 1 else ""
        # n is an integer: n >= r·c exactly when n >= ceil(r·c)
        return (
            f"the whole snapshot fails, not one QI cell: its {c:,} records of {v}{more} need {r:.4g} candidates "
            f"each, {math.ceil(c * r):,} in all, and the table has {self.candidates:,}; no partition can meet that"
        )


class CellInfeasibleError(ValueInfeasibleError):
    """One QI cell breaks its requirement in every partition: its individuals may not be
    linked to a protected value again (infinite requirement), and the cell holds records
    of that value, so every group holding it holds them too.

    Attributes:
        values: [the value's column index].
        qi_values: the cell as ``attribute=label`` per QI, comma-separated.
        records: the cell's records of the value.
        cells: the cells in that situation (any value).
    """

    def __init__(self, value: int, qi_values: str, records: int, cells: int) -> None:
        self.values, self.qi_values, self.records, self.cells = [value], qi_values, records, cells
        super().__init__(self.describe([f"protected value {value}"]))

    def describe(self, names: Sequence[str]) -> str:
        """The message with the value named (``names``: one per ``values``)."""
        return (
            f"the individuals with QI values ({self.qi_values}) may not be linked to {names[0]} again (the bound "
            f"leaves them no room for another release linking them to it), and their QI combination holds "
            f"{self.records:,} record(s) of it: every group holding them breaks its requirement "
            f"({self.cells:,} such QI combination(s))"
        )


class RequirementInfeasibleError(ValueInfeasibleError):
    """The search could not set apart the individuals whose requirement for a value makes
    the region of the whole snapshot fail, although the table meets the smallest
    requirement (so :class:`TableInfeasibleError` does not apply) and no cell fails in
    every partition (so :class:`CellInfeasibleError` does not either). Their requirement
    is the highest of the value's, raised by the releases that linked them to it before;
    the QI combinations where the search stopped are a consequence, not the cause.

    Attributes:
        values: [the value's column index], the one whose requirement the whole snapshot's
            region misses by most.
        qi_values: one cell holding that highest requirement, as ``attribute=label`` per
            QI, comma-separated.
        individuals: candidates in the cells with that requirement.
        requirement: that requirement, ``inf`` when they may not be linked to it again.
        records: the snapshot's records of the value.
        candidates: the table's candidates.
        stuck: QI combinations where the search stopped.
    """

    def __init__(
        self,
        value: int,
        qi_values: str,
        individuals: int,
        requirement: float,
        records: int,
        candidates: int,
        stuck: int,
    ) -> None:
        self.values, self.qi_values, self.individuals = [value], qi_values, individuals
        self.requirement, self.records, self.candidates, self.stuck = requirement, records, candidates, stuck
        super().__init__(self.describe([f"protected value {value}"]))

    def describe(self, names: Sequence[str]) -> str:
        """The message with the value named (``names``: one per ``values``)."""
        v, who = names[0], f"{self.individuals:,} individual(s), e.g. those with QI values ({self.qi_values}),"
        stopped = (
            f"so the search split the domain to set them apart and stopped at {self.stuck:,} QI combination(s) "
            "that cannot meet their own requirement alone"
        )
        if not math.isfinite(self.requirement):
            return (
                f"{who} may not be linked to {v} again (the bound leaves them no room for it), and the snapshot "
                f"holds {self.records:,} record(s) of it, {stopped}"
            )
        # n is an integer: n >= r·c exactly when n >= ceil(r·c)
        return (
            f"{who} need {self.requirement:.4g} candidates per record of {v} in their group (a requirement raised "
            f"by the releases that linked them to it before); one region holding everyone would need "
            f"{math.ceil(self.records * self.requirement):,} candidates for the snapshot's {self.records:,} records "
            f"of it and has {self.candidates:,}, {stopped}"
        )


@dataclass(frozen=True)
class Cells:
    """Integer-coded input of one release, aggregated by distinct QI leaf combination.

    Attributes:
        keys: leaf id per QI, shape (C, d).
        candidates: candidates per cell, shape (C,). With register dilution these are the
            register individuals of the cell; with presence known, the present ones.
        records: snapshot records per cell (all sensitive values), shape (C,).
        counts: records per protected value (or disjoint value set), shape (C, V).
        requirement: maximum target ratio over the cell's candidates per protected value,
            shape (C, V), each >= 1 or ``inf``.
    """

    keys: IntArray
    candidates: IntArray
    records: IntArray
    counts: IntArray
    requirement: FloatArray


@dataclass(frozen=True)
class Groups:
    """The groups of one cut: one row per non-empty node tuple."""

    keys: IntArray  # (G, d) node ids
    candidates: IntArray  # (G,)
    records: IntArray  # (G,)
    counts: IntArray  # (G, V)
    requirement: FloatArray  # (G, V)


@dataclass(frozen=True)
class Generalization:
    """Result of the search.

    Attributes:
        node_of_leaf: per QI, the cut node of every leaf, arrays of shape (n_leaves,); None
            for a multidimensional partition (:mod:`anonymizer.topdown`), which is no cut.
        group_of_cell: group index of every input cell, shape (C,).
        groups: the groups of the final cut.
        suppress: records to suppress per (group, protected value), shape (G, V).
        steps: generalization steps taken, as (QI index, node id).
        levels: the top-down search's per-level account of what blocked its splits, when
            asked for (:func:`anonymizer.topdown.level_report`); None otherwise.
    """

    node_of_leaf: list[IntArray] | None
    group_of_cell: IntArray
    groups: Groups
    suppress: IntArray
    steps: list[tuple[int, int]]
    levels: list[dict[str, object]] | None = None


def encode_rows(keys: IntArray, radix: Sequence[int]) -> IntArray:
    """One int64 per key row, equal exactly for equal rows (:func:`anonymizer.arrays.row_keys`
    with the last column most significant, the order groups are kept in); comparable only
    within one call."""
    return row_keys(keys[:, ::-1], list(radix)[::-1])


def sort_codes(code: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """One sort of the row codes.

    Returns:
        ``perm`` (rows in code order, equal codes adjacent),
        ``starts`` (position in ``perm`` where each distinct code begins) and ``inverse``
        (the distinct-code index of every row, in input order).
    """
    perm = np.argsort(code)  # any order within a group will do: its rows share the key
    sorted_code = code[perm]
    boundary = np.empty(code.size, dtype=bool)
    boundary[:1] = True
    np.not_equal(sorted_code[1:], sorted_code[:-1], out=boundary[1:])
    starts = np.flatnonzero(boundary)
    inverse = np.empty(code.size, dtype=np.int64)
    inverse[perm] = np.cumsum(boundary) - 1
    return perm, starts, inverse


def aggregate(
    keys: IntArray,
    radix: Sequence[int],
    candidates: IntArray,
    records: IntArray,
    counts: IntArray,
    requirement: FloatArray,
) -> tuple[Groups, IntArray]:
    """Merge rows with equal keys: counts add, requirements take the maximum.

    Returns:
        the merged groups (sorted by key code) and, for every input row, its group index.
    """
    code = encode_rows(keys, radix)
    perm, starts, inverse = sort_codes(code)
    groups = Groups(
        keys=keys[perm[starts]],
        candidates=np.add.reduceat(candidates[perm], starts),
        records=np.add.reduceat(records[perm], starts),
        counts=np.add.reduceat(counts[perm], starts, axis=0),
        requirement=np.maximum.reduceat(requirement[perm], starts, axis=0),
    )
    return groups, inverse


def suppression_need(n: IntArray, counts: IntArray, requirement: FloatArray, presence: bool) -> IntArray:
    """Records to suppress per (group, value) so that ``n / n_s >= requirement``.

    With register dilution the candidates stay (n fixed): keep at most
    ``floor(n / requirement)`` records of the value. With presence known every suppressed
    record also leaves the candidates: the smallest r with
    ``(n - r) >= requirement · (n_s - r)``. Values are taken one at a time; see
    :func:`settle_suppression` for the joint effect under presence. The comparison is
    :func:`anonymizer.privacy.meets_requirement`'s: ``n >= requirement · n_s``.

    Args:
        n: candidates per group, shape (G,); counts, requirement: shape (G, V).

    Returns:
        int64 array of shape (G, V), 0 <= r <= counts.
    """
    r = np.zeros(counts.shape, dtype=np.int64)
    g, v = np.nonzero(counts)  # only (group, value) cells holding records can need suppression
    if g.size == 0:
        return r
    cnt = counts[g, v]
    req = requirement[g, v]
    nn = n[g].astype(np.float64)
    finite = np.isfinite(req)
    need = cnt.astype(np.float64)  # an infinite requirement: every record of the value goes
    with np.errstate(divide="ignore", invalid="ignore"):
        if presence:
            need[finite] = np.ceil((req[finite] * cnt[finite] - nn[finite]) / (req[finite] - 1.0))
        else:
            need[finite] = cnt[finite] - np.floor(nn[finite] / req[finite])
    out = np.clip(need, 0, cnt).astype(np.int64)
    # guard the float rounding of floor/ceil: verify the inequality itself and fix up
    for _ in range(2):
        kept = cnt - out
        left = nn - (out if presence else 0)
        with np.errstate(invalid="ignore"):  # inf · 0 where an infinite requirement kept nothing
            bad = (kept > 0) & ~(left >= req * kept)
        if not bad.any():
            break
        out = np.where(bad, out + 1, out)
    r[g, v] = np.minimum(out, cnt)
    return r


def settle_suppression(n: IntArray, counts: IntArray, requirement: FloatArray, presence: bool) -> IntArray:
    """Joint suppression per (group, value): under presence, suppressing records of one
    value shrinks n for the others, so iterate to a fixed point (monotone, terminates)."""
    total = np.zeros_like(counts)
    if not presence:
        return suppression_need(n, counts, requirement, presence)
    for _ in range(counts.shape[1] + 2):
        left_n = n - total.sum(axis=1)
        extra = suppression_need(left_n, counts - total, requirement, presence)
        if not extra.any():
            return total
        total = total + extra
    return total


def split_width(h: Hierarchy) -> FloatArray:
    """How much of its QI's domain each node leaves open, for the searches' choices:
    (leaves below the node − 1) / (leaves of the hierarchy − 1), shape (n_nodes,), 0 for a
    leaf and 1 for the root. Not the report's normalized certainty penalty, |leaves below|
    / |leaves| (:func:`anonymizer.measures.certainty_penalty.node_ncp`): this one is 0 on a
    leaf so that a region narrowed to one value has nothing left to split."""
    width = (h.index.size - 1) / float(max(h.n_leaves - 1, 1))
    return np.asarray(width, dtype=np.float64)
