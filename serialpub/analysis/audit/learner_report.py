"""How the command line shows the learning adversary's figures
(:mod:`anonymizer.learners.figures`): the learner table, the pairs per band of P' and the
per-value table, in lines of at most 120 characters.
"""

from __future__ import annotations

from anonymizer.learners.figures import Band, LearnerFigures, LearnerReport, band_edges, bands

__all__ = ["Band", "LearnerFigures", "LearnerReport", "band_edges", "bands", "format_learners"]


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
