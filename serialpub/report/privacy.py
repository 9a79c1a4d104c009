"""Privacy figures of one staged release, recomputed from what will be published.

Everything is read from the staged ``data.parquet``, the population register and the state
before the release, as the validation suites do: the breach probabilities come from
:func:`checks.breach.compute_breach` (the independent recomputation), the group figures
from the published table itself. The classical per-release measures (k-anonymity,
ℓ-diversity, t-closeness, ...) come from :mod:`anonymizer.measures`; every figure is worded
(named, explained, cited) by :mod:`serialpub.report.wording`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from anonymizer.hierarchy import Hierarchy
from anonymizer.learners.figures import LearnerReport
from anonymizer.measures import personalized
from anonymizer.measures.categorical import categorical_figures, sensitive_categories
from anonymizer.measures.closeness import closeness_figures
from anonymizer.measures.diversity import diversity_figures
from anonymizer.measures.guarantee import (
    TIE_TOLERANCE,
    BreachDistribution,
    RatioBudget,
    breach_distribution,
    ratio_budget,
)
from anonymizer.measures.qi_groups import group_counts
from anonymizer.measures.reidentification import release_disclosure
from anonymizer.regions import PresenceShown
from anonymizer.release import History, PrivacyParams
from anonymizer.settings import Guarantee, Strategy
from checks.breach import BreachComputation, Draft, draft_groups
from serialpub.config import ReportConfig
from serialpub.report.measure import Measure
from serialpub.report.wording.categorical import categorical_measures
from serialpub.report.wording.closeness import closeness_measures
from serialpub.report.wording.disclosure import disclosure_measures
from serialpub.report.wording.diversity import diversity_measures
from serialpub.report.wording.guarantee import guarantee_measures
from serialpub.report.wording.personalized import personalized_measures

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class PrivacyInputs:
    """What the privacy figures are computed from.

    Attributes:
        draft: the staged release as read back (one row per published record).
        breach: its breach computation, the one validation checked: per unit, with the
            history's classes as ``unit_classes`` (:func:`checks.breach.compute_breach`).
        history: the state before this release.
        params: ℓ, the strategy and its parameter, the guarantee.
        presence: presence mode (n_j counts present individuals, not the register's).
        protected: the protected values, in the state's order.
        sensitive_hierarchy: the sensitive attribute's hierarchy, if declared.
        sensitive_domain: every value of the sensitive attribute (its hierarchy's leaves, or
            the values seen), fixing the codes of the diversity measures.
    """

    draft: Draft
    breach: BreachComputation
    history: History
    params: PrivacyParams
    presence: bool
    protected: Sequence[str]
    sensitive_hierarchy: Hierarchy | None
    sensitive_domain: Sequence[str]


@dataclass(frozen=True)
class PrivacyFigures:
    """The privacy part of a release report.

    Attributes:
        distribution: breach probabilities of all linked pairs after this release.
        budget: use of the constant-ratio budget (None under the geometric strategy).
        group_records: published records per group, shape (G,).
        group_candidates: n_j per group (candidates under register dilution, records under
            presence), shape (G,).
        measures: every figure, in report order.
        presence_shown: the register individuals the release shows absent or present,
            whatever the dilution (docs/threat-model.md, "What a release reveals about
            presence").
        learners: the learning adversary's figures on the releases published so far and
            this one, beside the uniform charge (docs/threat-model.md, "The learning
            adversary"), or None when the ``report.learners`` setting asks for none.
    """

    distribution: BreachDistribution
    budget: RatioBudget | None
    group_records: IntArray
    group_candidates: IntArray
    measures: list[Measure]
    presence_shown: PresenceShown | None = None
    learners: LearnerReport | None = None


def _pairs_after(
    inp: PrivacyInputs,
    linked_ind: IntArray,
    linked_val: IntArray,
    p_after: npt.NDArray[np.float64],
    linked_weight: IntArray,
    linked_exceeds: npt.NDArray[np.bool_],
) -> tuple[npt.NDArray[np.float64], IntArray, IntArray, npt.NDArray[np.bool_]]:
    """Every (individual, protected value) pair after the release, compressed: rows are
    (history class, value) cells with their member counts, less the pairs this release
    links, plus the linked pairs (``linked_weight`` individuals per row, all in the history
    class of ``linked_ind``). Returns (p, linked releases, weight, exceeds):
    ``exceeds`` is the exact verdict p > 1/ℓ of the breach computation for linked rows and,
    for the other cells, whether p passes 1/ℓ by more than the display tolerance (their
    verdicts were exact when they were linked)."""
    h = inp.history
    k, v = h.survival.shape
    members = np.bincount(h.class_of, minlength=k).astype(np.int64)
    cls = h.class_of[linked_ind]
    taken = np.bincount(cls * v + linked_val, weights=linked_weight, minlength=k * v).reshape(k, v)
    weight = (members[:, None] - np.rint(taken).astype(np.int64)).ravel()
    before = 1.0 - h.survival.ravel()
    p = np.concatenate([before, p_after])
    linked = np.concatenate([h.linked.ravel(), h.linked[cls, linked_val] + 1])
    exceeds = np.concatenate([before > 1.0 / inp.params.ell + TIE_TOLERANCE, linked_exceeds])
    return np.clip(p, 0.0, 1.0), linked, np.concatenate([weight, linked_weight]), exceeds


def privacy_figures(inp: PrivacyInputs, settings: ReportConfig, classical: bool = True) -> PrivacyFigures:
    """Compute the privacy figures of a release.

    Args:
        classical: with the per-release measures of the source papers
            (:func:`classical_measures`, appended to ``measures``); without them, the
            figures the report's plots need, so that validation can draw the plots on one
            thread while another computes them.

    Raises:
        ValueError: inconsistent inputs (shapes, a value outside the sensitive domain).

    Source: paper 004 sections 4 and 6.1 for the breach figures; the measure modules cite theirs.
    """
    bc = inp.breach
    if not bc.per_unit:
        raise ValueError("privacy_figures needs the per-unit breach computation (compute_breach(per_unit=True))")
    t = bc.table
    ind = t["row"].to_numpy(np.int64)
    val = np.asarray(t["value"].cat.codes, dtype=np.int64)
    p, linked, weight, exceeds = _pairs_after(
        inp, ind, val, t["p"].to_numpy(np.float64), t["weight"].to_numpy(np.int64), t["exceeds"].to_numpy(bool)
    )
    dist = breach_distribution(p, weight, inp.params.ell, settings.near_bound_fraction, exceeds)
    budget = None
    params = inp.params
    if params.guarantee is Guarantee.GLOBAL and params.strategy is Strategy.CONSTANT and params.k_prime:
        # the budget only binds under the global guarantee (the localized baseline ignores k')
        budget = ratio_budget(linked, weight, params.k_prime)
    measures = guarantee_measures(dist, budget, ell=inp.params.ell, near_fraction=settings.near_bound_fraction)
    if classical:
        measures += classical_measures(inp, settings)
    return PrivacyFigures(
        distribution=dist,
        budget=budget,
        group_records=bc.groups["records"].to_numpy(np.int64),
        group_candidates=bc.groups["n_j"].to_numpy(np.int64),
        measures=measures,
        presence_shown=bc.presence_shown,
    )


def classical_measures(inp: PrivacyInputs, settings: ReportConfig) -> list[Measure]:
    """The per-release measures of the source papers (ℓ-diversity, t-closeness, categories,
    personalized privacy, disclosure), in report order after the guarantee's: the last part
    of :func:`privacy_figures`.

    Raises:
        ValueError: a value outside the sensitive domain, or a category naming one.
    """
    bc, d = inp.breach, inp.draft
    group_of_record = bc.group_of_record  # grouped once, by the breach computation of this draft
    if group_of_record is None or len(group_of_record) != len(d.table):
        group_of_record = draft_groups(d, d.qis, d.sensitive, d.hierarchies, inp.protected).group_of_record
    return _classical(inp, settings, group_of_record, bc.groups["n_j"].to_numpy(np.int64))


def _classical(inp: PrivacyInputs, settings: ReportConfig, group: IntArray, n_j: IntArray) -> list[Measure]:
    """The per-release measures of the source papers: the figures from the measure modules,
    worded by :mod:`serialpub.report.wording`."""
    known = group >= 0
    domain = pd.Index(list(inp.sensitive_domain))
    found, distinct = inp.draft.labels.codes(inp.draft.sensitive)
    if (found >= 0).all():  # each distinct value looked up once (the column is factorized once per draft)
        codes = domain.get_indexer(pd.Index(distinct.astype(str)))[found]
    else:  # a missing value: its text as astype(str) gives it
        codes = domain.get_indexer(pd.Index(inp.draft.table[inp.draft.sensitive].astype(str)))
    if (codes[known] < 0).any():
        bad = inp.draft.table[inp.draft.sensitive][known & (codes < 0)].iloc[0]
        raise ValueError(f"sensitive value {bad!r} is not in the sensitive domain")
    group, value = group[known], codes[known].astype(np.int64)
    categories = None
    if settings.categories:
        categories = []
        for name, values in settings.categories.items():
            idx = domain.get_indexer(pd.Index(list(values)))
            if (idx < 0).any():
                raise ValueError(
                    f"report.categories[{name!r}] names {values[int(np.flatnonzero(idx < 0)[0])]!r}, "
                    f"which is not a value of {inp.draft.sensitive!r}"
                )
            categories.append(set(idx.tolist()))
    c, ell = settings.recursive_c, max(int(inp.params.ell), 2)
    gc = group_counts(group, value, len(domain))
    cats = None if categories is None else sensitive_categories(categories, None, gc.n_values)
    measures = diversity_measures(diversity_figures(gc, candidates=n_j, c=c, ell=ell), presence=inp.presence)
    measures += closeness_measures(closeness_figures(gc, inp.sensitive_hierarchy))
    measures += categorical_measures(None if cats is None else categorical_figures(gc, cats, c=c, ell=ell), ell=ell)
    measures += _personalized(inp, settings, group, value, n_j)
    # n_j is always given: the candidates under register dilution, the records under presence
    measures += disclosure_measures(release_disclosure(group, value, n_j), diluted=True, presence=inp.presence)
    return measures


def _personalized(
    inp: PrivacyInputs, settings: ReportConfig, group: IntArray, value: IntArray, n_j: IntArray
) -> list[Measure]:
    """Xiao & Tao's breach probability with every protected record guarded by its value's
    ancestor ``guarding_levels_up`` levels up (the value itself by default) and the other
    records unguarded; n = n_j, the Primary Case (one record per individual per release)."""
    h = inp.sensitive_hierarchy
    protected = np.zeros(len(inp.sensitive_domain), dtype=bool)
    idx = pd.Index(list(inp.sensitive_domain)).get_indexer(pd.Index(list(inp.protected)))
    protected[idx[idx >= 0]] = True  # -1: a protected value outside the domain given
    if h is not None:
        guard = personalized.guarding_nodes(value, h, settings.guarding_levels_up)
    else:
        guard = value.copy()  # a flat domain: the value is its own (only) guarding node
    guard = np.where(protected[value], guard, -1)
    p = personalized.personalized_breach(group, value, guard, n_j, h, primary=True)
    figures = personalized.summarize(p, guard, 1.0 / inp.params.ell)
    return personalized_measures(figures, primary=True, presence=inp.presence)
