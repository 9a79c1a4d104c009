"""What the learning adversary's figures are: per learner, its largest posterior and pairs per band.

Per learner (docs/threat-model.md, "The learning adversary"): the largest learned
posterior P' over the (register individual, protected value) pairs, the pairs above 1/ℓ,
and the pairs per band of P'; with the snapshots, how many of them are true (the
individual carries the value in at least one release's snapshot). The figures are
reported beside the verdict and do not change it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Band:
    """One band of P': ``[low, high)`` below 1/ℓ, ``[low, 1/ℓ]`` for the band ending at 1/ℓ,
    ``(low, high]`` above it (``above``). ``pairs``: (individual, value) pairs in it;
    ``true``: of them, the pairs the snapshots confirm (None without the snapshots)."""

    low: float
    high: float
    above: bool
    closed: bool
    pairs: int
    true: int | None

    @property
    def label(self) -> str:
        return f"{'(' if self.above else '['}{self.low:.3g}, {self.high:.3g}{']' if self.closed else ')'}"


@dataclass(frozen=True)
class LearnerFigures:
    """One learner's figures over every (register individual, protected value) pair.

    Attributes:
        name: the learner (``uniform`` is the charge itself, for comparison).
        max_p: the largest P'; ``max_individual``, ``max_value``: a pair attaining it
            (None when no pair is linked), ``max_uniform``: that pair's uniform charge.
        above: pairs with P' > 1/ℓ (a float comparison: a reported estimate, not the
            verdict, whose count is exact); ``above_true``: of them, the true ones (None
            without the snapshots).
        bands: the pairs per band of P' (:func:`bands`).
        seconds: the time the learner took (fit and re-weighting).
        note: a remark on the fit (the logistic model's convergence), or None.
        ratios: per protected value, the largest within-group ratio max π / mean π the
            learner realizes over the releases (:func:`.ratios.realized_ratios`); empty for
            the charge itself. ``covered``: per protected value, whether that ratio stays
            within the declared ρ_s of every release (the learner lies inside the class
            the charge covers), or None when no ρ was declared (the planner's series).
        max_per_value: per protected value, the largest P' (what a per-value ρ is chosen
            from: docs/threat-model.md, "Choosing the ratio per value").
    """

    name: str
    max_p: float
    max_individual: str | None
    max_value: str | None
    max_uniform: float
    above: int
    above_true: int | None
    bands: list[Band]
    seconds: float
    note: str | None = None
    ratios: list[float] = field(default_factory=list)
    covered: list[bool] | None = None
    max_per_value: list[float] = field(default_factory=list)


@dataclass
class LearnerReport:
    """The learning adversary's audit of a series: ``pairs`` (register individuals × protected
    values), one :class:`LearnerFigures` per learner, notes, and ``inputs``: the prepared
    series (:class:`anonymizer.learners.core.LearnerSeries`), kept for callers that
    want the posteriors themselves."""

    ell: float
    pairs: int
    values: list[str] = field(default_factory=list)
    declared: list[int] = field(default_factory=list)
    learners: list[LearnerFigures] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    calibrated: bool = False
    inputs: Any = field(default=None, repr=False)


def band_edges(ell: float) -> tuple[FloatArray, FloatArray]:
    """The band edges below and above 1/ℓ: tenths, with 1/ℓ itself an edge."""
    bound = 1.0 / ell
    tenths = np.round(np.arange(11) / 10, 12)
    below = np.concatenate([tenths[tenths < bound], [bound]])
    above = np.concatenate([[bound], tenths[tenths > bound]]) if bound < 1 else np.array([bound])
    if above[-1] < 1:
        above = np.concatenate([above, [1.0]])
    return below, above


def bands(p: FloatArray, weight: IntArray, true: IntArray | None, ell: float) -> list[Band]:
    """Pairs per band of P'. ``p``: P' per (cell, value), ``weight``: the individuals each
    stands for, ``true``: of them, the true ones (all the same shape); returns every band,
    empty ones included, lowest first."""
    bound = 1.0 / ell
    below, above = band_edges(ell)
    p = p.ravel()
    n_low, n_high = below.size - 1, above.size - 1
    low = np.clip(np.searchsorted(below, p, side="right") - 1, 0, n_low - 1)
    high = n_low + np.clip(np.searchsorted(above, p, side="left") - 1, 0, max(n_high - 1, 0))
    index = np.where(p <= bound, low, high)
    pairs = np.bincount(index, weights=weight.ravel(), minlength=n_low + n_high)
    trues = None if true is None else np.bincount(index, weights=true.ravel(), minlength=n_low + n_high)
    edges = [(below[k], below[k + 1], False, k == n_low - 1) for k in range(n_low)]
    edges += [(above[k], above[k + 1], True, True) for k in range(n_high)]
    return [
        Band(float(lo), float(hi), up, closed, int(pairs[k]), None if trues is None else int(trues[k]))
        for k, (lo, hi, up, closed) in enumerate(edges)
    ]
