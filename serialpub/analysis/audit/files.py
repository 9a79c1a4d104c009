"""Reading a workspace for the audit: the release folders, the register, the snapshots.

The auditor reads only what an outsider has (docs/release-contract.md): the population
register, the hierarchies and the published release directories; the data holder's
audit adds the snapshots. It never reads the statistics file.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anonymizer.hierarchy import Hierarchy
from serialpub.analysis.audit.integrity import check_store, given_key
from serialpub.analysis.audit.manifest import ParsedManifest, file_sha256, parse_manifest
from serialpub.analysis.audit.result import AuditResult, collapse_notes
from serialpub.errors import InputError
from serialpub.io.hierarchies import read_hierarchy
from serialpub.io.series_records import Checkpoint
from serialpub.io.versions import RegisterVersions, check_hierarchy_version, hierarchy_version

if TYPE_CHECKING:
    import pandas as pd

_RELEASE_DIR = re.compile(r"^release-(\d{4,})$")


def release_dirs(workspace: Path, dataset: str | None) -> tuple[str, list[tuple[int, Path]]]:
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


def _read_register(path: Path, id_column: str, content: bytes | None = None) -> pd.DataFrame:
    """register.csv with every cell as text (empty cells stay ""), QI columns categorical;
    ``content``: the file's bytes when they come from a stored version (``path`` names it).

    pyarrow's multi-threaded reader is 3-4x faster than pandas' on millions of rows.
    """
    import pyarrow as pa
    import pyarrow.csv as pacsv

    try:
        if content is None:
            with path.open(encoding="utf-8", newline="") as f:
                header = next(csv.reader(f), [])
        else:
            header = next(csv.reader([content.split(b"\n", 1)[0].decode("utf-8")]), [])
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
        table = pacsv.read_csv(path if content is None else pa.BufferReader(content), convert_options=options)
    except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a readable CSV file ({exc}); fix the line it names") from None
    return table.to_pandas()


class Registers(Sequence["pd.DataFrame"]):
    """The register of every release, by the sha256 its manifest names: ``register.csv``
    when it is that file, else the version kept under ``registers/``
    (:mod:`serialpub.io.versions`). Read in order; the version read last is kept, so
    releases that share a register share one table (read once)."""

    def __init__(
        self,
        workspace: Path,
        id_column: str,
        manifests: list[tuple[ParsedManifest, Path]],
        current_sha: str | None = None,
    ) -> None:
        """``current_sha``: the sha256 of ``register.csv`` when the caller hashed it already
        (a data user's cache key reads every byte of it: a second pass over a national
        register is a third of a second more)."""
        self.workspace, self.id_column = workspace, id_column
        self.current = workspace / "register.csv"
        if current_sha is None and self.current.is_file():
            current_sha = file_sha256(self.current)
        self.current_sha = current_sha
        self.versions = RegisterVersions(workspace)
        self.shas: list[str] = []
        # the columns each version must have: the id and the QIs of every release that used it
        self.columns: dict[str, list[str]] = {}
        for pm, mpath in manifests:
            expected = pm.sha256.get("register")
            if not isinstance(expected, str):
                raise InputError(f"{mpath}: sha256 has no 'register' entry; the release contract requires it")
            expected = expected.lower()
            if expected != self.current_sha and not self.versions.has(expected):
                # one path, the register's; the version is named inside the same folder
                kept = self.versions.path(expected).relative_to(self.workspace)
                used = f"the one release {pm.release} was published with (sha256 {expected[:12]}...)"
                what = (
                    f"the register differs from {used}, and {kept} is missing"
                    if self.current_sha
                    else f"missing, and so is {kept}, {used}"
                )
                raise InputError(
                    f"{self.current}: {what}; audit with that register or the workspace's registers/ folder"
                )
            self.shas.append(expected)
            needed = self.columns.setdefault(expected, [id_column])
            needed.extend(q for q in pm.quasi_identifiers if q not in needed)
        self._last: tuple[str, pd.DataFrame] | None = None

    def __len__(self) -> int:
        return len(self.shas)

    def __getitem__(self, j: int) -> pd.DataFrame:  # type: ignore[override]
        sha = self.shas[j]
        if self._last is None or self._last[0] != sha:
            self._last = None  # free the previous table before reading the next
            path = self.current if sha == self.current_sha else self.versions.path(sha)
            content = None if sha == self.current_sha else self.versions.read_bytes(sha)
            table = _read_register(path, self.id_column, content)
            missing = [c for c in self.columns[sha] if c not in table.columns]
            if missing:
                raise InputError(
                    f"{path}: no column(s) {', '.join(missing)}; the register a release was published with has the "
                    "id column and every quasi-identifier of the release"
                )
            self._last = (sha, table)
        return self._last[1]


def read_release_hierarchies(
    workspace: Path, manifests: list[tuple[ParsedManifest, Path]]
) -> list[dict[str, Hierarchy]]:
    """The QI hierarchies of every release, by the sha256 its manifest names:
    ``hierarchies/<qi>.csv`` when it is that file, else ``hierarchy-versions/<qi>/<sha>.csv``.
    Releases that used the same versions share one mapping."""
    hdir = workspace / "hierarchies"
    qis: list[str] = []
    for pm, _ in manifests:
        qis.extend(q for q in pm.quasi_identifiers if q not in qis)
    current = {q: file_sha256(hdir / f"{q}.csv") for q in qis if (hdir / f"{q}.csv").is_file()}
    read: dict[tuple[str, str], Hierarchy] = {}
    sets: dict[tuple[tuple[str, str], ...], dict[str, Hierarchy]] = {}
    out = []
    for pm, mpath in manifests:
        recorded = pm.sha256.get("hierarchies")
        if not isinstance(recorded, dict):
            raise InputError(f"{mpath}: sha256 has no 'hierarchies' object; the release contract requires it")
        key = []
        for q in qis:
            exp = recorded.get(q)
            if not isinstance(exp, str):
                if q in pm.quasi_identifiers:
                    raise InputError(f"{mpath}: sha256.hierarchies has no entry for '{q}'")
                exp = current.get(q, "")  # a QI this release does not use: any version reads it
            exp = exp.lower()
            if (q, exp) not in read:
                path = hdir / f"{q}.csv" if current.get(q) == exp else hierarchy_version(workspace, q, exp)
                if not path.is_file():
                    raise InputError(
                        f"{hdir / f'{q}.csv'}: the hierarchy differs from the one release {pm.release} was published "
                        f"with, and {path.relative_to(workspace)} is missing; audit with that hierarchy file"
                    )
                if path != hdir / f"{q}.csv":
                    check_hierarchy_version(path, exp)
                read[(q, exp)] = read_hierarchy(path, q)
            key.append((q, exp))
        out.append(sets.setdefault(tuple(key), {q: read[(q, e)] for q, e in key}))
    return out


def audit_workspace(
    workspace: Path,
    dataset: str | None = None,
    id_column: str = "id",
    snapshots: Path | None = None,
    public_key: Path | None = None,
    since: tuple[int, str] | None = None,
    checkpoint: Path | None = None,
    key_fingerprint: str | None = None,
    learners: Sequence[str] = (),
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
        public_key: the publisher's Ed25519 public key (PEM): every manifest must be
            signed with it or a key a rotation record hands over to from it
            (:mod:`.integrity`, :mod:`.keys`; without it, the key of the first signed
            release is pinned).
        since: (release number, hex sha256 of its ``manifest.json``) the consumer saw: the
            copy must still hold that release and every later one must chain to it
            (:mod:`.extension`).
        checkpoint: a ``checkpoint.json`` the consumer kept (its ``.sig`` beside it): signed
            by a key of the series, and the copy must extend the release it names.
        key_fingerprint: the publisher's key fingerprint (``SHA256:...``, obtained out of
            band): the series' key with it is taken as if given as ``public_key``; a series
            with no such key fails (:mod:`.keys`).
        learners: the learning adversary's learners to run and report
            (:func:`audit_releases`); they do not change the verdict.

    Raises:
        InputError: a missing or unreadable file (named), ``checkpoint`` included; a
            ``since`` sha256 that is not 64 hex digits; a ``key_fingerprint`` that is not
            one, or that ``public_key`` does not have; several datasets and no ``dataset``;
            the register or a hierarchy file differs from the one a release was published
            with (its sha256 in the manifest); anything :func:`audit_releases` raises.
    """
    import pandas as pd

    from serialpub.analysis.audit.series import audit_releases  # the series audit: not what a reader imports

    since = _since(since)  # bad input is refused before the work
    if checkpoint is not None:
        if not checkpoint.is_file():
            raise InputError(f"{checkpoint}: not found; --checkpoint names a checkpoint.json you kept")
        Checkpoint.parse(checkpoint.read_bytes(), str(checkpoint))
    dataset, dirs = release_dirs(workspace, dataset)
    key_text, pinned = given_key(public_key, key_fingerprint)
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

    parsed = [parse_manifest(man, str(d / "manifest.json")) for d, man, _ in releases]
    named = [(pm, d / "manifest.json") for (_, d), pm in zip(dirs, parsed, strict=True)]
    registers = Registers(workspace, id_column, named)
    hierarchy_sets = read_release_hierarchies(workspace, named)
    snapshot_tables = None
    if snapshots is not None:
        snapshot_tables = [_read_snapshot(snapshots, pm, id_column) for pm in parsed]
    result = audit_releases(registers, id_column, hierarchy_sets, releases, snapshot_tables, learners)
    if result.dataset is None:
        result.dataset = dataset
    elif result.dataset != dataset:
        result.findings.append(f"the manifests name dataset '{result.dataset}' but the folder is '{dataset}'")
    for (number, d), pm in zip(dirs, parsed, strict=True):
        if number != pm.release:
            result.findings.append(f"{d}: the folder name says release {number}, the manifest says {pm.release}")
    integrity = check_store(dirs, key_text, dataset, since, checkpoint, pinned)
    result.findings.extend(integrity.findings)
    result.notes = collapse_notes([*result.notes, *integrity.notes])  # one line per note, not per release
    return result


def _since(since: tuple[int, str] | None) -> tuple[int, str] | None:
    """``since`` with its sha256 in lower case, checked."""
    if since is None:
        return None
    number, sha = since[0], since[1].strip().lower()
    if number < 1 or not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise InputError(
            f"--since {number} --manifest-sha256 {since[1][:70]!r}: give a release number >= 1 and the 64 hex "
            "digits of its manifest.json's sha256 (sha256sum manifest.json)"
        )
    return number, sha


def _read_snapshot(folder: Path, m: ParsedManifest, id_column: str) -> tuple[pd.DataFrame, str]:
    """``<folder>/snapshot-<period>.csv`` of release ``m``: its id and sensitive columns as text."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    if not folder.is_dir():
        raise InputError(f"{folder}: no such folder; --snapshots names the folder holding snapshot-<period>.csv")
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
        column_types={c: pa.string() for c in wanted},
        include_columns=wanted,
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
    )
    try:
        table = pacsv.read_csv(path, convert_options=options).to_pandas()
    except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a readable CSV file ({exc}); fix the line it names") from None
    return table, str(path)
