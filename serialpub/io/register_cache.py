"""The coded register and its suite's verdict, cached per register version
(docs/configuration.md, "Inputs: files and databases").

Parsing a national register, coding its QIs and running its input suite costs more than the
release itself (docs/benchmarks.md), and every Airflow task of a release runs in a fresh process. The cache keeps, under
``cache/register-<key>.arrow`` in the workspace, what those steps produce: the ids, the
leaf ids of every QI as :class:`anonymizer.arrays.CodedRows` (Arrow IPC: one dictionary
column, the code of every individual's QI combination as int64 indices into the
combinations' int32 leaf ids, which a load uses as they are, without a copy), the ids' sorted hashes with their rows
(the id lookup of :class:`anonymizer.arrays.IdLookup`) and the register suite's result
when it passed.

The key is the sha256 of everything the coded register and the suite's verdict depend on:
the register's sha256 (the bytes read, as the manifest records them), the id column, the
QIs, each QI hierarchy file's sha256 and the path the suite names it by, and the source
of the suite code and the Great Expectations version that ran it. So a changed register,
hierarchy or suite never reads a stale entry; the register is still read and hashed every
time (the checksum the manifest records is of the bytes just read). A failed suite is not
cached: its messages are made afresh. Deleting the folder only costs time.

The entry is a derived file the privacy computation trusts (its leaf codes place every
individual in the register's cells), so it is checked before use: beside it,
``register-<key>.sha256`` holds the sha256 of the entry's bytes, written after the entry,
and an entry whose bytes do not match (a torn write, a disk error, an edit) is not read but
rebuilt from the register. Someone able to rewrite both could also rewrite the register
file; the independent audit reads neither the cache nor the state's copy of anything, only
the register versions the manifests name (docs/design.md section 9).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from anonymizer.arrays import CodedRows
from anonymizer.overlap import Overlap
from serialpub.io.atomic import own_tmp

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

CACHE_DIR = "cache"
_SUITE_META = b"serialpub.register_suite"
#: the id lookup's columns (sorted id hashes, their rows), after the leaf ids
_LOOKUP = ("__id_hash", "__id_hash_row")
#: the layout of an entry, part of its key: an entry of another layout is never read (the
#: third holds the leaf ids as a dictionary of QI combinations; the second, as one
#: fixed-size list column; the first, one column per QI)
FORMAT = 3


def cache_key(
    register_sha: str,
    id_column: str,
    qis: Sequence[str],
    hierarchy_shas: Mapping[str, str],
    hierarchy_sources: Mapping[str, str],
    code: Sequence[Path],
    engine_version: str,
) -> str:
    """The key of a register version coded with these hierarchies and checked by this code."""
    record = {
        "register": register_sha,
        "id_column": id_column,
        "qis": list(qis),
        "hierarchies": {q: hierarchy_shas[q] for q in qis},
        "sources": {q: hierarchy_sources[q] for q in qis},
        "code": {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in code},
        "engine": engine_version,
        "format": FORMAT,
    }
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def _path(workspace_root: Path, key: str) -> Path:
    return workspace_root / CACHE_DIR / f"register-{key}.arrow"


def _digest_path(path: Path) -> Path:
    return path.with_suffix(".sha256")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 24):
            digest.update(block)
    return digest.hexdigest()


def intact(path: Path) -> bool:
    """Whether the cache file ``path`` exists and matches the sha256 beside it (``.sha256``).

    Raises:
        OSError: the file or its digest cannot be read (a missing entry).
    """
    return _digest_path(path).read_text(encoding="utf-8").strip() == _sha256(path)


def read_intact(path: Path) -> bytes | None:
    """The bytes of the cache file ``path`` when they match the sha256 beside it, read once
    (so the bytes checked are the bytes used); None when they do not.

    Raises:
        OSError: the file or its digest cannot be read (a missing entry).
    """
    content = path.read_bytes()
    expected = _digest_path(path).read_text(encoding="utf-8").strip()
    return content if expected == hashlib.sha256(content).hexdigest() else None


def commit(tmp: Path, path: Path, digest: str | None = None) -> None:
    """Move the written cache file ``tmp`` to ``path``, then its digest beside it: an entry
    without its digest, or with an older one, is not read (:func:`intact`). ``digest``: the
    sha256 of the bytes written, when the writer hashed them (else ``tmp`` is read back)."""
    digest = _sha256(tmp) if digest is None else digest
    os.replace(tmp, path)
    tmp_digest = own_tmp(_digest_path(path))
    tmp_digest.write_text(digest + "\n", encoding="utf-8")
    os.replace(tmp_digest, _digest_path(path))


Lookup = tuple[npt.NDArray[np.uint64], npt.NDArray[np.int32] | npt.NDArray[np.int64]]
Entry = tuple["pd.Index", CodedRows, dict[str, Any] | None, Lookup | None]


def _read_only(entry: Entry) -> Entry:
    for array in entry[3] or ():
        array.flags.writeable = False
    return entry


def load(workspace_root: Path, key: str, writes: Writes | None = None) -> Entry | None:
    """``(ids, keys, suite, lookup)`` of the entry ``key``: ids shape (N,), leaf ids shape
    (N, d) as coded rows, the passed suite's record or None, and the ids' sorted hashes with their rows
    (:class:`anonymizer.arrays.IdLookup`) or None; None when there is no readable entry.
    The arrays are read-only. ``writes``: the entries the caller is writing; one of ``key``
    is read once written."""
    import pyarrow as pa

    if writes is not None:
        writes.wait(key)
    path = _path(workspace_root, key)
    try:
        # read once into this process's memory, and checked as read: the arrays below are
        # views of exactly the bytes hashed, which nothing outside the process can change
        # afterwards (a mapped file rewritten in place, by a restore from a backup say,
        # would change them under a running release, or end it with SIGBUS if truncated)
        expected = _digest_path(path).read_text(encoding="utf-8").strip()
        with pa.OSFile(str(path)) as f:
            data = f.read_buffer()
        if hashlib.sha256(data).hexdigest() != expected:
            return None
        table = pa.ipc.open_file(pa.BufferReader(data)).read_all()
    except (OSError, pa.ArrowInvalid):
        return None
    meta = table.schema.metadata or {}
    suite = json.loads(meta[_SUITE_META]) if _SUITE_META in meta else None
    lookup: Lookup | None = None
    if _LOOKUP[0] in table.column_names:
        lookup = (table.column(_LOOKUP[0]).to_numpy(), table.column(_LOOKUP[1]).to_numpy())  # rows as stored
        table = table.drop_columns(list(_LOOKUP))
    # Arrow strings, as read_csv gives them: no Python object per id, which would cost far
    # more memory than the strings.
    # They share the entry's bytes read above
    from serialpub.io.inputs import text_index  # the publisher's input module: not on a cached query's path

    ids = text_index(table.column(0))
    # the combination codes as stored: a view of the bytes read, not a copy; checked again
    # as coded rows (one pass over them: codes in range and numbered by first appearance,
    # combinations distinct), and their leaf ids against the hierarchies where they are
    # grouped (anonymizer.arrays.factorize_rows)
    try:
        keys = _coded_rows(table.column(1))
    except (ValueError, TypeError, AttributeError, NotImplementedError, pa.ArrowException):
        return None  # not the layout written, or codes that break their invariants: rebuilt
    return _read_only((ids, keys, suite, lookup))


def _coded_rows(column: pa.ChunkedArray) -> CodedRows:
    """The coded rows of the entry's leaf-id column (a dictionary of QI combinations),
    checked (:meth:`anonymizer.arrays.CodedRows.checked`).

    Raises:
        ValueError: codes that break the invariants of coded rows.
    """
    width = column.type.value_type.list_size
    if column.num_chunks == 0:  # an empty register
        return CodedRows.checked(np.zeros(0, dtype=np.int64), np.zeros((0, width), dtype=np.int32))
    leaf = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    return CodedRows.checked(leaf.indices.to_numpy(), leaf.dictionary.flatten().to_numpy().reshape(-1, width))


class _HashingFile:
    """A binary file object that hashes (sha256) every byte written through it."""

    def __init__(self, f: Any) -> None:
        self.f, self.digest, self.closed = f, hashlib.sha256(), False

    def write(self, data: Any) -> int:
        self.digest.update(data)
        return int(self.f.write(data))

    def flush(self) -> None:
        self.f.flush()

    def close(self) -> None:
        self.closed = True  # the caller closes the file itself

    def writable(self) -> bool:
        return True


LOG = logging.getLogger(__name__)


class Writes:
    """The entries one owner (a publisher) writes beside its release, by key: each
    on a thread of its own (:class:`anonymizer.overlap.Overlap`), so the release goes on
    while the entry, as large as the coded register, is written. :func:`load` given them
    waits for an entry of its key; the process does not exit before a write is done (the
    thread is joined at exit)."""

    def __init__(self) -> None:
        self._pending: dict[str, Future[None]] = {}
        self._lock = threading.Lock()

    def save_soon(
        self,
        workspace_root: Path,
        key: str,
        ids: pd.Index,
        keys: CodedRows,
        qis: Sequence[str],
        suite: dict[str, Any] | None,
        lookup: Lookup | None = None,
    ) -> Future[None]:
        """:func:`save` beside the caller. A write that fails is logged: the entry is then
        built again next time. The arrays must not change meanwhile (the register's are
        read-only)."""

        def write() -> None:
            try:
                save(workspace_root, key, ids, keys, qis, suite, lookup)
            except OSError as exc:  # a full disk, say: only the next process pays
                LOG.warning("the register cache entry %s was not written (%s); it is built again next time", key, exc)

        with self._lock:
            before = self._pending.get(key)
            if before is not None:
                before.result()  # one write of an entry at a time
            with Overlap(1, "serialpub-register-cache") as writer:
                done = writer.submit(write)
                writer.release()
            self._pending[key] = done
        return done

    def wait(self, key: str | None = None) -> None:
        """Wait until the entry ``key`` (default: every entry) is written."""
        with self._lock:
            writing = [f for k, f in self._pending.items() if key is None or k == key]
        for done in writing:
            done.result()


def save(
    workspace_root: Path,
    key: str,
    ids: pd.Index,
    keys: CodedRows,
    qis: Sequence[str],
    suite: dict[str, Any] | None,
    lookup: Lookup | None = None,
) -> None:
    """Write the entry ``key`` (atomically: a temporary file renamed into place); the
    entries of other keys are removed, the cache holds the register in use."""
    import pyarrow as pa

    from serialpub.io.inputs import arrow_ids

    folder = workspace_root / CACHE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    d = len(qis)
    cells = pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(keys.table).reshape(-1)), d)
    leaf_ids = pa.DictionaryArray.from_arrays(pa.array(keys.codes), cells)  # no copy of the codes
    columns = [arrow_ids(ids), leaf_ids]
    fields = [pa.field("id", pa.string()), pa.field("leaf_ids", leaf_ids.type)]
    if lookup is not None:
        rows = pa.array(lookup[1])  # int32 below 2**31 rows (anonymizer.arrays.IdLookup)
        columns += [pa.array(lookup[0], pa.uint64()), rows]
        fields += [pa.field(_LOOKUP[0], pa.uint64()), pa.field(_LOOKUP[1], rows.type)]
    schema = pa.schema(fields)
    if suite is not None:
        schema = schema.with_metadata({_SUITE_META: json.dumps(suite, sort_keys=True).encode()})
    path = _path(workspace_root, key)
    tmp = own_tmp(path)
    # hashed as written: an entry as large as the coded register is not read back for its digest
    with tmp.open("wb") as f:
        hashing = _HashingFile(f)
        with pa.PythonFile(hashing, mode="w") as sink, pa.ipc.new_file(sink, schema) as writer:
            writer.write_table(pa.table(columns, schema=schema))
    commit(tmp, path, hashing.digest.hexdigest())
    for stale in folder.glob("register-*"):
        if stale.name not in (path.name, _digest_path(path).name):
            stale.unlink(missing_ok=True)
