"""Release directories on disk (DESIGN.md section 5) and their crash-safe publication.

Order of publication, chosen so that a crash at any point leaves the release either
published-and-counted or invisible-and-not-counted:

1. write ``data.parquet`` and ``manifest.json`` into a hidden staging folder
   ``.staging-release-NNNN`` next to the final one, and flush both files and the folder;
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
import shutil
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from serialpub.faults import checkpoint

DATA_FILE = "data.parquet"
MANIFEST_FILE = "manifest.json"


def release_name(seq: int) -> str:
    return f"release-{seq:04d}"


def staging_name(seq: int) -> str:
    return f".staging-{release_name(seq)}"


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


def write_staging(dataset_dir: Path, seq: int, table: pd.DataFrame, manifest: dict[str, Any]) -> tuple[Path, str]:
    """Write a release into its staging folder and flush it.

    Args:
        table: the published records, string columns only.
        manifest: every manifest key except ``sha256["data.parquet"]``, which is filled here.

    Returns:
        the staging folder and the sha256 of the manifest as written.
    """
    staging = dataset_dir / staging_name(seq)
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    data_path = staging / DATA_FILE
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    pq.write_table(arrow.replace_schema_metadata(None), data_path, compression="zstd")
    checkpoint("after_data_written")
    manifest["sha256"]["data.parquet"] = sha256_file(data_path)
    text = json.dumps(manifest, indent=2, sort_keys=False) + "\n"
    (staging / MANIFEST_FILE).write_text(text, encoding="utf-8")
    checkpoint("after_manifest_written")
    for p in (data_path, staging / MANIFEST_FILE, staging, dataset_dir):
        _fsync(p)
    checkpoint("after_flush")
    return staging, hashlib.sha256(text.encode("utf-8")).hexdigest()


def move_into_place(dataset_dir: Path, seq: int) -> Path:
    """Step 3: rename the staging folder to its final name and flush the parent."""
    final = dataset_dir / release_name(seq)
    os.replace(dataset_dir / staging_name(seq), final)
    checkpoint("after_rename")
    _fsync(dataset_dir)
    return final


def recover(dataset_dir: Path, committed: set[int], in_progress: set[int] | None = None) -> None:
    """Finish or undo publications a crash interrupted (see the module docstring).

    Args:
        committed: sequence numbers the state database records as published.
        in_progress: sequence numbers of releases another live process is preparing;
            their staging folders are left alone.
    """
    in_progress = in_progress or set()
    if not dataset_dir.is_dir():
        return
    for staging in sorted(dataset_dir.glob(".staging-release-*")):
        seq = int(staging.name.rsplit("-", 1)[1])
        final = dataset_dir / release_name(seq)
        if seq in in_progress:
            continue
        if seq in committed and not final.exists():
            move_into_place(dataset_dir, seq)
            checkpoint("during_recovery")
            warnings.warn(f"completed the interrupted publication of {final}", stacklevel=2)
        else:
            shutil.rmtree(staging)
            warnings.warn(f"removed {staging}, left by an interrupted publication", stacklevel=2)
    for final in sorted(dataset_dir.glob("release-*")):
        seq = int(final.name.rsplit("-", 1)[1])
        if seq not in committed:
            warnings.warn(f"{final} is not recorded in the state database; it is not part of the series", stacklevel=2)


def read_release(directory: Path) -> tuple[dict[str, Any], pd.DataFrame]:
    """Manifest and data of a published release."""
    manifest = json.loads((directory / MANIFEST_FILE).read_text(encoding="utf-8"))
    return manifest, pd.read_parquet(directory / DATA_FILE)
