"""Wording of the global guarantee's figures after a release (paper 004, sections 4 and 6.1)."""

from __future__ import annotations

from anonymizer.measures.guarantee import BreachDistribution, RatioBudget
from serialpub.report.measure import Measure

#: Every guarantee figure's source starts with this; the release report lists them apart from
#: the per-release measures of the literature.
PAPER_004 = "Paper 004 (global guarantee over serial releases)"


def guarantee_measures(
    dist: BreachDistribution, budget: RatioBudget | None, *, ell: float, near_fraction: float
) -> list[Measure]:
    """The breach-probability figures, then the constant-ratio budget's when there is one.

    Args:
        dist: breach probabilities of all linked pairs after the release.
        budget: use of the constant-ratio budget (None: not binding, e.g. geometric strategy).
        ell: ℓ, for the bound 1/ℓ in the notes.
        near_fraction: the fraction of 1/ℓ that counts as near the bound.
    """
    measures = [
        Measure(
            "maximum breach probability, all releases", dist.max_p, "probability", f"{PAPER_004}, §4 eq. (5)",
            f"bound 1/ℓ = {1 / ell:.4g}; the guarantee suite decides the bound exactly",
        ),
        Measure("(individual, protected value) pairs ever linked", dist.pairs, "pairs", f"{PAPER_004}, §4"),
        Measure("mean breach probability of linked pairs", dist.mean_p, "probability", f"{PAPER_004}, §4"),
        Measure(
            "pairs near the bound", dist.near_bound, "pairs", f"{PAPER_004}, §4",
            f"p ≥ {near_fraction:g} × 1/ℓ = {near_fraction / ell:.4g}",
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
    return measures
