"""Reading what the public receives: a public copy (``serialpub public-copy``) or a
workspace's release store, verified, as tables a data user computes with.

:func:`open_releases` reads ``releases/<dataset>/release-NNNN/{data.parquet, manifest.json,
manifest.sig}``, ``hierarchies/`` (and ``hierarchy-versions/``), ``keys/*.pub`` and, when
the copy holds it, ``register.csv`` with its kept versions (``registers/``). Before anything
is returned the copy is verified with the audit's own checks (:mod:`serialpub.analysis.audit`:
every release from 1 to the newest present, the hash chain of the manifests, each
signature, each ``data.parquet`` against its manifest's sha256, the register and hierarchy
files each release was published with); the first defect is refused with one line naming
the release folder or file (docs/release-contract.md, "Integrity"). A copy is untrusted
input: its manifests' names are checked before they become paths
(:mod:`serialpub.io.names`), and the shape of every table is checked once, here, so that a
hostile copy is one line naming the file, never an error deep in the computation. The
result names the fingerprint of the key the signatures were verified against; a data user
pins the publisher's with ``key_fingerprint`` (docs/data-users.md, "Pinning the publisher's key").

Each release is then a pandas DataFrame (and an Arrow table) with the published labels, the
group of every record and, for a numeric quasi-identifier, the bounds of its interval;
:meth:`PublishedRelease.groups` gives every group's region resolved against the hierarchies,
and :meth:`PublishedRelease.joint` the release resolved against its register (:mod:`anonymizer.joint`).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from anonymizer.hierarchy import Hierarchy
from anonymizer.intervals import release_hierarchies
from anonymizer.joint import JointRelease
from anonymizer.regions import group_release, record_nodes
from serialpub.analysis.audit.cells import Cells, register_cells
from serialpub.analysis.audit.files import Registers, read_release_hierarchies, release_dirs
from serialpub.analysis.audit.integrity import check_store, given_key
from serialpub.analysis.audit.keys import fingerprint
from serialpub.analysis.audit.manifest import ParsedManifest, data_problems, parse_manifest
from serialpub.analysis.copy_cache import ArrayStore
from serialpub.analysis.copy_cache import copy_state as _copy_state
from serialpub.errors import InputError, quoted
from serialpub.io import verdict_cache

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

__all__ = ["PublicReleases", "PublishedRelease", "open_releases"]

_RELEASE = re.compile(r"^release (\d+)\b")


@dataclass(eq=False)
class Sources:
    """Where a :class:`PublishedRelease`'s parts come from: ``data`` or the verified bytes
    of its ``data.parquet`` (``content``, decoded when first read); ``register`` or the call
    that reads it (``register_of``); ``has_register``; ``joint``, its resolution when the
    cache held it (:mod:`serialpub.analysis.copy_cache`), with ``records``; ``store``, where
    a resolution made here is kept (None: nowhere)."""

    data: pd.DataFrame | None = None
    content: bytes | None = None
    register: pd.DataFrame | None = None
    register_of: Callable[[], pd.DataFrame] | None = None
    has_register: bool = False
    joint: JointRelease | None = None
    records: int = 0
    store: ArrayStore | None = None


@dataclass(eq=False)
class PublishedRelease:
    """One verified release.

    Attributes:
        number: the release number.
        folder: its folder.
        manifest: the manifest keys the audit reads (quasi_identifiers, sensitive, dilution,
            period, suppressed, numeric, ...).
        data: ``data.parquet`` as published (labels as text; decoded when first read).
        hierarchies: per QI the hierarchy it is read with (a numeric QI's ``[lo, hi]``
            intervals are nodes: :func:`anonymizer.intervals.release_hierarchies`).
        register: the register it was published with (id and QIs as text; read when first
            asked for), None when the copy holds no register.
        records: the release's number of records.
        sources: where ``data``, ``register`` and the resolution :meth:`joint` come from.
    """

    number: int
    folder: Path
    manifest: ParsedManifest
    hierarchies: dict[str, Hierarchy]
    sources: Sources = field(repr=False)
    id_column: str = "id"
    #: the register's QI combinations per (register table, QIs, leaves), shared by the releases
    #: of one :func:`open_releases`: those of one register version resolve it once, not once each
    cells_memo: dict[tuple[object, ...], tuple[pd.DataFrame, Cells]] = field(
        default_factory=dict, repr=False, compare=False
    )

    @property
    def data(self) -> pd.DataFrame:
        src = self.sources
        if src.data is None:  # decoded from the very bytes that were hashed, never read again
            src.data, src.content = _read_data(self.folder / "data.parquet", self.manifest, src.content), None
        return src.data

    @property
    def register(self) -> pd.DataFrame | None:
        src = self.sources
        if src.register is None and src.register_of is not None:
            src.register, src.register_of = src.register_of(), None
        return src.register

    @register.setter
    def register(self, table: pd.DataFrame | None) -> None:
        self.sources.register, self.sources.register_of = table, None

    @property
    def records(self) -> int:
        return len(self.sources.data) if self.sources.data is not None else self.sources.records

    @property
    def qis(self) -> list[str]:
        return list(self.manifest.quasi_identifiers)

    @property
    def sensitive(self) -> str:
        return self.manifest.sensitive

    @cached_property
    def _nodes(self) -> np.ndarray:
        return record_nodes(self.data, self.qis, [self.hierarchies[q] for q in self.qis])

    @cached_property
    def _groups(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        g = group_release(
            self._nodes, np.zeros(len(self.data), dtype=np.int64), 1, [self.hierarchies[q] for q in self.qis]
        )
        return g.of_record, g.nodes, g.records

    def frame(self) -> pd.DataFrame:
        """The release, one row per record: the published columns, ``group`` (0-based, by
        first appearance) and, per numeric QI q, ``q_lo`` and ``q_hi``: the smallest and
        largest leaf number its label holds (a leaf gives its own number; ``*`` the domain)."""
        out = self.data.copy()
        out["group"] = self._groups[0]
        for q in self.manifest.numeric:
            lo, hi = self._bounds(q)
            node = self._nodes[:, self.qis.index(q)]
            out[f"{q}_lo"], out[f"{q}_hi"] = lo[node], hi[node]
        return out

    def arrow(self) -> pa.Table:
        """:meth:`frame` as an Arrow table."""
        import pyarrow as pa

        return pa.Table.from_pandas(self.frame(), preserve_index=False)

    def _bounds(self, q: str) -> tuple[np.ndarray, np.ndarray]:
        h = self.hierarchies[q]
        spans = h.index
        numbers = h.leaf_numbers()[spans.order]
        # min and max over each node's depth-first run: one step per hierarchy node, never per record
        lo = np.array([numbers[a : b + 1].min() for a, b in zip(spans.lo, spans.hi, strict=True)])
        hi = np.array([numbers[a : b + 1].max() for a, b in zip(spans.lo, spans.hi, strict=True)])
        return lo, hi

    def groups(self) -> pd.DataFrame:
        """Every group's region resolved against the hierarchies, one row per group:
        ``group``, the QI labels, ``<qi>_leaves`` (how many leaves the label holds), for a
        numeric QI ``<qi>_lo``/``<qi>_hi``, ``records`` and, with a register,
        ``register_individuals`` (n(G), the individuals of the region)."""
        import pandas as pd

        _, nodes, records = self._groups
        out = pd.DataFrame({"group": np.arange(records.size)})
        for a, q in enumerate(self.qis):
            h = self.hierarchies[q]
            out[q] = np.array(h.labels, dtype=object)[nodes[:, a]]
            out[f"{q}_leaves"] = h.index.size[nodes[:, a]]
            if q in self.manifest.numeric:
                lo, hi = self._bounds(q)
                out[f"{q}_lo"], out[f"{q}_hi"] = lo[nodes[:, a]], hi[nodes[:, a]]
        out["records"] = records
        if self.sources.has_register:
            out["register_individuals"] = self.joint().register_in_group
        return out

    @cached_property
    def _joint(self) -> JointRelease:
        if self.sources.joint is not None:  # resolved before, for this very copy state
            return self.sources.joint
        if self.register is None:
            raise InputError(
                f"{self.folder}: this copy holds no register; the register-joint estimate needs it "
                "(ask the publisher for 'serialpub public-copy --with-register')"
            )
        declared = {q: self.hierarchies[q] for q in self.qis}
        key = (id(self.register), self.id_column, tuple(self.qis), tuple(h.leaves for h in declared.values()))
        held = self.cells_memo.get(key)
        if held is not None and held[0] is self.register:  # the very table: its id is not reused
            cells = held[1]
        else:
            cells = register_cells(self.register, self.id_column, self.qis, declared)
            for array in (cells.leaves, cells.counts, cells.first_row, cells.cell_of_row):
                array.flags.writeable = False  # shared by releases: no one may change it
            self.cells_memo[key] = (self.register, cells)
        values = sorted(self.data[self.sensitive].astype(str).unique())
        try:
            joint = JointRelease.of(
                self.data,
                self.qis,
                self.sensitive,
                [self.hierarchies[q] for q in self.qis],
                cells.leaves,
                values,
                self.manifest.suppressed or 0,
                cells.counts,
            )
        except ValueError as exc:
            raise InputError(f"{self.folder / 'data.parquet'}: {exc}") from None
        if self.sources.store is not None:
            self.sources.store.save(self.number, joint, self.numeric_labels(), len(self.data))
        return joint

    def numeric_labels(self) -> dict[str, list[str]]:
        """Per numeric QI its distinct published labels, in order of first appearance (what
        :func:`anonymizer.intervals.release_hierarchies` reads the release with)."""
        return {q: list(self.data[q].astype(str).unique()) for q in self.manifest.numeric}

    def joint(self) -> JointRelease:
        """The release resolved against the register it was published with
        (:class:`anonymizer.joint.JointRelease`).

        Raises:
            InputError: the copy holds no register, or the register does not cover the release.
        """
        return self._joint


@dataclass(eq=False)
class PublicReleases:
    """A verified release series: its dataset, releases in number order and the audit's notes.

    Attributes:
        key_fingerprint: the fingerprint (:func:`serialpub.analysis.audit.keys.fingerprint`)
            of the key the signatures were verified against; None when nothing is signed.
        key_source: where that key came from, for a message (the ``--public-key`` file,
            the copy's ``keys/*.pub``, ``--key-fingerprint``, or the first signed release).
        verified: how many releases the copy holds, all verified (``releases`` may hold
            fewer: the ones asked for).
    """

    root: Path
    dataset: str
    releases: list[PublishedRelease]
    notes: list[str]
    has_register: bool
    key_fingerprint: str | None = None
    key_source: str = ""
    verified: int = 0

    def release(self, number: int) -> PublishedRelease:
        """Release ``number``; raises InputError naming the releases there are."""
        for r in self.releases:
            if r.number == number:
                return r
        raise InputError(
            f"{self.root}: no release {number}; this copy holds releases "
            f"{self.releases[0].number}-{self.releases[-1].number}"
        )


def _refuse(root: Path, dirs: list[tuple[int, Path]], finding: str) -> InputError:
    """One line naming the release folder a finding is about (or the store)."""
    match = _RELEASE.match(finding)
    folder = dict(dirs).get(int(match.group(1))) if match else None
    where = folder if folder is not None else root
    return InputError(f"{where}: {finding}; this copy is not what the publisher published, do not use it")


def open_releases(
    root: Path,
    dataset: str | None = None,
    public_key: Path | None = None,
    id_column: str = "id",
    key_fingerprint: str | None = None,
    cache_dir: Path | None = None,
    releases: Sequence[int] | None = None,
) -> PublicReleases:
    """Open and verify a public copy or a workspace.

    Args:
        root: the folder holding ``releases/`` (a public copy or a workspace).
        dataset: the dataset folder under ``releases/``; may be omitted when there is one.
        public_key: the publisher's public key (PEM); by default the one ``keys/*.pub`` of
            the copy when there is exactly one (``public-copy`` writes it) and no
            ``key_fingerprint`` is given. Without any, the key of the first signed release
            is pinned (:mod:`serialpub.analysis.audit.keys`).
        id_column: the register's identifier column.
        key_fingerprint: the publisher's key fingerprint (``SHA256:...``), obtained out of
            band: the copy must be signed by the series' key with it, whatever its
            ``keys/*.pub`` holds (docs/data-users.md, "Pinning the publisher's key").
        cache_dir: the folder of verdicts (:mod:`serialpub.io.verdict_cache`; the command
            line passes :func:`~serialpub.io.verdict_cache.user_cache_dir`): a copy whose
            files, key and checking code are byte for byte those of a verdict there is not
            verified again, and a copy verified here leaves its verdict there. None (the
            default): verify every time, write nothing.
        releases: the release numbers the caller reads (default: all). Every release is
            verified all the same; on a verdict from the cache only these and the newest
            are read and decoded (all of them when the copy has no hierarchy file of the
            sensitive attribute, whose domain is then the published values), and the
            result holds only those; on a full verification it holds every release.

    Returns:
        :class:`PublicReleases`.

    Raises:
        InputError: a missing, unreadable or tampered file, a release missing from the
            series, a signature that does not verify, a broken manifest chain, a register
            or hierarchy that is not the one a release was published with, a manifest
            name that is not a plain name (:mod:`serialpub.io.names`), a ``data.parquet``
            whose columns or records are not its manifest's or whose labels are no nodes of
            their hierarchies, a copy not signed by the key ``key_fingerprint`` names or a
            ``public_key`` without that fingerprint, a release number in ``releases`` the
            copy does not hold: one line naming the folder or file.
    """
    dataset, dirs = release_dirs(root, dataset)
    wanted = None if releases is None else set(releases)
    absent = sorted(wanted - {n for n, _ in dirs}) if wanted is not None else []
    if absent:
        raise InputError(f"{root}: no release {absent[0]}; this copy holds releases {dirs[0][0]}-{dirs[-1][0]}")
    source = "" if public_key is None else f"the given {public_key}"
    if public_key is None and key_fingerprint is None:
        # the copy's own key file vouches for nothing by itself: its fingerprint is printed
        found = sorted((root / "keys").glob("*.pub")) if (root / "keys").is_dir() else []
        public_key = found[0] if len(found) == 1 else None
        source = "" if public_key is None else f"{public_key.relative_to(root)} of the copy"
    key_text, pinned = given_key(public_key, key_fingerprint)
    for _, d in dirs:
        for name in ("manifest.json", "data.parquet"):
            if not (d / name).is_file():
                raise InputError(f"{d / name}: file missing; this copy is incomplete, do not use it")
    # each data.parquet read once: the bytes hashed (sha256, cache key) are the bytes parsed
    contents = {n: (d / "data.parquet").read_bytes() for n, d in dirs}
    hashed: dict[str, str] = {}  # each file's sha256 for the key, so the register's is not taken twice
    state = _copy_state(root, dataset, dirs, contents, key_text, pinned, id_column, hashed) if cache_dir else None
    cached = verdict_cache.load_copy(cache_dir, state) if cache_dir is not None and state is not None else None
    if cached is None:
        try:
            integrity = check_store(dirs, key_text, pinned=pinned)
        except InputError as exc:
            raise InputError(f"{exc}; this copy is not what the publisher published, do not use it") from None
        if integrity.findings:
            raise _refuse(root, dirs, integrity.findings[0])
        notes = integrity.notes
        fp = None if integrity.key is None else fingerprint(integrity.key)
    else:
        notes, fp = list(cached["notes"]), cached["key_fingerprint"]
    manifests: list[tuple[ParsedManifest, Path]] = []
    for n, d in dirs:
        mpath = d / "manifest.json"
        manifest = parse_manifest(json.loads(mpath.read_text(encoding="utf-8")), str(mpath))
        if manifest.release != n:
            raise InputError(f"{d}: the folder name says release {n}, the manifest says {manifest.release}")
        expected = manifest.sha256.get("data.parquet")
        if not isinstance(expected, str) or hashlib.sha256(contents[n]).hexdigest() != expected.lower():
            raise InputError(
                f"{d / 'data.parquet'}: does not match the sha256 in its manifest (changed after publishing); "
                "do not use this copy"
            )
        manifests.append((manifest, mpath))
    hierarchy_sets = read_release_hierarchies(root, manifests)
    has_register = (root / "register.csv").is_file() or (root / "registers").is_dir()
    registers = Registers(root, id_column, manifests, hashed.get("register.csv")) if has_register else None
    # the newest release always: its hierarchies name a cross-tab's cells; and every release
    # when the sensitive domain is read from the published values (no hierarchy file of it)
    newest = manifests[-1][0]
    every = wanted is None or not (root / "hierarchies" / f"{newest.sensitive}.csv").is_file()
    keep = {n for n, _ in dirs} if every else {*(wanted or ()), dirs[-1][0]}
    opened = []
    cells_memo: dict[tuple[object, ...], tuple[pd.DataFrame, Cells]] = {}
    extended: dict[object, Hierarchy] = {}  # the declared hierarchies, alive meanwhile: ids not reused

    def unchanged() -> bool:
        return _copy_state(root, dataset, dirs, None, key_text, pinned, id_column) == state

    store = ArrayStore(cache_dir, state, unchanged) if cached is not None and cache_dir and state else None
    for j, ((n, d), (m, _)) in enumerate(zip(dirs, manifests, strict=True)):
        if cached is not None and n not in keep:
            continue  # verified before, and not asked for: not decoded
        register_of = functools.partial(registers.__getitem__, j) if registers is not None else None
        held = _from_cache(store, m, hierarchy_sets[j], extended) if store is not None else None
        if held is not None:  # resolved for this copy state before: its table and register wait
            read_with, sources = held
            sources.content, sources.register_of, sources.has_register = contents.pop(n), register_of, has_register
        else:
            data = _read_data(d / "data.parquet", m, contents.pop(n))
            try:
                read_with = release_hierarchies(hierarchy_sets[j], m.numeric, data)
            except ValueError as exc:
                raise InputError(f"{d / 'manifest.json'}: numeric_quasi_identifiers: {exc}") from None
            sources = Sources(data=data, register_of=register_of, has_register=has_register, store=store)
            if cached is None and register_of is not None:  # else read if resolved, as verified
                sources.register, sources.register_of = register_of(), None
        release = PublishedRelease(n, d, m, read_with, sources, id_column, cells_memo)
        if store is not None and held is None:
            store.save_labels(n, release.numeric_labels(), release.records)
        if cached is None:
            _check_labels(release)
        opened.append(release)
    if pinned is not None:
        source = "pinned with --key-fingerprint"
    elif not source and fp is not None:
        source = "the key of the first signed release, pinned on first use"
    if cache_dir is not None and cached is None and state is not None:
        # written only when the files still hash as they did before verifying: a file
        # changed while it was verified leaves no verdict for either of its states; the
        # releases keep their resolution beside it
        if unchanged():
            record = {"releases": len(dirs), "notes": notes, "key_fingerprint": fp}
            if verdict_cache.save_copy(cache_dir, state, record):
                kept = ArrayStore(cache_dir, state, unchanged)
                for r in opened:
                    r.sources.store = kept
                    kept.save_labels(r.number, r.numeric_labels(), r.records)
    return PublicReleases(root, dataset, opened, notes, has_register, fp, source, len(dirs))


def _from_cache(
    store: ArrayStore, m: ParsedManifest, declared: dict[str, Hierarchy], extended: dict[object, Hierarchy]
) -> tuple[dict[str, Hierarchy], Sources] | None:
    """Release ``m``'s hierarchies and cached resolution (:meth:`ArrayStore.read`; without
    one, its table is decoded when first read), None when the store holds neither."""
    held = store.read(m.release, list(m.quasi_identifiers), list(m.numeric), m.suppressed or 0, declared, extended)
    if held is None:
        return None
    read_with, joint, records = held
    return read_with, Sources(joint=joint, records=records, store=store if joint is None else None)


def _read_data(path: Path, m: ParsedManifest, content: bytes | None = None) -> pd.DataFrame:
    """``data.parquet`` of release ``m`` with its QI and sensitive columns as text, after
    checking its shape against the manifest (:func:`serialpub.analysis.audit.manifest.data_problems`:
    the audit's own check) and that no label is empty. ``content``: the file's bytes when
    they were read already (parsed from them, not read again).

    Raises:
        InputError: unreadable, a column missing or not named by the manifest, a record
            count other than the manifest's, an empty label: one line naming the file.
    """
    import pandas as pd

    try:
        data = pd.read_parquet(path if content is None else io.BytesIO(content))
    except Exception as exc:  # pyarrow raises several unrelated types for a broken file
        raise InputError(f"{path}: not a readable Parquet file ({type(exc).__name__}: {exc})") from None
    problems, _ = data_problems(m, list(data.columns), len(data))
    if problems:
        raise InputError(f"{path}: {problems[0]}; this copy is not what the publisher published, do not use it")
    for c in [*m.quasi_identifiers, m.sensitive]:
        empty = data[c].isna().to_numpy()
        if empty.any():
            raise InputError(
                f"{path}: column '{c}' is empty in {int(empty.sum())} record(s) (the first is record "
                f"{int(np.flatnonzero(empty)[0]) + 1}); every published record holds a label in each column"
            )
        data[c] = data[c].astype(str)
    return data


def _check_labels(release: PublishedRelease) -> None:
    """Every QI label of ``release`` is a node of the hierarchy it is read with: a label
    that is not would be read as no region at all.

    Raises:
        InputError: the first such label, naming the file, the record and the column.
    """
    unknown = release._nodes < 0
    if unknown.any():
        row, col = (int(x[0]) for x in np.nonzero(unknown))
        q = release.qis[col]
        raise InputError(
            f"{release.folder / 'data.parquet'}: record {row + 1}: {q} = {quoted(release.data[q].iloc[row])} is not a "
            f"node of hierarchies/{q}.csv (nor, for a numeric QI, an interval of its leaves); this copy is not what "
            "the publisher published, do not use it"
        )
