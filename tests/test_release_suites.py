"""Release suites (checks/release_suites.py), their custom expectations
(checks/expectations.py) and the independent breach recomputation (checks/breach.py).

A tiny register (60 people, three QIs) is anonymized by the real anonymizer to give a good
draft; damaged copies of it must each fail the right suite with a specific message.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hierarchy_oracle import ancestor_matrix, leaf_counts

from anonymizer.hierarchy import Hierarchy
from anonymizer.regions import overlapping_pairs
from anonymizer.release import PrivacyParams, anonymize_release
from checks.breach import (
    BreachComputation,
    Draft,
    Population,
    PriorState,
    SnapshotRecords,
    breach_table,
    compute_breach,
    region_spans,
)
from checks.expectations import (
    ExpectBreachProbabilityAtMost,
    ExpectGroupRegionsPairwiseDisjoint,
    ExpectGroupsLDiverse,
)
from checks.gx import run_suite
from checks.release_suites import release_suite

QIS = ["sex", "zipcode", "age"]
SENSITIVE = "disease"
DISEASES = ["flu", "cold", "fever", "gastritis", "hiv", "cancer"]
PROTECTED = ["hiv", "cancer"]
ELL = 2.0
ZIPS = {"65001": "6500*", "65002": "6500*", "65003": "6500*", "65011": "6501*", "65012": "6501*", "65013": "6501*"}
THRESHOLDS: dict[str, float | None] = {
    "max_suppression_rate": 0.1,
    "max_query_error": None,
    "max_avg_group_size": 60.0,
    "max_group_size": 60.0,
}


def _hierarchy(attribute: str, rows: list[list[str]]) -> Hierarchy:
    return Hierarchy.from_rows(attribute, [(i + 1, r) for i, r in enumerate(rows)], attribute)


def _hierarchies() -> dict[str, Hierarchy]:
    ages = [
        [str(a), f"[{a // 5 * 5}, {a // 5 * 5 + 4}]", f"[{a // 10 * 10}, {a // 10 * 10 + 9}]", "*"]
        for a in range(20, 40)
    ]
    return {
        "sex": _hierarchy("sex", [["M", "*"], ["F", "*"]]),
        "zipcode": _hierarchy("zipcode", [[z, p, "*"] for z, p in ZIPS.items()]),
        "age": _hierarchy("age", ages),
    }


class Case:
    """A register, a snapshot, and the draft the anonymizer makes of it."""

    def __init__(self, presence: bool = False, seed: int = 3) -> None:
        rng = np.random.default_rng(seed)
        self.h = _hierarchies()
        n = 60
        self.register = pd.DataFrame(
            {
                "id": [f"p{i:03d}" for i in range(n)],
                "sex": rng.choice(["M", "F"], n),
                "zipcode": rng.choice(list(ZIPS), n),
                "age": rng.integers(20, 40, n).astype(str),
            }
        )
        self.keys = np.stack([self.h[q].leaf_codes(self.register[q]) for q in QIS], axis=1)
        self.present = np.sort(rng.choice(n, 45, replace=False))
        self.disease = rng.choice(DISEASES, self.present.size, p=[0.25, 0.25, 0.2, 0.1, 0.1, 0.1])
        record_set = np.array([PROTECTED.index(d) if d in PROTECTED else -1 for d in self.disease])
        self.record_set = record_set
        self.presence = presence
        self.survival = np.ones((n, len(PROTECTED)))
        result = anonymize_release(
            self.keys,
            self.present,
            record_set,
            len(PROTECTED),
            self.survival,
            np.zeros((n, len(PROTECTED)), dtype=np.int64),
            np.full(n, ELL),
            PrivacyParams(ell=ELL, strategy="constant", k_prime=4),
            [self.h[q] for q in QIS],
            presence,
            budget=0,
            seed=1,
        )
        self.result = result
        pub = result.published
        nodes = result.group_nodes[result.group_of_record[pub]]
        self.draft = pd.DataFrame(
            {q: [self.h[q].labels[int(x)] for x in nodes[:, a]] for a, q in enumerate(QIS)}
            | {SENSITIVE: self.disease[pub]}
        )
        self.suppression_rate = result.suppressed / self.present.size

    def draft_of(self, draft: pd.DataFrame | None = None) -> Draft:
        return Draft(self.draft if draft is None else draft, QIS, SENSITIVE, self.h)

    def population(self) -> Population:
        return Population(
            self.keys, self.register["id"].to_numpy(), self.presence, self.present if self.presence else None
        )

    def prior(self) -> PriorState:
        return PriorState(PROTECTED, self.survival, ELL)

    def computation(
        self, draft: pd.DataFrame | None = None, snapshot: SnapshotRecords | None = None, per_unit: bool = False
    ) -> BreachComputation:
        return compute_breach(self.draft_of(draft), self.population(), self.prior(), snapshot, per_unit=per_unit)

    def suites(
        self,
        draft: pd.DataFrame | None = None,
        snapshot: SnapshotRecords | None = None,
        per_unit: bool = False,
        **over: Any,
    ) -> dict[str, Any]:
        args: dict[str, Any] = {
            "thresholds": THRESHOLDS,
            "metrics": {"suppression_rate": self.suppression_rate},
            "sensitive_domain": DISEASES,
        }
        args.update(over)
        breach = self.computation(draft, snapshot, per_unit)
        results = release_suite(self.draft_of(draft), breach, ELL, **args)
        return {r.suite: r for r in results}

    def breach(self, draft: pd.DataFrame | None = None) -> pd.DataFrame:
        return breach_table(self.draft_of(draft), self.population(), self.prior())


@pytest.fixture(scope="module")
def case() -> Case:
    return Case()


def _failed(results: dict[str, Any]) -> set[str]:
    return {name for name, r in results.items() if not r.success}


# ------------------------------------------------------------------ the good draft


@pytest.mark.parametrize("presence", [False, True])
def test_good_draft_passes_every_suite(presence: bool) -> None:
    c = Case(presence=presence)
    assert len(c.draft) > 30
    results = c.suites()
    assert list(results) == ["contract", "disjointness", "guarantee", "localized", "utility"]
    assert _failed(results) == set(), {k: r.failures for k, r in results.items()}
    assert all(len(r.sha256) == 64 for r in results.values())
    # the guarantee expectation saw every (individual, value) pair of the breach table
    guarantee = results["guarantee"].result["results"][0]["result"]
    assert guarantee["element_count"] == len(c.breach()) > 0


def _brute_force(c: Case, draft: pd.DataFrame) -> dict[tuple[str, str], tuple[float, int, int]]:
    """Per individual, in Python: the group covering it, n_j, n_s and p."""
    anc = {q: ancestor_matrix(c.h[q]) for q in QIS}
    groups = draft.groupby(QIS, sort=False)
    out: dict[tuple[str, str], tuple[float, int, int]] = {}
    members = c.present if c.presence else range(len(c.register))
    for labels, g in groups:
        nodes = [c.h[q].node(str(lab)) for q, lab in zip(QIS, labels, strict=True)]
        covered = [i for i in members if all(anc[q][c.keys[i, a], nodes[a]] for a, q in enumerate(QIS))]
        n_j = len(g) if c.presence else len(covered)
        for s_i, s in enumerate(PROTECTED):
            n_s = int((g[SENSITIVE] == s).sum())
            if n_s == 0:
                continue
            for i in covered:
                p = 1 - c.survival[i, s_i] * (1 - n_s / n_j)
                out[(str(c.register["id"][i]), s)] = (p, n_j, n_s)
    return out


@pytest.mark.parametrize("presence", [False, True])
def test_breach_table_matches_brute_force(presence: bool) -> None:
    c = Case(presence=presence)
    c.survival = np.random.default_rng(5).uniform(0.6, 1.0, c.survival.shape)
    table = c.breach()
    expected = _brute_force(c, c.draft)
    assert len(table) == len(expected) > 0
    got = {
        (str(i), str(v)): (float(p), int(n_j), int(n_s))
        for i, v, p, n_j, n_s in zip(
            table["individual"], table["value"], table["p"], table["n_j"], table["n_s"], strict=True
        )
    }
    assert got.keys() == expected.keys()
    for k, (p, n_j, n_s) in expected.items():
        assert got[k][1:] == (n_j, n_s)
        assert got[k][0] == pytest.approx(p, abs=1e-15)
    assert (table["exceeds"] == (table["p"] > 1 / ELL)).all()
    # the anonymizer's own candidate counts agree with the independent ones
    assert sorted(table.groupby("group")["n_j"].first().tolist()) == sorted(
        c.result.group_candidates[np.flatnonzero(c.result.group_counts.sum(axis=1))].tolist()
    )


# ------------------------------------------------------------------ damaged drafts


def test_identifier_column_fails_contract(case: Case) -> None:
    draft = case.draft.assign(id=[f"p{i:03d}" for i in range(len(case.draft))])
    results = case.suites(draft)
    assert "contract" in _failed(results)
    (msg,) = results["contract"].failures
    assert "no identifier column" in msg and "'id'" in msg


def test_value_outside_hierarchy_fails_contract(case: Case) -> None:
    draft = case.draft.copy()
    draft.loc[3, "zipcode"] = "99999"
    results = case.suites(draft)
    assert "contract" in _failed(results)
    (msg,) = results["contract"].failures
    assert "'zipcode' is a node label" in msg and "1 unexpected value(s)" in msg and "'99999'" in msg
    assert "at row(s) [3]" in msg


def test_overlapping_region_fails_disjointness(case: Case) -> None:
    draft = case.draft.copy()
    row = draft.iloc[0].copy()
    age_node = case.h["age"].node(row["age"])
    child = int(np.flatnonzero(case.h["age"].parent == age_node)[0])  # a node below the group's age
    row["age"] = case.h["age"].labels[child]
    draft = pd.concat([draft, row.to_frame().T], ignore_index=True)
    results = case.suites(draft)
    assert "disjointness" in _failed(results)
    (msg,) = results["disjointness"].failures
    assert "pairwise disjoint" in msg and "1 unexpected value(s)" in msg
    assert repr(case.h["age"].labels[child]) in msg and repr(case.h["age"].labels[age_node]) in msg


def _group_with(c: Case, value: str) -> pd.Series:
    holding = c.draft[c.draft[SENSITIVE] == value]
    assert len(holding), value
    return holding.iloc[0]


def test_record_added_breaks_guarantee() -> None:
    # presence mode: n_j is the record count, so added hiv records raise n_s/n_j past 1/ℓ
    case = Case(presence=True)
    row = _group_with(case, "hiv")
    in_group = (case.draft[QIS] == row[QIS].tolist()).all(axis=1)
    records, n_s = int(in_group.sum()), int((case.draft.loc[in_group, SENSITIVE] == "hiv").sum())
    extra = max(1, records - 2 * n_s + 1)
    added = pd.concat([case.draft, pd.DataFrame([row] * extra)], ignore_index=True)
    results = case.suites(added)
    assert "guarantee" in _failed(results)
    assert {"contract", "disjointness"}.isdisjoint(_failed(results))
    bad = case.breach(added)
    violating = int(bad["exceeds"].sum())
    assert violating > 0
    msg, named = results["guarantee"].failures
    assert "global guarantee" in msg and f"{violating} unexpected value(s)" in msg
    # the second line names the violating pairs by register id, largest p first
    worst = bad[bad["exceeds"]].sort_values("p", ascending=False, kind="stable").iloc[0]
    people = bad.loc[bad["exceeds"], "individual"].nunique()
    assert named.startswith(f"{violating} (individual, protected value) pair(s) of {people} individual(s) above 1/2")
    assert f"individual {str(worst['individual'])!r} and 'hiv': p = {worst['p']:.6f}" in named


def test_records_beyond_register_fail_localized(case: Case) -> None:
    row = case.draft.iloc[0]
    added = pd.concat([case.draft, pd.DataFrame([row] * 60)], ignore_index=True)
    results = case.suites(added)
    assert "localized" in _failed(results)
    assert any("more records than register individuals" in m for m in results["localized"].failures)


def test_share_above_bound_fails_localized(case: Case) -> None:
    # a group whose records all carry the same protected value
    row = _group_with(case, "cancer")
    labels = row[QIS].tolist()
    draft = case.draft.copy()
    draft.loc[(draft[QIS] == labels).all(axis=1), SENSITIVE] = "cancer"
    results = case.suites(draft)
    assert "localized" in _failed(results)
    (msg,) = results["localized"].failures
    assert "localized 2-diversity" in msg and "1 unexpected value(s)" in msg


def test_suppression_above_threshold_fails_utility(case: Case) -> None:
    results = case.suites(metrics={"suppression_rate": 0.25})
    assert _failed(results) == {"utility"}
    (msg,) = results["utility"].failures
    assert "suppression_rate at most max_suppression_rate = 0.1" in msg and "0.25" in msg


def test_a_gain_below_min_gain_fails_utility_and_one_above_passes(case: Case) -> None:
    """min_gain is a lower bound on the release's gain over the histogram-only baseline."""
    results = case.suites(thresholds={"min_gain": 0.05}, metrics={"query_gain": 0.01})
    assert _failed(results) == {"utility"}
    (msg,) = results["utility"].failures
    assert "query_gain at least min_gain = 0.05" in msg
    assert case.suites(thresholds={"min_gain": 0.05}, metrics={"query_gain": 0.2})["utility"].success


def test_utility_group_sizes_and_skipped_thresholds(case: Case) -> None:
    results = case.suites(thresholds={"max_group_size": 2.0})
    assert _failed(results) == {"utility"}
    assert "max_group_size" in results["utility"].failures[0]
    results = case.suites(thresholds={})
    assert results["utility"].success


# ------------------------------------------------------------------ the paper's Figures 2 and 4


def _paper_case(group_size: int) -> tuple[pd.DataFrame, dict[str, Hierarchy], np.ndarray]:
    """8 people, one QI; o2 (person 1) was linked to chlamydia once in a group of this size
    and is again in the draft (presence mode)."""
    h = {"age": _hierarchy("age", [[str(a), f"{a // 2}x2", f"{a // 4}x4", "*"] for a in range(8)])}
    level = {2: 1, 4: 2}[group_size]
    nodes = h["age"].leaf_nodes[level]
    labels = [h["age"].labels[int(x)] for x in nodes]
    disease = ["flu", "chlamydia", "flu", "cold", "cold", "chlamydia", "flu", "flu"] if group_size == 2 else [
        "flu", "chlamydia", "flu", "cold", "cold", "flu", "chlamydia", "flu"]  # fmt: skip
    survival = np.ones((8, 1))
    survival[1] = 1 - 1 / group_size  # release 1 linked o2 to chlamydia with ratio 1/size
    return pd.DataFrame({"age": labels, "disease": disease}), h, survival


@pytest.mark.parametrize(("size", "p", "ok"), [(2, Fraction(3, 4), False), (4, Fraction(7, 16), True)])
def test_paper_figures(size: int, p: Fraction, ok: bool) -> None:
    draft, h, survival = _paper_case(size)
    keys = np.arange(8)[:, None]
    ids = np.array([f"o{i + 1}" for i in range(8)])
    d, population = Draft(draft, ["age"], "disease", h), Population(keys, ids, True, np.arange(8))
    table = breach_table(d, population, PriorState(["chlamydia"], survival, 2.0))
    o2 = table[table["individual"] == "o2"]
    assert len(o2) == 1 and o2["p"].iloc[0] == pytest.approx(float(p), abs=1e-15)
    results = release_suite(d, compute_breach(d, population, PriorState(["chlamydia"], survival, 2.0)), 2.0, {})
    by = {r.suite: r for r in results}
    assert by["guarantee"].success is ok
    assert by["localized"].success  # each release alone is 2-diverse (Principle 1)
    if not ok:
        assert "1 unexpected value(s)" in by["guarantee"].failures[0]  # o2 only: the others have no history


# ------------------------------------------------------------------ the custom expectations on crafted tables


def test_breach_expectation_exact_verdict_wins() -> None:
    table = pd.DataFrame({"p": [0.1, 0.5, 0.5, 0.5 + 1e-12, 0.7], "exceeds": [False, False, True, False, False]})
    r = run_suite("g", table, [ExpectBreachProbabilityAtMost(bound=0.5)])
    assert not r.success
    # row 2: exact verdict True although p == bound; row 4: p clearly above, verdict ignored
    assert r.result["results"][0]["result"]["partial_unexpected_index_list"] == [2, 4]
    ok = run_suite("g", table.iloc[[0, 1, 3]], [ExpectBreachProbabilityAtMost(bound=0.5)])
    assert ok.success


def test_breach_exact_decision_at_the_bound() -> None:
    # p = 1 - 0.75·(1 - 1/3) = 1/2 exactly in rationals; the float may land either side
    h = {"a": _hierarchy("a", [["x", "*"], ["y", "*"], ["z", "*"]])}
    draft = pd.DataFrame({"a": ["*"] * 3, "s": ["hiv", "flu", "flu"]})
    surv = np.full((3, 1), 0.75)
    d, population = Draft(draft, ["a"], "s", h), Population(np.arange(3)[:, None], np.arange(3))
    t = breach_table(d, population, PriorState(["hiv"], surv, 2.0))
    assert len(t) == 3 and not t["exceeds"].any()
    t = breach_table(d, population, PriorState(["hiv"], surv * (1 - 2**-40), 2.0))
    assert t["exceeds"].all()


def test_disjoint_expectation_on_crafted_tables() -> None:
    spans = pd.DataFrame({"a_lo": [0, 0, 5, 2], "a_hi": [4, 4, 9, 2], "b_lo": [0, 3, 0, 0], "b_hi": [2, 5, 9, 9]})
    r = run_suite("d", spans, [ExpectGroupRegionsPairwiseDisjoint(attributes=["a", "b"])])
    assert not r.success
    res = r.result["results"][0]["result"]
    assert res["unexpected_count"] == 2 and res["partial_unexpected_index_list"] == [[0, 3], [1, 3]]
    assert run_suite("d", spans.iloc[[0, 1, 2]], [ExpectGroupRegionsPairwiseDisjoint(attributes=["a", "b"])]).success


def test_overlapping_pairs_against_brute_force() -> None:
    rng = np.random.default_rng(0)
    for trial in range(30):
        g, d = int(rng.integers(2, 40)), int(rng.integers(1, 4))
        lo = rng.integers(0, 10, (g, d))
        hi = lo + rng.integers(0, 4, (g, d))
        if trial % 3 == 0:  # some attributes cuts
            lo[:, 0] = hi[:, 0] = rng.integers(0, 3, g)
        want = [
            (i, j)
            for i, j in itertools.combinations(range(g), 2)
            if all(lo[i, a] <= hi[j, a] and lo[j, a] <= hi[i, a] for a in range(d))
        ]
        count, pairs = overlapping_pairs(lo, hi, max_examples=1000)
        assert count == len(want)
        assert sorted(map(tuple, pairs.tolist())) == want


def test_ldiverse_expectation_on_crafted_tables() -> None:
    groups = pd.DataFrame({"group": [0, 1, 2], "n_j": [4, 5, 3], "max_n_s": [2, 3, 0]})
    r = run_suite("l", groups, [ExpectGroupsLDiverse(ell=2)])
    assert not r.success
    assert r.result["results"][0]["result"]["partial_unexpected_index_list"] == [1]
    assert run_suite("l", groups.iloc[[0, 2]], [ExpectGroupsLDiverse(ell=2)]).success


def test_region_spans_are_dfs_intervals(case: Case) -> None:
    for q in QIS:
        h = case.h[q]
        node_spans = h.index
        lo, hi = node_spans.lo, node_spans.hi
        anc = ancestor_matrix(h)
        assert ((hi - lo + 1) == leaf_counts(h)).all()
        # two nodes share a leaf iff their intervals intersect
        share = (anc.T.astype(int) @ anc.astype(int)) > 0
        inter = (lo[:, None] <= hi[None, :]) & (lo[None, :] <= hi[:, None])
        assert (share == inter).all()
    spans = region_spans(case.draft, QIS, case.h)
    assert len(spans) == len(case.draft.drop_duplicates(QIS))


# ------------------------------------------------------------------ mechanism-aware counts


@pytest.mark.parametrize("presence", [False, True])
def test_mechanism_aware_counts_charge_what_the_draft_left_out(presence: bool) -> None:
    """With the snapshot, n_s is every snapshot record of s in the region, published or
    not: a draft that drops protected records (value-selective suppression) is charged as
    if it had published them, and a draft that drops a whole group fails 'coverage'."""
    c = Case(presence=presence)
    snapshot = SnapshotRecords(c.present, c.record_set)
    full = c.suites(snapshot=snapshot)
    assert list(full) == ["contract", "disjointness", "guarantee", "coverage", "localized", "utility"]
    assert _failed(full) == set(), {k: r.failures for k, r in full.items()}
    before = c.computation(snapshot=snapshot)
    protected_rows = np.flatnonzero(c.draft[SENSITIVE].isin(PROTECTED).to_numpy())
    thinned = c.draft.drop(index=c.draft.index[protected_rows[::2]])
    after = c.computation(thinned, snapshot)
    key = ["individual", "value"]
    merged = before.table.merge(after.table, on=key, suffixes=("", "_after"))
    assert len(merged) == len(before.table) == len(after.table)
    assert (merged["n_s"] == merged["n_s_after"]).all() and (merged["n_j"] == merged["n_j_after"]).all()
    assert (merged["p"] == merged["p_after"]).all()
    # the published-count model sees fewer records and a smaller p
    published = c.computation(thinned)
    assert published.table["n_s"].sum() < after.table["n_s"].sum()
    # a whole group left out: its records lie in no published region
    first_group = c.draft[QIS].apply(tuple, axis=1) == tuple(c.draft[QIS].iloc[0])
    dropped = c.draft[~first_group.to_numpy()]
    results = c.suites(draft=dropped, snapshot=snapshot)
    assert "coverage" in _failed(results)
    assert c.computation(dropped, snapshot).uncovered_records == int(first_group.sum())


@pytest.mark.parametrize("presence", [False, True])
def test_one_row_per_unit_decides_and_names_as_one_row_per_individual(presence: bool) -> None:
    """Validation and the report share one per-unit computation (individuals sharing their
    QI cell and history share every figure): the suites decide the same, and a failure
    names as many pairs and individuals as the expanded table does."""
    c = Case(presence=presence)
    c.survival = np.random.default_rng(7).uniform(0.55, 1.0, c.survival.shape)
    row = _group_with(c, "hiv")
    in_group = (c.draft[QIS] == row[QIS].tolist()).all(axis=1)
    added = pd.concat([c.draft, pd.DataFrame([row] * (3 * int(in_group.sum())))], ignore_index=True)
    for draft in (c.draft, added):
        wide, units = c.suites(draft), c.suites(draft, per_unit=True)
        assert {k: r.success for k, r in wide.items()} == {k: r.success for k, r in units.items()}
        per_unit = c.computation(draft, per_unit=True).table
        assert int(per_unit["weight"].sum()) == len(c.breach(draft))
    assert not units["guarantee"].success
    count = lambda line: line.split(" above ")[0]  # noqa: E731 ("N pair(s) of M individual(s)")
    assert count(wide["guarantee"].failures[-1]) == count(units["guarantee"].failures[-1])
