"""Closed intervals ``[lo, hi]`` on numeric quasi-identifiers, as hierarchy nodes.

The release contract (docs/design.md, "Release contract") lets a QI declared numeric carry
a closed interval ``[lo, hi]``: every leaf whose number v has ``lo <= v <= hi``. Every
reader of a release (contract suite, breach check, audit, import, query measure, reports)
already works on :class:`anonymizer.hierarchy.Hierarchy` nodes, so this module turns
intervals into nodes instead of teaching each reader a second kind of value:

- :func:`quantile_hierarchy` gives the top-down search (:mod:`anonymizer.topdown`) a
  binary hierarchy of intervals for a numeric QI: the domain is halved at the register's
  weighted median, recursively, down to the leaves. The register is public, so the tree
  reveals nothing about the sensitive values. Its interval labels are what gets published.
- :func:`extend_hierarchy` rebuilds, from the labels one release actually holds, a
  hierarchy whose nodes are the leaves, the root ``*`` and those labels. Readers use it
  per release; they need nothing but the declared hierarchy file and the table.

Both keep leaf ids (leaves stay first, in file order), so register and snapshot codes are
unchanged. A hierarchy is a tree, so the labels of one release must be *laminar* (any two
intervals nested or disjoint): intervals cut from one binary tree always are; a label
that partially overlaps another is left out of the extension, so a reader reports it as
an unknown value (the contract suite fails, naming it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from anonymizer.hierarchy import ROOT, Hierarchy

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def interval_label(lo: str, hi: str) -> str:
    """The published label of the closed interval from leaf label ``lo`` to ``hi``."""
    return f"[{lo}, {hi}]"


def parse_interval(label: str) -> tuple[float, float] | None:
    """``(lo, hi)`` of a label written ``[lo, hi]`` with numbers ``lo <= hi``, else None."""
    text = label.strip()
    if len(text) < 5 or text[0] != "[" or text[-1] != "]":
        return None
    parts = text[1:-1].split(",")
    if len(parts) != 2:
        return None
    try:
        lo, hi = float(parts[0]), float(parts[1])
    except ValueError:
        return None
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo > hi:
        return None
    return lo, hi


def _numbers(h: Hierarchy) -> FloatArray:
    if not h.numeric:
        raise ValueError(
            f"QI {h.attribute!r} is declared numeric but its hierarchy has leaves that are not numbers; "
            "remove it from 'numeric' or give it numeric leaves"
        )
    return h.leaf_numbers()


def _build(h: Hierarchy, labels: Sequence[str], members: BoolArray, source: str) -> Hierarchy:
    """A hierarchy over ``h``'s leaves whose inner nodes are ``labels`` (leaf sets
    ``members``, shape (L, n_leaves), laminar and non-empty; a set equal to a leaf or to
    the domain becomes a chain above that leaf or below ``*``)."""
    sizes = members.sum(axis=1)
    rank = sorted(range(len(labels)), key=lambda i: (int(sizes[i]), labels[i]))  # smallest first
    leaf_of, pos = np.nonzero(members[rank].T)  # by leaf, then smallest label first
    ranked = [labels[i] for i in rank]
    bounds = np.searchsorted(leaf_of, np.arange(h.n_leaves + 1))
    chains = [[ranked[j] for j in pos[bounds[x] : bounds[x + 1]]] for x in range(h.n_leaves)]
    depth = max((len(c) for c in chains), default=0)
    rows = []
    for leaf, chain in enumerate(chains):  # one row per leaf, in file order: leaf ids stay
        name = h.labels[leaf]
        # pad at the leaf end: a leaf repeated is a chain of itself, a '*' repeated is not
        rows.append((leaf + 1, [name] * (depth - len(chain) + 1) + chain + [ROOT]))
    return Hierarchy.from_rows(h.attribute, rows, source)


def quantile_hierarchy(h: Hierarchy, weights: npt.ArrayLike) -> Hierarchy:
    """Binary interval hierarchy of a numeric QI, split at weighted medians.

    Args:
        h: the declared hierarchy (numeric leaves; only its leaves are used).
        weights: register individuals per leaf, shape (n_leaves,), non-negative.

    Returns:
        a hierarchy whose inner nodes are ``[lo, hi]`` intervals (leaf labels as bounds):
        the leaves sorted by number are halved where the two parts' weights are closest
        (by leaf count when a range weighs nothing), down to single leaves. A declared
        label is reused when it names the same leaves.

    Raises:
        ValueError: the leaves are not numbers, ``weights`` has the wrong shape, or an
            interval's label is a declared label of other leaves.
    """
    numbers = _numbers(h)
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (h.n_leaves,) or np.any(w < 0):
        raise ValueError(f"weights must be {h.n_leaves} non-negative numbers, got shape {w.shape}")
    order = np.argsort(numbers, kind="stable")
    cum = np.concatenate([[0.0], np.cumsum(w[order])])
    spans: list[tuple[int, int]] = []
    stack = [(0, h.n_leaves - 1)]
    while stack:  # at most n_leaves - 1 splits of a hierarchy's leaves, not records
        i, j = stack.pop()
        if i == j:
            continue
        if (i, j) != (0, h.n_leaves - 1):
            spans.append((i, j))
        ks = np.arange(i, j)  # split after position k
        total = cum[j + 1] - cum[i]
        if total > 0:
            gap = np.abs(2 * (cum[ks + 1] - cum[i]) - total)
            k = int(ks[np.argmin(gap + 1e-9 * np.abs(2 * ks - (i + j)))])
        else:
            k = (i + j) // 2
        stack += [(i, k), (k + 1, j)]
    labels: list[str] = []
    members = np.zeros((len(spans), h.n_leaves), dtype=bool)
    declared = h.index.ancestor_matrix()
    for r, (i, j) in enumerate(spans):
        leaves = order[i : j + 1]
        members[r, leaves] = True
        label = interval_label(h.labels[order[i]], h.labels[order[j]])
        if h.has_label(label) and not np.array_equal(declared[:, h.node(label)], members[r]):
            raise ValueError(
                f"hierarchy of {h.attribute!r}: its label {label!r} names other leaves than the interval "
                "it spells; rename that label"
            )
        labels.append(label)
    return _build(h, labels, members, f"interval hierarchy of {h.attribute!r}")


def _leaf_set(h: Hierarchy, label: str, numbers: FloatArray, declared: BoolArray) -> BoolArray | None:
    if h.has_label(label):
        return declared[:, h.node(label)]
    bounds = parse_interval(label)
    if bounds is None:
        return None
    inside = (numbers >= bounds[0]) & (numbers <= bounds[1])
    return inside if inside.any() else None


def extend_hierarchy(h: Hierarchy, labels: Iterable[str]) -> Hierarchy:
    """The hierarchy a release of a numeric QI is read with: leaves, ``*`` and ``labels``.

    Args:
        h: the declared hierarchy (numeric leaves).
        labels: the QI's distinct published values. A declared label means its node's
            leaves; another ``[lo, hi]`` (numbers, lo <= hi) means the leaves whose number
            lies in it; anything else, an interval holding no leaf, or a label that
            partially overlaps one kept before it (labels are kept in the order given,
            declared labels first) is left out, so a reader finds it unknown.

    Returns:
        a hierarchy with ``h``'s leaves (same ids) whose every other node is one of the
        kept labels (or ``*``).

    Raises:
        ValueError: the leaves are not numbers.
    """
    numbers = _numbers(h)
    declared = h.index.ancestor_matrix()
    distinct = list(dict.fromkeys(str(x) for x in labels))
    distinct.sort(key=lambda x: not h.has_label(x))  # stable: declared labels first
    kept: list[str] = []
    rows: list[BoolArray] = []
    for label in distinct:  # distinct labels of one QI in one release, not records
        if label == ROOT or (h.has_label(label) and h.node(label) < h.n_leaves):
            continue
        leaves = _leaf_set(h, label, numbers, declared)
        if leaves is None:
            continue
        if rows:
            mat = np.stack(rows)
            inter = (mat & leaves).sum(axis=1)
            size = mat.sum(axis=1)
            if np.any((inter > 0) & (inter < size) & (inter < leaves.sum())):
                continue  # partial overlap: not a tree
        kept.append(label)
        rows.append(leaves)
    mat = np.stack(rows) if rows else np.zeros((0, h.n_leaves), dtype=bool)
    return _build(h, kept, mat, f"intervals of {h.attribute!r}")


def release_hierarchies(
    hierarchies: Mapping[str, Hierarchy], numeric: Iterable[str], table: Any
) -> dict[str, Hierarchy]:
    """The hierarchies to read one release table with: :func:`extend_hierarchy` on the
    columns of ``numeric`` (QIs declared numeric), the declared hierarchy on the others.

    Args:
        hierarchies: declared hierarchy per QI.
        numeric: the QIs declared numeric (manifest ``numeric_quasi_identifiers``).
        table: a DataFrame holding one column per QI of ``numeric``.
    """
    out = dict(hierarchies)
    for q in numeric:
        out[q] = extend_hierarchy(hierarchies[q], table[q].astype(str).unique())
    return out
