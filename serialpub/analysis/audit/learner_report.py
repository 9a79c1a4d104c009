"""What the learning adversary's audit reports, and how the command line shows it.

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
    series (:class:`serialpub.analysis.audit.learners.LearnerSeries`), kept for callers that
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


def format_learners(report: LearnerReport) -> str:
    """The learner table (learner, max P', the charge of the pair attaining it, pairs above
    1/ℓ and, with the snapshots, how many of them are true, seconds), then the pairs per
    band of P' (with the snapshots, the fraction true in each), lines of at most 120
    characters for five learners."""
    bound = 1.0 / report.ell
    lines = [
        'learning adversary (docs/threat-model.md, "The learning adversary"): '
        "reported beside the verdict, not part of it",
        f"{report.pairs:,} (individual, protected value) pairs; posteriors learned from the releases and the register",
    ]
    rows = [["learner", "max P'", "its charge", f"pairs > 1/ℓ = {bound:.4g}", "true of them", "seconds"]]
    for f in report.learners:
        true = (
            "-"
            if f.above_true is None
            else f"{f.above_true:,}" + (f" ({f.above_true / f.above:.2f})" if f.above else "")
        )
        rows.append([f.name, f"{f.max_p:.4f}", f"{f.max_uniform:.4f}", f"{f.above:,}", true, f"{f.seconds:.1f}"])
    lines.extend(_table(rows))
    if report.learners:
        lines.append("pairs per band of P'" + (" (in brackets: the fraction true)" if report.calibrated else ""))
        body = [["band", *(f.name for f in report.learners)]]
        for k, band in enumerate(report.learners[0].bands):
            cells = [f.bands[k] for f in report.learners]
            if any(c.pairs for c in cells):
                body.append([band.label, *(_band_cell(c) for c in cells)])
        lines.extend(_table(body))
    lines.extend(_ratio_lines(report))
    lines.extend(f"note: {n}" for n in report.notes)
    lines.extend(f"note: {f.name}: {f.note}" for f in report.learners if f.note)
    return "\n".join(lines)


def _ratio_lines(report: LearnerReport) -> list[str]:
    """Per protected value (a row each, so that a series protecting every value still fits
    the console) and learner its max P' and its realized within-group ratio max π / mean π,
    and against the declared ρ_s whether the learner lies inside the covered class (≤) or
    not (>)."""
    fitted = [f for f in report.learners if f.ratios]
    if not fitted or not report.values:
        return []
    declared = bool(report.declared) and fitted[0].covered is not None
    lines = ["per protected value: max P' / realized within-group ratio max π / mean π"]
    if declared:
        lines.append("  (≤ or > the declared ρ_s: the learner lies inside or outside the class the charge covers)")
    rows = [["value", *(["ρ_s"] if declared else []), *(f.name for f in fitted)]]
    for k, value in enumerate(report.values):
        cells = []
        for f in fitted:
            mark = "" if f.covered is None else " ≤" if f.covered[k] else " >"
            cells.append(f"{f.max_per_value[k]:.3f} / {f.ratios[k]:.2f}{mark}")
        rows.append([value, *([str(report.declared[k])] if declared else []), *cells])
    return lines + _table(rows)


def _band_cell(band: Band) -> str:
    if band.true is None or not band.pairs:
        return f"{band.pairs:,}"
    return f"{band.pairs:,} ({band.true / band.pairs:.2f})"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        out.append("  " + "  ".join(cells))
    return out
