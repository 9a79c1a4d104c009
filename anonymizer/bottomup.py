"""Bottom-up generalization over a global-recoding cut, guided by suppression need.

Source: Wang, Yu, Chakraborty, "Bottom-up generalization" (ICDM 2004), adapted as in
paper 004, sections 7-8 and docs/design.md section 3. The search works on *cells*: distinct
combinations of QI leaves, each carrying its candidate count, its records per protected
value and its requirement per protected value (the maximum target of its candidates).
A group is a set of cells that the current cut maps to the same node tuple; because
candidate and record counts add and requirements take the maximum, merging groups never
needs to look at individuals again.

One step replaces, in one attribute, all children of a node v by v (every child must be
in the cut). Among all such steps the one with the least information loss (split width,
:func:`anonymizer.search.split_width`, record-weighted) per record of violation removed is
taken; the *violation* of a (group, protected value) is the number of its records that would
have to be suppressed to meet the requirement. When no step removes violation, the cheapest step
touching a violating group is taken, and failing that the cheapest step at all (it may
make a higher node mergeable). The search stops when the violation fits the suppression
budget. Since every attribute keeps one cut, the published regions are pairwise disjoint
by construction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from anonymizer.hierarchy import Hierarchy
from anonymizer.search import (
    Cells,
    Generalization,
    Groups,
    InfeasibleError,
    aggregate,
    encode_rows,
    settle_suppression,
    sort_codes,
    suppression_need,
)

__all__ = ["generalize"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass
class _Sums:
    """Per node of one attribute, summed over the group rows below it: the suppression need
    if its children were merged into it, the need as they are, and the information loss
    of the merge (numerator of the split width gained, records × leaves). All
    three are integers held in float64, so sums and differences are exact."""

    merged_need: FloatArray
    row_need: FloatArray
    loss: FloatArray

    def __add__(self, other: _Sums) -> _Sums:
        return _Sums(self.merged_need + other.merged_need, self.row_need + other.row_need, self.loss + other.loss)

    def __sub__(self, other: _Sums) -> _Sums:
        return _Sums(self.merged_need - other.merged_need, self.row_need - other.row_need, self.loss - other.loss)


def _candidate_sums(
    groups: Groups,
    selections: dict[int, npt.NDArray[np.bool_]],
    parents: Sequence[IntArray],
    leaves: Sequence[IntArray],
    radix: Sequence[int],
    row_need: IntArray,
    n_of: Callable[[Groups], IntArray],
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
    code = encode_rows(np.concatenate([new_keys, tag[:, None]], axis=1), [*radix, d])
    records = groups.records[source]
    # merged groups without records cannot need suppression: find the rows of the others
    # by lookup, so the many rows of record-less merges are never sorted
    member = (
        np.isin(code, code[records > 0])
        if code.size < 20_000
        else np.asarray(pd.Index(code).isin(code[records > 0]), dtype=bool)
    )
    sel = np.flatnonzero(member)
    if sel.size:
        perm, starts, _ = sort_codes(code[sel])
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
            v_all,
            weights=groups.records[rows] * (leaves[a][v_all] - leaves[a][groups.keys[rows, a]]),
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
    leaves = [h.index.size for h in hierarchies]
    width_den = [float(max(h.n_leaves - 1, 1)) for h in hierarchies]  # split_width's denominator
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
                loss = float(sums[a].loss[v]) / width_den[a]
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
            groups,
            {b: candidate_rows(groups, b, touched_before) for b in range(d) if b != a},
            parents,
            leaves,
            radix,
            row_need,
            n_of,
            presence,
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
