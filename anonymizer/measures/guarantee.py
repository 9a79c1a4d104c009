"""Figures of the global guarantee over a release series (paper 004).

After a release, every pair (individual o, protected value s) has the breach probability
``p(o, s) = 1 - Π_k (1 - n_{j,s}/n_j)`` over the releases k that linked o to a group holding
s (paper 004, section 4, Lemma 4 and eq. (5)). The report shows how these probabilities are
spread against the bound 1/ℓ, how many pairs sit near it, and, under the constant-ratio
strategy, how many releases are left before some pair uses up its k' linked releases
(section 6.1: the strategy's targets are only defined for at most k' linked releases).

The exact verdict "no pair above 1/ℓ" is the guarantee suite's (``checks``); the figures
here are floating point and for display only.

Pairs are given in compressed form, as in the state: per-pair arrays with a weight (the
number of register individuals sharing those figures), so a 5,000,000-person register
costs one row per distinct history, not one per person.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Histogram bins of breach probabilities: 0.01 wide over [0, 1].
BINS = 100

#: Floating-point slack of the display-only "above the bound" count when no exact verdict
#: is given (the same as the personalized measure's tie tolerance).
TIE_TOLERANCE = 1e-12


@dataclass(frozen=True)
class BreachDistribution:
    """How breach probabilities are spread over the (individual, protected value) pairs
    that any release has linked (pairs never linked have p = 0 and are not counted).

    Attributes:
        pairs: number of linked pairs (individuals × values, weights summed).
        max_p: largest breach probability, 0.0 when no pair is linked.
        mean_p: mean over the linked pairs.
        near_bound: pairs with p ≥ ``near_fraction`` / ℓ (and not above 1/ℓ).
        above_bound: pairs with p > 1/ℓ (exact verdicts where given, see
            :func:`breach_distribution`).
        near_fraction: the fraction of 1/ℓ that counts as near.
        ell: ℓ.
        edges: histogram bin edges, shape (BINS + 1,).
        counts: pairs per bin, shape (BINS,).
    """

    pairs: int
    max_p: float
    mean_p: float
    near_bound: int
    above_bound: int
    near_fraction: float
    ell: float
    edges: FloatArray
    counts: IntArray


def breach_distribution(
    p: npt.ArrayLike,
    weight: npt.ArrayLike,
    ell: float,
    near_fraction: float = 0.9,
    exceeds: npt.ArrayLike | None = None,
) -> BreachDistribution:
    """Summarize breach probabilities of weighted pairs.

    Args:
        p: breach probability per pair row, shape (n,), in [0, 1]; rows with p = 0 are
            pairs never linked and are ignored.
        weight: individuals the row stands for, shape (n,), non-negative integers.
        ell: ℓ > 1 of the guarantee.
        near_fraction: in (0, 1]; a pair is near the bound when p ≥ near_fraction / ℓ.
        exceeds: the exact verdict "p > 1/ℓ" per row where known (e.g. from
            :func:`anonymizer.privacy.exceeds_threshold`), shape (n,). Without it a row
            counts as above only when p > 1/ℓ + :data:`TIE_TOLERANCE`: a pair exactly at the
            bound (allowed) often lands a few ulps above it in floating point, e.g.
            1 − (1 − 1/3) > 1/3.

    Raises:
        ValueError: mismatched shapes, p outside [0, 1], a negative weight, ℓ ≤ 1 or
            near_fraction outside (0, 1].

    Source: paper 004, section 4 (breach probability over all releases, eq. (5)).
    """
    p = np.asarray(p, dtype=np.float64)
    w = np.asarray(weight, dtype=np.int64)
    if p.shape != w.shape or p.ndim != 1:
        raise ValueError(f"p and weight must be 1-d of equal shape, got {p.shape} and {w.shape}")
    if p.size and (np.nanmin(p) < 0.0 or np.nanmax(p) > 1.0 or np.isnan(p).any()):
        raise ValueError("breach probabilities must lie in [0, 1]")
    if (w < 0).any():
        raise ValueError("weights must be non-negative")
    if not ell > 1.0:
        raise ValueError(f"ℓ must be greater than 1, got {ell}")
    if not 0.0 < near_fraction <= 1.0:
        raise ValueError(f"near_fraction must lie in (0, 1], got {near_fraction}")
    bound = 1.0 / ell
    above = p > bound + TIE_TOLERANCE if exceeds is None else np.asarray(exceeds, dtype=bool)
    if above.shape != p.shape:
        raise ValueError(f"exceeds must have the shape of p {p.shape}, got {above.shape}")
    linked = (p > 0.0) & (w > 0)
    p, w, above = p[linked], w[linked], above[linked]
    edges = np.linspace(0.0, 1.0, BINS + 1)
    counts, _ = np.histogram(p, bins=edges, weights=w)
    pairs = int(w.sum())
    return BreachDistribution(
        pairs=pairs,
        max_p=float(p.max()) if p.size else 0.0,
        mean_p=float(np.dot(p, w) / pairs) if pairs else 0.0,
        near_bound=int(w[(p >= near_fraction * bound) & ~above].sum()),
        above_bound=int(w[above].sum()),
        near_fraction=float(near_fraction),
        ell=float(ell),
        edges=edges,
        counts=np.rint(counts).astype(np.int64),
    )


@dataclass(frozen=True)
class RatioBudget:
    """Use of the constant-ratio strategy's budget of k' linked releases per pair.

    Attributes:
        k_prime: k'.
        max_linked: most releases any pair has been linked in.
        releases_left: k' − max_linked: releases that can still link every pair (0 means
            some pair can no longer be linked to its value, so the next release must keep
            those individuals' groups free of it or suppress them; negative when the state
            was built under a larger k').
        pairs_at_budget: pairs linked in k' releases or more.
        linked_histogram: pairs per number of linked releases 1..max(k', max_linked),
            shape (max(k', max_linked),).
    """

    k_prime: int
    max_linked: int
    releases_left: int
    pairs_at_budget: int
    linked_histogram: IntArray


def ratio_budget(linked: npt.ArrayLike, weight: npt.ArrayLike, k_prime: int) -> RatioBudget:
    """How much of the constant-ratio budget the series has used.

    Args:
        linked: releases each pair row has been linked in, shape (n,), ≥ 0.
        weight: individuals per row, shape (n,).
        k_prime: k' ≥ 1 of the constant-ratio strategy.

    Raises:
        ValueError: mismatched shapes, k' < 1, or a negative count.

    Source: paper 004, section 6.1 (constant ratio: targets r_i for i ≤ k' linked releases).
    """
    c = np.asarray(linked, dtype=np.int64)
    w = np.asarray(weight, dtype=np.int64)
    if c.shape != w.shape or c.ndim != 1:
        raise ValueError(f"linked and weight must be 1-d of equal shape, got {c.shape} and {w.shape}")
    if k_prime < 1:
        raise ValueError(f"k' must be at least 1, got {k_prime}")
    if c.size and c.min() < 0:
        raise ValueError("linked counts must be non-negative")
    used = (c > 0) & (w > 0)
    hist = np.bincount(c[used], weights=w[used], minlength=k_prime + 1)[1:]
    max_linked = int(c[used].max()) if used.any() else 0
    return RatioBudget(
        k_prime=k_prime,
        max_linked=max_linked,
        releases_left=k_prime - max_linked,
        pairs_at_budget=int(w[used & (c >= k_prime)].sum()),
        linked_histogram=np.rint(hist).astype(np.int64),
    )
