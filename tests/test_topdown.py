"""The top-down search (``anonymizer.topdown``) against brute force on tiny registers.

Every release is checked by enumeration, not by the search's own bookkeeping: each member
lies in exactly one published-or-empty region (the regions tile the members), a group's
candidates are the register individuals its box holds, every group meets its requirement
(max target over its candidates) with every snapshot record counted, and no split the
search refused would have been admissible (the regions are maximal under the rule).
"""

from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
import pytest
from hierarchy_oracle import ancestor_matrix
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anonymizer.hierarchy import Hierarchy
from anonymizer.release import History, PrivacyParams, SnapshotCodes, anonymize_history, class_targets
from anonymizer.search import Cells, InfeasibleError
from anonymizer.topdown import SPLIT_RULES, partition


def _hierarchy(attribute: str, rows: list[list[str]]) -> Hierarchy:
    return Hierarchy.from_rows(attribute, [(i + 1, r) for i, r in enumerate(rows)], f"{attribute}.csv")


AGE = _hierarchy("age", [["a", "ab", "*"], ["b", "ab", "*"], ["c", "cd", "*"], ["d", "cd", "*"]])
SEX = _hierarchy("sex", [["m", "*"], ["f", "*"]])
ZIP = _hierarchy("zip", [["z1", "*"], ["z2", "*"], ["z3", "*"]])
HS = [AGE, SEX, ZIP]
ANC = [ancestor_matrix(h) for h in HS]


def _holds(node_row: np.ndarray, key_row: np.ndarray) -> bool:
    return all(ANC[a][key_row[a], node_row[a]] for a in range(len(HS)))


@st.composite
def series(draw: st.DrawFn) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]], PrivacyParams, bool, int]:
    n = draw(st.integers(2, 30))
    keys = np.array([[draw(st.integers(0, h.n_leaves - 1)) for h in HS] for _ in range(n)], dtype=np.int64)
    n_sets = draw(st.integers(1, 2))
    strategy = draw(st.sampled_from(["constant", "geometric"]))
    params = PrivacyParams(
        ell=float(draw(st.sampled_from([2, 3]))),
        strategy=strategy,
        k_prime=draw(st.integers(1, 3)) if strategy == "constant" else None,
        alpha=draw(st.sampled_from([1.5, 2.0])) if strategy == "geometric" else None,
    )
    releases = []
    for _ in range(draw(st.integers(1, 3))):
        rows = np.array(sorted(draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=n))), dtype=np.int64)
        sets = np.array([draw(st.sampled_from([-1, -1, *range(n_sets)])) for _ in rows], dtype=np.int64)
        releases.append((rows, sets))
    return keys, releases, params, draw(st.booleans()), n_sets


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(series())
def test_regions_tile_the_members_and_every_group_meets_its_requirement(
    case: tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]], PrivacyParams, bool, int],
) -> None:
    keys, releases, params, presence, n_sets = case
    history = History.empty(np.full(keys.shape[0], params.ell), n_sets)
    for seq, (rows, sets) in enumerate(releases, start=1):
        targets = class_targets(params, history)
        try:
            result = anonymize_history(keys, SnapshotCodes(rows, sets, n_sets), history, params, HS, presence, seed=seq)
        except InfeasibleError:
            # refused only when some cell (one leaf tuple) breaks its requirement on its own:
            # then no partition at all can publish every record
            members = rows if presence else np.arange(keys.shape[0])
            broken = False
            for leaf_tuple in {tuple(k) for k in keys[members]}:
                inside = [i for i in members if tuple(keys[i]) == leaf_tuple]
                n = len(inside)
                for s in range(n_sets):
                    n_s = sum(1 for i, v in zip(rows, sets, strict=True) if v == s and tuple(keys[i]) == leaf_tuple)
                    need = max(targets[history.class_of[i], s] for i in inside)
                    broken |= n_s > 0 and not n >= need * n_s
            assert broken or _root_invalid(keys, rows, sets, n_sets, members, targets, history)
            return
        assert result.suppressed == 0 and result.published.all()
        regions = result.generalization.groups.keys
        members = rows if presence else np.arange(keys.shape[0])
        for i in members:  # tiling: exactly one region holds each member
            assert sum(_holds(regions[g], keys[i]) for g in range(regions.shape[0])) == 1
        for g in range(result.group_nodes.shape[0]):
            inside = [i for i in members if _holds(result.group_nodes[g], keys[i])]
            assert result.group_candidates[g] == (
                sum(1 for i in rows if _holds(result.group_nodes[g], keys[i])) if presence else len(inside)
            )
            holding = [v for i, v in zip(rows, sets, strict=True) if _holds(result.group_nodes[g], keys[i])]
            for s in range(n_sets):
                n_s = holding.count(s)
                assert n_s == result.group_counts[g, s]
                if n_s:
                    need = max(targets[history.class_of[i], s] for i in inside)
                    assert result.group_candidates[g] >= need * n_s
        history = result.history
        surv, _ = history.dense()
        assert all(1 - Fraction(float(p)) <= Fraction(1) / Fraction(params.ell) for p in surv.ravel())


def _root_invalid(keys, rows, sets, n_sets, members, targets, history) -> bool:  # type: ignore[no-untyped-def]
    """Whether the whole domain (one region) breaks its requirement: the search then had to
    split regions by force and may end on a broken cell it could have avoided only by
    chance; the refusal is still safe (nothing is published)."""
    n = len(members)
    for s in range(n_sets):
        n_s = int(np.sum(sets == s))
        need = max(targets[history.class_of[i], s] for i in members)
        if n_s and not n >= need * n_s:
            return True
    return False


def _cells(keys: np.ndarray, counts: list[list[int]], requirement: float) -> Cells:
    c = keys.shape[0]
    return Cells(
        keys=keys,
        candidates=np.full(c, 10, dtype=np.int64),
        records=np.array([sum(r) for r in counts]),
        counts=np.array(counts, dtype=np.int64),
        requirement=np.full((c, 1), requirement),
    )


def test_a_region_is_narrowed_to_the_common_ancestor_of_its_cells() -> None:
    """Two cells under 'ab' with the same sex and zip that cannot be split (apart, age a
    would have 10 candidates for its record, under 15): one region, published as ab/m/z1."""
    cells = _cells(np.array([[0, 0, 0], [1, 0, 0]]), [[1], [0]], requirement=15.0)
    gen = partition(cells, HS, presence=False)
    assert gen.groups.keys.tolist() == [[AGE.node("ab"), SEX.node("m"), ZIP.node("z1")]]


@pytest.mark.parametrize("rule", SPLIT_RULES)
def test_a_split_is_kept_only_when_every_part_meets_its_requirement(rule: str) -> None:
    """Age a and b, 10 candidates each, one record of the value in a: together 20/1 meets
    15, apart a's 10/1 does not, so they stay together; under requirement 10 they split
    (10/1 meets 10: a ratio equal to the requirement meets it)."""
    keys = np.array([[0, 0, 0], [1, 0, 0]])
    model = "parts" if rule == "width_gain" else "published"  # width_gain reads unpublished record counts
    # the history rule reads its estimates from the statistics file: none yet (a first release)
    estimate = np.zeros((2, 1)) if rule == "history" else None
    for requirement, groups in ((10.0, 2), (15.0, 1)):
        cells = _cells(keys, [[1], [0]], requirement)
        assert partition(cells, HS, False, rule, model, estimate=estimate).groups.keys.shape[0] == groups


def test_under_the_published_model_a_part_must_hold_for_every_placement_of_its_region() -> None:
    """One record of the value in age a and one in b, 10 candidates each, requirement 10:
    each part meets it on its own counts (10/1), so the parts model splits. The published
    model does not: it may not read the parts' counts, and a part holding both records
    (10/2) would break the requirement, so the region stays whole (20/2 meets 10) and a
    region left whole says nothing about where its records are."""
    keys = np.array([[0, 0, 0], [1, 0, 0]])
    cells = _cells(keys, [[1], [1]], 10.0)
    assert partition(cells, HS, False, model="parts").groups.keys.shape[0] == 2
    assert partition(cells, HS, False, model="published").groups.keys.shape[0] == 1
    assert partition(_cells(keys, [[1], [0]], 10.0), HS, False, model="published").groups.keys.shape[0] == 2


def test_the_width_gain_rule_is_refused_under_the_published_model() -> None:
    with pytest.raises(ValueError, match="width_gain split rule reads unpublished record counts"):
        partition(_cells(np.array([[0, 0, 0]]), [[0]], 2.0), HS, False, "width_gain", "published")


def test_an_exhausted_pair_is_separated_from_the_value_by_a_forced_split() -> None:
    """The whole domain breaks its requirement (one cell's candidates may never again be
    linked to the value: requirement inf), but a split separates that cell from every
    record of the value, so the release goes ahead."""
    keys = np.array([[0, 0, 0], [3, 1, 2]])
    cells = Cells(
        keys=keys,
        candidates=np.array([10, 10]),
        records=np.array([0, 1]),
        counts=np.array([[0], [1]]),
        requirement=np.array([[np.inf], [2.0]]),
    )
    gen = partition(cells, HS, presence=False)
    assert gen.groups.keys.shape[0] == 2 and gen.groups.counts[gen.group_of_cell[0], 0] == 0


def test_a_cell_that_breaks_its_requirement_alone_is_refused() -> None:
    cells = _cells(np.array([[0, 0, 0]]), [[1]], requirement=np.inf)
    with pytest.raises(InfeasibleError):
        partition(cells, HS, presence=False)


def test_the_same_inputs_give_the_same_partition() -> None:
    rng = np.random.default_rng(3)
    keys = np.stack([rng.integers(0, h.n_leaves, 40) for h in HS], axis=1)
    counts = rng.integers(0, 2, (40, 1)).tolist()
    a, b = (partition(_cells(keys, counts, 4.0), HS, False) for _ in range(2))
    assert np.array_equal(a.groups.keys, b.groups.keys) and np.array_equal(a.group_of_cell, b.group_of_cell)


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(series(), st.integers(1, 3))
def test_the_anonymizer_by_blocks_is_the_anonymizer_in_one_piece(
    case: tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]], PrivacyParams, bool, int], block: int
) -> None:
    """The register's pairs are counted and its history keys written a block at a time
    (4M individuals in a release): with blocks of 1-3 individuals, and the register given as
    coded rows, every release and state is the one computed in one piece from the dense
    leaf ids; the update overwrites only an array its caller gave it to overwrite."""
    import anonymizer.arrays as arrays
    import anonymizer.release as release
    from anonymizer.arrays import CodedRows

    keys, releases, params, presence, n_sets = case
    coded = CodedRows.of(keys, [h.n_leaves for h in HS])
    whole = small = History.empty(np.full(keys.shape[0], params.ell), n_sets)
    for seq, (rows, sets) in enumerate(releases, start=1):
        codes = SnapshotCodes(rows, sets, n_sets)
        try:
            a = anonymize_history(keys, codes, whole, params, HS, presence, seed=seq)
        except InfeasibleError as exc:
            with pytest.MonkeyPatch.context() as mp, pytest.raises(InfeasibleError, match=re.escape(str(exc))):
                mp.setattr(arrays, "_BLOCK", block)
                mp.setattr(release, "_BLOCK", block)
                anonymize_history(coded, codes, small, params, HS, presence, seed=seq)
            return
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(arrays, "_BLOCK", block)
            mp.setattr(release, "_BLOCK", block)
            b = anonymize_history(coded, codes, small, params, HS, presence, seed=seq)
            group_of_ind = np.where(np.arange(keys.shape[0]) % 2 == 0, 0, -1).astype(np.int64)
            given = group_of_ind.copy()
            n_j, counts = np.array([max(1, keys.shape[0])]), np.ones((1, n_sets), dtype=np.int64)
            kept = release.advance_history(whole, given, n_j, counts)[0]
            assert np.array_equal(given, group_of_ind)  # not the caller's to overwrite
            mine = release.advance_history(whole, given, n_j, counts, overwrite=True)[0]
        assert np.array_equal(kept.class_of, mine.class_of) and np.array_equal(kept.survival, mine.survival)
        # a new class per (old class, group or none), numbered by first appearance
        pairs = list(zip(whole.class_of.tolist(), group_of_ind.tolist(), strict=True))
        assert mine.class_of.tolist() == [list(dict.fromkeys(pairs)).index(p) for p in pairs]
        for name in ("published", "group_of_record", "group_nodes", "group_candidates", "group_counts"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name
        for name in ("class_of", "survival", "linked", "ell"):
            x, y = getattr(a.history, name), getattr(b.history, name)
            assert x.dtype == y.dtype and np.array_equal(x, y), name
        whole, small = a.history, b.history


def test_a_history_of_other_individuals_is_refused() -> None:
    """A history must have one class per register individual: one of another length is an
    error, never cut or broadcast to the register; the update's keys are int64 whatever
    the classes' integer type."""
    import anonymizer.release as release

    keys = np.array([[AGE.node("a"), SEX.node("m"), ZIP.node("z1")]] * 3)
    params = PrivacyParams(ell=2.0, strategy="constant", k_prime=2)
    codes = SnapshotCodes(np.array([0]), np.array([0]), 1)
    for n in (1, 5):
        with pytest.raises(ValueError, match=f"a history of {n} individuals"):
            anonymize_history(keys, codes, History.empty(np.full(n, 2.0), 1), params, HS, False)
        with pytest.raises(ValueError, match=f"a history of {n} individuals"):
            release.advance_history(
                History.empty(np.full(n, 2.0), 1),
                np.zeros(3, dtype=np.int64),
                np.array([3]),
                np.ones((1, 1), dtype=np.int64),
            )
    # 70,000 classes as int32 and 40,000 groups: class * (G + 1) passes 2**31
    many = History(
        np.array([69_999, 0], dtype=np.int32),
        np.ones((70_000, 1)),
        np.zeros((70_000, 1), dtype=np.int64),
        np.full(70_000, 2.0),
    )
    groups, n_j, counts = np.array([39_999, 0]), np.full(40_000, 2), np.ones((40_000, 1), dtype=np.int64)
    parent = release.advance_history(many, groups, n_j, counts)[1]
    assert parent.tolist() == [69_999, 0]


def test_the_split_rule_is_the_callers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule reaches the search as an argument of anonymize_history (no module constant to
    overwrite): the rule the published-count model refuses is refused when passed."""
    from anonymizer import topdown

    keys = np.array([[a, s, z] for a in range(4) for s in range(2) for z in range(3)], dtype=np.int64)
    sets = np.full(len(keys), -1)
    sets[[0, 23]] = 0
    codes = SnapshotCodes(np.arange(len(keys)), sets, 1)
    history = History.empty(np.full(len(keys), 2.0), 1)
    params = PrivacyParams(ell=2.0, strategy="constant", k_prime=2)
    with pytest.raises(ValueError, match="width_gain"):
        anonymize_history(keys, codes, history, params, HS, False, split_rule="width_gain")
    rules: list[str] = []
    real = topdown.partition
    monkeypatch.setattr(topdown, "partition", lambda *args, **kw: rules.append(args[3]) or real(*args, **kw))
    anonymize_history(keys, codes, history, params, HS, False, split_rule="balanced")
    anonymize_history(keys, codes, history, params, HS, False)
    assert rules == ["balanced", topdown.DEFAULT_SPLIT_RULE]
