"""Privacy figures of one staged release, recomputed from what will be published.

Everything is read from the staged ``data.parquet``, the population register and the state
before the release, as the validation suites do: the breach probabilities come from
:func:`checks.breach.compute_breach` (the independent recomputation), the group figures
from the published table itself. The classical per-release measures (k-anonymity,
ℓ-diversity, t-closeness, ...) come from :mod:`anonymizer.measures`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt
import pandas as pd

from anonymizer.hierarchy import Hierarchy
from anonymizer.measures import Measure, disclosure, diversity, personalized
from anonymizer.measures.guarantee import (
    TIE_TOLERANCE,
    BreachDistribution,
    RatioBudget,
    breach_distribution,
    ratio_budget,
)
from anonymizer.release import History
from checks.breach import compute_breach, draft_groups
from serialpub.config import ReportConfig

IntArray = npt.NDArray[np.int64]

PAPER_004 = "Paper 004 (global guarantee over serial releases)"


@dataclass(frozen=True)
class PrivacyInputs:
    """What the privacy figures are computed from.

    Attributes:
        table: the staged release (one row per published record, QI labels and the value).
        sensitive_domain: every value of the sensitive attribute (its hierarchy's leaves, or
            the values seen), fixing the codes of the diversity measures.
        register_keys: leaf id per QI of every register individual, shape (N, d).
        register_ids: register ids, shape (N,).
        history: the state before this release.
        present_rows: register rows of the snapshot's individuals (presence mode), else None.
    """

    table: pd.DataFrame
    qis: Sequence[str]
    sensitive: str
    hierarchies: Mapping[str, Hierarchy]
    sensitive_hierarchy: Hierarchy | None
    sensitive_domain: Sequence[str]
    protected: Sequence[str]
    register_keys: IntArray
    register_ids: npt.NDArray[np.object_] | IntArray
    history: History
    ell: float
    presence: bool
    present_rows: IntArray | None
    strategy: str
    k_prime: int | None
    guarantee: str = "global"


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
    """

    distribution: BreachDistribution
    budget: RatioBudget | None
    group_records: IntArray
    group_candidates: IntArray
    measures: list[Measure]


def _pairs_after(
    inp: PrivacyInputs, linked_ind: IntArray, linked_val: IntArray, p_after: npt.NDArray[np.float64],
    linked_weight: IntArray, linked_exceeds: npt.NDArray[np.bool_],
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
    exceeds = np.concatenate([before > 1.0 / inp.ell + TIE_TOLERANCE, linked_exceeds])
    return np.clip(p, 0.0, 1.0), linked, np.concatenate([weight, linked_weight]), exceeds


def privacy_figures(inp: PrivacyInputs, settings: ReportConfig) -> PrivacyFigures:
    """Compute the privacy figures of a release.

    Raises:
        ValueError: inconsistent inputs (shapes, a value outside the sensitive domain).

    Source: paper 004 sections 4 and 6.1 for the breach figures; the measure modules cite theirs.
    """
    h = inp.history
    bc = compute_breach(
        inp.table, inp.qis, inp.sensitive, inp.hierarchies, inp.register_keys, inp.register_ids,
        inp.protected, h.survival, inp.presence, inp.present_rows, inp.ell, per_unit=True,
        unit_classes=h.class_of, history_class=h.class_of,
    )  # fmt: skip
    t = bc.table
    ind = np.asarray(t["individual"].cat.codes, dtype=np.int64)
    val = np.asarray(t["value"].cat.codes, dtype=np.int64)
    p, linked, weight, exceeds = _pairs_after(
        inp, ind, val, t["p"].to_numpy(np.float64), t["weight"].to_numpy(np.int64), t["exceeds"].to_numpy(bool)
    )
    dist = breach_distribution(p, weight, inp.ell, settings.near_bound_fraction, exceeds)
    budget = None
    if inp.guarantee == "global" and inp.strategy == "constant" and inp.k_prime:
        # the budget only binds under the global guarantee (the localized baseline ignores k')
        budget = ratio_budget(linked, weight, inp.k_prime)
    measures = [
        Measure(
            "maximum breach probability, all releases", dist.max_p, "probability", f"{PAPER_004}, §4 eq. (5)",
            f"bound 1/ℓ = {1 / inp.ell:.4g}; the guarantee suite decides the bound exactly",
        ),
        Measure("(individual, protected value) pairs ever linked", dist.pairs, "pairs", f"{PAPER_004}, §4"),
        Measure("mean breach probability of linked pairs", dist.mean_p, "probability", f"{PAPER_004}, §4"),
        Measure(
            "pairs near the bound", dist.near_bound, "pairs", f"{PAPER_004}, §4",
            f"p ≥ {settings.near_bound_fraction:g} × 1/ℓ = {settings.near_bound_fraction / inp.ell:.4g}",
        ),
        Measure(
            "pairs above the bound", dist.above_bound, "pairs", f"{PAPER_004}, §4",
            "exact verdicts for the pairs this release links, as the guarantee suite decides them",
        ),
    ]  # fmt: skip
    if budget is not None:
        measures += [
            Measure(
                "releases left in the constant-ratio budget", budget.releases_left, "releases",
                f"{PAPER_004}, §6.1", f"k' = {budget.k_prime} linked releases per pair; most used: {budget.max_linked}",
            ),
            Measure("pairs that used the whole budget", budget.pairs_at_budget, "pairs", f"{PAPER_004}, §6.1"),
        ]  # fmt: skip
    dg = draft_groups(inp.table, inp.qis, inp.sensitive, inp.hierarchies, inp.protected)
    measures += _classical(inp, settings, dg.group_of_record, bc.groups["n_j"].to_numpy(np.int64))
    return PrivacyFigures(
        distribution=dist,
        budget=budget,
        group_records=bc.groups["records"].to_numpy(np.int64),
        group_candidates=bc.groups["n_j"].to_numpy(np.int64),
        measures=measures,
    )


def _classical(inp: PrivacyInputs, settings: ReportConfig, group: IntArray, n_j: IntArray) -> list[Measure]:
    """The per-release measures of the source papers, from the measure modules."""
    known = group >= 0
    domain = pd.Index(list(inp.sensitive_domain))
    codes = domain.get_indexer(pd.Index(inp.table[inp.sensitive].astype(str)))
    if (codes[known] < 0).any():
        bad = inp.table[inp.sensitive][known & (codes < 0)].iloc[0]
        raise ValueError(f"sensitive value {bad!r} is not in the sensitive domain")
    group, value = group[known], codes[known].astype(np.int64)
    categories = None
    if settings.categories:
        categories = []
        for name, values in settings.categories.items():
            idx = domain.get_indexer(pd.Index(list(values)))
            if (idx < 0).any():
                raise ValueError(f"report.categories[{name!r}] names {values[int(np.flatnonzero(idx < 0)[0])]!r}, "
                                 f"which is not a value of {inp.sensitive!r}")  # fmt: skip
            categories.append(set(idx.tolist()))
    measures = diversity.summary(
        group, value, len(domain), candidates=n_j, sensitive_hierarchy=inp.sensitive_hierarchy,
        categories=categories, c=settings.recursive_c, ell=max(int(inp.ell), 2),
    )  # fmt: skip
    measures += _personalized(inp, settings, group, value, n_j)
    measures += disclosure.summary(group, value, n_j)
    return [_presence_wording(m) for m in measures] if inp.presence else measures


#: Phrases of the measure modules that describe n_j under register dilution, and their
#: reading under presence dilution, where n_j is the group's record count.
_PRESENCE_WORDING = {
    "register candidates n_j (paper 004, virtual dilution)": "n_j = the group's records (presence dilution)",
    "smallest number of register individuals whose QIs fall in a group's region": (
        "smallest n_j; under presence dilution n_j is the group's record count, so this equals k-anonymity"
    ),
    "register individuals in the group's region, S_ext": "the group's present records under presence dilution, S_ext",
    "n_j candidates (virtual dilution; matches to non-released candidates are no cracks)": (
        "n_j = r_j records (presence dilution: the candidates are the present individuals)"
    ),
}


def _presence_wording(m: Measure) -> Measure:
    """The measure with its notes worded for presence dilution (see _PRESENCE_WORDING)."""
    note, source = m.note, m.source
    for old, new in _PRESENCE_WORDING.items():
        note, source = note.replace(old, new), source.replace(old, new)
    return replace(m, note=note, source=source)


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
    return personalized.summary(group, value, guard, n_j, h, primary=True, p_breach=1.0 / inp.ell)
