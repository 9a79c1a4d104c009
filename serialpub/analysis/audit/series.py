"""The audit of a release series: every release recomputed, p summarized and decided.

For every register individual o and protected value s, p(o, s) = 1 - Π_j (1 - n_{j,s}/n_j)
over the releases j in which o is a candidate of a group holding s (paper 004, Lemma 4;
docs/design.md section 1), decided ``p > 1/ℓ`` exactly
(:func:`anonymizer.privacy.exceeds_threshold`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from anonymizer.arrays import factorize
from anonymizer.hierarchy import Hierarchy
from anonymizer.intervals import release_hierarchies
from anonymizer.privacy import charged_counts, exceeds_threshold, survival_factor, survival_products
from anonymizer.settings import MAX_EPSILON, Dilution, Guarantee, PartitionTest
from serialpub.analysis.audit.cells import Cells, IntArray, register_cells, snapshot_records
from serialpub.analysis.audit.geometry import Tree, distinct_sorted
from serialpub.analysis.audit.learners import run_learners
from serialpub.analysis.audit.manifest import ParsedManifest, marginal_findings, parse_manifest, ratio_vector
from serialpub.analysis.audit.recompute import Geometry, History, ReleaseInputs, audit_release
from serialpub.analysis.audit.result import AuditResult
from serialpub.analysis.audit.serial import SerialBuilder, to_serial
from serialpub.errors import InputError
from serialpub.known_breach import RISK, KnownBreach, release_span


def audit_releases(
    register: pd.DataFrame | Sequence[pd.DataFrame],
    id_column: str,
    hierarchies: dict[str, Hierarchy] | Sequence[dict[str, Hierarchy]],
    releases: list[tuple[Path, dict[str, Any], pd.DataFrame]],
    snapshots: list[tuple[pd.DataFrame, str]] | None = None,
    learners: Sequence[str] = (),
) -> AuditResult:
    """Recompute the global guarantee of a release series from public material alone, or,
    with the snapshots, as the data holder's exact audit.

    Args:
        register: the population register, one row per individual: ``id_column`` and every
            quasi-identifier of the releases, values as strings equal to hierarchy leaves;
            or, when it changed between releases, the register of each release's period
            (a sequence read in order; the same object twice is counted once).
        id_column: the register's identifier column (reported, never published).
        hierarchies: ``{attribute: Hierarchy}`` for every quasi-identifier of the releases,
            or one such mapping per release (the versions each release used).
        releases: ``(directory, parsed manifest.json, data.parquet as a DataFrame)`` per
            release, in publication order. ``directory / "data.parquet"`` is hashed and
            compared with the manifest's ``sha256["data.parquet"]``.
        snapshots: per release, its snapshot (id and sensitive columns, as text) and where
            it was read from (for messages). With them the audit also computes the
            mechanism-aware figure (n* = every snapshot record of s in a region, published
            or not; under presence, candidates are the present individuals) and decides on
            it (docs/threat-model.md).
        learners: the learning adversary's learners to run (:data:`.learners.LEARNERS`);
            their report (``result.learners``) does not change the verdict.

    Returns:
        an :class:`AuditResult`. p is computed per (individual, protected value) over every
        release (paper 004, Lemma 4; docs/design.md section 1), an individual being a
        candidate of release j through their QI values in release j's register and of no
        release whose register lacks them (section 10); the union of the releases'
        protected values is counted in every release; the verdict p > 1/ℓ is exact and uses
        the latest release's ℓ. If regions overlap, a QI combination gets a factor from
        every group covering it (the release is invalid anyway and reported).

    Raises:
        InputError: no releases; a manifest lacks a required key or has one of the wrong
            type; a register lacks a column, repeats an id, or holds a value that is not a
            leaf of its hierarchy; a hierarchy is missing for a quasi-identifier.
    """
    if not releases:
        raise InputError("nothing to audit: no published release was found")
    registers = [register] * len(releases) if isinstance(register, pd.DataFrame) else register
    hierarchy_sets = [hierarchies] * len(releases) if isinstance(hierarchies, dict) else hierarchies
    if len(registers) != len(releases) or len(hierarchy_sets) != len(releases):
        raise ValueError("register, hierarchies: one per release is needed")
    parsed = [parse_manifest(man, str(d / "manifest.json")) for d, man, _ in releases]
    qis: list[str] = []
    for pm in parsed:
        qis.extend(q for q in pm.quasi_identifiers if q not in qis)
    values: list[str] = []
    for pm in parsed:
        values.extend(v for v in pm.protected if v not in values)

    latest = parsed[-1]
    result = AuditResult(
        dataset=latest.dataset,
        releases=[pm.release for pm in parsed],
        ell=latest.ell,
        stated_max_p=latest.stated_max_p,
        stated_in=latest.release,
    )
    _series_notes(parsed, values, result)
    per_individual = snapshots is not None and any(pm.dilution is not Dilution.REGISTER for pm in parsed)
    if snapshots is not None and len(snapshots) != len(parsed):
        raise ValueError("snapshots: one per release is needed")

    serial = SerialBuilder()
    published_local: list[History] = []
    proven_local: list[History] = []
    mechanism_local: list[History] = []
    previous: tuple[object, object, Cells] | None = None
    sharing: list[ParsedManifest] = []  # the releases read with the register of ``previous``
    tree_of: dict[int, Tree] = {}  # per hierarchy object (the sets share them)
    learned: list[tuple[Cells, dict[str, Hierarchy], Geometry]] = []
    for j, ((directory, _, data), pm) in enumerate(zip(releases, parsed, strict=True)):
        reg, hs = registers[j], hierarchy_sets[j]
        missing = [q for q in qis if q not in hs]
        if missing:
            raise InputError(f"no hierarchy for quasi-identifier(s) {', '.join(missing)}; add hierarchies/<qi>.csv")
        if previous is not None and previous[0] is reg and previous[1] is hs:
            cells = previous[2]  # the same register and hierarchies as the release before
            serial.repeat()
        else:
            if previous is not None:
                result.findings.extend(marginal_findings(previous[0], sharing))
            cells = register_cells(reg, id_column, qis, hs, per_individual)
            previous, sharing = (reg, hs, cells), []
            serial.add(pd.Index(reg[id_column].astype(str).to_numpy()), cells.cell_of_row)
        sharing.append(pm)
        snap = None
        if snapshots is not None:
            table, where = snapshots[j]
            snap = snapshot_records(table, reg, id_column, pm.sensitive, values, cells, where)
        for q in qis:
            if id(hs[q]) not in tree_of:  # the hierarchy objects live as long as hierarchy_sets
                tree_of[id(hs[q])] = Tree.of(hs[q])
        trees = {q: tree_of[id(hs[q])] for q in qis}
        if pm.numeric:  # its intervals become nodes (anonymizer.intervals; docs/design.md)
            try:
                extended = release_hierarchies(hs, [q for q in pm.numeric if q in data.columns], data)
            except ValueError as exc:
                raise InputError(f"{directory / 'manifest.json'}: numeric_quasi_identifiers: {exc}") from None
            trees |= {q: Tree.of(extended[q]) for q in pm.numeric if q in data.columns}
        rows = audit_release(ReleaseInputs(directory, pm, data, qis, trees, cells, values, snap), result)
        if learners:  # the learners read the records, not the charge
            learned.append((cells, hs, rows.geometry))
        published_local.append(charged(rows.published, pm.propensity_ratio, values))
        proven_local.append(charged(rows.proven, pm.propensity_ratio, values))
        if rows.mechanism is not None:
            mechanism_local.append(charged(rows.mechanism, pm.propensity_ratio, values))

    if previous is not None:
        result.findings.extend(marginal_findings(previous[0], sharing))
    cells_all = serial.done()
    if learners:
        result.learners = run_learners(qis, values, parsed, learned, cells_all, snapshots, id_column, learners)
    published = [to_serial(h, cells_all.local[:, j]) for j, h in enumerate(published_local)]
    pub_summary = _summarize(published, cells_all.counts, values, latest.ell)
    result.published_count_max_p = pub_summary.max_p
    decided = proven = pub_summary
    if snapshots is not None:
        mechanism = [to_serial(h, cells_all.local[:, j]) for j, h in enumerate(mechanism_local)]
        decided = proven = _summarize(mechanism, cells_all.counts, values, latest.ell)
        result.mechanism_max_p = decided.max_p
    else:
        _bound_notes(parsed, result)
        if result.bound_releases and pub_summary.violations:
            # what the published files prove: only the links they show (a lower bound on p)
            links = [to_serial(h, cells_all.local[:, j]) for j, h in enumerate(proven_local)]
            proven = _summarize(links, cells_all.counts, values, latest.ell)
    result.proven_violations = proven.violations
    result.proven_violating_individuals = proven.violating_individuals
    result.max_p_by_release = decided.by_release
    if decided.best is None:
        return result
    best_cell, best_value, best_linked = decided.best
    result.max_p = decided.max_p
    result.max_p_individual = str(cells_all.ids[int(cells_all.first[best_cell])])
    result.max_p_value = values[best_value]
    result.max_p_releases = best_linked
    result.max_p_individuals = int(cells_all.counts[best_cell])
    result.violations = decided.violations
    result.violating_individuals = decided.violating_individuals
    return result


def _series_notes(parsed: list[ParsedManifest], values: list[str], result: AuditResult) -> None:
    """Notes and findings about the series as a whole (ℓ, protected values, guarantee,
    datasets, release numbering)."""
    latest = parsed[-1]
    ells = sorted({pm.ell for pm in parsed})
    if len(ells) > 1:
        result.notes.append(
            f"ℓ differs across releases ({', '.join(f'{e:g}' for e in ells)}); "
            f"the verdict uses the latest release's ℓ = {latest.ell:g}"
        )
    if any(set(pm.protected) != set(values) for pm in parsed):
        result.notes.append(
            "the protected values differ across releases; every value protected in any release "
            f"({', '.join(values)}) is counted in every release"
        )
    localized = [pm.release for pm in parsed if pm.guarantee is Guarantee.LOCALIZED]
    if localized:
        result.notes.append(
            f"release(s) {', '.join(map(str, localized))} claim only the localized guarantee; "
            "the audit checks the global one"
        )
    breached = [pm for pm in parsed if pm.known_breach]
    if breached:
        # one line naming every such release, not a sample: the verdict below holds only
        # within the model each was made under
        models = [str(b) for b in KnownBreach if any(b in pm.known_breach for pm in breached)]
        result.known_breach = models
        result.known_breach_releases = [pm.release for pm in breached]
        result.notes.append(
            f"release(s) {release_span(pm.release for pm in breached)} were made under a model with a known "
            f"breach ({'; '.join(RISK[KnownBreach(b)] for b in models)}): the verdict holds only within that "
            'model (docs/threat-model.md, "Models with a known breach")'
        )
    noisy_notes(parsed, result)
    propensity_notes(parsed, values, result)
    datasets = {pm.dataset for pm in parsed}
    if len(datasets) > 1:
        result.findings.append(f"the manifests name several datasets: {sorted(map(str, datasets))}")
    for prev, cur in itertools.pairwise(parsed):
        if cur.release <= prev.release:
            result.findings.append(f"release {cur.release} comes after release {prev.release}; numbers must increase")
        if cur.previous != prev.release:
            result.findings.append(
                f"release {cur.release}: previous_release is {cur.previous}, "
                f"but the release before it is {prev.release}"
            )


def noisy_notes(parsed: list[ParsedManifest], result: AuditResult) -> None:
    """What the public files say of ``partition_test: noisy`` (docs/threat-model.md, "The
    noisy split test"): each such release must record an ε in (0, ln 2]; its refused splits
    may raise a posterior to e^ε × its charge, which the note states beside the stated max p.
    The noise itself is secret: the audit cannot replay the partition, only check that every
    group meets its requirement, as for every release."""
    noisy = [pm for pm in parsed if pm.partition_test == PartitionTest.NOISY]
    for pm in noisy:
        eps = pm.partition_epsilon
        if eps is None or not 0 < eps <= MAX_EPSILON:
            result.findings.append(
                f"release {pm.release}: partition_test noisy with partition_epsilon {eps!r}, "
                f"not in (0, {MAX_EPSILON:.4f}] (ln 2)"
            )
    for pm in parsed:
        if pm.partition_test is None and pm.partition_epsilon is not None:
            result.findings.append(f"release {pm.release}: partition_epsilon without partition_test noisy")
    rated = [pm for pm in noisy if pm.partition_epsilon is not None and 0 < pm.partition_epsilon <= MAX_EPSILON]
    if rated:
        eps = max(float(pm.partition_epsilon or 0.0) for pm in rated)
        stated = max((pm.stated_max_p or 0.0) for pm in parsed)
        result.notes.append(
            f"release(s) {release_span(pm.release for pm in rated)} used the noisy split test (ε up to {eps:g}): "
            f"a refused split may raise a posterior to e^ε = {math.exp(eps):.3f} × its charge, so the stated max p "
            f"of {stated:.4f} bounds a posterior at {min(1.0, math.exp(eps) * stated):.4f} per release, if the "
            'seed kept beside the signing key stayed secret (docs/threat-model.md, "The noisy split test")'
        )


def charged(rows: History, propensity_ratio: int | dict[str, int], values: Sequence[str]) -> History:
    """A release's history rows as its manifest's ρ charges them: n_{j,s} becomes
    ``min(n_j, ρ_s·n_{j,s})`` (:func:`anonymizer.privacy.charged_counts`; docs/threat-model.md,
    "The propensity ratio"); ``values``: the protected values the rows' value index names."""
    rho = ratio_vector(propensity_ratio, values)
    if np.all(rho == 1):
        return rows
    return History(rows.cell, rows.value, rows.n, charged_counts(rows.n, rows.n_s, rho[rows.value]))


def propensity_notes(parsed: list[ParsedManifest], values: Sequence[str], result: AuditResult) -> None:
    """Which adversary the verdict covers (docs/threat-model.md, "The propensity ratio"):
    ρ = 1 in every release covers a prior uniform inside each group only, which the note
    says as it names a model with a known breach; a larger ρ_s covers every propensity for
    s up to the smallest ρ_s of the series times a group's mean."""
    rhos = np.array([ratio_vector(pm.propensity_ratio, values) for pm in parsed], dtype=np.int64)
    least = rhos.min(axis=0)
    if np.all(rhos == 1):
        result.notes.append(
            "every release charges a group's records uniformly over its candidates (propensity_ratio 1): the "
            "verdict covers an adversary whose prior is uniform inside each group, not one who learns from the "
            "releases how the value depends on the QIs (--learners shows what such an adversary reaches; "
            'docs/threat-model.md, "The propensity ratio")'
        )
        return
    if np.all(rhos == rhos.flat[0]):
        ratios, bound = str(int(rhos.flat[0])), f"{int(rhos.flat[0])} times"
    else:
        ratios = "/".join(sorted({_ratio_text(pm.propensity_ratio) for pm in parsed}))
        bound = "ρ_s times (" + ", ".join(f"{v} {int(r)}" for v, r in zip(values, least, strict=True)) + ")"
    result.notes.append(
        f"propensity_ratio {ratios}: the verdict covers every adversary whose propensity for a "
        f"protected value s is at most {bound} its mean over a group's candidates, learned from the releases or "
        'known from outside (docs/threat-model.md, "The propensity ratio")'
        + ("; for a value with ρ = 1 it covers the uniform share only" if np.any(least == 1) else "")
    )


def _ratio_text(propensity_ratio: int | dict[str, int]) -> str:
    if not isinstance(propensity_ratio, dict):
        return str(propensity_ratio)
    return "{" + ", ".join(f"{v}: {r}" for v, r in propensity_ratio.items()) + "}"


def _bound_notes(parsed: list[ParsedManifest], result: AuditResult) -> None:
    """Without the snapshots: what the published-count figure cannot see."""
    presence = [pm.release for pm in parsed if pm.dilution is not Dilution.REGISTER]
    suppressed = [pm.release for pm in parsed if pm.suppressed]
    if presence:
        result.bound_releases = presence
        result.upper_bound = (
            f"release(s) {_span(presence)} were published with presence known; without the snapshots the "
            "audit cannot tell who was present, so it takes every register individual in a group's region as "
            "present and linked, which can only raise p: the figure is an upper bound. Give --snapshots for "
            "the exact figure"
        )
    if suppressed:
        result.notes.append(
            f"release(s) {_span(suppressed)} suppressed records (suppression model "
            f"{'/'.join(sorted({pm.suppression_model or 'paper' for pm in parsed}))}): this figure counts the "
            "published records only; an adversary who knows the algorithm can infer what suppression removed. "
            "Give --snapshots for the mechanism-aware figure"
        )


def _span(numbers: list[int]) -> str:
    return ", ".join(map(str, numbers)) if len(numbers) <= 6 else f"{numbers[0]}..{numbers[-1]} ({len(numbers)})"


@dataclass(frozen=True)
class _Summary:
    """Max p, its pair (cell, value index, linked releases), the violations and the max
    after each release, of one set of history rows."""

    max_p: float
    best: tuple[int, int, int] | None
    violations: int
    violating_individuals: int
    by_release: list[float]


def _summarize(hist: list[History], counts: IntArray, values: list[str], ell: float) -> _Summary:
    """p per (cell, protected value) over the releases' history rows (paper 004, Lemma 4),
    the exact verdict p > 1/ℓ (:func:`anonymizer.privacy.exceeds_threshold`)."""
    cell = np.concatenate([h.cell for h in hist])
    value = np.concatenate([h.value for h in hist])
    n = np.concatenate([h.n for h in hist])
    n_s = np.concatenate([h.n_s for h in hist])
    release_of = np.repeat(np.arange(len(hist)), [h.cell.size for h in hist])
    if cell.size == 0:
        return _Summary(0.0, None, 0, 0, [0.0] * len(hist))

    pair_key = cell * len(values) + value
    pair, pair_first = factorize(pair_key)
    pair_keys = pair_key[pair_first]
    n_pairs = pair_keys.size
    pair_cell, pair_value = pair_keys // len(values), pair_keys % len(values)

    # max p after each release (rows are in release order): running survival products;
    # the reported max p and the verdict below come from privacy's own functions
    factor = survival_factor(n, n_s)
    running = np.ones(n_pairs)
    bounds = np.cumsum([0, *(h.cell.size for h in hist)])
    by_release = []
    for lo, hi in itertools.pairwise(bounds):
        np.multiply.at(running, pair[lo:hi], factor[lo:hi])
        by_release.append(float(1.0 - running.min()))

    p = 1.0 - survival_products(pair, n, n_s, n_pairs)
    best = int(np.argmax(p))
    linked = np.bincount(distinct_sorted(pair * len(hist) + release_of) // len(hist), minlength=n_pairs)
    breach = exceeds_threshold(pair, n, n_s, n_pairs, ell)
    return _Summary(
        max_p=float(p[best]),
        best=(int(pair_cell[best]), int(pair_value[best]), int(linked[best])),
        violations=int(counts[pair_cell[breach]].sum()),
        violating_individuals=int(counts[distinct_sorted(pair_cell[breach])].sum()),
        by_release=by_release,
    )
