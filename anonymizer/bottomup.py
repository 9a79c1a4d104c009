"""Bottom-up generalization over a global-recoding cut, guided by suppression need.

Source: Wang, Yu, Chakraborty, "Bottom-up generalization" (ICDM 2004), adapted as in
paper 004, sections 7-8 and docs/design.md section 3. The search works on *cells*: distinct
combinations of QI leaves, each carrying its candidate count, its records per protected
value and its requirement per protected value (the maximum target of its candidates).
A group is a set of cells that the current cut maps to the same node tuple; because
candidate and record counts add and requirements take the maximum, merging groups never
needs to look at individuals again.

One step replaces, in one attribute, all children of a node v by v (every child must be
in the cut). Among all such steps the one with the least information loss (normalized
certainty penalty, record-weighted) per record of violation removed is taken; the
*violation* of a (group, protected value) is the number of its records that would have to
be suppressed to meet the requirement. When no step removes violation, the cheapest step
touching a violating group is taken, and failing that the cheapest step at all (it may
make a higher node mergeable). The search stops when the violation fits the suppression
budget. Since every attribute keeps one cut, the published regions are pairwise disjoint
by construction.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from anonymizer.arrays import row_keys
from anonymizer.hierarchy import Hierarchy

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class InfeasibleError(ValueError):
    """No generalization meets the requirement within the suppression budget."""


class TableInfeasibleError(InfeasibleError):
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
    """

    node_of_leaf: list[IntArray] | None
    group_of_cell: IntArray
    groups: Groups
    suppress: IntArray
    steps: list[tuple[int, int]]


def _encode(keys: IntArray, radix: Sequence[int]) -> IntArray:
    """One int64 per key row, equal exactly for equal rows (:func:`anonymizer.arrays.row_keys`
    with the last column most significant, the order groups are kept in); comparable only
    within one call."""
    return row_keys(keys[:, ::-1], list(radix)[::-1])


def _sort_groups(code: IntArray) -> tuple[IntArray, IntArray, IntArray]:
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
    code = _encode(keys, radix)
    perm, starts, inverse = _sort_groups(code)
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


@dataclass
class _Sums:
    """Per node of one attribute, summed over the group rows below it: the suppression need
    if its children were merged into it, the need as they are, and the information loss
    of the merge (numerator of the normalized certainty penalty, records × leaves). All
    three are integers held in float64, so sums and differences are exact."""

    merged_need: FloatArray
    row_need: FloatArray
    loss: FloatArray

    def __add__(self, other: _Sums) -> _Sums:
        return _Sums(self.merged_need + other.merged_need, self.row_need + other.row_need, self.loss + other.loss)

    def __sub__(self, other: _Sums) -> _Sums:
        return _Sums(self.merged_need - other.merged_need, self.row_need - other.row_need, self.loss - other.loss)


def _candidate_sums(
    groups: Groups, selections: dict[int, npt.NDArray[np.bool_]], parents: Sequence[IntArray],
    leaves: Sequence[IntArray], radix: Sequence[int], row_need: IntArray, n_of: Callable[[Groups], IntArray],
    presence: bool,
) -> dict[int, _Sums]:
    """:class:`_Sums` of several attributes at once, each over the group rows selected for
    it (rows whose node's parent is a mergeable candidate).

    All attributes' merges are done in one pass: every selected row is copied with its
    attribute's node replaced by the parent and tagged with the attribute, so one
    encode, one lookup, one sort and one reduction serve them all.
    """
    d = len(radix)
    attrs = [a for a, rows in selections.items() if rows.any()]
    out = {a: _Sums(np.zeros(radix[a]), np.zeros(radix[a]), np.zeros(radix[a])) for a in selections}
    if not attrs:
        return out
    src = [np.flatnonzero(selections[a]) for a in attrs]
    source = np.concatenate(src)
    tag = np.repeat(np.asarray(attrs, dtype=np.int64), [x.size for x in src])
    new_keys = groups.keys[source].copy()
    parent_node = np.empty(source.size, dtype=np.int64)
    start = 0
    for a, rows in zip(attrs, src, strict=True):
        stop = start + rows.size
        parent_node[start:stop] = parents[a][groups.keys[rows, a]]
        new_keys[start:stop, a] = parent_node[start:stop]
        start = stop
    code = _encode(np.concatenate([new_keys, tag[:, None]], axis=1), [*radix, d])
    records = groups.records[source]
    # merged groups without records cannot need suppression: find the rows of the others
    # by lookup, so the many rows of record-less merges are never sorted
    member = np.isin(code, code[records > 0]) if code.size < 20_000 else np.asarray(
        pd.Index(code).isin(code[records > 0]), dtype=bool
    )
    sel = np.flatnonzero(member)
    if sel.size:
        perm, starts, _ = _sort_groups(code[sel])
        order = sel[perm]
        rows_of = source[order]
        merged = Groups(
            keys=new_keys[order[starts]],
            candidates=np.add.reduceat(groups.candidates[rows_of], starts),
            records=np.add.reduceat(records[order], starts),
            counts=np.add.reduceat(groups.counts[rows_of], starts, axis=0),
            requirement=np.maximum.reduceat(groups.requirement[rows_of], starts, axis=0),
        )
        merged_need = suppression_need(n_of(merged), merged.counts, merged.requirement, presence).sum(axis=1)
        merged_tag = tag[order[starts]]
    for a in attrs:
        mine = tag == a
        v_all = parent_node[mine]
        rows = source[mine]
        loss = np.bincount(
            v_all, weights=groups.records[rows] * (leaves[a][v_all] - leaves[a][groups.keys[rows, a]]),
            minlength=radix[a],
        )
        kept = mine & member
        merged_sum: FloatArray = np.zeros(radix[a])
        if sel.size:
            m = merged_tag == a
            merged_sum = np.bincount(merged.keys[m, a], weights=merged_need[m], minlength=radix[a]).astype(np.float64)
        out[a] = _Sums(
            merged_sum.astype(np.float64),
            np.bincount(parent_node[kept], weights=row_need[source[kept]], minlength=radix[a]).astype(np.float64),
            loss.astype(np.float64),
        )
    return out


def generalize(cells: Cells, hierarchies: Sequence[Hierarchy], presence: bool, budget: int) -> Generalization:
    """Search the cut bottom-up until the suppression need fits the budget.

    Candidate steps are scored from per-attribute sums (:class:`_Sums`) that are updated
    incrementally: a step merging the children of v* in attribute a* changes, for any
    other attribute, only merged groups whose a*-node is v*, so their old contribution is
    subtracted and their new one added. The sums are exact integers, so this finds the
    same steps as recomputing everything, in a fraction of the time.

    Args:
        cells: the integer-coded release, see :class:`Cells`.
        hierarchies: one per QI, in the column order of ``cells.keys``.
        presence: True when candidates are the present individuals (n = records).
        budget: most records that may be suppressed.

    Raises:
        InfeasibleError: every attribute is at its root and the need still exceeds the budget.
    """
    d = len(hierarchies)
    radix = [h.n_nodes for h in hierarchies]
    parents = [h.parent for h in hierarchies]
    leaves = [h.leaf_counts() for h in hierarchies]
    ncp_den = [float(max(h.n_leaves - 1, 1)) for h in hierarchies]
    child_total = [np.bincount(p[p >= 0], minlength=h.n_nodes) for h, p in zip(hierarchies, parents, strict=True)]
    node_of_leaf = [np.arange(h.n_leaves, dtype=np.int64) for h in hierarchies]
    in_cut = [np.arange(h.n_nodes) < h.n_leaves for h in hierarchies]

    def n_of(g: Groups) -> IntArray:
        return g.records if presence else g.candidates

    def mergeable_of(a: int) -> npt.NDArray[np.bool_]:
        par = parents[a]
        in_cut_children = np.bincount(par[in_cut[a] & (par >= 0)], minlength=radix[a])
        return np.asarray((child_total[a] > 0) & (in_cut_children == child_total[a]), dtype=bool)

    def candidate_rows(g: Groups, a: int, where: npt.NDArray[np.bool_] | None = None) -> npt.NDArray[np.bool_]:
        p = parents[a][g.keys[:, a]]
        rows = p >= 0
        rows[rows] = mergeable[a][p[rows]]
        return rows if where is None else rows & where

    def need_by_row(g: Groups) -> IntArray:
        return suppression_need(n_of(g), g.counts, g.requirement, presence).sum(axis=1)

    groups, group_of_cell = aggregate(
        cells.keys, radix, cells.candidates, cells.records, cells.counts, cells.requirement
    )
    mergeable = [mergeable_of(a) for a in range(d)]
    row_need = need_by_row(groups)
    initial = _candidate_sums(
        groups, {a: candidate_rows(groups, a) for a in range(d)}, parents, leaves, radix, row_need, n_of, presence
    )
    sums = [initial[a] for a in range(d)]
    steps: list[tuple[int, int]] = []
    while True:
        need = settle_suppression(n_of(groups), groups.counts, groups.requirement, presence)
        if int(need.sum()) <= budget:
            return Generalization(node_of_leaf, group_of_cell, groups, need, steps)
        best: tuple[float, float, int, int] | None = None  # (score, -gain, attribute, node)
        fallback: tuple[float, int, int] | None = None  # (loss, attribute, node)
        # any other step removes no violation itself but may make a higher node mergeable
        # (all its children in the cut); without it the search can stall below the root
        last_resort: tuple[float, int, int] | None = None  # (loss, attribute, node)
        for a in range(d):
            for v in np.flatnonzero(mergeable[a]).tolist():  # candidate steps of this attribute (a few nodes)
                gain = float(sums[a].row_need[v] - sums[a].merged_need[v])
                loss = float(sums[a].loss[v]) / ncp_den[a]
                if gain > 0:
                    key = (loss / gain, -gain, a, v)
                    if best is None or key < best:
                        best = key
                elif sums[a].row_need[v] > 0:
                    if fallback is None or (loss, a, v) < fallback:
                        fallback = (loss, a, v)
                elif last_resort is None or (loss, a, v) < last_resort:
                    last_resort = (loss, a, v)
        if best is not None:
            step_a, step_v = best[2], best[3]
        elif fallback is not None:
            step_a, step_v = fallback[1], fallback[2]
        elif last_resort is not None:
            step_a, step_v = last_resort[1], last_resort[2]
        else:
            raise InfeasibleError(
                f"{int(need.sum())} records would have to be suppressed but the budget is {budget}, "
                "and no further generalization reduces that"
            )
        a, v = step_a, step_v
        steps.append((a, v))
        par = parents[a]
        touched_before = par[groups.keys[:, a]] == v
        old_part = _candidate_sums(
            groups, {b: candidate_rows(groups, b, touched_before) for b in range(d) if b != a},
            parents, leaves, radix, row_need, n_of, presence,
        )
        node_of_leaf[a] = np.where(par[node_of_leaf[a]] == v, v, node_of_leaf[a])
        in_cut[a][par == v] = False
        in_cut[a][v] = True
        mergeable[a] = mergeable_of(a)
        keys = groups.keys.copy()
        keys[:, a] = np.where(par[keys[:, a]] == v, v, keys[:, a])
        groups, regroup = aggregate(keys, radix, groups.candidates, groups.records, groups.counts, groups.requirement)
        group_of_cell = regroup[group_of_cell]
        row_need = need_by_row(groups)
        touched_after = groups.keys[:, a] == v
        selections = {b: candidate_rows(groups, b, touched_after) for b in range(d) if b != a}
        selections[a] = candidate_rows(groups, a)
        new_part = _candidate_sums(groups, selections, parents, leaves, radix, row_need, n_of, presence)
        for b, old in old_part.items():
            sums[b] = sums[b] - old + new_part[b]
        sums[a] = new_part[a]
