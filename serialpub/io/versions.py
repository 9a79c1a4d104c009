"""The register and hierarchy versions a workspace's releases used (docs/design.md section 10).

A release is computed against the register *as of its period*, and its manifest names that
register and each QI hierarchy by the sha256 of the file's bytes. The workspace keeps every
version a release used, content-addressed by that same sha256, so the audit,
``serialpub state verify`` and ``serialpub public-copy`` find the exact file each release
used, whatever ``register.csv`` holds today:

- ``registers/<sha256>.parquet``: one register version, stored as the *lines* of the CSV
  file. The first version holds every line; a later one holds only what differs from its
  parent version, as copy operations (a run of the parent's lines) and the new lines
  themselves, so a version costs bytes per changed individual, not per individual. Every
  ``FULL_EVERY``-th version in a chain is stored whole, which bounds the work of reading one.
  Reading rebuilds the file byte for byte and checks its sha256 against the name.
- ``hierarchy-versions/<qi>/<sha256>.csv``: a byte copy of a QI hierarchy file (small).

Why line deltas rather than a table with valid-from/valid-to per individual: the manifest's
sha256 of the register file is what the publisher signed and what a data user recomputes;
a rebuilt file with the same bytes is checked against it directly, with no canonical
re-serialization to specify or trust.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np
import numpy.typing as npt

from serialpub.errors import InputError
from serialpub.io.atomic import own_tmp
from serialpub.io.names import check_name, check_sha256

if TYPE_CHECKING:
    import pyarrow as pa

REGISTERS_DIR = "registers"
HIERARCHY_VERSIONS_DIR = "hierarchy-versions"
#: a chain of deltas longer than this is cut by storing the next version whole
FULL_EVERY = 16
#: bytes read at a time when a version is stored whole: its lines are written block by block,
#: so storing a national register holds one block of it, not the file; holding the file and
#: its newline mask at once would set a new version's peak memory (docs/scaling.md)
_BLOCK = 1 << 26
_LATEST = "latest"  # text file: the sha256 of the version stored last (the next one's parent)
# the lines of the version stored last, whole and uncompressed: the next version is diffed
# against it without rebuilding a chain (a cache: deleting it only costs time)
_TIP = ".tip.arrow"


def sha256_bytes(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def _line_ends(buf: npt.NDArray[np.uint8]) -> npt.NDArray[np.int64]:
    """Offsets just past every newline of ``buf``, int64, found ``_BLOCK`` bytes at a time:
    one boolean mask of a whole register would be a byte per byte of it, at once."""
    parts = [np.flatnonzero(buf[i : i + _BLOCK] == 10) + (i + 1) for i in range(0, buf.size, _BLOCK)]
    return np.concatenate(parts).astype(np.int64, copy=False) if parts else np.zeros(0, dtype=np.int64)


def _lines(data: bytes) -> pa.LargeBinaryArray:
    """The lines of ``data``, each with its newline, as one Arrow array over the same bytes
    (no Python object per line): concatenating the values gives ``data`` back."""
    import pyarrow as pa

    ends = _line_ends(np.frombuffer(data, dtype=np.uint8))
    n = ends.size + int(bool(data) and (ends.size == 0 or int(ends[-1]) != len(data)))
    offsets = np.zeros(n + 1, dtype=np.int64)
    offsets[1 : ends.size + 1] = ends
    offsets[n] = len(data)
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _blocks(f: BinaryIO, digest: Any) -> Iterator[pa.LargeBinaryArray]:
    """The lines of the file ``f``, in blocks of whole lines of about ``_BLOCK`` bytes (the
    file's last line may lack its newline), every byte read added to ``digest`` (a hashlib
    object): laid end to end, the blocks' lines are :func:`_lines` of the whole file."""
    rest = b""
    while block := f.read(_BLOCK):
        digest.update(block)
        data = rest + block if rest else block
        cut = data.rfind(b"\n") + 1
        rest = data[cut:]
        if cut:
            yield _lines(data[:cut] if rest else data)
    if rest:
        yield _lines(rest)


def _join(lines: pa.LargeBinaryArray) -> bytes:
    """The bytes of ``lines`` laid end to end (the inverse of :func:`_lines`)."""
    import pyarrow as pa

    lines = lines.combine_chunks() if isinstance(lines, pa.ChunkedArray) else lines
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset : lines.offset + len(lines) + 1]
    data = lines.buffers()[2]
    if data is None or offsets.size == 0:
        return b""
    return data.to_pybytes()[int(offsets[0]) : int(offsets[-1])]


def _delta_ops(parent: pa.LargeBinaryArray, child: pa.LargeBinaryArray) -> pa.Table:
    """Operations that build ``child`` from ``parent``: one row per run of consecutive
    parent lines (``start`` >= 0, ``length``) and one row per new line (``start`` = -1,
    ``length`` = 1, ``line``), in the child's order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    src = pc.fill_null(pc.index_in(child, value_set=parent), -1).to_numpy(zero_copy_only=False).astype(np.int64)
    n = src.size
    if n == 0:
        return pa.table(
            {
                "start": pa.array([], pa.int64()),
                "length": pa.array([], pa.int64()),
                "line": pa.array([], pa.large_binary()),
            }
        )
    new = src < 0
    # a run continues while both lines come from the parent and consecutively
    cont = np.zeros(n, dtype=bool)
    cont[1:] = ~new[1:] & ~new[:-1] & (src[1:] == src[:-1] + 1)
    heads = np.flatnonzero(~cont)
    lengths = np.diff(np.append(heads, n))
    starts = src[heads]
    lines = pc.if_else(pa.array(new[heads]), child.take(pa.array(heads)), pa.nulls(heads.size, pa.large_binary()))
    return pa.table({"start": pa.array(starts), "length": pa.array(lengths.astype(np.int64)), "line": lines})


def _whole(child: pa.LargeBinaryArray) -> pa.Table:
    """:func:`_delta_ops` from no parent: every line a new line, the lines themselves (no
    copy of them, no lookup: a national register's lines are not held a second time)."""
    import pyarrow as pa

    n = len(child)
    return pa.table(
        {
            "start": pa.array(np.full(n, -1, dtype=np.int64)),
            "length": pa.array(np.ones(n, dtype=np.int64)),
            "line": child,
        }
    )


def _apply(parent: pa.LargeBinaryArray, ops: pa.Table) -> pa.LargeBinaryArray:
    """The child's lines from its parent's and the operations of :func:`_delta_ops`."""
    import pyarrow as pa

    starts = ops.column("start").to_numpy()
    lengths = ops.column("length").to_numpy()
    literal = starts < 0
    new_lines = ops.column("line").combine_chunks().filter(pa.array(literal))
    new_lines = new_lines.cast(pa.large_binary())
    pool = pa.concat_arrays([parent, new_lines])
    # index into pool of every child line: parent runs, then new lines by their rank
    first = np.where(literal, len(parent) + np.cumsum(literal) - 1, starts)
    total = int(lengths.sum())
    run_of = np.repeat(np.arange(starts.size), lengths)
    within = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return pool.take(pa.array(first[run_of] + within))


class RegisterVersions:
    """The register versions of one workspace (``<root>/registers``).

    Raises (from its methods):
        InputError: a version is missing or does not rebuild to its sha256 (named).
    """

    def __init__(self, workspace_root: Path) -> None:
        self.dir = workspace_root / REGISTERS_DIR
        self._cache: tuple[str, pa.LargeBinaryArray] | None = None  # the last version rebuilt

    def path(self, sha: str) -> Path:
        """``registers/<sha>.parquet``; ``sha`` comes from a manifest or a version's parent,
        so it is checked to be a plain name first (:mod:`serialpub.io.names`).

        Raises:
            InputError: ``sha`` would name a file outside ``registers/``.
        """
        return self.dir / check_name(f"{sha}.parquet", str(self.dir), "register version")

    def has(self, sha: str) -> bool:
        return self.path(sha).is_file()

    def keep(self, register_file: Path, sha: str, data: bytes | None = None) -> int:
        """Store ``register_file`` (whose sha256 is ``sha``) unless it is stored already;
        returns the bytes written (0 when it was there). The parent is the version stored
        last; the write is atomic (a temporary file renamed into place). ``data``: the
        register's canonical CSV bytes when it is not a CSV file (Parquet, SQL:
        :mod:`serialpub.io.sources`); ``register_file`` then only names it."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if self.has(sha):
            return 0
        parent_sha = self._latest()
        depth = 0 if parent_sha is None else self._depth(parent_sha) + 1
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp, tip_tmp = own_tmp(self.path(sha)), own_tmp(self.dir / _TIP)
        if parent_sha is None or depth >= FULL_EVERY:
            self._write_whole(register_file, sha, data, tmp, tip_tmp)
            self._cache = None
        else:
            data = register_file.read_bytes() if data is None else data
            if sha256_bytes(data) != sha:
                raise self._changed(register_file)
            child = _lines(data)
            ops = _delta_ops(self._tip(parent_sha) or self.lines(parent_sha), child)
            meta = {"sha256": sha, "parent": parent_sha, "depth": str(depth), "lines": str(len(child))}
            pq.write_table(ops.replace_schema_metadata(meta), tmp, compression="zstd")
            with pa.OSFile(str(tip_tmp), "wb") as sink:
                tip = pa.table({"line": child})
                with pa.ipc.new_file(sink, tip.schema.with_metadata({"sha256": sha})) as writer:
                    writer.write_table(tip)
            self._cache = (sha, child)
        os.replace(tmp, self.path(sha))
        os.replace(tip_tmp, self.dir / _TIP)
        latest_tmp = own_tmp(self.dir / _LATEST)
        latest_tmp.write_text(sha + "\n", encoding="utf-8")
        os.replace(latest_tmp, self.dir / _LATEST)
        return self.path(sha).stat().st_size

    @staticmethod
    def _changed(register_file: Path) -> InputError:
        return InputError(f"{register_file}: changed while it was being read; run the release again")

    @staticmethod
    def _write_whole(register_file: Path, sha: str, data: bytes | None, tmp: Path, tip_tmp: Path) -> None:
        """Write version ``sha`` whole to ``tmp`` and the tip cache to ``tip_tmp``, block by
        block (:data:`_BLOCK`), from ``data`` or else the file.
        The same tables as one write of :func:`_whole` and of the lines, in row groups.

        Raises:
            InputError: the bytes read do not hash to ``sha`` (neither file is left).
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        digest = hashlib.sha256()
        ops_schema = _whole(pa.array([], pa.large_binary())).schema
        tip_schema = pa.schema([pa.field("line", pa.large_binary())]).with_metadata({"sha256": sha})
        n = 0
        try:
            with (
                io.BytesIO(data) if data is not None else register_file.open("rb") as f,
                pq.ParquetWriter(tmp, ops_schema, compression="zstd") as ops,
                pa.OSFile(str(tip_tmp), "wb") as sink,
                pa.ipc.new_file(sink, tip_schema) as tip,
            ):
                for lines in _blocks(f, digest):
                    n += len(lines)
                    ops.write_table(_whole(lines))
                    tip.write_batch(pa.record_batch([lines], schema=tip_schema))
                # read by _meta: known once the file is read, so added to the footer
                ops.add_key_value_metadata({"sha256": sha, "parent": "", "depth": "0", "lines": str(n)})
            if digest.hexdigest() != sha:
                raise RegisterVersions._changed(register_file)
        except BaseException:
            tmp.unlink(missing_ok=True)
            tip_tmp.unlink(missing_ok=True)
            raise

    def _latest(self) -> str | None:
        marker = self.dir / _LATEST
        if not marker.is_file():
            return None
        sha = marker.read_text(encoding="utf-8").strip()
        return sha if self.has(sha) else None

    def _tip(self, sha: str) -> pa.LargeBinaryArray | None:
        """The cached lines of version ``sha``, or None when the cache holds another."""
        import pyarrow as pa

        path = self.dir / _TIP
        if not path.is_file():
            return None
        try:
            with pa.OSFile(str(path), "rb") as source:
                reader = pa.ipc.open_file(source)
                if (reader.schema.metadata or {}).get(b"sha256", b"").decode() != sha:
                    return None
                return reader.read_all().column("line").combine_chunks()
        except (OSError, pa.ArrowInvalid):
            return None  # a torn cache: rebuild from the versions

    def _meta(self, sha: str) -> dict[str, str]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = self.path(sha)
        if not path.is_file():
            raise InputError(
                f"{path}: register version missing; a release was published with register sha256 {sha[:12]}... "
                f"(restore {REGISTERS_DIR}/ from the workspace's backup)"
            )
        # the footer's key-value metadata: a version stored whole adds its own there
        # (_write_whole), which the Arrow schema does not carry
        try:
            raw = pq.read_metadata(path).metadata or {}
            meta = {k.decode(): v.decode() for k, v in raw.items() if not k.startswith(b"ARROW:")}
        except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
            raise self._altered(path, f"not a register version ({type(exc).__name__})") from None
        if meta.get("parent"):  # a public copy's versions are untrusted: the parent becomes a path
            meta["parent"] = check_sha256(meta["parent"], str(path), "its parent version (metadata 'parent')")
        return meta

    @staticmethod
    def _altered(path: Path, what: str) -> InputError:
        return InputError(f"{path}: {what}; {REGISTERS_DIR}/ was altered (restore it from the workspace's backup)")

    def _depth(self, sha: str) -> int:
        return int(self._meta(sha).get("depth", "0"))

    def lines(self, sha: str) -> pa.LargeBinaryArray:
        """The lines of version ``sha``, rebuilt and checked."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if self._cache is not None and self._cache[0] == sha:
            return self._cache[1]
        chain: list[str] = []
        at: str | None = sha
        while at and not (self._cache is not None and self._cache[0] == at):
            chain.append(at)
            at = self._meta(at).get("parent") or None
            if len(chain) > FULL_EVERY + 1:
                raise InputError(f"{self.path(sha)}: its chain of parents does not end; the folder was altered")
        lines = self._cache[1] if at and self._cache is not None else pa.array([], pa.large_binary())
        for step in reversed(chain):
            try:
                lines = _apply(lines, pq.read_table(self.path(step), columns=["start", "length", "line"]))
            except (pa.ArrowException, OSError, ValueError, IndexError) as exc:
                # a version's operations are read from a file: a public copy's may be forged
                what = f"not a readable register version ({type(exc).__name__})"
                raise self._altered(self.path(step), what) from None
        if sha256_bytes(_join(lines)) != sha:
            raise self._altered(self.path(sha), f"does not rebuild to the register with sha256 {sha[:12]}...")
        self._cache = (sha, lines)
        return lines

    def read_bytes(self, sha: str) -> bytes:
        """The register file's bytes of version ``sha`` (checked against its sha256)."""
        return _join(self.lines(sha))

    def chain_files(self, sha: str) -> list[Path]:
        """The files version ``sha`` is rebuilt from (itself and its parents)."""
        files, at = [], sha
        while at:
            files.append(self.path(at))
            at = self._meta(at).get("parent") or ""
        return files


def keep_hierarchy(workspace_root: Path, qi: str, hierarchy_file: Path, sha: str) -> None:
    """Copy a QI's hierarchy file to ``hierarchy-versions/<qi>/<sha>.csv`` unless it is there."""
    target = hierarchy_version(workspace_root, qi, sha)
    if target.is_file():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = own_tmp(target)
    shutil.copyfile(hierarchy_file, tmp)
    os.replace(tmp, target)


def hierarchy_version(workspace_root: Path, qi: str, sha: str) -> Path:
    """The file of the hierarchy version ``sha`` of ``qi`` (may not exist). Both come from a
    manifest, so each is checked to be a plain name first (:mod:`serialpub.io.names`).

    Raises:
        InputError: ``qi`` or ``sha`` would name a file outside ``hierarchy-versions/<qi>/``.
    """
    folder = workspace_root / HIERARCHY_VERSIONS_DIR
    return folder / check_name(qi, str(folder), "quasi-identifier") / check_name(f"{sha}.csv", str(folder), "version")


def check_hierarchy_version(path: Path, sha: str) -> None:
    """Check that a kept hierarchy version holds the bytes its name (the sha256 the
    releases' manifests record) says: an altered copy would be read as the release's
    hierarchy, and its groups then reported as overlapping or off the hierarchy rather
    than the file as altered.

    Raises:
        InputError: the file's sha256 is another, naming the file and the fix.
    """
    actual = sha256_bytes(path.read_bytes())
    if actual != sha.lower():
        raise InputError(
            f"{path}: altered: its sha256 ({actual[:12]}…) is not its name; restore it from a backup or a public copy"
        )
