"""One release recomputed: its checks, its groups and the history rows it adds.

For a release j, the groups are the records' distinct QI node tuples; a group's
candidates are the register combos inside its region (the box of its nodes' leaf sets,
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
from serialpub.analysis.audit.combos import Combos, Snapshot
from serialpub.analysis.audit.geometry import JOIN_CHUNK, Tree, column_codes, distinct_sorted, equi_join, row_ids
from serialpub.analysis.audit.manifest import ParsedManifest, file_sha256
from serialpub.analysis.audit.result import MAX_LISTED_OVERLAPS, AuditResult, Overlap
from serialpub.analysis.audit.spellings import spelling_findings, value_codes

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass
class History:
    """Long-format history rows of one release: combo, value index, n_j, n_{j,s}."""

    combo: IntArray
    value: IntArray
    n: IntArray
    n_s: IntArray


def audit_release(
    directory: Path,
    m: ParsedManifest,
    data: pd.DataFrame,
    qis: list[str],
    trees: dict[str, Tree],
    combos: Combos,
    values: list[str],
    result: AuditResult,
    snapshot: Snapshot | None = None,
) -> tuple[History, History | None]:
    """Check one release and return its history rows under the published counts and,
    with its snapshot, under the mechanism-aware counts n* (docs/threat-model.md);
    findings go into ``result``."""
    where = f"release {m.release} ({directory})"
    empty = History(*(np.empty(0, dtype=np.int64) for _ in range(4)))
    none: tuple[History, History | None] = (empty, empty if snapshot is not None else None)

    # --- the published file is the one the manifest names
    path = directory / "data.parquet"
    expected = m.sha256.get("data.parquet")
    if not path.is_file():
        result.findings.append(f"{where}: data.parquet is missing; its sha256 cannot be checked")
    elif not isinstance(expected, str):
        result.findings.append(f"{where}: the manifest records no sha256 of data.parquet")
    elif file_sha256(path) != expected.lower():
        result.findings.append(
            f"{where}: data.parquet does not match the sha256 in its manifest; the file was changed after publishing"
        )

    absent = [c for c in [*m.quasi_identifiers, m.sensitive] if c not in data.columns]
    if absent:
        result.findings.append(
            f"{where}: data.parquet lacks column(s) {', '.join(absent)} named in the manifest; release not recomputed"
        )
        return none
    extra = [str(c) for c in data.columns if c not in m.quasi_identifiers and c != m.sensitive]
    if extra:
        result.findings.append(
            f"{where}: data.parquet has column(s) {', '.join(extra)} that the manifest does not name; "
            "a release holds only the quasi-identifiers and the sensitive column (no identifier)"
        )
    if m.records is not None and m.records != len(data):
        result.findings.append(f"{where}: the manifest says {m.records} records, data.parquet has {len(data)}")

    # --- node ids of every record, QIs outside this release's list are the root
    r = len(data)
    nodes = np.empty((r, len(qis)), dtype=np.int64)
    known = np.ones(r, dtype=bool)
    for a, qi in enumerate(qis):
        h = trees[qi].hierarchy
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
    nodes = nodes[known]

    # --- groups and their counts per protected value
    radices = [trees[q].hierarchy.n_nodes for q in qis]
    group_of, first = row_ids(nodes, radices)
    g = first.size
    group_nodes = nodes[first]
    records = np.bincount(group_of, minlength=g).astype(np.int64)
    if m.groups is not None and m.groups != g and known.all():
        result.findings.append(f"{where}: the manifest says {m.groups} groups, data.parquet has {g}")
    s_codes, s_uniques = column_codes(data[m.sensitive])
    s_codes = s_codes[known]
    # a value spelled another way is the protected value it spells (serialpub.io.spelling)
    result.findings.extend(spelling_findings(where, values, m.protected, s_uniques))
    s_map = value_codes(values, s_uniques)
    rec_value = np.where(s_codes >= 0, s_map[np.maximum(s_codes, 0)] if s_map.size else -1, -1)
    protected_rec = rec_value >= 0
    n_s = np.bincount(
        group_of[protected_rec] * len(values) + rec_value[protected_rec], minlength=g * len(values)
    ).reshape(g, len(values))

    def labels_of(gi: int) -> dict[str, str]:
        return {q: trees[q].hierarchy.labels[int(group_nodes[gi, a])] for a, q in enumerate(qis)}

    # --- which attributes are cuts (used nodes pairwise disjoint)
    cut_attrs: list[int] = []
    lookups: list[IntArray] = []
    other_attrs: list[int] = []
    for a, qi in enumerate(qis):
        is_cut, lookup = trees[qi].cut_lookup(distinct_sorted(group_nodes[:, a]))
        if is_cut:
            cut_attrs.append(a)
            lookups.append(lookup)
        else:
            other_attrs.append(a)
    cut_radices = [radices[a] for a in cut_attrs]

    # --- disjointness: equal nodes on the cut attributes, comparable nodes on the others
    if other_attrs and g > 1:
        pkey = row_ids(group_nodes[:, cut_attrs], cut_radices)[0]
        listed = 0
        for i, j in equi_join(pkey, pkey):
            keep = i < j
            for a in other_attrs:
                keep &= trees[qis[a]].comparable(group_nodes[i, a], group_nodes[j, a])
            hits = np.flatnonzero(keep)
            result.overlap_pairs += hits.size
            for h_i in hits[: max(0, MAX_LISTED_OVERLAPS - listed)]:
                result.overlaps.append(Overlap(m.release, labels_of(int(i[h_i])), labels_of(int(j[h_i]))))
            listed += hits.size

    # --- candidates: (combo, group) pairs whose region holds the combo
    c_nodes = np.empty((combos.counts.size, len(cut_attrs)), dtype=np.int64)
    for k, (a, lookup) in enumerate(zip(cut_attrs, lookups, strict=True)):
        c_nodes[:, k] = lookup[combos.leaves[:, a]]
    covered = np.flatnonzero((c_nodes >= 0).all(axis=1))
    both = row_ids(np.vstack([group_nodes[:, cut_attrs], c_nodes[covered]]), cut_radices)[0]
    g_part, c_part = both[:g], both[g:]
    pair_c: list[IntArray] = []
    pair_g: list[IntArray] = []
    for ci, gi in equi_join(c_part, g_part):
        combo = covered[ci]
        keep = np.ones(ci.size, dtype=bool)
        for a in other_attrs:
            keep &= trees[qis[a]].contains(group_nodes[gi, a], combos.leaves[combo, a])
        pair_c.append(combo[keep])
        pair_g.append(gi[keep])
    pc = np.concatenate(pair_c) if pair_c else np.empty(0, dtype=np.int64)
    pg = np.concatenate(pair_g) if pair_g else np.empty(0, dtype=np.int64)
    in_region = np.bincount(pg, weights=combos.counts[pc], minlength=g).astype(np.int64)

    short = np.flatnonzero(in_region < records)
    if short.size:
        s0 = int(short[0])
        result.findings.append(
            f"{where}: {short.size} group(s) hold more records than register individuals in their region, "
            f"e.g. {labels_of(s0)} with {records[s0]} record(s) and {in_region[s0]} individual(s); "
            "the register does not cover this release"
        )
    presence = m.dilution is not Dilution.REGISTER
    present: BoolArray | None = None
    if snapshot is not None:
        present = np.zeros(combos.counts.size, dtype=bool)
        present[snapshot.combo] = True
    # published-count model: n_j from the register (dilution) or the published records
    # (presence); under presence, without the snapshot, every register individual of the
    # region is taken as linked (an upper bound), with it only the present ones
    n_j = records if presence else np.maximum(in_region, records)
    linked = pg >= 0 if not presence or present is None else present[pc]
    published = _history_rows(pc[linked], pg[linked], n_j, n_s)
    if snapshot is None:
        return published, None

    # mechanism-aware model: every snapshot record of s in the region counts, published or
    # not; under presence every present individual of the region is a candidate
    assert present is not None
    group_of_combo = np.full(combos.counts.size, -1, dtype=np.int64)
    group_of_combo[pc] = pg  # disjoint regions: at most one group per combo (overlaps are findings)
    rec_group = group_of_combo[snapshot.combo]
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
            f"their region, e.g. {labels_of(int(over[0]))}; this is not the snapshot the release was made from"
        )
    present_in = np.bincount(pg[present[pc]], weights=combos.counts[pc[present[pc]]], minlength=g).astype(np.int64)
    n_j_star = present_in if presence else n_j
    linked = present[pc] if presence else pg >= 0
    return published, _history_rows(pc[linked], pg[linked], n_j_star, n_star)


def _history_rows(pc: IntArray, pg: IntArray, n_j: IntArray, n_s: IntArray) -> History:
    """History rows: every candidate combo (``pc``, in group ``pg``) x every protected
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
