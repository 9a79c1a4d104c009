"""Release directories on disk (docs/design.md section 5) and their crash-safe publication.

Order of publication, chosen so that a crash at any point leaves the release either
published-and-counted or invisible-and-not-counted:

1. write ``data.parquet`` and ``manifest.json`` into a hidden staging folder
   ``.staging-release-NNNN-rID`` next to the final one (ID: the release row of the draft,
   so folders of different attempts at release NNNN never share a name), and flush both
   files and the folder;
2. commit the release and the new statistics file in the state database (the row names
   the staging folder);
3. rename the staging folder to ``release-NNNN`` and flush the parent folder.

:func:`recover` runs before every publication: a staging folder whose release the
database has committed is renamed into place (roll forward); any other staging folder
is removed (roll back) with a warning. A ``release-NNNN`` folder the database does not
know is never produced by this order and is reported, not touched.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from checks.evidence import HTML_FILE, JSON_FILE, write_evidence
from checks.gx import SuiteResult
from serialpub.faults import checkpoint

DATA_FILE = "data.parquet"
MANIFEST_FILE = "manifest.json"


def release_name(seq: int) -> str:
    return f"release-{seq:04d}"


def staging_name(seq: int, release_id: int) -> str:
    """Staging folder of the draft whose release row is ``release_id``."""
    return f".staging-{release_name(seq)}-r{release_id}"


_STAGING = re.compile(r"^\.staging-release-(\d+)(?:-r(\d+))?$")


def parse_staging(name: str) -> tuple[int, int | None] | None:
    """(sequence number, release row id or None for an unnamed attempt) of a staging folder."""
    m = _STAGING.match(name)
    return None if m is None else (int(m.group(1)), int(m.group(2)) if m.group(2) else None)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_staging(
    dataset_dir: Path,
    seq: int,
    release_id: int,
    table: pd.DataFrame,
    manifest: dict[str, Any],
    evidence: tuple[str, list[SuiteResult]] | None = None,
) -> tuple[Path, str]:
    """Write a release into its staging folder and flush it.

    Args:
        table: the published records, string columns only.
        manifest: every manifest key except ``sha256["data.parquet"]`` and, with evidence,
            ``validation["sha256"]``, which are filled here.
        evidence: (title, suite results) written as ``validation.json`` and
            ``validation.html`` (checks.evidence) before the manifest, which records the
            JSON file's sha256.

    Returns:
        the staging folder and the sha256 of the manifest as written.
    """
    staging = dataset_dir / staging_name(seq, release_id)
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    data_path = staging / DATA_FILE
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    pq.write_table(arrow.replace_schema_metadata(None), data_path, compression="zstd")
    checkpoint("after_data_written")
    manifest["sha256"]["data.parquet"] = sha256_file(data_path)
    extra = []
    if evidence is not None:
        manifest["validation"]["sha256"] = write_evidence(staging, *evidence)
        extra = [staging / JSON_FILE, staging / HTML_FILE]
    text = json.dumps(manifest, indent=2, sort_keys=False) + "\n"
    (staging / MANIFEST_FILE).write_text(text, encoding="utf-8")
    checkpoint("after_manifest_written")
    for p in (data_path, *extra, staging / MANIFEST_FILE, staging, dataset_dir):
        _fsync(p)
    checkpoint("after_flush")
    return staging, hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_manifest(staging: Path, manifest: dict[str, Any]) -> str:
    """Rewrite the manifest of a staged release (validation evidence, then the sign-off
    are added to it before it is published) and flush it; returns its sha256."""
    text = json.dumps(manifest, indent=2, sort_keys=False) + "\n"
    tmp = staging / f".{MANIFEST_FILE}.tmp"
    tmp.write_text(text, encoding="utf-8")
    _fsync(tmp)
    os.replace(tmp, staging / MANIFEST_FILE)
    for p in [*(staging / name for name in (JSON_FILE, HTML_FILE) if (staging / name).exists()), staging]:
        _fsync(p)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def move_into_place(dataset_dir: Path, seq: int, release_id: int) -> Path:
    """Step 3: rename the staging folder to its final name and flush the parent."""
    final = dataset_dir / release_name(seq)
    try:
        os.replace(dataset_dir / staging_name(seq, release_id), final)
    except FileNotFoundError:
        if not final.is_dir():
            raise
        # another process's recovery moved this committed release into place first
    checkpoint("after_rename")
    _fsync(dataset_dir)
    return final


def staging_folders(dataset_dir: Path) -> list[Path]:
    """The staging folders now in ``dataset_dir``."""
    return sorted(dataset_dir.glob(".staging-release-*")) if dataset_dir.is_dir() else []


def recover(
    dataset_dir: Path, committed: dict[int, int], in_progress: set[int] | None = None, staged: list[Path] | None = None
) -> None:
    """Finish or undo publications a crash interrupted (see the module docstring).

    Args:
        committed: release row id -> sequence number of every release the state database
            records as published.
        in_progress: release row ids of releases a live process is preparing; their
            staging folders are left alone.
        staged: the staging folders to settle, listed with :func:`staging_folders`
            *before* ``committed`` and ``in_progress`` were read (default: those present
            now). A folder staged after that reading belongs to a draft the sets miss.
    """
    in_progress = in_progress or set()
    if not dataset_dir.is_dir():
        return
    for staging in staging_folders(dataset_dir) if staged is None else staged:
        parsed = parse_staging(staging.name)
        if parsed is None or not staging.exists():  # not ours, or settled meanwhile
            continue
        seq, release_id = parsed
        if release_id is not None and release_id in in_progress:
            continue
        if release_id is not None and release_id in committed and not (dataset_dir / release_name(seq)).exists():
            final = move_into_place(dataset_dir, seq, release_id)
            checkpoint("during_recovery")
            warnings.warn(f"completed the interrupted publication of {final}", stacklevel=2)
        else:
            shutil.rmtree(staging, ignore_errors=True)
            warnings.warn(f"removed {staging}, left by an interrupted publication", stacklevel=2)
    published_seqs = set(committed.values())
    for final in sorted(dataset_dir.glob("release-*")):
        seq = int(final.name.rsplit("-", 1)[1])
        if seq not in published_seqs:
            warnings.warn(f"{final} is not recorded in the state database; it is not part of the series", stacklevel=2)


def read_release(directory: Path) -> tuple[dict[str, Any], pd.DataFrame]:
    """Manifest and data of a published release."""
    manifest = json.loads((directory / MANIFEST_FILE).read_text(encoding="utf-8"))
    return manifest, pd.read_parquet(directory / DATA_FILE)
