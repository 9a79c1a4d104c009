"""The thesis's information-loss measures of a release (Hsu 2008, paper 000, chapter 4,
§4.1-4.4): redaction counting and the tree measure
(§4.1), the entropy measure Π_e (Def 4.2.1), the monotone entropy measure Π_me (Def 4.2.4), the
non-uniform entropy measure Π_ne (Def 4.2.6) and the tuple-wise variance loss Π_tv
(Defs 4.4.1-4.4.2) with the 0/1 ground distance.

Conventions (the snapshot is the original table T, a suppressed record counts as fully
generalized, nodes not labels) are :mod:`.utility`'s. Vectorized over records (lookup tables
per node, bincount).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from anonymizer.arrays import factorize, row_keys, sorted_counts
from anonymizer.hierarchy import Hierarchy
from anonymizer.measures._checks import (
    IntArray,
    check_counts,
    check_generalizes,
    check_hierarchies,
    check_leaves,
    check_nodes,
    int_array,
)
from anonymizer.measures.published import IdArray, PublishedNodes

FloatArray = npt.NDArray[np.float64]


# --------------------------------------------------------------------------------------
# Per-node tables
# --------------------------------------------------------------------------------------


def _node_sums(h: Hierarchy, per_leaf: FloatArray) -> FloatArray:
    """Σ over the leaves below every node, shape (n_nodes,); a node repeated on consecutive
    columns (a chain) is counted once per leaf, as in ``HierarchyIndex.size``."""
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
    c = int_array(leaf_counts, "leaf_counts", 1)
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
    4.2.4, 4.2.6. The tree measure's level of a chain node is its
    lowest column (:func:`tree_levels`). Π_e is not monotone (Lemma 4.2.3); Π_me and Π_ne are
    (Lemmas 4.2.5, 4.2.7).
    """
    hs = check_hierarchies(hierarchies)
    nodes = check_nodes(hs, published, "published")
    leaves = check_leaves(hs, original, "original")
    check_generalizes(hs, nodes, leaves)
    counts = check_counts(hs, leaf_counts, leaves)
    return checked_information_loss(hs, PublishedNodes.per_record(nodes), leaves, counts)


def checked_information_loss(
    hs: list[Hierarchy], nodes: PublishedNodes, leaves: IdArray, counts: Sequence[IntArray]
) -> InformationLoss:
    """:func:`information_loss` of arguments it has checked: ``nodes`` the published records'
    nodes (R, d), ``leaves`` their leaves (R, d), ``counts`` the snapshot's per leaf."""
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
        per_node = nodes.node_counts(j, h.n_nodes).astype(np.float64)
        pub_leaves = np.bincount(leaves[:, j], minlength=h.n_leaves)
        sup_leaves = (counts[j] - pub_leaves).astype(np.float64)  # the suppressed records' values
        root = h.root
        levels = tree_levels(h)
        redactions[j] = int(per_node[root]) + suppressed
        tree[j] = (float(per_node @ levels) + suppressed * float(levels[root])) / (h.depth - 1)
        pi_e[j] = float(per_node @ tables.entropy) + suppressed * float(tables.entropy[root])
        pi_me[j] = float(per_node @ tables.monotone) + suppressed * float(tables.monotone[root])
        # −log₂ Pr(a | B) = log₂ C_B − log₂ c_a, per record so that an unchanged cell is exactly 0;
        # both counts are ≥ 1 because the record itself is counted (checked above). A node's
        # log count is looked up once per row of the nodes' table, then spread to its records.
        node_log = tables.log_count[nodes.table[:, j]]
        per_record = node_log if nodes.group is None else node_log[nodes.group]
        published_part = float(np.sum(per_record - tables.log_count[leaves[:, j]]))
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
        q-blocks (Hsu 2008 Example 4.3.1: −2 for Table 4.3-2 (1))."""
        return self.original - self.release


def _variance(block: IntArray, sensitive: IntArray, global_p: FloatArray) -> float:
    """Σ over records of TV(D_T, D_block) = ½ Σ_s |p_block(s) − p_T(s)|, sparse in (block, s).

    Σ_s |p_b(s) − p_T(s)| = 1 + Σ_{s present in b} (|p_b(s) − p_T(s)| − p_T(s)), so only the
    values that occur in a block are visited (no dense blocks × values matrix).
    """
    if block.size == 0:
        return 0.0
    n_values = int(global_p.size)
    # the distinct (block, value) pairs and their records by sorting the pair keys, a tenth of
    # a hash table's time at 1M records (block < records and value < n_values: no overflow)
    pairs, pair_count = sorted_counts(block * n_values + sensitive)
    pair_count = pair_count.astype(np.float64)
    pair_block, pair_value = np.divmod(pairs, n_values)
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
    0/1 distance is the one of its Example 4.3.1. Lemma 4.4.3 (monotone) holds only for
    generalizations that merge whole q-blocks; Π_tv can be negative otherwise.
    """
    hs = check_hierarchies(hierarchies)
    leaves = check_leaves(hs, original, "original")
    pub = check_nodes(hs, nodes, "nodes")
    check_generalizes(hs, pub, leaves)
    s = check_sensitive(sensitive, leaves.shape[0])
    d = len(hs)
    attrs = tuple(range(d)) if attributes is None else tuple(int(a) for a in attributes)
    if not attrs or len(set(attrs)) != len(attrs) or any(not 0 <= a < d for a in attrs):
        raise ValueError(f"attributes must be distinct QI positions in [0, {d}), got {attributes!r}")
    return checked_tuple_wise_variance(hs, leaves, PublishedNodes.per_record(pub), s, attrs)


def check_sensitive(sensitive: npt.ArrayLike, records: int) -> IntArray:
    """Sensitive codes of ``records`` records, shape (records,), integers ≥ 0.

    Raises:
        ValueError: another length, or a negative code.
    """
    s = int_array(sensitive, "sensitive", 1)
    if s.shape[0] != records:
        raise ValueError(f"sensitive has {s.shape[0]} records but original has {records}")
    if s.size and s.min() < 0:
        raise ValueError("sensitive codes must be non-negative")
    return s


def checked_tuple_wise_variance(
    hs: list[Hierarchy], leaves: IdArray, pub: PublishedNodes, s: IntArray, attrs: tuple[int, ...]
) -> TupleVariance:
    """:func:`tuple_wise_variance` of arguments it has checked (``check_sensitive``): every
    snapshot record's leaves (N, d) and published nodes (N, d), ``attrs`` the QIs of Q."""
    d = len(hs)
    if s.size == 0:
        return TupleVariance(0.0, 0.0, attrs)
    value, _ = factorize(s)  # dense codes 0..V-1 of the values that occur
    global_p = np.bincount(value).astype(np.float64) / s.size
    # every QI (the default): the arrays as they are, not a copy of every column
    every = attrs == tuple(range(d))
    orig_block = factorize(row_keys(leaves if every else leaves[:, attrs], [hs[a].n_leaves for a in attrs]))[0]
    # the q*-blocks are numbered by the first record of each (factorize), so any key equal
    # iff the published rows are gives the same blocks: the table's rows are keyed, not the records'
    table = pub.table if every else pub.table[:, attrs]
    row = row_keys(table, [hs[a].n_nodes for a in attrs])
    rel_block = factorize(row if pub.group is None else row[pub.group])[0]
    return TupleVariance(_variance(orig_block, value, global_p), _variance(rel_block, value, global_p), attrs)
