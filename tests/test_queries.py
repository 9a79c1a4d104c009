"""Tests of the utility measure (anonymizer/queries.py, docs/design.md section 8)."""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonymizer import queries
from anonymizer.hierarchy import Hierarchy
from anonymizer.intervals import release_hierarchies
from anonymizer.queries import (
    QueryRanges,
    average_relative_error,
    draw_queries,
    draw_workload,
    estimate_workload,
    evaluate_queries,
)

# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def make_hierarchy(name: str, rows: list[list[str]]) -> Hierarchy:
    return Hierarchy.from_rows(name, [(i + 1, r) for i, r in enumerate(rows)], f"<{name}>")


def age_hierarchy() -> Hierarchy:
    """Ages 1..60; inner nodes [1, 10], [11, 20], [21, 60] (the Figure 1c intervals)."""
    rows = []
    for a in range(1, 61):
        inner = "[1, 10]" if a <= 10 else "[11, 20]" if a <= 20 else "[21, 60]"
        rows.append([str(a), inner, "*"])
    return make_hierarchy("age", rows)


def sex_hierarchy() -> Hierarchy:
    return make_hierarchy("sex", [["M", "*"], ["F", "*"]])


def random_hierarchy(name: str, rng: np.random.Generator, numeric: bool) -> Hierarchy:
    """Depth 4 (leaf, group, super-group, '*'), random fan-out, some chains."""
    n = int(rng.integers(2, 13))
    if numeric:
        leaves = [str(v) for v in rng.choice(1000, size=n, replace=False)]  # file order != numeric order
    else:
        leaves = [f"{name}{i}" for i in range(n)]
    groups = rng.integers(0, max(1, n // 2), size=n)
    rows = []
    for leaf, g in zip(leaves, groups, strict=True):
        level1 = leaf if rng.random() < 0.15 else f"{name}-g{g}"  # a chain leaf;leaf;...
        level2 = f"{name}-h{(g if level1 != leaf else int(rng.integers(0, 3))) % 3}"
        rows.append([leaf, level1, level2, "*"])
    return make_hierarchy(name, rows)


def leaf_sets(h: Hierarchy) -> list[set[int]]:
    """Leaves below every node, by walking parent pointers (independent of the module)."""
    sets: list[set[int]] = [set() for _ in range(h.n_nodes)]
    for leaf in range(h.n_leaves):
        node = leaf
        while node != -1:
            sets[node].add(leaf)
            node = int(h.parent[node])
    return sets


def random_tables(
    rng: np.random.Generator, hierarchies: dict[str, Hierarchy], n: int, n_sens: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A raw table, and a release with every value generalized to a random level, ~20 % suppressed."""
    raw = pd.DataFrame(
        {a: np.asarray(h.leaves, dtype=object)[rng.integers(0, h.n_leaves, n)] for a, h in hierarchies.items()}
    )
    raw["disease"] = [f"d{v}" for v in rng.integers(0, n_sens, n)]
    pub = raw.copy()
    for a, h in hierarchies.items():
        level = rng.integers(0, h.depth, n)
        pub[a] = np.asarray(h.labels, dtype=object)[h.leaf_nodes[level, h.leaf_codes(raw[a])]]
    pub = pub[rng.random(n) >= 0.2].reset_index(drop=True)
    return raw, pub


def random_hierarchies(rng: np.random.Generator, count: int) -> dict[str, Hierarchy]:
    return {f"q{i}": random_hierarchy(f"q{i}", rng, numeric=bool(rng.random() < 0.5)) for i in range(count)}


# --------------------------------------------------------------------------------------
# the Xiao & Tao worked example (paper 001, section 4 and Figure 1c)
# --------------------------------------------------------------------------------------


def _female_over_30(age: Hierarchy, sex: Hierarchy, domain: tuple[str, ...]) -> QueryRanges:
    age_mask = np.zeros((1, age.n_leaves), dtype=bool)
    age_mask[0, age.leaf_codes(str(a) for a in range(31, 61))] = True
    sex_mask = np.zeros((1, sex.n_leaves), dtype=bool)
    sex_mask[0, sex.node("F")] = True
    return QueryRanges({"age": age_mask, "sex": sex_mask}, domain, np.ones((1, len(domain)), dtype=bool))


def test_xiao_tao_female_patients_above_30() -> None:
    """Rows 7-10 of Figure 1c, ages 21, 26, 28, 56 published as [21, 60]: est 3, actual 1."""
    age, sex = age_hierarchy(), sex_hierarchy()
    hierarchies = {"age": age, "sex": sex}
    raw = pd.DataFrame(
        {
            "age": ["21", "26", "28", "56"],
            "sex": ["F"] * 4,
            "disease": ["flu", "gastritis", "pneumonia", "flu"],
        }
    )
    pub = raw.assign(age="[21, 60]")
    domain = ("flu", "gastritis", "pneumonia")
    actual, estimate = evaluate_queries(raw, pub, hierarchies, "disease", _female_over_30(age, sex, domain))
    assert actual.tolist() == [1]
    assert estimate.tolist() == [3.0]  # 4 × (60 − 30) / (60 − 20)
    assert abs(actual[0] - estimate[0]) / actual[0] == 2.0


def test_xiao_tao_whole_figure_1c() -> None:
    """The male rows of Figure 1c add nothing to the female query."""
    age, sex = age_hierarchy(), sex_hierarchy()
    ages = ["5", "9", "6", "8", "12", "19", "21", "26", "28", "56"]
    raw = pd.DataFrame({"age": ages, "sex": ["M"] * 6 + ["F"] * 4, "disease": ["flu"] * 10})
    pub = raw.assign(age=["[1, 10]"] * 4 + ["[11, 20]"] * 2 + ["[21, 60]"] * 4)
    actual, estimate = evaluate_queries(
        raw, pub, {"age": age, "sex": sex}, "disease", _female_over_30(age, sex, ("flu",))
    )
    assert actual.tolist() == [1]
    assert estimate.tolist() == [3.0]


# --------------------------------------------------------------------------------------
# properties of the measure
# --------------------------------------------------------------------------------------


def test_identity_publication_has_zero_error() -> None:
    rng = np.random.default_rng(7)
    hierarchies = random_hierarchies(rng, 4)
    raw, _ = random_tables(rng, hierarchies, 300, 6)
    result = average_relative_error(raw, raw.copy(), hierarchies, "disease", n_queries=500, seed=3)
    assert result.n_queries == 500
    assert np.all(result.errors == 0.0)
    assert result.mean == result.median == result.p85 == 0.0
    assert np.array_equal(result.estimate, result.actual.astype(float))


def test_full_generalization_estimate_is_n_times_fraction() -> None:
    rng = np.random.default_rng(11)
    hierarchies = random_hierarchies(rng, 4)
    raw, pub = random_tables(rng, hierarchies, 400, 8)
    for a in hierarchies:
        pub[a] = "*"
    result = average_relative_error(raw, pub, hierarchies, "disease", n_queries=300, qd=2, seed=5)
    ranges = result.ranges
    fraction = np.ones(result.n_queries)
    for a, h in hierarchies.items():
        fraction *= ranges.qi[a].sum(axis=1) / h.n_leaves
    sens_index = pd.Index(list(ranges.sensitive_values)).get_indexer(pub["disease"])
    in_rs = ranges.sensitive[:, sens_index].sum(axis=1)  # published records with s in R_S
    np.testing.assert_allclose(result.estimate, in_rs * fraction, rtol=1e-12, atol=0)
    # with no sensitive condition that is N_published × the QI fraction
    no_s = ranges.sensitive.all(axis=1)
    np.testing.assert_allclose(result.estimate[no_s], len(pub) * fraction[no_s], rtol=1e-12)


def _brute_force(
    raw: pd.DataFrame, pub: pd.DataFrame, hierarchies: dict[str, Hierarchy], ranges: QueryRanges
) -> tuple[list[int], list[float]]:
    sets = {a: leaf_sets(h) for a, h in hierarchies.items()}
    actual, estimate = [], []
    for q in range(ranges.n_queries):
        r_s = {v for v, m in zip(ranges.sensitive_values, ranges.sensitive[q], strict=True) if m}
        r = {a: set(np.flatnonzero(m[q]).tolist()) for a, m in ranges.qi.items()}
        count = 0
        for _, rec in raw.iterrows():
            if rec["disease"] in r_s and all(hierarchies[a].node(rec[a]) in r[a] for a in r):
                count += 1
        est = 0.0
        for _, rec in pub.iterrows():
            if rec["disease"] not in r_s:
                continue
            p = 1.0
            for a in r:
                leaves = sets[a][hierarchies[a].node(rec[a])]
                p *= len(leaves & r[a]) / len(leaves)
            est += p
        actual.append(count)
        estimate.append(est)
    return actual, estimate


@pytest.mark.parametrize("grouping", ["as chosen", "counting", "hashing and sorting"])
@pytest.mark.parametrize("case", range(20))
def test_vectorized_matches_brute_force(case: int, grouping: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the rows are grouped by counting every possible key or, for wide keys, by hashing and
    # sorting: both ways must give the brute force's answers
    if grouping != "as chosen":
        monkeypatch.setattr(queries, "_dense", lambda total, n: grouping == "counting")
    rng = np.random.default_rng(100 + case)
    hierarchies = random_hierarchies(rng, int(rng.integers(1, 5)))
    raw, pub = random_tables(rng, hierarchies, int(rng.integers(1, 40)), int(rng.integers(1, 5)))
    # the domain may list a value no record has, and random (not only interval) masks
    domain = (*sorted(set(raw["disease"])), "unused")
    n_q = 12
    qi = {}
    for a, h in hierarchies.items():
        mask = rng.random((n_q, h.n_leaves)) < 0.6
        mask[rng.random(n_q) < 0.3] = True  # some queries leave the attribute unconstrained
        qi[a] = mask
    if len(hierarchies) > 1:
        qi.pop(next(iter(hierarchies)))  # an attribute absent from the ranges
    ranges = QueryRanges(qi, domain, rng.random((n_q, len(domain))) < 0.7)
    actual, estimate = evaluate_queries(raw, pub, hierarchies, "disease", ranges)
    want_actual, want_estimate = _brute_force(raw, pub, hierarchies, ranges)
    assert actual.tolist() == want_actual
    np.testing.assert_allclose(estimate, want_estimate, rtol=1e-12, atol=1e-12)


def test_drawn_queries_match_brute_force() -> None:
    rng = np.random.default_rng(5)
    hierarchies = random_hierarchies(rng, 4)
    raw, pub = random_tables(rng, hierarchies, 60, 5)
    result = average_relative_error(raw, pub, hierarchies, "disease", n_queries=25, qd=2, seed=9)
    want_actual, want_estimate = _brute_force(raw, pub, hierarchies, result.ranges)
    assert result.actual.tolist() == want_actual
    np.testing.assert_allclose(result.estimate, want_estimate, rtol=1e-12, atol=1e-12)
    want_errors = np.abs(np.array(want_actual) - np.array(want_estimate)) / np.array(want_actual)
    np.testing.assert_allclose(result.errors, want_errors, rtol=1e-12)
    assert result.mean == pytest.approx(want_errors.mean())
    assert result.median == pytest.approx(np.median(want_errors))
    assert result.p85 == pytest.approx(np.percentile(want_errors, 85))


def test_deterministic_for_a_seed() -> None:
    rng = np.random.default_rng(21)
    hierarchies = random_hierarchies(rng, 5)
    raw, pub = random_tables(rng, hierarchies, 200, 6)
    a = average_relative_error(raw, pub, hierarchies, "disease", n_queries=400, seed=1)
    b = average_relative_error(raw, pub, hierarchies, "disease", n_queries=400, seed=1)
    c = average_relative_error(raw, pub, hierarchies, "disease", n_queries=400, seed=2)
    assert np.array_equal(a.actual, b.actual) and np.array_equal(a.estimate, b.estimate)
    assert (a.mean, a.median, a.p85, a.n_draws) == (b.mean, b.median, b.p85, b.n_draws)
    for name in hierarchies:
        assert np.array_equal(a.ranges.qi[name], b.ranges.qi[name])
    assert not np.array_equal(a.actual, c.actual)
    assert (a.n_queries, a.qd, a.selectivity, a.seed) == (400, 3, 0.05, 1)


def test_zero_actual_queries_are_redrawn() -> None:
    rng = np.random.default_rng(3)
    hierarchies = random_hierarchies(rng, 4)
    raw, pub = random_tables(rng, hierarchies, 3, 4)  # 3 records: most queries select none
    result = average_relative_error(raw, pub, hierarchies, "disease", n_queries=200, seed=0)
    assert result.n_queries == len(result.actual) == len(result.errors) == 200
    assert np.all(result.actual > 0)
    assert result.n_draws > 200
    assert np.all(np.isfinite(result.errors))


def test_no_reachable_query_raises() -> None:
    # 100 leaves; target fraction 0.1 (qd=1, s=0.01) -> candidate nodes hold 5..20 leaves.
    # L95 hangs below the root through a chain of its own, so no candidate contains it.
    rows = [[f"L{i}", f"G{i // 10}", "*"] for i in range(90)] + [[f"L{i}", f"L{i}", "*"] for i in range(90, 100)]
    h = make_hierarchy("cat", rows)
    raw = pd.DataFrame({"cat": ["L95"], "disease": ["flu"]})
    with pytest.raises(ValueError, match="non-zero actual answer"):
        average_relative_error(raw, raw, {"cat": h}, "disease", n_queries=10, qd=1, selectivity=0.01)


def test_fewer_qis_than_qd_uses_all() -> None:
    rng = np.random.default_rng(8)
    hierarchies = random_hierarchies(rng, 2)
    raw, pub = random_tables(rng, hierarchies, 100, 4)
    result = average_relative_error(raw, pub, hierarchies, "disease", n_queries=50, qd=3, seed=0)
    assert result.qd == 2


def test_empty_release_has_error_one() -> None:
    rng = np.random.default_rng(9)
    hierarchies = random_hierarchies(rng, 3)
    raw, pub = random_tables(rng, hierarchies, 100, 4)
    result = average_relative_error(raw, pub.iloc[:0], hierarchies, "disease", n_queries=50, seed=0)
    assert np.all(result.estimate == 0.0) and result.mean == 1.0


# --------------------------------------------------------------------------------------
# drawing
# --------------------------------------------------------------------------------------


def test_drawn_ranges_follow_the_selectivity_rule() -> None:
    age = make_hierarchy("age", [[str(a), f"[{a // 10 * 10}, {a // 10 * 10 + 9}]", "*"] for a in range(100)])
    cat = make_hierarchy("cat", [[f"c{i}", f"g{i // 4}", f"h{i // 8}", "*"] for i in range(32)])
    hierarchies = {"age": age, "cat": cat}
    domain = tuple(f"d{i}" for i in range(10))
    ranges = draw_queries(hierarchies, domain, 300, qd=1, selectivity=0.04, rng=np.random.default_rng(0))
    target = 0.04**0.5  # 0.2 per condition
    numbers = age.leaf_numbers()
    cat_sets = {frozenset(s) for s in leaf_sets(cat)}
    for q in range(300):
        used = [a for a, m in ranges.qi.items() if not m[q].all()]
        assert len(used) == 1
        if used == ["age"]:
            chosen = np.sort(numbers[ranges.qi["age"][q]])
            assert len(chosen) == 20 and np.all(np.diff(chosen) == 1)  # 20 consecutive ages
        else:
            leaves = frozenset(np.flatnonzero(ranges.qi["cat"][q]).tolist())
            assert leaves in cat_sets  # a subtree
            assert 0.5 * target <= len(leaves) / 32 <= 2 * target  # 4 or 8 leaves
        assert ranges.sensitive[q].sum() == 2  # round(0.2 × 10)


def test_realized_selectivity_is_about_s_on_uniform_data() -> None:
    rng = np.random.default_rng(4)
    hierarchies = {
        f"n{i}": make_hierarchy(f"n{i}", [[str(v), f"[{v // 5 * 5}, {v // 5 * 5 + 4}]", "*"] for v in range(40)])
        for i in range(4)
    }
    raw = pd.DataFrame({a: rng.integers(0, 40, 4000).astype(str) for a in hierarchies})
    raw["disease"] = rng.integers(0, 20, 4000).astype(str)
    result = average_relative_error(raw, raw, hierarchies, "disease", n_queries=500, seed=0)
    assert 0.035 <= result.mean_selectivity <= 0.07


# --------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------


def test_input_errors() -> None:
    age, sex = age_hierarchy(), sex_hierarchy()
    hierarchies = {"age": age, "sex": sex}
    raw = pd.DataFrame({"age": ["21", "56"], "sex": ["F", "M"], "disease": ["flu", "flu"]})
    with pytest.raises(ValueError, match="generalized value"):
        average_relative_error(raw.assign(age="[21, 60]"), raw, hierarchies, "disease")
    with pytest.raises(ValueError, match="not in its hierarchy"):
        average_relative_error(raw, raw.assign(age="[0, 99]"), hierarchies, "disease")
    with pytest.raises(ValueError, match="does not occur in the raw"):
        average_relative_error(raw, raw.assign(disease="cold"), hierarchies, "disease")
    with pytest.raises(ValueError, match="empty"):
        average_relative_error(raw.iloc[:0], raw, hierarchies, "disease")
    with pytest.raises(ValueError, match="lacks"):
        average_relative_error(raw, raw.drop(columns="sex"), hierarchies, "disease")
    with pytest.raises(ValueError, match="selectivity"):
        average_relative_error(raw, raw, hierarchies, "disease", selectivity=0.0)
    bad = QueryRanges({"age": np.ones((1, 3), dtype=bool)}, ("flu",), np.ones((1, 1), dtype=bool))
    with pytest.raises(ValueError, match="shape"):
        evaluate_queries(raw, raw, hierarchies, "disease", bad)


# --------------------------------------------------------------------------------------
# the register-weighted estimator
# --------------------------------------------------------------------------------------


def _brute_weighted(
    pub: pd.DataFrame, hierarchies: dict[str, Hierarchy], weights: dict[str, np.ndarray], ranges: QueryRanges
) -> np.ndarray:
    """Per query, Σ over published records of Π_i w(leaves(g_i) ∩ R_i) / w(leaves(g_i)) · [s ∈ R_S],
    a record at a time, with leaf sets from parent pointers (uniform where a node weighs 0)."""
    sets = {a: leaf_sets(h) for a, h in hierarchies.items()}
    out = np.zeros(ranges.n_queries)
    for q in range(ranges.n_queries):
        for _, row in pub.iterrows():
            s = ranges.sensitive_values.index(row["disease"]) if row["disease"] in ranges.sensitive_values else None
            if s is None or not ranges.sensitive[q, s]:
                continue
            share = 1.0
            for a, h in hierarchies.items():
                leaves = sorted(sets[a][h.node(row[a])])
                inside = [x for x in leaves if ranges.qi[a][q, x]]
                w = weights[a]
                total = sum(w[x] for x in leaves)
                share *= sum(w[x] for x in inside) / total if total > 0 else len(inside) / len(leaves)
            out[q] += share
    return out


def test_the_weighted_estimate_is_the_per_record_spread_by_leaf_weight() -> None:
    """Brute force over records on random hierarchies, releases and weights, with some leaves
    weighing 0 and one node whose leaves all weigh 0 (its records spread uniformly)."""
    rng = np.random.default_rng(11)
    for _ in range(4):
        hierarchies = random_hierarchies(rng, 3)
        raw, pub = random_tables(rng, hierarchies, 60, 3)
        weights = {a: rng.integers(0, 5, h.n_leaves).astype(float) for a, h in hierarchies.items()}
        first = next(iter(hierarchies))
        weights[first][list(leaf_sets(hierarchies[first])[hierarchies[first].parent[0]])] = 0.0
        ranges = draw_queries(hierarchies, tuple(sorted(raw["disease"].unique())), 40, 2, 0.2, rng)
        actual, estimate = evaluate_queries(raw, pub, hierarchies, "disease", ranges, leaf_weights=weights)
        actual_u, _ = evaluate_queries(raw, pub, hierarchies, "disease", ranges)
        assert actual.tolist() == actual_u.tolist()  # the weights never touch the actual answers
        np.testing.assert_allclose(estimate, _brute_weighted(pub, hierarchies, weights, ranges), rtol=1e-12, atol=1e-12)


def test_equal_weights_give_the_uniform_estimate_and_leaves_stay_exact() -> None:
    rng = np.random.default_rng(12)
    hierarchies = random_hierarchies(rng, 3)
    raw, pub = random_tables(rng, hierarchies, 80, 2)
    ranges = draw_queries(hierarchies, tuple(sorted(raw["disease"].unique())), 60, 3, 0.3, rng)
    equal = {a: np.full(h.n_leaves, 7.0) for a, h in hierarchies.items()}
    _, uniform = evaluate_queries(raw, pub, hierarchies, "disease", ranges)
    _, same = evaluate_queries(raw, pub, hierarchies, "disease", ranges, leaf_weights=equal)
    np.testing.assert_allclose(same, uniform, rtol=1e-12, atol=1e-12)
    skewed = {a: rng.integers(1, 9, h.n_leaves).astype(float) for a, h in hierarchies.items()}
    actual, exact = evaluate_queries(raw, raw, hierarchies, "disease", ranges, leaf_weights=skewed)
    assert exact.tolist() == actual.astype(float).tolist()  # a leaf-level release is answered exactly


def test_the_weighted_estimator_follows_the_register_on_a_skewed_attribute() -> None:
    """Nine of ten people born in US: '*' spread by weight gives the right answer where the
    uniform spread over 10 countries is off by a factor of 9."""
    country = make_hierarchy("country", [["US", "*"]] + [[f"c{i}", "*"] for i in range(9)])
    raw = pd.DataFrame({"country": ["US"] * 90 + [f"c{i % 9}" for i in range(10)], "disease": ["flu"] * 100})
    pub = raw.assign(country="*")
    mask = np.zeros((1, 10), dtype=bool)
    mask[0, country.node("US")] = True
    ranges = QueryRanges({"country": mask}, ("flu",), np.ones((1, 1), dtype=bool))
    weights = {"country": np.array([900.0] + [100.0 / 9] * 9)}
    actual, uniform = evaluate_queries(raw, pub, {"country": country}, "disease", ranges)
    _, weighted = evaluate_queries(raw, pub, {"country": country}, "disease", ranges, leaf_weights=weights)
    assert actual.tolist() == [90]
    assert uniform.tolist() == pytest.approx([10.0])
    assert weighted.tolist() == pytest.approx([90.0])


def test_average_relative_error_reports_both_estimators_on_the_same_queries() -> None:
    rng = np.random.default_rng(13)
    hierarchies = random_hierarchies(rng, 3)
    raw, pub = random_tables(rng, hierarchies, 400, 3)
    weights = {a: rng.integers(0, 9, h.n_leaves).astype(float) for a, h in hierarchies.items()}
    plain = average_relative_error(raw, pub, hierarchies, "disease", n_queries=200, seed=4)
    both = average_relative_error(raw, pub, hierarchies, "disease", n_queries=200, seed=4, leaf_weights=weights)
    assert plain.weighted is None
    assert both.mean == plain.mean and both.actual.tolist() == plain.actual.tolist()  # same draws
    assert both.weighted is not None
    _, estimate = evaluate_queries(raw, pub, hierarchies, "disease", both.ranges, leaf_weights=weights)
    np.testing.assert_allclose(both.weighted.estimate, estimate, rtol=1e-12)
    errors = np.abs(both.actual - estimate) / both.actual
    assert both.weighted.mean == pytest.approx(float(errors.mean()), rel=1e-12)
    assert both.weighted.median == pytest.approx(float(np.median(errors)), rel=1e-12)


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"nope": np.ones(3)}, "not quasi-identifiers"),
        ({"sex": np.ones(3)}, "must be 2 finite non-negative"),
        ({"sex": np.array([1.0, -1.0])}, "must be 2 finite non-negative"),
        ({"sex": np.array([1.0, np.nan])}, "must be 2 finite non-negative"),
    ],
)
def test_bad_leaf_weights_are_refused_naming_the_attribute(weights: dict[str, np.ndarray], message: str) -> None:
    sex = sex_hierarchy()
    raw = pd.DataFrame({"sex": ["M", "F"], "disease": ["flu", "flu"]})
    with pytest.raises(ValueError, match=message):
        average_relative_error(
            raw, raw, {"sex": sex}, "disease", n_queries=5, qd=1, selectivity=0.5, leaf_weights=weights
        )


# --------------------------------------------------------------------------------------
# the draws' partition and the factor's hashing give what the sorts gave
# --------------------------------------------------------------------------------------


@given(st.integers(1, 30), st.integers(1, 40), st.integers(0, 2**32 - 1), st.sampled_from([3, 1000, None]))
def test_the_k_smallest_draws_are_the_sort_s_set(rows: int, cols: int, seed: int, levels: int | None) -> None:
    # few levels force ties at the k-th draw: those rows must still get the sort's set
    from anonymizer.workload import _smallest

    rng = np.random.default_rng(seed)
    draws = rng.random((rows, cols)) if levels is None else rng.integers(0, levels, (rows, cols)) / levels
    for k in {1, max(1, cols // 2), cols}:
        want = np.zeros(draws.shape, dtype=bool)
        want[np.arange(rows)[:, None], np.argsort(draws, axis=1)[:, :k]] = True
        assert np.array_equal(_smallest(draws, k), want)


@given(st.integers(0, 2**32 - 1), st.integers(2, 3000))
def test_a_projection_sums_like_np_unique(seed: int, n_sens: int) -> None:
    # the projection's hashing path (keys too many to count) gives np.unique's keys and sums
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    sizes = [int(rng.integers(50, 400)) for _ in range(3)]
    codes = [rng.integers(0, s, n) for s in sizes]
    sens = np.sort(rng.integers(0, n_sens, n))
    counts = rng.integers(1, 5, n).astype(np.float64)
    for dense_elements in (0, queries.DENSE_ELEMENTS):  # 0: the hashing path wherever n_sens > 4
        with patch.object(queries, "DENSE_ELEMENTS", dense_elements):
            _, row_of = queries._distinct(codes, sizes)
            table = queries._Table(codes, sens, counts, int(counts.sum()))
            qi_rows, matrix = table.factor((0, 1, 2), sizes, n_sens)
        width = int(row_of.max()) + 1
        keys, inverse = np.unique(sens * width + row_of, return_inverse=True)
        summed = np.bincount(inverse.reshape(-1), weights=counts, minlength=len(keys))
        assert len(qi_rows[0]) == width
        coo = matrix.tocoo()
        assert np.array_equal(coo.row * width + coo.col, keys)
        assert np.array_equal(coo.data, summed)


# --------------------------------------------------------------------------------------
# the workload drawn before the release exists (serialpub drafting, docs/scaling.md)
# --------------------------------------------------------------------------------------


def _with_intervals(pub: pd.DataFrame, hierarchies: dict[str, Hierarchy], rng: np.random.Generator) -> pd.DataFrame:
    """``pub`` with some leaf values of each numeric QI published as interval labels that
    are not declared nodes, as a release of a numeric QI may be: ``[v, v]`` for its own leaf
    v, or ``[lo, hi]`` over every leaf (both nest with any declared node)."""
    out = pub.copy()
    for a, h in hierarchies.items():
        if not h.numeric:
            continue
        numbers = h.leaf_numbers()
        whole = f"[{numbers.min():g}, {numbers.max():g}]"
        values = out[a].astype(str)
        leaf = values.map(lambda v, h=h: h.has_label(v) and h.node(v) < h.n_leaves).to_numpy()
        draw = rng.random(len(out))
        own = [f"[{float(v):g}, {float(v):g}]" for v in values[leaf & (draw < 0.3)]]
        out.loc[leaf & (draw < 0.3), a] = own
        out.loc[leaf & (draw >= 0.3) & (draw < 0.5), a] = whole
    return out


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_the_workload_drawn_before_the_release_is_the_one_drawn_after(seed: int) -> None:
    """Drafting draws the queries and answers them on the snapshot with the declared
    hierarchies, before the release exists; the release is read with hierarchies that add
    interval nodes to its numeric QIs. Queries, answers, estimates and errors are those of
    the whole measure computed on the release's hierarchies."""
    rng = np.random.default_rng(seed)
    hierarchies = random_hierarchies(rng, 4)
    raw, pub = random_tables(rng, hierarchies, 400, 6)
    pub = _with_intervals(pub, hierarchies, rng)
    read = release_hierarchies(hierarchies, [a for a, h in hierarchies.items() if h.numeric], pub)
    weights = {a: rng.integers(0, 5, h.n_leaves) for a, h in hierarchies.items()}
    args = {"n_queries": 60, "qd": 2, "selectivity": 0.3, "seed": seed}
    whole = average_relative_error(raw, pub, read, "disease", leaf_weights=weights, **args)  # type: ignore[arg-type]
    workload = draw_workload(raw, hierarchies, "disease", **args)  # type: ignore[arg-type]
    split = estimate_workload(workload, pub, read, "disease", leaf_weights=weights)
    for a in hierarchies:
        np.testing.assert_array_equal(split.ranges.qi[a], whole.ranges.qi[a])
    np.testing.assert_array_equal(split.ranges.sensitive, whole.ranges.sensitive)
    np.testing.assert_array_equal(split.actual, whole.actual)
    np.testing.assert_array_equal(split.estimate, whole.estimate)
    assert split.weighted is not None and whole.weighted is not None
    np.testing.assert_array_equal(split.weighted.estimate, whole.weighted.estimate)
    assert (split.mean, split.n_draws, split.qd, split.mean_selectivity) == (
        whole.mean,
        whole.n_draws,
        whole.qd,
        whole.mean_selectivity,
    )


def test_a_workload_is_not_estimated_with_other_leaves() -> None:
    age, sex = age_hierarchy(), sex_hierarchy()
    raw = pd.DataFrame({"age": ["21", "26", "28", "56"], "sex": ["F", "M", "F", "M"], "disease": ["a", "b", "a", "b"]})
    workload = draw_workload(raw, {"age": age, "sex": sex}, "disease", n_queries=5, qd=1, selectivity=0.5)
    other = make_hierarchy("sex", [["F", "*"], ["M", "*"]])  # the same leaves in another order
    with pytest.raises(ValueError, match="leaves differ"):
        estimate_workload(workload, raw, {"age": age, "sex": other}, "disease")
    assert estimate_workload(workload, raw, {"age": age, "sex": sex}, "disease").mean == 0.0


def test_the_draft_estimate_in_one_pass_is_both_evaluations_to_the_bit() -> None:
    """estimate_workload answers the uniform and the weighted estimates in one pass over the
    release's projections, dropping each once used: the same floats, bit for bit, as
    evaluate_queries gives for each alone (fresh tables, the projections kept)."""
    rng = np.random.default_rng(21)
    for _ in range(3):
        hierarchies = random_hierarchies(rng, 3)
        raw, pub = random_tables(rng, hierarchies, 90, 3)
        weights = {a: rng.integers(0, 6, h.n_leaves).astype(float) for a, h in hierarchies.items()}
        workload = draw_workload(raw, hierarchies, "disease", n_queries=50, qd=2, selectivity=0.2, seed=3)
        got = estimate_workload(workload, pub, hierarchies, "disease", leaf_weights=weights)
        _, uniform = evaluate_queries(raw, pub, hierarchies, "disease", workload.ranges)
        _, weighted = evaluate_queries(raw, pub, hierarchies, "disease", workload.ranges, leaf_weights=weights)
        assert got.estimate.tobytes() == uniform.tobytes()
        assert got.weighted is not None and got.weighted.estimate.tobytes() == weighted.tobytes()
