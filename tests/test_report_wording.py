"""serialpub.report.wording: how the report names, explains and cites the figures of
anonymizer.measures (whose numbers are tested in tests/test_measures_*.py): names and order,
units, sources, the notes' parameters and counts, the reasons a figure is not computed, and the
presence-dilution reading of n_j."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pytest

from anonymizer.hierarchy import Hierarchy
from anonymizer.measures.categorical import MAX_EXACT_CATEGORIES, categorical_figures, sensitive_categories
from anonymizer.measures.closeness import closeness_figures
from anonymizer.measures.diversity import diversity_figures
from anonymizer.measures.guarantee import breach_distribution, ratio_budget
from anonymizer.measures.kanonymity_channel import MAX_INPUT_TABLES, ChannelFigures, FactorizedPrivacy, channel_figures
from anonymizer.measures.personalized import personalized_breach, summarize
from anonymizer.measures.qi_groups import group_counts
from anonymizer.measures.reidentification import release_disclosure
from anonymizer.measures.utility import utility_figures
from serialpub.report.measure import Measure
from serialpub.report.render import measure_records
from serialpub.report.wording.categorical import categorical_measures
from serialpub.report.wording.channel import channel_measures
from serialpub.report.wording.closeness import closeness_measures
from serialpub.report.wording.disclosure import disclosure_measures
from serialpub.report.wording.diversity import diversity_measures
from serialpub.report.wording.guarantee import PAPER_004, guarantee_measures
from serialpub.report.wording.personalized import personalized_measures
from serialpub.report.wording.utility import (
    information_loss_measures,
    query_error_measure,
    weighted_query_error_measure,
)

EXACT = 1e-12


def _hier(name: str, rows: list[list[str]]) -> Hierarchy:
    return Hierarchy.from_rows(name, [(i + 1, r) for i, r in enumerate(rows)], f"<{name}>")


def _hsu(
    group: Sequence[int],
    value: Sequence[int],
    n_values: int,
    *,
    candidates: Sequence[int] | None = None,
    hierarchy: Hierarchy | None = None,
    categories: Sequence[Iterable[int]] | None = None,
    dont_care: Iterable[int] | None = None,
    c: float = 3.0,
    ell: int = 2,
    strict: bool = True,
    presence: bool = False,
) -> list[Measure]:
    """Paper 000's measures of a release as the report lists them (serialpub.report.privacy)."""
    gc = group_counts(group, value, n_values)
    out = diversity_measures(
        diversity_figures(gc, candidates=candidates, c=c, ell=ell, strict=strict), presence=presence
    )
    out += closeness_measures(closeness_figures(gc, hierarchy))
    cats = None
    if categories is not None:
        cats = categorical_figures(gc, sensitive_categories(categories, dont_care, n_values), c=c, ell=ell)
    return out + categorical_measures(cats, ell=ell)


# --- paper 000 (Hsu): diversity, closeness, categorical ------------------------------------------

T212_GROUP = [0] * 4 + [1] * 4 + [2] * 4
T212_VALUE = [0, 0, 1, 1, 2, 0, 1, 1, 2, 2, 2, 2]


def test_hsu_names_order_units_and_sources() -> None:
    ms = _hsu(T212_GROUP, T212_VALUE, 3)
    assert [m.name for m in ms] == [
        "k-anonymity",
        "k-anonymity over candidates",
        "distinct ℓ-diversity",
        "entropy ℓ-diversity",
        "recursive (c,ℓ)-diversity, smallest c at ℓ = 2",
        "recursive (c,ℓ)-diversity, largest ℓ at c = 3.0",
        "t-closeness (equal ground distance)",
        "t-closeness (hierarchical ground distance)",
        "ℓ-categorical diversity",
        "d-density control",
        "μ-dilution",
        "(c,ℓ)-categorical recursive diversity, smallest c at ℓ = 2",
        "(c,ℓ)-density control, smallest c at ℓ = 2",
    ]
    by = {m.name: m for m in ms}
    assert by["k-anonymity"].value == 4 and by["k-anonymity"].unit == "records"
    assert by["distinct ℓ-diversity"].value == 1
    assert by["entropy ℓ-diversity"].value == 1.0  # 2^0: block 9-12 is homogeneous
    assert by["t-closeness (equal ground distance)"].value == pytest.approx(7 / 12, abs=EXACT)
    assert by["recursive (c,ℓ)-diversity, smallest c at ℓ = 2"].value == math.inf
    assert by["recursive (c,ℓ)-diversity, largest ℓ at c = 3.0"].value == 1
    for name in ("k-anonymity over candidates", "t-closeness (hierarchical ground distance)", "μ-dilution"):
        assert not by[name].computed
    assert by["k-anonymity over candidates"].note == "no candidate counts given"
    assert by["t-closeness (hierarchical ground distance)"].note == "no sensitive-attribute hierarchy given"
    assert "no sensitive categories configured" in by["ℓ-categorical diversity"].note
    assert all(m.source.startswith(("Hsu 2008 (paper 000) §", "Li, Li")) for m in ms)
    assert all(m.family == "privacy" for m in ms)
    assert "1 of 3 groups are homogeneous" in by["distinct ℓ-diversity"].note
    assert "smallest of 3 QI-groups (12 records); the release is k-anonymous for k ≤ 4" in by["k-anonymity"].note


def test_recursive_diversity_notes_count_the_failing_groups_errata_e5() -> None:
    group = [0] * 10 + [1] * 10 + [2] * 10
    value = [0] * 10 + [1] * 9 + [2] + [3] * 6 + [4] * 2 + [2] * 2
    name = "recursive (c,ℓ)-diversity, smallest c at ℓ = 2"
    loose = {m.name: m for m in _hsu(group, value, 5, c=1.5, ell=2, strict=False)}
    assert "with c = 1.5 and r1 ≤ c·Σ: 2 of 3 groups fail" in loose[name].note
    assert "r1 ≤ c·(r_ℓ+…+r_m)" in loose["recursive (c,ℓ)-diversity, largest ℓ at c = 1.5"].note
    strict = {m.name: m for m in _hsu(group, value, 5, c=1.5, ell=2)}
    assert "with c = 1.5 and r1 < c·Σ: 3 of 3 groups fail" in strict[name].note


def test_hierarchical_closeness_states_the_height() -> None:
    h = _hier("s", [["flu", "resp", "*"], ["pneu", "resp", "*"], ["ulcer", "dig", "*"], ["gastr", "dig", "*"]])
    by = {m.name: m for m in _hsu([0, 0, 1, 1], [0, 2, 1, 3], 4, hierarchy=h)}
    m = by["t-closeness (hierarchical ground distance)"]
    assert m.value == pytest.approx(0.25, abs=EXACT) and m.unit == "EMD"
    assert "H = 2;" in m.note and m.source.startswith("Li, Li & Venkatasubramanian")


def test_categorical_values_and_notes() -> None:
    cats = [{0, 1}, {0, 2}]
    group = [0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2]
    value = [0, 3, 3, 3, 0, 1, 2, 1, 2, 3, 3]
    by = {m.name: m for m in _hsu(group, value, 4, categories=cats, dont_care={3}, c=1.0, ell=1)}
    assert (
        by["ℓ-categorical diversity"].value == 2 and by["ℓ-categorical diversity"].unit == "categories (min set cover)"
    )
    assert by["d-density control"].value == pytest.approx(3 / 4, abs=EXACT)
    assert by["μ-dilution"].value == 0.0
    recursive = by["(c,ℓ)-categorical recursive diversity, smallest c at ℓ = 1"]
    assert recursive.value == pytest.approx(2.0, abs=EXACT)
    assert "with c = 1.0: 1 of 3 groups fail" in recursive.note
    assert "with c = 1.0: 0 groups fail" in by["(c,ℓ)-density control, smallest c at ℓ = 1"].note


def test_categorical_size_limit_is_named() -> None:
    n = MAX_EXACT_CATEGORIES + 1
    by = {m.name: m for m in _hsu([0] * n, list(range(n)), n, categories=[{i} for i in range(n)])}
    for name in ("ℓ-categorical diversity", "(c,ℓ)-categorical recursive diversity, smallest c at ℓ = 2"):
        assert not by[name].computed
        assert by[name].note.startswith("not computed: ") and str(MAX_EXACT_CATEGORIES) in by[name].note
    # the scalable density controls are still computed
    assert by["d-density control"].value == pytest.approx(1 / n, abs=EXACT)
    assert by["(c,ℓ)-density control, smallest c at ℓ = 2"].value == pytest.approx(1 / (n - 1), abs=EXACT)


def test_candidates() -> None:
    by = {m.name: m for m in _hsu(T212_GROUP, T212_VALUE, 3, candidates=[6, 4, 9])}
    m = by["k-anonymity over candidates"]
    assert m.value == 4 and m.unit == "individuals" and "virtual dilution" in m.source


# --- presence dilution ---------------------------------------------------------------------------

#: The register-dilution phrases that describe n_j, and their reading under presence dilution
#: (n_j = the group's records): the presence wording is the register wording with exactly
#: these phrases read differently.
PRESENCE_READING = {
    "register candidates n_j (paper 004, virtual dilution)": "n_j = the group's records (presence dilution)",
    "smallest number of register individuals whose QIs fall in a group's region": (
        "smallest n_j; under presence dilution n_j is the group's record count, so this equals k-anonymity"
    ),
    "register individuals in the group's region, S_ext": "the group's present records under presence dilution, S_ext",
    "n_j candidates (virtual dilution; matches to non-released candidates are no cracks)": (
        "n_j = r_j records (presence dilution: the candidates are the present individuals)"
    ),
}


def _read_under_presence(m: Measure) -> Measure:
    note, source = m.note, m.source
    for old, new in PRESENCE_READING.items():
        note, source = note.replace(old, new), source.replace(old, new)
    return Measure(m.name, m.value, m.unit, source, note, m.family)


def test_presence_wording_reads_n_j_as_records() -> None:
    group = np.array([0, 0, 0, 1, 1, 2])
    value = np.array([0, 1, 1, 2, 0, 2])
    n_j = np.bincount(group)  # under presence dilution n_j is the group's record count
    guard = value.copy()
    p = personalized_breach(group, value, guard, n_j, None, primary=True)
    figures = summarize(p, guard, 0.5)
    rd = release_disclosure(group, value, n_j)

    def worded(presence: bool) -> list[Measure]:
        return (
            _hsu(group.tolist(), value.tolist(), 3, candidates=n_j.tolist(), presence=presence)
            + personalized_measures(figures, primary=True, presence=presence)
            + disclosure_measures(rd, diluted=True, presence=presence)
        )

    register, presence = worded(False), worded(True)
    assert presence == [_read_under_presence(m) for m in register]
    assert presence != register  # every phrase occurs: the test would notice a missing one
    changed = {m.name for m, r in zip(presence, register, strict=True) if m != r}
    assert changed == {
        "k-anonymity over candidates",
        "max personalized breach probability",
        "records above p_breach",
        "mean personalized breach probability",
        "expected re-identifications Ψ",
    }


# --- paper 001 (Xiao & Tao) ----------------------------------------------------------------------


def test_personalized_wording() -> None:
    group, value = np.array([0, 0, 0, 1]), np.array([2, 2, 0, 1])
    guard = np.array([2, -1, 0, 1])
    n_j = np.array([4, 1])
    s = summarize(personalized_breach(group, value, guard, n_j, None, primary=True), guard, 0.4)
    ms = personalized_measures(s, primary=True)
    assert [m.name for m in ms] == [
        "max personalized breach probability",
        "records above p_breach",
        "mean personalized breach probability",
    ]
    mx, above, mean = ms
    assert mx.value == 1.0 and mx.unit == "fraction" and "paper 001" in mx.source and "Theorem 1" in mx.source
    assert above.value == 2 and above.unit == "records"  # 0.5 and 1.0 exceed 0.4
    assert "p_breach = 0.4 (by more than 1e-12)" in above.note
    assert mean.value == pytest.approx((0.5 + 0.25 + 1.0) / 4)
    assert "3 of 4 records have a guarding node" in mx.note and "at most one record per individual" in mx.note
    non_primary = personalized_measures(s, primary=False)
    assert "Theorem 2" in non_primary[0].source and "individuals may own several records" in non_primary[0].note


def test_personalized_wording_of_an_empty_release() -> None:
    empty = np.zeros(0, dtype=np.int64)
    s = summarize(personalized_breach(empty, empty, empty, np.array([3]), None, primary=True), empty, 0.5)
    mx, above, mean = personalized_measures(s, primary=True)
    assert mx.value is None and mean.value is None and mx.note == "the release has no records"
    assert above.value == 0


# --- paper 002 (Malik) ---------------------------------------------------------------------------


def test_disclosure_wording() -> None:
    group = np.array([0, 0, 1, 1, 1, 2, 2])
    value = np.array([3, 3, 0, 1, 1, 5, 2])
    ms = disclosure_measures(release_disclosure(group, value), diluted=False)
    by = {m.name: m.value for m in ms}
    assert list(by) == [
        "expected re-identifications Ψ",
        "re-identification rate Ψ/R",
        "heuristic 𝓗",
        "max per-record re-identification probability",
        "degree of anonymity d",
        "expected sensitive-value cracks",
        "sensitive-value crack rate",
    ]
    assert by["expected re-identifications Ψ"] == pytest.approx(3.0) == by["heuristic 𝓗"]
    assert by["re-identification rate Ψ/R"] == pytest.approx(3 / 7)
    assert by["max per-record re-identification probability"] == pytest.approx(1 / 2)
    assert all(v is not None for v in by.values())
    assert "over 3 QI-groups" in ms[0].note and "records (n_j = r_j, Malik's bijection)" in ms[0].note
    assert "(R = 7)" in ms[1].note
    diluted = disclosure_measures(release_disclosure(group, value, np.array([3, 4, 2])), diluted=True)
    assert "n_j candidates (virtual dilution" in diluted[0].note
    assert all(m.source.startswith("Malik 2014 (paper 002)") for m in ms)


# --- paper 003 (Askari et al.) -------------------------------------------------------------------

AGE = _hier("age", [["a0", "a01", "*"], ["a1", "a01", "*"], ["a2", "a23", "*"], ["a3", "a23", "*"]])


def _channel(**kw: object) -> ChannelFigures:
    base: dict[str, object] = {
        "records": 1_000_000,
        "k": 5,
        "log10_input_tables": 123456.4,
        "bayes_risk": None,
        "input_tables": None,
        "output_tables": None,
        "factorized": FactorizedPrivacy(cells=6, mean_cell_error=0.5, log2_preimages=3.0),
        "utility_original": 2.0,
        "utility_published": 1.5,
    }
    base.update(kw)
    return ChannelFigures(**base)  # type: ignore[arg-type]  # the values above have the fields' types


def test_channel_wording_of_a_computed_bayes_risk() -> None:
    orig = np.array([[0], [1], [2]])
    f = channel_figures(orig, AGE.leaf_nodes[1][orig], [AGE], np.array([0, 1, 0]), n_values=2, k=1)
    ms = channel_measures(f)
    assert [m.name for m in ms] == [
        "MAP error of the mechanism (Bayes risk)",
        "per-cell MAP error (factorized)",
        "table-guess uncertainty (factorized)",
        "utility of the original table",
        "utility of the published table",
        "utility degradation",
    ]
    bayes = ms[0]
    assert bayes.value == f.bayes_risk and bayes.unit == "probability"
    assert f"uniform prior over {f.input_tables} input tables, {f.output_tables} outputs" in bayes.note
    assert "k = 1" in bayes.note
    assert [m.family for m in ms] == ["privacy"] * 3 + ["utility"] * 3
    assert ms[5].value == f.utility_original - f.utility_published
    assert "over 3 QI cells" in ms[1].note
    assert "whole-table MAP error 1 − 2^−bits = 0.875" in ms[2].note


def test_channel_wording_names_why_the_bayes_risk_is_left_out() -> None:
    limit = channel_measures(_channel())[0]
    assert limit.value is None
    assert f"limited to {MAX_INPUT_TABLES} input tables" in limit.note and "≈ 10^123456 possible" in limit.note
    assert channel_measures(_channel(k=None))[0].note == "k not given: the §5 channel needs it"
    assert channel_measures(_channel(k=7, records=3))[0].note == "k = 7 exceeds the 3 records"


def test_channel_wording_says_it_sees_only_the_published_records() -> None:
    ms = channel_measures(_channel(records=1_234), suppressed=5_678)
    scope = "computed on the 1,234 published records (the 5,678 suppressed ones left out)"
    assert all(m.note.endswith(f"; {scope}") for m in ms)
    assert not any(scope in m.note for m in channel_measures(_channel()))


# --- utility -------------------------------------------------------------------------------------

GENDER = _hier("gender", [["M", "*"], ["F", "*"]])
NAT = _hier("nat", [["US", "*"], ["CA", "*"]])


def test_information_loss_wording() -> None:
    leaves = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
    group = np.array([0, 0, 1, -1])
    group_nodes = np.array([[GENDER.node("M"), NAT.root], [GENDER.node("F"), NAT.node("US")]])
    f = utility_figures([GENDER, NAT], leaves, group, group_nodes, np.array([0, 1, 0, 1]))
    ms = information_loss_measures(f)
    assert [m.name for m in ms] == [
        "suppression rate",
        "discernibility metric C_DM",
        "average QI-group size",
        "normalized average QI-group size C_AVG",
        "normalized certainty penalty NCP",
        "redactions",
        "tree measure",
        "entropy measure Π_e",
        "monotone entropy measure Π_me",
        "non-uniform entropy measure Π_ne",
        "tuple-wise variance loss Π_tv",
    ]
    assert all(m.family == "utility" and m.computed for m in ms)
    by = {m.name: m for m in ms}
    assert by["suppression rate"].value == 1 / 4 and by["suppression rate"].note == "1 of 4 records suppressed"
    assert by["discernibility metric C_DM"].value == 2 * 2 + 1 + 4
    assert "lowest possible 4, highest 16" in by["discernibility metric C_DM"].note
    assert by["normalized average QI-group size C_AVG"].note == (
        "k = 1 (the smallest QI-group: the k the release achieves)"
    )
    # two records published as (M, *), the suppressed one as (*, *): 4 of 8 cells are '*'
    assert by["redactions"].value == 4 and "50.00% of 8" in by["redactions"].note
    assert by["entropy measure Π_e"].note.endswith("; not monotone (Lemma 4.2.3)")
    without = {m.name: m for m in information_loss_measures(utility_figures([GENDER, NAT], leaves, group, group_nodes))}
    assert not without["tuple-wise variance loss Π_tv"].computed
    assert without["tuple-wise variance loss Π_tv"].note == "no sensitive values given"


def test_information_loss_wording_when_nothing_is_published_or_the_snapshot_is_empty() -> None:
    leaves = np.array([[0, 0], [1, 1]])
    f = utility_figures([GENDER, NAT], leaves, np.full(2, -1), np.zeros((0, 2), dtype=np.int64))
    by = {m.name: m for m in information_loss_measures(f)}
    for name in ("average QI-group size", "normalized average QI-group size C_AVG"):
        assert not by[name].computed and by[name].note == "nothing published: no QI-groups"
    assert by["normalized certainty penalty NCP"].value == 1.0
    empty = np.zeros((0, 2), dtype=np.int64)
    e = utility_figures([GENDER, NAT], empty, np.zeros(0, dtype=np.int64), empty)
    ms = information_loss_measures(e)
    assert [m.computed for m in ms] == [True, True] + [False] * 9
    assert all(m.note == "empty snapshot" for m in ms[4:])


def test_query_error_wording() -> None:
    settings = {"queries": 5000, "qd": 3, "selectivity": 0.05, "seed": 0}
    m = query_error_measure(0.125, settings)
    assert (m.name, m.value, m.unit, m.family) == (
        "average relative error of range-count queries",
        0.125,
        "fraction",
        "utility",
    )
    assert (
        m.note
        == (
            "paper 001's estimator: a generalized value spread uniformly over its leaves; "
            "5000 queries, qd = 3, selectivity 0.05, seed 0"
        )
        and "docs/design.md section 8" in m.source
    )
    assert not query_error_measure(None, settings).computed
    w = weighted_query_error_measure(0.0625, settings)
    assert (w.name, w.value, w.unit, w.family) == (
        "average relative error of range-count queries, register-weighted",
        0.0625,
        "fraction",
        "utility",
    )
    assert "register_marginals" in w.note and "5000 queries, qd = 3, selectivity 0.05, seed 0" in w.note
    assert not weighted_query_error_measure(None, settings).computed


# --- paper 004 (the global guarantee) and the records the manifest keeps -------------------------


def test_guarantee_wording() -> None:
    dist = breach_distribution([0.25, 0.5, 0.46], [2, 1, 1], 2.0, 0.9)
    budget = ratio_budget(np.array([1, 3, 2]), np.array([2, 1, 1]), 4)
    ms = guarantee_measures(dist, budget, ell=2.0, near_fraction=0.9)
    assert [m.name for m in ms] == [
        "maximum breach probability, all releases",
        "(individual, protected value) pairs ever linked",
        "mean breach probability of linked pairs",
        "pairs near the bound",
        "pairs above the bound",
        "releases left in the constant-ratio budget",
        "pairs that used the whole budget",
    ]
    assert all(m.source.startswith(PAPER_004) for m in ms)  # the release report groups them by it
    assert ms[0].value == 0.5 and ms[0].note.startswith("bound 1/ℓ = 0.5;")
    assert ms[3].value == 2 and ms[3].note == "p ≥ 0.9 × 1/ℓ = 0.45"
    assert ms[5].value == 1 and ms[5].note == "k' = 4 linked releases per pair; most used: 3"
    assert len(guarantee_measures(dist, None, ell=2.0, near_fraction=0.9)) == 5


def test_measure_records_keep_infinity_as_text() -> None:
    ms = _hsu(T212_GROUP, T212_VALUE, 3)
    rows = {r["name"]: r for r in measure_records(ms)}
    assert rows["recursive (c,ℓ)-diversity, smallest c at ℓ = 2"]["value"] == "inf"
    assert rows["k-anonymity"] == {
        "name": "k-anonymity",
        "value": 4.0,
        "unit": "records",
        "source": "Hsu 2008 (paper 000) §3.2 Def 3.2.1",
        "note": "smallest of 3 QI-groups (12 records); the release is k-anonymous for k ≤ 4. Under the global "
        "guarantee a small group is not a risk by itself: each individual is protected by the group's candidates "
        "in the register (k-anonymity over candidates) and the bound 1/ℓ over all releases",
        "family": "privacy",
    }
