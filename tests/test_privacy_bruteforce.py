"""anonymizer.privacy against a brute-force possible-world enumerator (the oracle).

Model (docs/design.md section 1; paper 004, Definitions 1-2): in release j the target's group has
``n_j`` candidates (register individuals, the target among them) and ``m_j <= n_j``
published records with a multiset of sensitive values. A possible world of release j
assigns the m_j records to m_j distinct candidates (an injective map; leftover candidates
are absent). Worlds of different releases combine freely (product). p(o, S) is the
fraction of combined worlds in which o receives, in at least one release, a record whose
value lies in the protected set S.

The enumerator below counts worlds one by one with ``itertools.permutations`` and
``itertools.product``; it never uses the closed form of Lemma 4.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonymizer import privacy

Release = tuple[int, tuple[str, ...]]  # (candidates n_j, published values of the group)


def enumerate_worlds(releases: list[Release], protected: frozenset[str], target: int = 0) -> tuple[int, int]:
    """(worlds linking candidate ``target`` to a value of ``protected``, all worlds)."""
    per_release: list[list[bool]] = []
    for n, values in releases:
        assert 1 <= len(values) <= n
        per_release.append(
            [
                any(owner == target and value in protected for owner, value in zip(assignment, values, strict=True))
                for assignment in itertools.permutations(range(n), len(values))
            ]
        )
    linked = total = 0
    for world in itertools.product(*per_release):
        total += 1
        if any(world):
            linked += 1
    return linked, total


def brute_force_breach(releases: list[Release], protected: frozenset[str]) -> Fraction:
    linked, total = enumerate_worlds(releases, protected)
    return Fraction(linked, total)


# ---------------------------------------------------------------------------------------
# the enumerator reproduces the papers' hand counts


def test_enumerator_figure_3_four_worlds_three_link_o2() -> None:
    # G1 and G2 of Figure 2: candidates o1 (index 1), o2 (index 0)
    releases = [(2, ("flu", "chlamydia")), (2, ("chlamydia", "flu"))]
    linked, total = enumerate_worlds(releases, frozenset({"chlamydia"}))
    assert (linked, total) == (3, 4)
    # Figure 4: 4! x 4! worlds, 7/16 of them link o2
    releases4 = [(4, ("flu", "chlamydia", "flu", "fever")), (4, ("chlamydia", "flu", "fever", "flu"))]
    linked, total = enumerate_worlds(releases4, frozenset({"chlamydia"}))
    assert total == math.factorial(4) ** 2
    assert Fraction(linked, total) == Fraction(7, 16)
    assert privacy.exact_breach([(4, 1), (4, 1)]) == Fraction(linked, total)


def test_enumerator_xiao_tao_example_1_ken() -> None:
    # paper 001, Example 1: S_ext(Ken) = 5 people (Mike absent from T), 4 records, 2 of them in
    # Ken's guarding set. Owners: Permu(5, 4) = 120, breaching 48; the two generalized
    # values have 3 leaves each, so 9 value choices: 1080 and 432.
    records = ("gastric ulcer", "dyspepsia", "respiratory infection", "respiratory infection")
    guarding = frozenset({"respiratory infection", "flu", "pneumonia", "bronchitis"})
    linked, total = enumerate_worlds([(5, records)], guarding, target=2)
    assert (linked * 9, total * 9) == (432, 1080)
    assert Fraction(linked, total) == Fraction(2, 5)
    assert privacy.breach_probabilities([0], [5], [2], 1)[0] == pytest.approx(2 / 5, abs=1e-15)


# ---------------------------------------------------------------------------------------
# closed form == enumeration on random small series

VALUES = ("s", "t", "u")
PROTECTED_SETS = (frozenset({"s"}), frozenset({"t"}), frozenset({"s", "t"}))
# ℓ values whose float is exact, so "1/ℓ" is unambiguous (ℓ is read as its float's rational)
ELLS = (2, 3, 4, 5, 1.5, 2.5, 1.25, 4.5)


@st.composite
def release_series(draw: st.DrawFn) -> list[Release]:
    k = draw(st.integers(1, 3))
    max_n = 5 if k <= 2 else 4  # at most 120^2 or 24^3 combined worlds
    out: list[Release] = []
    for _ in range(k):
        n = draw(st.integers(1, max_n))
        m = draw(st.integers(1, n))
        values = draw(st.lists(st.sampled_from(VALUES), min_size=m, max_size=m))
        out.append((n, tuple(values)))
    return out


@settings(max_examples=200, deadline=None)
@given(series=release_series(), ell=st.sampled_from(ELLS))
def test_closed_form_equals_enumeration(series: list[Release], ell: float) -> None:
    expected = [brute_force_breach(series, s) for s in PROTECTED_SETS]

    # long-format history: one pair per protected set, one row per release (n_s = 0 rows
    # included); n_{j,S} counted from the published values with value_set_counts
    code = {v: i for i, v in enumerate(VALUES)}
    membership = np.array([[v in s for s in PROTECTED_SETS] for v in VALUES])
    idx, n, n_s = [], [], []
    for n_j, values in series:
        counts = privacy.value_set_counts([0] * len(values), [code[v] for v in values], membership, 1)[0]
        for pair, c in enumerate(counts):
            idx.append(pair)
            n.append(n_j)
            n_s.append(int(c))
    order = np.random.default_rng(len(idx)).permutation(len(idx))  # pair rows need not be sorted
    idx_a, n_a, ns_a = np.array(idx)[order], np.array(n)[order], np.array(n_s)[order]

    p = privacy.breach_probabilities(idx_a, n_a, ns_a, len(PROTECTED_SETS))
    verdict = privacy.exceeds_threshold(idx_a, n_a, ns_a, len(PROTECTED_SETS), ell)
    bound = 1 / Fraction(ell)
    for pair, exp in enumerate(expected):
        figures = [(n[r], n_s[r]) for r in range(len(idx)) if idx[r] == pair]
        assert privacy.exact_breach(figures) == exp
        # Lemma 5: the rows with n_s = 0 may be left out
        assert privacy.exact_breach([f for f in figures if f[1] > 0]) == exp
        assert abs(p[pair] - float(exp)) <= 1e-12
        assert bool(verdict[pair]) == (exp > bound), (series, pair, exp, ell)


@settings(max_examples=50, deadline=None)
@given(series=release_series())
def test_enumeration_does_not_depend_on_which_candidate_is_the_target(series: list[Release]) -> None:
    # candidates are exchangeable: the oracle must give the same answer for every target
    # that is a candidate in every release (sanity check of the oracle itself)
    protected = frozenset({"s"})
    common = min(n for n, _ in series)
    results = {Fraction(*enumerate_worlds(series, protected, target=t)) for t in range(common)}
    assert len(results) == 1


# ---------------------------------------------------------------------------------------
# vectorized functions == scalar evaluation, pair by pair

_small_release = st.integers(1, 12).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n)))
_large_release = st.integers(1, 10**6).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n)))
_ell = st.one_of(st.sampled_from((1, 1.5, 2, 2.5, 3, 4, 5, 10)), st.floats(1.0, 50.0))


def _scalar_min_ratio(survival: float, ell: float) -> float:
    denom = ell * survival - (ell - 1)
    return math.inf if denom <= 0 else ell * survival / denom


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_vectorized_functions_agree_with_scalar_evaluation(data: st.DataObject) -> None:
    n_pairs = data.draw(st.integers(1, 30), label="n_pairs")
    rows = data.draw(
        st.lists(st.tuples(st.integers(0, n_pairs - 1), st.one_of(_small_release, _large_release)), max_size=120),
        label="rows",
    )
    perm = data.draw(st.permutations(range(len(rows))), label="shuffle")
    rows = [rows[i] for i in perm]
    idx = np.array([r[0] for r in rows], dtype=np.int64)
    n = np.array([r[1][0] for r in rows], dtype=np.int64)
    n_s = np.array([r[1][1] for r in rows], dtype=np.int64)
    ell = np.array(data.draw(st.lists(_ell, min_size=n_pairs, max_size=n_pairs), label="ell"))

    surv = privacy.survival_products(idx, n, n_s, n_pairs)
    p = privacy.breach_probabilities(idx, n, n_s, n_pairs)
    ratio = privacy.min_ratio(surv, ell)
    verdict = privacy.exceeds_threshold(idx, n, n_s, n_pairs, ell)
    new = data.draw(st.lists(_small_release, min_size=n_pairs, max_size=n_pairs), label="next release")
    after = privacy.breach_after(surv, [x[0] for x in new], [x[1] for x in new])

    for pair in range(n_pairs):
        figures = [(int(n[r]), int(n_s[r])) for r in range(len(rows)) if idx[r] == pair]
        scalar_surv = math.prod((a - b) / a for a, b in figures)
        one = privacy.survival_products([0] * len(figures), [f[0] for f in figures], [f[1] for f in figures], 1)[0]
        assert surv[pair] == pytest.approx(scalar_surv, rel=1e-12, abs=1e-300)
        assert surv[pair] == pytest.approx(one, rel=1e-12, abs=1e-300)
        assert p[pair] == pytest.approx(1 - scalar_surv, rel=1e-12, abs=1e-12)
        # min_ratio, one element at a time, and against the formula away from the pole
        single = privacy.min_ratio(np.array([surv[pair]]), ell[pair])[0]
        assert ratio[pair] == single or (np.isinf(ratio[pair]) and np.isinf(single))
        denom = ell[pair] * surv[pair] - (ell[pair] - 1)
        if abs(denom) > 1e-9:
            assert ratio[pair] == pytest.approx(_scalar_min_ratio(surv[pair], ell[pair]), rel=1e-9)
        # exceeds_threshold, one pair at a time and exactly
        v1 = privacy.exceeds_threshold(
            [0] * len(figures), [f[0] for f in figures], [f[1] for f in figures], 1, ell[pair]
        )
        assert verdict[pair] == v1[0]
        assert bool(verdict[pair]) == (privacy.exact_breach(figures) > 1 / Fraction(float(ell[pair])))
        # breach_after
        a, b = new[pair]
        assert after[pair] == pytest.approx(1 - surv[pair] * (a - b) / a, rel=1e-12, abs=1e-15)


@settings(max_examples=100, deadline=None)
@given(
    data=st.data(),
    k_prime=st.integers(1, 30),
)
def test_constant_ratio_targets_with_personal_thresholds(data: st.DataObject, k_prime: int) -> None:
    m = data.draw(st.integers(1, 40))
    counts = np.array(data.draw(st.lists(st.integers(0, 40), min_size=m, max_size=m)))
    ell = np.array(data.draw(st.lists(_ell, min_size=m, max_size=m)))
    t = privacy.constant_ratio_targets(counts, ell, k_prime)
    for i in range(m):
        if counts[i] < k_prime:
            assert t[i] == privacy.constant_ratio_target(float(ell[i]), k_prime)
            nc = 1 / (1 - (1 - 1 / ell[i]) ** (1 / k_prime)) if ell[i] > 1 else 1.0
            assert t[i] == pytest.approx(nc, rel=1e-9)
        else:
            assert np.isinf(t[i])
    # strategy_targets: element-wise max of the constant target and Theorem 1's floor
    surv = np.array(data.draw(st.lists(st.floats(0.0, 1.0), min_size=m, max_size=m)))
    st_t = privacy.strategy_targets(surv, counts, ell, "constant", k_prime=k_prime)
    for i in range(m):
        single = privacy.strategy_targets(
            np.array([surv[i]]), np.array([counts[i]]), ell[i], "constant", k_prime=k_prime
        )[0]
        assert st_t[i] == single or (np.isinf(st_t[i]) and np.isinf(single))


# ---------------------------------------------------------------------------------------
# exceeds_threshold decides exactly where floating point would err


def _telescoping(ell: int, m: int) -> list[tuple[int, int]]:
    """Releases (n, 1) for n = (ℓ-1)m+1 .. ℓm: Π (n-1)/n = (ℓ-1)/ℓ, so p = 1/ℓ exactly."""
    return [(n, 1) for n in range((ell - 1) * m + 1, ell * m + 1)]


HUGE = 10**17  # below 2^63; 1/HUGE is far below the float resolution of p


BOUNDARY_CASES = [
    # (history, ℓ, exact p)
    ([(2, 1)], 2, Fraction(1, 2)),
    ([(3, 1)], 3, Fraction(1, 3)),
    ([(4, 1), (4, 1), (9, 1)], 2, Fraction(1, 2)),
    ([(4, 1), (9, 1)], 3, Fraction(1, 3)),
    ([(5, 1), (6, 1)], 3, Fraction(1, 3)),
    ([(10, 1)], 10, Fraction(1, 10)),
    ([(7, 2)], 7 / 2, Fraction(2, 7)),
    ([(14, 4), (HUGE, 1)], 7 / 2, None),
    (_telescoping(2, 50), 2, Fraction(1, 2)),
    (_telescoping(3, 40), 3, Fraction(1, 3)),
    (_telescoping(5, 30), 5, Fraction(1, 5)),
    ([(2, 1), (HUGE, 1)], 2, 1 - Fraction(1, 2) * Fraction(HUGE - 1, HUGE)),
    ([(3, 1), (HUGE, 1)], 3, 1 - Fraction(2, 3) * Fraction(HUGE - 1, HUGE)),
    ([*_telescoping(3, 40), (HUGE, 1)], 3, None),
    ([(3 * HUGE // 10, HUGE // 10 - 1)], 3, Fraction(HUGE // 10 - 1, 3 * HUGE // 10)),
    ([(2 * HUGE // 10, HUGE // 10 - 1)], 2, Fraction(HUGE // 10 - 1, 2 * HUGE // 10)),
]


@pytest.mark.parametrize(("history", "ell", "exact"), BOUNDARY_CASES)
def test_exceeds_threshold_is_exact_at_the_boundary(
    history: list[tuple[int, int]], ell: float, exact: Fraction | None
) -> None:
    p_exact = privacy.exact_breach(history)
    if exact is not None:
        assert p_exact == exact
    truth = p_exact > 1 / Fraction(ell)
    idx = [0] * len(history)
    n = [h[0] for h in history]
    n_s = [h[1] for h in history]
    assert bool(privacy.exceeds_threshold(idx, n, n_s, 1, ell)[0]) == truth


def test_float_comparison_alone_would_err_on_these_cases() -> None:
    """Guard that the boundary cases above really exercise the exact path."""
    naive_wrong = 0
    for history, ell, _ in BOUNDARY_CASES:
        p = privacy.breach_probabilities([0] * len(history), [h[0] for h in history], [h[1] for h in history], 1)[0]
        truth = privacy.exact_breach(history) > 1 / Fraction(ell)
        naive_wrong += (p > 1 / ell) != truth
    assert naive_wrong >= 3
    # the two directions explicitly
    p3 = privacy.breach_probabilities([0], [3], [1], 1)[0]
    assert p3 > 1 / 3  # float says breach although p = 1/3 exactly ...
    assert not privacy.exceeds_threshold([0], [3], [1], 1, 3)[0]  # ... the verdict does not
    p2 = privacy.breach_probabilities([0, 0], [2, HUGE], [1, 1], 1)[0]
    assert not p2 > 0.5  # float misses a real breach of 1/(2·10^17) ...
    assert privacy.exceeds_threshold([0, 0], [2, HUGE], [1, 1], 1, 2)[0]  # ... the verdict catches it


def test_exceeds_threshold_boundary_cases_all_at_once_shuffled() -> None:
    idx, n, n_s, ells, truth = [], [], [], [], []
    for pair, (history, ell, _) in enumerate(BOUNDARY_CASES):
        for h in history:
            idx.append(pair)
            n.append(h[0])
            n_s.append(h[1])
        ells.append(ell)
        truth.append(privacy.exact_breach(history) > 1 / Fraction(ell))
    order = np.random.default_rng(7).permutation(len(idx))
    verdict = privacy.exceeds_threshold(
        np.array(idx)[order], np.array(n)[order], np.array(n_s)[order], len(BOUNDARY_CASES), np.array(ells)
    )
    assert verdict.tolist() == truth


@settings(max_examples=200, deadline=None)
@given(
    ell=st.sampled_from((2, 2.5, 3, 4, 10)),
    k_prime=st.integers(1, 30),
    links=st.lists(st.integers(1, 400), min_size=0, max_size=40),
    extra=st.integers(0, 60),
)
def test_renewed_constant_ratio_never_breaches(ell: float, k_prime: int, links: list[int], extra: int) -> None:
    """after_k_prime: renew. A pair is linked at ratios ``n = ceil(target) + extra`` (one
    record of s each time, so ``n_s / n = 1 / n``) for as long as its target is finite; the
    exact breach probability 1 - Π(1 - 1/n) never exceeds 1/ℓ, the first k' targets are
    paper 004's ñ_c, and a pair that spent its whole budget gets ``inf``."""
    bound = 1 - Fraction(1) / Fraction(ell)  # the survival product may not fall below it
    survival = Fraction(1)
    nc = privacy.constant_ratio_target(ell, k_prime)
    for k in range(len(links) + k_prime + 5):
        target = float(
            privacy.strategy_targets(
                np.array([float(survival)]), np.array([k]), ell, "constant", k_prime=k_prime, renew=True
            )[0]
        )
        stop = privacy.strategy_targets(np.array([float(survival)]), np.array([k]), ell, "constant", k_prime=k_prime)
        if k < k_prime:
            assert target == max(nc, float(stop[0]))
        else:
            assert np.isinf(stop[0])
        if not np.isfinite(target):
            assert survival <= bound * Fraction(1 + 1e-9) or k >= k_prime
            break
        n = math.ceil(target) + (links[k] if k < len(links) else extra)
        survival *= 1 - Fraction(1, n)
        assert survival >= bound, (k, n, target)


def test_renewed_targets_formula() -> None:
    # paper 004's ñ_c when nothing was spent; inf when everything was
    assert privacy.renewed_targets([1.0], 2, 20)[0] == pytest.approx(privacy.constant_ratio_target(2, 20), rel=1e-12)
    assert np.isinf(privacy.renewed_targets([0.5], 2, 20)[0])
    assert np.isinf(privacy.renewed_targets([0.3], 2, 20)[0])
    # a pair at P = 0.8 under ℓ = 2, k' = 4: (0.5 / 0.8)^(1/4) per release
    share = (0.5 / 0.8) ** 0.25
    assert privacy.renewed_targets([0.8], 2, 4)[0] == pytest.approx(1 / (1 - share), rel=1e-12)
    with pytest.raises(ValueError):
        privacy.renewed_targets([0.8], 2, 0)
