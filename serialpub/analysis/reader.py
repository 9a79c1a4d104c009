"""Reading what the public receives: a public copy (``serialpub public-copy``) or a
workspace's release store, verified, as tables a data user computes with.

:func:`open_releases` reads ``releases/<dataset>/release-NNNN/{data.parquet, manifest.json,
manifest.sig}``, ``hierarchies/`` (and ``hierarchy-versions/``), ``keys/*.pub`` and, when
the copy holds it, ``register.csv`` with its kept versions (``registers/``). Before anything
is returned the copy is verified with the audit's own checks (:mod:`serialpub.analysis.audit`:
every release from 1 to the newest present, the hash chain of the manifests, each
signature, each ``data.parquet`` against its manifest's sha256, the register and hierarchy
files each release was published with); the first defect is refused with one line naming
the release folder or file (docs/release-contract.md, "Integrity").

Each release is then a pandas DataFrame (and an Arrow table) with the published labels,
the group of every record and, for a numeric quasi-identifier, the bounds of its interval;
:meth:`PublishedRelease.groups` gives every group's region resolved against the
hierarchies, and :meth:`PublishedRelease.joint` the release resolved against its register
for the register-joint estimator (:mod:`anonymizer.joint`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from anonymizer.hierarchy import Hierarchy
from anonymizer.intervals import release_hierarchies
from anonymizer.joint import JointRelease
from anonymizer.regions import group_release, record_nodes
from serialpub.analysis.audit.combos import register_combos
from serialpub.analysis.audit.files import Registers, read_release_hierarchies, release_dirs
from serialpub.analysis.audit.integrity import check_store, read_public_key
from serialpub.analysis.audit.manifest import ParsedManifest, file_sha256, parse_manifest
from serialpub.errors import InputError

__all__ = ["PublicReleases", "PublishedRelease", "open_releases"]

_RELEASE = re.compile(r"^release (\d+)\b")


@dataclass(eq=False)
class PublishedRelease:
    """One verified release.

    Attributes:
        number: the release number.
        folder: its folder.
        manifest: the manifest keys the audit reads (quasi_identifiers, sensitive, dilution,
            period, suppressed, numeric, ...).
        data: ``data.parquet`` as published (labels as text).
        hierarchies: per QI the hierarchy it is read with (a numeric QI's ``[lo, hi]``
            intervals are nodes: :func:`anonymizer.intervals.release_hierarchies`).
        register: the register it was published with (id and QIs as text), None when the
            copy holds no register.
    """

    number: int
    folder: Path
    manifest: ParsedManifest
    data: pd.DataFrame
    hierarchies: dict[str, Hierarchy]
    register: pd.DataFrame | None = field(default=None, repr=False)
    id_column: str = "id"

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
        g = group_release(self._nodes, np.zeros(len(self.data), dtype=np.int64), 1, [
            self.hierarchies[q] for q in self.qis
        ])  # fmt: skip
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
        return pa.Table.from_pandas(self.frame(), preserve_index=False)

    def _bounds(self, q: str) -> tuple[np.ndarray, np.ndarray]:
        h = self.hierarchies[q]
        spans = h.index
        numbers = h.leaf_numbers()[spans.order]
        # min and max over each node's run of the depth-first order, one step per
        # hierarchy node (a release's labels of one QI), never per record
        lo = np.array([numbers[a : b + 1].min() for a, b in zip(spans.lo, spans.hi, strict=True)])
        hi = np.array([numbers[a : b + 1].max() for a, b in zip(spans.lo, spans.hi, strict=True)])
        return lo, hi

    def groups(self) -> pd.DataFrame:
        """Every group's region resolved against the hierarchies, one row per group:
        ``group``, the QI labels, ``<qi>_leaves`` (how many leaves the label holds), for a
        numeric QI ``<qi>_lo``/``<qi>_hi``, ``records`` and, with a register,
        ``register_individuals`` (n(G), the individuals of the region)."""
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
        if self.register is not None:
            out["register_individuals"] = self.joint().register_in_group
        return out

    @cached_property
    def _joint(self) -> JointRelease:
        if self.register is None:
            raise InputError(
                f"{self.folder}: this copy holds no register; the register-joint estimate needs it "
                "(ask the publisher for 'serialpub public-copy --with-register')"
            )
        declared = {q: self.hierarchies[q] for q in self.qis}
        combos = register_combos(self.register, self.id_column, self.qis, declared)
        values = sorted(self.data[self.sensitive].astype(str).unique())
        try:
            return JointRelease.of(
                self.data, self.qis, self.sensitive, [self.hierarchies[q] for q in self.qis], combos.leaves,
                values, self.manifest.suppressed or 0, combos.counts,
            )  # fmt: skip
        except ValueError as exc:
            raise InputError(f"{self.folder / 'data.parquet'}: {exc}") from None

    def joint(self) -> JointRelease:
        """The release resolved against the register it was published with
        (:class:`anonymizer.joint.JointRelease`).

        Raises:
            InputError: the copy holds no register, or the register does not cover the release.
        """
        return self._joint


@dataclass(eq=False)
class PublicReleases:
    """A verified release series: its dataset, releases in number order and the audit's notes."""

    root: Path
    dataset: str
    releases: list[PublishedRelease]
    notes: list[str]
    has_register: bool

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
    root: Path, dataset: str | None = None, public_key: Path | None = None, id_column: str = "id"
) -> PublicReleases:
    """Open and verify a public copy or a workspace.

    Args:
        root: the folder holding ``releases/`` (a public copy or a workspace).
        dataset: the dataset folder under ``releases/``; may be omitted when there is one.
        public_key: the publisher's public key (PEM); by default the one ``keys/*.pub`` of
            the copy when there is exactly one (``public-copy`` writes it). Without any,
            signatures are checked against the key each manifest names.
        id_column: the register's identifier column.

    Returns:
        :class:`PublicReleases`.

    Raises:
        InputError: a missing, unreadable or tampered file, a release missing from the
            series, a signature that does not verify, a broken manifest chain, a register
            or hierarchy that is not the one a release was published with: one line
            naming the folder or file.
    """
    dataset, dirs = release_dirs(root, dataset)
    if public_key is None:
        found = sorted((root / "keys").glob("*.pub")) if (root / "keys").is_dir() else []
        public_key = found[0] if len(found) == 1 else None
    key_text = None if public_key is None else read_public_key(public_key)
    for _, d in dirs:
        for name in ("manifest.json", "data.parquet"):
            if not (d / name).is_file():
                raise InputError(f"{d / name}: file missing; this copy is incomplete, do not use it")
    try:
        integrity = check_store(dirs, key_text)
    except InputError as exc:
        raise InputError(f"{exc}; this copy is not what the publisher published, do not use it") from None
    if integrity.findings:
        raise _refuse(root, dirs, integrity.findings[0])
    manifests: list[tuple[ParsedManifest, Path]] = []
    for n, d in dirs:
        mpath = d / "manifest.json"
        manifest = parse_manifest(json.loads(mpath.read_text(encoding="utf-8")), str(mpath))
        if manifest.release != n:
            raise InputError(f"{d}: the folder name says release {n}, the manifest says {manifest.release}")
        expected = manifest.sha256.get("data.parquet")
        if not isinstance(expected, str) or file_sha256(d / "data.parquet") != expected.lower():
            raise InputError(
                f"{d / 'data.parquet'}: does not match the sha256 in its manifest (changed after publishing); "
                "do not use this copy"
            )
        manifests.append((manifest, mpath))
    hierarchy_sets = read_release_hierarchies(root, manifests)
    has_register = (root / "register.csv").is_file() or (root / "registers").is_dir()
    registers = Registers(root, id_column, manifests) if has_register else None
    releases = []
    for j, ((n, d), (m, _)) in enumerate(zip(dirs, manifests, strict=True)):
        dpath = d / "data.parquet"
        try:
            data = pd.read_parquet(dpath)
        except Exception as exc:  # pyarrow raises several unrelated types for a broken file
            raise InputError(f"{dpath}: not a readable Parquet file ({type(exc).__name__}: {exc})") from None
        for c in [*m.quasi_identifiers, m.sensitive]:
            data[c] = data[c].astype(str)
        hs = hierarchy_sets[j]
        numeric = [q for q in m.numeric if q in data.columns]
        try:
            read_with = release_hierarchies(hs, numeric, data) if numeric else dict(hs)
        except ValueError as exc:
            raise InputError(f"{d / 'manifest.json'}: numeric_quasi_identifiers: {exc}") from None
        register = registers[j] if registers is not None else None
        releases.append(PublishedRelease(n, d, m, data, read_with, register, id_column))
    return PublicReleases(root, dataset, releases, integrity.notes, has_register)
