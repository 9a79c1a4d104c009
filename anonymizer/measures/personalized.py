"""Xiao & Tao's personalized breach probability (paper 001, "Personalized Privacy Preservation").

Every record t carries a *guarding node* t.GN in the sensitive attribute's taxonomy (a
:class:`~anonymizer.hierarchy.Hierarchy`): a node on the path from the root to t's sensitive
value, or ∅ (here ``-1``) when the owner asks for no protection (Def 2). The owner is breached
when an adversary, holding the published table T* and an external database (our population
register), infers that the owner's sensitive value lies in SUBTR(t.GN) (Def 3).

The adversary looks at the owner's essential QI-group EG(o) (Def 7): m published tuples
t_1*..t_m*, and n = |S_ext(o)| individuals of the external database that the group's QI
region covers (Def 8; in serialpub this is the group's ``candidates`` n_j, virtual dilution).
Every *possible reconstruction* (Def 9 / Def 10) gives each tuple an owner among the n and a
leaf value under its published value, all equally likely; P_breach(t) is the fraction of
reconstructions in which the owner of t holds some tuple with a leaf in L(t.GN) (Eq. 3).

Quantities of §3.1, for a target tuple t_tar with published value t_tar*.A^s:

- b: the number of tuples of EG whose SUBTR(A^s) overlaps SUBTR(t_tar.GN);
- F_percent(t*, t_tar) = |L(t*.A^s) ∩ L(t_tar.GN)| / |L(t*.A^s)|; by Lemma 1 it is 0 or one
  constant c within a group (1 when t_tar*.A^s ∈ SUBTR(t_tar.GN)).

Theorem 1 (Primary Case: each individual has at most one tuple in T, Def 9):
``P = b·c / n`` (c = 1 in the first case). Theorem 2 (Non-primary Case: an individual may own
any number of tuples, Def 10): ``P = 1 - (1 - c/n)^b``.

This module evaluates the sums that those formulas close, tuple by tuple:

    primary:      P = Σ_j F_j / n                 (owning tuple j is 1/n, the events are disjoint)
    non-primary:  P = 1 - Π_j (1 - F_j / n)       (owners and values are independent per tuple)

which equal Theorems 1 and 2 whenever the group's published values are disjoint partitions
(Lemma 1's premise, always true for our leaf-level releases) and stay exact for any published
values (checked by brute-force enumeration of reconstructions in the tests).

Which n (§2.4, Fig. 5 line 3). The adversary's n is unknown to the publisher; Xiao & Tao's
algorithm uses the lower bound |S_real|: the group size m (Primary Case) or the number of
distinct individuals in the group (Non-primary Case), see :func:`lower_bound_n`. The report
uses n = candidates, the register count, which is S_ext for an adversary holding the register.

Relation to serialpub's own breach probability (paper 004, Lemma 4; docs/design.md section 1). For one
release, guarding node = the record's leaf s, leaf-level publication (so c = 1) and
n = candidates n_j, b is the number n_{j,s} of the group's records carrying s, and

- the Primary Case gives exactly ``n_{j,s} / n_j``, paper 004's single-release figure: paper 004
  assumes at most one record per individual per release, i.e. Xiao & Tao's Primary Case, and
  both count equally likely injective assignments of records to the n_j candidates;
- the Non-primary Case gives ``1 - (1 - 1/n_j)^{n_{j,s}}``, which does *not* reduce to it: it is
  ≤ n_{j,s}/n_j (Bernoulli's inequality), with equality iff n_{j,s} ≤ 1. Formally it is paper
  004's Lemma 4 survival product over n_{j,s} independent "releases" each holding one
  s-record among n_j candidates, because Def 10 draws each tuple's owner independently.
  (With Xiao & Tao's lower bound n = #distinct individuals, which can be 1, it can instead
  exceed the primary figure; that is their point against k-anonymity and ℓ-diversity, §3.3.)

Everything is vectorized over records (sorting and binary search over (group, node) keys); the
only loops run over the levels of the taxonomy. No dense group × value matrix is built. The
functions return numbers (per record, or :class:`BreachSummary` for a release); the report's
wording of them is :mod:`serialpub.report.wording.personalized`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from anonymizer.arrays import factorize
from anonymizer.hierarchy import Hierarchy
from anonymizer.hierarchy_index import HierarchyIndex

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Guarding node ∅ (Def 2): nothing to protect, P_breach = 0.
NO_GUARD = -1

#: A breach probability counts as above p_breach only if it exceeds it by more than this
#: (absolute). Theorems 1-2 evaluated in floating point are within a few ulps of the exact
#: fraction, so a record exactly at the threshold (allowed: P ≤ p_breach) is not miscounted.
TIE_TOLERANCE = 1e-12


def _tree(hierarchy: Hierarchy | None, n_values: int) -> HierarchyIndex:
    """The taxonomy's index: SUBTR(x) is the pre-order range [pre[x], end[x]) and |L(x)|
    (F_subsize of a published value x) is size[x]. Without a hierarchy the values are the
    leaves of a flat domain whose root is not addressable."""
    return HierarchyIndex.flat(n_values) if hierarchy is None else hierarchy.index


def _int_array(name: str, a: npt.ArrayLike) -> IntArray:
    arr = np.asarray(a)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} must hold integer codes, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def _check_records(
    group: npt.ArrayLike,
    value: npt.ArrayLike,
    guarding: npt.ArrayLike,
    n_groups: int,
    hierarchy: Hierarchy | None,
) -> tuple[IntArray, IntArray, IntArray, HierarchyIndex]:
    g = _int_array("group", group)
    v = _int_array("value", value)
    gn = _int_array("guarding", guarding)
    if not (g.shape == v.shape == gn.shape):
        raise ValueError(
            f"group, value and guarding must have one entry per record, got {g.shape}, {v.shape}, {gn.shape}"
        )
    if g.size and (g.min() < 0 or g.max() >= n_groups):
        raise ValueError(f"group codes must lie in [0, {n_groups}) (one per group of n / candidates)")
    if hierarchy is None:
        n_values = int(max(v.max(initial=-1), gn.max(initial=-1))) + 1
    else:
        n_values = hierarchy.n_nodes
    if v.size and v.min() < 0:
        raise ValueError("sensitive value codes must be >= 0 (node ids of the sensitive hierarchy)")
    if v.size and v.max() >= n_values:
        raise ValueError(f"sensitive value codes must be node ids of the sensitive hierarchy, < {n_values}")
    if gn.size and (gn.min() < NO_GUARD or gn.max() >= n_values):
        raise ValueError(f"guarding nodes must be -1 (∅, no protection) or node ids < {n_values}")
    tree = _tree(hierarchy, n_values)
    # Def 2: GN lies on the path root -> t.A^s, and t*.A^s is an ancestor-or-self of that leaf,
    # so GN and the published value must be comparable (one in the other's subtree).
    has = gn >= 0
    pv, pg = tree.pre[v[has]], tree.pre[gn[has]]
    ok = ((pg <= pv) & (pv < tree.end[gn[has]])) | ((pv <= pg) & (pg < tree.end[v[has]]))
    if not ok.all():
        i = int(np.flatnonzero(has)[np.flatnonzero(~ok)[0]])
        raise ValueError(
            f"record {i}: guarding node {int(gn[i])} is neither an ancestor-or-self nor a descendant of its "
            f"published sensitive value {int(v[i])}; Def 2 puts the guarding node on the path from the root "
            "to the record's sensitive value"
        )
    return g, v, gn, tree


def _check_n(n: npt.ArrayLike, group: IntArray, primary: bool) -> FloatArray:
    n_arr = np.asarray(n)
    if n_arr.ndim != 1:
        raise ValueError(f"n (candidates per group) must be one-dimensional, got shape {n_arr.shape}")
    if n_arr.size and not np.issubdtype(n_arr.dtype, np.number):
        raise ValueError(f"n (candidates per group) must be numeric, got dtype {n_arr.dtype}")
    nf = n_arr.astype(np.float64)
    if n_arr.size and not (np.all(np.isfinite(nf)) and np.all(nf == np.floor(nf))):
        raise ValueError("n (candidates per group) must hold whole numbers of individuals")
    if np.any(nf < 1):
        raise ValueError("every group needs n >= 1 individuals in the external database (S_ext includes the owner)")
    if primary:
        sizes = np.bincount(group, minlength=n_arr.size)
        bad = np.flatnonzero(sizes > nf)
        if bad.size:
            j = int(bad[0])
            raise ValueError(
                f"group {j} has {int(sizes[j])} records but n = {int(nf[j])}; in the Primary Case every record has "
                "its own owner, so n >= group size (Formula 1: S_real ⊆ S_ext)"
            )
    return nf


@dataclass(frozen=True)
class _Terms:
    """Per record: b_in tuples with F = 1, and per ancestor level (count, F) of tuples whose
    published value is that proper ancestor of GN (F = |L(GN)| / |L(ancestor)|)."""

    inside: IntArray
    above: list[tuple[IntArray, FloatArray]]


def _terms(group: IntArray, value: IntArray, guarding: IntArray, tree: HierarchyIndex) -> _Terms:
    r = group.size
    inside = np.zeros(r, dtype=np.int64)
    above: list[tuple[IntArray, FloatArray]] = []
    idx = np.flatnonzero(guarding >= 0)
    if idx.size == 0:
        return _Terms(inside, above)
    width = tree.n_nodes + 1
    keys = np.sort(group * width + tree.pre[value])
    base = group[idx] * width
    gn = guarding[idx]
    # tuples whose published value lies in SUBTR(GN): F = 1 (b's first kind)
    lo = np.searchsorted(keys, base + tree.pre[gn], side="left")
    hi = np.searchsorted(keys, base + tree.end[gn], side="left")
    inside[idx] = hi - lo
    if value.max() < tree.n_leaves:
        return _Terms(inside, above)  # all values are leaves: no tuple sits above a guarding node
    # tuples whose published value is a proper ancestor a of GN: F = |L(GN)| / |L(a)|
    leaves_gn = tree.size[gn].astype(np.float64)
    anc = tree.parent[gn]
    while True:
        live = anc >= 0
        if not live.any():
            break
        a = np.where(live, anc, 0)
        key = base + tree.pre[a]
        cnt = np.where(live, np.searchsorted(keys, key + 1) - np.searchsorted(keys, key), 0)
        count = np.zeros(r, dtype=np.int64)
        frac = np.zeros(r, dtype=np.float64)
        count[idx] = cnt
        frac[idx] = leaves_gn / tree.size[a]
        above.append((count, frac))
        anc = np.where(live, tree.parent[a], -1)
    return _Terms(inside, above)


def guarding_nodes(value_leaf: npt.ArrayLike, hierarchy: Hierarchy, levels_up: int) -> IntArray:
    """Guarding node of every record: its sensitive leaf's ancestor ``levels_up`` levels up.

    ``levels_up = 0`` guards the value itself (Xiao & Tao's Pri-leaf setting, §5, the standard
    breach probability of a protected value); 1 guards the parent (their Pri-mixed uses this for
    10 % of tuples); levels beyond the root stop at the root (which guards every value).

    Args:
        value_leaf: sensitive leaf ids (node ids < ``hierarchy.n_leaves``), shape (R,).
        hierarchy: the sensitive attribute's taxonomy.
        levels_up: number of parent steps, >= 0.

    Returns:
        int64 node ids, shape (R,).

    Raises:
        ValueError: a value that is not a leaf id, or ``levels_up`` < 0.

    Source: Xiao & Tao 2006 (paper 001) §2 Def 2 (guarding node) and §5 (Pri-leaf / Pri-mixed).
    """
    v = _int_array("value_leaf", value_leaf)
    if int(levels_up) != levels_up or levels_up < 0:
        raise ValueError(f"levels_up must be a whole number >= 0, got {levels_up!r}")
    if v.size and (v.min() < 0 or v.max() >= hierarchy.n_leaves):
        raise ValueError(f"value_leaf must be leaf ids of the sensitive hierarchy, in [0, {hierarchy.n_leaves})")
    parent = np.asarray(hierarchy.parent, dtype=np.int64)
    node = v.copy()
    for _ in range(min(int(levels_up), hierarchy.n_nodes)):  # loop over levels, not records
        up = parent[node]
        if (up < 0).all():
            break
        node = np.where(up >= 0, up, node)
    return node


def lower_bound_n(
    group: npt.ArrayLike, n_groups: int, *, primary: bool, individual: npt.ArrayLike | None = None
) -> IntArray:
    """Xiao & Tao's publication-time n: the lower bound |S_real| of every group (Inequality 2).

    Primary Case: the group size m. Non-primary Case: the number of distinct individuals among
    the group's records (needs ``individual``).

    Args:
        group: group code of every record, 0..n_groups-1, shape (R,).
        n_groups: G.
        primary: which case.
        individual: owner id of every record, shape (R,); required when ``primary`` is False.

    Returns:
        int64, shape (G,); groups without records get 0 (no record has them as EG).

    Raises:
        ValueError: bad codes or shapes, or non-primary without ``individual``.

    Source: Xiao & Tao 2006 (paper 001) §3.1 Inequality (2), §4.2 Fig. 5 line 3.
    """
    g = _int_array("group", group)
    if g.size and (g.min() < 0 or g.max() >= n_groups):
        raise ValueError(f"group codes must lie in [0, {n_groups})")
    if primary:
        return np.bincount(g, minlength=n_groups).astype(np.int64)
    if individual is None:
        raise ValueError("the Non-primary lower bound counts distinct individuals per group: pass individual ids")
    ind = np.asarray(individual)
    if ind.shape != g.shape:
        raise ValueError(f"individual must have one entry per record, got {ind.shape} for {g.shape}")
    pair = factorize(factorize(ind)[0] * np.int64(n_groups) + g)[1]
    return np.bincount(g[pair], minlength=n_groups).astype(np.int64)


def breach_terms(
    group: npt.ArrayLike, value: npt.ArrayLike, guarding: npt.ArrayLike, hierarchy: Hierarchy | None
) -> tuple[IntArray, FloatArray]:
    """Xiao & Tao's b and c of every record (§3.1, Lemma 1).

    Args:
        group: QI-group code of every record, shape (R,).
        value: published sensitive value of every record as a node id of ``hierarchy`` (a leaf id
            for our leaf-level releases), shape (R,).
        guarding: guarding node id of every record, -1 for ∅, shape (R,).
        hierarchy: the sensitive attribute's taxonomy; None for a flat domain (values and
            guarding nodes are then leaf codes).

    Returns:
        b: int64, shape (R,): tuples of the record's group whose SUBTR(A^s) overlaps SUBTR(GN)
            (0 when GN = ∅).
        c: float64, shape (R,): the mean F_percent over those b tuples, which is Lemma 1's
            constant c when the group's published values are disjoint partitions (0 when b = 0).

    Raises:
        ValueError: bad codes or shapes, or a guarding node not comparable with the record's
            published value (Def 2).

    Source: Xiao & Tao 2006 (paper 001) §3.1 (b, F_subsize, F_percent), Lemma 1.
    """
    g = _int_array("group", group)
    n_groups = int(g.max(initial=-1)) + 1
    g, v, gn, tree = _check_records(g, value, guarding, n_groups, hierarchy)
    t = _terms(g, v, gn, tree)
    b = t.inside.copy()
    total = t.inside.astype(np.float64)
    for count, frac in t.above:
        b += count
        total += count * frac
    c = np.divide(total, b, out=np.zeros_like(total), where=b > 0)
    return b, c


def personalized_breach(
    group: npt.ArrayLike,
    value: npt.ArrayLike,
    guarding: npt.ArrayLike,
    n: npt.ArrayLike,
    hierarchy: Hierarchy | None,
    *,
    primary: bool,
) -> FloatArray:
    """Personalized breach probability P_breach(t) of every record (Theorems 1 and 2).

    Args:
        group: QI-group code of every record, 0..G-1, shape (R,).
        value: published sensitive value as a node id of ``hierarchy`` (leaf ids for leaf-level
            releases; internal nodes for SA-generalized tuples as in the paper's Figure 3), shape (R,).
        guarding: guarding node per record, -1 = ∅ (P = 0), shape (R,). See :func:`guarding_nodes`.
        n: |S_ext| of every group, shape (G,): the register candidates n_j, or Xiao & Tao's lower
            bound from :func:`lower_bound_n`.
        hierarchy: the sensitive taxonomy, or None for a flat domain (guarding = value or -1).
        primary: True for the Primary Case (each individual owns at most one record: Theorem 1,
            ``P = b·c/n``), False for the Non-primary Case (Theorem 2, ``P = 1 - (1 - c/n)^b``).

    Returns:
        float64 probabilities in [0, 1], shape (R,).

    Raises:
        ValueError: bad codes or shapes, n < 1, n smaller than the group size in the Primary
            Case (Formula 1), or a guarding node not comparable with the published value (Def 2).

    Source: Xiao & Tao 2006 (paper 001) §3.2 Theorems 1-2 (Eq. 3, Defs 9-10); evaluated as
    Σ_j F_j/n and 1 - Π_j (1 - F_j/n), which equal the theorems under Lemma 1.
    """
    n_arr = np.asarray(n)
    if n_arr.ndim != 1:
        raise ValueError(f"n (candidates per group) must be one-dimensional, got shape {n_arr.shape}")
    g, v, gn, tree = _check_records(group, value, guarding, n_arr.size, hierarchy)
    nf = _check_n(n_arr, g, primary)
    t = _terms(g, v, gn, tree)
    n_rec = nf[g] if g.size else np.ones(0)
    if primary:
        total = t.inside.astype(np.float64)
        for count, frac in t.above:
            total += count * frac
        out = total / n_rec
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            # log of the survival product; log1p(-1) = -inf when n = 1 and the owner is certain
            log_survive = np.where(t.inside > 0, t.inside * np.log1p(-1.0 / n_rec), 0.0)
            for count, frac in t.above:
                log_survive += np.where(count > 0, count * np.log1p(-frac / n_rec), 0.0)
        out = -np.expm1(log_survive)
    return np.clip(out, 0.0, 1.0)


@dataclass(frozen=True)
class BreachSummary:
    """Table-level figures of per-record personalized breach probabilities.

    Attributes:
        records: R.
        guarded: records with a guarding node (GN ≠ ∅).
        max_p: largest P_breach, 0.0 for an empty release.
        mean_p: mean over all R records (∅ records count as 0), 0.0 for an empty release.
        above: records with P_breach > p_breach (beyond :data:`TIE_TOLERANCE`).
        p_breach: the threshold.
    """

    records: int
    guarded: int
    max_p: float
    mean_p: float
    above: int
    p_breach: float


def summarize(p: npt.ArrayLike, guarding: npt.ArrayLike, p_breach: float) -> BreachSummary:
    """Maximum, mean and count above ``p_breach`` of per-record breach probabilities.

    Args:
        p: P_breach per record, shape (R,), from :func:`personalized_breach`.
        guarding: guarding node per record, shape (R,) (-1 = ∅).
        p_breach: Xiao & Tao's threshold, in [0, 1].

    Raises:
        ValueError: p_breach outside [0, 1], or shapes that differ.

    Source: Xiao & Tao 2006 (paper 001) §2, personalized anonymity ``P_breach(t) ≤ p_breach``.
    """
    pa = np.asarray(p, dtype=np.float64)
    gn = np.asarray(guarding)
    if pa.shape != gn.shape or pa.ndim != 1:
        raise ValueError(
            f"p and guarding must be one-dimensional with one entry per record, got {pa.shape}, {gn.shape}"
        )
    if not (0.0 <= float(p_breach) <= 1.0):
        raise ValueError(f"p_breach must lie in [0, 1], got {p_breach!r}")
    r = int(pa.size)
    return BreachSummary(
        records=r,
        guarded=int(np.count_nonzero(gn >= 0)),
        max_p=float(pa.max()) if r else 0.0,
        mean_p=float(pa.mean()) if r else 0.0,
        above=int(np.count_nonzero(pa > float(p_breach) + TIE_TOLERANCE)),
        p_breach=float(p_breach),
    )
