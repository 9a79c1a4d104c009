"""Bottom-up generalization over a global-recoding cut, guided by suppression need.

Source: Wang, Yu, Chakraborty, "Bottom-up generalization" (ICDM 2004), adapted as in
paper 004, sections 7-8 and DESIGN.md section 3. The search works on *cells*: distinct
combinations of QI leaves, each carrying its candidate count, its records per protected
value and its requirement per protected value (the maximum target of its candidates).
A group is a set of cells that the current cut maps to the same node tuple; because
candidate and record counts add and requirements take the maximum, merging groups never
needs to look at individuals again.

One step replaces, in one attribute, all children of a node v by v (every child must be
in the cut). Among all such steps the one with the least information loss per record of
violation removed is taken; the *violation* of a (group, protected value) is the number
of its records that would have to be suppressed to meet the requirement. The search stops
when the violation fits the suppression budget. Since every attribute keeps one cut, the
published regions are pairwise disjoint by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from anonymizer.hierarchy import Hierarchy

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class InfeasibleError(ValueError):
    """No generalization meets the requirement within the suppression budget."""


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
        node_of_leaf: per QI, the cut node of every leaf, arrays of shape (n_leaves,).
        group_of_cell: group index of every input cell, shape (C,).
        groups: the groups of the final cut.
        suppress: records to suppress per (group, protected value), shape (G, V).
        steps: generalization steps taken, as (QI index, node id).
    """

    node_of_leaf: list[IntArray]
    group_of_cell: IntArray
    groups: Groups
    suppress: IntArray
    steps: list[tuple[int, int]]


def _fits(radix: Sequence[int]) -> bool:
    """Whether the mixed-radix code of :func:`_encode` fits in int64 (codes then do not
    depend on which rows are encoded together, so they can be subset)."""
    return float(np.prod(np.asarray(radix, dtype=np.float64))) < 2.0**62


def _encode(keys: IntArray, radix: Sequence[int]) -> IntArray:
    """Mixed-radix code of key rows (unique per row), or row ids of np.unique if too wide."""
    if _fits(radix):
        strides = np.cumprod([1, *radix[:-1]]).astype(np.int64)
        return np.asarray(keys @ strides, dtype=np.int64)
    _, inv = np.unique(keys, axis=0, return_inverse=True)
    return np.asarray(inv.reshape(-1), dtype=np.int64)


def _sort_groups(code: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """One stable sort of the row codes.

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


def _merge_with_records(
    new_keys: IntArray, radix: Sequence[int], groups: Groups, rows: npt.NDArray[np.bool_]
) -> tuple[Groups, npt.NDArray[np.bool_]]:
    """Aggregate the ``rows`` of ``groups`` under ``new_keys``, keeping only merged groups
    that hold records (one without records cannot need suppression).

    Returns:
        the merged groups and, per selected row, whether it belongs to a kept group.
    """
    code = _encode(new_keys, radix)
    records = groups.records[rows]
    # rows whose merged group holds records: a hash lookup, so the many rows of merged
    # groups without records are never sorted
    member = np.asarray(pd.Index(code).isin(code[records > 0]), dtype=bool)
    sel = np.flatnonzero(member)
    v = groups.counts.shape[1]
    if sel.size == 0:
        empty = Groups(
            keys=new_keys[:0], candidates=groups.candidates[:0], records=records[:0],
            counts=np.zeros((0, v), dtype=np.int64), requirement=np.zeros((0, v)),
        )
        return empty, member
    perm, starts, _ = _sort_groups(code[sel])
    order = sel[perm]
    merged = Groups(
        keys=new_keys[order[starts]],
        candidates=np.add.reduceat(groups.candidates[rows][order], starts),
        records=np.add.reduceat(records[order], starts),
        counts=np.add.reduceat(groups.counts[rows][order], starts, axis=0),
        requirement=np.maximum.reduceat(groups.requirement[rows][order], starts, axis=0),
    )
    return merged, member


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


def _ncp(h: Hierarchy) -> FloatArray:
    """Normalized certainty penalty of every node: (leaves - 1) / (all leaves - 1)."""
    leaves = h.leaf_counts().astype(np.float64)
    return (leaves - 1.0) / max(h.n_leaves - 1, 1)


def generalize(cells: Cells, hierarchies: Sequence[Hierarchy], presence: bool, budget: int) -> Generalization:
    """Search the cut bottom-up until the suppression need fits the budget.

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
    ncps = [_ncp(h) for h in hierarchies]
    child_total = [np.bincount(p[p >= 0], minlength=h.n_nodes) for h, p in zip(hierarchies, parents, strict=True)]
    node_of_leaf = [np.arange(h.n_leaves, dtype=np.int64) for h in hierarchies]
    in_cut = [np.arange(h.n_nodes) < h.n_leaves for h in hierarchies]

    def n_of(g: Groups) -> IntArray:
        return g.records if presence else g.candidates

    groups, group_of_cell = aggregate(
        cells.keys, radix, cells.candidates, cells.records, cells.counts, cells.requirement
    )
    steps: list[tuple[int, int]] = []
    while True:
        need = settle_suppression(n_of(groups), groups.counts, groups.requirement, presence)
        if int(need.sum()) <= budget:
            return Generalization(node_of_leaf, group_of_cell, groups, need, steps)
        row_need = suppression_need(n_of(groups), groups.counts, groups.requirement, presence).sum(axis=1)
        best: tuple[float, float, int, int] | None = None  # (score, -gain, attribute, node)
        fallback: tuple[float, int, int] | None = None  # (loss, attribute, node)
        # any other step removes no violation itself but may make a higher node mergeable
        # (all its children in the cut); without it the search can stall below the root
        last_resort: tuple[float, int, int] | None = None  # (loss, attribute, node)
        for a in range(d):
            par = parents[a]
            in_cut_children = np.bincount(par[in_cut[a] & (par >= 0)], minlength=radix[a])
            mergeable = (child_total[a] > 0) & (in_cut_children == child_total[a])
            p = par[groups.keys[:, a]]
            aff = p >= 0
            aff[aff] = mergeable[p[aff]]
            if not aff.any():
                for v in np.flatnonzero(mergeable).tolist():
                    if last_resort is None or (0.0, a, v) < last_resort:
                        last_resort = (0.0, a, v)
                continue
            new_keys = groups.keys[aff].copy()
            new_keys[:, a] = p[aff]
            merged, members = _merge_with_records(new_keys, radix, groups, aff)
            aff[aff] = members
            v_rows = p[aff]
            merged_need = suppression_need(n_of(merged), merged.counts, merged.requirement, presence).sum(axis=1)
            new_need = np.bincount(merged.keys[:, a], weights=merged_need, minlength=radix[a])
            old_need = np.bincount(v_rows, weights=row_need[aff], minlength=radix[a])
            loss = np.bincount(
                v_rows,
                weights=groups.records[aff] * (ncps[a][v_rows] - ncps[a][groups.keys[aff, a]]),
                minlength=radix[a],
            )
            for v in np.flatnonzero(mergeable).tolist():  # candidate steps of this attribute (a few nodes)
                gain = old_need[v] - new_need[v]
                if gain > 0:
                    key = (float(loss[v] / gain), float(-gain), a, v)
                    if best is None or key < best:
                        best = key
                elif old_need[v] > 0:
                    if fallback is None or (float(loss[v]), a, v) < fallback:
                        fallback = (float(loss[v]), a, v)
                elif last_resort is None or (float(loss[v]), a, v) < last_resort:
                    last_resort = (float(loss[v]), a, v)
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
        node_of_leaf[a] = np.where(par[node_of_leaf[a]] == v, v, node_of_leaf[a])
        in_cut[a][par == v] = False
        in_cut[a][v] = True
        keys = groups.keys.copy()
        keys[:, a] = np.where(par[keys[:, a]] == v, v, keys[:, a])
        groups, regroup = aggregate(keys, radix, groups.candidates, groups.records, groups.counts, groups.requirement)
        group_of_cell = regroup[group_of_cell]
