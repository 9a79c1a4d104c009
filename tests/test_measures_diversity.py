"""anonymizer.measures.{qi_groups, diversity, closeness, categorical}: worked examples of Hsu 2008
(paper 000) and brute-force oracles (explicit loops, exhaustive set cover /
max coverage, the transportation LP). Their wording in the report is tested in
tests/test_report_wording.py."""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest
from hierarchy_oracle import ancestor_matrix
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from anonymizer.hierarchy import Hierarchy
from anonymizer.measures import categorical as cat
from anonymizer.measures import closeness as cl
from anonymizer.measures import diversity as dv
from anonymizer.measures import qi_groups as qg

EXACT = 1e-12  # absolute tolerance for floating figures that the paper gives as fractions


def _hier(rows: list[list[str]], name: str = "s") -> Hierarchy:
    return Hierarchy.from_rows(name, [(i + 1, r) for i, r in enumerate(rows)], f"<{name}>")


def _frac(x: Fraction) -> float:
    return float(x)


# --- Table 2.1-2: groups {1-4}, {5-8}, {9-12}; HD = 0, VI = 1, Cancer = 2 -----

T212_GROUP = [0] * 4 + [1] * 4 + [2] * 4
T212_VALUE = [0, 0, 1, 1, 2, 0, 1, 1, 2, 2, 2, 2]


def test_table_2_1_2_k_distinct_entropy_emd() -> None:
    gc = qg.group_counts(T212_GROUP, T212_VALUE, 3)
    assert dv.k_anonymity(gc) == 4  # "the table is 4-anonymous"
    assert dv.distinct_values(gc).tolist() == [2, 3, 1]  # [DERIVED] distinct-ℓ per block
    assert dv.entropy_bits(gc).tolist() == [1.0, 1.5, 0.0]  # [DERIVED] bits, exact in binary
    # D_T = {HD 1/4, VI 1/3, Cancer 5/12}
    assert qg.global_distribution(gc).tolist() == pytest.approx([1 / 4, 1 / 3, 5 / 12], abs=EXACT)
    # [DERIVED] EMD with 0/1 ground distance per block: 5/12, 1/6, 7/12
    want = [Fraction(5, 12), Fraction(1, 6), Fraction(7, 12)]
    assert cl.emd_equal(gc).tolist() == pytest.approx([_frac(w) for w in want], abs=EXACT)


def test_table_2_1_2_figures() -> None:
    gc = qg.group_counts(T212_GROUP, T212_VALUE, 3)
    f = dv.diversity_figures(gc)
    assert (f.n_groups, f.n_records, f.k) == (3, 12, 4)
    assert f.min_distinct == 1 and f.homogeneous_groups == 1
    assert f.entropy_ell == 1.0 and f.min_entropy_bits == 0.0  # 2^0: block 9-12 is homogeneous
    # D_T = {1/4, 1/3, 5/12}: H = −Σ p log2 p
    want_h = -sum(p * math.log2(p) for p in (1 / 4, 1 / 3, 5 / 12))
    assert f.release_entropy_bits == pytest.approx(want_h, abs=EXACT)
    assert f.recursive_c == math.inf and f.recursive_failing == 1  # (3, 2): only the homogeneous block fails
    assert f.recursive_max_ell == 1
    assert f.min_candidates is None
    cf = cl.closeness_figures(gc)
    assert cf.emd_equal == pytest.approx(7 / 12, abs=EXACT)
    assert cf.emd_hierarchical is None and cf.hierarchy_height is None


# --- Example 3.5.1 / Table 3.5-1 -----------------------------------------------------------------

# values: 0 acute leukemia, 1 bladder cancer, 2 flu, 3 pancreatic cancer, 4 cold
EX351_GROUP = [0] * 10 + [1] * 10 + [2] * 10
EX351_VALUE = [0] * 10 + [1] * 9 + [2] + [3] * 6 + [4] * 2 + [2] * 2


def test_example_3_5_1_anonymity_and_diversity() -> None:
    gc = qg.group_counts(EX351_GROUP, EX351_VALUE, 5)
    assert dv.k_anonymity(gc) == 10  # 10-anonymity: every block kept
    assert (dv.distinct_values(gc) >= 2).tolist() == [False, True, True]  # 2-diversity: only (i) lost


def test_example_3_5_1_recursive_boundary_errata_e5() -> None:
    gc = qg.group_counts(EX351_GROUP, EX351_VALUE, 5)
    # (1.5, 2)-recursive: (i) 10 vs 1.5·0, (ii) 9 vs 1.5·1, (iii) 6 vs 1.5·4 = 6
    assert dv.recursive_diverse(gc, 1.5, 2, strict=True).tolist() == [False, False, False]  # Def 3.3.3 "<"
    assert dv.recursive_diverse(gc, 1.5, 2, strict=False).tolist() == [False, False, True]  # Table 3.5-1 "Kept"
    assert dv.recursive_ratio(gc, 2).tolist() == [math.inf, 9.0, 1.5]
    assert dv.recursive_max_ell(gc, 1.5, strict=True).tolist() == [1, 1, 1]
    assert dv.recursive_max_ell(gc, 1.5, strict=False).tolist() == [1, 1, 2]
    f = dv.diversity_figures(gc, c=1.5, ell=2, strict=False)
    assert f.k == 10
    assert f.min_distinct == 1
    assert f.recursive_failing == 2 and f.recursive_c == math.inf
    assert f.recursive_max_ell == 1
    assert dv.diversity_figures(gc, c=1.5, ell=2).recursive_failing == 3


def test_recursive_base_case_errata_e6() -> None:
    # (c,1)-diversity is always satisfied, even for a homogeneous block and a tiny c
    gc = qg.group_counts([0, 0, 0], [1, 1, 1], 2)
    assert dv.recursive_diverse(gc, 0.01, 1).tolist() == [True]
    assert dv.recursive_ratio(gc, 1).tolist() == [0.0]


# --- §3.4 local-distribution examples ----------------------------------------------------------


def test_section_3_4_local_distributions() -> None:
    # group 0: age 70, one record with cancer; group 1: age 50, 2 cancer, 1 flu, 2 cold
    cancer, flu, cold = 0, 1, 2
    gc = qg.group_counts([0, 1, 1, 1, 1, 1], [cancer, cancer, cancer, flu, cold, cold], 3)
    local = {(int(g), int(v)): p for g, v, p in zip(gc.group, gc.value, qg.local_distribution(gc), strict=True)}
    assert local == {(0, cancer): 1.0, (1, cancer): 0.4, (1, flu): 0.2, (1, cold): 0.4}
    # [DERIVED] against D_T = {cancer 1/2, flu 1/6, cold 1/3}: EMD 1/2 and (1/5−1/6)+(2/5−1/3) = 1/10
    assert cl.emd_equal(gc).tolist() == pytest.approx([1 / 2, 1 / 10], abs=EXACT)


# --- Brute-force oracles -------------------------------------------------------------------------


@st.composite
def releases(draw: st.DrawFn, n_values: int | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    if n_values is None:
        n_values = draw(st.integers(1, 6))
    groups = draw(st.lists(st.lists(st.integers(0, n_values - 1), min_size=1, max_size=7), min_size=1, max_size=5))
    group = np.array([g for g, vals in enumerate(groups) for _ in vals], dtype=np.int64)
    value = np.array([v for vals in groups for v in vals], dtype=np.int64)
    perm = draw(st.permutations(range(group.size)))  # record order must not matter
    return group[list(perm)], value[list(perm)], n_values


def _blocks(group: np.ndarray, value: np.ndarray) -> list[Counter[int]]:
    out: list[Counter[int]] = [Counter() for _ in range(int(group.max()) + 1)]
    for g, v in zip(group.tolist(), value.tolist(), strict=True):
        out[g][v] += 1
    return out


@settings(max_examples=80, deadline=None)
@given(releases(), st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0]), st.integers(1, 4))
def test_l_diversity_family_matches_loops(rel: tuple[np.ndarray, np.ndarray, int], c: float, ell: int) -> None:
    group, value, n_values = rel
    gc = qg.group_counts(group, value, n_values)
    blocks = _blocks(group, value)
    assert dv.k_anonymity(gc) == min(sum(b.values()) for b in blocks)
    assert dv.distinct_values(gc).tolist() == [len(b) for b in blocks]
    ent = [-sum(n / sum(b.values()) * math.log2(n / sum(b.values())) for n in b.values()) for b in blocks]
    assert dv.entropy_bits(gc).tolist() == pytest.approx(ent, abs=1e-12)
    for strict in (True, False):
        want_ok, want_max = [], []
        for b in blocks:
            r = sorted(b.values(), reverse=True)

            def holds(lv: int, r: list[int] = r, strict: bool = strict) -> bool:
                if lv == 1:
                    return True  # Errata E6
                tail = sum(r[lv - 1 :])
                return r[0] < c * tail if strict else r[0] <= c * tail

            want_ok.append(holds(ell))
            want_max.append(max(lv for lv in range(1, len(r) + 2) if holds(lv)))
        assert dv.recursive_diverse(gc, c, ell, strict=strict).tolist() == want_ok
        assert dv.recursive_max_ell(gc, c, strict=strict).tolist() == want_max
    ratio = dv.recursive_ratio(gc, ell)
    for b, got in zip(blocks, ratio.tolist(), strict=True):
        r = sorted(b.values(), reverse=True)
        tail = sum(r[ell - 1 :])
        assert got == (0.0 if ell == 1 else (r[0] / tail if tail else math.inf))


def _emd_lp(p: np.ndarray, q: np.ndarray, dist: np.ndarray) -> float:
    """The transportation problem (Hsu Problem 2.4.3 with Errata E4's standard constraints)."""
    n = p.size
    a_eq = np.zeros((2 * n, n * n))
    for i in range(n):
        a_eq[i, i * n : (i + 1) * n] = 1.0  # Σ_j f_ij = p_i
        a_eq[n + i, i::n] = 1.0  # Σ_j f_ji = q_i
    res = linprog(dist.ravel(), A_eq=a_eq, b_eq=np.r_[p, q], bounds=(0, None), method="highs")
    assert res.status == 0
    return float(res.fun)


def _dense(group: np.ndarray, value: np.ndarray, n_values: int) -> tuple[np.ndarray, np.ndarray]:
    g = int(group.max()) + 1
    m = np.zeros((g, n_values))
    np.add.at(m, (group, value), 1.0)
    return m / m.sum(axis=1, keepdims=True), m.sum(axis=0) / m.sum()


@settings(max_examples=40, deadline=None)
@given(releases())
def test_emd_equal_matches_lp_and_total_variation(rel: tuple[np.ndarray, np.ndarray, int]) -> None:
    group, value, n_values = rel
    gc = qg.group_counts(group, value, n_values)
    local, glob = _dense(group, value, n_values)
    got = cl.emd_equal(gc)
    dist = 1.0 - np.eye(n_values)
    for g in range(local.shape[0]):
        assert got[g] == pytest.approx(0.5 * np.abs(local[g] - glob).sum(), abs=1e-12)
        assert got[g] == pytest.approx(_emd_lp(local[g], glob, dist), abs=1e-9)


@st.composite
def hierarchies(draw: st.DrawFn) -> Hierarchy:
    """Random valid hierarchies, 2-7 leaves, depth 2-4, with chains (a leaf label repeated upwards)."""
    n = draw(st.integers(2, 7))
    depth = draw(st.integers(2, 4))
    rows = []
    for i in range(n):
        path = "".join(str(draw(st.integers(0, 2))) for _ in range(depth - 2))
        chain = draw(st.integers(0, depth - 2))
        cells = [f"L{i}"]
        for h in range(1, depth - 1):
            cells.append(f"L{i}" if h <= chain else "n" + path[: depth - 1 - h])
        rows.append([*cells, "*"])
    return _hier(rows)


def _lca_distance(h: Hierarchy) -> np.ndarray:
    """Li et al.'s d(i,j) = height(LCA)/H from parent pointers, heights = lowest column of a node."""
    height = np.full(h.n_nodes, h.depth, dtype=np.int64)
    for col in range(h.depth):
        for node in h.leaf_nodes[col].tolist():
            height[node] = min(height[node], col)

    def ancestors(leaf: int) -> list[int]:
        out, node = [], leaf
        while node != -1:
            out.append(node)
            node = int(h.parent[node])
        return out

    n = h.n_leaves
    d = np.zeros((n, n))
    for i in range(n):
        ai = ancestors(i)
        for j in range(n):
            aj = set(ancestors(j))
            lca = next(a for a in ai if a in aj)
            d[i, j] = height[lca] / (h.depth - 1)
    return d


def _li_recursion(h: Hierarchy, p: np.ndarray, q: np.ndarray) -> float:
    """Li et al. ICDE 2007: Σ_{internal N} height(N)/H · min(pos_extra(N), neg_extra(N))."""
    height = np.full(h.n_nodes, h.depth, dtype=np.int64)
    for col in range(h.depth):
        for node in h.leaf_nodes[col].tolist():
            height[node] = min(height[node], col)
    extra = ancestor_matrix(h).T.astype(float) @ (p - q)  # P(N) − Q(N) for every node
    cost = 0.0
    for node in range(h.n_leaves, h.n_nodes):
        children = np.flatnonzero(h.parent == node)
        pos = extra[children][extra[children] > 0].sum()
        neg = -extra[children][extra[children] < 0].sum()
        cost += height[node] / (h.depth - 1) * min(pos, neg)
    return float(cost)


@settings(max_examples=40, deadline=None)
@given(hierarchies(), st.data())
def test_emd_hierarchical_matches_lp_and_li_recursion(h: Hierarchy, data: st.DataObject) -> None:
    group, value, _ = data.draw(releases(n_values=h.n_leaves))
    dist = _lca_distance(h)
    assert cl.hierarchical_distance(h) == pytest.approx(dist, abs=1e-15)
    gc = qg.group_counts(group, value, h.n_leaves)
    local, glob = _dense(group, value, h.n_leaves)
    got = cl.emd_hierarchical(gc, h)
    for g in range(local.shape[0]):
        assert got[g] == pytest.approx(_emd_lp(local[g], glob, dist), abs=1e-9)
        assert got[g] == pytest.approx(_li_recursion(h, local[g], glob), abs=1e-12)


def test_emd_hierarchical_flat_tree_is_equal_distance() -> None:
    gc = qg.group_counts(T212_GROUP, T212_VALUE, 3)
    flat = _hier([["HD", "*"], ["VI", "*"], ["C", "*"]])
    assert cl.emd_hierarchical(gc, flat).tolist() == pytest.approx(cl.emd_equal(gc).tolist(), abs=EXACT)


def test_emd_hierarchical_hand_example() -> None:
    # [DERIVED] Li et al.'s two-level disease tree: respiratory {flu, pneumonia}, digestive {ulcer, gastritis}
    h = _hier([["flu", "resp", "*"], ["pneu", "resp", "*"], ["ulcer", "dig", "*"], ["gastr", "dig", "*"]])
    # group 0 = {flu, pneumonia}, group 1 = {ulcer, gastritis}: D_T uniform (1/4 each)
    gc = qg.group_counts([0, 0, 1, 1], [0, 1, 2, 3], 4)
    # leaf level TV = 1/2, category level TV = 1/2, H = 2: EMD = (1/2 + 1/2)/2 = 1/2
    assert cl.emd_hierarchical(gc, h).tolist() == pytest.approx([0.5, 0.5], abs=EXACT)
    # group 0 = {flu, ulcer}: leaf TV 1/2, category TV 0: EMD = 1/4, below the equal-distance 1/2
    gc = qg.group_counts([0, 0, 1, 1], [0, 2, 1, 3], 4)
    assert cl.emd_hierarchical(gc, h).tolist() == pytest.approx([0.25, 0.25], abs=EXACT)
    assert cl.emd_equal(gc).tolist() == pytest.approx([0.5, 0.5], abs=EXACT)
    cf = cl.closeness_figures(gc, h)
    assert cf.emd_hierarchical == pytest.approx(0.25, abs=EXACT)
    assert cf.emd_equal == pytest.approx(0.5, abs=EXACT) and cf.hierarchy_height == 2


# --- Categorical controls (Hsu §3.5) ------------------------------------------------------------


def test_categories_hand_example() -> None:
    # 0 AIDS, 1 cancer, 2 TB, 3 cold; terminal = {AIDS, cancer}, infectious = {AIDS, TB}, Y = {cold}
    cats = [{0, 1}, {0, 2}]
    group = [0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2]
    value = [0, 3, 3, 3, 0, 1, 2, 1, 2, 3, 3]
    gc = qg.group_counts(group, value, 4)
    sc = cat.sensitive_categories(cats, {3}, 4)
    # group 0 {AIDS, cold}: 2 sets; group 1 {AIDS, cancer, TB}: terminal + infectious = 2; group 2: 3
    assert cat.categorical_diversity(gc, sc).tolist() == [2, 2, 3]
    assert cat.dont_care_mass(gc, sc).tolist() == pytest.approx([3 / 4, 0.0, 2 / 4], abs=EXACT)
    # densities: g0 max(Y 3/4, terminal 1/4, infectious 1/4); g1 terminal 2/3; g2 Y 2/4
    assert cat.density(gc, sc).tolist() == pytest.approx([3 / 4, 2 / 3, 2 / 4], abs=EXACT)
    # MC(1): g0 1/4, g1 2/3, g2 1/4; r = max category: same; ratio r/(1 − MC(1))
    assert cat.max_coverage(gc, sc, 1).tolist() == pytest.approx([1 / 4, 2 / 3, 1 / 4], abs=EXACT)
    assert cat.categorical_recursive_ratio(gc, sc, 1).tolist() == pytest.approx([1 / 3, 2.0, 1 / 3], abs=EXACT)
    # MC(2): g0 1/4, g1 1 (every record is in a category: no c suffices), g2 2/4 -> (1/4)/(2/4)
    assert cat.categorical_recursive_ratio(gc, sc, 2).tolist() == pytest.approx([1 / 3, math.inf, 1 / 2], abs=EXACT)
    # (c,2)-density control, E8 reading: categories met sorted desc, D_1 / Σ_{i≥2} D_i
    # g0: terminal 1, infectious 1 -> 1; g1: 2, 2 -> 1; g2: 1, 1 -> 1
    assert cat.density_recursive_ratio(gc, sc, 2).tolist() == pytest.approx([1.0, 1.0, 1.0], abs=EXACT)
    f = cat.categorical_figures(gc, sc, c=1.0, ell=1)
    assert f.min_cover == 2
    assert f.max_density == pytest.approx(3 / 4, abs=EXACT)
    assert f.min_dont_care == 0.0
    assert f.recursive_c == pytest.approx(2.0, abs=EXACT) and f.recursive_failing == 1  # group 1: 2 > c = 1
    # (c,1)-density control: D_1 / Σ_{i≥1} D_i; g0 1/2, g1 2/4, g2 1/2
    assert f.density_c == pytest.approx(0.5, abs=EXACT) and f.density_failing == 0


def test_density_control_errata_e8() -> None:
    # one block, categories with 6, 2, 2 records: literal Σ from i = 1 is satisfied for c = 1 whatever the skew
    cats = [{0}, {1}, {2}]
    gc = qg.group_counts([0] * 10, [0] * 6 + [1] * 2 + [2] * 2, 3)
    sc = cat.sensitive_categories(cats, None, 3)
    assert cat.density_recursive_ratio(gc, sc, 1).tolist() == pytest.approx([0.6], abs=EXACT)  # 6/10 ≤ 1: trivial
    assert cat.density_recursive_ratio(gc, sc, 2).tolist() == pytest.approx([1.5], abs=EXACT)  # 6/(2+2)
    assert cat.density_recursive_ratio(gc, sc, 4).tolist() == [math.inf]


@st.composite
def categorized(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, int, list[set[int]], set[int] | None]:
    group, value, n_values = draw(releases())
    n_cat = draw(st.integers(1, 4))
    cats = [set(draw(st.sets(st.integers(0, n_values - 1), min_size=1, max_size=n_values))) for _ in range(n_cat)]
    rest = set(range(n_values)) - set().union(*cats)
    dont_care = draw(st.sampled_from([None, rest]))
    return group, value, n_values, cats, dont_care


@settings(max_examples=80, deadline=None)
@given(categorized(), st.integers(1, 4))
def test_categorical_measures_match_brute_force(
    rel: tuple[np.ndarray, np.ndarray, int, list[set[int]], set[int] | None], ell: int
) -> None:
    group, value, n_values, cats, dont_care = rel
    gc = qg.group_counts(group, value, n_values)
    sc = cat.sensitive_categories(cats, dont_care, n_values)
    y = set(range(n_values)) - set().union(*cats)
    sets = [*cats, y] if y else list(cats)
    blocks = _blocks(group, value)
    cover, dens, dil, mc, crr, drr = [], [], [], [], [], []
    for b in blocks:
        size = sum(b.values())
        present = set(b)
        cover.append(
            min(k for k in range(1, len(sets) + 1) for t in combinations(sets, k) if present <= set().union(*t))
        )

        def mass(s: set[int], b: Counter[int] = b) -> int:
            return sum(n for v, n in b.items() if v in s)

        dens.append(Fraction(max(mass(s) for s in [*cats, y]), size))
        dil.append(Fraction(mass(y), size))
        best = max(mass(set().union(*t)) for t in combinations(cats, min(ell, len(cats))))
        mc.append(Fraction(best, size))
        r = max(mass(s) for s in cats)
        crr.append(0.0 if r == 0 else (r / (size - best) if size > best else math.inf))
        met = sorted((mass(s) for s in cats if mass(s) > 0), reverse=True)
        tail = sum(met[ell - 1 :])
        drr.append(0.0 if not met else (met[0] / tail if tail else math.inf))
    assert cat.categorical_diversity(gc, sc).tolist() == cover
    assert cat.density(gc, sc).tolist() == pytest.approx([float(x) for x in dens], abs=EXACT)
    assert cat.dont_care_mass(gc, sc).tolist() == pytest.approx([float(x) for x in dil], abs=EXACT)
    assert cat.max_coverage(gc, sc, ell).tolist() == pytest.approx([float(x) for x in mc], abs=EXACT)
    assert cat.categorical_recursive_ratio(gc, sc, ell).tolist() == pytest.approx(crr, abs=EXACT)
    assert cat.density_recursive_ratio(gc, sc, ell).tolist() == pytest.approx(drr, abs=EXACT)


def test_exact_categorical_measures_have_a_size_limit() -> None:
    n = cat.MAX_EXACT_CATEGORIES + 1
    cats = [{i} for i in range(n)]
    group, value = [0] * n, list(range(n))
    gc = qg.group_counts(group, value, n)
    sc = cat.sensitive_categories(cats, None, n)
    with pytest.raises(cat.SizeLimitExceeded, match=f"limit of {cat.MAX_EXACT_CATEGORIES}"):
        cat.categorical_diversity(gc, sc)
    with pytest.raises(cat.SizeLimitExceeded, match=f"limit of {cat.MAX_EXACT_CATEGORIES}"):
        cat.max_coverage(gc, sc, 2)
    f = cat.categorical_figures(gc, sc, c=3.0, ell=2)
    assert isinstance(f.min_cover, cat.SizeLimitExceeded)
    assert str(cat.MAX_EXACT_CATEGORIES) in str(f.min_cover)
    assert isinstance(f.recursive_c, cat.SizeLimitExceeded) and f.recursive_failing is None
    # the scalable density controls are still computed
    assert f.max_density == pytest.approx(1 / n, abs=EXACT)
    assert f.density_c == pytest.approx(1 / (n - 1), abs=EXACT)


# --- Errors and scale ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("group", "value", "n_values", "match"),
    [
        ([0, 1], [0], 2, "equal shape"),
        ([], [], 2, "no records"),
        ([0, 2], [0, 1], 2, "no records"),
        ([0, -1], [0, 1], 2, "non-negative"),
        ([0, 0], [0, 2], 2, r"0\.\.1"),
        ([0.5, 0], [0, 1], 2, "integer codes"),
        ([0, 0], [0, 1], 0, "positive integer"),
    ],
)
def test_bad_records(group: list, value: list, n_values: int, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        qg.group_counts(group, value, n_values)


def test_bad_parameters() -> None:
    gc = qg.group_counts(T212_GROUP, T212_VALUE, 3)
    with pytest.raises(ValueError, match="c must be"):
        dv.recursive_diverse(gc, 0.0, 2)
    with pytest.raises(ValueError, match="ℓ must be"):
        dv.recursive_ratio(gc, 0)
    with pytest.raises(ValueError, match="3 value codes"):
        cl.emd_hierarchical(gc, _hier([["a", "*"], ["b", "*"]]))
    with pytest.raises(ValueError, match="disjoint"):
        cat.sensitive_categories([{0, 1}], {1, 2}, 3)
    with pytest.raises(ValueError, match="no category and not in the don't-care"):
        cat.sensitive_categories([{0}], {1}, 3)
    with pytest.raises(ValueError, match="empty"):
        cat.sensitive_categories([set()], None, 3)
    with pytest.raises(ValueError, match="outside"):
        cat.sensitive_categories([{5}], None, 3)
    with pytest.raises(ValueError, match="candidates must have shape"):
        dv.diversity_figures(gc, candidates=[4, 4])
    with pytest.raises(ValueError, match="≥ the group size"):
        dv.diversity_figures(gc, candidates=[4, 3, 9])
    with pytest.raises(ValueError, match="c must be"):
        dv.diversity_figures(gc, c=-1.0)
    with pytest.raises(ValueError, match="ℓ must be"):
        cat.categorical_figures(gc, cat.sensitive_categories([{0}], None, 3), c=1.0, ell=0)
    assert dv.diversity_figures(gc, candidates=[6, 4, 9]).min_candidates == 4
