"""The propensity ratio ρ (docs/threat-model.md, "The propensity ratio").

A group of n candidates holding c records of a value is charged ``min(n, ρ·c)/n``. The
tests check, in exact fractions, that this bounds what an adversary with a non-uniform
propensity reaches whenever the propensity is at most ρ times its mean over the group:

- the learners' re-weighting ``c·π(o)/Σπ`` (the audit's learners, docs/threat-model.md);
- the Bayesian posterior of a prior under which each candidate holds the value
  independently with odds w(o), given that the group holds exactly c records (every
  c-subset of the candidates enumerated);

and that a larger propensity can pass the charge (so the tests can fail). Then the
anonymizer, validation's breach table and the audit charge ρ·c in place of c.
"""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from helpers import make_workspace, read_config, snapshot, write_config
from hypothesis import given, settings
from hypothesis import strategies as st

from anonymizer import privacy
from anonymizer.hierarchy import Hierarchy
from anonymizer.release import History, PrivacyParams, advance_history, anonymize_release, class_targets
from serialpub.analysis.audit import audit_workspace, format_report
from serialpub.config import load_config
from serialpub.workflow.publisher import Publisher


def _charge(n: int, c: int, rho: int) -> Fraction:
    return Fraction(int(privacy.charged_counts(n, c, rho)), n)


def _within(weights: list[int], rho: int) -> bool:
    """max w <= ρ · mean w, in integers."""
    return max(weights) * len(weights) <= rho * sum(weights)


def _posterior(weights: list[int], c: int) -> list[Fraction]:
    """P(o holds the value | exactly c of the group hold it), each candidate independently
    with odds weights[o]: the weight of a c-subset is the product of its members' odds."""
    total = Fraction(0)
    inside = [Fraction(0)] * len(weights)
    for subset in itertools.combinations(range(len(weights)), c):
        w = Fraction(int(np.prod([weights[i] for i in subset], dtype=object)))
        total += w
        for i in subset:
            inside[i] += w
    return [x / total for x in inside]


def test_charged_counts_is_rho_times_the_records_capped_at_the_candidates() -> None:
    assert privacy.charged_counts(np.array([10, 10, 10]), np.array([0, 3, 7]), 2).tolist() == [0, 6, 10]
    assert privacy.charged_counts(np.array([10]), np.array([3]), 1).tolist() == [3]
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="whole number"):
            privacy.charged_counts(np.array([10]), np.array([3]), bad)  # type: ignore[arg-type]


weights_st = st.lists(st.integers(1, 40), min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(weights=weights_st, rho=st.integers(1, 4), data=st.data())
def test_the_learners_share_never_exceeds_the_charge_within_the_ratio(
    weights: list[int], rho: int, data: st.DataObject
) -> None:
    n = len(weights)
    c = data.draw(st.integers(0, n))
    total = sum(weights)
    shares = [min(Fraction(1), Fraction(c * w, total)) for w in weights]
    if _within(weights, rho):
        assert max(shares) <= _charge(n, c, rho)
    else:
        # beyond the ratio the heaviest candidate's share passes ρ·c/n (when it is below 1)
        assert c == 0 or max(shares) > Fraction(rho * c, n) or max(shares) == 1


@settings(max_examples=150, deadline=None)
@given(weights=weights_st, rho=st.integers(1, 4), data=st.data())
def test_the_bayesian_posterior_never_exceeds_the_charge_within_the_ratio(
    weights: list[int], rho: int, data: st.DataObject
) -> None:
    n = len(weights)
    c = data.draw(st.integers(1, n))
    if not _within(weights, rho):
        weights = [min(w, rho * min(weights)) for w in weights]  # bring the odds inside the ratio
    assert _within(weights, rho)
    assert max(_posterior(weights, c)) <= _charge(n, c, rho)


def test_a_propensity_beyond_the_ratio_passes_the_charge() -> None:
    # one candidate 9 times as likely as the 3 others: max/mean = 3, so ρ = 2 does not cover it
    weights = [9, 1, 1, 1]
    assert not _within(weights, 2) and _within(weights, 3)
    assert max(_posterior(weights, 1)) == Fraction(3, 4) > _charge(4, 1, 2)
    assert max(_posterior(weights, 1)) <= _charge(4, 1, 3)


# --------------------------------------------------------------------------- the anonymizer

QI = Hierarchy.from_rows("q", [(i + 1, [f"v{i}", f"b{i // 4}", "*"]) for i in range(16)], "q.csv")


def _series(rho: int, seed: int = 3, params: PrivacyParams | None = None) -> tuple[list, np.ndarray]:
    rng = np.random.default_rng(seed)
    keys = np.repeat(np.arange(16), 25).reshape(-1, 1).astype(np.int64)  # 400 individuals, 16 leaves
    n = keys.shape[0]
    survival, linked = np.ones((n, 1)), np.zeros((n, 1), dtype=np.int64)
    params = params or PrivacyParams(ell=2, strategy="constant", k_prime=4, propensity_ratio=rho)
    out = []
    for _ in range(3):
        individual = np.sort(rng.choice(n, 200, replace=False)).astype(np.int64)
        # the value concentrates on the low leaves: a learnable dependence
        p = np.where(keys[individual, 0] < 4, 0.06, 0.01)
        record_set = np.where(rng.random(individual.size) < p, 0, -1).astype(np.int64)
        res = anonymize_release(
            keys, individual, record_set, 1, survival, linked, np.full(n, 2.0), params, [QI], False, 0, 1
        )
        out.append((res, survival.copy(), linked.copy()))
        survival, linked = res.survival, res.linked
    return out, keys


@pytest.mark.parametrize("rho", [1, 2, 3])
def test_the_anonymizer_charges_rho_times_the_records(rho: int) -> None:
    releases, _ = _series(rho)
    target = privacy.constant_ratio_target(2.0, 4)
    for res, before, _ in releases:
        counts, n_j = res.group_counts[:, 0], res.group_candidates
        held = counts > 0
        assert held.any()  # the value is held somewhere, so the requirement is tested
        # every group holding the value meets ρ times the strategy's ratio
        assert (n_j[held] >= rho * target * counts[held]).all()
        # and every candidate's survival moved by 1 - ρ·c/n_j (Lemma 4 with the charged count)
        expected = privacy.release_factor(n_j[held], rho * counts[held])
        assert set(np.round(res.survival[:, 0] / before[:, 0], 12)) <= set(np.round(expected, 12)) | {1.0}
    # ρ = 1 is the uniform charge: the same as leaving the setting out
    if rho == 1:
        plain, _ = _series(1, params=PrivacyParams(ell=2, strategy="constant", k_prime=4))
        for (ours, _, _), (theirs, _, _) in zip(releases, plain, strict=True):
            assert ours.group_counts.tolist() == theirs.group_counts.tolist()
            assert np.array_equal(ours.survival, theirs.survival)


def test_a_larger_rho_gives_coarser_groups() -> None:
    groups = [len(_series(rho)[0][0][0].group_candidates) for rho in (1, 2, 3)]
    assert groups[0] > groups[2], groups


def test_the_history_factor_uses_the_charged_count() -> None:
    history = History.from_dense(np.ones((4, 1)), np.zeros((4, 1), dtype=np.int64), np.full(4, 2.0))
    n_j, counts = np.array([4]), np.array([[1]])
    new, _, _ = advance_history(history, np.zeros(4, dtype=np.int64), n_j, counts, propensity_ratio=3)
    assert new.dense()[0][:, 0].tolist() == [0.25] * 4  # 1 - 3·1/4
    new, _, _ = advance_history(history, np.zeros(4, dtype=np.int64), n_j, np.array([[2]]), propensity_ratio=3)
    assert new.dense()[0][:, 0].tolist() == [0.0] * 4  # capped at every candidate: a certain link


def test_class_targets_are_rho_times_the_strategy_s() -> None:
    history = History.from_dense(np.ones((2, 1)), np.zeros((2, 1), dtype=np.int64), np.full(2, 2.0))
    one = class_targets(PrivacyParams(ell=2, strategy="constant", k_prime=4), history)
    three = class_targets(PrivacyParams(ell=2, strategy="constant", k_prime=4, propensity_ratio=3), history)
    assert np.array_equal(three, 3 * one)
    with pytest.raises(ValueError, match="propensity_ratio"):
        PrivacyParams(ell=2, propensity_ratio=0)


# --------------------------------------------------------------------------- the pipeline


@pytest.mark.slow
def test_a_series_under_rho_records_it_charges_it_everywhere_and_passes_the_audit(tmp_path: Path) -> None:
    """Published under ρ = 2: the manifest records it, the report says which adversary the
    figures cover, and the audit recomputes the publisher's max p (the ρ-charge's) from the
    public files and passes."""
    root = make_workspace(tmp_path / "ws", n=120, propensity_ratio=2)
    publisher = Publisher(load_config(root))
    for t in range(1, 3):
        publisher.publish(snapshot(root, t))
    folder = root / "releases" / "clinic" / "release-0002"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["propensity_ratio"] == 2
    page = (folder / "report.html").read_text()
    assert 'id="propensity-ratio"' in page and "propensity ratio ρ = 2" in page
    report = audit_workspace(root)
    assert report.ok, format_report(report)
    assert report.max_p == pytest.approx(manifest["max_breach_probability"], abs=1e-12)
    assert "propensity_ratio 2: the verdict covers every adversary" in format_report(report)
    # the learners read the records, not the charge: their uniform row is ρ times smaller at most
    learned = audit_workspace(root, learners=("nb",)).learners
    assert learned is not None
    assert learned.learners[0].max_p <= report.max_p


@pytest.mark.slow
def test_a_uniform_series_records_no_rho_and_the_audit_says_what_it_covers(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    Publisher(load_config(root)).publish(snapshot(root, 1))
    folder = root / "releases" / "clinic" / "release-0001"
    assert "propensity_ratio" not in json.loads((folder / "manifest.json").read_text())
    assert "propensity ratio 1: the figures hold against an adversary whose prior is uniform" in (
        (folder / "report.html").read_text()
    )
    assert "(propensity_ratio 1): the verdict covers an adversary whose prior is uniform" in format_report(
        audit_workspace(root)
    )


# --------------------------------------------------------------------------- ρ per protected value


def test_a_per_value_rho_charges_each_value_with_its_own() -> None:
    n_j, n_s = np.array([[10], [10]]), np.array([[3, 3], [6, 1]])
    assert privacy.charged_counts(n_j, n_s, (2, 1)).tolist() == [[6, 3], [10, 1]]
    assert privacy.charged_counts(n_j, n_s, (1, 1)).tolist() == n_s.tolist()  # every ρ_s = 1: the uniform charge
    # one ρ per pair, as validation's breach table holds them
    assert privacy.charged_counts(np.array([10, 10]), np.array([3, 3]), np.array([3, 1])).tolist() == [9, 3]
    assert privacy.ratio_by_value({"hiv": 3}, ["cancer", "hiv"]) == (1, 3)
    assert privacy.ratio_by_value(2, ["cancer", "hiv"]) == 2
    with pytest.raises(ValueError, match="flu"):
        privacy.ratio_by_value({"flu": 2}, ["cancer", "hiv"])
    with pytest.raises(ValueError, match="whole numbers"):
        privacy.ratio_by_value({"hiv": 0}, ["cancer", "hiv"])
    history = History.from_dense(np.ones((1, 2)), np.zeros((1, 2), dtype=np.int64), np.full(1, 2.0))
    with pytest.raises(ValueError, match="3 values for 2 protected values"):
        class_targets(PrivacyParams(ell=2, propensity_ratio=(1, 2, 3)), history)


def test_a_per_value_rho_moves_each_values_history_and_target_by_its_own() -> None:
    """Exact fractions: a group of 6 candidates holding 1 record of each of two values under
    ρ = (3, 1) moves the first value's survival by 1 - 3/6 and the second's by 1 - 1/6, and
    asks 3 times the strategy's ratio of the first value only."""
    history = History.from_dense(np.ones((6, 2)), np.zeros((6, 2), dtype=np.int64), np.full(6, 2.0))
    new, _, _ = advance_history(
        history, np.zeros(6, dtype=np.int64), np.array([6]), np.array([[1, 1]]), propensity_ratio=(3, 1)
    )
    survival = new.dense()[0]
    assert [Fraction(x).limit_denominator(100) for x in survival[0]] == [Fraction(1, 2), Fraction(5, 6)]
    one = class_targets(PrivacyParams(ell=2, strategy="constant", k_prime=4), history)
    mixed = class_targets(PrivacyParams(ell=2, strategy="constant", k_prime=4, propensity_ratio=(3, 1)), history)
    assert np.array_equal(mixed[:, 0], 3 * one[:, 0]) and np.array_equal(mixed[:, 1], one[:, 1])


@pytest.mark.slow
def test_a_per_value_series_is_recorded_audited_verified_and_imported(tmp_path: Path) -> None:
    """Published under ``propensity_ratio: {hiv: 3}``: the manifests record the mapping, the
    audit recomputes the publisher's max p from it and passes, ``serialpub state verify``
    rebuilds the state from it, and importing the same releases into a fresh copy of the
    workspace gives the publisher's statistics; a copy importing them under ρ = 1 does not
    (the charge is what moves the state)."""
    from test_import import assert_same_statistics, data_file, fresh_copy, statistics_pairs

    from serialpub.analysis.verify import verify_state
    from serialpub.workflow.importing import import_release

    a_root = make_workspace(tmp_path / "A", n=120, propensity_ratio={"hiv": 3})
    ws = load_config(a_root)
    publisher = Publisher(ws)
    for t in range(1, 3):
        publisher.publish(snapshot(a_root, t))
    manifest = json.loads((data_file(a_root, 2).parent / "manifest.json").read_text())
    assert manifest["propensity_ratio"] == {"hiv": 3}
    assert "hiv ρ = 3" in (data_file(a_root, 2).parent / "report.html").read_text()
    report = audit_workspace(a_root)
    assert report.ok, format_report(report)
    assert report.max_p == pytest.approx(manifest["max_breach_probability"], abs=1e-12)
    assert "hiv 3, cancer 1" in format_report(report)
    assert verify_state(ws).ok

    b_root = fresh_copy(a_root, tmp_path / "B")
    uniform_root = fresh_copy(a_root, tmp_path / "U")
    config = read_config(uniform_root)
    del config["propensity_ratio"]
    write_config(uniform_root, config)
    for root in (b_root, uniform_root):
        for seq in (1, 2):
            import_release(load_config(root), data_file(a_root, seq), f"{seq:04d}", 2, ["hiv", "cancer"], "register")
    assert json.loads((data_file(b_root, 2).parent / "manifest.json").read_text())["propensity_ratio"] == {"hiv": 3}
    assert_same_statistics(statistics_pairs(b_root), statistics_pairs(a_root))
    assert verify_state(load_config(b_root)).ok
    assert audit_workspace(b_root).ok
    theirs, ours = statistics_pairs(uniform_root), statistics_pairs(a_root)
    hiv = (ours["value"] == "hiv").to_numpy()
    assert (theirs["survival"].to_numpy()[hiv] > ours["survival"].to_numpy()[hiv]).any()
    np.testing.assert_array_equal(theirs["survival"].to_numpy()[~hiv], ours["survival"].to_numpy()[~hiv])


def test_a_per_value_rho_naming_no_protected_value_is_refused(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws", propensity_ratio={"flu": 2})
    with pytest.raises(Exception, match="propensity_ratio lists 'flu', which is not a protected value"):
        load_config(root)


def test_the_demo_option_takes_one_rho_or_one_per_value() -> None:
    from serialpub.cli.app import ratio_option
    from serialpub.errors import InputError

    assert ratio_option("3") == 3
    assert ratio_option("Tech-support=3, Armed-Forces=2") == {"Tech-support": 3, "Armed-Forces": 2}
    for bad in ("three", "Tech-support=", "=2", "Tech-support=2,4"):
        with pytest.raises(InputError, match=r"--propensity-ratio .*: give a whole number"):
            ratio_option(bad)
