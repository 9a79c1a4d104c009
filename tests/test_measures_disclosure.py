"""Malik 2014 (paper 002) disclosure measures: the thesis's worked examples (with
its corrections) and brute force against the definitions."""

from __future__ import annotations

import itertools
import math
import time
from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonymizer.measures import disclosure as D
from anonymizer.measures import permanent as P
from anonymizer.measures import reidentification as R

# rows Flu, Viral Fever, Cold, Asthma, Tuberculosis; columns u v x y z (displayed labels)
M0 = [2, 3, 4, 0, 1]  # Flu→x, VF→y, Cold→z, Asthma→u, TB→v (§2.4)


def fr(rows: list[list[object]]) -> np.ndarray:
    return np.array([[F(x) for x in r] for r in rows], dtype=object)


# A.4.1: A_G (Fig 2.2(c)) is not in the text. This reconstruction satisfies everything the text
# states: it contains M_0, the Flu row is {x, y, z}, permanent 18, and the crack histogram of the
# 18 listed matchings (one of 26 such matrices, found by search).
A41 = np.array(
    [
        [0, 0, 1, 1, 1],
        [1, 1, 1, 1, 1],
        [0, 1, 1, 0, 1],
        [1, 1, 0, 1, 1],
        [1, 1, 0, 0, 0],
    ]
)
A24B = np.array([[0, 0, 1, 1, 1], [0, 1, 0, 1, 1], [0, 1, 0, 0, 1], [1, 0, 1, 0, 0], [1, 1, 0, 0, 0]])
A24C = np.array([[1, 1, 1, 1, 0], [1, 0, 0, 1, 0], [1, 0, 0, 0, 1], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
A34 = np.array([[0, 0, 1, 1, 1], [0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [1, 1, 1, 1, 1], [1, 1, 1, 1, 1]])
T, N, N9 = F(1, 3), F(0), F(1, 9)
FLAT = np.array([[N, N, T, T, T], [N, N, T, T, T], [T, T, N9, N9, N9], [T, T, N9, N9, N9], [T, T, N9, N9, N9]])
# Fig 3.4(b) with the erratum Q[TB][y] = 1/50 (printed 1/20, which breaks double stochasticity)
Q_ROWS = [
    ["0", "0", "57/100", "2/5", "3/100"],
    ["0", "0", "3/10", "23/100", "47/100"],
    ["17/50", "29/100", "3/100", "3/10", "1/25"],
    ["29/100", "13/25", "2/25", "1/20", "3/50"],
    ["37/100", "19/100", "1/50", "1/50", "2/5"],
]
Q = fr(Q_ROWS)
Q_PRINTED = Q.copy()
Q_PRINTED[4, 3] = F(1, 20)
# the M_0 of Ψ(Q) after the erratum's column relabeling (u→x, v→y, x→z, y→u, z→v)
MU_STAR = [4, 0, 1, 2, 3]


def brute_permanent(a: np.ndarray) -> object:
    n = a.shape[0]
    return sum(math.prod(a[i, p[i]] for i in range(n)) for p in itertools.permutations(range(n)))


def brute_psi(a: np.ndarray, m0: list[int]) -> F:
    """eq 4.2 by enumerating every diagonal."""
    n = a.shape[0]
    num, den = F(0), F(0)
    for p in itertools.permutations(range(n)):
        w = F(math.prod(a[i, p[i]] for i in range(n)))
        den += w
        num += w * sum(p[i] == m0[i] for i in range(n))
    return num / den


# --------------------------------------------------------------------------- worked examples


def test_a41_permanent_d_epsilon_and_histogram() -> None:
    assert P.permanent(A41) == 18  # out of 5! = 120
    assert D.degree_of_anonymity(A41) == pytest.approx(math.log(18) / math.log(120), rel=1e-12)
    assert round(D.degree_of_anonymity(A41), 4) == 0.6037
    eps = D.expected_cracks(A41, M0)
    # erratum: the source prints 1.56; the crack list sums to 28 over 18 matchings
    listed = [5, 3, 1, 2, 0, 2, 0, 0, 2, 0, 1, 1, 3, 3, 0, 1, 1, 3]
    assert eps == F(sum(listed), len(listed)) == F(28, 18)
    assert round(float(eps), 2) == 1.56
    hist = D.crack_histogram(A41, M0)
    assert hist.tolist() == [5, 5, 3, 4, 0, 1]  # cracks 0..5; c = n − 1 = 4 is impossible
    assert hist.tolist() == np.bincount(listed, minlength=6).tolist()


def test_a42_d_and_epsilon_disagree() -> None:
    assert P.permanent(A24B) == 4 and D.expected_cracks(A24B, M0) == F(7, 4)
    assert P.permanent(A24C) == 7 and D.expected_cracks(A24C, M0) == 3
    # d ranks (c) safer (higher), ε ranks (b) safer (lower)
    assert D.degree_of_anonymity(A24C) > D.degree_of_anonymity(A24B)
    assert D.expected_cracks(A24B, M0) < D.expected_cracks(A24C, M0)
    # eq 2.3's partition form agrees with the average form eq 4.1
    for a in (A24B, A24C, A41):
        h = D.crack_histogram(a, M0)
        assert h.sum() == P.permanent(a)
        assert F(int(np.dot(np.arange(6), h)), int(h.sum())) == D.expected_cracks(a, M0)


def test_a43_dataflow_matrix() -> None:  # [DERIVED] values of the notes
    s, n, t, nn, n9 = F(1, 6), F(0), F(1, 3), F(2, 9), F(1, 9)
    top, bottom = [n, s, s, t, t], [t, nn, nn, n9, n9]
    p = np.array([top, top, bottom, bottom, bottom], dtype=object)
    assert P.permanent(p) == F(11, 243)
    assert D.psi(p, M0) == F(7, 6) == D.heuristic(p, M0)


def test_a44_flat_matrix() -> None:
    assert P.permanent(FLAT) == F(4, 81)
    perms, w = D.diagonal_weights(FLAT)
    assert sum(w == 0) == 84 and sum(w == F(1, 36)) == 36
    index = {tuple(p): i for i, p in enumerate(perms.tolist())}
    assert w[index[(2, 4, 0, 3, 1)]] == F(1, 36)  # M_2 = Flu→x, VF→z, Cold→u, Asthma→y, TB→v
    # M_1 (not a bijection as printed) uses the Flu–u cell, so any diagonal through it weighs 0
    assert all(w[i] == 0 for i, p in enumerate(perms.tolist()) if p[0] == 0)


def test_a45_truly_uneven_q_with_errata() -> None:
    with pytest.raises(ValueError, match="doubly stochastic"):
        D.heuristic(Q_PRINTED, M0)  # as printed, TB row and y column sum to 1.03
    assert P.permanent(Q) == F(4750747, 78125000)  # source's 326/5361 is an approximation
    assert float(P.permanent(Q)) == pytest.approx(326 / 5361, abs=2e-8)
    perms, w = D.diagonal_weights(Q)
    nz = w[w > 0]
    assert len(nz) == 36 and sum(w) == 1  # erratum: "72 feasible matchings" should be 36
    assert float(min(nz)) == pytest.approx(0.00018756, abs=5e-9)
    assert float(max(nz)) == pytest.approx(0.25428876, abs=5e-9)
    index = {tuple(p): i for i, p in enumerate(perms.tolist())}
    # M_3, M_4, M_5 in displayed columns after the relabeling u→x, v→y, x→z, y→u, z→v
    m3, m4, m5 = (2, 4, 3, 1, 0), (3, 2, 1, 0, 4), (4, 3, 2, 0, 1)
    total = P.permanent(Q)
    assert w[index[m3]] == F(3865797, 250000000) / total and w[index[m3]] == max(nz)
    assert w[index[m4]] == F(2523, 625000) / total
    assert w[index[m5]] == F(114057, 10**10) / total and w[index[m5]] == min(nz)
    assert float(w[index[m3]]) == pytest.approx(252 / 991, abs=1e-6)
    assert float(w[index[m4]]) == pytest.approx(815 / 12277, abs=1e-6)
    assert float(w[index[m5]]) == pytest.approx(79 / 421189, abs=1e-8)


def test_a46_flat_f_for_sparse_graph() -> None:
    a = np.array([[1, 0, 1, 1, 0], [0, 1, 0, 1, 0], [0, 0, 1, 0, 1], [0, 1, 0, 1, 0], [1, 0, 1, 0, 1]])
    r5 = math.sqrt(5)
    g, h = (r5 - 1) / 2, (3 - r5) / 2
    f = np.array([[g, 0, h, 0, 0], [0, 0.5, 0, 0.5, 0], [0, 0, h, 0, g], [0, 0.5, 0, 0.5, 0], [h, 0, r5 - 2, 0, h]])
    assert P.permanent(a) == 6
    assert P.permanent(f) == pytest.approx(3 * (5 * r5 - 11) / 4, rel=1e-12)
    _, w = D.diagonal_weights(f)
    assert np.count_nonzero(w > 1e-15) == 6 and np.allclose(w[w > 1e-15], 1 / 6, rtol=1e-12)  # flat
    # Theorem 4.1.1 on it: ε(G) = Ψ(A_G) = Ψ(F) for any M_0 ∈ 𝓜(G)
    m0 = [0, 1, 2, 3, 4]
    assert D.psi(f, m0) == pytest.approx(float(D.expected_cracks(a, m0)), rel=1e-12)
    assert D.heuristic(f, m0) == pytest.approx(g + 0.5 + h + 0.5 + h, rel=1e-12)


def test_a47_theorem_411_and_psi_q() -> None:
    assert D.expected_cracks(A34, M0) == F(13, 9) == D.psi(A34, M0) == D.psi(FLAT, M0)
    # Ψ(Q) < Ψ(A) only with the relabeled M_0 (erratum 14); 1369/4355 approximates the exact value
    psi_q = D.psi(Q, MU_STAR)
    assert float(psi_q) == pytest.approx(0.31435130, abs=5e-9)
    assert float(psi_q) == pytest.approx(1369 / 4355, abs=1e-7)
    assert D.heuristic(Q, MU_STAR) == F(21, 50)
    assert float(D.psi(Q, M0)) == pytest.approx(1.34756, abs=5e-6) and D.heuristic(Q, M0) == F(132, 100)
    assert psi_q < D.psi(A34, M0)


def test_a48_heuristic_vs_metric_over_all_m0() -> None:
    perms, ps, hs = D.psi_heuristic_curves(Q)
    assert len(perms) == 120
    assert ps.sum() == pytest.approx(120, rel=1e-12) and hs.sum() == pytest.approx(120, rel=1e-12)  # Thm 4.4.2
    assert ps.min() == pytest.approx(0.0901, abs=5e-5) and ps.max() == pytest.approx(2.4884, abs=5e-5)
    assert hs.min() == pytest.approx(0.11, abs=1e-12) and hs.max() == pytest.approx(2.23, abs=1e-12)
    assert np.abs(hs - ps).max() == pytest.approx(0.2983, abs=5e-5)
    assert D.nmape(Q) == pytest.approx(1.6173, abs=5e-5)
    # §4.4: NMAPE = 0 at permanent n!/n^n (uniform) and 1 (permutation matrix)
    assert D.nmape(np.full((5, 5), 0.2)) == pytest.approx(0.0, abs=1e-12)
    assert D.nmape(np.eye(5)[[3, 1, 4, 0, 2]]) == pytest.approx(0.0, abs=1e-12)
    # with the printed (not doubly stochastic) Q, Σ𝓗 would be 3018/25, so it is refused
    with pytest.raises(ValueError):
        D.nmape(Q_PRINTED)


def test_a6_block_decomposition() -> None:
    """docs/reports.md D3: a 2 + 3 block-diagonal K graph gives permanent 2!·3!, d = Σ log s!/log n!, ε = #classes;
    for probabilistic blocks Ψ adds up (block_psi)."""
    a = np.zeros((5, 5), dtype=int)
    a[:2, :2] = 1
    a[2:, 2:] = 1
    m0 = [1, 0, 2, 4, 3]
    assert P.permanent(a) == 2 * 6
    assert D.degree_of_anonymity(a) == pytest.approx((math.log(2) + math.log(6)) / math.log(120), rel=1e-12)
    assert D.expected_cracks(a, m0) == 2
    b1 = fr([["1/4", "3/4"], ["3/4", "1/4"]])
    b2 = fr([["1/2", "1/3", "1/6"], ["1/6", "1/2", "1/3"], ["1/3", "1/6", "1/2"]])
    full = np.zeros((5, 5), dtype=object)
    full[:, :] = F(0)
    full[:2, :2] = b1
    full[2:, 2:] = b2
    got = D.block_psi([b1, b2], [[0, 1], [0, 1, 2]])
    assert got == D.psi(full, [0, 1, 2, 3, 4]) == brute_psi(full, [0, 1, 2, 3, 4])
    assert got == D.psi(b1, [0, 1]) + D.psi(b2, [0, 1, 2])


# --------------------------------------------------------------------------- brute force

small_matrix = st.integers(1, 6).flatmap(
    lambda n: st.lists(
        st.lists(st.fractions(min_value=0, max_value=3, max_denominator=7), min_size=n, max_size=n),
        min_size=n,
        max_size=n,
    )
)


@settings(max_examples=60, deadline=None)
@given(small_matrix)
def test_permanent_matches_enumeration(rows: list[list[F]]) -> None:
    a = np.array(rows, dtype=object)
    assert P.permanent(a) == brute_permanent(a)
    # the float path agrees too
    assert P.permanent(a.astype(float)) == pytest.approx(float(brute_permanent(a)), rel=1e-9, abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 7).flatmap(
        lambda n: st.lists(st.lists(st.booleans(), min_size=n, max_size=n), min_size=n, max_size=n)
    )
)
def test_permanent_01_counts_matchings(rows: list[list[bool]]) -> None:
    a = np.array(rows, dtype=bool)
    n = a.shape[0]
    count = sum(all(a[i, p[i]] for i in range(n)) for p in itertools.permutations(range(n)))
    assert P.permanent(a) == count


@settings(max_examples=40, deadline=None)
@given(small_matrix, st.randoms(use_true_random=False))
def test_psi_matches_definition(rows: list[list[F]], rnd: object) -> None:
    a = np.array(rows, dtype=object)
    n = a.shape[0]
    m0 = list(range(n))
    rnd.shuffle(m0)
    if brute_permanent(a) == 0:
        with pytest.raises(ValueError, match="permanent"):
            D.psi(a, m0)
        return
    assert D.psi(a, m0) == brute_psi(a, m0)
    q = D.match_marginals(a)
    assert all(sum(q[i, :]) == 1 for i in range(n)) and all(sum(q[:, j]) == 1 for j in range(n))


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 5), st.integers(0, 2**32 - 1))
def test_heuristic_is_expectation_over_all_functions(n: int, seed: int) -> None:
    """Theorem 4.3.1: 𝓗 = Σ over the n^n slices of w(s)·C(f(s)); P doubly stochastic as a random
    convex combination of permutation matrices (Birkhoff)."""
    rng = np.random.default_rng(seed)
    lam = rng.dirichlet(np.full(4, 0.5))
    p = sum(w * np.eye(n)[rng.permutation(n)] for w in lam)
    m0 = rng.permutation(n)
    slices = sum(
        math.prod(p[i, f[i]] for i in range(n)) * sum(f[i] == m0[i] for i in range(n))
        for f in itertools.product(range(n), repeat=n)
    )
    assert D.heuristic(p, m0) == pytest.approx(slices, rel=1e-9)
    # Theorem 4.4.2: equal areas under the Ψ_μ and 𝓗_μ curves
    _, ps, hs = D.psi_heuristic_curves(p)
    assert ps.sum() == pytest.approx(math.factorial(n), rel=1e-9) == hs.sum()


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 6).flatmap(
        lambda n: st.tuples(
            st.lists(st.lists(st.booleans(), min_size=n, max_size=n), min_size=n, max_size=n),
            st.permutations(list(range(n))),
        )
    )
)
def test_epsilon_and_histogram_match_enumeration(case: tuple[list[list[bool]], list[int]]) -> None:
    rows, m0 = case
    a = np.array(rows, dtype=int)
    n = a.shape[0]
    a[np.arange(n), m0] = 1  # the attack graph contains M_0
    cracks = [
        sum(p[i] == m0[i] for i in range(n))
        for p in itertools.permutations(range(n))
        if all(a[i, p[i]] for i in range(n))
    ]
    assert D.expected_cracks(a, m0) == F(sum(cracks), len(cracks))
    assert D.crack_histogram(a, m0).tolist() == np.bincount(cracks, minlength=n + 1).tolist()


def test_float_ryser_against_exact_at_n12() -> None:
    rng = np.random.default_rng(7)
    x = rng.random((12, 12))
    exact = P.permanent(np.array([[F(v) for v in r] for r in x], dtype=object))
    assert P.permanent(x) == pytest.approx(float(exact), rel=1e-12)


# --------------------------------------------------------------------------- release


def brute_release(group: np.ndarray, value: np.ndarray, cand: np.ndarray) -> tuple[F, F, F]:
    """Ψ, value cracks and the matching count by enumerating every injection of each group's
    records into its candidates (candidate c < r_j is the true individual of record c)."""
    psi_t, val_t, count = F(0), F(0), 1
    for j in range(cand.size):
        vals = value[group == j].tolist()
        r = len(vals)
        inj = list(itertools.permutations(range(int(cand[j])), r))  # record t → candidate inj[t]
        count *= len(inj)
        if r == 0:
            continue
        psi_t += F(sum(sum(f[t] == t for t in range(r)) for f in inj), len(inj))
        # individual c < r (true value vals[c]) is matched to record t when f[t] == c
        val_t += F(sum(sum(f[t] < r and vals[f[t]] == vals[t] for t in range(r)) for f in inj), len(inj))
    return psi_t, val_t, F(count)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 4).flatmap(
        lambda g: st.tuples(
            st.lists(st.tuples(st.integers(0, g - 1), st.integers(0, 2)), min_size=1, max_size=6),
            st.lists(st.integers(0, 2), min_size=g, max_size=g),
        )
    )
)
def test_release_matches_enumeration(case: tuple[list[tuple[int, int]], list[int]]) -> None:
    recs, extra = case
    group = np.array([r[0] for r in recs], dtype=np.int64)
    value = np.array([r[1] for r in recs], dtype=np.int64)
    cand = np.bincount(group, minlength=len(extra)) + np.array(extra)
    cand = np.maximum(cand, 1)
    rd = R.release_disclosure(group, value, cand)
    psi_t, val_t, count = brute_release(group, value, cand)
    assert rd.psi.sum() == pytest.approx(float(psi_t), rel=1e-12)
    assert rd.value_cracks.sum() == pytest.approx(float(val_t), rel=1e-12)
    assert rd.log_matchings == pytest.approx(math.log(count), abs=1e-9)
    assert rd.expected_reidentifications == pytest.approx(float(psi_t), rel=1e-12)
    assert rd.expected_value_cracks == pytest.approx(float(val_t), rel=1e-12)


def test_release_without_dilution_equals_malik_block_matrix() -> None:
    group = np.array([0, 0, 1, 1, 1, 2, 2])
    value = np.array([3, 3, 0, 1, 1, 5, 2])
    rd = R.release_disclosure(group, value)
    a = np.zeros((7, 7), dtype=int)
    for j in range(3):
        idx = np.flatnonzero(group == j)
        a[np.ix_(idx, idx)] = 1
    assert rd.psi.sum() == pytest.approx(float(D.expected_cracks(a, list(range(7)))), rel=1e-12) == 3.0
    assert rd.degree_of_anonymity == pytest.approx(D.degree_of_anonymity(a), rel=1e-12)
    assert rd.value_cracks.tolist() == pytest.approx([2.0, (1 + 4) / 3, 1.0], rel=1e-12)
    assert rd.published == 7 and rd.groups_with_records == 3
    assert rd.expected_reidentifications == pytest.approx(3.0)
    assert rd.reidentification_rate == pytest.approx(3 / 7)
    assert rd.max_reidentification_probability == pytest.approx(1 / 2)
    assert rd.expected_value_cracks == pytest.approx(2.0 + 5 / 3 + 1.0)
    assert rd.value_crack_rate == pytest.approx((2.0 + 5 / 3 + 1.0) / 7)


def test_full_release_is_fast() -> None:
    rng = np.random.default_rng(3)
    groups, r = 50_000, 1_000_000
    group = rng.integers(0, groups, r)
    value = rng.integers(0, 2000, r)
    cand = np.bincount(group, minlength=groups) + rng.integers(0, 4, groups)
    t0 = time.perf_counter()
    rd = R.release_disclosure(group, value, cand)
    figures = [
        rd.expected_reidentifications,
        rd.reidentification_rate,
        rd.max_reidentification_probability,
        rd.degree_of_anonymity,
        rd.expected_value_cracks,
        rd.value_crack_rate,
    ]
    assert time.perf_counter() - t0 < 5
    assert rd.expected_reidentifications == pytest.approx(float((np.bincount(group) / cand).sum()), rel=1e-12)
    assert rd.max_reidentification_probability == pytest.approx(
        1 / cand[np.bincount(group, minlength=groups) > 0].min()
    )
    assert all(math.isfinite(v) and 0 <= v for v in figures)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="square"):
        P.permanent(np.ones((2, 3)))
    with pytest.raises(ValueError, match="negative"):
        P.permanent(np.array([[1.0, -1.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="n ≤ 20"):
        P.permanent(np.ones((21, 21)))
    with pytest.raises(ValueError, match="n ≤ 14"):
        P.permanent(np.ones((15, 15), dtype=int))
    with pytest.raises(ValueError, match="permutation"):
        D.psi(A34, [0, 0, 1, 2, 3])
    with pytest.raises(ValueError, match="not contained"):
        D.expected_cracks(A34, [0, 1, 2, 3, 4])
    with pytest.raises(ValueError, match="n ≤ 8"):
        D.nmape(np.full((9, 9), 1 / 9))
    with pytest.raises(ValueError, match="candidates must be ≥ records"):
        R.release_disclosure(np.array([0, 0, 1]), np.array([0, 1, 0]), np.array([1, 1]))
    with pytest.raises(ValueError, match="no records"):
        R.release_disclosure(np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    with pytest.raises(ValueError, match="equal shape"):
        R.release_disclosure(np.array([0, 1]), np.array([0]))
