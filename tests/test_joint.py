"""The register-joint estimator (anonymizer.joint) against a brute force per register
individual, and its bounds against the true count, on random small series: global and
local recoding, numeric intervals, suppression, a register that changes between releases,
and both dilution modes (register: any register individual of a region may hold a record;
presence: only those present in the period do)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
from hierarchy_oracle import ancestor_matrix
from hypothesis import given, settings
from hypothesis import strategies as st

import anonymizer.joint
from anonymizer.hierarchy import Hierarchy
from anonymizer.intervals import interval_label, release_hierarchies
from anonymizer.joint import JointRelease, joint_answers, joint_estimates, series_answers
from anonymizer.workload import QueryRanges

ZONES = {"a": "ab", "b": "ab", "c": "cd", "d": "cd", "e": "ef", "f": "ef"}
AGES = [str(x) for x in range(8)]
VALUES = ("s0", "s1", "s2", "s3")
QIS = ("zone", "age", "sex")


def _hierarchies() -> dict[str, Hierarchy]:
    return {
        "zone": Hierarchy.from_rows("zone", [(i + 1, (z, m, "*")) for i, (z, m) in enumerate(ZONES.items())], "zone"),
        "age": Hierarchy.from_rows("age", [(i + 1, (a, "*")) for i, a in enumerate(AGES)], "age"),
        "sex": Hierarchy.from_rows("sex", [(1, ("M", "*")), (2, ("F", "*"))], "sex"),
    }


H = _hierarchies()


@dataclass
class _Release:
    register: pd.DataFrame  # id + QI leaf labels
    snapshot: pd.DataFrame  # the raw records (QIs as leaves, s), suppressed ones included
    published: pd.DataFrame  # generalized labels, suppressed records left out
    suppressed: int


def _register(rng: np.random.Generator, n: int, start: int = 0) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": [f"p{start + i}" for i in range(n)],
            "zone": rng.choice(list(ZONES), n),
            "age": rng.choice(AGES, n),
            "sex": rng.choice(["M", "F"], n),
        }
    )


def _change(rng: np.random.Generator, reg: pd.DataFrame, next_id: int) -> pd.DataFrame:
    """Some individuals leave, some arrive, some move to another zone."""
    kept = reg[rng.random(len(reg)) > 0.15].copy()
    moved = rng.random(len(kept)) < 0.15
    kept.loc[moved, "zone"] = rng.choice(list(ZONES), int(moved.sum()))
    return pd.concat([kept, _register(rng, int(rng.integers(0, 6)), next_id)], ignore_index=True)


def _generalize(rng: np.random.Generator, snap: pd.DataFrame, numeric: bool) -> pd.DataFrame:
    """Disjoint regions: sex leaf or *, zone at a level chosen per published sex (local
    recoding when sex is kept), age as random consecutive intervals (or *)."""
    out = pd.DataFrame(index=snap.index)
    keep_sex = rng.random() < 0.6
    out["sex"] = snap["sex"] if keep_sex else "*"
    out["zone"] = "*"
    for sex in ["M", "F"] if keep_sex else ["*"]:
        rows = out["sex"] == sex
        level = int(rng.integers(0, 3))
        out.loc[rows, "zone"] = snap.loc[rows, "zone"].map(lambda z, lv=level: [z, ZONES[z], "*"][lv])
    if numeric and rng.random() < 0.8:
        cuts = np.sort(rng.choice(np.arange(1, 8), int(rng.integers(0, 5)), replace=False))
        edges = [0, *cuts.tolist(), 8]
        label = {}
        for lo, hi in itertools.pairwise(edges):
            for x in range(lo, hi):
                label[str(x)] = interval_label(str(lo), str(hi - 1))
        out["age"] = snap["age"].map(label)
    else:
        out["age"] = snap["age"] if rng.random() < 0.3 else "*"
    out["s"] = snap["s"]
    return out[["zone", "age", "sex", "s"]]


def _series(seed: int, dilution: str, numeric: bool, changing: bool, n_releases: int = 3) -> list[_Release]:
    rng = np.random.default_rng(seed)
    reg = _register(rng, int(rng.integers(5, 40)))
    next_id = 1000
    out = []
    for _ in range(n_releases):
        if changing and out:
            reg = _change(rng, reg, next_id)
            next_id += 100
        present = rng.random(len(reg)) < (0.7 if dilution == "presence" else 1.0)
        snap = reg[present].copy()
        # the sensitive value depends on the QIs, so a spread that ignores them is wrong
        p_zone = snap["zone"].isin(["a", "b"]).to_numpy()
        snap["s"] = np.where(p_zone & (rng.random(len(snap)) < 0.7), "s0", rng.choice(VALUES, len(snap)))
        published = _generalize(rng, snap, numeric)
        drop = rng.random(len(published)) < 0.1
        out.append(_Release(reg.copy(), snap, published[~drop].reset_index(drop=True), int(drop.sum())))
    return out


def _joint(r: _Release) -> JointRelease:
    hs = release_hierarchies(H, ["age"], r.published) if len(r.published) else H
    leaves = np.stack([H[q].leaf_codes(r.register[q]) for q in QIS], axis=1)
    return JointRelease.of(r.published, QIS, "s", [hs[q] for q in QIS], leaves, VALUES, r.suppressed)


def _queries(rng: np.random.Generator, q: int) -> QueryRanges:
    masks = {}
    for a in QIS:
        n = H[a].n_leaves
        m = np.ones((q, n), dtype=bool)
        for i in range(q):
            if rng.random() < 0.6:
                if a == "age":  # a range lo..hi
                    lo = int(rng.integers(0, n))
                    hi = int(rng.integers(lo, n))
                    m[i] = (np.arange(n) >= lo) & (np.arange(n) <= hi)
                else:
                    row = rng.random(n) < 0.5
                    row[int(rng.integers(0, n))] = True
                    m[i] = row
        masks[a] = m
    s = rng.random((q, len(VALUES))) < 0.5
    s[np.arange(q), rng.integers(0, len(VALUES), q)] = True
    return QueryRanges(masks, VALUES, s)


def _satisfies(frame: pd.DataFrame, ranges: QueryRanges, i: int) -> np.ndarray:
    ok = np.ones(len(frame), dtype=bool)
    for a in QIS:
        ok &= ranges.qi[a][i][H[a].leaf_codes(frame[a])]
    return ok


def _brute(r: _Release, ranges: QueryRanges) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per register individual: the group whose region holds them, c_S(G) / n(G) if they
    satisfy Q; bounds per group; the uniform estimate per published record."""
    hs = release_hierarchies(H, ["age"], r.published) if len(r.published) else H
    anc = {a: ancestor_matrix(hs[a]) for a in QIS}  # [leaf, node]
    people = list(zip(*(H[a].leaf_codes(r.register[a]).tolist() for a in QIS), strict=True))
    groups = r.published.groupby(list(QIS), sort=False)
    keys = list(groups.groups)
    q = ranges.n_queries
    est, low, up, uni = np.zeros(q), np.zeros(q), np.zeros(q), np.zeros(q)
    # the brute force loops on purpose; what depends on the group alone (its region, its
    # published values, the register individuals its region holds) is read once per group
    # rather than once per query and group
    per_group = []
    for key in keys:
        node = {a: hs[a].node(v) for a, v in zip(QIS, key, strict=True)}
        members = [p for p in people if all(anc[a][leaf, node[a]] for a, leaf in zip(QIS, p, strict=True))]
        per_group.append((node, groups.get_group(key)["s"].tolist(), members))
    for i in range(q):
        s_in = set(np.array(VALUES)[ranges.sensitive[i]])
        for node, values, members in per_group:
            c_s = sum(v in s_in for v in values)
            n_g = len(members)
            in_q = sum(all(ranges.qi[a][i][leaf] for a, leaf in zip(QIS, p, strict=True)) for p in members)
            est[i] += c_s * in_q / n_g
            low[i] += max(0, c_s - (n_g - in_q))
            up[i] += min(c_s, in_q)
            frac = 1.0
            for a in QIS:
                leaves = anc[a][:, node[a]]
                frac *= (leaves & ranges.qi[a][i]).sum() / leaves.sum()
            uni[i] += c_s * frac
    return est, low, up + r.suppressed, uni


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    dilution=st.sampled_from(["register", "presence"]),
    numeric=st.booleans(),
    changing=st.booleans(),
)
def test_the_vectorized_estimator_equals_a_brute_force_per_register_individual(
    seed: int, dilution: str, numeric: bool, changing: bool
) -> None:
    releases = _series(seed, dilution, numeric, changing, n_releases=2)
    ranges = _queries(np.random.default_rng(seed + 1), 4)
    for r in releases:
        got = joint_answers(_joint(r), ranges)
        est, low, up, uni = _brute(r, ranges)
        np.testing.assert_allclose(got.estimate, est, rtol=1e-9, atol=1e-9)
        np.testing.assert_array_equal(got.lower, low)
        np.testing.assert_array_equal(got.upper, up)
        np.testing.assert_allclose(got.uniform, uni, rtol=1e-9, atol=1e-9)
        # the estimates alone (the draft's utility figure, the plan) are the same floats to the bit
        only, only_uniform = joint_estimates(_joint(r), ranges, uniform=True)
        np.testing.assert_array_equal(only, got.estimate)
        np.testing.assert_array_equal(only_uniform, got.uniform)
        # and with c_S(G) by the writer side's sparse product
        product, product_uniform = joint_estimates(_joint(r), ranges, uniform=True, sparse_product=True)
        np.testing.assert_array_equal(product, got.estimate)
        np.testing.assert_array_equal(product_uniform, got.uniform)


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    dilution=st.sampled_from(["register", "presence"]),
    numeric=st.booleans(),
    changing=st.booleans(),
)
def test_the_true_count_lies_within_the_bounds_on_every_query(
    seed: int, dilution: str, numeric: bool, changing: bool
) -> None:
    releases = _series(seed, dilution, numeric, changing)
    ranges = _queries(np.random.default_rng(seed + 1), 30)
    table = series_answers([_joint(r) for r in releases], ranges)
    for j, r in enumerate(releases):
        rows = table[table["release"] == j + 1]
        true = np.array(
            [
                int(
                    (
                        _satisfies(r.snapshot, ranges, i) & r.snapshot["s"].isin(np.array(VALUES)[ranges.sensitive[i]])
                    ).sum()
                )
                for i in range(ranges.n_queries)
            ]
        )
        assert (rows["lower"].to_numpy() <= true).all() and (true <= rows["upper"].to_numpy()).all()
        assert (rows["lower"].to_numpy() <= rows["estimate"].to_numpy() + 1e-9).all()
        assert (rows["estimate"].to_numpy() <= rows["upper"].to_numpy() + 1e-9).all()


def test_a_release_read_with_another_register_is_refused() -> None:
    """A group holding more records than register individuals in its region: the register
    is not the release's, and the estimate would be meaningless."""
    r = _series(3, "register", True, False, n_releases=1)[0]
    r.register = r.register.iloc[: max(1, len(r.register) // 4)]
    with pytest.raises(ValueError, match="not the one this release was published with"):
        _joint(r)


def test_an_unconstrained_query_returns_the_published_count_exactly() -> None:
    r = _series(5, "register", True, False, n_releases=1)[0]
    ranges = QueryRanges({}, VALUES, np.ones((1, len(VALUES)), dtype=bool))
    got = joint_answers(_joint(r), ranges)
    n = len(r.published)
    assert got.estimate[0] == pytest.approx(n) and got.uniform[0] == pytest.approx(n)
    assert got.lower[0] == n and got.upper[0] == n + r.suppressed


def test_the_answers_do_not_depend_on_the_chunk_of_queries(monkeypatch: pytest.MonkeyPatch) -> None:
    """c_S(G) is computed per chunk of queries from the sparse counts: one query per chunk
    gives every figure to the bit (a published figure must not move with the chunk size)."""
    r = _series(11, "register", True, True, n_releases=1)[0]
    ranges = _queries(np.random.default_rng(12), 40)
    whole = joint_answers(_joint(r), ranges)
    monkeypatch.setattr(anonymizer.joint, "CHUNK_ELEMENTS", 1)
    one = joint_answers(_joint(r), ranges)
    for name in ("estimate", "lower", "upper", "uniform", "variance", "generalized"):
        np.testing.assert_array_equal(getattr(one, name), getattr(whole, name))


def test_the_sparse_product_sums_c_s_as_the_distinct_sets_do() -> None:
    """c_S(G) of many queries, each of its own value set (the draft's workload), by the
    writer side's sparse product and by the distinct sets: the same floats to the bit, on
    counts large enough that a float32 or a lost count would show."""
    rng = np.random.default_rng(7)
    counts = rng.integers(0, 3_000_000, size=(300, 120)) * (rng.random((300, 120)) < 0.1)
    counts[5] = 0  # a group holding none of the values
    nonzero = anonymizer.joint.GroupValueCounts.of_dense(counts)
    masks = (rng.random((200, 120)) < 0.5).astype(np.float64)
    masks[3] = masks[4]  # two queries of one set
    by_sets = anonymizer.joint._set_counts(nonzero, masks)
    by_product = anonymizer.joint._product_counts(anonymizer.joint._csr_counts(nonzero), masks)
    np.testing.assert_array_equal(by_product, by_sets)
    np.testing.assert_array_equal(by_sets, masks @ counts.T.astype(np.float64))


def test_the_sparse_product_in_float32_gives_the_float64_sums() -> None:
    """Below 2**24 records in all the product runs in float32: counts whose sums reach
    just under 2**24 (where a float32 sum of larger whole numbers would round) give the
    float64 sums to the bit, as float64; one record more and the product stays in float64."""
    rng = np.random.default_rng(8)
    counts = rng.integers(1, 1_600, size=(60, 400)) * (rng.random((60, 400)) < 0.8)
    assert counts.sum() < (1 << 24)
    counts[0, 0] += (1 << 24) - 1 - int(counts.sum())  # the records in all: 2**24 - 1
    nonzero = anonymizer.joint.GroupValueCounts.of_dense(counts)
    matrix = anonymizer.joint._csr_counts(nonzero)
    assert matrix.dtype == np.float32
    masks = (rng.random((90, 400)) < 0.5).astype(np.float64)
    masks[7] = 1.0  # a query of every value: its c_S(G) is the group's whole count
    got = anonymizer.joint._product_counts(matrix, masks)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, masks @ counts.T.astype(np.float64))
    counts[0, 0] += 1
    assert anonymizer.joint._csr_counts(anonymizer.joint.GroupValueCounts.of_dense(counts)).dtype == np.float64


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 12),
    st.integers(1, 9),
    st.lists(st.tuples(st.integers(0, 11), st.integers(0, 8)), max_size=80),
)
def test_group_value_counts_of_records_are_the_dense_tables_entries(g: int, v: int, pairs: list) -> None:
    """The counts of records by (group, value), made by one sort of their keys, are the
    nonzero entries of the dense table np.bincount gives, in the same row-major order, and
    every other way to make or read them agrees: from the dense table, from the flat
    positions the copy cache stores, back to the dense table, and per group."""
    pairs = [(a % g, b % v) for a, b in pairs]
    group = np.array([a for a, _ in pairs], dtype=np.int64)
    value = np.array([b for _, b in pairs], dtype=np.int64)
    dense = np.bincount(group * v + value, minlength=g * v).reshape(g, v)
    made = anonymizer.joint.GroupValueCounts.of_records(group, value, (g, v))
    want = anonymizer.joint.GroupValueCounts.of_dense(dense)
    for got in (made, anonymizer.joint.GroupValueCounts.of_flat(made.rows * v + made.column, dense[dense > 0], (g, v))):
        assert got.shape == want.shape == (g, v)
        for name in ("column", "count", "starts", "groups"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
            assert getattr(got, name).dtype == getattr(want, name).dtype
        np.testing.assert_array_equal(got.dense(), dense)
        np.testing.assert_array_equal(got.per_group(), dense.sum(axis=1))
