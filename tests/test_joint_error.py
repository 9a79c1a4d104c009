"""The register-joint estimator's error figure (anonymizer.joint): its variance against an
exact enumeration of every allocation the model allows on a tiny release, its support
against the certain bounds, the flag of conditions that cut a generalized value, and the
clipped intervals."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from test_joint import QIS, VALUES, H, _queries

from anonymizer.joint import Z_90, JointRelease, allocation_variance, error_interval, joint_answers
from anonymizer.workload import QueryRanges

# (zone, age, sex) of every register individual: 7 in zones a/b, 5 in c/d, one in f, two in
# e that no published region holds
REGISTER = [
    ("a", "0", "M"), ("a", "1", "F"), ("a", "1", "M"), ("b", "2", "F"), ("b", "5", "M"), ("b", "7", "F"),
    ("a", "7", "F"), ("c", "3", "M"), ("c", "4", "F"), ("d", "4", "M"), ("d", "6", "F"), ("c", "0", "M"),
    ("f", "5", "F"), ("e", "1", "M"), ("e", "2", "F"),
]  # fmt: skip
# published groups: (zone, age, sex) labels and the sensitive values of their records
GROUPS = [(("ab", "*", "*"), ["s0", "s0", "s1"]), (("cd", "*", "*"), ["s0", "s2", "s2"]), (("f", "5", "F"), ["s3"])]


def _release() -> JointRelease:
    rows = [(*labels, s) for labels, values in GROUPS for s in values]
    published = pd.DataFrame(rows, columns=[*QIS, "s"])
    leaves = np.array([[H[q].leaf_codes(pd.Series([p[k]]))[0] for k, q in enumerate(QIS)] for p in REGISTER])
    return JointRelease.of(published, QIS, "s", [H[q] for q in QIS], leaves, VALUES)


def _in_region(person: tuple[str, ...], labels: tuple[str, ...]) -> bool:
    return all(
        lab == "*" or lab == v or (lab in {"ab", "cd", "ef"} and v in lab)
        for v, lab in zip(person, labels, strict=True)
    )


def _exact(ranges: QueryRanges) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Mean, variance, min and max of every query's count over every allocation the model
    allows: each group's records go to distinct individuals of its region, every
    arrangement equally likely, the groups independently (enumerated, not a formula)."""
    q = ranges.n_queries
    per_group = []
    for labels, values in GROUPS:  # the enumeration loops on purpose
        people = [p for p in REGISTER if _in_region(p, labels)]
        slots = values + [None] * (len(people) - len(values))
        arrangements = sorted(set(itertools.permutations(slots)), key=str)
        counts = np.zeros((len(arrangements), q))
        for a, arrangement in enumerate(arrangements):
            for person, value in zip(people, arrangement, strict=True):
                if value is None:
                    continue
                for i in range(q):
                    ok = ranges.sensitive[i][VALUES.index(value)] and all(
                        ranges.qi[attr][i][H[attr].leaf_codes(pd.Series([person[k]]))[0]] for k, attr in enumerate(QIS)
                    )
                    counts[a, i] += ok
        per_group.append(counts)
    total = per_group[0]
    for counts in per_group[1:]:  # every combination of the groups' arrangements
        total = (total[:, None, :] + counts[None, :, :]).reshape(-1, q)
    return total.mean(axis=0), total.var(axis=0), total.min(axis=0), total.max(axis=0)


@pytest.mark.slow
def test_the_variance_is_the_exact_variance_over_every_allocation() -> None:
    release = _release()
    ranges = _queries(np.random.default_rng(7), 25)
    got = joint_answers(release, ranges)
    mean, var, low, high = _exact(ranges)
    np.testing.assert_allclose(got.estimate, mean, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(got.variance, var, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(got.se, np.sqrt(var), rtol=1e-9, atol=1e-9)
    # the hypergeometric support is the certain bounds
    np.testing.assert_array_equal(got.lower, low)
    np.testing.assert_array_equal(got.upper, high)
    assert (var > 0).sum() >= 10  # the queries exercise the formula


def test_the_variance_is_hypergeometric_not_binomial() -> None:
    # 3 records among 4 individuals, a query holding 2 of them: 3 · ½ · ½ · (4 − 3) / 3
    assert allocation_variance(3, 2, 4) == pytest.approx(0.25)
    # a region whose every individual holds a record leaves nothing to chance
    assert allocation_variance(4, 2, 4) == 0.0
    assert allocation_variance([1, 0], [1, 1], [1, 1]).tolist() == [0.0, 0.0]


def _mask(attr: str, leaves: list[str]) -> np.ndarray:
    h = H[attr]
    m = np.zeros((1, h.n_leaves), dtype=bool)
    m[0, h.leaf_codes(pd.Series(leaves))] = True
    return m


def test_a_condition_cutting_a_generalized_value_is_flagged_on_its_qi() -> None:
    release = _release()
    every = np.ones((1, len(VALUES)), dtype=bool)
    zone = QIS.index("zone")
    cut = joint_answers(release, QueryRanges({"zone": _mask("zone", ["a"])}, VALUES, every))
    assert cut.generalized[0].tolist() == [k == zone for k in range(len(QIS))] and cut.variance[0] > 0
    # whole published values: the count is certain, and nothing is flagged
    whole = joint_answers(release, QueryRanges({"zone": _mask("zone", ["a", "b", "f"])}, VALUES, every))
    assert not whole.generalized.any() and whole.variance[0] == 0.0
    assert whole.estimate[0] == whole.lower[0] == whole.upper[0] == 4
    # a leaf group (zone f) cut by nothing: a condition on age cuts only the '*' of the others
    age = joint_answers(release, QueryRanges({"age": _mask("age", ["5"])}, VALUES, every))
    assert age.generalized[0].tolist() == [k == QIS.index("age") for k in range(len(QIS))]


def test_the_interval_is_clipped_to_the_certain_bounds() -> None:
    low, high = error_interval([5.0, 5.0], [1.0, 10.0], [0, 2], [20, 9], Z_90)
    np.testing.assert_allclose(low, [5 - Z_90, 2.0])
    np.testing.assert_allclose(high, [5 + Z_90, 9.0])
