"""What an audit finds and how the command line shows it: :class:`AuditResult`, its
:class:`Verdict`, :class:`RegionOverlap` and :func:`format_report` (docs/design.md section 9;
the verdicts and their exit statuses: docs/commands.md, "Exit codes")."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from serialpub.analysis.audit.learner_report import LearnerReport
from serialpub.known_breach import release_span

#: Overlapping group pairs listed per release (all of them are counted).
MAX_LISTED_OVERLAPS = 20


class Outcome(StrEnum):
    """The four verdicts of an audit, as the report prints them.

    ``FAIL``: a pair above 1/ℓ that the audited material proves, overlapping regions, or a
    finding (tampering, a checksum or count mismatch). ``NOT_VERIFIABLE``: nothing fails,
    but pairs exceed 1/ℓ on an upper bound the audited material cannot sharpen (presence
    known, no snapshots; docs/threat-model.md). ``PASS_WITH_KNOWN_BREACH``: the guarantee
    holds within a model an adversary is known to break (:mod:`serialpub.known_breach`).
    """

    PASS = "PASS"
    PASS_WITH_KNOWN_BREACH = "PASS, with accepted known breach"
    NOT_VERIFIABLE = "NOT VERIFIABLE from this copy"
    FAIL = "FAIL"

    @property
    def exit_status(self) -> int:
        """The exit status of ``serialpub audit`` (docs/commands.md): 0, 6, 5 or 1; 2-4
        are the command line's errors, so a script tells every verdict from them."""
        return EXIT_STATUS[self]


#: ``serialpub audit``'s exit status per verdict (docs/commands.md, "Exit codes")
EXIT_STATUS = {
    Outcome.PASS: 0,
    Outcome.FAIL: 1,
    Outcome.NOT_VERIFIABLE: 5,
    Outcome.PASS_WITH_KNOWN_BREACH: 6,
}


@dataclass(frozen=True)
class Verdict:
    """An audit's verdict: the outcome, the models with a known breach the releases were
    made under (:class:`serialpub.known_breach.KnownBreach` spellings) and the releases
    whose figure the audited material cannot check (empty unless ``NOT_VERIFIABLE``).

    ``str()`` is the verdict line, e.g. ``PASS, with accepted known breach: parts``.
    """

    outcome: Outcome
    known_breach: tuple[str, ...] = ()
    unverifiable: tuple[int, ...] = ()

    @property
    def exit_status(self) -> int:
        return self.outcome.exit_status

    @property
    def passed(self) -> bool:
        """True for PASS, with or without an accepted known breach."""
        return self.outcome in (Outcome.PASS, Outcome.PASS_WITH_KNOWN_BREACH)

    def __str__(self) -> str:
        breach = ", ".join(self.known_breach)
        if self.outcome is Outcome.PASS_WITH_KNOWN_BREACH:
            return f"{self.outcome}: {breach}"
        text = str(self.outcome)
        if self.unverifiable:
            text += f" (release(s) {release_span(self.unverifiable)})"
        return text + (f"; accepted known breach: {breach}" if breach else "")


@dataclass(frozen=True)
class RegionOverlap:
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
        bound_releases: the releases whose figure is only an upper bound (presence known,
            no snapshots).
        proven_violations, proven_violating_individuals: of ``violations`` and
            ``violating_individuals``, those above 1/ℓ on the links the audited material
            proves (under the upper bound: a presence release links a group's candidates
            only where its region holds no more register individuals than records, so all
            of them were present); the same as ``violations`` when the figure is exact.
        stated_max_p, stated_in: the max p the latest manifest states
            (``max_breach_probability``) and its release; None if it states none.
        known_breach: the models with a known breach the releases were made under
            (:mod:`serialpub.known_breach`), and ``known_breach_releases`` which releases.
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
    overlaps: list[RegionOverlap] = field(default_factory=list)
    overlap_pairs: int = 0
    findings: list[str] = field(default_factory=list)
    max_p_by_release: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    published_count_max_p: float = 0.0
    mechanism_max_p: float | None = None
    upper_bound: str | None = None
    bound_releases: list[int] = field(default_factory=list)
    proven_violations: int = 0
    proven_violating_individuals: int = 0
    stated_max_p: float | None = None
    stated_in: int | None = None
    known_breach: list[str] = field(default_factory=list)
    known_breach_releases: list[int] = field(default_factory=list)
    learners: LearnerReport | None = None

    @property
    def verdict(self) -> Verdict:
        """FAIL on a proven violation, overlapping regions or a finding; else NOT
        VERIFIABLE when pairs exceed 1/ℓ on the upper bound only; else PASS, naming the
        models with a known breach the releases were made under."""
        breach = tuple(self.known_breach)
        exact = not self.bound_releases  # then every violation is proven
        if self.proven_violations or (exact and self.violations) or self.overlap_pairs or self.findings:
            return Verdict(Outcome.FAIL, breach)
        if self.violations:  # above 1/ℓ only on the upper bound: nothing proves a breach
            return Verdict(Outcome.NOT_VERIFIABLE, breach, tuple(self.bound_releases))
        return Verdict(Outcome.PASS_WITH_KNOWN_BREACH if breach else Outcome.PASS, breach)

    @property
    def ok(self) -> bool:
        """True when the verdict is a PASS (with or without an accepted known breach): no
        pair exceeds 1/ℓ, no regions overlap and nothing else was found."""
        return self.verdict.passed


def collapse_notes(notes: Iterable[str]) -> list[str]:
    """Notes with repeats merged: notes that say the same of one release each
    (``release N: text``) become one line naming every release (``releases 1-20: text``),
    at the first one's place; a note given twice is kept once."""
    order: list[tuple[bool, str]] = []
    releases: dict[tuple[bool, str], list[int]] = {}
    for note in notes:
        match = re.fullmatch(r"release (\d+): (.*)", note, flags=re.DOTALL)
        key = (True, match.group(2)) if match else (False, note)
        if key not in releases:
            releases[key] = []
            order.append(key)
        if match:
            releases[key].append(int(match.group(1)))
    out = []
    for named, text in order:
        numbers = releases[(named, text)]
        plural = "s" if len(set(numbers)) > 1 else ""
        out.append(f"release{plural} {release_span(numbers)}: {text}" if named else text)
    return out


def format_report(result: AuditResult) -> str:
    """A few lines for the command line: releases, max p against 1/ℓ, violations, overlaps,
    findings, the notes (repeats merged, :func:`collapse_notes`), what the audited material
    cannot check, and the verdict line (:class:`Verdict`)."""
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
            f"max p = {result.max_p:.6g} {cmp} 1/ℓ = {bound:.4g}: "
            f"individual {result.max_p_individual} (and {result.max_p_individuals - 1} other(s) with the same QI "
            f"values in every release), value {result.max_p_value!r}, linked in {result.max_p_releases} release(s)"
        )
    if result.upper_bound:
        lines.append(
            f"violations: {result.proven_violations} (individual, value) pair(s) above 1/ℓ on the links the "
            f"published files prove, {result.proven_violating_individuals} individual(s); on the upper bound "
            f"{result.violations} pair(s), {result.violating_individuals} individual(s)"
        )
    else:
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
    lines.extend(f"note: {n}" for n in collapse_notes(result.notes))
    verdict = result.verdict
    if verdict.unverifiable:
        lines.append(f"not verifiable: {_unverifiable(result, verdict.unverifiable)}")
    lines.append(f"verdict: {verdict}")
    return "\n".join(lines)


def _unverifiable(result: AuditResult, releases: tuple[int, ...]) -> str:
    """Why the figure cannot be checked from the published files, what they state and what
    checks it (docs/threat-model.md, "The auditor with and without the snapshots")."""
    stated = (
        f"the manifests state max p = {result.stated_max_p:.6g} (release {result.stated_in}), which"
        if result.stated_max_p is not None
        else "the manifests state no max p; the exact figure"
    )
    return (
        f"release(s) {release_span(releases)} were published with presence known, and the exact figure needs "
        "who was present in each period, which the published files do not carry (presence can itself be "
        f"sensitive; docs/threat-model.md). {result.violations} pair(s) exceed 1/ℓ on the upper bound, none on "
        f"the links the files prove; {stated} only the snapshots can check: the publisher's exact audit, "
        "'serialpub audit WORKSPACE --snapshots DIR', verifies it"
    )
