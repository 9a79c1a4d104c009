"""The statistics file (paper 004, section 7) between the state database and
:class:`anonymizer.release.History`.

The database keeps two tables per release (``state.store``): *members* (individual,
register row, history class, ℓ; tagged with the register's sha256) and *classes* (class,
protected value, survival product, linked releases; pairs never linked left out). This
module turns them into a History over the current register's rows and back.

The register may change between releases (docs/design.md section 10): histories follow the
individual's id. Someone who left the register keeps their history (register row -1): they
are no candidate of this release, and their rows are written back unchanged, so a return
to the register finds them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from anonymizer.release import History
from serialpub.io.inputs import Register, arrow_ids
from state.engine import StateError
from state.store import StateStore


def _read(members: pq.ParquetFile | pa.Table, columns: list[str] | None) -> pa.Table:
    """The members' ``columns`` (all for None), from a Parquet file or a table."""
    if isinstance(members, pq.ParquetFile):
        return members.read(columns=columns)
    return members if columns is None else members.select(columns)


#: members read this many at a time when nobody left the register (:func:`_members_by_batches`)
_BATCH = 1 << 22


def _batches(members: pq.ParquetFile, columns: list[str]) -> Iterator[pa.RecordBatch]:
    """The members' ``columns``, :data:`_BATCH` rows at a time."""
    return members.iter_batches(batch_size=_BATCH, columns=columns)


def _members_by_batches(members: pq.ParquetFile, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The history class of every one of the ``n`` register rows (-1 for a row no member
    has: a newcomer), shape (n,), and the ℓ of every class the members hold (NaN for
    another), shape (max class + 1,), from a file written for this register; read a batch
    at a time (row, class and ℓ of every individual, plus the copies made to decode
    them, would be held at once at national scale). None when a member has left the register
    (row -1): their ids must then be read too.

    Raises:
        IndexError: a row number outside the register (a file not written for it).
    """
    class_of = np.full(n, -1, dtype=np.int64)
    members_ell = np.zeros(0)
    for batch in _batches(members, ["row", "class", "ell"]):
        rows = batch.column(0).to_numpy()
        if rows.size and int(rows.min()) < 0:
            return None
        classes = batch.column(1).to_numpy()
        top = int(classes.max(initial=-1)) + 1
        if top > members_ell.size:
            members_ell = np.concatenate([members_ell, np.full(top - members_ell.size, np.nan)])
        class_of[rows] = classes
        members_ell[classes] = batch.column(2).to_numpy()
    return class_of, members_ell


def _first_negative(values: np.ndarray) -> int | None:
    """The position of the first negative value of ``values`` (n,), None when there is none;
    a block at a time, so no (n,) mask is made."""
    for start in range(0, values.size, _BATCH):
        found = np.flatnonzero(values[start : start + _BATCH] < 0)
        if found.size:
            return start + int(found[0])
    return None


class StatisticsFile:
    """Reads and writes the statistics file for one register and list of protected values."""

    def __init__(self, register: Register, protected: list[str], register_sha256: str) -> None:
        self.register = register
        self.protected = protected
        self.register_sha256 = register_sha256
        self._ids = arrow_ids(register.ids)
        # the members no longer in the register and their classes' rows, as :meth:`load`
        # read them; :meth:`tables` writes them back
        self.departed: tuple[pa.Table, pa.Table] | None = None
        # (sha256 of the statistics file or None before the first release, (individuals, ℓ)
        # of the ℓ given to every one, the History loaded, its departed members) of
        # :meth:`load_latest`'s last load with one ℓ for everyone
        self._loaded: tuple[str | None, tuple[int, float], History, tuple[pa.Table, pa.Table] | None] | None = None

    def load_latest(self, store: StateStore, dataset: str, ell: np.ndarray) -> History:
        """:meth:`load` of the statistics file after ``dataset``'s newest published release.

        A draft and its validation in one process read the same file: it is read, checked
        and decoded once, and found again by its sha256,
        which the database stores with it. The History's arrays are read-only, so no step
        can change what a later one reads.

        Raises:
            StateError: as :meth:`load`, or the file fails its checksum.
        """
        ell = np.asarray(ell, dtype=np.float64)
        # the callers give everyone the configured ℓ: the key is that ℓ, not a copy of the array
        same = (len(ell), float(ell[0])) if len(ell) and bool((ell == ell[0]).all()) else None
        known = self._loaded
        sha, stats = store.latest_statistics_unless(dataset, None if known is None else known[0])
        if known is not None and stats is None and known[0] == sha and same is not None and known[1] == same:
            self.departed = known[3]
            return known[2]
        self._loaded = None  # the History kept is let go before the next is loaded
        if stats is None and sha is not None:  # the file was known, ℓ was not
            sha, stats = store.latest_statistics_unless(dataset, None)
        history = self.load(stats, ell)
        for array in (history.class_of, history.survival, history.linked, history.ell):
            array.flags.writeable = False
        if same is not None:
            self._loaded = (sha, same, history, self.departed)
        return history

    def load(self, stats: tuple[pq.ParquetFile | pa.Table, pa.Table] | None, ell: np.ndarray) -> History:
        """The History over the register's rows; before any release, one class per ℓ.

        Args:
            stats: (members, classes) as ``StateStore.latest_statistics`` or
                ``latest_statistics_unless`` return them (members as a table or a Parquet
                file: with the register the file was written for, its ids are not read
                unless members have left the register since).
            ell: ℓ per register individual, shape (N,); used for individuals new to the
                register since the state was written (they form one fresh class).

        Members of the state no longer in the register are kept aside (``departed``) for
        :meth:`tables`.

        Raises:
            StateError: the state names protected values no longer configured.
        """
        self.departed = None
        if stats is None:
            return History.empty(ell, len(self.protected))
        members_file, classes = stats
        meta = (members_file.schema_arrow if isinstance(members_file, pq.ParquetFile) else members_file.schema).metadata
        same_register = (meta or {}).get(b"register_sha256", b"").decode() == self.register_sha256
        n = len(self.register.ids)
        class_ids = classes.column("class").to_numpy().astype(np.int64)  # also the departed's classes
        by_batches = (
            _members_by_batches(members_file, n) if same_register and isinstance(members_file, pq.ParquetFile) else None
        )
        if by_batches is not None:
            class_of, members_ell = by_batches
        else:  # members gone from the register (their ids are kept), or another register
            class_of, members_ell = self._members_whole(members_file, classes, same_register)
        # newcomers to the register (class -1 so far): one fresh class after every known one
        n_classes = int(max(members_ell.size - 1, class_ids.max(initial=-1))) + 1
        class_ell = np.full(n_classes + 1, float(ell[0]) if n else 2.0)
        known = ~np.isnan(members_ell)
        class_ell[: members_ell.size][known] = members_ell[known]
        newcomer = _first_negative(class_of)
        if newcomer is not None:
            class_ell[n_classes] = float(ell[newcomer])
            for start in range(0, n, _BATCH):  # in place, a block at a time
                block = class_of[start : start + _BATCH]
                block[block < 0] = n_classes
        survival = np.ones((n_classes + 1, len(self.protected)))
        linked = np.zeros((n_classes + 1, len(self.protected)), dtype=np.int64)
        values = classes.column("value").combine_chunks()
        to_protected = pd.Index(self.protected).get_indexer(values.dictionary.to_pylist())
        cols = to_protected[values.indices.to_numpy()]
        if (cols < 0).any():
            raise StateError(self._dropped(values.dictionary.to_pylist(), to_protected))
        k = classes.column("class").to_numpy().astype(np.int64)
        survival[k, cols] = classes.column("survival").to_numpy()
        linked[k, cols] = classes.column("linked").to_numpy()
        return History(class_of, survival, linked, class_ell)

    def _members_whole(
        self, members_file: pq.ParquetFile | pa.Table, classes: pa.Table, same_register: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """:func:`_members_by_batches` from the members read whole, by row number with the
        same register, else by id; members gone from the register are set aside
        (``departed``)."""
        members = _read(members_file, None)
        if same_register:
            rows = members.column("row").to_numpy().astype(np.int64)  # same register: row numbers hold
        else:
            # by id; Arrow's hash join, several times faster than pandas' on millions of strings
            found = pc.index_in(members.column("individual").cast(pa.string()), value_set=self._ids)
            rows = pc.fill_null(found, -1).to_numpy(zero_copy_only=False).astype(np.int64)
        gone = rows < 0
        if gone.any():
            kept = members.filter(pa.array(gone))
            used = pc.is_in(classes.column("class"), value_set=pc.unique(kept.column("class")))
            self.departed = (kept, classes.filter(used))
            members, rows = members.filter(pa.array(~gone)), rows[~gone]
        class_of = np.full(len(self.register.ids), -1, dtype=np.int64)
        class_col = members.column("class").to_numpy().astype(np.int64)
        class_of[rows] = class_col
        members_ell = np.full(int(class_col.max(initial=-1)) + 1, np.nan)
        members_ell[class_col] = members.column("ell").to_numpy()
        return class_of, members_ell

    @staticmethod
    def _dropped(names: Sequence[object], positions: np.ndarray) -> str:
        gone = ", ".join(repr(str(v)) for v, p in zip(names, positions, strict=True) if p < 0)
        return (
            f"the state holds linked histories for protected value(s) {gone}, which the configuration no longer "
            "protects (or the sensitive domain no longer has); a value once protected stays protected, because "
            "its linked individuals' probabilities go on accumulating: add it back to protected_values and to "
            "the sensitive hierarchy"
        )

    def tables(self, history: History) -> tuple[pa.Table, pa.Table]:
        """(members, classes) for the state database."""
        members = pa.table(
            {
                "individual": self._ids,
                "row": pa.array(np.arange(len(self.register.ids), dtype=np.int64)),
                "class": pa.array(history.class_of.astype(np.int32)),
                "ell": pa.array(history.ell[history.class_of]),
            }
        ).replace_schema_metadata({"register_sha256": self.register_sha256})
        k, cols = np.nonzero(history.linked)
        classes = pa.table(
            {
                "class": pa.array(k.astype(np.int32)),
                "value": pa.DictionaryArray.from_arrays(pa.array(cols.astype(np.int32)), pa.array(self.protected)),
                "survival": pa.array(history.survival[k, cols]),
                "linked": pa.array(history.linked[k, cols].astype(np.int32)),
            }
        )
        if self.departed is None:
            return members, classes
        gone, gone_classes = self.departed
        # their classes are numbered after this history's, in the order of the old numbers
        old = gone.column("class").to_numpy().astype(np.int64)
        uniq, new = np.unique(old, return_inverse=True)
        offset = history.survival.shape[0]
        gone_members = pa.table(
            {
                "individual": gone.column("individual").cast(pa.string()),
                "row": pa.array(np.full(len(gone), -1, dtype=np.int64)),
                "class": pa.array((offset + new).astype(np.int32)),
                "ell": gone.column("ell").cast(pa.float64()),
            }
        )
        k_old = gone_classes.column("class").to_numpy().astype(np.int64)
        values = gone_classes.column("value").combine_chunks()
        names = [str(v) for v in values.dictionary.to_pylist()]
        to_col = pd.Index(self.protected).get_indexer(pd.Index(names))
        cols_old = to_col[values.indices.to_numpy()].astype(np.int32)
        if (cols_old < 0).any():
            raise StateError(self._dropped(names, to_col))
        gone_rows = pa.table(
            {
                "class": pa.array((offset + np.searchsorted(uniq, k_old)).astype(np.int32)),
                "value": pa.DictionaryArray.from_arrays(pa.array(cols_old), pa.array(self.protected)),
                "survival": gone_classes.column("survival").cast(pa.float64()),
                "linked": gone_classes.column("linked").cast(pa.int32()),
            }
        )
        return (
            pa.concat_tables([members, gone_members]).replace_schema_metadata(members.schema.metadata),
            pa.concat_tables([classes, gone_rows]),
        )
