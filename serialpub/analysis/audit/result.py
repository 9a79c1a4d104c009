"""What an audit finds and how the command line shows it: :class:`AuditResult`,
:class:`Overlap` and :func:`format_report` (docs/design.md section 9)."""

from __future__ import annotations

from dataclasses import dataclass, field

from serialpub.analysis.audit.learner_report import LearnerReport

#: Overlapping group pairs listed per release (all of them are counted).
MAX_LISTED_OVERLAPS = 20


@dataclass(frozen=True)
class Overlap:
    """Two groups of one release whose regions share at least one QI combination.

    Attributes:
        release: the release sequence number.
        first, second: the QI labels of the two groups, ``{attribute: label}``.
    """

    release: int
    first: dict[str, str]
    second: dict[str, str]

    def __str__(self) -> str:
        def show(labels: dict[str, str]) -> str:
            return "(" + ", ".join(f"{k}={v}" for k, v in labels.items()) + ")"

        return f"release {self.release}: groups {show(self.first)} and {show(self.second)} overlap"


@dataclass
class AuditResult:
    """Outcome of an audit of one dataset's release series.

    Attributes:
        dataset: dataset name from the manifests (None if they name none).
        releases: sequence numbers of the audited releases, in order.
        ell: the ℓ the verdict uses (the latest release's; see ``notes`` if they differ).
        max_p: largest breach probability over all (individual, protected value) pairs,
            0.0 if no pair is linked at all.
        max_p_individual, max_p_value, max_p_releases: the register id, the value and the
            number of linked releases of a pair attaining ``max_p`` (None/0 if none).
        max_p_individuals: register individuals sharing that pair's QI values (they all
            have the same p).
        violations: (individual, value) pairs with p > 1/ℓ, decided exactly.
        violating_individuals: distinct individuals in at least one violating pair.
        overlaps: overlapping group pairs, at most :data:`MAX_LISTED_OVERLAPS` per release.
        overlap_pairs: number of overlapping group pairs over all releases.
        findings: other defects (hash mismatch, unknown labels, count mismatches, ...),
            one line each, naming the release.
        max_p_by_release: max p over all pairs after each release, shape (len(releases),).
        notes: facts the reader should know that are not defects (ℓ or protected values
            changing between releases, suppression the published counts do not show).
        published_count_max_p: max p with the published counts (paper 004's model).
        mechanism_max_p: max p with the mechanism-aware counts n* and, under presence, the
            present individuals, both from the snapshots; None without them. When it is
            given, ``max_p``, the violations and the verdict are this model's.
        upper_bound: why ``max_p`` is only an upper bound (presence without snapshots),
            None when it is exact.
        learners: the learning adversary's report (:mod:`.learners`) when learners were
            asked for, else None; reported beside the verdict, it does not change it.
    """

    dataset: str | None
    releases: list[int]
    ell: float
    max_p: float = 0.0
    max_p_individual: str | None = None
    max_p_value: str | None = None
    max_p_releases: int = 0
    max_p_individuals: int = 0
    violations: int = 0
    violating_individuals: int = 0
    overlaps: list[Overlap] = field(default_factory=list)
    overlap_pairs: int = 0
    findings: list[str] = field(default_factory=list)
    max_p_by_release: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    published_count_max_p: float = 0.0
    mechanism_max_p: float | None = None
    upper_bound: str | None = None
    learners: LearnerReport | None = None

    @property
    def ok(self) -> bool:
        """True when no pair exceeds 1/ℓ, no regions overlap and nothing else was found."""
        return self.violations == 0 and self.overlap_pairs == 0 and not self.findings


def format_report(result: AuditResult) -> str:
    """A few lines for the command line: releases, max p against 1/ℓ, violations, overlaps,
    findings and the verdict."""
    bound = 1.0 / result.ell
    rel = result.releases
    span = f"{rel[0]}..{rel[-1]}" if len(rel) > 1 else str(rel[0]) if rel else "none"
    lines = [f"dataset {result.dataset or '?'}: {len(rel)} release(s) audited ({span}), ℓ = {result.ell:g}"]
    if result.mechanism_max_p is not None:
        lines.append(
            f"with the snapshots: max p = {result.mechanism_max_p:.6g} mechanism-aware (every record counted, "
            f"published or not; the verdict's figure), {result.published_count_max_p:.6g} from the published "
            "counts alone"
        )
    if result.upper_bound:
        lines.append(f"upper bound: {result.upper_bound}")
    if result.max_p_individual is None:
        lines.append(f"max p = 0 (no individual is linked to a protected value); bound 1/ℓ = {bound:.4g}")
    else:
        cmp = ">" if result.max_p > bound else "<="
        lines.append(
            f"max p = {result.max_p:.6g} {cmp} 1/ℓ = {bound:.4g}: individual {result.max_p_individual} "
            f"(and {result.max_p_individuals - 1} other(s) with the same QI values in every release), value "
            f"{result.max_p_value!r}, linked in {result.max_p_releases} release(s)"
        )
    lines.append(
        f"violations: {result.violations} (individual, value) pair(s) above 1/ℓ, "
        f"{result.violating_individuals} individual(s)"
    )
    lines.append(f"overlapping group pairs: {result.overlap_pairs}")
    lines.extend(f"  {o}" for o in result.overlaps[:5])
    if result.overlap_pairs > 5:
        lines.append(f"  ... {result.overlap_pairs - min(5, len(result.overlaps))} more")
    lines.append(f"findings: {len(result.findings) or 'none'}")
    lines.extend(f"  {f}" for f in result.findings)
    lines.extend(f"note: {n}" for n in result.notes)
    lines.append("verdict: PASS" if result.ok else "verdict: FAIL")
    return "\n".join(lines)
