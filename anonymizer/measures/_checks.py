"""Argument checks shared by the information-loss measures (:mod:`.group_size`,
:mod:`.certainty_penalty`, :mod:`.information_loss`, :mod:`.utility`).

Published values are node ids of each QI's :class:`~anonymizer.hierarchy.Hierarchy`, original
values its leaf ids, one column per QI; every check raises ValueError naming the argument.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from anonymizer.hierarchy import Hierarchy
from anonymizer.measures.published import IdArray, PublishedNodes

IntArray = npt.NDArray[np.int64]


def int_array(values: npt.ArrayLike, name: str, ndim: int) -> IntArray:
    return int_array_as_given(values, name, ndim).astype(np.int64, copy=False)


def int_array_as_given(values: npt.ArrayLike, name: str, ndim: int) -> npt.NDArray[np.integer[Any]]:
    """``values`` checked as :func:`int_array` does, in their own integer type where every
    index operation takes it (not uint64): ids as long as the snapshot are read, not copied."""
    arr = np.asarray(values)
    if arr.size == 0 and arr.dtype.kind not in "iu":
        arr = arr.astype(np.int64)  # an empty list arrives as float64
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integers, got dtype {arr.dtype}")
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    return arr if arr.dtype.kind == "i" or arr.dtype.itemsize < 8 else arr.astype(np.int64)


def check_hierarchies(hierarchies: Sequence[Hierarchy]) -> list[Hierarchy]:
    hs = list(hierarchies)
    if not hs:
        raise ValueError("at least one quasi-identifier hierarchy is needed")
    for h in hs:
        if not isinstance(h, Hierarchy):
            raise ValueError(f"hierarchies must be Hierarchy objects, got {type(h).__name__}")
    return hs


def check_ids(hs: list[Hierarchy], ids: npt.ArrayLike, name: str, leaves: bool) -> IdArray:
    """An (R, d) array of node ids (or leaf ids with ``leaves``), one column per hierarchy,
    in its own integer type (:func:`int_array_as_given`).

    Raises:
        ValueError: wrong shape, or an id outside its hierarchy's nodes (leaves).
    """
    arr = int_array_as_given(ids, name, 2)
    if arr.shape[1] != len(hs):
        raise ValueError(f"{name} has {arr.shape[1]} columns but there are {len(hs)} QI hierarchies")
    kind = "leaf" if leaves else "node"
    if not arr.shape[0]:
        return arr
    # every column's extremes in one pass over the rows (a column at a time would read the
    # (R, d) array d times, strided, and this is called once per measure)
    lowest, highest = arr.min(axis=0), arr.max(axis=0)
    for j, h in enumerate(hs):
        bound = h.n_leaves if leaves else h.n_nodes
        if lowest[j] < 0 or highest[j] >= bound:
            raise ValueError(f"{name}: QI {h.attribute!r} has {kind} ids outside [0, {bound})")
    return arr


def check_nodes(hs: list[Hierarchy], nodes: npt.ArrayLike, name: str) -> IdArray:
    return check_ids(hs, nodes, name, leaves=False)


def check_leaves(hs: list[Hierarchy], leaves: npt.ArrayLike, name: str) -> IdArray:
    return check_ids(hs, leaves, name, leaves=True)


def check_generalizes(hs: list[Hierarchy], published: IdArray | PublishedNodes, leaves: IdArray) -> None:
    """Every published node must be the record's leaf or an ancestor of it. Both hold valid
    ids (:func:`check_leaves`, :func:`check_nodes`); ``published`` (R, d) as an array or per
    group."""
    nodes = published if isinstance(published, PublishedNodes) else PublishedNodes.per_record(published)
    if nodes.shape != leaves.shape:
        raise ValueError(f"published nodes have shape {nodes.shape} but original leaves have shape {leaves.shape}")
    for j, h in enumerate(hs):
        # each distinct (leaf, node) pair is checked once: a QI has a few hundred among
        # any number of records, so the records are read only to find them
        record_node = nodes.column(j)
        key = leaves[:, j].astype(np.int64) * h.n_nodes + record_node
        possible = h.n_leaves * h.n_nodes
        if possible <= max(4 * key.size, 1 << 22):
            pairs = np.flatnonzero(np.bincount(key, minlength=possible))
        else:
            pairs = np.unique(key)
        leaf, node = np.divmod(pairs, h.n_nodes)
        ok = np.zeros(pairs.size, dtype=bool)
        for column in h.leaf_nodes:  # depth rows: no (depth × pairs) temporary
            ok |= column[leaf] == node
        if not ok.all():
            r = int(np.flatnonzero(np.isin(key, pairs[~ok]))[0])
            raise ValueError(
                f"record {r}: published value {h.labels[record_node[r]]!r} of QI {h.attribute!r} does not "
                f"generalize its original value {h.labels[leaves[r, j]]!r}"
            )


def check_counts(hs: list[Hierarchy], leaf_counts: Sequence[npt.ArrayLike], leaves: IdArray) -> list[IntArray]:
    """Snapshot leaf frequencies: one (n_leaves,) count array per QI, equal totals, and at
    least the published records' own counts (published records are part of the snapshot)."""
    counts = list(leaf_counts)
    if len(counts) != len(hs):
        raise ValueError(f"leaf_counts has {len(counts)} arrays but there are {len(hs)} QI hierarchies")
    out: list[IntArray] = []
    total: int | None = None
    for j, (h, c) in enumerate(zip(hs, counts, strict=True)):
        arr = int_array(c, f"leaf_counts[{j}]", 1)
        if arr.shape != (h.n_leaves,):
            raise ValueError(
                f"leaf_counts[{j}] must have shape ({h.n_leaves},) for QI {h.attribute!r}, got {arr.shape}"
            )
        if arr.size and arr.min() < 0:
            raise ValueError(f"leaf_counts[{j}] has negative counts")
        n = int(arr.sum())
        if total is None:
            total = n
        elif n != total:
            raise ValueError(f"leaf_counts[{j}] sums to {n} records but leaf_counts[0] to {total}; give one snapshot")
        published = np.bincount(leaves[:, j], minlength=h.n_leaves)
        if np.any(published > arr):
            leaf = int(np.flatnonzero(published > arr)[0])
            raise ValueError(
                f"QI {h.attribute!r}: {int(published[leaf])} published records have value {h.labels[leaf]!r} but the "
                f"snapshot counts only {int(arr[leaf])}; leaf_counts must count the whole snapshot"
            )
        out.append(arr)
    return out


def check_count(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)
