"""The learning adversary on a public copy: the learners' inputs prepared from what the
audit reads, and the report of the learners that docs/threat-model.md ("The learning
adversary") defines.

The learners themselves (naive Bayes, its EM passes, logistic with pairs, the
re-weighting) live in :mod:`anonymizer.learners`, below both the audit and the writer
side, so that the release report and ``serialpub plan`` show the figures this audit gives
on the same series. This module prepares their :class:`LearnerSeries` from the audit's
own geometry: its candidate pairs (:class:`.recompute.Geometry`) say which register cell
lies in which group, and its serial cells (:mod:`.serial`) carry a cell's factors across
register versions.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from anonymizer.arrays import factorize
from anonymizer.hierarchy import Hierarchy
from anonymizer.learners.core import (
    EM_PASSES,
    LEARNERS,
    LearnerSeries,
    Release,
    Version,
    learner_report,
    posteriors,
    reweight,
)
from anonymizer.learners.figures import IntArray, LearnerReport
from anonymizer.settings import Dilution
from serialpub.analysis.audit.cells import Cells
from serialpub.analysis.audit.geometry import row_ids
from serialpub.analysis.audit.manifest import ParsedManifest, ratio_vector
from serialpub.analysis.audit.recompute import Geometry
from serialpub.analysis.audit.serial import SerialCells
from serialpub.analysis.audit.spellings import value_codes
from serialpub.errors import InputError
from serialpub.known_breach import release_span

# the learners' names and entry points, for the command line and the tests that run the audit's
__all__ = [
    "EM_PASSES",
    "LEARNERS",
    "LearnerSeries",
    "Release",
    "Version",
    "learner_names",
    "learner_report",
    "learner_series",
    "posteriors",
    "reweight",
    "run_learners",
    "snapshot_truth",
]


def learner_names(text: str) -> tuple[str, ...]:
    """``--learners``: ``all``, ``none``, or learner names joined by commas, as a tuple in
    the order of :data:`LEARNERS`.

    Raises:
        InputError: an unknown name (the line names the option and the known names)."""
    wanted = [t.strip() for t in text.split(",") if t.strip()]
    if wanted == ["all"]:
        return LEARNERS
    if wanted == ["none"]:
        return ()
    unknown = [t for t in wanted if t not in LEARNERS]
    if unknown or not wanted:
        raise InputError(
            f"--learners {text[:40]!r}: use all, none, or names joined by commas from {', '.join(LEARNERS)}"
        )
    return tuple(n for n in LEARNERS if n in wanted)


def run_learners(
    qis: list[str],
    values: list[str],
    parsed: Sequence[ParsedManifest],
    per_release: Sequence[tuple[Cells, dict[str, Hierarchy], Geometry]],
    serial: SerialCells,
    snapshots: Sequence[tuple[pd.DataFrame, str]] | None,
    id_column: str,
    names: Sequence[str],
) -> LearnerReport:
    """The learning adversary's report on a series the audit has just recomputed
    (:func:`.series.audit_releases`): its QIs and protected values, the releases' manifests,
    per release the register cells, hierarchies and :class:`Geometry`, the serial cells,
    and the snapshots (for the calibration only) with the register's id column."""
    truth = None
    if snapshots is not None:
        sensitive = [pm.sensitive for pm in parsed]
        truth = snapshot_truth(snapshots, id_column, sensitive, values, serial.ids, serial.code)
    series = learner_series(qis, values, parsed[-1].ell, per_release, serial, truth)
    declared = np.array([ratio_vector(pm.propensity_ratio, values) for pm in parsed], dtype=np.int64)
    notes = []
    presence = [pm.release for pm in parsed if pm.dilution is not Dilution.REGISTER]
    if presence:
        notes.append(
            f"release(s) {release_span(presence)} were published with presence known; the public copy does not say "
            "who was present, so the learners take every register individual in a group's region as its candidate"
        )
    return learner_report(series, names, notes, declared)


def learner_series(
    qis: list[str],
    values: list[str],
    ell: float,
    per_release: Sequence[tuple[Cells, dict[str, Hierarchy], Geometry]],
    serial: SerialCells,
    truth: IntArray | None = None,
) -> LearnerSeries:
    """The learners' inputs from what the audit computed: per release its register cells,
    hierarchies and :class:`Geometry`; the serial cells (:mod:`.serial`); the protected
    ``values`` and the verdict's ℓ."""
    vocab: list[dict[str, int]] = [{} for _ in qis]
    versions: list[Version] = []
    cells_of: dict[int, tuple[int, IntArray]] = {}  # per Cells object: its version and its cells' indices
    domain = {v: i for i, v in enumerate(values)}
    releases = []
    for j, (cells, hs, geo) in enumerate(per_release):
        if id(cells) not in cells_of:  # releases that share a register share its cells
            # per-individual cells (the presence audit with snapshots) collapse to their QI cells
            cell_of, first = row_ids(cells.leaves, [hs[q].n_leaves for q in qis])
            leaves = np.empty((first.size, len(qis)), dtype=np.int64)
            for a, q in enumerate(qis):
                names = hs[q].labels[: hs[q].n_leaves]
                lookup = np.array([vocab[a].setdefault(x, len(vocab[a])) for x in names], dtype=np.int64)
                leaves[:, a] = lookup[cells.leaves[first, a]]
            counts = np.bincount(cell_of, weights=cells.counts, minlength=first.size).astype(np.int64)
            cells_of[id(cells)] = (len(versions), cell_of)
            versions.append(Version(leaves, counts))
        k, cell_of = cells_of[id(cells)]
        # a region holds every individual of a cell or none, so (cell, group) pairs are the candidates
        _, first_pair = factorize(cell_of[geo.cell] * max(geo.records.size, 1) + geo.group)
        col = serial.local[:, j]
        protected = value_codes(values, geo.labels)  # another spelling of a protected value is that value
        column = [
            int(p) if p >= 0 else domain.setdefault(u, len(domain)) for u, p in zip(geo.labels, protected, strict=True)
        ]
        cell, group = cell_of[geo.cell[first_pair]], geo.group[first_pair]
        releases.append((k, cell, group, geo, column, np.where(col >= 0, cell_of[np.maximum(col, 0)], -1)))
    out = []
    for k, cell, group, geo, value_of, col in releases:  # the domain is complete only now
        counts_s = np.zeros((geo.records.size, len(domain)), dtype=np.int64)
        for u, s in enumerate(value_of):
            counts_s[:, s] += geo.counts[:, u]
        out.append(Release.of(k, cell, group, np.maximum(geo.region, geo.records), counts_s, col))
    ids, code, first, counts = serial.ids, serial.code, serial.first, serial.counts
    return LearnerSeries(
        qis, [list(v) for v in vocab], list(domain), list(values), ell, versions, out, ids, code, first, counts, truth
    )


def snapshot_truth(
    snapshots: Sequence[tuple[pd.DataFrame, str]],
    id_column: str,
    sensitive: Sequence[str],
    values: list[str],
    ids: pd.Index,
    code: IntArray,
) -> IntArray:
    """Per serial cell and protected value (K, P): the individuals who carry the value in
    at least one release's snapshot. ``snapshots``: per release, its table (id and
    sensitive columns as text) and where it was read from, already checked by the audit
    (:func:`.cells.snapshot_records`); ``sensitive``: each release's sensitive column."""
    n_k = int(code.max(initial=-1)) + 1
    keys = []
    for (table, _), column in zip(snapshots, sensitive, strict=True):
        codes, labels = pd.factorize(table[column].astype(str))
        value = value_codes(values, list(labels))[codes]  # another spelling of a protected value is that value
        person = np.asarray(ids.get_indexer(pd.Index(table[id_column].astype(str))), dtype=np.int64)
        held = (value >= 0) & (person >= 0)
        keys.append(person[held] * len(values) + value[held])
    distinct = np.unique(np.concatenate(keys)) if keys else np.empty(0, dtype=np.int64)
    person, v = np.divmod(distinct, max(len(values), 1))
    flat = np.bincount(code[person] * len(values) + v, minlength=n_k * len(values))
    return flat.reshape(n_k, len(values)).astype(np.int64)
