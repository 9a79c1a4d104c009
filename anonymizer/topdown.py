"""Top-down multidimensional partitioning of the QI domain (paper 004, section 7).

Paper 004 allows any algorithm whose groups meet the group-size-ratio requirement and
names "a top-down approach to keep breaking up large anonymized groups and stops when it
begins to violate the group size ratio requirement". This is that approach, in the spirit
of Mondrian (LeFevre, DeWitt, Ramakrishnan, ICDE 2006) but over generalization
hierarchies: a region is a box with one hierarchy node per QI, and splitting a region on a
QI replaces that QI's node by its children, one new region per child that holds anybody.

The search works on the same aggregated *cells* as the bottom-up search
(:class:`anonymizer.search.Cells`: distinct QI leaf combinations with their candidates,
records, counts per protected value and requirement), one level at a time for every open
region at once:

1. every region is *narrowed*: on each QI its node becomes the lowest common ancestor of
   its cells' leaves (the register is public, so this tells nothing new);
2. for every open region and every QI whose node is not a leaf, the split into children
   is aggregated (candidates and counts add, requirements take the maximum; the counts
   and requirements are kept sparse, :mod:`anonymizer.part_counts`);
3. a split is *admissible* when every part meets its requirement, ``n >= requirement · n_s``
   for every protected value it holds (:func:`anonymizer.privacy.meets_requirement`'s
   comparison, on the mechanism-aware counts the caller passes); among admissible splits
   the split rule picks one (:data:`SPLIT_RULES`), and a region without one is final.
   Under the ``published`` partition model (the default) a part's n_s in that comparison
   is its *region's* n_s, the most the part can hold: every decision then reads only
   counts the release publishes, so that a region left unsplit tells nothing about its
   parts (docs/threat-model.md, "The partition as evidence").

A region that itself violates its requirement (the root, when some candidate may never be
linked to a value again) must be split whatever the rule says. Under the ``parts`` model it
takes the split whose parts need the fewest records removed
(:func:`anonymizer.search.suppression_need`), under ``published`` the split rule's choice;
the search fails with :class:`anonymizer.search.InfeasibleError` when such a region
cannot be split further. Children of one node are disjoint and narrowing only shrinks a
box, so the final regions are pairwise disjoint and every cell lies in exactly one.

No loop over cells or records in Python: the loops run over levels (at most the sum of
the hierarchies' depths) and QIs.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from anonymizer.arrays import expand_csr, factorize
from anonymizer.hierarchy import Hierarchy
from anonymizer.hierarchy_index import HierarchyIndex
from anonymizer.noisy_split import NoisyPartition
from anonymizer.overlap import Overlap
from anonymizer.part_counts import RegionCounts, ValueCounts, all_per_row, meets
from anonymizer.placement import split_gain
from anonymizer.search import (
    CellInfeasibleError,
    Cells,
    Generalization,
    RequirementInfeasibleError,
    TableInfeasibleError,
    ValueInfeasibleError,
    aggregate,
    split_width,
    suppression_need,
)
from anonymizer.settings import PartitionModel

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: Split rules, measured against each other in docs/benchmarks.md (benchmarks/bench_split_rules.py):
#: ``"width_gain"`` takes the split that removes the most record-weighted split width
#: (:func:`anonymizer.search.split_width`); ``"widest"`` splits the QI whose node has the
#: largest split width (Mondrian's rule); ``"balanced"`` takes the split whose largest part
#: holds the smallest share of the region's candidates; ``"history"`` takes the split whose
#: parts' protected-value rates, estimated from the statistics file, differ most
#: (:mod:`anonymizer.placement`; ties, and every split before the first release, as ``widest``).
SPLIT_RULES = ("width_gain", "widest", "balanced", "history")
#: the rule of every release unless the caller passes another (a constant: nothing sets it)
DEFAULT_SPLIT_RULE = "widest"


@dataclass(frozen=True)
class _Tree:
    """One QI's hierarchy as the search reads it.

    Attributes:
        index: the hierarchy's index (:attr:`anonymizer.hierarchy.Hierarchy.index`): node
            depths and the leaves' ancestor table.
        split_width: :func:`anonymizer.search.split_width` of every node, shape (n_nodes,).
    """

    index: HierarchyIndex
    split_width: FloatArray

    @classmethod
    def of(cls, h: Hierarchy) -> _Tree:
        return cls(h.index, split_width(h))


def _meets(n: IntArray, counts: IntArray, requirement: FloatArray) -> BoolArray:
    """Per row, whether ``n >= requirement · n_s`` for every value it holds (``n_s > 0``):
    :func:`anonymizer.privacy.meets_requirement`'s comparison, for (rows, V) at once."""
    with np.errstate(invalid="ignore", over="ignore"):
        ok = (counts == 0) | (np.isfinite(requirement) & (n[:, None] >= requirement * counts))
    return np.asarray(ok.all(axis=1), dtype=bool)


def _table_failure(n: IntArray, cells: Cells) -> TableInfeasibleError | None:
    """The table-level cause of a failed search, or None when the table as a whole could
    meet the requirement (then some QI cell is to blame).

    For a protected value v: the groups of any partition add up to the table's candidates
    ``sum(n)`` and records ``C_v``, and a group's requirement is at least the smallest of
    any cell's ``r_v``, so ``sum(n) < r_v · C_v`` leaves some group with ``n_g < r_v · c_g``
    (the search's comparison, :func:`_meets`). Only a value whose smallest requirement is
    finite counts: an infinite one is a pair that may not be linked again, named by cell.
    """
    if not cells.counts.size:
        return None
    total = int(n.sum())
    records = cells.counts.sum(axis=0)
    low = cells.requirement.min(axis=0)
    with np.errstate(invalid="ignore", over="ignore"):
        fails = (records > 0) & np.isfinite(low) & ~(total >= low * records)
    if not fails.any():
        return None
    values = np.flatnonzero(fails)
    values = values[np.argsort(-(low[values] * records[values]), kind="stable")]  # the largest shortfall first
    return TableInfeasibleError(values.tolist(), records[values].tolist(), total, low[values].astype(float).tolist())


def _stuck_failure(n: IntArray, cells: Cells, hierarchies: Sequence[Hierarchy], stuck: int) -> ValueInfeasibleError:
    """Why the search stopped at ``stuck`` regions it could neither keep nor split, when the
    table as a whole could meet the requirement (:func:`_table_failure` found nothing).

    Admissible splits keep every part valid, so an invalid region descends from the root,
    the region of the whole snapshot, which fails its requirement (the largest of any
    cell's). Either a cell fails in every partition (an infinite requirement where it holds
    records of the value: :class:`~anonymizer.search.CellInfeasibleError`), or the cells
    holding the root's requirement for a value are what the forced splits tried to set
    apart (:class:`~anonymizer.search.RequirementInfeasibleError`); the cells the splits
    ended at only lacked candidates once cut off, and are not named.
    """

    def qi_values(cell: int) -> str:
        return ", ".join(f"{h.attribute}={h.labels[int(cells.keys[cell, a])]}" for a, h in enumerate(hierarchies))

    counts, req = cells.counts, cells.requirement
    blocked = (counts > 0) & ~np.isfinite(req)
    if blocked.any():
        c, v = (int(x) for x in np.argwhere(blocked)[0])
        return CellInfeasibleError(v, qi_values(c), int(counts[c, v]), int(blocked.any(axis=1).sum()))
    total = int(n.sum())
    records = counts.sum(axis=0)
    high = req.max(axis=0)
    with np.errstate(invalid="ignore", over="ignore"):
        # the root's comparison (:func:`_meets`) per value: how far it misses (inf: never linkable)
        short = np.where(records > 0, high * records - total, -np.inf)
    v = int(np.argmax(short))
    holders = req[:, v] == high[v]
    return RequirementInfeasibleError(
        v,
        qi_values(int(np.flatnonzero(holders)[0])),
        int(n[holders].sum()),
        float(high[v]),
        int(records[v]),
        total,
        stuck,
    )


def _segments(sorted_keys: IntArray) -> IntArray:
    """Start of every run of equal values in a sorted array, shape (runs,)."""
    if not sorted_keys.size:
        return np.empty(0, dtype=np.int64)
    return np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])


def _narrow(leaves: IntArray, region: IntArray, n_regions: int, trees: Sequence[_Tree]) -> IntArray:
    """Per region and QI, the lowest common ancestor of its cells' leaves, shape (n_regions, d).

    Args:
        leaves: leaf per QI of every cell, shape (C, d).
        region: region of every cell, shape (C,), every region in [0, n_regions) non-empty.
    """
    order = np.argsort(region, kind="stable")
    starts = _segments(region[order])
    nodes = np.empty((n_regions, len(trees)), dtype=np.int64)
    for a, tree in enumerate(trees):
        anc = tree.index.anc[leaves[order, a]]  # (C, depth+1)
        shared = np.minimum.reduceat(anc, starts, axis=0) == np.maximum.reduceat(anc, starts, axis=0)
        k = np.cumprod(shared, axis=1).sum(axis=1) - 1  # deepest level all cells agree on
        nodes[region[order[starts]], a] = anc[starts, k]
    return nodes


@dataclass(frozen=True)
class _Split:
    """One QI's split of every open region: its parts and how they fare."""

    part_of_cell: IntArray  # (C_open,), -1 where the region's node is a leaf
    part_region: IntArray  # (P,)
    part_valid: BoolArray  # (P,)
    admissible: BoolArray  # (R_open,): splittable and every part valid
    splittable: BoolArray  # (R_open,)
    need: FloatArray  # (R_open,): records over their requirement, summed over the parts
    score: FloatArray  # (R_open,): higher is better under the split rule
    block: _Block | None = None  # (explain only) the entry that blocks each region's split
    own_slack: FloatArray | None = None  # (noisy test only) (R_open,): least n_p - r · c_p on the parts' own counts
    gain: FloatArray | None = None  # (history rule only) (R_open,): the parts' estimated rates' G statistic


@dataclass(frozen=True)
class _Block:
    """Per open region, the admission entry of one QI's split that is furthest from passing
    (shape (R_open,) each; ``slack`` is inf and the rest -1 where no entry fails).

    ``slack`` = part n / (requirement · n_s): the split is admissible when it is >= 1 for
    every entry, where n_s is the region's count of the value under the ``published`` model
    and the part's own under ``parts``, as the admission test reads it."""

    slack: FloatArray
    part_child: IntArray  # the part's node on this QI
    value: IntArray
    part_n: IntArray
    count: IntArray
    requirement: FloatArray


@dataclass(frozen=True)
class _OpenCells:
    """The cells of the open regions: leaf per QI (C, d), n (their candidates, or records
    under presence) and records (C,), and their counts and requirements, sparse; under the
    ``history`` rule their estimates (C, V) (:func:`anonymizer.placement.cell_estimates`)."""

    keys: IntArray
    n: IntArray
    records: IntArray
    values: ValueCounts
    estimate: FloatArray | None = None


def _split_on(
    a: int,
    *,
    trees: Sequence[_Tree],
    region: IntArray,
    n_open: int,
    open_nodes: IntArray,
    cells: _OpenCells,
    presence: bool,
    rule: str,
    forced: bool,
    region_counts: RegionCounts | None,
    explain: bool,
    noisy: bool,
) -> _Split:
    """:func:`_split` on QI ``a``, with its tree and its column of the open regions' nodes."""
    return _split(
        a, trees[a], region, n_open, open_nodes[:, a], cells, presence, rule, forced, region_counts, explain, noisy
    )


def _split(
    a: int,
    tree: _Tree,
    region: IntArray,
    n_open: int,
    node: IntArray,
    cells: _OpenCells,
    presence: bool,
    rule: str,
    forced: bool,
    region_counts: RegionCounts | None = None,
    explain: bool = False,
    noisy: bool = False,
) -> _Split:
    """Aggregate the split of every open region on QI ``a`` (``node``: its node per region).
    ``forced``: some open region breaks its requirement, so the parts' suppression need,
    which only such regions use to choose their split, is computed (0 otherwise).
    ``region_counts``: the counts of every open region; given (the "published"
    partition model), the split is admissible when every part would be valid for every
    placement of its region's counts, so the verdict reads no count the release does not
    publish. ``part_valid`` is always the part's own verdict: a split taken publishes its
    parts' counts (as sums of final groups), so a part may read them to know whether it must
    itself be split by force. ``explain``: also find the entry that blocks each region's
    split (:class:`_Block`). ``noisy``: also the least slack ``n_p - r · c_p`` of each
    region's parts on their own counts (:mod:`anonymizer.noisy_split`; ``-inf`` where a
    requirement is infinite, ``inf`` for a region whose parts hold no protected record)."""
    leaves, n, values = cells.keys, cells.n, cells.values
    v = node[region]
    splittable_cell = tree.split_width[v] > 0
    anc, depth = tree.index.anc, tree.index.depth
    child = np.where(splittable_cell, anc[leaves[:, a], np.minimum(depth[v] + 1, anc.shape[1] - 1)], -1)
    idx = np.flatnonzero(splittable_cell)
    part_of_cell = np.full(region.size, -1, dtype=np.int64)
    key = region[idx] * np.int64(tree.split_width.size) + child[idx]
    part_idx, first = factorize(key)
    part_of_cell[idx] = part_idx
    p = first.size
    order = np.argsort(part_idx, kind="stable")
    starts = _segments(part_idx[order])
    rows = idx[order]
    part_n = np.add.reduceat(n[rows], starts) if p else np.empty(0, dtype=np.int64)
    part_records = np.add.reduceat(cells.records[rows], starts) if p else np.empty(0, dtype=np.int64)
    part_region = region[idx[first]] if p else np.empty(0, dtype=np.int64)
    part_child = child[idx[first]] if p else np.empty(0, dtype=np.int64)
    # each verdict is meets_requirement's comparison where the part (or its region) holds
    # records of a value, with the part's requirement for that value: the dense
    # ``_meets(part_n, counts, requirement)`` without its (parts, V) matrices
    parts = values.parts(part_of_cell, p)
    req = parts.requirement(parts.part, parts.value)
    part_valid = all_per_row(meets(part_n[parts.part], req, parts.count), parts.part, p)
    part_admits = part_valid
    # the admission test's entries: (part, value, n_s, requirement) and its verdicts
    entry_part, entry_value, entry_count, entry_req, entry_ok = parts.part, parts.value, parts.count, req, None
    if region_counts is not None:
        held, entry = expand_csr(part_region, region_counts.start, np.arange(region_counts.value.size))
        value = region_counts.value[entry]
        held_req = parts.requirement(held, value)
        admits = meets(part_n[held], held_req, region_counts.count[entry])
        part_admits = all_per_row(admits, held, p)
        entry_part, entry_value, entry_req, entry_ok = held, value, held_req, admits
        entry_count = region_counts.count[entry]
    block = None
    if explain:
        ok = entry_ok if entry_ok is not None else meets(part_n[entry_part], entry_req, entry_count)
        block = _blocking(n_open, part_region, part_child, part_n, entry_part, entry_value, entry_count, entry_req, ok)
    part_need = np.zeros(p)
    if forced:
        cut = suppression_need(part_n[parts.part], parts.count[:, None], req[:, None], presence)[:, 0]
        part_need = np.bincount(parts.part, weights=cut, minlength=p).astype(np.float64)
    splittable = np.zeros(n_open, dtype=bool)
    splittable[part_region] = True
    all_valid = np.ones(n_open, dtype=bool)
    np.logical_and.at(all_valid, part_region, part_admits)
    need = np.bincount(part_region, weights=part_need, minlength=n_open).astype(np.float64)
    if rule == "width_gain":
        region_records = np.bincount(part_region, weights=part_records, minlength=n_open)
        after = np.bincount(part_region, weights=part_records * tree.split_width[part_child], minlength=n_open)
        score = region_records * tree.split_width[node] - after
    elif rule == "widest":
        # ties (every QI is at its root at first) go to the split with more parts: a
        # many-way split (a flat hierarchy) only fits while the region is large
        parts_per_region = np.bincount(part_region, minlength=n_open).astype(np.float64)
        score = tree.split_width[node].astype(np.float64) + 1e-6 * parts_per_region
    elif rule == "history":
        # the widest rule's score breaks the ties of the gain (which decides, in partition)
        parts_per_region = np.bincount(part_region, minlength=n_open).astype(np.float64)
        score = tree.split_width[node].astype(np.float64) + 1e-6 * parts_per_region
    else:  # balanced
        region_n = np.bincount(part_region, weights=part_n, minlength=n_open)
        largest = np.zeros(n_open)
        np.maximum.at(largest, part_region, part_n.astype(np.float64))
        with np.errstate(invalid="ignore", divide="ignore"):
            score = np.where(region_n > 0, 1.0 - largest / np.maximum(region_n, 1), 0.0)
    gain = None
    if rule == "history":
        estimate = cells.estimate
        assert estimate is not None, "the history rule needs the cells' estimates"
        part_estimate = np.add.reduceat(estimate[rows], starts, axis=0) if p else np.empty((0, estimate.shape[1]))
        gain = split_gain(part_estimate, part_n, part_region, n_open)
    own_slack = None
    if noisy:
        with np.errstate(invalid="ignore", over="ignore"):
            margin = np.where(np.isfinite(req), part_n[parts.part] - req * parts.count, -np.inf)
        own_slack = np.full(n_open, np.inf)
        np.minimum.at(own_slack, part_region[parts.part], margin)
    return _Split(
        part_of_cell, part_region, part_valid, splittable & all_valid, splittable, need, score, block, own_slack, gain
    )


def _blocking(
    n_open: int,
    part_region: IntArray,
    part_child: IntArray,
    part_n: IntArray,
    entry_part: IntArray,
    entry_value: IntArray,
    entry_count: IntArray,
    entry_req: FloatArray,
    ok: BoolArray,
) -> _Block:
    """Per region, the failing admission entry with the least slack (:class:`_Block`): one
    sort of the failing entries by (region, slack), no loop."""
    fail = np.flatnonzero(~ok)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        need = entry_req[fail] * entry_count[fail]
        slack = np.where(np.isfinite(need) & (need > 0), part_n[entry_part[fail]] / need, 0.0)
    region = part_region[entry_part[fail]]
    order = np.lexsort((slack, region))
    first = order[_segments(region[order])]
    out_slack = np.full(n_open, np.inf)
    out = {k: np.full(n_open, -1, dtype=np.int64) for k in ("part_child", "value", "part_n", "count")}
    out_req = np.full(n_open, np.nan)
    r = region[first]
    e = fail[first]
    out_slack[r] = slack[first]
    out["part_child"][r] = part_child[entry_part[e]]
    out["value"][r] = entry_value[e]
    out["part_n"][r] = part_n[entry_part[e]]
    out["count"][r] = entry_count[e]
    out_req[r] = entry_req[e]
    return _Block(out_slack, out["part_child"], out["value"], out["part_n"], out["count"], out_req)


def partition(
    cells: Cells,
    hierarchies: Sequence[Hierarchy],
    presence: bool,
    rule: str = DEFAULT_SPLIT_RULE,
    model: PartitionModel = PartitionModel.PUBLISHED,
    explain: bool = False,
    noisy: NoisyPartition | None = None,
    estimate: FloatArray | None = None,
) -> Generalization:
    """Split the QI domain top-down into regions that each meet their requirement.

    Args:
        cells: the integer-coded release (:class:`anonymizer.search.Cells`); its counts
            are the ones the guarantee charges (mechanism-aware: every snapshot record).
        hierarchies: one per QI, in the column order of ``cells.keys``.
        presence: candidates are the present individuals (n = records), else the register
            individuals of the region (n = candidates).
        rule: one of :data:`SPLIT_RULES`, chosen by the caller (the benchmark of the rules
            passes each in turn).
        model: what a split decision may read (docs/threat-model.md, "The partition as
            evidence").
            ``"published"``: a region's own counts only (sums of the final groups below it,
            so published) and public register counts: a split is admissible when every
            part would meet its requirement for *every* placement of the region's counts
            (part n >= requirement · region n_s), and a forced split is chosen by the rule
            alone. The partition is then a function of the published counts and tells an
            adversary who knows the algorithm nothing more. ``"parts"``: each part's own
            counts (finer groups; a refused split is evidence about the parts).
        explain: also say, per level, which requirement blocked the splits of the regions
            that stayed whole (:func:`level_report`); off, the search does no extra work.
        noisy: ``partition_test: noisy`` (:mod:`anonymizer.noisy_split`): where the sound
            test admits no split of a valid region, its one public candidate split (the
            rule's best splittable QI) is taken when the noisy test says so. Only under
            the ``published`` model (the parts model reads the parts' counts anyway).
        estimate: the ``history`` rule's per-cell estimates, shape (C, V), read from the
            statistics file (:func:`anonymizer.placement.cell_estimates`): among the
            admissible splits of a region the one with the largest
            :func:`anonymizer.placement.split_gain` is taken, ties by the ``widest`` score.
            Required by that rule, ignored by the others.

    Returns:
        a :class:`anonymizer.search.Generalization` with the final regions as groups
        (node tuples, shape (G, d)), no suppression, ``node_of_leaf`` None (the regions
        are not one cut per QI) and, under ``explain``, ``levels`` (:func:`level_report`).

    Raises:
        InfeasibleError: a region violates its requirement and cannot be split further.
        ValueError: an unknown rule; the ``history`` rule without estimates.
    """
    if rule not in SPLIT_RULES:
        raise ValueError(f"split rule must be one of {SPLIT_RULES}, got {rule!r}")
    if rule == "history" and (estimate is None or estimate.shape[0] != cells.keys.shape[0]):
        raise ValueError("the history split rule needs an estimate row per cell")
    published = PartitionModel(model) is PartitionModel.PUBLISHED
    if noisy is not None and not published:
        raise ValueError("the noisy split test runs under the published partition model only")
    if published and rule == "width_gain":
        # its score reads the parts' record counts, unpublished for a split not taken
        raise ValueError("the width_gain split rule reads unpublished record counts; use widest or balanced")
    d = len(hierarchies)
    trees = [_Tree.of(h) for h in hierarchies]
    leaves = np.asarray(cells.keys, dtype=np.int64)
    n = np.asarray(cells.records if presence else cells.candidates, dtype=np.int64)
    n_cells = leaves.shape[0]
    region_of_cell = np.zeros(n_cells, dtype=np.int64)  # index into the current open regions
    open_nodes = _narrow(leaves, region_of_cell, 1, trees) if n_cells else np.empty((0, d), dtype=np.int64)
    open_cells = np.arange(n_cells, dtype=np.int64)
    open_values = ValueCounts.of(cells.counts, cells.requirement)  # of the open cells, sparse
    final_node_of_cell = np.empty((n_cells, d), dtype=np.int64)
    levels: list[dict[str, object]] = []
    if n_cells:
        root_counts = cells.counts.sum(axis=0, keepdims=True)
        root_req = cells.requirement.max(axis=0, keepdims=True) if cells.requirement.size else cells.requirement[:1]
        open_valid = _meets(np.array([n.sum()], dtype=np.int64), root_counts, root_req)
    with Overlap(2, "serialpub-split") as splitters:
        while open_cells.size:
            n_open = open_nodes.shape[0]
            sub = _OpenCells(
                leaves[open_cells],
                n[open_cells],
                cells.records[open_cells],
                open_values,
                None if estimate is None or rule != "history" else estimate[open_cells],
            )
            region_counts = open_values.regions(region_of_cell, n_open) if published else None
            forced = not open_valid.all()
            # the QIs' splits are independent array work (numpy releases the GIL in it): two at a
            # time on the machine's cores; the list keeps the QI order, so the result is the same.
            # (the level's values are bound here, not read by a closure from the loop)
            split_on = functools.partial(
                _split_on,
                trees=trees,
                region=region_of_cell,
                n_open=n_open,
                open_nodes=open_nodes,
                cells=sub,
                presence=presence,
                rule=rule,
                forced=forced,
                region_counts=region_counts,
                explain=explain,
                noisy=noisy is not None,
            )
            splits = splitters.map(split_on, range(d))
            # choose per region: the best admissible split; an invalid region takes the least need
            admissible = np.stack([s.admissible for s in splits], axis=1)  # (R, d)
            splittable = np.stack([s.splittable for s in splits], axis=1)
            score = np.stack([s.score for s in splits], axis=1)
            need = np.stack([s.need for s in splits], axis=1)
            if rule == "history":
                # the largest gain among the admissible splits; equal gains (none before the
                # first release) as the widest rule would choose
                gain = np.stack([s.gain for s in splits], axis=1)  # type: ignore[misc]
                best_ok = _argmin_then_max(np.where(admissible, -gain, np.inf), np.where(admissible, score, -np.inf))
            else:
                best_ok = np.argmax(np.where(admissible, score, -np.inf), axis=1)
            # a forced split under the published model may not read its parts' counts: the rule alone
            forced_key = np.where(splittable, 0.0 if published else need, np.inf)
            best_forced = _argmin_then_max(forced_key, score)
            has_ok = admissible.any(axis=1)
            stuck = ~open_valid & ~splittable.any(axis=1)
            if stuck.any():
                # the cause, not the cell the search stopped at
                raise _table_failure(n, cells) or _stuck_failure(n, cells, hierarchies, int(stuck.sum()))
            choice = np.where(open_valid, np.where(has_ok, best_ok, -1), best_forced)
            noisy_taken = np.zeros(n_open, dtype=bool)
            if noisy is not None:
                # one public candidate per region the sound test left whole: the rule's best splittable QI
                tried = np.flatnonzero(open_valid & ~has_ok & splittable.any(axis=1))
                candidate = np.argmax(np.where(splittable, score, -np.inf), axis=1)[tried]
                own = np.stack([s.own_slack for s in splits], axis=1)  # type: ignore[misc]
                take = noisy.test.decide(own[tried, candidate], noisy.rng.random(tried.size))
                choice[tried[take]] = candidate[take]
                noisy_taken[tried[take]] = True
                has_ok = has_ok | noisy_taken
            if explain:
                region_n = np.bincount(region_of_cell, weights=sub.n, minlength=n_open).astype(np.int64)
                valid_now, ok_now = np.asarray(open_valid, dtype=bool), np.asarray(has_ok, dtype=bool)
                levels.append(
                    level_report(
                        len(levels) + 1, valid_now, ok_now, splittable, region_n, [s.block for s in splits], hierarchies
                    )
                )
                if noisy is not None:
                    levels[-1]["noisy_taken"] = int(noisy_taken.sum())
            final_region = choice < 0
            # regions that stay: record their nodes for their cells
            fin_cell = final_region[region_of_cell]
            final_node_of_cell[open_cells[fin_cell]] = open_nodes[region_of_cell[fin_cell]]
            # regions that split: cells move to the chosen QI's part
            moving = ~fin_cell
            if not moving.any():
                break
            cell_choice = choice[region_of_cell[moving]]
            n_parts = np.array([s.part_region.size for s in splits], dtype=np.int64)
            offset = np.concatenate([[0], np.cumsum(n_parts)[:-1]])
            part_matrix = np.stack([s.part_of_cell for s in splits], axis=1)[moving]
            global_part = offset[cell_choice] + part_matrix[np.arange(cell_choice.size), cell_choice]
            new_region, first = factorize(global_part)
            open_cells = open_cells[moving]
            open_values = open_values.take(moving)
            region_of_cell = new_region
            # a part's box is its parent's with the chosen QI's child; narrowing it to its cells'
            # common ancestors lands inside that box, so the nodes come from the cells alone
            open_nodes = _narrow(leaves[open_cells], region_of_cell, first.size, trees)
            open_valid = np.concatenate([s.part_valid for s in splits])[global_part[first]]
        groups, group_of_cell = aggregate(
            final_node_of_cell,
            [h.n_nodes for h in hierarchies],
            cells.candidates,
            cells.records,
            cells.counts,
            cells.requirement,
        )
    return Generalization(
        node_of_leaf=None,
        group_of_cell=group_of_cell,
        groups=groups,
        suppress=np.zeros_like(groups.counts),
        steps=[],
        levels=levels if explain else None,
    )


#: blocking causes listed per level by :func:`level_report`, the most candidates first
TOP_BLOCKS = 5


def level_report(
    level: int,
    valid: BoolArray,
    has_ok: BoolArray,
    splittable: BoolArray,
    region_n: IntArray,
    blocks: Sequence[_Block | None],
    hierarchies: Sequence[Hierarchy],
) -> dict[str, object]:
    """What one level of the search did, and why the regions that stayed whole did.

    A region is *blocked* when it meets its requirement and some QI could split it, but no
    split is admissible. For each blocked region the QI whose split came closest (the
    largest least slack, :class:`_Block`) names the requirement that blocked it: the part
    (its label on that QI), the protected value (its index; :func:`name_values` names it),
    the part's candidates ``part_n``, the count it is judged against ``n_s`` (the region's
    under ``published``), their ``ratio`` part_n / n_s and the ``target`` (the requirement).

    Returns:
        a JSON-ready dict: ``level`` (1 = the root), ``regions`` open, ``split`` (by an
        admissible split), ``forced`` (invalid regions split anyway), ``leaf`` (valid,
        nothing left to split), ``blocked`` and ``blocked_candidates``; ``blocks``: the
        (QI, value) pairs that blocked most candidates, at most :data:`TOP_BLOCKS`, each
        with its ``regions``, ``candidates`` and the largest such region's ``example``.
    """
    slack = np.stack([b.slack if b is not None else np.full(valid.size, np.inf) for b in blocks], axis=1)
    blocked = valid & ~has_ok & splittable.any(axis=1)
    closest = np.argmax(np.where(splittable, slack, -np.inf), axis=1)
    rows = np.flatnonzero(blocked)
    out: dict[str, object] = {
        "level": level,
        "regions": int(valid.size),
        "split": int((valid & has_ok).sum()),
        "forced": int((~valid).sum()),
        "leaf": int((valid & ~has_ok & ~splittable.any(axis=1)).sum()),
        "blocked": int(rows.size),
        "blocked_candidates": int(region_n[rows].sum()),
        "blocks": [],
    }
    if not rows.size:
        return out
    qi = closest[rows]
    values = np.stack([b.value if b is not None else np.full(valid.size, -1) for b in blocks], axis=1)
    value = values[rows, qi]
    key = qi * np.int64(max(int(value.max()) + 1, 1)) + value
    uniq, inverse = np.unique(key, return_inverse=True)
    cand = np.bincount(inverse, weights=region_n[rows], minlength=uniq.size)
    found: list[dict[str, object]] = []
    for k in np.argsort(-cand, kind="stable")[:TOP_BLOCKS]:
        members = np.flatnonzero(inverse == k)
        r_i = int(members[np.argmax(region_n[rows[members]])])
        r, a = int(rows[r_i]), int(qi[r_i])
        b = blocks[a]
        assert b is not None
        found.append(
            {
                "qi": hierarchies[a].attribute,
                "value": int(b.value[r]),
                "regions": int(members.size),
                "candidates": int(cand[k]),
                "example": {
                    "region_candidates": int(region_n[r]),
                    "part": hierarchies[a].labels[int(b.part_child[r])],
                    "part_n": int(b.part_n[r]),
                    "n_s": int(b.count[r]),
                    "ratio": round(float(b.part_n[r]) / max(int(b.count[r]), 1), 3),
                    "target": round(float(b.requirement[r]), 3),
                },
            }
        )
    out["blocks"] = found
    return out


def name_values(levels: Sequence[dict[str, object]], names: Sequence[str]) -> list[dict[str, object]]:
    """:func:`level_report`'s levels with every protected value index replaced by its name."""
    named = []
    for lv in levels:
        blocks = [{**b, "value": names[int(b["value"])]} for b in lv["blocks"]]  # type: ignore[attr-defined]
        named.append({**lv, "blocks": blocks})
    return named


def _argmin_then_max(primary: FloatArray, secondary: FloatArray) -> IntArray:
    """Per row, the column with the least ``primary``, ties broken by the largest ``secondary``
    and then by the lowest column; shape (R,)."""
    low = primary.min(axis=1, keepdims=True)
    tied = primary == low
    return np.asarray(np.argmax(np.where(tied, secondary, -np.inf), axis=1), dtype=np.int64)
