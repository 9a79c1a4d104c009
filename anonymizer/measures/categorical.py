"""The thesis's categorical controls: ℓ-categorical diversity, d-density control, μ-dilution,
(c,ℓ)-categorical recursive diversity and (c,ℓ)-density control over sensitive categories.

Source: Hsu 2008, *Database Anonymization and Protections of Sensitive Attributes* (paper 000),
§3.5 Defs 3.5.2–3.5.10 and its worked examples.
They take user sensitive categories S̄ (sets of value codes, possibly overlapping) and a
don't-care set Y disjoint from them. Correction to the thesis applied: E8 ((c,ℓ)-density control
sums from i = ℓ, not i = 1, which would be trivial; Def 3.5.3 read as "minimum cover size ≥ ℓ").

Input: the sparse counts of :func:`anonymizer.measures.qi_groups.group_counts`. Per-group work
is bincount / sorting; the only Python loops run over combinations of categories or, for the
exact set cover (NP-complete, hence the stated size limits), over distinct group *signatures*.
The report's wording of the figures is :mod:`serialpub.report.wording.categorical`'s.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from anonymizer.arrays import factorize
from anonymizer.measures.qi_groups import (
    BoolArray,
    FloatArray,
    GroupCounts,
    IntArray,
    check_c_ell,
    ranked,
    ratio_or_inf,
    tail_mass,
)

#: Exact minimum set cover / maximum coverage enumerate subsets of the categories: at most this
#: many user categories (the don't-care set Y adds one more set for the set cover).
MAX_EXACT_CATEGORIES = 12

#: Work limit of the exact categorical measures, in (subset × mask) tests: distinct group
#: signatures × their masks × 2^sets for the set cover, C(|S̄|, ℓ) × (group, category-mask) pairs
#: for the maximum coverage. 2^27 ≈ 1.3·10^8 tests is about a second of numpy.
MAX_SUBSET_TESTS = 2**27


class SizeLimitExceeded(Exception):
    """An exact measure would exceed :data:`MAX_EXACT_CATEGORIES` or :data:`MAX_SUBSET_TESTS`;
    the message names the limit. :func:`categorical_figures` keeps it in place of the figure."""


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
    check_c_ell(None, ell)
    _check_categories(gc, cats)
    cm = _category_counts(gc, cats)
    d = ranked(cm.group, cm.count, gc.n_groups)
    return ratio_or_inf(d.top, tail_mass(d, ell, gc.n_groups))


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
    check_c_ell(None, ell)
    _check_categories(gc, cats)
    mask, n_sets = _value_masks(cats, with_dont_care=False)
    pg, pm, cnt = _group_mask_pairs(gc, mask, n_sets)
    keep = pm != 0
    pg, pm, cnt = pg[keep], pm[keep], cnt[keep]
    k = min(ell, n_sets)
    n_subsets = math.comb(n_sets, k)
    if n_subsets * max(pg.size, 1) > MAX_SUBSET_TESTS:
        raise SizeLimitExceeded(
            f"exact maximum coverage needs C({n_sets}, {k}) = {n_subsets:,} subsets × {pg.size:,} "
            f"(group, category-mask) pairs, above the limit of {MAX_SUBSET_TESTS:,} tests"
        )
    best = np.zeros(gc.n_groups, dtype=np.float64)
    for subset in combinations(range(n_sets), k):
        t = np.int64(sum(1 << j for j in subset))
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
    return ratio_or_inf(top, np.rint(gc.size - mc))


# ---------------------------------------------------------------------------------------------
# Release figures
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CategoricalFigures:
    """Table-level categorical-control figures of a release.

    A figure whose exact computation would exceed :data:`MAX_EXACT_CATEGORIES` or
    :data:`MAX_SUBSET_TESTS` holds the :class:`SizeLimitExceeded` raised instead (its message
    names the limit); the scalable figures are always numbers.

    Attributes:
        n_groups: G, the number of QI-groups.
        c: c of the (c,ℓ) figures, as given.
        ell: ℓ of the (c,ℓ) figures.
        min_cover: the fewest sets of {Y} ∪ S̄ covering a group's distinct values (min over
            groups of :func:`categorical_diversity`): ℓ-categorically diverse for ℓ ≤ this.
        max_density: max over groups and τ ∈ S̄ ∪ {Y} of the group's fraction in τ
            (:func:`density`): d-density controlled for d ≥ this.
        min_dont_care: min over groups of the fraction in Y (:func:`dont_care_mass`):
            μ-diluted for μ ≤ this.
        recursive_c: max over groups of :func:`categorical_recursive_ratio`, the smallest c of
            (c,ℓ)-categorical recursive diversity (``inf`` when no c suffices).
        recursive_failing: groups whose ratio exceeds ``c``; None when ``recursive_c`` is a
            :class:`SizeLimitExceeded`.
        density_c: max over groups of :func:`density_recursive_ratio`, the smallest c of
            (c,ℓ)-density control (``inf`` when no c suffices).
        density_failing: groups whose ratio exceeds ``c``.
    """

    n_groups: int
    c: float
    ell: int
    min_cover: int | SizeLimitExceeded
    max_density: float
    min_dont_care: float
    recursive_c: float | SizeLimitExceeded
    recursive_failing: int | None
    density_c: float
    density_failing: int


def categorical_figures(gc: GroupCounts, cats: SensitiveCategories, *, c: float, ell: int) -> CategoricalFigures:
    """Hsu's categorical controls of a release over the categories ``cats``.

    Args:
        gc: the release's counts.
        cats: the categories and don't-care set (:func:`sensitive_categories`).
        c: c of the (c,ℓ) measures, > 0.
        ell: ℓ of the (c,ℓ) measures, integer ≥ 1.

    Raises:
        ValueError: c ≤ 0, ℓ not an integer ≥ 1, or categories over another domain. A size limit
            is not raised but kept in the figure it stops (:class:`CategoricalFigures`).

    Source: Hsu 2008 (paper 000) §3.5 Defs 3.5.2–3.5.10 (Errata E8).
    """
    check_c_ell(c, ell)
    min_cover: int | SizeLimitExceeded
    try:
        min_cover = int(categorical_diversity(gc, cats).min())
    except SizeLimitExceeded as exc:
        min_cover = exc
    recursive_c: float | SizeLimitExceeded
    try:
        ratio = categorical_recursive_ratio(gc, cats, ell)
        recursive_c, recursive_failing = float(ratio.max()), int((ratio > c).sum())
    except SizeLimitExceeded as exc:
        recursive_c, recursive_failing = exc, None
    dr = density_recursive_ratio(gc, cats, ell)
    return CategoricalFigures(
        n_groups=gc.n_groups,
        c=c,
        ell=ell,
        min_cover=min_cover,
        max_density=float(density(gc, cats).max()),
        min_dont_care=float(dont_care_mass(gc, cats).min()),
        recursive_c=recursive_c,
        recursive_failing=recursive_failing,
        density_c=float(dr.max()),
        density_failing=int((dr > c).sum()),
    )
