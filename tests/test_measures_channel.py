"""Askari, Safavi-Naini & Barker 2012 (paper 003): the Appendix example (with
the corrections listed in anonymizer/measures/channel.py) and brute force on tiny channels and tables."""

from __future__ import annotations

import itertools
import math
import time
from collections import Counter
from fractions import Fraction as F

import numpy as np
import pytest
from hierarchy_oracle import ancestor_matrix
from hypothesis import given, settings
from hypothesis import strategies as st

from anonymizer.hierarchy import Hierarchy
from anonymizer.measures import channel as C
from anonymizer.measures import entropy_utility as EU
from anonymizer.measures import kanonymity_channel as KC

# Appendix A, eq 26: p(T'|T), rows T_1..T_4, columns T'_1..T'_4
CH = np.array(
    [
        [F(5, 17), F(2, 17), F(0), F(10, 17)],
        [F(0), F(20, 35), F(5, 35), F(10, 35)],
        [F(15, 28), F(5, 28), F(3, 28), F(5, 28)],
        [F(5, 20), F(8, 20), F(0), F(7, 20)],
    ],
    dtype=object,
)


def hier(attribute: str, rows: list[list[str]]) -> Hierarchy:
    return Hierarchy.from_rows(attribute, [(i + 1, r) for i, r in enumerate(rows)], "test")


AGE = hier("age", [["a0", "a01", "*"], ["a1", "a01", "*"], ["a2", "a23", "*"], ["a3", "a23", "*"]])
SEX = hier("sex", [["m", "*"], ["f", "*"]])
TRI = hier("t", [["x", "xy", "*"], ["y", "xy", "*"], ["z", "zz", "*"]])


# --------------------------------------------------------------------------- B.6.2


def test_b62_privacy_error_example() -> None:
    # eq 26 with the ERRATUM's column-maximum form: 1 − 1/4(15/28 + 20/35 + 5/35 + 10/17)
    assert C.privacy_error(CH) == 1 - F(1, 4) * (F(15, 28) + F(20, 35) + F(5, 35) + F(10, 17)) == F(147, 272)
    assert round(float(C.privacy_error(CH)), 2) == 0.54
    assert C.privacy_error(CH, np.array([F(1), F(0), F(0), F(0)], dtype=object)) == 0
    # eq 27: an adversary who does not know the mechanism = the uniform channel
    uni = np.full((4, 4), F(1, 4), dtype=object)
    assert C.privacy_error(uni) == F(3, 4)
    assert C.privacy_error(uni, np.array([F(1), F(0), F(0), F(0)], dtype=object)) == 0
    assert C.error_bounds(4, 4) == (0.0, 0.75)


def test_b62_derived_posteriors_entropy_and_bound() -> None:
    p_out, post = C.posterior(CH)
    assert p_out == pytest.approx([257 / 952, 431 / 1360, 1 / 16, 1669 / 4760], rel=1e-12)
    assert post[:, 0] == pytest.approx([0.2724, 0, 0.4961, 0.2315], abs=5e-5)
    assert post[:, 3] == pytest.approx([0.4194, 0.2037, 0.1273, 0.2496], abs=5e-5)
    assert C.map_decision(CH).tolist() == [2, 1, 1, 0]  # T_3, T_2, T_2, T_1
    assert C.conditional_entropy(CH) == pytest.approx(1.680905, abs=5e-7)
    assert C.santhi_vardy_bound(CH) == pytest.approx(0.688113, abs=5e-7)
    assert C.santhi_vardy_bound(CH) >= float(C.privacy_error(CH))
    assert C.mutual_information(CH) == pytest.approx(0.319095, abs=5e-7)


# --------------------------------------------------------------------------- brute force on tiny channels


@st.composite
def channels(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    n = draw(st.integers(1, 4))
    m = draw(st.integers(1, 4))
    rows = []
    for _ in range(n):
        w = draw(st.lists(st.integers(0, 5), min_size=m, max_size=m).filter(lambda x: sum(x) > 0))
        rows.append([F(x, sum(w)) for x in w])
    pw = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n).filter(lambda x: sum(x) > 0))
    return np.array(rows, dtype=object), np.array([F(x, sum(pw)) for x in pw], dtype=object)


@settings(max_examples=80, deadline=None)
@given(channels())
def test_map_error_is_the_best_guessing_function(case: tuple[np.ndarray, np.ndarray]) -> None:
    """eq 4/5: the MAP error equals the least error over every decision function f: T' → T."""
    ch, prior = case
    n, m = ch.shape
    best = min(1 - sum(prior[f[j]] * ch[f[j], j] for j in range(m)) for f in itertools.product(range(n), repeat=m))
    assert C.privacy_error(ch, prior) == best
    f = C.map_decision(ch, prior)
    assert 1 - sum(prior[f[j]] * ch[f[j], j] for j in range(m)) == best
    # uniform prior: inside the bounds of §4.1; eq 6 bounds it from above
    err = float(C.privacy_error(ch))
    lo, hi = C.error_bounds(n, m)
    assert lo - 1e-12 <= err <= hi + 1e-12
    assert err <= C.santhi_vardy_bound(ch) + 1e-12
    # float input gives the same value
    assert float(C.privacy_error(ch.astype(float), prior.astype(float))) == pytest.approx(float(best), abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(channels())
def test_entropy_against_loops(case: tuple[np.ndarray, np.ndarray]) -> None:
    ch, prior = case
    n, m = ch.shape
    h = 0.0
    for j in range(m):
        pj = sum(float(prior[i] * ch[i, j]) for i in range(n))
        for i in range(n):
            joint = float(prior[i] * ch[i, j])
            if joint > 0:
                h -= joint * math.log2(joint / pj)
    assert C.conditional_entropy(ch, prior) == pytest.approx(h, abs=1e-12)
    hp = -sum(float(p) * math.log2(float(p)) for p in prior if p > 0)
    assert C.mutual_information(ch, prior) == pytest.approx(hp - h, abs=1e-12)


# --------------------------------------------------------------------------- utility


def brute_u_max(table: np.ndarray, i: int, k: int) -> float:
    """H_max − H(A_i | rest) from explicit frequency dictionaries."""
    rows = [tuple(r) for r in table.tolist()]
    rest = Counter(r[:i] + r[i + 1 :] for r in rows)
    full = Counter(rows)
    n = len(rows)
    h = -sum(c / n * math.log2(c / rest[r[:i] + r[i + 1 :]]) for r, c in full.items())
    return math.log2(k) - h


@settings(max_examples=50, deadline=None)
@given(
    st.integers(1, 4).flatmap(
        lambda p: st.lists(st.lists(st.integers(0, 2), min_size=p, max_size=p), min_size=1, max_size=12)
    )
)
def test_attribute_utilities_against_dictionaries(rows: list[list[int]]) -> None:
    t = np.array(rows, dtype=np.int64)
    k = [3] * t.shape[1]
    u = EU.attribute_utilities(t, k)
    assert u == pytest.approx([brute_u_max(t, i, 3) for i in range(t.shape[1])], abs=1e-12)
    w = np.arange(1, t.shape[1] + 1, dtype=float)
    w /= w.sum()
    assert EU.table_utility(t, k, w) == pytest.approx(float(np.dot(w, u)), abs=1e-12)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31), st.integers(2, 6), st.integers(1, 40))
def test_attribute_utilities_with_codes_beyond_int64_keys(seed: int, p: int, n: int) -> None:
    """Codes whose radices multiply past 2**62: the rest-of-row keys are re-encoded, not
    derived from one mixed-radix number (entropy_utility._rest_keys)."""
    rng = np.random.default_rng(seed)
    t = rng.integers(0, 3, size=(n, p)) * (2**14)  # radices up to 2**15 + 1 per column
    t[0] = 2**15  # every radix 2**15 + 1: the product passes 2**62 from five columns on
    k = [2**15 + 1] * p
    u = EU.attribute_utilities(t, k)
    assert u == pytest.approx([brute_u_max(t, i, k[i]) for i in range(p)], abs=1e-9)


def test_utility_hand_example() -> None:
    # A_1 is determined by A_2: H(A_1|A_2) = 0, so U_max(A_1) = log2 4 = 2 bits (eq 13)
    t = np.array([[0, 0], [1, 1], [2, 2], [3, 3]])
    assert EU.attribute_utilities(t, [4, 4]).tolist() == [2.0, 2.0]
    # A_1 generalized to '*' (code 9 covering 4 leaves): read as uniform over 4 leaves, H'(A_1|A_2) = 2
    # bits and A_2 given '*' is uniform over 4: both utilities drop to 0, degradation 2 bits
    tp = np.array([[9, 0], [9, 1], [9, 2], [9, 3]])
    counts = np.ones(10)
    counts[9] = 4
    assert EU.attribute_utilities(tp, [4, 4], [counts, None]).tolist() == [0.0, 0.0]
    assert EU.utility_degradation(t, tp, [4, 4], published_leaf_counts=[counts, None]) == pytest.approx(2.0)
    # without the leaf reading the constant column would look maximally useful (docs/reports.md D5)
    assert EU.attribute_utilities(tp, [4, 4])[0] == 2.0
    # eq 16 by loops
    ch = np.array([[0.5, 0.5], [0.25, 0.75]])
    got = C.mechanism_utility(ch, [3.0, 1.0], [0.5, 2.0], prior=[0.2, 0.8])
    ref = sum(
        p * sum(ch[i, j] * (ui - [0.5, 2.0][j]) for j in range(2))
        for i, (p, ui) in enumerate(zip([0.2, 0.8], [3.0, 1.0], strict=True))
    )
    assert got == pytest.approx(ref, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(0, 1)), min_size=1, max_size=10),
    st.lists(st.integers(0, 2), min_size=10, max_size=10),
)
def test_generalized_utility_against_spread_table(rows: list[tuple[int, int, int]], lv: list[int]) -> None:
    """H'(A_i|rest) of a published table equals the conditional entropy of the explicitly spread
    table (each row expanded into its leaf combinations, weight 1/Π n); degradation ≥ 0 under global
    recoding."""
    t = np.array(rows, dtype=np.int64)
    levels = np.array(lv[: len(rows)])
    tp = np.column_stack([AGE.leaf_nodes[levels, t[:, 0]], TRI.leaf_nodes[np.minimum(levels, 2), t[:, 1]], t[:, 2]])
    counts = [AGE.index.size, TRI.index.size, None]
    u = EU.attribute_utilities(tp, [4, 3, 2], counts)
    anc = [ancestor_matrix(AGE), ancestor_matrix(TRI)]
    for i in range(2):
        joint: Counter[tuple[int, ...]] = Counter()
        for row in tp.tolist():
            leaves = np.flatnonzero(anc[i][:, row[i]])
            for leaf in leaves:
                joint[(int(leaf), *row[:i], *row[i + 1 :])] += 1 / len(leaves)
        rest: Counter[tuple[int, ...]] = Counter()
        for key, w in joint.items():
            rest[key[1:]] += w
        n = len(rows)
        h = -sum(w / n * math.log2(w / rest[key[1:]]) for key, w in joint.items())
        assert u[i] == pytest.approx(math.log2([4, 3][i]) - h, abs=1e-9)
    # degradation ≥ 0 holds for global recoding (one level per attribute), where the published rest
    # is a function of the original rest; mixed levels (local recoding) can split groups and go below 0
    g = np.column_stack([AGE.leaf_nodes[lv[0], t[:, 0]], TRI.leaf_nodes[lv[1], t[:, 1]], t[:, 2]])
    assert EU.utility_degradation(t, g, [4, 3, 2], published_leaf_counts=counts) >= -1e-12


# --------------------------------------------------------------------------- k-anonymity channel (§5)


def test_b61_input_set_size() -> None:
    assert KC.input_table_count([4, 2, 3], 5) == math.comb(28, 5) == 98280


@pytest.mark.parametrize(("attrs", "r", "k"), [([AGE], 4, 2), ([AGE], 3, 2), ([AGE, SEX], 3, 1), ([TRI, SEX], 4, 2)])
def test_kanonymity_channel_counts(attrs: list[Hierarchy], r: int, k: int) -> None:
    ch = KC.kanonymity_channel(attrs, r, k)
    sizes = [h.n_leaves for h in attrs]
    assert len(ch.inputs) == KC.input_table_count(sizes, r) == len(set(ch.inputs))
    assert np.allclose(ch.matrix.sum(axis=1), 1.0)
    levels = [[len(set(row.tolist())) for row in h.leaf_nodes] for h in attrs]
    assert len(ch.outputs) == KC.kanonymous_table_count(levels, r, k)  # all attributes QIs here
    if k == 1:
        assert len(ch.outputs) == KC.output_table_count(levels, r)
    # eq 25 as printed matches when k divides r
    if r % k == 0:
        assert KC.kanonymous_table_count(levels, r, k, as_printed=True) == len(ch.outputs)
    # every feasible output is k-anonymous and generalizes its input, with 1/x each
    anc = [ancestor_matrix(h) for h in attrs]
    for t, row in zip(ch.inputs, ch.matrix, strict=True):
        x = np.count_nonzero(row)
        assert x >= 1 and np.allclose(row[row > 0], 1 / x)
        for j in np.flatnonzero(row):
            out = ch.outputs[j]
            assert min(Counter(out).values()) >= k
            assert any(
                all(all(anc[i][a[i], b[i]] for i in range(len(attrs))) for a, b in zip(t, perm, strict=True))
                for perm in itertools.permutations(out)
            )


def test_eq25_as_printed_drops_the_remainder() -> None:
    """docs/reports.md D8: r = 5, k = 2 over sex: groups (5,0), (0,5), (2,3), (3,2) at the leaf
    level and one at '*' = 5 tables; eq 25 as printed counts 4."""
    ch = KC.kanonymity_channel([SEX], 5, 2)
    assert len(ch.outputs) == 5 == KC.kanonymous_table_count([[2, 1]], 5, 2)
    assert KC.kanonymous_table_count([[2, 1]], 5, 2, as_printed=True) == 4


def test_kanonymity_channel_keeps_sensitive_intact_and_groups_on_qis() -> None:
    ch = KC.kanonymity_channel([SEX, 2], 2, 2)
    # input {(m, 0), (f, 1)}: only the root level of sex makes one QI-group of 2
    t = ch.inputs.index(((0, 0), (1, 1)))
    outs = [ch.outputs[j] for j in np.flatnonzero(ch.matrix[t])]
    assert outs == [((SEX.root, 0), (SEX.root, 1))]
    # uniform prior: 1 − (1/n) Σ_{T'} max_T ℙ(T'|T) by an explicit loop over the columns
    ref = 1 - sum(max(ch.matrix[i, j] for i in range(len(ch.inputs))) for j in range(len(ch.outputs))) / len(ch.inputs)
    assert C.privacy_error(ch.matrix) == pytest.approx(ref, abs=1e-15)


def test_channel_size_limits() -> None:
    with pytest.raises(ValueError, match="exceed the limit of 20000"):
        KC.kanonymity_channel([AGE, SEX, 3], 6, 2)
    with pytest.raises(ValueError, match="cells"):
        KC.kanonymity_channel([AGE], 4, 1, max_cells=10)
    with pytest.raises(ValueError, match="1 ≤ k ≤ r"):
        KC.kanonymity_channel([AGE], 2, 3)


# --------------------------------------------------------------------------- factorized approximation


def test_factorized_privacy_is_exact_for_a_fixed_generalization() -> None:
    """Ordered tables of 2 rows over (age, sex), uniform prior, fixed levels (age 1, sex 1): the
    posterior of every output column of eq 5 is uniform over Π n_cell preimages and factorizes."""
    rows = list(itertools.product(range(4), range(2)))
    inputs = list(itertools.product(rows, repeat=2))
    gen = [tuple((int(AGE.leaf_nodes[1][a]), int(SEX.leaf_nodes[1][s])) for a, s in t) for t in inputs]
    outs = sorted(set(gen))
    ch = np.zeros((len(inputs), len(outs)))
    for i, g in enumerate(gen):
        ch[i, outs.index(g)] = 1.0
    _, post = C.posterior(ch)
    for j, out in enumerate(outs):
        fp = KC.factorized_privacy(np.array(out), [AGE, SEX])
        assert post[:, j].max() == pytest.approx(2.0**-fp.log2_preimages, rel=1e-12)
        assert 1 - post[:, j].max() == pytest.approx(fp.table_error, rel=1e-12)
        # per-cell marginal MAP success = 1/n_cell
        succ = []
        for r, c in itertools.product(range(2), range(2)):
            marg = Counter()
            for i in np.flatnonzero(post[:, j]):
                marg[inputs[i][r][c]] += post[i, j]
            succ.append(max(marg.values()))
        assert 1 - np.mean(succ) == pytest.approx(fp.mean_cell_error, rel=1e-12)
    # and eq 5 itself: Error_f = 1 − (#outputs)/(#inputs) for this deterministic channel
    assert C.privacy_error(ch) == pytest.approx(1 - len(outs) / len(inputs), rel=1e-12)


def test_factorized_privacy_is_not_exact_for_the_kanonymity_channel() -> None:
    """§5.5's data-dependent choice makes some preimages of an output likelier than others."""
    ch = KC.kanonymity_channel([AGE], 2, 2)
    _, post = C.posterior(ch.matrix)
    a01 = AGE.node("a01")
    j = ch.outputs.index(((a01,), (a01,)))
    # preimages {a0,a0}, {a0,a1}, {a1,a1} have 3, 2, 3 feasible outputs: posteriors 2/7, 3/7, 2/7
    pre = {ch.inputs[i]: post[i, j] for i in np.flatnonzero(post[:, j])}
    assert pre == pytest.approx({((0,), (0,)): 2 / 7, ((0,), (1,)): 3 / 7, ((1,), (1,)): 2 / 7}, rel=1e-12)


# --------------------------------------------------------------------------- release figures


def test_figures_small_instance_computes_bayes_risk() -> None:
    orig = np.array([[0], [1], [2]])
    pub = AGE.leaf_nodes[1][orig]
    f = KC.channel_figures(orig, pub, [AGE], np.array([0, 1, 0]), n_values=2, k=1)
    ch = KC.kanonymity_channel([AGE, 2], 3, 1)
    assert f.bayes_risk == pytest.approx(float(C.privacy_error(ch.matrix)), abs=1e-15) and f.bayes_risk > 0
    assert (f.input_tables, f.output_tables) == (len(ch.inputs), len(ch.outputs))
    assert f.input_tables == KC.input_table_count([4, 2], 3)  # age leaves × sensitive values, eq 21
    assert f.factorized.mean_cell_error == pytest.approx(0.5)
    assert f.factorized.log2_preimages == pytest.approx(3.0)
    # the Bayes risk is left out without k and when k exceeds the records
    assert KC.channel_figures(orig, pub, [AGE], np.array([0, 1, 0]), n_values=2).bayes_risk is None
    big_k = KC.channel_figures(orig, pub, [AGE], np.array([0, 1, 0]), n_values=2, k=4)
    assert big_k.bayes_risk is None and big_k.input_tables is None and big_k.k == 4 and big_k.records == 3


def test_figures_of_a_full_release_are_fast_and_leave_the_bayes_risk_out() -> None:
    rng = np.random.default_rng(1)
    r = 1_000_000
    orig = np.column_stack([rng.integers(0, 4, r), rng.integers(0, 3, r), rng.integers(0, 2, r)])
    level = np.ones(r, dtype=np.int64)  # global recoding: age and sex one level up
    pub = np.column_stack(
        [AGE.leaf_nodes[1 + level, orig[:, 0]], TRI.leaf_nodes[1, orig[:, 1]], SEX.leaf_nodes[level, orig[:, 2]]]
    )
    value = rng.integers(0, 2000, r)
    t0 = time.perf_counter()
    f = KC.channel_figures(orig, pub, [AGE, TRI, SEX], value, k=5)
    assert time.perf_counter() - t0 < 15
    assert f.bayes_risk is None and f.input_tables is None and f.output_tables is None
    # eq 21: C(4·3·2·2000 + r − 1, r) tables, far above MAX_INPUT_TABLES
    d = 4 * 3 * 2 * 2000
    want = (math.lgamma(d + r) - math.lgamma(r + 1) - math.lgamma(d)) / math.log(10)
    assert f.log10_input_tables == pytest.approx(want, rel=1e-12) and f.log10_input_tables > 5
    deg = f.utility_degradation
    assert deg > 0
    assert f.utility_original == pytest.approx(
        EU.table_utility(np.column_stack([orig, value]), [4, 3, 2, 2000]), rel=1e-12
    )
    assert f.utility_original - f.utility_published == deg


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="sum to 1"):
        C.privacy_error(np.array([[0.5, 0.2]]))
    with pytest.raises(ValueError, match="prior"):
        C.privacy_error(np.eye(2), [0.5, 0.6])
    with pytest.raises(ValueError, match="negative"):
        C.privacy_error(np.array([[1.5, -0.5]]))
    with pytest.raises(ValueError, match="domain_sizes"):
        EU.attribute_utilities(np.zeros((2, 2), dtype=int), [2])
    with pytest.raises(ValueError, match="equal shapes"):
        EU.utility_degradation(np.zeros((2, 2), dtype=int), np.zeros((3, 2), dtype=int), [2, 2])
    with pytest.raises(ValueError, match="node ids"):
        KC.factorized_privacy(np.array([[99]]), [AGE])
    with pytest.raises(ValueError, match="n_values"):
        KC.channel_figures(np.array([[0]]), np.array([[0]]), [AGE], np.array([3]), n_values=2)


def test_channel_figures_of_nodes_held_per_group_are_the_array_s_to_the_bit() -> None:
    """The draft passes the published nodes as the groups' rows and each record's group; every
    figure must be the float the (R, q) array gives, and a bad group code must be refused."""
    from anonymizer.measures.published import PublishedNodes

    rng = np.random.default_rng(5)
    leaves = np.column_stack([rng.integers(0, 4, 500), rng.integers(0, 2, 500)]).astype(np.int32)
    table = np.array([[AGE.node("a01"), SEX.node("*")], [AGE.node("a23"), SEX.node("*")], [AGE.root, SEX.root]])
    group = np.where(leaves[:, 0] < 2, 0, 1)
    group[::7] = 2  # some records fully generalized
    value = rng.integers(0, 3, 500)
    by_array = KC.channel_figures(leaves, table[group], [AGE, SEX], value, k=2)
    by_group = KC.channel_figures(leaves, PublishedNodes.grouped(table, group), [AGE, SEX], value, k=2)
    assert by_group == by_array
    assert by_group.utility_published != by_group.utility_original  # the published table is generalized
    with pytest.raises(ValueError, match="group codes"):
        KC.channel_figures(leaves, PublishedNodes.grouped(table, np.full(500, 3)), [AGE, SEX], value)


def test_table_utility_with_a_tail_column_is_the_stacked_table_s() -> None:
    rng = np.random.default_rng(9)
    t = rng.integers(0, 4, (300, 2)).astype(np.int8)
    v = rng.integers(0, 5, 300)
    stacked = EU.table_utility(np.column_stack([t, v]), [4, 4, 5])
    assert EU.table_utility(t, [4, 4, 5], tail=[v]) == stacked
    assert stacked != EU.table_utility(t, [4, 4], tail=[])  # the tail is counted
    with pytest.raises(ValueError, match="tail column"):
        EU.table_utility(t, [4, 4, 5], tail=[v[:, None]])
