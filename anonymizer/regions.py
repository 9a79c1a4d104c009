"""Region geometry of the writer side: hierarchy nodes as leaf sets, groups as boxes.

A published group's region is the box of its QI nodes' leaf sets; a register individual is
a candidate of the one group whose region holds its QI leaves, and the regions of one
release must be pairwise disjoint (docs/design.md sections 1, 3 and 5). Everything that
computes with regions before or at publication uses this module: the utility measure
(:mod:`anonymizer.queries`), validation's breach check and disjointness suite
(:mod:`checks.breach`, :mod:`checks.expectations`), the import of a release published with
another tool (:mod:`serialpub.workflow.importing`) and ``serialpub state verify``
(:mod:`serialpub.analysis.verify`). The independent audit (:mod:`serialpub.analysis.audit`)
keeps its own geometry on purpose, so that a bug here cannot both make and pass a release
(docs/design.md section 9).

- Node → leaf set: :attr:`anonymizer.hierarchy.Hierarchy.index`
  (:class:`anonymizer.hierarchy_index.HierarchyIndex`), the leaves in a depth-first order,
  where every node's leaves are one run ``lo..hi``. Any hierarchy has one, including the
  per-release hierarchies of :mod:`anonymizer.intervals`, whose ``[lo, hi]`` intervals are
  nodes.
- :func:`label_nodes`, :func:`record_nodes`, :func:`nodes_of_labels`: the generalized labels of a table as node ids.
- Row keys: :func:`anonymizer.arrays.row_keys` is the one mixed-radix encoder of a row of
  per-QI codes; it stays in :mod:`anonymizer.arrays`, which the report measures import.
- :class:`RegisterCells`: the *cells* of the register (its distinct QI leaf combinations,
  docs/concepts.md).
- :func:`group_release`: the groups of a release (records with equal node tuples) and
  their counts; :func:`groups_of_nodes` the groups alone.
- :func:`cover_pairs`: every (cell, group) whose region holds the cell.
- :func:`presence_shown`: the register individuals a release shows absent (in no region)
  or present (in a region with as many records as register individuals).
- :func:`overlapping_pairs`: pairs of boxes that intersect (disjointness).
- :func:`locate_groups`: both, for one release against the register.

All work is vectorized over distinct combinations, groups and hierarchy levels; nothing
loops over records or individuals in Python. No I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from anonymizer.arrays import CodedRows, Rows, expand_csr, expand_ranges, factorize, factorize_rows, row_keys
from anonymizer.hierarchy import Hierarchy
from anonymizer.hierarchy_index import HierarchyIndex

if TYPE_CHECKING:
    import pandas as pd

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Candidate pairs examined per numpy step when listing overlapping regions (bounds memory).
PAIR_CHUNK = 1 << 22
#: Overlapping group pairs kept by :func:`locate_groups` (all of them are counted).
MAX_LISTED_OVERLAPS = 20


# --------------------------------------------------------------------------- nodes as leaf sets


def label_nodes(column: pd.Series, hierarchy: Hierarchy) -> IntArray:
    """Node id of every value of a column of generalized labels, shape (R,).

    A value is matched as text (``str(value)``) against the hierarchy's labels; -1 where it
    is not a label or is missing. A categorical column is mapped through its categories
    (only those that occur), so a release read with ``read_dictionary`` costs one lookup
    per distinct label.
    """
    import pandas as pd

    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = np.asarray(column.cat.codes.to_numpy(), dtype=np.int64)
        labels = [str(x) for x in column.cat.categories]
    else:
        found, uniques = pd.factorize(column, use_na_sentinel=True)
        codes = np.asarray(found, dtype=np.int64)
        labels = [str(x) for x in uniques]
    return nodes_of_labels(codes, labels, hierarchy)


def nodes_of_labels(codes: IntArray, labels: Sequence[str], hierarchy: Hierarchy) -> IntArray:
    """Node id of every value coded as ``codes`` (shape (R,), -1 for a missing value) into
    ``labels`` (the distinct values as text), shape (R,); -1 where a label is no node of
    ``hierarchy``. :func:`label_nodes` once the column is factorized (a caller that
    factorized it for another check passes its codes)."""
    mapped = np.array([hierarchy.node(x) if hierarchy.has_label(x) else -1 for x in labels], dtype=np.int64)
    if mapped.size == 0:
        return np.full(codes.size, -1, dtype=np.int64)
    return np.where(codes >= 0, mapped[np.maximum(codes, 0)], -1)


def record_nodes(
    table: pd.DataFrame, columns: Sequence[str], hierarchies: Sequence[Hierarchy], dtype: type = np.int64
) -> IntArray:
    """Node id per QI of every record, shape (R, d), -1 where :func:`label_nodes` finds no node.
    ``dtype``: a signed integer type that holds every node id (int32 halves the array).

    Args:
        table: the release, one column of generalized labels per name in ``columns``.
        columns: the QI columns, in the order of ``hierarchies``.
        hierarchies: the hierarchy each column is read with (for a numeric QI, the
            release's own, :func:`anonymizer.intervals.release_hierarchies`).
    """
    if any(h.n_nodes > np.iinfo(dtype).max for h in hierarchies):
        raise ValueError(f"{np.dtype(dtype).name} cannot hold the node ids of these hierarchies")
    nodes: IntArray = np.empty((len(table), len(columns)), dtype=dtype)
    for a, (name, h) in enumerate(zip(columns, hierarchies, strict=True)):
        nodes[:, a] = label_nodes(table[name], h)
    return nodes


# --------------------------------------------------------------------------- register and groups


@dataclass(frozen=True)
class RegisterCells:
    """The cells (distinct QI leaf combinations) of a set of register individuals.

    Individuals with the same QI values are candidates of the same group in every
    release, so regions are matched against cells, never against individuals.

    Attributes:
        of_individual: cell of every given individual, shape (N,), int64 in [0, C), numbered
            by first appearance.
        leaves: leaf id per QI of every cell, shape (C, d).
        first: the first individual (row of the given keys) of every cell, shape (C,).
        counts: individuals per cell, shape (C,).
    """

    of_individual: IntArray
    leaves: IntArray
    first: IntArray
    counts: IntArray

    @classmethod
    def of(cls, keys: Rows, hierarchies: Sequence[Hierarchy]) -> RegisterCells:
        """Cells of individuals given as leaf ids per QI, shape (N, d), one hierarchy per
        column; coded rows (:class:`anonymizer.arrays.CodedRows`) are cells already."""
        codes, first = factorize_rows(keys, [h.n_leaves for h in hierarchies])
        if isinstance(keys, CodedRows):  # cells already (its leaf ids checked against the hierarchies)
            return cls(codes, np.asarray(keys.table, dtype=np.int64), first, keys.counts)
        leaves = np.asarray(keys[first], dtype=np.int64).reshape(-1, keys.shape[1])
        return cls(codes, leaves, first, np.bincount(codes, minlength=first.size).astype(np.int64))


@dataclass(frozen=True)
class ReleaseGroups:
    """The groups of one release as published.

    Groups are numbered by first appearance in the records: for a release written by
    serialpub (rows sorted by group) this is the publisher's own group order.

    Attributes:
        of_record: group of every record, shape (R,).
        nodes: node id per QI of every group, shape (G, d).
        records: published records per group, shape (G,).
        counts: records per protected value (n_{j,s}), shape (G, V).
    """

    of_record: IntArray
    nodes: IntArray
    records: IntArray
    counts: IntArray


def group_release(nodes: IntArray, value: IntArray, n_values: int, hierarchies: Sequence[Hierarchy]) -> ReleaseGroups:
    """Group records by their QI nodes (docs/design.md section 1: a group is the records
    sharing one generalized QI tuple).

    Args:
        nodes: node id per QI of every record, shape (R, d), all >= 0.
        value: protected value index of every record in [0, n_values), -1 when not
            protected, shape (R,).
        n_values: V.
        hierarchies: one per QI column (for the node counts).
    """
    of_record, group_nodes, records = groups_of_nodes(nodes, hierarchies)
    n_groups = records.size
    prot = value >= 0
    counts = np.bincount(of_record[prot] * n_values + value[prot], minlength=n_groups * n_values)
    return ReleaseGroups(
        of_record,
        group_nodes,
        records,
        # bincount's int64 as it is: a copy of the (G, V) counts would double the largest array
        counts.reshape(n_groups, n_values).astype(np.int64, copy=False),
    )


def groups_of_nodes(nodes: IntArray, hierarchies: Sequence[Hierarchy]) -> tuple[IntArray, IntArray, IntArray]:
    """:func:`group_release` without the per-value counts: the group of every record (R,),
    numbered by first appearance, the node id per QI of every group (G, d) and the records
    per group (G,), all int64. ``nodes`` (R, d) all >= 0, one hierarchy per column."""
    of_record, first = factorize(row_keys(nodes, [h.n_nodes for h in hierarchies]))
    group_nodes = np.asarray(nodes[first], dtype=np.int64).reshape(-1, nodes.shape[1])
    return of_record, group_nodes, np.bincount(of_record, minlength=first.size).astype(np.int64)


def cover_pairs(
    group_nodes: IntArray, cell_leaves: IntArray, spans: Sequence[HierarchyIndex]
) -> tuple[IntArray, IntArray]:
    """Every (cell, group) whose region holds the cell's leaves.

    Attribute by attribute, each cell is paired with the used nodes above its leaf and
    kept only while the partial node tuple is a prefix of some group's tuple; partial
    tuples are ranked among the groups' prefixes, so keys never overflow. With pairwise
    disjoint regions every cell has at most one group.

    Args:
        group_nodes: node id per QI of every group, shape (G, d).
        cell_leaves: leaf id per QI of every cell, shape (C, d).
        spans: the index of every QI column's hierarchy (:attr:`anonymizer.hierarchy.Hierarchy.index`).

    Returns:
        (cell index, group index), int64 arrays of equal length, cell index non-decreasing.
    """
    g = group_nodes.shape[0]
    c = cell_leaves.shape[0]
    ci = np.arange(c, dtype=np.int64)
    rank = np.zeros(c, dtype=np.int64)
    g_rank = np.zeros(g, dtype=np.int64)
    for a, sp in enumerate(spans):
        radix = sp.n_nodes
        g_key = g_rank * radix + group_nodes[:, a]
        prefixes = np.unique(g_key)
        g_rank = np.searchsorted(prefixes, g_key)
        used = np.zeros(radix, dtype=bool)
        used[group_nodes[:, a]] = True
        start, items = sp.used_above(used)
        rep, node = expand_csr(cell_leaves[ci, a], start, items)
        key = rank[rep] * radix + node
        pos = np.searchsorted(prefixes, key)
        found = pos < prefixes.size
        found[found] = prefixes[pos[found]] == key[found]
        ci, rank = ci[rep[found]], pos[found]
    group_of_rank = np.empty(g, dtype=np.int64)
    group_of_rank[g_rank] = np.arange(g, dtype=np.int64)
    return ci, group_of_rank[rank] if g else rank


@dataclass(frozen=True)
class PresenceShown:
    """What a release's regions and record counts reveal about who was in its snapshot,
    counted over every register individual, present or not (docs/threat-model.md, "What a
    release reveals about presence"; docs/design.md section 1).

    Each individual has at most one record per release and every snapshot record lies in
    a published region (the ``coverage`` expectation under the default model), so a
    region's published record count is the number of its register individuals in the
    snapshot: none in a region no group covers, all of them in a region with as many
    records as register individuals. Register dilution hides *which* of a region's
    individuals hold its records, not these two cases.

    Attributes:
        register_individuals: individuals in the register, N.
        in_no_region: those whose QI values lie in no group's region: shown absent.
        in_full_regions: those in a group's region whose records equal its register
            individuals (at least one): shown present.
    """

    register_individuals: int
    in_no_region: int
    in_full_regions: int


def presence_shown(
    cells: RegisterCells,
    group_nodes: IntArray,
    group_records: IntArray,
    hierarchies: Sequence[Hierarchy],
    cover: tuple[IntArray, IntArray] | None = None,
) -> PresenceShown:
    """:class:`PresenceShown` of one release, from the register's cells and the groups'
    regions and record counts; vectorized over cells and groups.

    Args:
        cells: the cells of every register individual (:class:`RegisterCells`).
        group_nodes: node id per QI of every group, shape (G, d).
        group_records: published records per group, shape (G,).
        hierarchies: one per QI, in the column order of ``group_nodes``.
        cover: :func:`cover_pairs` of these cells and groups when the
            caller has it; computed here when None.
    """
    g = group_nodes.shape[0]
    pc, pg = cover if cover is not None else cover_pairs(group_nodes, cells.leaves, [h.index for h in hierarchies])
    covered = np.zeros(cells.counts.size, dtype=bool)
    covered[pc] = True
    in_region = np.bincount(pg, weights=cells.counts[pc], minlength=g).astype(np.int64)
    full = (in_region > 0) & (group_records >= in_region)
    return PresenceShown(
        register_individuals=int(cells.counts.sum()),
        in_no_region=int(cells.counts[~covered].sum()),
        in_full_regions=int(in_region[full].sum()),
    )


# --------------------------------------------------------------------------- disjointness


def _is_cut(lo: IntArray, hi: IntArray) -> bool:
    """Whether the distinct intervals are pairwise disjoint (equal intervals count once)."""
    if lo.size == 0:
        return True
    # one int64 key per interval, sorted by lo then hi (bounds are leaf positions, far below
    # 2**31): np.unique on rows (axis=0) sorts a structured view, far slower than sorting
    # plain int64 keys
    lo_min, width = int(lo.min()), int(hi.max()) - int(hi.min()) + 1
    if int(lo.max()) - lo_min >= (1 << 62) // width:
        pairs = np.unique(np.stack([lo, hi], axis=1), axis=0)
        return bool(np.all(pairs[1:, 0] > pairs[:-1, 1]))
    keys = np.unique((lo - lo_min) * width + (hi - int(hi.min())))
    first, last = keys // width + lo_min, keys % width + int(hi.min())
    return bool(np.all(first[1:] > last[:-1]))


def overlapping_pairs(lo: npt.ArrayLike, hi: npt.ArrayLike, max_examples: int = 5) -> tuple[int, IntArray]:
    """Pairs of rows whose boxes ``[lo, hi]`` (inclusive, shape (G, d)) intersect on every column.

    With depth-first leaf positions (:class:`anonymizer.hierarchy_index.HierarchyIndex`) as bounds, these are the groups
    whose regions share a QI combination, whether or not anybody lives there
    (docs/design.md section 1: regions must be pairwise disjoint).

    Columns whose distinct intervals are pairwise disjoint (a "cut", the usual case) can
    only intersect by being equal, so rows are first bucketed by their intervals on those
    columns. Among the remaining columns, the one giving the fewest candidate pairs is
    swept: after sorting by (bucket, lo), the rows whose lo falls inside row i's interval are
    one contiguous range (two intervals intersect iff one's lo lies in the other). The
    candidates are then filtered on every other column, :data:`PAIR_CHUNK` at a time.

    Returns:
        (number of overlapping unordered pairs, the ``max_examples`` smallest of them in
        (i, j) order as an int array (k, 2) of row positions, i < j).
    """
    lo = np.asarray(lo, dtype=np.int64)
    hi = np.asarray(hi, dtype=np.int64)
    g, d = lo.shape
    listed = np.empty((0, 2), dtype=np.int64)
    if g < 2:
        return 0, listed
    cut = [a for a in range(d) if _is_cut(lo[:, a], hi[:, a])]
    free = [a for a in range(d) if a not in cut]
    bucket = factorize(row_keys(lo[:, cut], [int(lo[:, a].max()) + 1 for a in cut]))[0]
    span = int(max(hi.max(), 0)) + 2
    sweep_lo = np.zeros(g, dtype=np.int64)
    best = None
    choices: list[int | None] = list(free) if free else [None]
    for a in choices:
        s_lo = lo[:, a] if a is not None else np.zeros(g, dtype=np.int64)
        s_hi = hi[:, a] if a is not None else np.zeros(g, dtype=np.int64)
        key = bucket * span + s_lo
        order = np.argsort(key, kind="stable")
        sk = key[order]
        left = np.searchsorted(sk, bucket * span + s_lo, side="left")
        right = np.searchsorted(sk, bucket * span + s_hi, side="right")
        total = int((right - left).sum())
        if best is None or total < best[0]:
            best = (total, a, order, left, right)
            sweep_lo = s_lo
    assert best is not None
    _, chosen, order, left, right = best
    others = [a for a in free if a != chosen]
    count = 0
    for i, k in expand_ranges(left.astype(np.int64), right.astype(np.int64), PAIR_CHUNK):
        j = order[k]
        # each unordered pair once: j's lo inside i's interval; equal lo only with i < j
        keep = (j != i) & ((sweep_lo[j] > sweep_lo[i]) | (j > i))
        for a in others:
            keep &= (lo[j, a] <= hi[i, a]) & (lo[i, a] <= hi[j, a])
        hits = np.flatnonzero(keep)
        count += hits.size
        if hits.size and max_examples > 0:
            pairs = np.stack([np.minimum(i[hits], j[hits]), np.maximum(i[hits], j[hits])], axis=1)
            both = np.concatenate([listed, pairs])
            listed = both[np.lexsort((both[:, 1], both[:, 0]))][:max_examples]
    return count, listed


@dataclass(frozen=True)
class Located:
    """Where the register's cells fall among one release's groups.

    Attributes:
        group_of_cell: the group whose region holds each cell, -1 if none, shape (C,).
            If regions overlap, the highest-numbered covering group (the release is
            invalid anyway).
        overlap_pairs: number of group pairs whose regions share a QI combination
            (as boxes of hierarchy nodes, whether or not the register has someone there).
        overlaps: the first (at most :data:`MAX_LISTED_OVERLAPS`) of those pairs in
            (i, j) order, i < j.
    """

    group_of_cell: IntArray
    overlap_pairs: int
    overlaps: list[tuple[int, int]] = field(default_factory=list)


def locate_groups(cell_leaves: IntArray, group_nodes: IntArray, spans: Sequence[HierarchyIndex]) -> Located:
    """Match cells to group regions and find overlapping regions.

    Args:
        cell_leaves: leaf id per QI of every cell, shape (C, d).
        group_nodes: node id per QI of every group, shape (G, d), rows distinct.
        spans: the index of every QI column's hierarchy, the one the release is read with
            (:attr:`anonymizer.hierarchy.Hierarchy.index`).

    Returns:
        a :class:`Located`: :func:`cover_pairs` for the candidates, :func:`overlapping_pairs`
        on the groups' depth-first boxes for the disjointness (docs/design.md section 1).
    """
    n_groups, d = group_nodes.shape
    lo = np.empty((n_groups, d), dtype=np.int64)
    hi = np.empty((n_groups, d), dtype=np.int64)
    for a, sp in enumerate(spans):
        lo[:, a], hi[:, a] = sp.lo[group_nodes[:, a]], sp.hi[group_nodes[:, a]]
    count, pairs = overlapping_pairs(lo, hi, MAX_LISTED_OVERLAPS)
    ci, gi = cover_pairs(group_nodes, cell_leaves, spans)
    group_of_cell = np.full(cell_leaves.shape[0], -1, dtype=np.int64)
    np.maximum.at(group_of_cell, ci, gi)
    return Located(group_of_cell, count, [(int(i), int(j)) for i, j in pairs])
