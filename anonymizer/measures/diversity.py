"""k-anonymity, ℓ-diversity, t-closeness and the thesis's categorical controls over QI-groups.

Sources: Hsu 2008, *Database Anonymization and Protections of Sensitive Attributes* (paper 000),
§3.2–3.5 (the extraction ``notes/seed000.md`` §2.2–2.5 and its worked examples §5), and for the
hierarchical ground distance of t-closeness Li, Li & Venkatasubramanian, "t-Closeness: Privacy
beyond k-anonymity and ℓ-diversity", ICDE 2007 (the thesis's reference [7]).

Input. A release is given per record: ``group`` (QI-group / equivalence class code 0..G-1) and
``value`` (code 0..S-1 of the sensitive attribute, never generalized, Hsu Def 2.3.4). Everything
is computed from sparse (group, value, count) triplets (:func:`group_counts`): at most one row
per distinct pair, sorted by group then value, so S ≈ 2,000 diagnosis codes and G ≈ 50,000
groups never build a G × S matrix. All per-group work is bincount / sorting / reduceat; the only
Python loops run over hierarchy levels, over combinations of categories, or (for the exact set
cover, which has a stated size limit) over distinct group *signatures*.

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

Categorical controls (Hsu §3.5, Defs 3.5.2–3.5.10) take user sensitive categories S̄ (sets of
value codes, possibly overlapping) and a don't-care set Y disjoint from them. Errata applied
(seed000.md §8): E5 (recursive diversity's strict "<" vs Table 3.5-1's "≤": a ``strict`` flag),
E6 ((c,1)-diversity is the always-satisfied base case), E8 ((c,ℓ)-density control sums from
i = ℓ, not i = 1, which would be trivial; Def 3.5.3 read as "minimum cover size ≥ ℓ").
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import numpy.typing as npt

from anonymizer.arrays import factorize
from anonymizer.hierarchy import Hierarchy
from anonymizer.measures.base import Measure, not_computed

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Exact minimum set cover / maximum coverage enumerate subsets of the categories: at most this
#: many user categories (the don't-care set Y adds one more set for the set cover).
MAX_EXACT_CATEGORIES = 12

#: Work limit of the exact categorical measures, in (subset × mask) tests: distinct group
#: signatures × their masks × 2^sets for the set cover, C(|S̄|, ℓ) × (group, category-mask) pairs
#: for the maximum coverage. 2^27 ≈ 1.3·10^8 tests is about a second of numpy.
MAX_SUBSET_TESTS = 2**27

_HSU = "Hsu 2008 (paper 000)"
_LI = "Li, Li & Venkatasubramanian, ICDE 2007 (thesis ref. [7])"


class SizeLimitExceeded(Exception):
    """An exact measure would exceed :data:`MAX_EXACT_CATEGORIES` or :data:`MAX_SUBSET_TESTS`;
    the message names the limit. :func:`summary` turns it into a not-computed measure."""


# ---------------------------------------------------------------------------------------------
# Sparse (group, value, count) triplets
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupCounts:
    """Sensitive-value counts of a release's QI-groups, as sparse triplets.

    Attributes:
        n_groups: G, the number of QI-groups (codes 0..G-1, all non-empty).
        n_values: S, the size of the sensitive attribute's domain (codes 0..S-1).
        size: records per group, shape (G,).
        group: group of every triplet, shape (u,), sorted ascending.
        value: sensitive value of every triplet, shape (u,), ascending within a group.
        count: records of the group holding the value, shape (u,), ≥ 1.
        total: records per sensitive value over the whole release, shape (S,).
    """

    n_groups: int
    n_values: int
    size: IntArray
    group: IntArray
    value: IntArray
    count: IntArray
    total: IntArray

    @property
    def n_records(self) -> int:
        return int(self.size.sum())


def _int_array(name: str, a: npt.ArrayLike) -> IntArray:
    arr = np.asarray(a)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-d, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integer codes, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def group_counts(group: npt.ArrayLike, value: npt.ArrayLike, n_values: int) -> GroupCounts:
    """Count the sensitive values of every QI-group.

    Args:
        group: QI-group code of every record, shape (R,), integers 0..G-1; every code in
            0..max must occur (G = max + 1).
        value: sensitive value code of every record, shape (R,), integers 0..n_values-1.
        n_values: S ≥ 1, the size of the sensitive domain.

    Returns:
        :class:`GroupCounts`, O(R) time (hash grouping) plus a sort of the distinct pairs.

    Raises:
        ValueError: shapes differ or are not 1-d, no records, non-integer codes, a code out of
            range, or a group code in 0..G-1 without records.

    Source: Hsu 2008 (paper 000) §3.4 Defs 3.4.1–3.4.2 (global and local sensitive distributions
    are these counts divided by |T| and by the group size).
    """
    g = _int_array("group", group)
    v = _int_array("value", value)
    if g.shape != v.shape:
        raise ValueError(f"group and value must have equal shape, got {g.shape} and {v.shape}")
    if g.size == 0:
        raise ValueError("the release has no records")
    if not isinstance(n_values, (int, np.integer)) or n_values < 1:
        raise ValueError(f"n_values must be a positive integer, got {n_values!r}")
    s = int(n_values)
    if g.min() < 0:
        raise ValueError(f"group codes must be non-negative, got {int(g.min())}")
    if v.min() < 0 or v.max() >= s:
        raise ValueError(f"value codes must lie in 0..{s - 1}, got {int(v.min())}..{int(v.max())}")
    n_groups = int(g.max()) + 1
    size = np.bincount(g, minlength=n_groups).astype(np.int64)
    empty = np.flatnonzero(size == 0)
    if empty.size:
        raise ValueError(
            f"{empty.size} group code(s) in 0..{n_groups - 1} have no records (first: {int(empty[0])}); "
            "group codes must be dense"
        )
    if n_groups * s >= 2**62:
        raise ValueError(f"too many groups × values to encode: {n_groups} × {s}")
    key = g * s + v
    codes, first = factorize(key)
    count = np.bincount(codes).astype(np.int64)
    ukey = key[first]
    order = np.argsort(ukey, kind="stable")
    ukey, count = ukey[order], count[order]
    total = np.bincount(v, minlength=s).astype(np.int64)
    return GroupCounts(n_groups, s, size, ukey // s, ukey % s, count, total)


def global_distribution(gc: GroupCounts) -> FloatArray:
    """D_T: the fraction of the release's records holding each sensitive value, shape (S,).

    Source: Hsu 2008 (paper 000) §3.4 Def 3.4.1.
    """
    return gc.total / gc.total.sum()


def local_distribution(gc: GroupCounts) -> FloatArray:
    """D_q per triplet: p(q, s) = n(q, s) / |q-block|, shape (u,), aligned with ``gc.group`` and
    ``gc.value`` (values a group does not hold have p = 0 and no triplet).

    Source: Hsu 2008 (paper 000) §3.4 Def 3.4.2 (and p(q, s) of Def 3.3.2).
    """
    return gc.count / gc.size[gc.group]


# ---------------------------------------------------------------------------------------------
# k-anonymity and ℓ-diversity
# ---------------------------------------------------------------------------------------------


def k_anonymity(gc: GroupCounts) -> int:
    """The largest k for which the release is k-anonymous: the smallest QI-group, in records.

    Source: Hsu 2008 (paper 000) §3.2 Def 3.2.1 (every q-block has at least k tuples).
    """
    return int(gc.size.min())


def distinct_values(gc: GroupCounts) -> IntArray:
    """Distinct sensitive values per group, shape (G,); a group is distinct ℓ-diverse iff ≥ ℓ.

    Source: Hsu 2008 (paper 000) §3.3 Def 3.3.1.
    """
    return np.bincount(gc.group, minlength=gc.n_groups).astype(np.int64)


def entropy_bits(gc: GroupCounts) -> FloatArray:
    """Entropy of every group's sensitive distribution, in bits (log base 2), shape (G,).

    A group is entropy ℓ-diverse iff H ≥ log2 ℓ, i.e. ℓ ≤ 2^H (the base cancels).

    Source: Hsu 2008 (paper 000) §3.3 Def 3.3.2, −Σ_s p(q,s) log p(q,s) ≥ log ℓ.
    """
    p = local_distribution(gc)
    # −p log p per triplet; p = 1 gives exactly 0, so homogeneous groups get H = 0 exactly
    # (+ 0.0 turns the −0.0 of a homogeneous group into 0.0)
    h = np.bincount(gc.group, weights=-p * np.log2(p), minlength=gc.n_groups).astype(np.float64)
    return h + 0.0


@dataclass(frozen=True)
class _Desc:
    """Per-group masses sorted descending: ``group`` (sorted), ``mass``, ``rank`` (0 = largest)."""

    group: IntArray
    mass: FloatArray
    rank: IntArray
    top: FloatArray  # largest mass per group, 0 for groups without entries, shape (G,)


def _descending(group: IntArray, mass: npt.NDArray[np.float64] | IntArray, n_groups: int) -> _Desc:
    order = np.lexsort((-np.asarray(mass, dtype=np.float64), group))
    g = group[order]
    m = np.asarray(mass, dtype=np.float64)[order]
    first = np.r_[True, g[1:] != g[:-1]] if g.size else np.zeros(0, dtype=bool)
    start_idx = np.flatnonzero(first)
    run_len = np.diff(np.r_[start_idx, g.size])
    rank = np.arange(g.size, dtype=np.int64) - np.repeat(start_idx, run_len)
    top = np.zeros(n_groups, dtype=np.float64)
    top[g[start_idx]] = m[start_idx]
    return _Desc(g, m, rank, top)


def _tail(d: _Desc, ell: int, n_groups: int) -> FloatArray:
    """Σ of the masses of rank ≥ ℓ−1 (r_ℓ + … + r_m) per group, shape (G,)."""
    keep = d.rank >= ell - 1
    return np.bincount(d.group[keep], weights=d.mass[keep], minlength=n_groups).astype(np.float64)


def _check_c_ell(c: float | None, ell: int | None) -> None:
    if c is not None and not (isinstance(c, (int, float, np.floating, np.integer)) and c > 0 and math.isfinite(c)):
        raise ValueError(f"c must be a positive finite number, got {c!r}")
    if ell is not None and (not isinstance(ell, (int, np.integer)) or isinstance(ell, bool) or ell < 1):
        raise ValueError(f"ℓ must be an integer ≥ 1, got {ell!r}")


def _ratio(top: FloatArray, tail: FloatArray) -> FloatArray:
    """top / tail with 0/0 = 0 (nothing to protect) and x/0 = inf (no c suffices)."""
    out = np.zeros_like(top)
    pos = tail > 0
    out[pos] = top[pos] / tail[pos]
    out[(~pos) & (top > 0)] = np.inf
    return out


def recursive_ratio(gc: GroupCounts, ell: int) -> FloatArray:
    """The smallest c of recursive (c,ℓ)-diversity per group: r_1 / (r_ℓ + … + r_m), shape (G,).

    r_1 ≥ r_2 ≥ … ≥ r_m are the group's value counts sorted descending. The group satisfies the
    strict Def 3.3.3 (r_1 < c·Σ) iff c > ratio, and the "≤" reading (Errata E5) iff c ≥ ratio.
    ``inf`` when the group has fewer than ℓ distinct values; 0 for ℓ = 1 (Errata E6: (c,1) is
    always satisfied).

    Raises:
        ValueError: ℓ not an integer ≥ 1.

    Source: Hsu 2008 (paper 000) §3.3 Def 3.3.3 (after Machanavajjhala et al.).
    """
    _check_c_ell(None, ell)
    if ell == 1:
        return np.zeros(gc.n_groups, dtype=np.float64)
    d = _descending(gc.group, gc.count, gc.n_groups)
    return _ratio(d.top, _tail(d, ell, gc.n_groups))


def recursive_diverse(gc: GroupCounts, c: float, ell: int, *, strict: bool = True) -> BoolArray:
    """Whether every group satisfies recursive (c,ℓ)-diversity, shape (G,).

    Args:
        gc: the release's counts.
        c: c > 0.
        ell: ℓ ≥ 1 (ℓ = 1 is always satisfied, Errata E6).
        strict: True for Def 3.3.3's r_1 < c·(r_ℓ + … + r_m); False for r_1 ≤ c·(…), the reading
            Table 3.5-1 needs for block (iii) (Errata E5).

    Raises:
        ValueError: c ≤ 0 or ℓ not an integer ≥ 1.

    Source: Hsu 2008 (paper 000) §3.3 Def 3.3.3.
    """
    _check_c_ell(c, ell)
    if ell == 1:
        return np.ones(gc.n_groups, dtype=bool)
    d = _descending(gc.group, gc.count, gc.n_groups)
    rhs = c * _tail(d, ell, gc.n_groups)
    return np.asarray(d.top < rhs if strict else d.top <= rhs)


def recursive_max_ell(gc: GroupCounts, c: float, *, strict: bool = True) -> IntArray:
    """The largest ℓ for which each group is recursive (c,ℓ)-diverse, shape (G,), ≥ 1.

    The tail r_ℓ + … + r_m shrinks as ℓ grows, so the groups satisfying (c,ℓ) for ℓ ≥ 2 are
    exactly ℓ = 2..L; L = 1 means only the base case (Errata E6).

    Raises:
        ValueError: c ≤ 0.

    Source: Hsu 2008 (paper 000) §3.3 Def 3.3.3 (``strict`` as in :func:`recursive_diverse`).
    """
    _check_c_ell(c, None)
    d = _descending(gc.group, gc.count, gc.n_groups)
    # tail from rank i on = group size − counts of ranks < i
    before = np.cumsum(d.mass) - d.mass
    start_cum = np.zeros(gc.n_groups)
    first = d.rank == 0
    start_cum[d.group[first]] = before[first]
    tail = gc.size[d.group] - (before - start_cum[d.group])
    r1 = d.top[d.group]
    ok = (r1 < c * tail) if strict else (r1 <= c * tail)
    ok &= d.rank >= 1
    return 1 + np.bincount(d.group[ok], minlength=gc.n_groups).astype(np.int64)


# ---------------------------------------------------------------------------------------------
# t-closeness (EMD)
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# Categorical diversity and density control (Hsu §3.5)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SensitiveCategories:
    """User sensitive categories S̄ and don't-care set Y over value codes 0..S-1.

    Attributes:
        n_values: S.
        member: ``member[v, j]`` is True when value v lies in category j, shape (S, |S̄|).
        dont_care: ``dont_care[v]`` is True when v ∈ Y, shape (S,).
    """

    n_values: int
    member: BoolArray
    dont_care: BoolArray

    @property
    def n_categories(self) -> int:
        return int(self.member.shape[1])


def _codes(name: str, items: Iterable[int], n_values: int) -> IntArray:
    if isinstance(items, (str, bytes)):
        raise ValueError(f"{name} must be a collection of value codes, got a string")
    try:
        arr = np.asarray(sorted({int(x) for x in items}), dtype=np.int64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a collection of integer value codes: {exc}") from None
    if arr.size and (arr.min() < 0 or arr.max() >= n_values):
        raise ValueError(f"{name} holds codes outside 0..{n_values - 1}: {arr[(arr < 0) | (arr >= n_values)][:5]}")
    return arr


def sensitive_categories(
    categories: Sequence[Iterable[int]], dont_care: Iterable[int] | None, n_values: int
) -> SensitiveCategories:
    """Validate the user's sensitive categories and don't-care set.

    Args:
        categories: S̄, a non-empty sequence of non-empty collections of value codes; they may
            overlap (Hsu's example: AIDS in both "terminal illness" and "infectious disease").
        dont_care: Y, value codes whose positive disclosure is acceptable; must be disjoint from
            every category. None means "every value in no category", which meets the thesis's
            requirement S = Y ∪ ⋃S̄ by construction.
        n_values: S.

    Raises:
        ValueError: no category, an empty category, a code outside 0..S-1, Y meeting a category
            (Hsu requires Y ∩ s̄ = ∅; printed "Y ∪ s̄ = φ"), or, with Y given, values in neither Y
            nor any category (S = Y ∪ ⋃S̄ is required).

    Source: Hsu 2008 (paper 000) §3.5, requirements before Def 3.5.2.
    """
    if not isinstance(n_values, (int, np.integer)) or n_values < 1:
        raise ValueError(f"n_values must be a positive integer, got {n_values!r}")
    if isinstance(categories, (str, bytes)) or len(categories) == 0:
        raise ValueError("categories must be a non-empty sequence of sets of value codes")
    member = np.zeros((n_values, len(categories)), dtype=bool)
    for j, cat in enumerate(categories):
        codes = _codes(f"category {j}", cat, n_values)
        if codes.size == 0:
            raise ValueError(f"category {j} is empty")
        member[codes, j] = True
    in_any = member.any(axis=1)
    if dont_care is None:
        y = ~in_any
    else:
        y = np.zeros(n_values, dtype=bool)
        y[_codes("dont_care", dont_care, n_values)] = True
        both = np.flatnonzero(y & in_any)
        if both.size:
            raise ValueError(
                f"the don't-care set must be disjoint from every category; codes in both: {both[:5].tolist()}"
            )
        loose = np.flatnonzero(~y & ~in_any)
        if loose.size:
            raise ValueError(
                f"{loose.size} value code(s) lie in no category and not in the don't-care set "
                f"(first: {loose[:5].tolist()}); every value must be in Y or in a category"
            )
    return SensitiveCategories(int(n_values), member, np.asarray(y, dtype=bool))


def _check_categories(gc: GroupCounts, cats: SensitiveCategories) -> None:
    if not isinstance(cats, SensitiveCategories):
        raise ValueError("categories must be built with sensitive_categories()")
    if cats.n_values != gc.n_values:
        raise ValueError(f"categories are over {cats.n_values} values, the release over {gc.n_values}")


@dataclass(frozen=True)
class _CatMass:
    group: IntArray  # sorted by group, then category
    category: IntArray
    count: FloatArray  # records of the group in the category


def _category_counts(gc: GroupCounts, cats: SensitiveCategories) -> _CatMass:
    """Records of every group in every category it meets: sparse (group, category, count)."""
    vv, cc = np.nonzero(cats.member)  # sorted by value: CSR of value -> categories
    deg = np.bincount(vv, minlength=gc.n_values)
    ptr = np.r_[0, np.cumsum(deg)]
    d = deg[gc.value]
    total = int(d.sum())
    i = np.repeat(np.arange(gc.value.size, dtype=np.int64), d)
    offset = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(d) - d, d)
    cat = cc[ptr[gc.value[i]] + offset].astype(np.int64)
    g = gc.group[i]
    order = np.lexsort((cat, g))
    g, cat, cnt = g[order], cat[order], gc.count[i][order]
    if g.size == 0:
        return _CatMass(g, cat, cnt.astype(np.float64))
    start = np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (cat[1:] != cat[:-1])])
    return _CatMass(g[start], cat[start], np.add.reduceat(cnt, start).astype(np.float64))


def dont_care_mass(gc: GroupCounts, cats: SensitiveCategories) -> FloatArray:
    """D_q{Y}, the fraction of every group's records whose value is in Y, shape (G,).

    A release satisfies μ-dilution iff min ≥ μ.

    Source: Hsu 2008 (paper 000) §3.5 Def 3.5.6.
    """
    _check_categories(gc, cats)
    y = cats.dont_care[gc.value]
    return np.bincount(gc.group[y], weights=gc.count[y], minlength=gc.n_groups) / gc.size


def density(gc: GroupCounts, cats: SensitiveCategories) -> FloatArray:
    """max_{τ ∈ S̄ ∪ {Y}} D_q{τ} per group, shape (G,): the smallest d of d-density control.

    Raises:
        ValueError: categories over another domain.

    Source: Hsu 2008 (paper 000) §3.5 Def 3.5.5.
    """
    _check_categories(gc, cats)
    cm = _category_counts(gc, cats)
    top = np.zeros(gc.n_groups, dtype=np.float64)
    np.maximum.at(top, cm.group, cm.count)
    return np.maximum(top / gc.size, dont_care_mass(gc, cats))


def density_recursive_ratio(gc: GroupCounts, cats: SensitiveCategories, ell: int) -> FloatArray:
    """The smallest c of (c,ℓ)-density control per group, shape (G,).

    The categories the group meets, sorted by mass descending D_1 ≥ … ≥ D_n (Y excluded, as in
    Def 3.5.10); the group is (c,ℓ)-density controlled iff D_1 ≤ c·Σ_{i=ℓ}^{n} D_i, i.e. iff
    c ≥ ratio = D_1 / Σ_{i=ℓ}^{n} D_i. Errata E8: the thesis prints Σ from i = 1, which makes
    the test trivial for c ≥ 1; the intent ("imitate (c,ℓ)-recursive diversity") is i = ℓ.
    0 for groups meeting no category, inf when fewer than ℓ categories carry mass.

    Raises:
        ValueError: ℓ not an integer ≥ 1, categories over another domain.

    Source: Hsu 2008 (paper 000) §3.5 Def 3.5.10 (printed "(c, 1)-density controlled").
    """
    _check_c_ell(None, ell)
    _check_categories(gc, cats)
    cm = _category_counts(gc, cats)
    d = _descending(cm.group, cm.count, gc.n_groups)
    return _ratio(d.top, _tail(d, ell, gc.n_groups))


def _value_masks(cats: SensitiveCategories, with_dont_care: bool) -> tuple[IntArray, int]:
    """Bit j of mask[v] set iff v ∈ category j; bit |S̄| for Y when requested and Y ≠ ∅."""
    n_cat = cats.n_categories
    if n_cat > MAX_EXACT_CATEGORIES:
        raise SizeLimitExceeded(
            f"{n_cat} sensitive categories exceed the exact-enumeration limit of {MAX_EXACT_CATEGORIES}"
        )
    weights = np.left_shift(np.int64(1), np.arange(n_cat, dtype=np.int64))
    mask = (cats.member.astype(np.int64) * weights).sum(axis=1).astype(np.int64)
    n_sets = n_cat
    if with_dont_care and cats.dont_care.any():
        mask = mask | (cats.dont_care.astype(np.int64) << n_cat)
        n_sets += 1
    return mask, n_sets


def _group_mask_pairs(gc: GroupCounts, mask: IntArray, n_sets: int) -> tuple[IntArray, IntArray, FloatArray]:
    """Distinct (group, mask) pairs with their record counts, sorted by group then mask."""
    key = gc.group * (np.int64(1) << n_sets) + mask[gc.value]
    codes, first = factorize(key)
    cnt = np.bincount(codes, weights=gc.count)
    ukey = key[first]
    order = np.argsort(ukey, kind="stable")
    ukey, cnt = ukey[order], cnt[order]
    group = (ukey >> n_sets).astype(np.int64)
    mask = (ukey & ((np.int64(1) << n_sets) - 1)).astype(np.int64)
    return group, mask, cnt.astype(np.float64)


def categorical_diversity(gc: GroupCounts, cats: SensitiveCategories) -> IntArray:
    """Minimum set cover size of every group's distinct values by {Y} ∪ S̄, shape (G,).

    A group is ℓ-categorically diverse iff this is ≥ ℓ (Def 3.5.3 says "a minimal set cover of
    size ℓ"; the proof of Thm 3.5.4 uses it as "minimum cover size ≥ ℓ", Errata E8). A family
    covers the values when their union contains them (Def 3.5.2 prints "=", which would forbid
    any category holding a value absent from the group; the cover is the standard ⊆ one).
    Y counts as one set when non-empty.

    Exact: each value is reduced to the bitmask of the sets containing it. A value in exactly one
    set forces that set into every cover; after removing the values the forced sets cover, the
    rest (values in ≥ 2 sets, usually none) is solved by testing the subsets of the sets they
    meet in order of size. Groups with the same rest share one answer.

    Raises:
        SizeLimitExceeded: more than :data:`MAX_EXACT_CATEGORIES` categories, or more than
            :data:`MAX_SUBSET_TESTS` subset × mask tests in total (over the distinct rests,
            masks × 2^(sets they meet)).
        ValueError: categories over another domain.

    Source: Hsu 2008 (paper 000) §3.5 Defs 3.5.2–3.5.3 (set cover; NP-complete, hence the limit).
    """
    _check_categories(gc, cats)
    mask, n_sets = _value_masks(cats, with_dont_care=True)
    pg, pm, _ = _group_mask_pairs(gc, mask, n_sets)  # masks are never 0: every value is in Y or a category
    single = _popcount(pm) == 1
    forced = np.zeros(gc.n_groups, dtype=np.int64)
    np.bitwise_or.at(forced, pg[single], pm[single])
    answer = _popcount(forced)
    rest = (pm & forced[pg]) == 0
    rg, rm = pg[rest], pm[rest]
    if rg.size == 0:
        return answer
    bounds = np.flatnonzero(np.r_[True, rg[1:] != rg[:-1]])
    signature: dict[bytes, int] = {}
    sig_masks: list[IntArray] = []
    sig_of_part = np.empty(bounds.size, dtype=np.int64)
    for i, part in enumerate(np.split(rm, bounds[1:])):
        key = part.tobytes()  # pairs are sorted by (group, mask): equal rests give equal bytes
        idx = signature.get(key)
        if idx is None:
            idx = signature[key] = len(sig_masks)
            sig_masks.append(part)
        sig_of_part[i] = idx
    extra = _min_hitting_sets(sig_masks, n_sets)
    answer[rg[bounds]] += extra[sig_of_part]
    return answer


def _min_hitting_sets(sig_masks: list[IntArray], n_sets: int) -> IntArray:
    """Smallest subset T of the n_sets sets meeting every mask, for every list of masks.

    Level by level (|T| = 1, 2, ...), all unresolved lists at once: a (lists × masks × subsets)
    test per chunk, so the work is Σ_levels (masks still unresolved) × C(n_sets, level).
    """
    k = np.array([m.size for m in sig_masks], dtype=np.int64)
    flat = np.concatenate(sig_masks)
    ptr = np.r_[0, np.cumsum(k)]
    all_sets = np.int64((1 << n_sets) - 1)
    subsets = np.arange(1 << n_sets, dtype=np.int64)
    size = _popcount(subsets)
    by_k = np.argsort(k, kind="stable")  # similar lengths share a chunk: little padding
    answer = np.zeros(k.size, dtype=np.int64)
    work = 0
    for level in range(1, n_sets + 1):
        pending = by_k[answer[by_k] == 0]
        if pending.size == 0:
            break
        t = subsets[size == level]
        work += int(k[pending].sum()) * t.size
        if work > MAX_SUBSET_TESTS:
            raise SizeLimitExceeded(
                f"exact set cover needs more than {MAX_SUBSET_TESTS:,} subset tests (limit) at cover size {level} "
                f"({pending.size:,} distinct groups of values lying in several of {n_sets} sets unresolved)"
            )
        step = max(1, 2**22 // max(1, t.size * int(k[pending].max())))
        for a in range(0, pending.size, step):
            chunk = pending[a : a + step]
            kc = k[chunk]
            m = np.full((chunk.size, int(kc.max())), all_sets, dtype=np.int64)  # padding meets every T
            rows = np.repeat(np.arange(chunk.size), kc)
            cols = np.arange(rows.size) - np.repeat(np.cumsum(kc) - kc, kc)
            m[rows, cols] = flat[np.repeat(ptr[chunk], kc) + cols]
            ok = ((m[:, :, None] & t[None, None, :]) != 0).all(axis=1).any(axis=1)
            answer[chunk[ok]] = level
    return answer


def _popcount(x: IntArray) -> IntArray:
    """Number of set bits of non-negative int64 values (below 2^62)."""
    x = np.asarray(x, dtype=np.int64)
    out = np.zeros(x.shape, dtype=np.int64)
    for b in range(62):
        out += (x >> b) & 1
    return out


def max_coverage(gc: GroupCounts, cats: SensitiveCategories, ell: int) -> FloatArray:
    """MC(ℓ): the largest fraction of a group's records that ℓ categories cover, shape (G,).

    Max over ℓ-subsets S̄' ⊆ S̄ of D_q{⋃S̄'} (Y ignored, as the thesis says from Def 3.5.7 on).
    With ℓ ≥ |S̄| all categories are taken. Exact, by enumerating the C(|S̄|, ℓ) subsets, each
    vectorized over all groups.

    Raises:
        SizeLimitExceeded: more than :data:`MAX_EXACT_CATEGORIES` categories, or C(|S̄|, ℓ) ×
            (group, category-mask) pairs above :data:`MAX_SUBSET_TESTS`.
        ValueError: ℓ not an integer ≥ 1, categories over another domain.

    Source: Hsu 2008 (paper 000) §3.5 Def 3.5.7 (n-maximum covering; NP-hard, hence the limit).
    """
    _check_c_ell(None, ell)
    _check_categories(gc, cats)
    mask, n_sets = _value_masks(cats, with_dont_care=False)
    pg, pm, cnt = _group_mask_pairs(gc, mask, n_sets)
    keep = pm != 0
    pg, pm, cnt = pg[keep], pm[keep], cnt[keep]
    k = min(ell, n_sets)
    n_combos = math.comb(n_sets, k)
    if n_combos * max(pg.size, 1) > MAX_SUBSET_TESTS:
        raise SizeLimitExceeded(
            f"exact maximum coverage needs C({n_sets}, {k}) = {n_combos:,} subsets × {pg.size:,} "
            f"(group, category-mask) pairs, above the limit of {MAX_SUBSET_TESTS:,} tests"
        )
    best = np.zeros(gc.n_groups, dtype=np.float64)
    for combo in combinations(range(n_sets), k):
        t = np.int64(sum(1 << j for j in combo))
        hit = (pm & t) != 0
        best = np.maximum(best, np.bincount(pg[hit], weights=cnt[hit], minlength=gc.n_groups))
    return best / gc.size


def categorical_recursive_ratio(gc: GroupCounts, cats: SensitiveCategories, ell: int) -> FloatArray:
    """The smallest c of (c,ℓ)-categorical recursive diversity per group, shape (G,).

    r = max_{S' ∈ S̄} D_q{S'}; the group satisfies Def 3.5.8 iff r ≤ c·(1 − MC(ℓ)), i.e. iff
    c ≥ ratio = r / (1 − MC(ℓ)) (0 when r = 0, inf when MC(ℓ) = 1 and r > 0). Computed on
    record counts, so the comparison is exact up to the final division.

    Note: Def 3.5.8 uses MC(ℓ) where Def 3.3.3's analogue r_ℓ + … + r_m would correspond to
    1 − MC(ℓ−1); implemented as printed (the notes do not mark it as an erratum).

    Raises:
        SizeLimitExceeded: as :func:`max_coverage`.
        ValueError: ℓ not an integer ≥ 1, categories over another domain.

    Source: Hsu 2008 (paper 000) §3.5 Defs 3.5.7–3.5.8.
    """
    mc = max_coverage(gc, cats, ell) * gc.size
    cm = _category_counts(gc, cats)
    top = np.zeros(gc.n_groups, dtype=np.float64)
    np.maximum.at(top, cm.group, cm.count)
    return _ratio(top, np.rint(gc.size - mc))


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------


def summary(
    group: npt.ArrayLike,
    value: npt.ArrayLike,
    n_values: int,
    *,
    candidates: npt.ArrayLike | None = None,
    sensitive_hierarchy: Hierarchy | None = None,
    categories: Sequence[Iterable[int]] | None = None,
    dont_care: Iterable[int] | None = None,
    c: float = 3.0,
    ell: int = 2,
    strict: bool = True,
) -> list[Measure]:
    """Table-level figures of k-anonymity, ℓ-diversity, t-closeness and Hsu's categorical controls.

    Args:
        group: QI-group code of every record, shape (R,), dense codes 0..G-1.
        value: sensitive value code of every record, shape (R,), 0..n_values-1.
        n_values: S, the size of the sensitive domain.
        candidates: n_j ≥ records, register individuals per group, shape (G,); gives
            "k-anonymity over candidates" (paper 004's virtual dilution). None: not computed.
        sensitive_hierarchy: the sensitive attribute's hierarchy (leaf i = value code i) for the
            hierarchical-distance t-closeness. None: that measure is not computed.
        categories: sensitive categories S̄ as sets of value codes (may overlap). None: the
            categorical measures are not computed ("no categories configured").
        dont_care: the don't-care set Y (value codes); None means every value in no category.
        c: c of recursive (c,ℓ)-diversity and of the categorical (c,ℓ) measures, > 0.
        ell: ℓ of the (c,ℓ) measures, integer ≥ 1.
        strict: Def 3.3.3's strict "<" (True) or the "≤" reading of Table 3.5-1 (False, E5).

    Returns:
        Measures in this order: k-anonymity (records), k-anonymity over candidates (individuals),
        distinct ℓ-diversity (ℓ), entropy ℓ-diversity (effective ℓ = 2^H_min, H in bits), recursive
        (c,ℓ)-diversity smallest c for ``ell`` and largest ℓ for ``c``, t-closeness with equal and
        with hierarchical ground distance (max EMD), ℓ-categorical diversity (min cover size),
        d-density control (max category fraction), μ-dilution (min fraction of Y),
        (c,ℓ)-categorical recursive diversity and (c,ℓ)-density control (smallest c). A "smallest
        c" is ``inf`` when some group cannot satisfy the measure for any c.

    Raises:
        ValueError: bad arrays, codes, c, ℓ, candidates (shape (G,), ≥ group sizes), hierarchy
            or categories (see :func:`group_counts`, :func:`sensitive_categories`).
    """
    _check_c_ell(c, ell)
    gc = group_counts(group, value, n_values)
    G = gc.n_groups
    out: list[Measure] = []
    k = k_anonymity(gc)
    out.append(
        Measure(
            "k-anonymity",
            float(k),
            "records",
            f"{_HSU} §3.2 Def 3.2.1",
            f"smallest of {G:,} QI-groups ({gc.n_records:,} records); the release is k-anonymous for k ≤ {k}",
        )
    )
    src_cand = f"{_HSU} §3.2 Def 3.2.1 over register candidates n_j (paper 004, virtual dilution)"
    if candidates is None:
        out.append(not_computed("k-anonymity over candidates", "individuals", src_cand, "no candidate counts given"))
    else:
        n = _int_array("candidates", candidates)
        if n.shape != (G,):
            raise ValueError(f"candidates must have shape ({G},), one per group, got {n.shape}")
        if (n < gc.size).any():
            bad = int(np.flatnonzero(n < gc.size)[0])
            raise ValueError(f"candidates must be ≥ the group size; group {bad} has {n[bad]} < {gc.size[bad]}")
        out.append(
            Measure(
                "k-anonymity over candidates",
                float(n.min()),
                "individuals",
                src_cand,
                "smallest number of register individuals whose QIs fall in a group's region",
            )
        )
    dv = distinct_values(gc)
    out.append(
        Measure(
            "distinct ℓ-diversity",
            float(dv.min()),
            "ℓ (distinct values)",
            f"{_HSU} §3.3 Def 3.3.1",
            f"fewest distinct sensitive values in a group; {int((dv < 2).sum()):,} of {G:,} groups are homogeneous",
        )
    )
    h = entropy_bits(gc)
    h_min = float(h.min())
    out.append(
        Measure(
            "entropy ℓ-diversity",
            float(2.0**h_min),
            "ℓ (= 2^H_min)",
            f"{_HSU} §3.3 Def 3.3.2",
            f"smallest group entropy H_min = {h_min:.6g} bits (log base 2); entropy ℓ-diverse for ℓ ≤ 2^H_min; "
            f"the whole release has H = {float(_entropy_of(gc.total)):.6g} bits (the feasibility bound)",
        )
    )
    ratio = recursive_ratio(gc, ell)
    ok = recursive_diverse(gc, c, ell, strict=strict)
    rel = "<" if strict else "≤"
    out.append(
        Measure(
            f"recursive (c,ℓ)-diversity, smallest c at ℓ = {ell}",
            float(ratio.max()),
            "c",
            f"{_HSU} §3.3 Def 3.3.3 (Errata E5, E6)",
            f"max over groups of r1/(r_ℓ+…+r_m); satisfied for c > value (strict <) or c ≥ value (≤ reading); "
            f"with c = {c} and r1 {rel} c·Σ: {int((~ok).sum()):,} of {G:,} groups fail",
        )
    )
    max_ell = recursive_max_ell(gc, c, strict=strict)
    out.append(
        Measure(
            f"recursive (c,ℓ)-diversity, largest ℓ at c = {c}",
            float(max_ell.min()),
            "ℓ",
            f"{_HSU} §3.3 Def 3.3.3 (Errata E5, E6)",
            f"min over groups of the largest ℓ with r1 {rel} c·(r_ℓ+…+r_m); ℓ = 1 is always satisfied",
        )
    )
    emd = emd_equal(gc)
    out.append(
        Measure(
            "t-closeness (equal ground distance)",
            float(emd.max()),
            "EMD",
            f"{_HSU} §3.4 Def 3.4.3; {_LI} §4.2",
            "max over groups of the EMD to the release's distribution with d = 1 between distinct values "
            "(= total variation); t-close for t ≥ value",
        )
    )
    src_h = f"{_LI} §4.2 hierarchical distance; {_HSU} §3.4 Def 3.4.3"
    if sensitive_hierarchy is None:
        out.append(
            not_computed(
                "t-closeness (hierarchical ground distance)", "EMD", src_h, "no sensitive-attribute hierarchy given"
            )
        )
    else:
        emd_h = emd_hierarchical(gc, sensitive_hierarchy)
        out.append(
            Measure(
                "t-closeness (hierarchical ground distance)",
                float(emd_h.max()),
                "EMD",
                src_h,
                f"max over groups; d(i,j) = level of the lowest common ancestor / H, H = "
                f"{sensitive_hierarchy.depth - 1}; t-close for t ≥ value",
            )
        )
    out.extend(_categorical(gc, categories, dont_care, c, ell))
    return out


def _entropy_of(counts: IntArray) -> float:
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log2(p)).sum())


def _categorical(
    gc: GroupCounts, categories: Sequence[Iterable[int]] | None, dont_care: Iterable[int] | None, c: float, ell: int
) -> list[Measure]:
    names = [
        ("ℓ-categorical diversity", "categories (min set cover)", "§3.5 Defs 3.5.2–3.5.3"),
        ("d-density control", "fraction", "§3.5 Def 3.5.5"),
        ("μ-dilution", "fraction", "§3.5 Def 3.5.6"),
        (f"(c,ℓ)-categorical recursive diversity, smallest c at ℓ = {ell}", "c", "§3.5 Defs 3.5.7–3.5.8"),
        (f"(c,ℓ)-density control, smallest c at ℓ = {ell}", "c", "§3.5 Def 3.5.10 (Errata E8)"),
    ]
    if categories is None:
        return [
            not_computed(n, u, f"{_HSU} {s}", "not computed: no sensitive categories configured") for n, u, s in names
        ]
    cats = sensitive_categories(categories, dont_care, gc.n_values)
    out: list[Measure] = []
    (n0, u0, s0), (n1, u1, s1), (n2, u2, s2), (n3, u3, s3), (n4, u4, s4) = names
    try:
        cover = categorical_diversity(gc, cats)
        out.append(
            Measure(
                n0,
                float(cover.min()),
                u0,
                f"{_HSU} {s0}",
                "fewest sets of {Y} ∪ S̄ needed to cover a group's distinct values (exact); "
                "ℓ-categorically diverse for ℓ ≤ value",
            )
        )
    except SizeLimitExceeded as exc:
        out.append(not_computed(n0, u0, f"{_HSU} {s0}", f"not computed: {exc}"))
    out.append(
        Measure(
            n1,
            float(density(gc, cats).max()),
            u1,
            f"{_HSU} {s1}",
            "max over groups and over τ ∈ S̄ ∪ {Y} of the group's fraction in τ; d-density controlled for d ≥ value",
        )
    )
    out.append(
        Measure(
            n2,
            float(dont_care_mass(gc, cats).min()),
            u2,
            f"{_HSU} {s2}",
            "min over groups of the fraction of records in the don't-care set Y; μ-diluted for μ ≤ value",
        )
    )
    try:
        ratio = categorical_recursive_ratio(gc, cats, ell)
        out.append(
            Measure(
                n3,
                float(ratio.max()),
                u3,
                f"{_HSU} {s3}",
                f"max over groups of r/(1 − MC(ℓ)), MC by exact maximum coverage; satisfied for c ≥ value; "
                f"with c = {c}: {int((ratio > c).sum()):,} of {gc.n_groups:,} groups fail",
            )
        )
    except SizeLimitExceeded as exc:
        out.append(not_computed(n3, u3, f"{_HSU} {s3}", f"not computed: {exc}"))
    dr = density_recursive_ratio(gc, cats, ell)
    out.append(
        Measure(
            n4,
            float(dr.max()),
            u4,
            f"{_HSU} {s4}",
            f"max over groups of D_1/Σ_(i≥ℓ) D_i over the categories a group meets (sum from i = ℓ, "
            f"Errata E8); satisfied for c ≥ value; with c = {c}: {int((dr > c).sum()):,} groups fail",
        )
    )
    return out
