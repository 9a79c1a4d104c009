"""Array primitives shared by every layer: hash-based grouping, row keys and range
expansion. Generic numpy/pandas helpers, no privacy logic, so sharing them keeps the audit
and the validation's breach table independent of the anonymizer's reasoning.

:func:`row_keys` is the project's one mixed-radix encoder of a row of per-QI codes (the
writer side's region geometry, :mod:`anonymizer.regions`, builds on it); the independent
audit identifies rows its own way (docs/design.md section 9).

``np.unique`` sorts, and in numpy 2.4 it is 5-20x slower than pandas' hash table on
millions of int64 keys, hence :func:`factorize`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

IntArray = npt.NDArray[np.int64]


#: integer values factorized this many at a time when there are more than twice as many:
#: pandas sizes its hash table for every value it is given, so a whole register's keys at
#: once would touch a table and a position array sized by the register, not by its few
#: distinct values (docs/scaling.md)
_BLOCK = 1 << 22
#: integer arrays up to this size are factorized by a numpy sort: the same codes, and a
#: short query (the data user's, on a cached copy) need not import pandas, which costs
#: more than such a sort
_SMALL = 1 << 16


def factorize(values: npt.ArrayLike) -> tuple[IntArray, IntArray]:
    """Group equal values in linear time.

    Integer arrays of more than ``2 * _BLOCK`` values are factorized a block at a time
    against the distinct values found so far (the same codes); when the distinct values
    pass an eighth of the values, the rest is done in one piece, as for any other array.

    Returns:
        the code of every value (numbered by first appearance), shape (n,), and the index
        of each code's first value, shape (u,).
    """
    arr = np.asarray(values)
    if arr.ndim == 1 and arr.dtype.kind in "iu" and arr.size <= _SMALL:
        uniques, first, inverse = np.unique(arr, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")  # codes numbered by first appearance
        rank = np.empty(uniques.size, dtype=np.int64)
        rank[order] = np.arange(uniques.size)
        return rank[inverse.reshape(-1)], first[order].astype(np.int64)
    import pandas as pd

    if arr.ndim == 1 and arr.dtype.kind in "iu" and arr.size > 2 * _BLOCK:
        blocks = _factorize_blocks(arr)
        if blocks is not None:
            return blocks
    codes, uniques = pd.factorize(arr)
    codes = np.asarray(codes, dtype=np.int64)
    return codes, first_positions(codes, len(uniques))


def _factorize_blocks(arr: npt.NDArray[np.integer[Any]]) -> tuple[IntArray, IntArray] | None:
    """:func:`factorize` of the integers ``arr`` (n,) a block at a time, or None when they
    hold more than n/8 distinct values (looking each block up among them would cost more
    than one table for all)."""
    import pandas as pd

    n = arr.size
    codes = np.empty(n, dtype=np.int64)
    found = pd.Index(arr[:0])  # the distinct values so far, in the order of their codes
    firsts: list[IntArray] = []
    for start in range(0, n, _BLOCK):
        block_codes, block_uniques = pd.factorize(arr[start : start + _BLOCK])
        block_codes = np.asarray(block_codes, dtype=np.int64)
        code = np.asarray(found.get_indexer(block_uniques), dtype=np.int64)
        new = code < 0
        if new.any():  # numbered after the earlier ones, in the order they first occur
            code[new] = np.arange(len(found), len(found) + int(new.sum()))
            firsts.append(start + first_positions(block_codes, len(block_uniques))[new])
            found = found.append(pd.Index(block_uniques[new]))
            if len(found) > n // 8:
                return None
        codes[start : start + block_codes.size] = code[block_codes]
    return codes, np.concatenate(firsts) if firsts else np.zeros(0, dtype=np.int64)


def first_positions(codes: IntArray, n: int) -> IntArray:
    """The position of each code's first occurrence in ``codes`` (every code in [0, n) occurs),
    shape (n,); by blocks from the end, so no position array as long as ``codes`` is made."""
    first = np.empty(n, dtype=np.int64)
    for end in range(codes.size, 0, -_BLOCK):  # an earlier block overwrites a later one
        start = max(end - _BLOCK, 0)
        first[codes[start:end][::-1]] = np.arange(end - 1, start - 1, -1)
    return first


def distinct_counts(n: int, keys_of: Callable[[int, int], IntArray]) -> tuple[IntArray, IntArray]:
    """The distinct values among ``n`` int64 keys, in ascending order, shape (u,), and how
    often each occurs, shape (u,). ``keys_of(start, stop)`` gives keys ``start:stop``; they
    are asked for :data:`_BLOCK` at a time and counted in a hash table per block, so no
    array of ``n`` keys, nor a code per key, is made (each would be as long as the register:
    docs/scaling.md).
    """
    import pandas as pd

    values: list[IntArray] = []
    counts: list[IntArray] = []
    for start in range(0, n, _BLOCK):
        block = pd.Series(keys_of(start, min(start + _BLOCK, n)), copy=False).value_counts(sort=False)
        values.append(np.asarray(block.index, dtype=np.int64))
        counts.append(np.asarray(block, dtype=np.int64))
    if not values:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    distinct, at = np.unique(np.concatenate(values), return_inverse=True)
    total = np.zeros(distinct.size, dtype=np.int64)
    np.add.at(total, at.reshape(-1), np.concatenate(counts))
    return distinct, total


def sorted_counts(keys: npt.ArrayLike) -> tuple[IntArray, IntArray]:
    """The distinct values of ``keys`` in ascending order, shape (u,), and how often each
    occurs, shape (u,), by sorting: numpy sorts 1M int64 keys in a fraction of the time a
    hash table groups them, when only the counts are needed (no code per key)."""
    ordered = np.sort(np.asarray(keys))
    if not ordered.size:
        return ordered, np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
    return ordered[starts], np.diff(np.append(starts, ordered.size))


def row_keys(mat: npt.NDArray[np.integer[Any]], radices: Sequence[int]) -> IntArray:
    """An int64 key per row of ``mat`` (n, d) such that rows are equal iff keys are.

    Mixed-radix encoding with ``radices[j]`` > every value of column j, the first column
    most significant: while the product of the radices stays below 2**62 the key is
    exactly ``Σ_j mat[:, j] · Π_{i>j} radices[i]`` (so ``np.unravel_index(key, radices)``
    decodes it, and keys sort like the rows). When the next column would overflow int64
    the partial keys are re-ranked densely first (:func:`factorize`), so any number of
    columns works; keys are then comparable only within one call.

    Returns:
        shape (n,); zeros for d = 0.
    """
    return _column_keys(iter(mat.T), mat.shape[0], radices)


def _column_keys(columns: Iterator[npt.ArrayLike], n: int, radices: Sequence[int]) -> IntArray:
    """:func:`row_keys` of the matrix whose columns ``columns`` yields one at a time."""
    key = np.zeros(n, dtype=np.int64)
    span = 1
    for col, radix in zip(columns, radices, strict=True):
        if span * int(radix) >= 2**62:
            key = factorize(key)[0]
            span = int(key.max()) + 1 if key.size else 1
        key = key * int(radix) + np.asarray(col).astype(np.int64)
        span *= int(radix)
    return key


@dataclass(frozen=True, eq=False)
class CodedRows:
    """An integer matrix of shape (n, d) held as one code per row among its distinct rows:
    row i is ``table[codes[i]]`` (a dictionary encoding of the rows).

    The register's leaf ids are held this way: one int64 code per individual where the
    (N, d) int32 matrix takes d int32s, and its grouping into distinct QI combinations,
    which the anonymizer and the breach check need in every release, is ``codes`` itself
    (:func:`factorize_rows`), not a further int64 array kept beside the matrix.

    Build it with :meth:`of`, :meth:`of_columns` or :meth:`checked`, which establish the
    invariants below; indexing gives ordinary arrays (``rows[i]`` a row, ``rows[idx]`` the
    (k, d) rows of ``idx``, ``rows[idx, a]`` column a of them).

    Attributes:
        codes: the code of every row, shape (n,), int64, read-only, numbered by first
            appearance (the first row of code c comes before the first row of code c + 1),
            every code in [0, C) occurring.
        table: the distinct rows in the order of their codes, shape (C, d), int32, read-only.
        first: the first row of every code, shape (C,), ascending.
        counts: rows per code, shape (C,).
    """

    codes: IntArray
    table: npt.NDArray[np.int32]
    first: IntArray
    counts: IntArray

    @classmethod
    def of(cls, mat: npt.NDArray[np.integer[Any]], radices: Sequence[int]) -> CodedRows:
        """The coded rows of the matrix ``mat`` (n, d), ``radices[j]`` > every value of column j."""
        return cls.of_columns(list(mat.T), mat.shape[0], radices)

    @classmethod
    def of_columns(cls, columns: Iterable[npt.ArrayLike], n: int, radices: Sequence[int]) -> CodedRows:
        """The coded rows of the matrix whose columns ``columns`` yields one at a time, each
        shape (n,), ``radices[j]`` > every value of column j >= 0. The (n, d) matrix is never
        made: each column is kept in the narrowest integer its radix allows until the rows
        are grouped (one int64 per row, not one int32 per QI).

        Raises:
            ValueError: a column of another length, or a value outside [0, radix).
        """
        kept: list[npt.NDArray[np.integer[Any]]] = []

        def narrowed() -> Iterator[IntArray]:
            for col, radix in zip(columns, radices, strict=True):
                arr = np.asarray(col)
                if arr.shape != (n,):
                    raise ValueError(f"column {len(kept)} has shape {arr.shape}, not ({n},)")
                if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= int(radix)):
                    raise ValueError(f"column {len(kept)} has a value outside [0, {int(radix)})")
                kept.append(arr.astype(np.min_scalar_type(max(int(radix) - 1, 0)), copy=False))
                yield arr

        codes, first = factorize(_column_keys(narrowed(), n, radices))
        table = np.empty((first.size, len(kept)), dtype=np.int32)
        for a, col in enumerate(kept):
            table[:, a] = col[first]
        return cls._frozen(codes, table, first, np.bincount(codes, minlength=first.size).astype(np.int64))

    @classmethod
    def checked(cls, codes: npt.NDArray[np.integer[Any]], table: npt.NDArray[np.integer[Any]]) -> CodedRows:
        """Coded rows from stored ``codes`` (n,) and ``table`` (C, d), checked: one pass over
        the codes and a grouping of the C table rows.

        Raises:
            ValueError: a code outside [0, C) or not occurring, codes not numbered by first
                appearance, or two equal table rows.
        """
        codes = np.asarray(codes)
        table = np.asarray(table)
        if codes.ndim != 1 or codes.dtype.kind not in "iu" or table.ndim != 2 or table.dtype.kind not in "iu":
            raise ValueError("coded rows need integer codes of shape (n,) and an integer table of shape (C, d)")
        c = table.shape[0]
        if codes.size and (int(codes.min()) < 0 or int(codes.max()) >= c):
            raise ValueError(f"a code lies outside [0, {c})")
        counts = np.bincount(codes, minlength=c).astype(np.int64)
        if not counts.all():
            raise ValueError(f"code {int(np.flatnonzero(counts == 0)[0])} does not occur")
        first = first_positions(codes.astype(np.int64, copy=False), c)
        if (np.diff(first) <= 0).any():
            raise ValueError("the codes are not numbered by first appearance")
        if table.size and (int(table.min()) < 0 or int(table.max()) >= 2**31):
            raise ValueError("the table holds a value outside [0, 2**31)")
        radices = [int(m) + 1 for m in table.max(axis=0)] if c else [1] * table.shape[1]
        if factorize(_column_keys(iter(table.T), c, radices))[1].size != c:
            raise ValueError("two rows of the table are equal")
        return cls._frozen(codes.astype(np.int64, copy=False), table.astype(np.int32, copy=False), first, counts)

    @classmethod
    def _frozen(cls, codes: IntArray, table: npt.NDArray[np.int32], first: IntArray, counts: IntArray) -> CodedRows:
        for arr in (codes, table, first, counts):
            arr.flags.writeable = False
        return cls(codes, table, first, counts)

    @property
    def shape(self) -> tuple[int, int]:
        """(n, d), as the matrix's."""
        return self.codes.shape[0], self.table.shape[1]

    def __len__(self) -> int:
        return int(self.codes.shape[0])

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, tuple):
            rows, column = index
            if not isinstance(column, int | np.integer | slice):
                raise TypeError("coded rows take one column index, an int or a slice")
            return self.table[:, column][self.codes[rows]]
        return self.table[self.codes[index]]

    #: not an array, nor a sequence: numpy would otherwise build the (n, d) matrix a row at a
    #: time, in Python, wherever coded rows meet ``np.asarray``
    __iter__ = None

    def __array__(self, dtype: Any = None, copy: Any = None) -> npt.NDArray[Any]:
        raise TypeError("coded rows are not converted implicitly; index them, or call dense()")

    def dense(self) -> npt.NDArray[np.int32]:
        """The (n, d) matrix itself (n·d int32 values: for tests and small inputs)."""
        return self.table[self.codes]

    def column_counts(self, column: int, minlength: int) -> IntArray:
        """How many rows hold each value of column ``column``, shape (max(minlength, ...),)."""
        out = np.zeros(max(minlength, int(self.table[:, column].max(initial=-1)) + 1), dtype=np.int64)
        np.add.at(out, self.table[:, column], self.counts)
        return out


#: an integer matrix (n, d), dense or coded
Rows: TypeAlias = npt.NDArray[np.integer[Any]] | CodedRows


def factorize_rows(mat: Rows, radices: Sequence[int]) -> tuple[IntArray, IntArray]:
    """:func:`factorize` of :func:`row_keys` ``(mat, radices)``: the group of every row of
    ``mat`` (n, d), numbered by first appearance, shape (n,), and each group's first row,
    shape (u,); both read-only. For :class:`CodedRows` these are its codes and firsts, as
    they are (the same numbering: its table's rows are distinct, its codes numbered by
    first appearance).
    """
    if isinstance(mat, CodedRows):
        if len(radices) != mat.shape[1] or bool((mat.table >= np.asarray(radices, dtype=np.int64)).any()):
            raise ValueError(f"coded rows of {mat.shape[1]} columns with values past the radices {list(radices)}")
        return mat.codes, mat.first
    codes, first = factorize(row_keys(mat, radices))
    codes.flags.writeable = first.flags.writeable = False
    return codes, first


def expand_ranges(lo: IntArray, hi: IntArray, chunk: int) -> Iterator[tuple[IntArray, IntArray]]:
    """All pairs (i, j) with ``lo[i] <= j < hi[i]``, in chunks of about ``chunk`` pairs.

    Yields:
        (i, j) arrays of equal length.
    """
    counts = hi - lo
    cum = np.cumsum(counts)
    start = 0
    while start < counts.size:
        base = int(cum[start - 1]) if start else 0
        end = max(start + 1, int(np.searchsorted(cum, base + chunk, side="right")))
        c = counts[start:end]
        total = int(c.sum())
        if total:
            i = np.repeat(np.arange(start, end, dtype=np.int64), c)
            offset = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(c) - c, c)
            yield i, np.repeat(lo[start:end], c) + offset
        start = end


def expand_csr(rows: IntArray, start: IntArray, items: IntArray) -> tuple[IntArray, IntArray]:
    """For every position i of ``rows``, every item of CSR row ``rows[i]`` (row r holds
    ``items[start[r]:start[r + 1]]``), in one step.

    Returns:
        (i repeated, item): int64 arrays of equal length, in the order of ``rows`` and,
        within a row, of ``items``.
    """
    lo, hi = start[rows], start[rows + 1]
    cnt = hi - lo
    total = int(cnt.sum())
    rep = np.repeat(np.arange(rows.size, dtype=np.int64), cnt)
    offset = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    return rep, items[np.repeat(lo, cnt) + offset]


#: ids hashed per chunk: pandas hashes Python objects, and a whole register's ids at once
#: would all be held as objects together
_HASH_CHUNK = 1 << 20


def id_hashes(ids: npt.ArrayLike) -> npt.NDArray[np.uint64] | None:
    """pandas' fixed-key 64-bit hash of every id, shape (n,); the same in every process.
    Values that are not text are hashed as their text (so 1 and "1" collide); None when
    pandas cannot hash them. An Index, Series or array is hashed a chunk at a time (the
    hash of each id is its own, so the result is the same)."""
    import pandas as pd

    seq: Any
    if isinstance(ids, pd.Index | np.ndarray):
        seq = ids
    elif isinstance(ids, pd.Series):
        seq = ids.array
    else:
        seq = np.asarray(ids, dtype=object)
    out = np.empty(len(seq), dtype=np.uint64)
    try:
        for start in range(0, len(seq), _HASH_CHUNK):
            part = np.asarray(seq[start : start + _HASH_CHUNK], dtype=object)
            out[start : start + part.size] = pd.util.hash_array(part, categorize=False)
    except TypeError:
        return None
    return out


@dataclass(frozen=True)
class IdLookup:
    """The register ids' hashes, sorted, and the register row of each: a lookup of many ids
    by binary search. Built once per register version (the register cache keeps it), where
    pandas' hash table of the ids as Python objects would be rebuilt in every process.

    Attributes:
        hashes: :func:`id_hashes` of the register ids in ascending order, all distinct, (N,).
        rows: register row of every hash, shape (N,), int32 below 2**31 rows (half
            the memory of int64 per register individual), else int64.
    """

    hashes: npt.NDArray[np.uint64]
    rows: npt.NDArray[np.int32] | IntArray

    @classmethod
    def of(cls, ids: npt.ArrayLike) -> IdLookup | None:
        """The lookup of ``ids``; None when they cannot be hashed or two hashes collide
        (then ids are looked up by pandas)."""
        hashes = id_hashes(ids)
        if hashes is None:
            return None
        order = np.argsort(hashes, kind="stable")
        ordered = hashes[order]
        if ordered.size > 1 and bool((ordered[1:] == ordered[:-1]).any()):
            return None
        return cls(ordered, order.astype(np.int32) if order.size < 2**31 else order.astype(np.int64))

    def find(
        self, ids: pd.Index | npt.NDArray[np.object_], wanted: pd.Series | pd.Index | npt.NDArray[np.object_]
    ) -> IntArray | None:
        """The position in ``ids`` (the values this lookup was built of, shape (N,)) of every
        ``wanted`` value, -1 where absent, shape (M,); None when ``wanted`` cannot be hashed.

        Exact: a hash found counts only where ``ids`` holds the same value at that position
        (equal values have equal hashes, and the lookup's hashes are distinct), so a wrong
        lookup can make a value look absent but never point at another one. Only the found
        positions of ``ids`` are read: an Index of Arrow strings is not turned into one
        Python object per id; where both sides are Arrow strings (a
        column as read and the register's ids) they are compared in Arrow, not as objects.

        Nothing is kept between calls: a caller that needs an answer twice keeps it (a
        snapshot's ids are looked up once, when it is read, for its coding and its suite)."""
        import pandas as pd

        hashes = id_hashes(wanted)
        if hashes is None:
            return None
        if not self.hashes.size:
            return np.full(hashes.size, -1, dtype=np.int64)
        # the queries sorted first: a binary search of sorted queries walks the hashes in
        # order, which keeps the memory accesses local
        order = np.argsort(hashes)
        at = np.empty(hashes.size, dtype=np.int64)
        at[order] = np.minimum(np.searchsorted(self.hashes, hashes[order]), self.hashes.size - 1)
        rows = np.where(self.hashes[at] == hashes, self.rows[at].astype(np.int64), -1)
        hit = np.flatnonzero(rows >= 0)
        at_hit = ids.take(rows[hit]) if isinstance(ids, pd.Index) else ids[rows[hit]]
        wanted_hit = wanted.take(hit) if isinstance(wanted, pd.Series | pd.Index) else wanted[hit]
        rows[hit[~_same_values(at_hit, wanted_hit)]] = -1
        return rows


def _arrow_text(values: Any) -> pa.Array | pa.ChunkedArray | None:
    """The values' own Arrow strings, without nulls; None for anything else (object arrays,
    numbers, values with missing entries)."""
    import pandas as pd
    import pyarrow as pa

    if not isinstance(values, pd.Index | pd.Series) or not hasattr(values.array, "__arrow_array__"):
        return None
    arr = pa.array(values.array)
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)) or arr.null_count:
        return None
    return arr


def _same_values(a: Any, b: Any) -> npt.NDArray[np.bool_]:
    """``a[i] == b[i]`` for every i, as Python compares the values, shape (n,): in Arrow
    when both sides are Arrow strings (the same answer for text), else as objects."""
    import pyarrow as pa
    import pyarrow.compute as pc

    left, right = _arrow_text(a), _arrow_text(b)
    if left is not None and right is not None:
        return np.asarray(pc.equal(left.cast(pa.large_string()), right.cast(pa.large_string())), dtype=bool)
    return np.asarray(np.asarray(a, dtype=object) == np.asarray(b, dtype=object), dtype=bool)
