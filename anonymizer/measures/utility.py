"""Information loss of a release against its snapshot (utility measures).

The project's own utility figure, the average relative error of random range-count queries
(Xiao & Tao, paper 001 §5.2), lives in :mod:`anonymizer.queries`; this module adds the
classical information-loss measures so that a release can be compared with the literature:

- the discernibility metric C_DM (Bayardo & Agrawal, ICDE 2005) and the average
  QI-group (equivalence-class) size C_AVG (LeFevre, DeWitt & Ramakrishnan, ICDE 2006);
- the normalized certainty penalty NCP (Xu, Wang, Pei, Wang, Shi & Fu, KDD 2006);
  these three papers are not in ``papers/``: the definitions are the ones the field cites;
- the thesis's measures (Hsu 2008, paper 000, chapter 4; extracted in
  ``papers/notes/seed000.md`` §3.1-3.3): redaction counting and the tree measure (§4.1), the
  entropy measure Π_e (Def 4.2.1), the monotone entropy measure Π_me (Def 4.2.4), the
  non-uniform entropy measure Π_ne (Def 4.2.6) and the tuple-wise variance loss Π_tv
  (Defs 4.4.1-4.4.2) with the 0/1 ground distance;
- the suppression rate.

Conventions (the same for every measure here):

- **The snapshot is the original table T.** Probabilities of the entropy measures are the
  leaf frequencies of the whole snapshot, suppressed records included, because the thesis
  takes them from T (§4.2: ``Pr(X_j = a) = |{t ∈ T : t[A_j] = a}| / n``) and T is every
  record the release was made from. log is log₂ (§4.2), so entropies are in bits.
- **A suppressed record counts as fully generalized**: every QI cell is the root ``*`` of
  its hierarchy. This is the thesis's suppression (Def 2.3.1: a cell becomes A_i) applied to
  every cell, which keeps T* a generalization of all of T (Def 2.3.4, one tuple of T* per
  tuple of T). So a suppressed record costs d redactions, d under the tree measure, Σ_j H(X_j)
  under Π_e and Π_me, Σ_j −log₂ Pr(its leaf) under Π_ne and 1 under NCP; in the
  discernibility metric it costs |D| (Bayardo & Agrawal's penalty for a suppressed record).
  Π_tv keeps its sensitive value, as the thesis never generalizes the sensitive attribute.
- **Nodes, not labels.** Published values are node ids of the QI's
  :class:`~anonymizer.hierarchy.Hierarchy`; a published node must be the record's own leaf
  or one of its ancestors (ValueError otherwise).

Everything is vectorized over records (lookup tables per node, bincount); a 1,000,000-record
release with 8 QIs takes a few seconds. This module does no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from anonymizer.arrays import factorize, row_keys
from anonymizer.hierarchy import Hierarchy
from anonymizer.measures.base import Measure, not_computed

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

FAMILY = "utility"

SRC_DM = "Bayardo & Agrawal 2005 (ICDE; not in papers/), discernibility metric C_DM"
SRC_CAVG = "LeFevre, DeWitt & Ramakrishnan 2006 (ICDE; not in papers/), C_AVG"
SRC_NCP = "Xu et al. 2006 (KDD; not in papers/), normalized certainty penalty"
SRC_REDACT = "Hsu 2008 (paper 000) §4.1, redaction counting (after Meyerson & Williams)"
SRC_TREE = "Hsu 2008 (paper 000) §4.1, tree measure r/l (after Aggarwal et al.)"
SRC_PI_E = "Hsu 2008 (paper 000) §4.2 Def 4.2.1, entropy measure Π_e"
SRC_PI_ME = "Hsu 2008 (paper 000) §4.2 Def 4.2.4, monotone entropy measure Π_me"
SRC_PI_NE = "Hsu 2008 (paper 000) §4.2 Def 4.2.6, non-uniform entropy measure Π_ne"
SRC_PI_TV = "Hsu 2008 (paper 000) §4.4 Defs 4.4.1-4.4.2, tuple-wise variance loss Π_tv"
SRC_SUPPRESSION = "serialpub release model: a suppressed record is left out of the release"


# --------------------------------------------------------------------------------------
# Argument checks
# --------------------------------------------------------------------------------------


def _int_array(values: npt.ArrayLike, name: str, ndim: int) -> IntArray:
    arr = np.asarray(values)
    if arr.size == 0 and arr.dtype.kind not in "iu":
        arr = arr.astype(np.int64)  # an empty list arrives as float64
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integers, got dtype {arr.dtype}")
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    return arr.astype(np.int64, copy=False)


def _check_hierarchies(hierarchies: Sequence[Hierarchy]) -> list[Hierarchy]:
    hs = list(hierarchies)
    if not hs:
        raise ValueError("at least one quasi-identifier hierarchy is needed")
    for h in hs:
        if not isinstance(h, Hierarchy):
            raise ValueError(f"hierarchies must be Hierarchy objects, got {type(h).__name__}")
    return hs


def _check_ids(hs: list[Hierarchy], ids: npt.ArrayLike, name: str, leaves: bool) -> IntArray:
    """An (R, d) array of node ids (or leaf ids with ``leaves``), one column per hierarchy.

    Raises:
        ValueError: wrong shape, or an id outside its hierarchy's nodes (leaves).
    """
    arr = _int_array(ids, name, 2)
    if arr.shape[1] != len(hs):
        raise ValueError(f"{name} has {arr.shape[1]} columns but there are {len(hs)} QI hierarchies")
    kind = "leaf" if leaves else "node"
    for j, h in enumerate(hs):
        col = arr[:, j]
        bound = h.n_leaves if leaves else h.n_nodes
        if col.size and (col.min() < 0 or col.max() >= bound):
            raise ValueError(f"{name}: QI {h.attribute!r} has {kind} ids outside [0, {bound})")
    return arr


def _check_nodes(hs: list[Hierarchy], nodes: npt.ArrayLike, name: str) -> IntArray:
    return _check_ids(hs, nodes, name, leaves=False)


def _check_leaves(hs: list[Hierarchy], leaves: npt.ArrayLike, name: str) -> IntArray:
    return _check_ids(hs, leaves, name, leaves=True)


def _check_generalizes(hs: list[Hierarchy], nodes: IntArray, leaves: IntArray) -> None:
    """Every published node must be the record's leaf or an ancestor of it."""
    if nodes.shape != leaves.shape:
        raise ValueError(f"published nodes have shape {nodes.shape} but original leaves have shape {leaves.shape}")
    for j, h in enumerate(hs):
        ok = np.zeros(nodes.shape[0], dtype=bool)
        for column in h.leaf_nodes:  # depth rows: no (depth × R) temporary
            ok |= column[leaves[:, j]] == nodes[:, j]
        if not ok.all():
            r = int(np.flatnonzero(~ok)[0])
            raise ValueError(
                f"record {r}: published value {h.labels[nodes[r, j]]!r} of QI {h.attribute!r} does not "
                f"generalize its original value {h.labels[leaves[r, j]]!r}"
            )


def _check_counts(hs: list[Hierarchy], leaf_counts: Sequence[npt.ArrayLike], leaves: IntArray) -> list[IntArray]:
    """Snapshot leaf frequencies: one (n_leaves,) count array per QI, equal totals, and at
    least the published records' own counts (published records are part of the snapshot)."""
    counts = list(leaf_counts)
    if len(counts) != len(hs):
        raise ValueError(f"leaf_counts has {len(counts)} arrays but there are {len(hs)} QI hierarchies")
    out: list[IntArray] = []
    total: int | None = None
    for j, (h, c) in enumerate(zip(hs, counts, strict=True)):
        arr = _int_array(c, f"leaf_counts[{j}]", 1)
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


# --------------------------------------------------------------------------------------
# Per-node tables
# --------------------------------------------------------------------------------------


def _node_sums(h: Hierarchy, per_leaf: FloatArray) -> FloatArray:
    """Σ over the leaves below every node, shape (n_nodes,); a node repeated on consecutive
    columns (a chain) is counted once per leaf, as in ``Hierarchy.leaf_counts``."""
    out = np.zeros(h.n_nodes, dtype=np.float64)
    for level in range(h.depth):
        row = h.leaf_nodes[level]
        first = np.ones(h.n_leaves, dtype=bool) if level == 0 else row != h.leaf_nodes[level - 1]
        out += np.bincount(row[first], weights=per_leaf[first], minlength=h.n_nodes)
    return out


def tree_levels(h: Hierarchy) -> IntArray:
    """Level r of every node for the tree measure (Hsu 2008, paper 000, §4.1), shape (n_nodes,).

    The level is the column of the node in the leaf-to-root rows: 0 for leaves, depth − 1 for
    the root. A node repeated on consecutive columns (the thesis's balancing chain, §2.1) is
    one node id here, so it gets its lowest column: a chain copy describes the same set of
    leaves as its lowest occurrence and is charged like it.
    """
    level = np.full(h.n_nodes, h.depth, dtype=np.int64)
    for col in range(h.depth):
        np.minimum.at(level, h.leaf_nodes[col], col)
    return level


def node_ncp(h: Hierarchy) -> FloatArray:
    """Normalized certainty penalty of publishing each node, shape (n_nodes,), in [0, 1].

    Xu et al. KDD 2006: categorical QI, NCP = 0 for a single value and
    |leaves under the node| / |leaves of the domain| otherwise; numeric QI,
    NCP = (hi − lo) / (max − min), where [lo, hi] is the generalized interval (here the min
    and max of the numbers of the node's leaves, ``Hierarchy.leaf_numbers``) and [min, max]
    spans the domain. Xu et al. take max − min over the table's values (as we read their
    definition; the paper is not in papers/); we take the hierarchy's leaves, the declared
    domain, so the figure does not depend on which values happen to occur in a snapshot
    (the two agree when both extreme values occur). A numeric
    domain of a single value, or with a non-finite number, is treated as categorical.
    """
    sizes = h.leaf_counts().astype(np.float64)
    categorical = np.where(sizes <= 1, 0.0, sizes / h.n_leaves)
    if not h.numeric:
        return categorical
    numbers = h.leaf_numbers()
    span = float(numbers.max() - numbers.min()) if numbers.size else 0.0
    if not np.all(np.isfinite(numbers)) or span <= 0.0:
        return categorical
    lo = np.full(h.n_nodes, np.inf)
    hi = np.full(h.n_nodes, -np.inf)
    for row in h.leaf_nodes:
        np.minimum.at(lo, row, numbers)
        np.maximum.at(hi, row, numbers)
    return np.asarray((hi - lo) / span, dtype=np.float64)


@dataclass(frozen=True)
class EntropyTables:
    """Per-node figures of the thesis's entropy measures for one QI (Hsu 2008, paper 000, §4.2).

    Probabilities are leaf frequencies of the original table (the snapshot); log = log₂.

    Attributes:
        records: n, the snapshot size the frequencies count.
        count: records of the snapshot whose value lies below each node, shape (n_nodes,).
        entropy: H(X | B) of every node B in bits (0 for a leaf, H(X) for the root; 0 for a
            node no snapshot record lies below), shape (n_nodes,). Cost of one cell under Π_e.
        monotone: Pr(B) · H(X | B) in bits, shape (n_nodes,). Cost of one cell under Π_me.
        log_count: log₂ of the leaf and node counts (−inf where the count is 0), shape
            (n_nodes,); a cell with leaf a published as B costs
            ``log_count[B] − log_count[a] = −log₂ Pr(a | B)`` under Π_ne.
    """

    records: int
    count: FloatArray
    entropy: FloatArray
    monotone: FloatArray
    log_count: FloatArray


def entropy_tables(h: Hierarchy, leaf_counts: npt.ArrayLike) -> EntropyTables:
    """Per-node costs of Π_e, Π_me and Π_ne for one QI.

    Args:
        h: the QI's hierarchy.
        leaf_counts: snapshot records per leaf, shape (n_leaves,), non-negative integers.

    Uses counts, not probabilities, for accuracy:
    ``Pr(B)·H(X|B) = (C_B log₂ C_B − Σ_{a∈B} c_a log₂ c_a) / n`` (the identity in the proof
    of Lemma 4.2.5) and ``H(X|B) = (C_B log₂ C_B − Σ c_a log₂ c_a) / C_B``.

    Raises:
        ValueError: counts of the wrong shape, negative or non-integer.

    Source: Hsu 2008 (paper 000) §4.2, Defs 4.2.1, 4.2.4, 4.2.6.
    """
    c = _int_array(leaf_counts, "leaf_counts", 1)
    if c.shape != (h.n_leaves,):
        raise ValueError(f"leaf_counts must have shape ({h.n_leaves},) for QI {h.attribute!r}, got {c.shape}")
    if c.size and c.min() < 0:
        raise ValueError("leaf_counts has negative counts")
    n = int(c.sum())
    cf = c.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        clogc = np.where(cf > 0, cf * np.log2(np.where(cf > 0, cf, 1.0)), 0.0)
        count = _node_sums(h, cf)
        inner = _node_sums(h, clogc)
        big = np.where(count > 0, count * np.log2(np.where(count > 0, count, 1.0)), 0.0)
        # C log C − Σ c log c ≥ 0 mathematically; clip rounding noise (and exact 0 for leaves)
        excess = np.maximum(big - inner, 0.0)
        entropy = np.where(count > 0, excess / np.where(count > 0, count, 1.0), 0.0)
        monotone = excess / n if n else np.zeros(h.n_nodes)
        log_count = np.where(count > 0, np.log2(np.where(count > 0, count, 1.0)), -np.inf)
    return EntropyTables(n, count, entropy, monotone, log_count)


# --------------------------------------------------------------------------------------
# Group-size measures
# --------------------------------------------------------------------------------------


def _check_sizes(group_sizes: npt.ArrayLike) -> IntArray:
    sizes = _int_array(group_sizes, "group_sizes", 1)
    if sizes.size and sizes.min() < 1:
        raise ValueError("group_sizes: every QI-group must hold at least one record")
    return sizes


def _check_count(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def discernibility(group_sizes: npt.ArrayLike, suppressed: int) -> int:
    """Discernibility metric C_DM of a release.

    ``C_DM = Σ_groups |E|² + |suppressed| · |D|``: every published record is charged the size
    of its QI-group (equivalence class E), every suppressed record the size |D| of the whole
    snapshot (published + suppressed), Bayardo & Agrawal's penalty for a record that cannot be
    told apart from any other. Minimum |D| (every record alone, nothing suppressed), maximum
    |D|² (one group, or everything suppressed). Bayardo & Agrawal also charge |D| per record of
    a group smaller than k; a release has no such published group, so no k is needed.

    Args:
        group_sizes: published records per QI-group, shape (G,), each ≥ 1
            (``np.bincount(group)`` of the per-record group codes).
        suppressed: number of suppressed snapshot records, ≥ 0.

    Returns:
        C_DM in records² (exact integer).

    Raises:
        ValueError: a group size below 1, non-integers, or a negative suppressed count.

    Source: Bayardo & Agrawal, "Data privacy through optimal k-anonymization", ICDE 2005.
    """
    sizes = _check_sizes(group_sizes)
    sup = _check_count(suppressed, "suppressed")
    snapshot = int(sizes.sum()) + sup
    return int(np.dot(sizes, sizes)) + sup * snapshot


def average_group_size(group_sizes: npt.ArrayLike) -> float:
    """Published records per QI-group (records / groups), in records.

    Raises:
        ValueError: no groups (nothing published), a group size below 1, non-integers.
    """
    sizes = _check_sizes(group_sizes)
    if sizes.size == 0:
        raise ValueError("no QI-groups: the average group size of an empty release is undefined")
    return float(sizes.sum()) / sizes.size


def normalized_average_group_size(group_sizes: npt.ArrayLike, k: float) -> float:
    """C_AVG = (records / groups) / k, dimensionless; 1 is ideal (every group exactly k).

    ``records`` counts published records (the records in groups); suppression is reported by
    :func:`suppression_rate` and :func:`discernibility`.

    Raises:
        ValueError: k not positive, no groups, a group size below 1, non-integers.

    Source: LeFevre, DeWitt & Ramakrishnan, "Mondrian multidimensional k-anonymity",
    ICDE 2006 (C_AVG).
    """
    if not (isinstance(k, int | float | np.integer | np.floating) and np.isfinite(k) and k > 0):
        raise ValueError(f"k must be a positive number, got {k!r}")
    return average_group_size(group_sizes) / float(k)


def suppression_rate(suppressed: int, snapshot_records: int) -> float:
    """Suppressed records / snapshot records, in [0, 1] (0.0 for an empty snapshot).

    Raises:
        ValueError: negative counts or more suppressed than snapshot records.
    """
    sup = _check_count(suppressed, "suppressed")
    n = _check_count(snapshot_records, "snapshot_records")
    if sup > n:
        raise ValueError(f"{sup} suppressed records out of a snapshot of {n}")
    return sup / n if n else 0.0


# --------------------------------------------------------------------------------------
# Normalized certainty penalty
# --------------------------------------------------------------------------------------


def ncp(
    hierarchies: Sequence[Hierarchy],
    published: npt.ArrayLike,
    suppressed: int = 0,
    weights: npt.ArrayLike | None = None,
) -> float:
    """Normalized certainty penalty of a release, the mean over records, in [0, 1].

    A record's NCP is ``Σ_j w_j · NCP_j(node_j)`` (:func:`node_ncp` per QI); the table value
    is its mean over the snapshot's records, published and suppressed, a suppressed record
    costing the root's NCP (1, or 0 for a QI with a single value). Xu et al. sum over records
    (and over attributes with weights); the mean with weights summing to 1 keeps the figure in
    [0, 1] and comparable across releases: 0 = nothing generalized, 1 = everything suppressed.

    Args:
        hierarchies: one per QI, d in all.
        published: published node id per QI of every published record, shape (R, d).
        suppressed: number of suppressed snapshot records.
        weights: attribute weights w_j, shape (d,), non-negative, summing to 1; default 1/d
            each (every QI counts the same).

    Raises:
        ValueError: shapes or node ids that do not fit the hierarchies, bad weights, a negative
            suppressed count, or no record at all.

    Source: Xu, Wang, Pei, Wang, Shi & Fu, "Utility-based anonymization using local
    recoding", KDD 2006.
    """
    hs = _check_hierarchies(hierarchies)
    nodes = _check_nodes(hs, published, "published")
    sup = _check_count(suppressed, "suppressed")
    d = len(hs)
    if weights is None:
        w = np.full(d, 1.0 / d)
    else:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (d,) or not np.all(np.isfinite(w)) or np.any(w < 0) or not np.isclose(w.sum(), 1.0):
            raise ValueError(f"weights must be {d} non-negative numbers summing to 1, got {weights!r}")
    n = nodes.shape[0] + sup
    if n == 0:
        raise ValueError("no records: the NCP of an empty snapshot is undefined")
    total = 0.0
    for j, h in enumerate(hs):
        table = node_ncp(h)
        per_node = np.bincount(nodes[:, j], minlength=h.n_nodes)
        total += w[j] * (float(per_node @ table) + sup * float(table[h.root]))
    return total / n


# --------------------------------------------------------------------------------------
# The thesis's measures (paper 000, chapter 4)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InformationLoss:
    """The thesis's cell-wise information-loss measures of a release, per QI.

    Every array has shape (d,), one figure per QI; the table value is its sum (the thesis
    sums over tuples and attributes). Suppressed records are included as fully suppressed
    tuples (module docstring).

    Attributes:
        records: n, snapshot records scored (published + suppressed).
        suppressed: suppressed records among them.
        redactions: cells published as ``*`` (the root), suppressed records' cells included.
        tree: Σ r/l over cells, where the cell's node is at level r of a tree with levels
            L_0 (leaves) … L_l (root), l = depth − 1; in cells.
        entropy: Π_e = Σ H(X_j | t*[j]), bits.
        monotone_entropy: Π_me = Σ Pr(t*[j]) · H(X_j | t*[j]), bits.
        non_uniform_entropy: Π_ne = Σ −log₂ Pr(t[j] | t*[j]), bits.
    """

    records: int
    suppressed: int
    redactions: IntArray
    tree: FloatArray
    entropy: FloatArray
    monotone_entropy: FloatArray
    non_uniform_entropy: FloatArray

    @property
    def cells(self) -> int:
        """QI cells scored: records × d."""
        return self.records * int(self.redactions.size)


def information_loss(
    hierarchies: Sequence[Hierarchy],
    published: npt.ArrayLike,
    original: npt.ArrayLike,
    leaf_counts: Sequence[npt.ArrayLike],
) -> InformationLoss:
    """Redaction count, tree measure, Π_e, Π_me and Π_ne of a release.

    Args:
        hierarchies: one per QI, d in all.
        published: published node id per QI of every published record, shape (R, d).
        original: the same records' original leaf id per QI, shape (R, d), row for row.
        leaf_counts: per QI, the snapshot's records per leaf, shape (n_leaves,) each: the
            frequencies of the original table T, **suppressed records included** (the thesis
            takes every probability from T, §4.2). Every array must sum to the snapshot size
            n; the suppressed count is n − R, and the suppressed records' leaves are the
            counts minus the published records' leaves.

    Returns:
        :class:`InformationLoss` with per-QI figures; suppressed records are scored as if
        every QI cell were ``*``.

    Raises:
        ValueError: shapes that do not match, ids outside the hierarchies, a published node
            that does not generalize the record's original leaf, or leaf counts that are not
            one snapshot containing the published records.

    Source: Hsu 2008 (paper 000) §4.1 (redaction counting, tree measure), §4.2 Defs 4.2.1,
    4.2.4, 4.2.6; notes/seed000.md §3.1-3.2. The tree measure's level of a chain node is its
    lowest column (:func:`tree_levels`). Π_e is not monotone (Lemma 4.2.3); Π_me and Π_ne are
    (Lemmas 4.2.5, 4.2.7).
    """
    hs = _check_hierarchies(hierarchies)
    nodes = _check_nodes(hs, published, "published")
    leaves = _check_leaves(hs, original, "original")
    _check_generalizes(hs, nodes, leaves)
    counts = _check_counts(hs, leaf_counts, leaves)
    n = int(counts[0].sum())
    suppressed = n - nodes.shape[0]  # ≥ 0: the published records are part of the counts
    d = len(hs)
    redactions = np.zeros(d, dtype=np.int64)
    tree = np.zeros(d)
    pi_e = np.zeros(d)
    pi_me = np.zeros(d)
    pi_ne = np.zeros(d)
    for j, h in enumerate(hs):
        tables = entropy_tables(h, counts[j])
        per_node = np.bincount(nodes[:, j], minlength=h.n_nodes).astype(np.float64)
        pub_leaves = np.bincount(leaves[:, j], minlength=h.n_leaves)
        sup_leaves = (counts[j] - pub_leaves).astype(np.float64)  # the suppressed records' values
        root = h.root
        levels = tree_levels(h)
        redactions[j] = int(per_node[root]) + suppressed
        tree[j] = (float(per_node @ levels) + suppressed * float(levels[root])) / (h.depth - 1)
        pi_e[j] = float(per_node @ tables.entropy) + suppressed * float(tables.entropy[root])
        pi_me[j] = float(per_node @ tables.monotone) + suppressed * float(tables.monotone[root])
        # −log₂ Pr(a | B) = log₂ C_B − log₂ c_a, per record so that an unchanged cell is exactly 0;
        # both counts are ≥ 1 because the record itself is counted (checked above)
        published_part = float(np.sum(tables.log_count[nodes[:, j]] - tables.log_count[leaves[:, j]]))
        suppressed_part = float(
            sup_leaves @ np.where(sup_leaves > 0, tables.log_count[root] - tables.log_count[: h.n_leaves], 0.0)
        )
        pi_ne[j] = published_part + suppressed_part
    return InformationLoss(n, suppressed, redactions, tree, pi_e, pi_me, pi_ne)


@dataclass(frozen=True)
class TupleVariance:
    """Tuple-wise variance of the original table and of the release over a set Q of QIs.

    Attributes:
        original: Var_T(Q) = Σ_{t∈T} EMD(D_T, D_{t[Q]}).
        release: Var_{T*}(Q*) = Σ_{t*∈T*} EMD(D_T, D_{t*[Q*]}).
        attributes: the QI positions forming Q.
    """

    original: float
    release: float
    attributes: tuple[int, ...]

    @property
    def loss(self) -> float:
        """Π_tv = Var_T(Q) − Var_{T*}(Q*); negative when the release splits original
        q-blocks (notes/seed000.md §5.6: −2 for Table 4.3-2 (1))."""
        return self.original - self.release


def _variance(block: IntArray, sensitive: IntArray, global_p: FloatArray) -> float:
    """Σ over records of TV(D_T, D_block) = ½ Σ_s |p_block(s) − p_T(s)|, sparse in (block, s).

    Σ_s |p_b(s) − p_T(s)| = 1 + Σ_{s present in b} (|p_b(s) − p_T(s)| − p_T(s)), so only the
    values that occur in a block are visited (no dense blocks × values matrix).
    """
    if block.size == 0:
        return 0.0
    n_values = int(global_p.size)
    pair, first = factorize(block * n_values + sensitive)
    pair_count = np.bincount(pair).astype(np.float64)
    pair_block = block[first]
    pair_value = sensitive[first]
    block_size = np.bincount(block).astype(np.float64)
    p_block = pair_count / block_size[pair_block]
    p_t = global_p[pair_value]
    term = np.abs(p_block - p_t) - p_t
    per_block = 1.0 + np.bincount(pair_block, weights=term, minlength=block_size.size)
    return float(0.5 * (block_size @ np.maximum(per_block, 0.0)))


def tuple_wise_variance(
    hierarchies: Sequence[Hierarchy],
    original: npt.ArrayLike,
    nodes: npt.ArrayLike,
    sensitive: npt.ArrayLike,
    attributes: Sequence[int] | None = None,
) -> TupleVariance:
    """Tuple-wise variance Var_T(Q), Var_{T*}(Q*) and the loss Π_tv, 0/1 ground distance.

    A q-block of T is the set of snapshot records with equal original leaves on Q; a q*-block
    of T* the set with equal published nodes on Q. D_q is the distribution of the sensitive
    attribute in the block and D_T the snapshot's; the EMD with the 0/1 ground distance is the
    total variation ½ Σ_s |D_q(s) − D_T(s)|. The sensitive attribute is not generalized, so
    D_{T*} = D_T.

    Args:
        hierarchies: one per QI, d in all.
        original: leaf id per QI of every snapshot record, shape (N, d).
        nodes: published node id per QI of every snapshot record, shape (N, d); a suppressed
            record is given the root of every QI (:func:`snapshot_nodes` builds this).
        sensitive: sensitive-value code of every snapshot record, shape (N,), integers ≥ 0
            (codes may be sparse, e.g. 2,000 diagnosis codes: no dense blocks × values array).
        attributes: QI positions forming Q (the thesis allows any set of non-sensitive
            attributes); default all QIs.

    Raises:
        ValueError: shapes that do not match, ids outside the hierarchies, a node that does
            not generalize the record's leaf, negative sensitive codes, or bad attributes.

    Source: Hsu 2008 (paper 000) §4.4 Defs 4.4.1-4.4.2; the thesis leaves d to the user, the
    0/1 distance is the one of notes/seed000.md §5.6. Lemma 4.4.3 (monotone) holds only for
    generalizations that merge whole q-blocks; Π_tv can be negative otherwise.
    """
    hs = _check_hierarchies(hierarchies)
    leaves = _check_leaves(hs, original, "original")
    pub = _check_nodes(hs, nodes, "nodes")
    _check_generalizes(hs, pub, leaves)
    s = _int_array(sensitive, "sensitive", 1)
    if s.shape[0] != leaves.shape[0]:
        raise ValueError(f"sensitive has {s.shape[0]} records but original has {leaves.shape[0]}")
    if s.size and s.min() < 0:
        raise ValueError("sensitive codes must be non-negative")
    d = len(hs)
    attrs = tuple(range(d)) if attributes is None else tuple(int(a) for a in attributes)
    if not attrs or len(set(attrs)) != len(attrs) or any(not 0 <= a < d for a in attrs):
        raise ValueError(f"attributes must be distinct QI positions in [0, {d}), got {attributes!r}")
    if s.size == 0:
        return TupleVariance(0.0, 0.0, attrs)
    value, _ = factorize(s)  # dense codes 0..V-1 of the values that occur
    global_p = np.bincount(value).astype(np.float64) / s.size
    orig_block = factorize(row_keys(leaves[:, attrs], [hs[a].n_leaves for a in attrs]))[0]
    rel_block = factorize(row_keys(pub[:, attrs], [hs[a].n_nodes for a in attrs]))[0]
    return TupleVariance(_variance(orig_block, value, global_p), _variance(rel_block, value, global_p), attrs)


# --------------------------------------------------------------------------------------
# From the anonymizer's result to per-record arrays, and the report's summary
# --------------------------------------------------------------------------------------


def snapshot_nodes(
    hierarchies: Sequence[Hierarchy], group_of_record: npt.ArrayLike, group_nodes: npt.ArrayLike
) -> IntArray:
    """Published node id per QI of every snapshot record, shape (N, d), roots where suppressed.

    Args:
        hierarchies: one per QI, d in all.
        group_of_record: QI-group code per snapshot record, shape (N,), −1 where suppressed
            (``ReleaseResult.group_of_record``).
        group_nodes: node id per QI of every group, shape (G, d) (``ReleaseResult.group_nodes``).

    Raises:
        ValueError: group codes outside [−1, G), or node ids outside the hierarchies.
    """
    hs = _check_hierarchies(hierarchies)
    gn = _check_nodes(hs, group_nodes, "group_nodes")
    group = _int_array(group_of_record, "group_of_record", 1)
    if group.size and (group.min() < -1 or group.max() >= gn.shape[0]):
        raise ValueError(f"group_of_record must hold codes in [-1, {gn.shape[0]}), -1 for suppressed records")
    roots = np.array([h.root for h in hs], dtype=np.int64)
    out = np.empty((group.size, len(hs)), dtype=np.int64)
    published = group >= 0
    out[published] = gn[group[published]]
    out[~published] = roots
    return out


def summary(
    hierarchies: Sequence[Hierarchy],
    original: npt.ArrayLike,
    group_of_record: npt.ArrayLike,
    group_nodes: npt.ArrayLike,
    sensitive: npt.ArrayLike | None = None,
    k: float | None = None,
) -> list[Measure]:
    """The table-level utility figures of a release for the report (family ``"utility"``).

    Args:
        hierarchies: one per QI, d in all.
        original: leaf id per QI of every snapshot record, shape (N, d).
        group_of_record: QI-group code per snapshot record, shape (N,), −1 where suppressed.
        group_nodes: node id per QI of every group, shape (G, d); groups without records are
            ignored.
        sensitive: sensitive-value code per snapshot record, shape (N,); without it Π_tv is
            reported as not computed.
        k: the k of C_AVG; default the smallest published QI-group (the k the release
            achieves), which the note states.

    Returns:
        Measures in this order: suppression rate, discernibility C_DM, average QI-group size,
        C_AVG, NCP, redactions, tree measure, Π_e, Π_me, Π_ne, Π_tv. A figure that is undefined
        (nothing published) has value None and says why.

    Raises:
        ValueError: inconsistent shapes or ids (as :func:`information_loss`), or k ≤ 0.

    The average relative error of range-count queries (paper 001 §5.2) is
    :mod:`anonymizer.queries`' and is not repeated here.
    """
    hs = _check_hierarchies(hierarchies)
    leaves = _check_leaves(hs, original, "original")
    nodes = snapshot_nodes(hs, group_of_record, group_nodes)
    if nodes.shape[0] != leaves.shape[0]:
        raise ValueError(f"group_of_record has {nodes.shape[0]} records but original has {leaves.shape[0]}")
    if k is not None and not (isinstance(k, int | float | np.integer | np.floating) and np.isfinite(k) and k > 0):
        raise ValueError(f"k must be a positive number, got {k!r}")
    group = np.asarray(group_of_record, dtype=np.int64)
    published = group >= 0
    n = int(group.size)
    r = int(published.sum())
    suppressed = n - r
    d = len(hs)
    sizes_all = np.bincount(group[published], minlength=int(np.asarray(group_nodes).shape[0]))
    sizes = sizes_all[sizes_all > 0]
    counts = [np.bincount(leaves[:, j], minlength=h.n_leaves) for j, h in enumerate(hs)]
    pub_nodes = nodes[published]
    loss = information_loss(hs, pub_nodes, leaves[published], counts)

    def m(name: str, value: float, unit: str, source: str, note: str) -> Measure:
        return Measure(name, value, unit, source, note, family=FAMILY)

    out = [
        m(
            "suppression rate",
            suppression_rate(suppressed, n),
            "fraction of snapshot records",
            SRC_SUPPRESSION,
            f"{suppressed:,} of {n:,} records suppressed",
        ),
        m(
            "discernibility metric C_DM",
            float(discernibility(sizes, suppressed)),
            "records²",
            SRC_DM,
            f"Σ |QI-group|² plus |D| = {n:,} per suppressed record; lowest possible {n:,}, highest {n * n:,}",
        ),
    ]
    if sizes.size:
        k_used = float(k) if k is not None else float(sizes.min())
        k_note = f"k = {k_used:g}" + ("" if k is not None else " (the smallest QI-group: the k the release achieves)")
        out += [
            m(
                "average QI-group size",
                average_group_size(sizes),
                "records",
                SRC_CAVG,
                f"{r:,} published records in {sizes.size:,} QI-groups",
            ),
            m(
                "normalized average QI-group size C_AVG",
                normalized_average_group_size(sizes, k_used),
                "ratio (1 = every group of size k)",
                SRC_CAVG,
                k_note,
            ),
        ]
    else:
        reason = "nothing published: no QI-groups"
        out += [
            not_computed("average QI-group size", "records", SRC_CAVG, reason, family=FAMILY),
            not_computed(
                "normalized average QI-group size C_AVG", "ratio (1 = every group of size k)", SRC_CAVG, reason, FAMILY
            ),
        ]
    if n == 0:
        reason = "empty snapshot"
        names = [
            ("normalized certainty penalty NCP", "fraction", SRC_NCP),
            ("redactions", "cells", SRC_REDACT),
            ("tree measure", "cells", SRC_TREE),
            ("entropy measure Π_e", "bits", SRC_PI_E),
            ("monotone entropy measure Π_me", "bits", SRC_PI_ME),
            ("non-uniform entropy measure Π_ne", "bits", SRC_PI_NE),
            ("tuple-wise variance loss Π_tv", "Σ EMD over records (0/1 distance)", SRC_PI_TV),
        ]
        return out + [not_computed(a, b, c, reason, family=FAMILY) for a, b, c in names]

    cells = loss.cells
    sup_note = "suppressed records count as all-'*' tuples"
    out += [
        m(
            "normalized certainty penalty NCP",
            ncp(hs, pub_nodes, suppressed),
            "fraction",
            SRC_NCP,
            f"mean over {n:,} snapshot records of the mean over {d} QIs (equal weights); 0 = as collected, "
            "1 = all suppressed; numeric QIs by interval width over the hierarchy's domain; suppressed records count 1",
        ),
        m(
            "redactions",
            float(loss.redactions.sum()),
            "cells",
            SRC_REDACT,
            f"QI cells published as '*': {loss.redactions.sum() / cells:.2%} of {cells:,}; {sup_note}",
        ),
        m(
            "tree measure",
            float(loss.tree.sum()),
            "cells (Σ r/l)",
            SRC_TREE,
            f"mean {loss.tree.sum() / cells:.4f} per QI cell (0 = leaf, 1 = '*'); {sup_note}",
        ),
    ]
    for name, values, src, extra in (
        ("entropy measure Π_e", loss.entropy, SRC_PI_E, "; not monotone (Lemma 4.2.3)"),
        ("monotone entropy measure Π_me", loss.monotone_entropy, SRC_PI_ME, ""),
        ("non-uniform entropy measure Π_ne", loss.non_uniform_entropy, SRC_PI_NE, ""),
    ):
        out.append(
            m(
                name,
                float(values.sum()),
                "bits",
                src,
                f"mean {values.sum() / n:.4f} bits per record; log₂, snapshot frequencies; {sup_note}{extra}",
            )
        )
    if sensitive is None:
        out.append(
            not_computed(
                "tuple-wise variance loss Π_tv",
                "Σ EMD over records (0/1 distance)",
                SRC_PI_TV,
                "no sensitive values given",
                family=FAMILY,
            )
        )
    else:
        tv = tuple_wise_variance(hs, leaves, nodes, sensitive)
        out.append(
            m(
                "tuple-wise variance loss Π_tv",
                tv.loss,
                "Σ EMD over records (0/1 distance)",
                SRC_PI_TV,
                f"Var_T(QI) = {tv.original:,.2f} before, Var_T*(QI*) = {tv.release:,.2f} after; all QIs; "
                "negative when the release splits original QI-blocks; suppressed records in one all-'*' block",
            )
        )
    return out
