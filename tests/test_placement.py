"""The ``history`` split rule (anonymizer/placement.py): its estimate, its criterion, and
that the partition it makes stays a function of published data (docs/threat-model.md, "The
partition as evidence").

The worlds test: two snapshots whose records carry the same values within every published
group (so every region the search looked at held the same counts) but differently inside
the parts of the splits it refused must get the same partition, given the same statistics
file. A rule that read the current snapshot's per-part counts fails it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from anonymizer.hierarchy import Hierarchy
from anonymizer.placement import cell_estimates, split_gain
from anonymizer.release import History, PrivacyParams, ReleaseResult, SnapshotCodes, anonymize_history
from anonymizer.search import InfeasibleError


def _hierarchy(attribute: str, rows: list[list[str]]) -> Hierarchy:
    return Hierarchy.from_rows(attribute, [(i + 1, r) for i, r in enumerate(rows)], f"{attribute}.csv")


AGE = _hierarchy(
    "age",
    [[a, a[0] + "x", "*"] for a in ("a1", "a2", "b1", "b2")] + [[a, a[0] + "x", "*"] for a in ("c1", "c2")],
)
SEX = _hierarchy("sex", [["m", "*"], ["f", "*"]])
EDU = _hierarchy("edu", [["p", "low", "*"], ["s", "low", "*"], ["u", "high", "*"], ["d", "high", "*"]])
HIERARCHIES = [AGE, SEX, EDU]


def test_a_cell_s_estimate_sums_its_individuals_hazards() -> None:
    survival = np.array([[1.0, 1.0], [0.5, 0.75]])
    est = cell_estimates(np.array([0, 0, 1]), np.array([2, 1, 3]), np.array([0, 1, 1]), survival, 2)
    np.testing.assert_allclose(est, [[math.log(2), math.log(4 / 3)], [3 * math.log(2), 3 * math.log(4 / 3)]])


def test_the_gain_is_the_g_statistic_of_the_parts_rates() -> None:
    # region 0: parts of 10 candidates, estimates 2 and 0 (rate 0.1): 2 ln(2 / 1); region 1:
    # the same rate in both parts: no gain; region 2: no estimate at all
    gain = split_gain(
        np.array([[2.0], [0.0], [1.0], [3.0], [0.0], [0.0]]),
        np.array([10, 10, 5, 15, 4, 4]),
        np.array([0, 0, 1, 1, 2, 2]),
        3,
    )
    np.testing.assert_allclose(gain, [2 * math.log(2), 0.0, 0.0], atol=1e-12)


def _release(keys: np.ndarray, rows: np.ndarray, sets: np.ndarray, history: History, rule: str) -> ReleaseResult:
    params = PrivacyParams(ell=2.0, strategy="constant", k_prime=4, split_rule=rule)
    try:
        return anonymize_history(keys, SnapshotCodes(rows, sets, 2), history, params, HIERARCHIES, False)
    except InfeasibleError:
        assume(False)  # a refused release publishes no partition
        raise


@st.composite
def _series(draw: st.DrawFn) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    n = draw(st.integers(30, 90))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    keys = np.stack([rng.integers(0, h.n_leaves, n) for h in HIERARCHIES], axis=1)
    snaps = []
    for _ in range(3):
        rows = np.sort(rng.choice(n, size=int(rng.integers(n // 3, n)), replace=False))
        # value 0 leans to the young, value 1 to the educated: an association to find
        p0 = np.where(keys[rows, 0] < 2, 0.12, 0.02)
        p1 = np.where(keys[rows, 2] >= 2, 0.1, 0.02)
        u = rng.random(rows.size)
        snaps.append((rows, np.where(u < p0, 0, np.where(u < p0 + p1, 1, -1)).astype(np.int64)))
    return keys, snaps


def _groups(result: ReleaseResult) -> set[tuple[int, ...]]:
    return {tuple(int(x) for x in row) for row in result.generalization.groups.keys}


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_series())
def test_before_any_release_the_history_rule_splits_as_the_widest(
    case: tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]],
) -> None:
    keys, snaps = case
    empty = History.empty(np.full(keys.shape[0], 2.0), 2)
    rows, sets = snaps[0]
    assert _groups(_release(keys, rows, sets, empty, "history")) == _groups(_release(keys, rows, sets, empty, "widest"))


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_series(), st.integers(0, 2**31 - 1))
def test_worlds_with_the_same_published_counts_get_the_same_partition(
    case: tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]], shuffle_seed: int
) -> None:
    keys, snaps = case
    history = History.empty(np.full(keys.shape[0], 2.0), 2)
    rng = np.random.default_rng(shuffle_seed)
    for seq, (rows, sets) in enumerate(snaps, start=1):
        observed = _release(keys, rows, sets, history, "history")
        # the other world: the same individuals present, each final group's values dealt
        # among its records at random (a group's counts, so every region's, are unchanged)
        group = observed.group_of_record  # nothing is suppressed under the mechanism-aware model
        other = sets.copy()
        for g in np.unique(group):
            at = np.flatnonzero(group == g)
            other[at] = sets[rng.permutation(at)]
        event(f"release {seq}: the other world differs: {bool((other != sets).any())}")
        again = _release(keys, rows, other, history, "history")
        assert _groups(again) == _groups(observed), seq
        np.testing.assert_array_equal(again.group_counts, observed.group_counts)
        if seq > 1:
            widest = _groups(_release(keys, rows, sets, history, "widest"))
            event(f"release {seq}: the history rule cuts elsewhere than widest: {widest != _groups(observed)}")
        history = observed.history


def test_the_history_rule_is_refused_under_presence_dilution() -> None:
    keys = np.zeros((4, 3), dtype=np.int64)
    params = PrivacyParams(ell=2.0, split_rule="history")
    snapshot = SnapshotCodes(np.arange(4), np.array([0, -1, -1, -1]), 1)
    with pytest.raises(ValueError, match="register dilution"):
        anonymize_history(keys, snapshot, History.empty(np.full(4, 2.0), 1), params, HIERARCHIES, True)


def test_the_history_rule_is_refused_with_the_bottom_up_search() -> None:
    with pytest.raises(ValueError, match="topdown"):
        PrivacyParams(ell=2.0, algorithm="bottomup", partition_model="parts", split_rule="history")
