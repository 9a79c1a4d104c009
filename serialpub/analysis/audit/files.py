"""Reading a workspace for the audit: the release folders, the register, the snapshots.

The auditor reads only what an outsider has (docs/release-contract.md): the population
register, the hierarchies and the published release directories; the data holder's
audit adds the snapshots. It never reads the statistics file.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv

from serialpub.analysis.audit.integrity import check_store, read_public_key
from serialpub.analysis.audit.manifest import _Manifest, _parse_manifest, _sha256, marginal_findings
from serialpub.analysis.audit.result import AuditResult
from serialpub.analysis.audit.series import audit_releases
from serialpub.errors import InputError
from serialpub.io.hierarchies import read_hierarchies

_RELEASE_DIR = re.compile(r"^release-(\d{4,})$")


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
    workspace: Path, dataset: str | None = None, id_column: str = "id", snapshots: Path | None = None,
    public_key: Path | None = None,
) -> AuditResult:  # fmt: skip
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
            signed with it (:mod:`.integrity`; without it, signatures are checked against
            the key each manifest names).

    Raises:
        InputError: a missing or unreadable file (named); several datasets and no
            ``dataset``; the register or a hierarchy file differs from the one a release
            was published with (its sha256 in the manifest); anything
            :func:`audit_releases` raises.
    """
    dataset, dirs = _release_dirs(workspace, dataset)
    key_text = None if public_key is None else read_public_key(public_key)
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

    reg_sha = _sha256(reg_path)
    h_sha = {q: _sha256(hdir / f"{q}.csv") for q in qis}
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
    result.findings.extend(marginal_findings(register, parsed))
    integrity = check_store(dirs, key_text)
    result.findings.extend(integrity.findings)
    result.notes.extend(integrity.notes)
    return result



def _read_snapshot(folder: Path, m: _Manifest, id_column: str) -> tuple[pd.DataFrame, str]:
    """``<folder>/snapshot-<period>.csv`` of release ``m``: its id and sensitive columns as text."""
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
        column_types={c: pa.string() for c in wanted}, include_columns=wanted,
        strings_can_be_null=False, quoted_strings_can_be_null=False,
    )  # fmt: skip
    try:
        table = pacsv.read_csv(path, convert_options=options).to_pandas()
    except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a readable CSV file ({exc}); fix the line it names") from None
    return table, str(path)

