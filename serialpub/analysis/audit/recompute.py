"""One release recomputed: its checks, its groups and the history rows it adds.

For a release j, the groups are the records' distinct QI node tuples; a group's
candidates are the register cells inside its region (the box of its nodes' leaf sets,
:mod:`serialpub.analysis.audit.geometry`); every candidate of a group holding records of
a protected value s gets the factor 1 - n_{j,s}/n_j (paper 004, Lemma 4; docs/design.md
section 1). Attributes whose used nodes form a cut (the normal case) are matched by a
sort-merge join on the node each leaf falls under; containment is tested only on the
others.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from anonymizer.arrays import expand_ranges
from anonymizer.settings import Dilution
from serialpub.analysis.audit.cells import Cells, Snapshot
from serialpub.analysis.audit.geometry import JOIN_CHUNK, Tree, column_codes, distinct_sorted, equi_join, row_ids
from serialpub.analysis.audit.manifest import ParsedManifest, data_problems, file_sha256
from serialpub.analysis.audit.result import MAX_LISTED_OVERLAPS, AuditResult, RegionOverlap
from serialpub.analysis.audit.spellings import spelling_findings, value_codes

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass
class History:
    """Long-format history rows of one release: cell, value index, n_j, n_{j,s}."""

    cell: IntArray
    value: IntArray
    n: IntArray
    n_s: IntArray


@dataclass(frozen=True)
class Geometry:
    """One release's groups as the learning adversary reads them (:mod:`.learners`): the
    candidate pairs (register cell ``cell[i]`` lies in the region of group ``group[i]``,
    both (P,)), the register individuals in each group's region and its records (both
    (G,)), and its records per published sensitive label, protected or not (G, L), with
    the labels (L,)."""

    cell: IntArray
    group: IntArray
    region: IntArray
    records: IntArray
    counts: IntArray
    labels: list[str]


@dataclass(frozen=True)
class ReleaseRows:
    """The history rows one release adds: under the published counts; of them, the links the
    published files prove (all of them unless presence is known and no snapshot is given);
    with the snapshot, under the mechanism-aware counts (docs/threat-model.md); and its
    groups for the learning adversary (:class:`Geometry`)."""

    published: History
    proven: History
    mechanism: History | None
    geometry: Geometry


@dataclass(frozen=True)
class ReleaseInputs:
    """What the audit of one release reads: its directory, its manifest view and published
    rows, the series' QIs with their hierarchy trees, the register's cells, the protected
    values and, for the mechanism-aware model, the release's snapshot."""

    directory: Path
    manifest: ParsedManifest
    data: pd.DataFrame
    qis: list[str]
    trees: dict[str, Tree]
    cells: Cells
    values: list[str]
    snapshot: Snapshot | None = None

    @property
    def where(self) -> str:
        return f"release {self.manifest.release} ({self.directory})"


@dataclass(frozen=True)
class _Classes:
    """The equivalence classes of one release: their nodes (one row per class), their record
    counts, their counts per protected value (``n_s[g, v]``) and per published sensitive
    label (``labelled[g, u]``, labels ``labels[u]``)."""

    nodes: IntArray
    records: IntArray
    n_s: IntArray
    radices: list[int]
    labelled: IntArray
    labels: list[str]


@dataclass(frozen=True)
class _Cuts:
    """The attributes whose used nodes are pairwise disjoint (with each one's leaf lookup)
    and the others, which are tested by containment."""

    attrs: list[int]
    lookups: list[IntArray]
    others: list[int]


def audit_release(inp: ReleaseInputs, result: AuditResult) -> ReleaseRows:
    """Check one release and return its history rows (:class:`ReleaseRows`); findings go
    into ``result``."""
    empty = History(*(np.empty(0, dtype=np.int64) for _ in range(4)))
    no_rows = np.empty(0, dtype=np.int64)
    no_groups = Geometry(no_rows, no_rows, no_rows, no_rows, np.empty((0, 0), dtype=np.int64), [])
    _check_file(inp, result)
    if not _check_columns(inp, result):
        return ReleaseRows(empty, empty, empty if inp.snapshot is not None else None, no_groups)
    nodes, known = _record_nodes(inp, result)
    classes = _classes(inp, nodes, known, result)
    cuts = _cuts(inp, classes)
    _find_overlaps(inp, classes, cuts, result)
    pc, pg = _candidates(inp, classes, cuts)
    in_region = np.bincount(pg, weights=inp.cells.counts[pc], minlength=classes.records.size).astype(np.int64)
    short = np.flatnonzero(in_region < classes.records)
    if short.size:
        s0 = int(short[0])
        result.findings.append(
            f"{inp.where}: {short.size} group(s) hold more records than register individuals in their region, "
            f"e.g. {_labels_of(inp, classes, s0)} with {classes.records[s0]} record(s) and {in_region[s0]} "
            "individual(s); the register does not cover this release"
        )
    presence = inp.manifest.dilution is not Dilution.REGISTER
    present: BoolArray | None = None
    if inp.snapshot is not None:
        present = np.zeros(inp.cells.counts.size, dtype=bool)
        present[inp.snapshot.cell] = True
    # published-count model: n_j from the register (dilution) or the published records
    # (presence); under presence, without the snapshot, every register individual of the
    # region is taken as linked (an upper bound), with it only the present ones
    n_j = classes.records if presence else np.maximum(in_region, classes.records)
    linked = pg >= 0 if not presence or present is None else present[pc]
    published = _history_rows(pc[linked], pg[linked], n_j, classes.n_s)
    groups = Geometry(pc, pg, in_region, classes.records, classes.labelled, classes.labels)
    if present is not None:
        return ReleaseRows(published, published, _mechanism_aware(inp, classes, pc, pg, n_j, present, result), groups)
    if not presence:
        return ReleaseRows(published, published, None, groups)
    # presence without the snapshot: a region holding no more register individuals than
    # records had every one of them present (one record each), so those links are proven
    # and give a lower bound on p that the published files alone support
    sure = in_region[pg] <= classes.records[pg]
    return ReleaseRows(published, _history_rows(pc[sure], pg[sure], n_j, classes.n_s), None, groups)


def _check_file(inp: ReleaseInputs, result: AuditResult) -> None:
    """The published file is the one the manifest names."""
    path = inp.directory / "data.parquet"
    expected = inp.manifest.sha256.get("data.parquet")
    if not path.is_file():
        result.findings.append(f"{inp.where}: data.parquet is missing; its sha256 cannot be checked")
    elif not isinstance(expected, str):
        result.findings.append(f"{inp.where}: the manifest records no sha256 of data.parquet")
    elif file_sha256(path) != expected.lower():
        result.findings.append(
            f"{inp.where}: data.parquet does not match the sha256 in its manifest; "
            "the file was changed after publishing"
        )


def _check_columns(inp: ReleaseInputs, result: AuditResult) -> bool:
    """The columns and record count the manifest names; False when the release cannot be
    recomputed."""
    problems, readable = data_problems(inp.manifest, list(inp.data.columns), len(inp.data))
    for problem in problems:
        result.findings.append(f"{inp.where}: data.parquet {problem}{'' if readable else '; release not recomputed'}")
    return readable


def _record_nodes(inp: ReleaseInputs, result: AuditResult) -> tuple[IntArray, BoolArray]:
    """Node ids of every record (QIs outside this release's list are the root) and which
    records carry only known labels."""
    m, data, where = inp.manifest, inp.data, inp.where
    r = len(data)
    nodes = np.empty((r, len(inp.qis)), dtype=np.int64)
    known = np.ones(r, dtype=bool)
    for a, qi in enumerate(inp.qis):
        h = inp.trees[qi].hierarchy
        if qi not in m.quasi_identifiers:
            nodes[:, a] = h.root
            continue
        codes, labels = column_codes(data[qi])
        mapped = np.array([h.node(x) if h.has_label(x) else -1 for x in labels], dtype=np.int64)
        bad_labels = [x for x, v in zip(labels, mapped, strict=True) if v < 0]
        codes_ok = np.where(codes >= 0, mapped[np.maximum(codes, 0)] if mapped.size else -1, -1)
        unknown = codes_ok < 0
        if unknown.any():
            nulls = int((codes < 0).sum())
            shown = ", ".join(repr(x) for x in bad_labels[:5]) + (" ..." if len(bad_labels) > 5 else "")
            what = f"{len(bad_labels)} value(s) that are not labels of its hierarchy: {shown}" if bad_labels else ""
            if nulls:
                what += ("; and " if what else "") + f"{nulls} empty value(s)"
            allowed = (
                f"a node of hierarchies/{qi}.csv or a closed interval [lo, hi] holding at least one of its "
                "leaves and nested in or disjoint from the release's other intervals"
                if qi in m.numeric
                else f"a node of hierarchies/{qi}.csv"
            )
            result.findings.append(
                f"{where}: column '{qi}' holds {what}; every generalized value must be {allowed}. "
                f"The {int(unknown.sum())} record(s) carrying them were left out"
            )
            known &= ~unknown
        nodes[:, a] = codes_ok
    return nodes[known], known


def _classes(inp: ReleaseInputs, nodes: IntArray, known: BoolArray, result: AuditResult) -> _Classes:
    """The equivalence classes and their counts per protected value."""
    m, where, values = inp.manifest, inp.where, inp.values
    radices = [inp.trees[q].hierarchy.n_nodes for q in inp.qis]
    group_of, first = row_ids(nodes, radices)
    g = first.size
    records = np.bincount(group_of, minlength=g).astype(np.int64)
    if m.groups is not None and m.groups != g and known.all():
        result.findings.append(f"{where}: the manifest says {m.groups} groups, data.parquet has {g}")
    s_codes, s_uniques = column_codes(inp.data[m.sensitive])
    s_codes = s_codes[known]
    # a value spelled another way is the protected value it spells (serialpub.io.spelling)
    result.findings.extend(spelling_findings(where, values, m.protected, s_uniques))
    s_map = value_codes(values, s_uniques)
    rec_value = np.where(s_codes >= 0, s_map[np.maximum(s_codes, 0)] if s_map.size else -1, -1)
    protected_rec = rec_value >= 0
    n_s = np.bincount(
        group_of[protected_rec] * len(values) + rec_value[protected_rec], minlength=g * len(values)
    ).reshape(g, len(values))
    labelled_rec = s_codes >= 0
    labelled = np.bincount(
        group_of[labelled_rec] * len(s_uniques) + s_codes[labelled_rec], minlength=g * len(s_uniques)
    ).reshape(g, len(s_uniques))
    return _Classes(nodes[first], records, n_s, radices, labelled, s_uniques)


def _labels_of(inp: ReleaseInputs, classes: _Classes, gi: int) -> dict[str, str]:
    return {q: inp.trees[q].hierarchy.labels[int(classes.nodes[gi, a])] for a, q in enumerate(inp.qis)}


def _cuts(inp: ReleaseInputs, classes: _Classes) -> _Cuts:
    """Which attributes are cuts (used nodes pairwise disjoint)."""
    cuts = _Cuts([], [], [])
    for a, qi in enumerate(inp.qis):
        is_cut, lookup = inp.trees[qi].cut_lookup(distinct_sorted(classes.nodes[:, a]))
        if is_cut:
            cuts.attrs.append(a)
            cuts.lookups.append(lookup)
        else:
            cuts.others.append(a)
    return cuts


def _find_overlaps(inp: ReleaseInputs, classes: _Classes, cuts: _Cuts, result: AuditResult) -> None:
    """Disjointness: equal nodes on the cut attributes, comparable nodes on the others."""
    group_nodes = classes.nodes
    if not cuts.others or group_nodes.shape[0] <= 1:
        return
    pkey = row_ids(group_nodes[:, cuts.attrs], [classes.radices[a] for a in cuts.attrs])[0]
    listed = 0
    for i, j in equi_join(pkey, pkey):
        keep = i < j
        for a in cuts.others:
            keep &= inp.trees[inp.qis[a]].comparable(group_nodes[i, a], group_nodes[j, a])
        hits = np.flatnonzero(keep)
        result.overlap_pairs += hits.size
        for h_i in hits[: max(0, MAX_LISTED_OVERLAPS - listed)]:
            result.overlaps.append(
                RegionOverlap(
                    inp.manifest.release, _labels_of(inp, classes, int(i[h_i])), _labels_of(inp, classes, int(j[h_i]))
                )
            )
        listed += hits.size


def _candidates(inp: ReleaseInputs, classes: _Classes, cuts: _Cuts) -> tuple[IntArray, IntArray]:
    """Candidates: the (cell, group) pairs whose region holds the cell."""
    cells, group_nodes, g = inp.cells, classes.nodes, classes.nodes.shape[0]
    c_nodes = np.empty((cells.counts.size, len(cuts.attrs)), dtype=np.int64)
    for k, (a, lookup) in enumerate(zip(cuts.attrs, cuts.lookups, strict=True)):
        c_nodes[:, k] = lookup[cells.leaves[:, a]]
    covered = np.flatnonzero((c_nodes >= 0).all(axis=1))
    cut_radices = [classes.radices[a] for a in cuts.attrs]
    both = row_ids(np.vstack([group_nodes[:, cuts.attrs], c_nodes[covered]]), cut_radices)[0]
    g_part, c_part = both[:g], both[g:]
    pair_c: list[IntArray] = []
    pair_g: list[IntArray] = []
    for ci, gi in equi_join(c_part, g_part):
        cell = covered[ci]
        keep = np.ones(ci.size, dtype=bool)
        for a in cuts.others:
            keep &= inp.trees[inp.qis[a]].contains(group_nodes[gi, a], cells.leaves[cell, a])
        pair_c.append(cell[keep])
        pair_g.append(gi[keep])
    pc = np.concatenate(pair_c) if pair_c else np.empty(0, dtype=np.int64)
    pg = np.concatenate(pair_g) if pair_g else np.empty(0, dtype=np.int64)
    return pc, pg


def _mechanism_aware(
    inp: ReleaseInputs,
    classes: _Classes,
    pc: IntArray,
    pg: IntArray,
    n_j: IntArray,
    present: BoolArray,
    result: AuditResult,
) -> History:
    """Mechanism-aware model: every snapshot record of s in the region counts, published or
    not; under presence every present individual of the region is a candidate."""
    assert inp.snapshot is not None
    snapshot, cells, values, where = inp.snapshot, inp.cells, inp.values, inp.where
    g, n_s = classes.records.size, classes.n_s
    presence = inp.manifest.dilution is not Dilution.REGISTER
    group_of_cell = np.full(cells.counts.size, -1, dtype=np.int64)
    group_of_cell[pc] = pg  # disjoint regions: at most one group per cell (overlaps are findings)
    rec_group = group_of_cell[snapshot.cell]
    uncovered = int((rec_group < 0).sum())
    if uncovered:
        result.findings.append(
            f"{where}: {uncovered} snapshot record(s) lie in no published group's region; a region that holds "
            "records but publishes none links its candidates unseen"
        )
    hit = (rec_group >= 0) & (snapshot.value >= 0)
    n_star = np.bincount(rec_group[hit] * len(values) + snapshot.value[hit], minlength=g * len(values)).reshape(
        g, len(values)
    )
    over = np.flatnonzero((n_s > n_star).any(axis=1))
    if over.size:
        result.findings.append(
            f"{where}: {over.size} group(s) publish more records of a protected value than the snapshot holds in "
            f"their region, e.g. {_labels_of(inp, classes, int(over[0]))}; this is not the snapshot the release "
            "was made from"
        )
    present_in = np.bincount(pg[present[pc]], weights=cells.counts[pc[present[pc]]], minlength=g).astype(np.int64)
    n_j_star = present_in if presence else n_j
    linked = present[pc] if presence else pg >= 0
    return _history_rows(pc[linked], pg[linked], n_j_star, n_star)


def _history_rows(pc: IntArray, pg: IntArray, n_j: IntArray, n_s: IntArray) -> History:
    """History rows: every candidate cell (``pc``, in group ``pg``) x every protected
    value its group holds (``n_s[g, v] > 0``), with the group's n_j and n_{j,s}."""
    g = n_s.shape[0]
    nz_g, nz_v = np.nonzero(n_s)  # row-major: sorted by group
    per_group = np.bincount(nz_g, minlength=g)
    start = np.cumsum(per_group) - per_group
    rows_c: list[IntArray] = []
    rows_k: list[IntArray] = []
    for ri, rk in expand_ranges(start[pg], start[pg] + per_group[pg], JOIN_CHUNK):
        rows_c.append(pc[ri])
        rows_k.append(rk)
    hc = np.concatenate(rows_c) if rows_c else np.empty(0, dtype=np.int64)
    hk = np.concatenate(rows_k) if rows_k else np.empty(0, dtype=np.int64)
    hg, hv = nz_g[hk].astype(np.int64), nz_v[hk].astype(np.int64)
    return History(hc, hv, n_j[hg], n_s[hg, hv].astype(np.int64))
