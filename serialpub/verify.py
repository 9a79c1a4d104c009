"""``serialpub state verify``: rebuild the state from public material and compare.

The statistics file (paper 004, §7; docs/design.md section 4) is the publisher's memory of every
release: per (individual o, protected value s) the survival product Π_j(1 - n_{j,s}/n_j)
and the number of releases that linked o to s. If it were lost, corrupted or edited, the
next release would be computed against a wrong history and the global guarantee would no
longer hold. :func:`verify_state` rebuilds it from what the release store and the
workspace hold — the register, the hierarchies and the published ``release-NNNN/``
folders, whose manifests say ℓ, the protected values and the dilution mode — and compares:

- the release list: every release the database marks published has its folder, and every
  folder is in the database; seq, period and the sha256 of ``data.parquet`` agree between
  database, manifest and file (also the manifest's own sha256 and the register's and
  hierarchies' sha256 recorded at publication);
- per release, the group figures the database recorded (regions, n_j, n_{j,s});
- per (individual, protected value), the survival product (relative tolerance 1e-12:
  the two computations may round in a different order) and the linked count of
  :meth:`state.store.StateStore.latest_statistics`.

Candidates follow docs/design.md section 1: under register dilution every register individual in a
group's region; under presence dilution the individuals present in that period, read from
the snapshot whose path the release's database row records (``params["snapshot"]``). When
that file is gone, the pairs the release could have linked are reported as "cannot verify
without the snapshot" instead of being compared.

Everything is vectorized over the distinct register QI combinations and over history
classes (:mod:`serialpub.importing`), never over individuals one by one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session

from anonymizer.arrays import factorize
from anonymizer.hierarchy import Hierarchy
from anonymizer.intervals import release_hierarchies
from anonymizer.release import History, advance_history
from serialpub import release_files
from serialpub.audit import _parse_manifest, _Tree
from serialpub.config import Workspace
from serialpub.errors import InputError
from serialpub.hierarchies import read_hierarchies
from serialpub.importing import (
    RegisterCombos,
    group_release,
    label_nodes,
    locate_groups,
    present_rows,
)
from serialpub.inputs import Register, load_register
from state.engine import StateError
from state.models import Dataset, Release, ReleaseGroup
from state.store import StateStore, open_engine

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Relative tolerance of the survival comparison.
SURVIVAL_RTOL = 1e-12
#: Examples kept per kind of difference (all are counted).
MAX_EXAMPLES = 5
UNVERIFIABLE = "cannot verify without the snapshot"


@dataclass
class Difference:
    """One kind of difference: how many instances and the first few, one line each."""

    kind: str
    count: int = 0
    examples: list[str] = field(default_factory=list)


@dataclass
class VerifyReport:
    """Outcome of :func:`verify_state`.

    Attributes:
        dataset: the configured dataset.
        releases_in_state: sequence numbers the database marks published.
        releases_on_disk: ``release-NNNN`` folders found in the release store.
        individuals: register individuals (N).
        values: protected values compared (union of the manifests' and the state's).
        pairs_compared: (individual, value) pairs compared, N x len(values) minus the
            unverifiable ones.
        differences: one entry per kind of difference, in the order found.
        unverifiable: pairs a presence-mode release may have linked whose snapshot is
            gone, with examples (the releases).
        notes: facts that are not differences.
    """

    dataset: str
    releases_in_state: list[int] = field(default_factory=list)
    releases_on_disk: list[int] = field(default_factory=list)
    individuals: int = 0
    values: list[str] = field(default_factory=list)
    pairs_compared: int = 0
    differences: list[Difference] = field(default_factory=list)
    unverifiable: Difference = field(default_factory=lambda: Difference(UNVERIFIABLE))
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing differs and every pair could be verified."""
        return not self.differences and self.unverifiable.count == 0

    def add(self, kind: str, example: str, count: int = 1) -> None:
        """Count ``count`` instances of a kind of difference, keeping ``example``."""
        for d in self.differences:
            if d.kind == kind:
                break
        else:
            d = Difference(kind)
            self.differences.append(d)
        d.count += count
        if len(d.examples) < MAX_EXAMPLES:
            d.examples.append(example)

    def format(self) -> str:
        """A few lines for the command line, ending with the verdict."""
        state, disk = self.releases_in_state, self.releases_on_disk
        lines = [
            f"dataset {self.dataset}: {len(state)} published release(s) in the state database, "
            f"{len(disk)} release folder(s)",
            f"register: {self.individuals} individuals; protected values: {len(self.values)}",
            f"pairs compared: {self.pairs_compared} (survival relative tolerance {SURVIVAL_RTOL:g}, linked exact)",
        ]
        if self.differences:
            total = sum(d.count for d in self.differences)
            lines.append(f"differences: {total} in {len(self.differences)} kind(s)")
            for d in self.differences:
                lines.append(f"  {d.kind}: {d.count}")
                lines.extend(f"    {e}" for e in d.examples)
                if d.count > len(d.examples):
                    lines.append(f"    ... {d.count - len(d.examples)} more")
        else:
            lines.append("differences: none")
        if self.unverifiable.count:
            lines.append(f"{UNVERIFIABLE}: {self.unverifiable.count} (individual, value) pair(s)")
            lines.extend(f"    {e}" for e in self.unverifiable.examples)
        lines.extend(f"note: {n}" for n in self.notes)
        if self.differences:
            lines.append("verdict: FAIL: the state differs from what the published releases give")
        elif self.unverifiable.count:
            lines.append("verdict: INCOMPLETE: no difference found, but some pairs could not be verified")
        else:
            lines.append("verdict: PASS: the state is what the published releases give")
        return "\n".join(lines)


@dataclass(frozen=True)
class _DbRelease:
    id: int
    seq: int
    period: str
    params: dict[str, Any]
    data_sha256: str | None
    manifest_sha256: str | None
    records: int | None
    groups: int | None


def _db_releases(store: StateStore, dataset: str) -> list[_DbRelease]:
    """Published releases with the sums the database recorded (read-only)."""
    with Session(store.engine) as s:
        rows = s.execute(
            select(
                Release.id,
                Release.seq,
                Release.period,
                Release.params,
                Release.data_sha256,
                Release.manifest_sha256,
                Release.records,
                Release.groups,
            )
            .join(Dataset, Dataset.id == Release.dataset_id)
            .where(Dataset.name == dataset, Release.status == "published")
            .order_by(Release.seq)
        ).all()
    return [
        _DbRelease(r.id, r.seq, r.period, dict(r.params or {}), r.data_sha256, r.manifest_sha256, r.records, r.groups)
        for r in rows
    ]


def _db_groups(store: StateStore, release_id: int) -> list[tuple[list[str], int, int, dict[str, int]]]:
    with Session(store.engine) as s:
        rows = s.execute(
            select(ReleaseGroup.labels, ReleaseGroup.candidates, ReleaseGroup.records, ReleaseGroup.counts)
            .where(ReleaseGroup.release_id == release_id)
            .order_by(ReleaseGroup.group_no)
        ).all()
    return [(list(r.labels), int(r.candidates), int(r.records), dict(r.counts)) for r in rows]


def _folders(dataset_dir: Path) -> tuple[dict[int, Path], list[str]]:
    found: dict[int, Path] = {}
    staging: list[str] = []
    if dataset_dir.is_dir():
        for p in dataset_dir.iterdir():
            name = p.name
            if p.is_dir() and name.startswith("release-") and name[8:].isdigit():
                found[int(name[8:])] = p
            elif p.is_dir() and name.startswith(".staging-release-"):
                staging.append(name)
    return dict(sorted(found.items())), sorted(staging)


def _short(sha: object) -> str:
    return f"{sha[:12]}..." if isinstance(sha, str) else repr(sha)


@dataclass
class _Rebuild:
    """The state rebuilt so far, plus per class and value whether it is uncertain."""

    history: History
    unknown: BoolArray  # (K, V)


class _Verifier:
    def __init__(self, ws: Workspace) -> None:
        cfg = ws.config
        self.ws = ws
        self.qis = list(cfg.quasi_identifiers)
        self.hierarchies: dict[str, Hierarchy] = read_hierarchies(ws.hierarchy_dir, self.qis)
        self.register: Register = load_register(ws.register_path, cfg.id_column, self.qis, self.hierarchies)
        self.store = StateStore(open_engine(ws.database_url))
        self.report = VerifyReport(dataset=cfg.dataset)
        self.trees = [_Tree.of(self.hierarchies[q]) for q in self.qis]
        self.combos = RegisterCombos.of(self.register.keys, [self.hierarchies[q] for q in self.qis])
        self.register_sha = release_files.sha256_file(ws.register_path)
        self.hierarchy_sha = {q: release_files.sha256_file(ws.hierarchy_dir / f"{q}.csv") for q in self.qis}

    # -- releases ------------------------------------------------------------------------
    def run(self) -> VerifyReport:
        cfg = self.ws.config
        report = self.report
        db = _db_releases(self.store, cfg.dataset)
        by_seq = {r.seq: r for r in db}
        folders, staging = _folders(self.ws.dataset_dir)
        report.releases_in_state = [r.seq for r in db]
        report.releases_on_disk = list(folders)
        report.individuals = len(self.register.ids)
        if staging:
            report.notes.append(
                f"staging folder(s) {', '.join(staging)} in {self.ws.dataset_dir}: an interrupted publication; "
                "the next publication rolls them forward or removes them"
            )
        for r in db:
            if r.seq not in folders:
                report.add(
                    "release folder missing",
                    f"release {r.seq} (period {r.period!r}) is published in the state database but "
                    f"{self.ws.dataset_dir / release_files.release_name(r.seq)} does not exist",
                )
        for seq, path in folders.items():
            if seq not in by_seq:
                report.add(
                    "release folder not in the state", f"{path} is not a published release of the state database"
                )

        manifests: dict[int, dict[str, Any]] = {}
        for seq, path in folders.items():
            mpath = path / release_files.MANIFEST_FILE
            try:
                manifest = json.loads(mpath.read_text(encoding="utf-8"))
                if not isinstance(manifest, dict):
                    raise ValueError("not a JSON object")
                _parse_manifest(manifest, str(mpath))
            except (OSError, ValueError, InputError) as exc:
                report.add("unreadable release", f"release {seq}: {mpath}: {exc}; the release was not recomputed")
                continue
            manifests[seq] = manifest
        values: list[str] = []
        for m in manifests.values():
            values.extend(str(v) for v in m["protected_values"] if str(v) not in values)

        empty = History.empty(np.full(len(self.register.ids), float(cfg.ell)), len(values))
        state = _Rebuild(empty, np.zeros(empty.survival.shape, dtype=bool))
        for seq, manifest in manifests.items():
            state = self._release(seq, folders[seq], manifest, by_seq.get(seq), values, state)
        self._compare(state, values, bool(db))
        return report

    def _release(
        self,
        seq: int,
        folder: Path,
        manifest: dict[str, Any],
        dbr: _DbRelease | None,
        values: list[str],
        state: _Rebuild,
    ) -> _Rebuild:
        report, cfg = self.report, self.ws.config
        where = f"release {seq}"
        mpath, dpath = folder / release_files.MANIFEST_FILE, folder / release_files.DATA_FILE
        pm = _parse_manifest(manifest, str(mpath))
        if pm.release != seq:
            report.add("manifest", f"{mpath}: says release {pm.release}, the folder is release {seq}")
        if pm.dataset != cfg.dataset:
            report.add("manifest", f"{mpath}: names dataset {pm.dataset!r}, the configuration {cfg.dataset!r}")
        expected_previous = seq - 1 if seq > 1 else None  # sequence numbers are dense
        if pm.previous != expected_previous:
            report.add("manifest", f"{mpath}: previous_release is {pm.previous}, expected {expected_previous}")
        if dbr is not None and manifest.get("period") != dbr.period:
            report.add(
                "period",
                f"{where}: the manifest says period {manifest.get('period')!r}, the state database {dbr.period!r}",
            )
        file_sha = release_files.sha256_file(dpath) if dpath.is_file() else None
        man_sha = pm.sha256.get("data.parquet")
        if file_sha is None:
            report.add("data.parquet sha256", f"{where}: {dpath} is missing")
        elif file_sha != man_sha:
            report.add(
                "data.parquet sha256",
                f"{where}: {dpath} (sha256 {_short(file_sha)}) does not match its "
                f"manifest ({_short(man_sha)}); the file was changed after publishing",
            )
        if dbr is not None and dbr.data_sha256 != man_sha:
            report.add(
                "data.parquet sha256",
                f"{where}: the state database records sha256 {_short(dbr.data_sha256)}, the manifest {_short(man_sha)}",
            )
        if dbr is not None and dbr.manifest_sha256 != release_files.sha256_file(mpath):
            report.add(
                "manifest sha256",
                f"{where}: {mpath} is not the manifest the state database recorded; it was changed after publishing",
            )
        if pm.sha256.get("register") != self.register_sha:
            report.add(
                "register",
                f"{where} was published with another register (sha256 "
                f"{_short(pm.sha256.get('register'))}); n_j cannot be recomputed with this one",
            )
        recorded = pm.sha256.get("hierarchies")
        changed = [q for q in self.qis if not isinstance(recorded, dict) or recorded.get(q) != self.hierarchy_sha[q]]
        if changed:
            report.add("hierarchies", f"{where} was published with other hierarchy file(s) for {', '.join(changed)}")
        if sorted(pm.quasi_identifiers) != sorted(self.qis) or pm.sensitive != cfg.sensitive:
            report.add(
                "manifest",
                f"{mpath}: quasi-identifiers {pm.quasi_identifiers} and sensitive "
                f"{pm.sensitive!r} are not the configuration's; the release was not recomputed",
            )
            return state
        if pm.dilution not in ("register", "presence"):
            report.add("manifest", f"{mpath}: unknown dilution {pm.dilution!r}; the release was not recomputed")
            return state
        if file_sha is None:
            return state
        try:
            data = pd.read_parquet(dpath, read_dictionary=[*self.qis, cfg.sensitive])
        except Exception as exc:  # pyarrow raises several unrelated types for a broken file
            report.add("unreadable release", f"{where}: {dpath}: {type(exc).__name__}: {exc}")
            return state
        absent = [c for c in [*self.qis, cfg.sensitive] if c not in data.columns]
        if absent:
            report.add(
                "release content",
                f"{where}: data.parquet lacks column(s) {', '.join(absent)}; the release was not recomputed",
            )
            return state

        # groups as published; a numeric QI's intervals are nodes of this release's hierarchy
        numeric = [q for q in pm.numeric if q in self.qis]
        hs = release_hierarchies(self.hierarchies, numeric, data) if numeric else self.hierarchies
        trees = [_Tree.of(hs[q]) for q in self.qis] if numeric else self.trees
        nodes = np.empty((len(data), len(self.qis)), dtype=np.int64)
        for a, q in enumerate(self.qis):
            nodes[:, a] = label_nodes(data[q], hs[q])
        known = (nodes >= 0).all(axis=1)
        if not known.all():
            report.add(
                "release content",
                f"{where}: {int((~known).sum())} record(s) carry a value that is not a "
                "label of its hierarchy; they were left out",
            )
        sens = data[cfg.sensitive].astype(str).to_numpy()[known]
        value = pd.Index(values).get_indexer(pd.Index(sens)).astype(np.int64)
        value[~np.isin(sens, pm.protected)] = -1  # only the values this release protected link
        groups = group_release(nodes[known], value, len(values), trees)
        g = groups.records.size
        located = locate_groups(self.combos.leaves, groups.nodes, trees)
        if located.overlap_pairs:
            i, j = located.overlaps[0]
            report.add(
                "overlapping regions",
                f"{where}: {located.overlap_pairs} pair(s) of groups overlap, e.g. "
                f"{self._show(hs, groups.nodes[i])} and {self._show(hs, groups.nodes[j])}",
            )
        group_of_ind = located.group_of_combo[self.combos.of_individual]
        in_region = np.bincount(group_of_ind[group_of_ind >= 0], minlength=g).astype(np.int64)
        short = np.flatnonzero(groups.records > in_region)
        if short.size:
            report.add(
                "release content",
                f"{where}: {short.size} group(s) hold more records than register "
                f"individuals in their region, e.g. {self._show(hs, groups.nodes[short[0]])}",
            )
        uncertain = False
        if pm.dilution == "register":
            n_j = np.maximum(in_region, groups.records)
        else:
            n_j = groups.records
            present = self._present(seq, dbr)
            if present is None:
                uncertain = True  # every register individual in a region may have been present
            else:
                members = np.full(group_of_ind.size, -1, dtype=np.int64)
                members[present] = group_of_ind[present]
                group_of_ind = members
        if dbr is not None:
            self._compare_groups(where, dbr, hs, groups, n_j, values)
            if (dbr.records, dbr.groups) != (len(data), g):
                report.add(
                    "release figures",
                    f"{where}: the state database says {dbr.records} records in "
                    f"{dbr.groups} groups, data.parquet has {len(data)} in {g}",
                )
        if (pm.records is not None and pm.records != len(data)) or (pm.groups is not None and pm.groups != g):
            report.add(
                "release figures",
                f"{where}: the manifest says {pm.records} records in {pm.groups} groups, "
                f"data.parquet has {len(data)} in {g}",
            )
        history, parent, via = advance_history(state.history, group_of_ind, n_j, groups.counts)
        unknown = state.unknown[parent]
        if uncertain and (groups.counts > 0).any():
            unknown = unknown | np.vstack([groups.counts > 0, np.zeros((1, len(values)), dtype=bool)])[via]
            if len(self.report.unverifiable.examples) < MAX_EXAMPLES:
                self.report.unverifiable.examples.append(
                    f"release {seq} (presence dilution): snapshot "
                    f"{(dbr.params.get('snapshot') if dbr else None) or '(not recorded)'} is not available"
                )
        return _Rebuild(history, unknown)

    def _present(self, seq: int, dbr: _DbRelease | None) -> IntArray | None:
        """Register rows present in a presence-mode release, or None when unknowable."""
        recorded = dbr.params.get("snapshot") if dbr is not None else None
        if not isinstance(recorded, str) or not recorded:
            return None
        path = Path(recorded)
        if not path.is_absolute() and not path.is_file():
            path = self.ws.root / path  # recorded relative to where the publisher ran
        if not path.is_file():
            return None
        cfg = self.ws.config
        try:
            return present_rows(path, cfg.id_column, self.qis, self.register, self.hierarchies)
        except InputError as exc:
            self.report.add("snapshot", f"release {seq}: {exc}")
            return None

    def _show(self, hs: Mapping[str, Hierarchy], nodes: IntArray) -> str:
        return "(" + ", ".join(f"{q}={hs[q].labels[int(nodes[a])]}" for a, q in enumerate(self.qis)) + ")"

    def _compare_groups(
        self, where: str, dbr: _DbRelease, hs: Mapping[str, Hierarchy], groups: Any, n_j: IntArray, values: list[str]
    ) -> None:
        """The database's per-group figures against the recomputed ones (one row per group);
        ``hs``: the hierarchies the release is read with."""
        rebuilt: dict[tuple[str, ...], tuple[int, int, dict[str, int]]] = {}
        for g in range(groups.records.size):
            labels = tuple(hs[q].labels[int(groups.nodes[g, a])] for a, q in enumerate(self.qis))
            counts = {values[v]: int(groups.counts[g, v]) for v in np.flatnonzero(groups.counts[g])}
            rebuilt[labels] = (int(n_j[g]), int(groups.records[g]), counts)
        stored = {tuple(lab): (cand, rec, counts) for lab, cand, rec, counts in _db_groups(self.store, dbr.id)}
        for labels in stored.keys() - rebuilt.keys():
            self.report.add("group figures", f"{where}: group {labels} is in the state database, not in data.parquet")
        for labels in rebuilt.keys() - stored.keys():
            self.report.add("group figures", f"{where}: group {labels} is in data.parquet, not in the state database")
        for labels in rebuilt.keys() & stored.keys():
            (c1, r1, s1), (c2, r2, s2) = stored[labels], rebuilt[labels]
            if (c1, r1, s1) != (c2, r2, s2):
                self.report.add(
                    "group figures",
                    f"{where}: group {labels}: the state database has n_j={c1}, records={r1}, n_j,s={s1}; "
                    f"the release files give n_j={c2}, records={r2}, n_j,s={s2}",
                )

    # -- statistics ----------------------------------------------------------------------
    def _compare(self, state: _Rebuild, values: list[str], any_published: bool) -> None:
        report, cfg = self.report, self.ws.config
        n = len(self.register.ids)
        try:
            stats = self.store.latest_statistics(cfg.dataset)
        except StateError as exc:
            report.add("statistics file", f"{exc}: it was changed outside serialpub; the pairs cannot be compared")
            report.values = values
            return
        names = list(values)
        if stats is None:
            if any_published:
                report.add("statistics file", "the state database has published releases but no statistics file")
                report.values = names
                return
            db_class_of = np.zeros(n, dtype=np.int64)  # nothing published: everyone never linked
            db_survival, db_linked = np.ones((1, len(names))), np.zeros((1, len(names)), dtype=np.int64)
        else:
            members, classes = stats
            try:
                db_class_of, n_classes = self._member_classes(members)
                dictionary = classes.column("value").combine_chunks()
                stored_names = [str(x) for x in dictionary.dictionary.to_pylist()]
                names.extend(v for v in stored_names if v not in names)
                to_col = pd.Index(names).get_indexer(pd.Index(stored_names))
                cols = to_col[dictionary.indices.to_numpy()].astype(np.int64)
                k = classes.column("class").to_numpy().astype(np.int64)
                if k.size and (k.min() < 0 or k.max() >= n_classes):
                    raise ValueError("the classes table names classes no individual belongs to")
                db_survival = np.ones((n_classes + 1, len(names)))
                db_linked = np.zeros((n_classes + 1, len(names)), dtype=np.int64)
                db_survival[k, cols] = classes.column("survival").to_numpy()
                db_linked[k, cols] = classes.column("linked").to_numpy()
            except (KeyError, ValueError, IndexError) as exc:
                report.add(
                    "statistics file",
                    f"the statistics file is not readable as members/classes tables "
                    f"({type(exc).__name__}: {exc}); the pairs cannot be compared",
                )
                report.values = names
                return
        report.values = names
        v_all, v_rb = len(names), len(values)
        hist = state.history
        rb_survival = np.ones((hist.survival.shape[0], v_all))
        rb_linked = np.zeros((hist.survival.shape[0], v_all), dtype=np.int64)
        rb_unknown = np.zeros((hist.survival.shape[0], v_all), dtype=bool)
        rb_survival[:, :v_rb], rb_linked[:, :v_rb], rb_unknown[:, :v_rb] = hist.survival, hist.linked, state.unknown
        if n == 0:
            return
        # joint classes: individuals with the same stored and the same rebuilt class
        n_rb = max(1, hist.survival.shape[0])
        joint, first = factorize(db_class_of * n_rb + hist.class_of)
        weight = np.bincount(joint, minlength=first.size).astype(np.int64)
        jd, jr = db_class_of[first], hist.class_of[first]
        s_db, s_rb = db_survival[jd], rb_survival[jr]
        l_db, l_rb = db_linked[jd], rb_linked[jr]
        unknown = rb_unknown[jr]
        known_pairs = ~unknown
        report.unverifiable.count = int((unknown * weight[:, None]).sum())
        report.pairs_compared = n * v_all - report.unverifiable.count
        bad_s = ~np.isclose(s_db, s_rb, rtol=SURVIVAL_RTOL, atol=0.0) & known_pairs
        bad_l = (l_db != l_rb) & known_pairs
        ids = self.register.ids
        for kind, bad, a, b, fmt in (
            ("survival product", bad_s, s_db, s_rb, "{:.17g}"),
            ("linked releases", bad_l, l_db, l_rb, "{}"),
        ):
            if not bad.any():
                continue
            j, v = np.nonzero(bad)
            total = int(weight[j].sum())
            d_ex = [
                f"individual {ids[int(first[jj])]!r}, value {names[vv]!r}: state {fmt.format(a[jj, vv])}, release "
                f"files {fmt.format(b[jj, vv])}"
                + (f" (and {weight[jj] - 1} other individual(s) alike)" if weight[jj] > 1 else "")
                for jj, vv in zip(j[:MAX_EXAMPLES], v[:MAX_EXAMPLES], strict=True)
            ]
            report.add(kind, d_ex[0], total)
            for e in d_ex[1:]:
                report.add(kind, e, 0)

    def _member_classes(self, members: Any) -> tuple[IntArray, int]:
        """History class of every register row per the stored members table; rows the
        table does not name get class ``n_classes`` (never linked)."""
        report = self.report
        n = len(self.register.ids)
        meta = members.schema.metadata or {}
        stored_ids = pd.Index(np.asarray(members.column("individual").to_numpy(zero_copy_only=False)).astype(str))
        class_col = members.column("class").to_numpy().astype(np.int64)
        n_classes = int(class_col.max()) + 1 if class_col.size else 0
        rows = None
        if meta.get(b"register_sha256", b"").decode() == self.register_sha:
            rows = members.column("row").to_numpy().astype(np.int64)
            in_range = (rows >= 0) & (rows < n)
            if not in_range.all() or not (self.register.ids.astype(str)[rows[in_range]] == stored_ids[in_range]).all():
                report.add(
                    "statistics file",
                    "the members table's register rows do not match the register's ids; individuals were matched by id",
                )
                rows = None
        if rows is None:
            rows = self.register.rows_of(pd.Series(stored_ids))
        missing = rows < 0
        if missing.any():
            report.add(
                "statistics file",
                f"{int(missing.sum())} individual(s) of the statistics file are not in the "
                f"register, e.g. {stored_ids[int(np.flatnonzero(missing)[0])]!r}",
                int(missing.sum()),
            )
        class_of = np.full(n, n_classes, dtype=np.int64)
        class_of[rows[~missing]] = class_col[~missing]
        named = np.zeros(n, dtype=bool)
        named[rows[~missing]] = True
        absent = n - int(named.sum())
        if absent:
            report.notes.append(
                f"{absent} register individual(s) are not in the statistics file (added to the "
                "register after the last release); they are compared as never linked"
            )
        return class_of, n_classes


def verify_state(ws: Workspace) -> VerifyReport:
    """Rebuild the state of a workspace's dataset from its published files and compare.

    Reads the register, the hierarchies, every ``release-NNNN/`` folder of the release
    store (in number order), the presence-mode snapshots the database names, and from the
    database the published releases, their group figures and the latest statistics file
    (read-only; nothing is written). See the module docstring for what is compared
    (paper 004 §7; docs/design.md sections 1 and 4).

    Returns:
        a :class:`VerifyReport`; ``report.ok`` is True when nothing differs and every
        pair could be verified. A statistics file failing its checksum is reported as a
        difference, not raised.

    Raises:
        InputError: the register or a hierarchy file is missing or malformed.
        StateError: the state database cannot be opened.
    """
    return _Verifier(ws).run()
