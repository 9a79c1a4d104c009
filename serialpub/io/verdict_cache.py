"""Passed snapshot-suite verdicts, cached per snapshot version
(docs/configuration.md, "Inputs: files and databases").

An Airflow run of a release checks its snapshot in three tasks, each a fresh process
(validating the inputs, drafting, validating the draft), and the snapshot suite is the
costliest check of a large snapshot (docs/benchmarks.md). The suite's result is a function of its inputs only (the
evidence drops every run-dependent field, :mod:`checks.gx`), so after it passed once the
later tasks read it from ``cache/snapshot-<key>.json``.

The key is the sha256 of everything the verdict depends on: the register cache's key
(register, id column, QIs, hierarchies, suite code, Great Expectations version;
:mod:`serialpub.io.register_cache`), the snapshot's sha256, the columns and the sensitive
domain it was checked against, and the period order (the period, the last published one,
the previous row count and the bounds). A failed suite is not cached: its messages are
made afresh. Like the register cache's, an entry carries the sha256 of its bytes in
``snapshot-<key>.sha256`` and is not read when they differ; the folder holds the latest
entry only, and deleting it only costs time.

The same module keeps the data user's verdicts: a public copy that
:func:`serialpub.analysis.reader.open_releases` verified (signatures, manifest chain,
checksums, register and hierarchy versions, labels) is not verified again while none of
its bytes changed (docs/data-users.md, "The verification cache"). Those entries live
outside the copy, in the user's cache folder (:func:`user_cache_dir`), since a copy could
carry a forged verdict of its own; the key is the sha256 of the key the signatures are
checked against, of every file the verification reads (path and sha256 of its bytes) and
of the verifying code, so any changed, added or removed file, another key or another
version of the checks is a miss and a full verification. An entry that is not intact,
not JSON or not of the expected shape is a miss too, never trusted.

Beside a copy's verdict wait the arrays its releases resolve to (:func:`save_arrays`,
:func:`load_arrays`; :mod:`serialpub.analysis.copy_cache`): ``copy-<key>.<name>.npz``, a
NumPy archive of plain arrays (read without pickle) with its sha256 beside it like every
entry. They share the verdict's key, so they are read only for the copy state that verdict
is for, and they go when it goes.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from serialpub.io.atomic import own_tmp
from serialpub.io.register_cache import CACHE_DIR, commit, intact, read_intact

_PREFIX = "snapshot-"


def verdict_key(**parts: Any) -> str:
    """The sha256 of ``parts`` (JSON-serializable: keys, digests, labels, numbers)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def load(workspace_root: Path, key: str) -> dict[str, Any] | None:
    """The passed suite's record of entry ``key`` (the fields of ``checks.gx.SuiteResult``),
    or None when there is no intact entry."""
    path = workspace_root / CACHE_DIR / f"{_PREFIX}{key}.json"
    try:
        if not intact(path):
            return None
        record: dict[str, Any] = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return record if record.get("success") is True else None


def save(workspace_root: Path, key: str, record: dict[str, Any]) -> None:
    """Write entry ``key`` for a passed suite's ``record`` (atomically, the digest last);
    older entries are removed."""
    if record.get("success") is not True:
        raise ValueError("only a passed suite's verdict is cached")
    folder = workspace_root / CACHE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{_PREFIX}{key}.json"
    tmp = own_tmp(path)
    tmp.write_bytes(json.dumps(record, sort_keys=True).encode())
    commit(tmp, path)
    for stale in folder.glob(f"{_PREFIX}*"):
        if stale.stem != path.stem:
            stale.unlink(missing_ok=True)


# -- the data user's verdicts on a public copy (serialpub.analysis.reader) ---------------

#: the environment variable naming the folder of the data user's verdicts
CACHE_ENV = "SERIALPUB_CACHE_DIR"
_COPY_PREFIX = "copy-"
#: entries kept; the oldest beyond are removed when one is written (one per copy state)
KEEP = 64


def user_cache_dir() -> Path:
    """The folder of the data user's verdicts: ``$SERIALPUB_CACHE_DIR`` when set, else
    ``$XDG_CACHE_HOME/serialpub``, else ``~/.cache/serialpub``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "serialpub"


def files_digest(root: Path, paths: Iterable[Path]) -> dict[str, str]:
    """``{path relative to root: sha256 of its bytes}`` of ``paths`` (files), in path order.

    Raises:
        OSError: a file that cannot be read.
    """
    out = {}
    for path in sorted(paths):
        with path.open("rb") as f:
            out[path.relative_to(root).as_posix()] = hashlib.file_digest(f, "sha256").hexdigest()
    return out


def _copy_entry(folder: Path, key: str) -> Path:
    return folder / f"{_COPY_PREFIX}{key}.json"


def load_copy(folder: Path, key: str) -> dict[str, Any] | None:
    """The verdict of entry ``key`` in ``folder``: a dict holding ``key`` (the same),
    ``releases`` (int), ``notes`` (list of str) and ``key_fingerprint`` (str or None); None
    when there is no entry, or it is not intact (its ``.sha256``), not JSON, not of that
    shape or not of that key: a miss, so the copy is verified afresh."""
    try:
        path = _copy_entry(folder, key)
        if not intact(path):
            return None
        record = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    fp = record.get("key_fingerprint") if isinstance(record, dict) else None
    notes = record.get("notes") if isinstance(record, dict) else None
    ok = (
        isinstance(record, dict)
        and record.get("key") == key
        and isinstance(record.get("releases"), int)
        and isinstance(notes, list)
        and all(isinstance(n, str) for n in notes)
        and (fp is None or isinstance(fp, str))
    )
    return record if ok else None


def save_copy(folder: Path, key: str, record: dict[str, Any]) -> bool:
    """Write the verdict ``record`` of a verified copy as entry ``key`` (atomically, the
    digest last; ``record["key"]`` is set to ``key``); beyond :data:`KEEP` entries the oldest
    are removed. A folder that cannot be written only costs the next verification: returns
    False then, True when written."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = _copy_entry(folder, key)
        tmp = own_tmp(path)
        tmp.write_bytes(json.dumps({**record, "key": key}, sort_keys=True).encode())
        commit(tmp, path)
        entries = sorted(folder.glob(f"{_COPY_PREFIX}*.json"), key=lambda p: p.stat().st_mtime_ns)
        for stale in entries[:-KEEP]:
            stale.unlink(missing_ok=True)
            for kept in folder.glob(f"{stale.stem}.*"):  # its digest and its arrays
                kept.unlink(missing_ok=True)
    except OSError:
        return False
    return True


def _arrays_entry(folder: Path, key: str, name: str) -> Path:
    if not name.replace("-", "").isalnum():
        raise ValueError(f"not an entry name: {name!r}")
    return folder / f"{_COPY_PREFIX}{key}.{name}.npz"


def save_arrays(folder: Path, key: str, name: str, arrays: Mapping[str, npt.NDArray[Any]]) -> bool:
    """Write ``arrays`` (numbers or text, no objects) as entry ``name`` (letters, digits and
    ``-``) of the copy state ``key``: an uncompressed NumPy archive, written under a
    temporary name and renamed, its digest last. Returns False when the folder cannot be
    written (it only costs recomputing them), True when written.

    Raises:
        ValueError: an array of Python objects (they would need pickle to be read back).
    """
    if any(np.asarray(a).dtype.hasobject for a in arrays.values()):
        raise ValueError("only arrays of numbers or text are cached")
    path = _arrays_entry(folder, key, name)
    tmp = own_tmp(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tmp.open("wb") as f:
            np.savez(f, **cast(Any, arrays))  # names of arrays, not savez's options
        commit(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        return False
    return True


def load_arrays(folder: Path, key: str, name: str) -> dict[str, npt.NDArray[Any]] | None:
    """The arrays of entry ``name`` of the copy state ``key``, all read into memory; None
    when there is none, or it is not intact (its ``.sha256``) or not a NumPy archive of
    plain arrays: a miss, never an error."""
    try:
        content = read_intact(_arrays_entry(folder, key, name))
        if content is None:
            return None
        with np.load(io.BytesIO(content), allow_pickle=False) as archive:
            arrays = {k: archive[k] for k in archive.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return None
    for a in arrays.values():
        a.flags.writeable = False  # shared by the releases that read them
    return arrays
