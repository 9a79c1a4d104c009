"""t-closeness: the earth mover's distance (EMD) between every QI-group's sensitive distribution
and the release's, with the equal and the hierarchical ground distance.

Sources: Hsu 2008 (paper 000) §3.4 Def 3.4.3, and for
the hierarchical ground distance Li, Li & Venkatasubramanian, "t-Closeness: Privacy beyond
k-anonymity and ℓ-diversity", ICDE 2007 (the thesis's reference [7]).

Hierarchical EMD (Li et al. §4.2, "hierarchical distance"). With a sensitive-attribute
hierarchy of height H (``Hierarchy.depth - 1``: rows leaf, ..., ``*``), the ground distance of two
leaves is ``d(i, j) = level(i, j) / H``, level(i, j) = the first column at which the rows of i and
j meet (the height of their lowest common ancestor; a chain of repeated labels counts as one node
spanning columns, so it meets at its lowest column). Derivation of the closed form used here:

1. Expand the hierarchy into a column tree: one vertex per (column h, node at h), every leaf at
   depth H below the root, and give every edge the length 1/(2H). The path between leaves i and
   j climbs level(i, j) edges and descends as many, so its length is level(i, j)/H = d(i, j):
   d is a tree metric.
2. Under a tree metric the EMD is ``Σ_e len(e)·|P(below e) − Q(below e)|``: the imbalance below an
   edge must cross it (lower bound), and matching greedily bottom-up within subtrees moves
   exactly that much across each edge (upper bound).
3. Hence, writing P_h, Q_h for the two distributions generalized to column h (mass per node),

       EMD_hier(P, Q) = (1/(2H)) Σ_{h=0}^{H-1} Σ_{N at column h} |P_h(N) − Q_h(N)|
                      = (1/H)    Σ_{h=0}^{H-1} TV(P_h, Q_h),

   the mean over the H levels below the root of the total variation at that level (h = 0 is the
   leaf level, i.e. the equal-distance EMD).
4. It equals Li et al.'s recursion ``Σ_{internal N} height(N)/H · min(pos_extra(N), neg_extra(N))``:
   with extra(C) = P(C) − Q(C), min(pos, neg) = (Σ_{children C}|extra(C)| − |extra(N)|)/2, and
   regrouping the sum by child C gives |extra(C)| the weight (height(parent(C)) − height(C))/(2H),
   the number of column-tree edges above C times 1/(2H); the root's extra is 0.

The tests check this against the transportation LP (scipy ``linprog``) and Li's recursion on
random hierarchies. Per group, TV(P_h, Q_h) = Σ_{N} max(P_h(N) − Q_h(N), 0) needs only the nodes
the group occupies, so the sum runs over the group's triplets, sorted so that every node of every
column is one contiguous run (depth-first leaf order).

Input: the sparse counts of :func:`anonymizer.measures.qi_groups.group_counts`; the report's
wording of the figures is :mod:`serialpub.report.wording.closeness`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from anonymizer.hierarchy import Hierarchy
from anonymizer.measures.qi_groups import FloatArray, GroupCounts, IntArray, global_distribution


def _emd_levels(gc: GroupCounts, levels: Sequence[IntArray], leaf_rank: IntArray) -> FloatArray:
    """Mean over ``levels`` of TV(P_h, Q_h) per group; ``levels[h][v]`` is v's node at level h and
    ``leaf_rank`` orders values so that every node of every level is contiguous."""
    q = global_distribution(gc)
    order = np.lexsort((leaf_rank[gc.value], gc.group))
    g = gc.group[order]
    v = gc.value[order]
    p = gc.count[order] / gc.size[g]
    out = np.zeros(gc.n_groups, dtype=np.float64)
    for nodes in levels:
        node = nodes[v]
        start = np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (node[1:] != node[:-1])])
        p_node = np.add.reduceat(p, start)
        q_node = np.bincount(nodes, weights=q, minlength=int(nodes.max()) + 1)
        # TV = Σ_N (P(N) − Q(N))⁺ and P(N) = 0 off the group's own nodes, so only its runs count
        excess = np.maximum(p_node - q_node[node[start]], 0.0)
        out += np.bincount(g[start], weights=excess, minlength=gc.n_groups)
    return out / len(levels)


def emd_equal(gc: GroupCounts) -> FloatArray:
    """EMD between every group's sensitive distribution and the release's, equal ground distance.

    With d(v_i, v_j) = 1 for i ≠ j the EMD is the total variation ½Σ_s |p_s − q_s| =
    Σ_s max(p_s − q_s, 0). Shape (G,), values in [0, 1]. The release is t-close iff max ≤ t.

    Source: Hsu 2008 (paper 000) §3.4 Def 3.4.3 with §2.4 Def 2.4.4 (the thesis leaves d open);
    equal distance as in Li et al. ICDE 2007 §4.2.
    """
    ident = np.arange(gc.n_values, dtype=np.int64)
    return _emd_levels(gc, [ident], ident)


def _check_hierarchy(hierarchy: Hierarchy, n_values: int) -> None:
    if not isinstance(hierarchy, Hierarchy):
        raise ValueError(f"sensitive_hierarchy must be a Hierarchy, got {type(hierarchy).__name__}")
    if hierarchy.n_leaves != n_values:
        raise ValueError(
            f"the sensitive hierarchy {hierarchy.attribute!r} has {hierarchy.n_leaves} leaves but the "
            f"sensitive attribute has {n_values} value codes; value code i must be leaf i"
        )


def _dfs_rank(hierarchy: Hierarchy) -> IntArray:
    # sort leaves by their rows read root-first: every node's leaves become contiguous
    order = np.lexsort(tuple(hierarchy.leaf_nodes[h] for h in range(hierarchy.depth)))
    rank = np.empty(hierarchy.n_leaves, dtype=np.int64)
    rank[order] = np.arange(hierarchy.n_leaves, dtype=np.int64)
    return rank


def hierarchical_distance(hierarchy: Hierarchy) -> FloatArray:
    """Li et al.'s hierarchical ground distance between all pairs of leaves, shape (S, S).

    ``d(i, j) = level(i, j) / H``: level = the first column at which the rows of leaves i and j
    meet (height of their lowest common ancestor), H = ``depth − 1`` the height of the tree. Dense:
    meant for small S (tests, display); :func:`emd_hierarchical` never builds it.

    Source: Li, Li & Venkatasubramanian, ICDE 2007, §4.2 (hierarchical distance).
    """
    ln = hierarchy.leaf_nodes
    height = hierarchy.depth - 1
    level = np.full((hierarchy.n_leaves, hierarchy.n_leaves), height, dtype=np.int64)
    for h in range(height - 1, -1, -1):
        level[ln[h][:, None] == ln[h][None, :]] = h
    return level / height


def emd_hierarchical(gc: GroupCounts, hierarchy: Hierarchy) -> FloatArray:
    """EMD between every group's sensitive distribution and the release's, hierarchical distance.

    Closed form (derived in the module docstring): EMD = (1/H) Σ_{h=0}^{H−1} TV(P_h, Q_h), P_h and
    Q_h the distributions generalized to column h of the hierarchy, H = ``depth − 1``. Equal to the
    transportation LP with :func:`hierarchical_distance` as ground distance and to Li et al.'s
    Σ height(N)/H · min(pos_extra, neg_extra). Shape (G,), values in [0, 1]. O(u · H) time.

    Args:
        gc: the release's counts; value code i is leaf i of ``hierarchy``.
        hierarchy: the sensitive attribute's hierarchy (rows leaf, …, ``*``).

    Raises:
        ValueError: not a Hierarchy, or its number of leaves differs from ``gc.n_values``.

    Source: Li, Li & Venkatasubramanian, ICDE 2007, §4.2; Hsu 2008 (paper 000) §3.4 Def 3.4.3.
    """
    _check_hierarchy(hierarchy, gc.n_values)
    height = hierarchy.depth - 1
    levels = [hierarchy.leaf_nodes[h].astype(np.int64) for h in range(height)]
    return _emd_levels(gc, levels, _dfs_rank(hierarchy))


@dataclass(frozen=True)
class ClosenessFigures:
    """Table-level t-closeness figures of a release: the release is t-close for t ≥ each.

    Attributes:
        emd_equal: max over groups of :func:`emd_equal` (total variation), in [0, 1].
        emd_hierarchical: max over groups of :func:`emd_hierarchical`, in [0, 1]; None when no
            sensitive-attribute hierarchy was given.
        hierarchy_height: H = ``depth − 1`` of that hierarchy (the ground distance's
            denominator); None without a hierarchy.
    """

    emd_equal: float
    emd_hierarchical: float | None
    hierarchy_height: int | None


def closeness_figures(gc: GroupCounts, sensitive_hierarchy: Hierarchy | None = None) -> ClosenessFigures:
    """The largest EMD of any QI-group to the release, with both ground distances.

    Args:
        gc: the release's counts.
        sensitive_hierarchy: the sensitive attribute's hierarchy (leaf i = value code i) for the
            hierarchical ground distance; None leaves that figure out.

    Raises:
        ValueError: as :func:`emd_hierarchical`.

    Source: Hsu 2008 (paper 000) §3.4 Def 3.4.3; Li, Li & Venkatasubramanian, ICDE 2007, §4.2.
    """
    if sensitive_hierarchy is None:
        return ClosenessFigures(float(emd_equal(gc).max()), None, None)
    return ClosenessFigures(
        emd_equal=float(emd_equal(gc).max()),
        emd_hierarchical=float(emd_hierarchical(gc, sensitive_hierarchy).max()),
        hierarchy_height=sensitive_hierarchy.depth - 1,
    )
