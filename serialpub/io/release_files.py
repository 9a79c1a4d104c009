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
know is never produced by this order and is reported, not touched; the staging folder of a
committed release whose place such a folder takes is kept (it is the release's only copy),
and publishing refuses until the folder is moved away.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from checks.evidence import HTML_FILE, JSON_FILE
from serialpub.faults import checkpoint
from serialpub.io import signing
from serialpub.io.manifest import Manifest

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

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
    """The sha256 of the file's bytes, read a block at a time (not held: a national register
    need not fit in memory twice)."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


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
    manifest: Manifest,
    key: Ed25519PrivateKey | None = None,
) -> tuple[Path, str]:
    """Step 1: write a release into its staging folder and flush it.

    Args:
        table: the published records, string columns only.
        manifest: the release's manifest; its ``sha256["data.parquet"]`` is filled here.
        key: sign the manifest (``manifest.sig``); for a release published at once (import).

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
    manifest.sha256.data_parquet = sha256_file(data_path)
    text = manifest.to_json()
    if key is not None:
        (staging / signing.SIGNATURE_FILE).write_text(signing.sign(key, text.encode("utf-8")), encoding="ascii")
        _fsync(staging / signing.SIGNATURE_FILE)
    (staging / MANIFEST_FILE).write_text(text, encoding="utf-8")
    checkpoint("after_manifest_written")
    for p in (data_path, staging / MANIFEST_FILE, staging, dataset_dir):
        _fsync(p)
    checkpoint("after_flush")
    return staging, hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_manifest(staging: Path, manifest: Manifest, key: Ed25519PrivateKey | None = None) -> str:
    """Rewrite the manifest of a staged release (validation evidence, then the sign-off
    are added to it before it is published) and flush it; returns its sha256. With
    ``key``, also write its signature (``manifest.sig``, :mod:`serialpub.io.signing`)."""
    text = manifest.to_json()
    if key is not None:
        # the signature first: a crash between the two leaves an uncommitted staging
        # folder, which recovery removes, so a published pair is always written together
        sig_tmp = staging / f".{signing.SIGNATURE_FILE}.tmp"
        sig_tmp.write_text(signing.sign(key, text.encode("utf-8")), encoding="ascii")
        _fsync(sig_tmp)
        os.replace(sig_tmp, staging / signing.SIGNATURE_FILE)
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
        if release_id is not None and release_id in committed:
            if os.path.lexists(dataset_dir / release_name(seq)):
                # something else took the release's name: the staging folder is the only
                # copy of a published release, so it stays until that is moved away
                warnings.warn(f"{staging} holds published release {seq}, but its place is taken", stacklevel=2)
                continue
            final = move_into_place(dataset_dir, seq, release_id)
            checkpoint("during_recovery")
            warnings.warn(f"completed the interrupted publication of {final}", stacklevel=2)
        else:
            shutil.rmtree(staging, ignore_errors=True)
            warnings.warn(f"removed {staging}, left by an interrupted publication", stacklevel=2)
    published_seqs = set(committed.values())
    for final in sorted(dataset_dir.glob("release-*")):
        number = final.name.removeprefix("release-")
        if not number.isdigit() or int(number) not in published_seqs:
            warnings.warn(f"{final} is not recorded in the state database; it is not part of the series", stacklevel=2)


def read_release(directory: Path) -> tuple[Manifest, pd.DataFrame]:
    """Manifest and data of a release folder (published or staged).

    Raises:
        InputError: the manifest is missing or breaks the release contract.
    """
    return Manifest.read(directory / MANIFEST_FILE), pd.read_parquet(directory / DATA_FILE)
