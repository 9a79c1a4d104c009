"""Independent audit of a published release series: recompute every breach probability.

The auditor reads only what an outsider has: the population register, the generalization
hierarchies and the published release directories (``data.parquet`` + ``manifest.json``,
docs/release-contract.md). It never reads the statistics file. For every register
individual o and protected value s it recomputes

    p(o, s) = 1 - Π_j (1 - n_{j,s} / n_j)

over the releases j in which o is a candidate of a group holding s (paper 004, Lemma 4;
docs/design.md section 1), decides ``p > 1/ℓ`` exactly (:func:`anonymizer.privacy.exceeds_threshold`),
and checks that the regions of each release are pairwise disjoint, that every published
label belongs to its hierarchy and that ``data.parquet`` is the file the manifest names.

Candidates of a group G with region R (the box of its nodes' leaf sets):

- dilution ``register``: the register individuals whose QI values lie in R; ``n_j`` is
  their number.
- dilution ``presence``: ``n_j`` is the number of G's records; without the snapshots the
  auditor cannot tell who was present, so every register individual in R is taken as
  linked. This can only overestimate p (docs/release-contract.md).

Cost. Individuals with the same QI values share every factor, so all work is on the
distinct register QI combinations ("combos", with their counts), never on individuals or
records one by one: a release maps combos to groups by a sort-merge join on the nodes of
the attributes whose used nodes form a cut (the normal case: serialpub's anonymizer
recodes globally), and tests containment only on the other attributes. Memory and time
grow with (distinct combos) x (protected values) x (releases).
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv

from anonymizer.arrays import expand_ranges, factorize, row_keys
from anonymizer.hierarchy import Hierarchy
from anonymizer.intervals import release_hierarchies
from anonymizer.privacy import exceeds_threshold, survival_factor, survival_products
from serialpub.errors import InputError
from serialpub.hierarchies import read_hierarchies
from serialpub.release_files import sha256_file

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Overlapping group pairs listed per release (all of them are counted).
MAX_LISTED_OVERLAPS = 20
#: Pairs materialized at once by the chunked joins (bounds memory, not results).
_JOIN_CHUNK = 2_000_000
_DILUTIONS = ("register", "presence")
_RELEASE_DIR = re.compile(r"^release-(\d{4,})$")


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

    @property
    def ok(self) -> bool:
        """True when no pair exceeds 1/ℓ, no regions overlap and nothing else was found."""
        return self.violations == 0 and self.overlap_pairs == 0 and not self.findings


# --------------------------------------------------------------------------- helpers


@dataclass(frozen=True)
class _Tree:
    """Ancestor table of a hierarchy: ``chain[x, k]`` is x's ancestor at level k (root 0)."""

    hierarchy: Hierarchy
    level: IntArray  # (n_nodes,)
    chain: IntArray  # (n_nodes, max level + 1), -1 below the node's own level

    @classmethod
    def of(cls, h: Hierarchy) -> _Tree:
        parent = np.asarray(h.parent, dtype=np.int64)
        n = parent.size
        level = np.zeros(n, dtype=np.int64)
        cur = parent.copy()
        while (alive := cur >= 0).any():  # at most depth steps
            level[alive] += 1
            cur[alive] = parent[cur[alive]]
        chain = np.full((n, int(level.max()) + 1), -1, dtype=np.int64)
        rows = np.arange(n)
        cur = rows.copy()
        alive = np.ones(n, dtype=bool)
        while alive.any():
            chain[rows[alive], level[cur[alive]]] = cur[alive]
            nxt = np.where(alive, parent[cur], -1)
            alive = nxt >= 0
            cur = np.where(alive, nxt, cur)
        return cls(h, level, chain)

    def contains(self, node: IntArray, other: IntArray) -> BoolArray:
        """Whether ``node`` is an ancestor-or-self of ``other`` (elementwise)."""
        return np.asarray(self.chain[other, self.level[node]] == node)

    def comparable(self, a: IntArray, b: IntArray) -> BoolArray:
        """Whether the leaf sets of a and b intersect: in a tree, one contains the other."""
        return self.contains(a, b) | self.contains(b, a)

    def cut_lookup(self, used: IntArray) -> tuple[bool, IntArray]:
        """Whether the used nodes are pairwise disjoint, and the used node of every leaf.

        Returns:
            (is_cut, lookup): lookup has shape (n_leaves,), the used node that is the leaf
            or its ancestor, -1 if none; meaningful only when is_cut.
        """
        is_used = np.zeros(self.level.size, dtype=bool)
        is_used[used] = True
        anc = self.chain[used]
        own = np.arange(anc.shape[1])[None, :] == self.level[used][:, None]
        proper = (anc >= 0) & ~own
        if is_used[anc[proper]].any():
            return False, np.empty(0, dtype=np.int64)
        leaves = np.arange(self.hierarchy.n_leaves)
        lookup = np.full(leaves.size, -1, dtype=np.int64)
        for k in range(self.chain.shape[1]):  # one pass per hierarchy level
            a = self.chain[leaves, k]
            hit = (a >= 0) & is_used[np.maximum(a, 0)]
            lookup[hit] = a[hit]
        return True, lookup


def _codes(column: pd.Series) -> tuple[IntArray, list[str]]:
    """Integer codes of a column's values (-1 for missing) and the distinct values as text.

    A categorical column (as :func:`audit_workspace` reads them) gives its codes for free;
    only categories that occur are returned, so unused categories are never reported.
    """
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = np.asarray(column.cat.codes.to_numpy(), dtype=np.int64)
        used = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(column.cat.categories)))
        remap = np.full(len(column.cat.categories) + 1, -1, dtype=np.int64)  # last slot: code -1
        remap[used] = np.arange(used.size)
        categories = column.cat.categories
        return remap[codes], [str(categories[int(i)]) for i in used]
    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    return np.asarray(codes, dtype=np.int64), [str(u) for u in uniques]


def _distinct(keys: IntArray) -> IntArray:
    """Sorted distinct values of an int array (sort-based; see :func:`anonymizer.arrays.factorize`)."""
    s = np.sort(keys)
    return s[np.r_[True, s[1:] != s[:-1]]] if s.size else s


def _join(left_keys: IntArray, right_keys: IntArray) -> Iterator[tuple[IntArray, IntArray]]:
    """All (i, j) with left_keys[i] == right_keys[j], chunked (sort-merge join)."""
    order = np.argsort(right_keys, kind="stable")
    sorted_keys = right_keys[order]
    lo = np.searchsorted(sorted_keys, left_keys, side="left")
    hi = np.searchsorted(sorted_keys, left_keys, side="right")
    for i, j in expand_ranges(lo.astype(np.int64), hi.astype(np.int64), _JOIN_CHUNK):
        yield i, order[j]


@dataclass(frozen=True)
class _Manifest:
    release: int
    dataset: str | None
    quasi_identifiers: list[str]
    sensitive: str
    ell: float
    protected: list[str]
    dilution: str
    sha256: dict[str, Any]
    previous: int | None
    records: int | None
    groups: int | None
    guarantee: str | None
    period: str | None
    suppressed: int | None
    suppression_model: str | None
    numeric: list[str]


def _parse_manifest(manifest: dict[str, Any], where: str) -> _Manifest:
    """Read the keys the audit needs; raise InputError naming the file and key otherwise."""

    def need(key: str) -> Any:
        if key not in manifest:
            raise InputError(f"{where}: key '{key}' is missing; the release contract requires it")
        return manifest[key]

    def bad(key: str, what: str) -> InputError:
        return InputError(f"{where}: '{key}' must be {what}, got {manifest.get(key)!r}")

    release = need("release")
    if isinstance(release, bool) or not isinstance(release, int) or release < 1:
        raise bad("release", "a whole number >= 1")
    qis = need("quasi_identifiers")
    if not isinstance(qis, list) or not qis or not all(isinstance(q, str) for q in qis):
        raise bad("quasi_identifiers", "a non-empty list of column names")
    sensitive = need("sensitive")
    if not isinstance(sensitive, str):
        raise bad("sensitive", "a column name")
    ell = need("l")
    if isinstance(ell, bool) or not isinstance(ell, int | float) or not math.isfinite(ell) or ell < 1:
        raise bad("l", "a number >= 1 (the bound is 1/ℓ)")
    protected = need("protected_values")
    if not isinstance(protected, list):
        raise bad("protected_values", "a list of sensitive values")
    sha = need("sha256")
    if not isinstance(sha, dict):
        raise bad("sha256", "an object with 'data.parquet', 'register' and 'hierarchies'")
    dilution = need("dilution")
    if not isinstance(dilution, str):
        raise bad("dilution", "'register' or 'presence'")

    def optional_int(key: str) -> int | None:
        v = manifest.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    numeric = manifest.get("numeric_quasi_identifiers", [])  # absent before intervals existed: none
    if not isinstance(numeric, list) or not all(isinstance(q, str) and q in qis for q in numeric):
        raise bad("numeric_quasi_identifiers", "a list of quasi-identifiers (those that may hold [lo, hi] intervals)")
    dataset = manifest.get("dataset")
    return _Manifest(
        release=release,
        dataset=dataset if isinstance(dataset, str) else None,
        quasi_identifiers=list(qis),
        sensitive=sensitive,
        ell=float(ell),
        protected=[str(v) for v in protected],
        dilution=dilution,
        sha256=sha,
        previous=optional_int("previous_release"),
        records=optional_int("records"),
        groups=optional_int("groups"),
        guarantee=manifest.get("guarantee") if isinstance(manifest.get("guarantee"), str) else None,
        period=str(manifest["period"]) if isinstance(manifest.get("period"), str | int) else None,
        suppressed=optional_int("suppressed"),
        suppression_model=(
            manifest.get("suppression_model") if isinstance(manifest.get("suppression_model"), str) else None
        ),
        numeric=list(numeric),
    )


@dataclass(frozen=True)
class _Combos:
    """Distinct register QI combinations: leaves (C, d), counts (C,), a representative row,
    and the combo of every register row (N,). With ``per_individual`` every individual is
    a combo of its own (the presence audit with snapshots, where individuals with equal QI
    values differ in presence)."""

    leaves: IntArray
    counts: IntArray
    first_row: IntArray
    combo_of_row: IntArray


def _register_combos(
    register: pd.DataFrame, id_column: str, qis: list[str], hierarchies: dict[str, Hierarchy],
    per_individual: bool = False,
) -> _Combos:
    missing = [c for c in [id_column, *qis] if c not in register.columns]
    if missing:
        raise InputError(
            f"register: missing column(s) {', '.join(missing)}; it has {', '.join(map(str, register.columns))}. "
            "The register needs the id column and every quasi-identifier of the releases"
        )
    dup = register[id_column].duplicated()
    if dup.any():
        row = int(np.flatnonzero(dup.to_numpy())[0])
        raise InputError(
            f"register: id {register[id_column].iloc[row]!r} appears twice (data row {row + 1}); ids must be unique"
        )
    n = len(register)
    leaves = np.empty((n, len(qis)), dtype=np.int32)  # 4 bytes per cell: 160 MB for 5M people x 8 QIs
    for a, qi in enumerate(qis):
        codes, uniques = _codes(register[qi])
        empty = (codes < 0) | np.isin(codes, [i for i, u in enumerate(uniques) if u == ""])
        if empty.any():
            row = int(np.flatnonzero(empty)[0])
            raise InputError(f"register: column '{qi}' is empty in data row {row + 1}; every QI needs a value")
        h = hierarchies[qi]
        mapped = np.array([h.node(u) if h.has_label(u) else -1 for u in uniques], dtype=np.int64)
        bad = (mapped < 0) | (mapped >= h.n_leaves)
        if bad.any():
            u = int(np.flatnonzero(bad)[0])
            row = int(np.flatnonzero(codes == u)[0])
            raise InputError(
                f"register: value {uniques[u]!r} of column '{qi}' (data row {row + 1}) is not a leaf of the "
                f"hierarchy of '{qi}'; add a row for it to hierarchies/{qi}.csv or correct the register"
            )
        leaves[:, a] = mapped[codes]
    if per_individual:
        rows = np.arange(n, dtype=np.int64)
        return _Combos(leaves.astype(np.int64), np.ones(n, dtype=np.int64), rows, rows)
    keys = row_keys(leaves, [hierarchies[q].n_leaves for q in qis])
    codes, first = factorize(keys)
    counts = np.bincount(codes, minlength=first.size).astype(np.int64)
    return _Combos(leaves[first].astype(np.int64), counts, first, codes)


@dataclass
class _History:
    """Long-format history rows of one release: combo, value index, n_j, n_{j,s}."""

    combo: IntArray
    value: IntArray
    n: IntArray
    n_s: IntArray


@dataclass(frozen=True)
class _Snapshot:
    """One release's snapshot as the data holder's audit reads it: the combo of every
    record and the index of its protected value (-1 for none), both shape (R,)."""

    combo: IntArray
    value: IntArray


def _audit_release(
    directory: Path,
    m: _Manifest,
    data: pd.DataFrame,
    qis: list[str],
    trees: dict[str, _Tree],
    combos: _Combos,
    values: list[str],
    result: AuditResult,
    snapshot: _Snapshot | None = None,
) -> tuple[_History, _History | None]:
    """Check one release and return its history rows under the published counts and,
    with its snapshot, under the mechanism-aware counts n* (docs/threat-model.md);
    findings go into ``result``."""
    where = f"release {m.release} ({directory})"
    empty = _History(*(np.empty(0, dtype=np.int64) for _ in range(4)))
    none: tuple[_History, _History | None] = (empty, empty if snapshot is not None else None)

    # --- the published file is the one the manifest names
    path = directory / "data.parquet"
    expected = m.sha256.get("data.parquet")
    if not path.is_file():
        result.findings.append(f"{where}: data.parquet is missing; its sha256 cannot be checked")
    elif not isinstance(expected, str):
        result.findings.append(f"{where}: the manifest records no sha256 of data.parquet")
    elif sha256_file(path) != expected.lower():
        result.findings.append(
            f"{where}: data.parquet does not match the sha256 in its manifest; the file was changed after publishing"
        )

    if m.dilution not in _DILUTIONS:
        result.findings.append(
            f"{where}: unknown dilution {m.dilution!r} (expected 'register' or 'presence'); audited as 'presence'"
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
        codes, labels = _codes(data[qi])
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
                if qi in m.numeric else f"a node of hierarchies/{qi}.csv"
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
    gkey = row_keys(nodes, radices)
    group_of, first = factorize(gkey)
    g = first.size
    group_nodes = nodes[first]
    records = np.bincount(group_of, minlength=g).astype(np.int64)
    if m.groups is not None and m.groups != g and known.all():
        result.findings.append(f"{where}: the manifest says {m.groups} groups, data.parquet has {g}")
    s_codes, s_uniques = _codes(data[m.sensitive])
    s_codes = s_codes[known]
    value_index = {v: i for i, v in enumerate(values)}
    s_map = np.array([value_index.get(u, -1) for u in s_uniques], dtype=np.int64)
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
        is_cut, lookup = trees[qi].cut_lookup(_distinct(group_nodes[:, a]))
        if is_cut:
            cut_attrs.append(a)
            lookups.append(lookup)
        else:
            other_attrs.append(a)
    cut_radices = [radices[a] for a in cut_attrs]

    # --- disjointness: equal nodes on the cut attributes, comparable nodes on the others
    if other_attrs and g > 1:
        pkey = row_keys(group_nodes[:, cut_attrs], cut_radices)
        listed = 0
        for i, j in _join(pkey, pkey):
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
    both = row_keys(np.vstack([group_nodes[:, cut_attrs], c_nodes[covered]]), cut_radices)
    g_part, c_part = both[:g], both[g:]
    pair_c: list[IntArray] = []
    pair_g: list[IntArray] = []
    for ci, gi in _join(c_part, g_part):
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
    presence = m.dilution != "register"
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


def _history_rows(pc: IntArray, pg: IntArray, n_j: IntArray, n_s: IntArray) -> _History:
    """History rows: every candidate combo (``pc``, in group ``pg``) x every protected
    value its group holds (``n_s[g, v] > 0``), with the group's n_j and n_{j,s}."""
    g = n_s.shape[0]
    nz_g, nz_v = np.nonzero(n_s)  # row-major: sorted by group
    per_group = np.bincount(nz_g, minlength=g)
    start = np.cumsum(per_group) - per_group
    rows_c: list[IntArray] = []
    rows_k: list[IntArray] = []
    for ri, rk in expand_ranges(start[pg], start[pg] + per_group[pg], _JOIN_CHUNK):
        rows_c.append(pc[ri])
        rows_k.append(rk)
    hc = np.concatenate(rows_c) if rows_c else np.empty(0, dtype=np.int64)
    hk = np.concatenate(rows_k) if rows_k else np.empty(0, dtype=np.int64)
    hg, hv = nz_g[hk].astype(np.int64), nz_v[hk].astype(np.int64)
    return _History(hc, hv, n_j[hg], n_s[hg, hv].astype(np.int64))


# --------------------------------------------------------------------------- public API


def audit_releases(
    register: pd.DataFrame,
    id_column: str,
    hierarchies: dict[str, Hierarchy],
    releases: list[tuple[Path, dict[str, Any], pd.DataFrame]],
    snapshots: list[tuple[pd.DataFrame, str]] | None = None,
) -> AuditResult:
    """Recompute the global guarantee of a release series from public material alone, or,
    with the snapshots, as the data holder's exact audit.

    Args:
        register: the population register, one row per individual: ``id_column`` and every
            quasi-identifier of the releases, values as strings equal to hierarchy leaves.
        id_column: the register's identifier column (reported, never published).
        hierarchies: ``{attribute: Hierarchy}`` for every quasi-identifier of the releases.
        releases: ``(directory, parsed manifest.json, data.parquet as a DataFrame)`` per
            release, in publication order. ``directory / "data.parquet"`` is hashed and
            compared with the manifest's ``sha256["data.parquet"]``.
        snapshots: per release, its snapshot (id and sensitive columns, as text) and where
            it was read from (for messages). With them the audit also computes the
            mechanism-aware figure (n* = every snapshot record of s in a region, published
            or not; under presence, candidates are the present individuals) and decides on
            it (docs/threat-model.md).

    Returns:
        an :class:`AuditResult`. p is computed per (register individual, protected value)
        over every release (paper 004, Lemma 4; docs/design.md section 1), with the union of the
        releases' protected values counted in every release; the verdict p > 1/ℓ is exact
        and uses the latest release's ℓ. If regions overlap, a QI combination gets a factor
        from every group covering it (the release is invalid anyway and reported).

    Raises:
        InputError: no releases; a manifest lacks a required key or has one of the wrong
            type; the register lacks a column, repeats an id, or holds a value that is not a
            leaf of its hierarchy; a hierarchy is missing for a quasi-identifier.
    """
    if not releases:
        raise InputError("nothing to audit: no published release was found")
    parsed = [_parse_manifest(man, str(d / "manifest.json")) for d, man, _ in releases]
    qis: list[str] = []
    for pm in parsed:
        qis.extend(q for q in pm.quasi_identifiers if q not in qis)
    missing = [q for q in qis if q not in hierarchies]
    if missing:
        raise InputError(f"no hierarchy for quasi-identifier(s) {', '.join(missing)}; add hierarchies/<qi>.csv")
    values: list[str] = []
    for pm in parsed:
        values.extend(v for v in pm.protected if v not in values)

    latest = parsed[-1]
    datasets = {pm.dataset for pm in parsed}
    result = AuditResult(dataset=latest.dataset, releases=[pm.release for pm in parsed], ell=latest.ell)
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
    localized = [pm.release for pm in parsed if pm.guarantee == "localized"]
    if localized:
        result.notes.append(
            f"release(s) {', '.join(map(str, localized))} claim only the localized guarantee; "
            "the audit checks the global one"
        )
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

    per_individual = snapshots is not None and any(pm.dilution != "register" for pm in parsed)
    combos = _register_combos(register, id_column, qis, hierarchies, per_individual)
    trees = {q: _Tree.of(hierarchies[q]) for q in qis}
    snaps: list[_Snapshot | None] = [None] * len(parsed)
    if snapshots is not None:
        if len(snapshots) != len(parsed):
            raise ValueError("snapshots: one per release is needed")
        snaps = [
            _snapshot_records(table, register, id_column, pm.sensitive, values, combos, where)
            for (table, where), pm in zip(snapshots, parsed, strict=True)
        ]

    published: list[_History] = []
    mechanism: list[_History] = []
    for (directory, _, data), pm, snap in zip(releases, parsed, snaps, strict=True):
        release_trees = trees
        if pm.numeric:  # its intervals become nodes (anonymizer.intervals; docs/design.md)
            try:
                extended = release_hierarchies(hierarchies, [q for q in pm.numeric if q in data.columns], data)
            except ValueError as exc:
                raise InputError(f"{directory / 'manifest.json'}: numeric_quasi_identifiers: {exc}") from None
            release_trees = {**trees, **{q: _Tree.of(extended[q]) for q in pm.numeric if q in data.columns}}
        pub, mech = _audit_release(directory, pm, data, qis, release_trees, combos, values, result, snap)
        published.append(pub)
        if mech is not None:
            mechanism.append(mech)

    pub_summary = _summarize(published, combos, values, latest.ell)
    result.published_count_max_p = pub_summary.max_p
    decided = pub_summary
    if snapshots is not None:
        decided = _summarize(mechanism, combos, values, latest.ell)
        result.mechanism_max_p = decided.max_p
    else:
        presence = [pm.release for pm in parsed if pm.dilution != "register"]
        suppressed = [pm.release for pm in parsed if pm.suppressed]
        if presence:
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
    result.max_p_by_release = decided.by_release
    if decided.best is None:
        return result
    best_combo, best_value, best_linked = decided.best
    result.max_p = decided.max_p
    result.max_p_individual = str(register[id_column].iloc[int(combos.first_row[best_combo])])
    result.max_p_value = values[best_value]
    result.max_p_releases = best_linked
    result.max_p_individuals = int(combos.counts[best_combo])
    result.violations = decided.violations
    result.violating_individuals = decided.violating_individuals
    return result


def _span(numbers: list[int]) -> str:
    return ", ".join(map(str, numbers)) if len(numbers) <= 6 else f"{numbers[0]}..{numbers[-1]} ({len(numbers)})"


@dataclass(frozen=True)
class _Summary:
    """Max p, its pair (combo, value index, linked releases), the violations and the max
    after each release, of one set of history rows."""

    max_p: float
    best: tuple[int, int, int] | None
    violations: int
    violating_individuals: int
    by_release: list[float]


def _summarize(hist: list[_History], combos: _Combos, values: list[str], ell: float) -> _Summary:
    """p per (combo, protected value) over the releases' history rows (paper 004, Lemma 4),
    the exact verdict p > 1/ℓ (:func:`anonymizer.privacy.exceeds_threshold`)."""
    combo = np.concatenate([h.combo for h in hist])
    value = np.concatenate([h.value for h in hist])
    n = np.concatenate([h.n for h in hist])
    n_s = np.concatenate([h.n_s for h in hist])
    release_of = np.repeat(np.arange(len(hist)), [h.combo.size for h in hist])
    if combo.size == 0:
        return _Summary(0.0, None, 0, 0, [0.0] * len(hist))

    pair_key = combo * len(values) + value
    pair, pair_first = factorize(pair_key)
    pair_keys = pair_key[pair_first]
    n_pairs = pair_keys.size
    pair_combo, pair_value = pair_keys // len(values), pair_keys % len(values)

    # max p after each release (rows are in release order): running survival products;
    # the reported max p and the verdict below come from privacy's own functions
    factor = survival_factor(n, n_s)
    running = np.ones(n_pairs)
    bounds = np.cumsum([0, *(h.combo.size for h in hist)])
    by_release = []
    for lo, hi in itertools.pairwise(bounds):
        np.multiply.at(running, pair[lo:hi], factor[lo:hi])
        by_release.append(float(1.0 - running.min()))

    p = 1.0 - survival_products(pair, n, n_s, n_pairs)
    best = int(np.argmax(p))
    linked = np.bincount(_distinct(pair * len(hist) + release_of) // len(hist), minlength=n_pairs)
    breach = exceeds_threshold(pair, n, n_s, n_pairs, ell)
    return _Summary(
        max_p=float(p[best]),
        best=(int(pair_combo[best]), int(pair_value[best]), int(linked[best])),
        violations=int(combos.counts[pair_combo[breach]].sum()),
        violating_individuals=int(combos.counts[_distinct(pair_combo[breach])].sum()),
        by_release=by_release,
    )


def _snapshot_records(
    table: pd.DataFrame, register: pd.DataFrame, id_column: str, sensitive: str, values: list[str],
    combos: _Combos, where: str,
) -> _Snapshot:
    """The records of one snapshot (id and sensitive columns as text) as combos and
    protected-value indexes; ids must be unique and in the register."""
    for col in (id_column, sensitive):
        if col not in table.columns:
            raise InputError(f"{where}: no {col!r} column; the snapshot needs the id and the sensitive column")
    ids = table[id_column].astype(str)
    dup = ids.duplicated().to_numpy()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        raise InputError(f"{where}, line {i + 2}: id {ids.iloc[i]!r} appears twice; one record per individual")
    rows = pd.Index(register[id_column].astype(str)).get_indexer(pd.Index(ids))
    if (rows < 0).any():
        i = int(np.flatnonzero(rows < 0)[0])
        raise InputError(f"{where}, line {i + 2}: individual {ids.iloc[i]!r} is not in the population register")
    value = pd.Index(values).get_indexer(pd.Index(table[sensitive].astype(str))).astype(np.int64)
    return _Snapshot(combo=combos.combo_of_row[rows], value=value)


def _release_dirs(workspace: Path, dataset: str | None) -> tuple[str, list[tuple[int, Path]]]:
    root = workspace / "releases"
    if not root.is_dir():
        raise InputError(f"{root}: no such folder; the workspace has no published release")
    names = sorted(p.name for p in root.iterdir() if p.is_dir())
    if dataset is None:
        if not names:
            raise InputError(f"{root}: no dataset folder; the workspace has no published release")
        if len(names) > 1:
            raise InputError(f"{root} holds several datasets ({', '.join(names)}); choose one with --dataset")
        dataset = names[0]
    elif dataset not in names:
        raise InputError(
            f"{root / dataset}: no such dataset; the workspace has {', '.join(names) if names else 'none'}"
        )
    numbered = []
    for p in (root / dataset).iterdir():
        if p.is_dir() and (match := _RELEASE_DIR.match(p.name)):
            numbered.append((int(match.group(1)), p))
    if not numbered:
        raise InputError(f"{root / dataset}: no release-NNNN folder; nothing has been published")
    return dataset, sorted(numbered)


def _read_register(path: Path, id_column: str) -> pd.DataFrame:
    """register.csv with every cell as text (empty cells stay ""), QI columns categorical.

    pyarrow's multi-threaded reader is 3-4x faster than pandas' on millions of rows.
    """
    try:
        with path.open(encoding="utf-8", newline="") as f:
            header = next(csv.reader(f), [])
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None
    if not header:
        raise InputError(f"{path}: the file is empty; give a header line with the id column and every QI")
    dup = sorted({c for c in header if header.count(c) > 1})
    if dup:
        raise InputError(f"{path}: column(s) {', '.join(dup)} appear twice in the header; rename them")
    text, coded = pa.string(), pa.dictionary(pa.int32(), pa.string())
    options = pacsv.ConvertOptions(
        column_types={c: text if c == id_column else coded for c in header},
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
    )
    try:
        table = pacsv.read_csv(path, convert_options=options)
    except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a readable CSV file ({exc}); fix the line it names") from None
    return table.to_pandas()


def audit_workspace(
    workspace: Path, dataset: str | None = None, id_column: str = "id", snapshots: Path | None = None
) -> AuditResult:
    """Audit every published release of one dataset of a serialpub workspace.

    Reads ``<workspace>/register.csv`` (all columns as strings), ``hierarchies/<qi>.csv`` for
    the quasi-identifiers the manifests name and every
    ``releases/<dataset>/release-NNNN/{manifest.json,data.parquet}`` in number order, then
    runs :func:`audit_releases`.

    Args:
        workspace: the workspace folder (docs/release-contract.md).
        dataset: the dataset folder under ``releases/``; may be omitted when there is one.
        id_column: the register's identifier column.
        snapshots: a folder holding ``snapshot-<period>.csv`` for the period of every
            release (the data holder's exact audit, see :func:`audit_releases`).

    Raises:
        InputError: a missing or unreadable file (named); several datasets and no
            ``dataset``; the register or a hierarchy file differs from the one a release
            was published with (its sha256 in the manifest); anything
            :func:`audit_releases` raises.
    """
    dataset, dirs = _release_dirs(workspace, dataset)
    releases: list[tuple[Path, dict[str, Any], pd.DataFrame]] = []
    for _, d in dirs:
        mpath, dpath = d / "manifest.json", d / "data.parquet"
        for f in (mpath, dpath):
            if not f.is_file():
                raise InputError(f"{f}: file missing; a published release needs manifest.json and data.parquet")
        try:
            manifest = json.loads(mpath.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"{mpath}: not a valid JSON manifest ({exc})") from None
        if not isinstance(manifest, dict):
            raise InputError(f"{mpath}: the manifest must be a JSON object")
        named, sens = manifest.get("quasi_identifiers"), manifest.get("sensitive")
        coded = [c for c in [*(named if isinstance(named, list) else []), sens] if isinstance(c, str)]
        try:  # dictionary-encoded: labels arrive as categorical codes, not millions of strings
            data = pd.read_parquet(dpath, read_dictionary=coded)
        except Exception as exc:  # pyarrow raises several unrelated types for a broken file
            raise InputError(f"{dpath}: not a readable Parquet file ({type(exc).__name__}: {exc})") from None
        releases.append((d, manifest, data))

    parsed = [_parse_manifest(man, str(d / "manifest.json")) for d, man, _ in releases]
    reg_path = workspace / "register.csv"
    if not reg_path.is_file():
        raise InputError(f"{reg_path}: file missing; the audit needs the population register")
    qis: list[str] = []
    for pm in parsed:
        qis.extend(q for q in pm.quasi_identifiers if q not in qis)
    hdir = workspace / "hierarchies"
    absent = [str(hdir / f"{q}.csv") for q in qis if not (hdir / f"{q}.csv").is_file()]
    if absent:
        raise InputError(f"hierarchy file(s) missing: {', '.join(absent)}; give one per quasi-identifier")

    reg_sha = sha256_file(reg_path)
    h_sha = {q: sha256_file(hdir / f"{q}.csv") for q in qis}
    for (_, d), pm in zip(dirs, parsed, strict=True):
        mpath = d / "manifest.json"
        expected = pm.sha256.get("register")
        if not isinstance(expected, str):
            raise InputError(f"{mpath}: sha256 has no 'register' entry; the release contract requires it")
        if expected.lower() != reg_sha:
            raise InputError(
                f"{reg_path}: the register differs from the one release {pm.release} was published with "
                "(sha256 mismatch); audit with that register"
            )
        recorded = pm.sha256.get("hierarchies")
        if not isinstance(recorded, dict):
            raise InputError(f"{mpath}: sha256 has no 'hierarchies' object; the release contract requires it")
        for q in pm.quasi_identifiers:
            exp = recorded.get(q)
            if not isinstance(exp, str):
                raise InputError(f"{mpath}: sha256.hierarchies has no entry for '{q}'")
            if exp.lower() != h_sha[q]:
                raise InputError(
                    f"{hdir / f'{q}.csv'}: the hierarchy differs from the one release {pm.release} was published "
                    "with (sha256 mismatch); audit with that hierarchy file"
                )

    register = _read_register(reg_path, id_column)
    hierarchies = read_hierarchies(hdir, qis)
    snapshot_tables = None
    if snapshots is not None:
        snapshot_tables = [_read_snapshot(snapshots, pm, id_column) for pm in parsed]
    result = audit_releases(register, id_column, hierarchies, releases, snapshot_tables)
    if result.dataset is None:
        result.dataset = dataset
    elif result.dataset != dataset:
        result.findings.append(f"the manifests name dataset '{result.dataset}' but the folder is '{dataset}'")
    for (number, d), pm in zip(dirs, parsed, strict=True):
        if number != pm.release:
            result.findings.append(f"{d}: the folder name says release {number}, the manifest says {pm.release}")
    return result


def _read_snapshot(folder: Path, m: _Manifest, id_column: str) -> tuple[pd.DataFrame, str]:
    """``<folder>/snapshot-<period>.csv`` of release ``m``: its id and sensitive columns as text."""
    if not folder.is_dir():
        raise InputError(f"{folder}: no such folder; --snapshots names the folder holding snapshot-<period>.csv")
    if m.period is None:
        raise InputError(f"release {m.release}: its manifest names no period, so its snapshot cannot be found")
    path = folder / f"snapshot-{m.period}.csv"
    if not path.is_file():
        raise InputError(
            f"{path}: file missing; the audit with --snapshots needs the snapshot of every release "
            f"(release {m.release}, period {m.period})"
        )
    try:
        with path.open(encoding="utf-8", newline="") as f:
            header = next(csv.reader(f), [])
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None
    wanted = [c for c in (id_column, m.sensitive) if c in header]
    options = pacsv.ConvertOptions(
        column_types={c: pa.string() for c in wanted}, include_columns=wanted,
        strings_can_be_null=False, quoted_strings_can_be_null=False,
    )  # fmt: skip
    try:
        table = pacsv.read_csv(path, convert_options=options).to_pandas()
    except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a readable CSV file ({exc}); fix the line it names") from None
    return table, str(path)


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
            f"(and {result.max_p_individuals - 1} other(s) with the same QI values), value "
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
