"""Reading and checking the population register and the periodic snapshots.

Every problem raises :class:`serialpub.errors.InputError` naming the file, the line
(header = line 1) or the column, and the fix. Checks are vectorized; only the first
offending row is named.
"""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import BinaryIO

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv

from anonymizer.arrays import CodedRows, IdLookup, first_positions
from anonymizer.hierarchy import Hierarchy
from serialpub.errors import InputError, quoted
from serialpub.io.hierarchies import spelling_hint
from serialpub.io.sources import not_a_file
from serialpub.io.versions import RegisterVersions

#: a column read as a dictionary: int32 codes over its distinct text
_DICTIONARY = pa.dictionary(pa.int32(), pa.string())
#: bytes of the CSV reader's blocks, each parsed by one thread into one chunk per column
_BLOCK = 16 << 20


class _HashingReader:
    """A binary file read through, every byte read added to a sha256."""

    def __init__(self, f: BinaryIO) -> None:
        self.f, self.digest, self.closed = f, hashlib.sha256(), False

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n)
        self.digest.update(data)
        return data

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True  # the caller closes the file itself


def read_csv(
    path: Path | str,
    what: str,
    content: bytes | None = None,
    dictionary: Collection[str] = (),
    sha256: str | None = None,
) -> pd.DataFrame:
    """Read a CSV file with every column as text (empty cells stay empty strings);
    ``content``: the file's bytes when they come from elsewhere (a kept register version,
    :mod:`serialpub.io.versions`), ``path`` then only names it in messages.

    ``sha256``: read from the file, the bytes parsed must hash to this (what a manifest
    records, taken when the file was read before; the file is parsed as it is read, not
    held whole: a national register need not fit in memory). InputError when they do not: the file
    changed since.

    ``dictionary``: columns read as pandas Categoricals of that text (Arrow dictionary
    arrays: an int32 code per row and each distinct value once). A register's QI columns
    have a few dozen values each: an int32 per row and column instead of a string each, and
    coding them needs no hashing.

    Uses pyarrow's multithreaded reader: a 5,000,000-row register reads in seconds.
    """
    try:
        if content is None:
            with Path(path).open(encoding="utf-8-sig", newline="") as f:  # as pyarrow, skip a byte-order mark
                header = next(csv.reader([f.readline()]), [])
        else:
            first = content.split(b"\n", 1)[0].decode("utf-8-sig")
            header = next(csv.reader([first]), []) if content else []
    except FileNotFoundError:
        raise InputError(f"{path}: {what} file not found") from None
    except IsADirectoryError:
        raise InputError(not_a_file(str(path), what)) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: the {what} is not UTF-8 text ({exc.reason}); save it as UTF-8") from None
    if not header:
        raise InputError(f"{path}: the {what} file is empty; it needs a header row and data rows")
    if len(set(header)) != len(header):
        raise InputError(f"{path}, line 1: a column name appears twice in the header")
    hashing: _HashingReader | None = None
    try:
        if content is not None:
            source: object = pa.BufferReader(content)
        elif sha256 is not None:
            source = hashing = _HashingReader(Path(path).open("rb"))
        else:
            source = Path(path)
        table = pa_csv.read_csv(
            source,
            # blocks larger than pyarrow's default: a national register parses into far fewer
            # chunks per column, whose dictionaries are unified and chunks combined after
            # (benchmarks/bench_csv_blocks.py)
            read_options=pa_csv.ReadOptions(block_size=_BLOCK),
            convert_options=pa_csv.ConvertOptions(
                column_types={c: _DICTIONARY if c in dictionary else pa.string() for c in header},
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
        if "UTF8" in str(exc):  # bytes that came without a file (read_bytes of a source)
            raise InputError(f"{path}: the {what} is not UTF-8 text ({quoted(str(exc))}); save it as UTF-8") from None
        row = _first_invalid_row(path, content, header) if "columns, got" in str(exc) else None
        if row is not None:
            fix = (
                "quote a value that holds a comma, or remove the extra field(s)"
                if (row.actual_columns > row.expected_columns)
                else "add the missing field(s)"
            )
            raise InputError(
                f"{path}, line {row.number}: {row.actual_columns} field(s), the header has {row.expected_columns} "
                f"({quoted(row.text)}); {fix}"
            ) from None
        raise InputError(f"{path}: the {what} is not a readable UTF-8 CSV file ({quoted(str(exc))})") from None
    finally:
        if hashing is not None:
            hashing.f.close()
    if hashing is not None and hashing.digest.hexdigest() != sha256:
        raise InputError(f"{path}: the {what} changed while it was being read; run the release again")
    # one chunk per column: the multithreaded reader returns one per block, and pyarrow's
    # take and filter on a chunked column concatenate the chunks on every call; each Great
    # Expectations map expectation filters the whole table three times, so combining once
    # is cheaper. Column by column, each chunked column let go once combined: the table is
    # held once plus one column, not twice
    if dictionary:  # each block has its own dictionary: one per column, for one chunk
        table = table.unify_dictionaries()
    names, columns = table.column_names, []
    while table.num_columns:
        columns.append(table.column(0).combine_chunks())
        table = table.remove_column(0)
    df = pa.table(columns, names=names).to_pandas()
    del columns
    if df.empty:
        raise InputError(f"{path}: the {what} has a header but no rows")
    return df


def _first_invalid_row(path: Path | str, content: bytes | None, header: list[str]) -> pa_csv.InvalidRow | None:
    """The first row whose field count differs from the header's, with its file line
    (header = line 1), or None when none does (the file changed since). Called after the
    multithreaded reader refused the file: it knows the row's text, not its line, which
    only a reader in one thread counts (this second, serial pass costs what a read does,
    and only when the file is refused)."""
    found: list[pa_csv.InvalidRow] = []

    def keep(row: pa_csv.InvalidRow) -> str:
        found.append(row)
        return "error"  # stop at the first: only it is named

    try:
        pa_csv.read_csv(
            pa.BufferReader(content) if content is not None else Path(path),
            read_options=pa_csv.ReadOptions(use_threads=False, block_size=_BLOCK),
            parse_options=pa_csv.ParseOptions(invalid_row_handler=keep),
            convert_options=pa_csv.ConvertOptions(column_types=dict.fromkeys(header, pa.string())),
        )
    except (pa.ArrowInvalid, OSError):
        pass
    return found[0] if found and found[0].number is not None else None


def _line(mask: npt.NDArray[np.bool_]) -> int:
    """File line of the first True row (header is line 1)."""
    return int(np.flatnonzero(mask)[0]) + 2


def _check_ids(
    df: pd.DataFrame, id_column: str, path: Path | str, what: str, rows: npt.NDArray[np.int64] | None = None
) -> None:
    """InputError naming the first line with an empty id, else the first repeating an earlier
    line's id. ``rows``: the register row of every id (-1 where absent), when known."""
    ids = df[id_column]
    empty = (ids.str.strip() == "").to_numpy()
    if empty.any():
        raise InputError(f"{path}, line {_line(empty)}: empty {id_column!r}; every {what} row needs an id")
    if rows is not None and rows.size and rows.min() >= 0:
        # every id has its register row, and the register's ids are unique: two lines share an
        # id iff they share a row, and sorting integers is far cheaper than hashing texts
        ordered = np.sort(rows)
        if not (ordered[1:] == ordered[:-1]).any():
            return
    dup = ids.duplicated().to_numpy()
    if dup.any():
        raise InputError(
            f"{path}, line {_line(dup)}: id {quoted(ids.iloc[int(np.flatnonzero(dup)[0])])} appears twice; "
            f"each individual has at most one row per {what}"
        )


def leaf_codes(df: pd.DataFrame, column: str, hierarchy: Hierarchy, path: Path | str) -> npt.NDArray[np.int64]:
    """Leaf ids of a column's values; InputError naming the line of the first non-leaf."""
    inverse, uniq = pd.factorize(df[column], sort=False)  # hashing: linear in the rows
    known = np.array([hierarchy.has_label(v) and hierarchy.node(v) < hierarchy.n_leaves for v in uniq])
    if not known.all():
        bad = uniq[~known][0]
        line = _line((df[column] == bad).to_numpy())
        raise InputError(
            f"{path}, line {line}, column {column!r}: value {quoted(bad)} is not a leaf of the hierarchy "
            f"of {column!r}; correct the value or add it to hierarchies/{column}.csv"
        )
    codes = np.array([hierarchy.node(v) for v in uniq], dtype=np.int64)
    return codes[inverse]


def arrow_ids(ids: pd.Index) -> pa.Array:
    """The ids as an Arrow string array: the Index's own Arrow strings when it has them
    (no Python object per id, as NumPy would make), else their text."""
    if isinstance(ids.dtype, pd.StringDtype | pd.ArrowDtype) and hasattr(ids.array, "__arrow_array__"):
        arr = pa.array(ids.array)
        if (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)) and arr.null_count == 0:
            return arr.cast(pa.string())
    return pa.array(ids.to_numpy().astype(str))


def text_index(values: pa.Array | pa.ChunkedArray) -> pd.Index:
    """An Index of Arrow strings over ``values`` (text): what :func:`read_csv` gives a
    column, without a Python object per value."""
    return pd.Index(pd.array(values, dtype=pd.ArrowDtype(pa.string())).astype("str"))


@dataclass(frozen=True)
class Register:
    """The population register, integer-coded.

    Attributes:
        ids: individual ids in file order, shape (N,), unique (the register suite checks).
        keys: leaf id per QI, shape (N, d), as :class:`anonymizer.arrays.CodedRows`: the
            code of every individual's QI combination (numbered by first appearance) and
            the combinations' leaf ids, int32 (hierarchies of up to 2**31 leaves). Indexing
            gives leaf ids (``keys[rows]`` shape (k, d), ``keys[rows, a]``).
        lookup: the ids' :class:`IdLookup` when already built (the register cache keeps
            it); built on first use otherwise.
    """

    ids: pd.Index
    keys: CodedRows
    lookup: IdLookup | None = None

    @cached_property
    def id_lookup(self) -> IdLookup | None:
        """The ids' lookup (None: ids that cannot be hashed, or colliding hashes; pandas
        looks them up then)."""
        return self.lookup if self.lookup is not None else IdLookup.of(self.ids)

    def rows_of(self, ids: pd.Series) -> npt.NDArray[np.int64]:
        """The register row of every id, -1 for an id not in the register, shape (len(ids),)
        (:meth:`anonymizer.arrays.IdLookup.find`, or pandas' hash table without a lookup)."""
        lookup = self.id_lookup
        found = None if lookup is None else lookup.find(self.ids, ids if isinstance(ids, pd.Series) else pd.Series(ids))
        return np.asarray(self.ids.get_indexer(pd.Index(ids)), dtype=np.int64) if found is None else found


def load_register(path: Path, id_column: str, qis: list[str], hierarchies: dict[str, Hierarchy]) -> Register:
    """Read the register: the id column and every QI, each value a hierarchy leaf."""
    return register_from_table(read_csv(path, "population register"), path, id_column, qis, hierarchies)


def load_register_version(
    workspace_root: Path, sha: str, id_column: str, qis: list[str], hierarchies: dict[str, Hierarchy]
) -> Register:
    """The register version a release used, as kept in ``registers/<sha>.parquet``
    (:mod:`serialpub.io.versions`; docs/design.md section 10).

    Raises:
        InputError: the version is missing or altered, or does not read with these hierarchies.
    """
    kept = RegisterVersions(workspace_root)
    path = kept.path(sha)
    table = read_csv(path, "population register", kept.read_bytes(sha))
    return register_from_table(table, path, id_column, qis, hierarchies)


def register_from_table(
    df: pd.DataFrame,
    path: Path | str,
    id_column: str,
    qis: list[str],
    hierarchies: dict[str, Hierarchy],
    ids_checked: bool = False,
) -> Register:
    """The register from its table as read by :func:`read_csv` (``path`` names it in errors).

    ``ids_checked``: the register suite passed on this very table, so its ids are known to
    be present, non-blank and unique (expectations of :func:`checks.input_suites.register_suite`)
    and are not checked again here (the check was most of the cost of coding a national
    register).
    """
    missing = [c for c in [id_column, *qis] if c not in df.columns]
    if missing:
        raise InputError(
            f"{path}: missing column(s) {', '.join(map(repr, missing))}; the register needs "
            f"{id_column!r} and every quasi-identifier"
        )
    if not ids_checked:
        _check_ids(df, id_column, path, "register")
    # coded column by column, as the code of each individual's QI combination: one int64 per
    # individual where the (N, d) int32 leaf ids took d int32s, and no (N, d) matrix on the way
    keys = CodedRows.of_columns(
        (leaf_codes(df, q, hierarchies[q], path) for q in qis), len(df), [hierarchies[q].n_leaves for q in qis]
    )
    # the column's own array: as text read by read_csv, Arrow strings, no object per id
    return Register(ids=pd.Index(df[id_column].array), keys=keys)


@dataclass(frozen=True)
class Snapshot:
    """One period's records, checked against the register.

    Attributes:
        table: the snapshot as read (QIs and sensitive column as text).
        individual: register row of every record, shape (R,).
        value: sensitive value of every record, shape (R,).
        sensitive: the name of the sensitive column of ``table`` (``value`` as read), if known.
    """

    table: pd.DataFrame
    individual: npt.NDArray[np.int64]
    value: npt.NDArray[np.str_]
    sensitive: str | None = None

    @cached_property
    def value_order(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.str_]]:
        """``(codes, labels)``: the distinct sensitive values sorted as text (as numpy sorts
        ``value``), shape (V,), and the position of every record's value among them, shape
        (R,): ``labels[codes]`` equals ``value``, and codes sort as the values do.

        Hashed from the table's own column when known (Arrow strings: hashing them is far
        cheaper than sorting ``value``'s texts); the labels are ``value``'s own texts.
        """
        column = self.table[self.sensitive] if self.sensitive in self.table.columns else self.value
        found, distinct = pd.factorize(column, use_na_sentinel=False)
        found = np.asarray(found, dtype=np.int64)
        first = first_positions(found, len(distinct))
        # as text, two distinct values may read the same: grouped again on the few labels
        labels, rank = np.unique(self.value[first], return_inverse=True)
        codes = np.asarray(rank, dtype=np.int64).reshape(-1)[found]
        codes.flags.writeable = labels.flags.writeable = False  # shared by every step of a release
        return codes, labels


def snapshot_from_table(
    df: pd.DataFrame,
    path: Path | str,
    id_column: str,
    qis: list[str],
    sensitive: str,
    register: Register,
    hierarchies: dict[str, Hierarchy],
    sensitive_domain: set[str] | None,
    rows: npt.NDArray[np.int64] | None = None,
) -> Snapshot:
    """The checked snapshot from its table as read by :func:`read_csv` (``path`` names it in
    errors). Besides what the snapshot input suite checks, this checks that every record's
    QI values equal the register's for that individual (a check across two files).

    Args:
        rows: the register row of every record, -1 for an id not in the register, shape
            (len(df),), when the caller has looked the ids up (:meth:`Register.rows_of` of
            the id column); looked up here otherwise.
    """
    expected = [id_column, *qis, sensitive]
    missing = [c for c in expected if c not in df.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(map(repr, missing))}; expected {', '.join(expected)}")
    extra = [c for c in df.columns if c not in expected]
    if extra:
        raise InputError(
            f"{path}: unexpected column(s) {', '.join(map(repr, extra))}; a snapshot holds exactly "
            f"{', '.join(expected)} (remove the others so nothing unvetted is published)"
        )
    if rows is None:
        rows = register.rows_of(df[id_column])  # an empty id is absent; _check_ids reports it first
    _check_ids(df, id_column, path, "snapshot", rows)
    absent = rows < 0
    if absent.any():
        raise InputError(
            f"{path}, line {_line(absent)}: individual {quoted(df[id_column].iloc[int(np.flatnonzero(absent)[0])])} "
            "is not in the population register; add them to the register first"
        )
    _check_same_as_register(
        df,
        path,
        id_column,
        qis,
        register,
        hierarchies,
        rows,
        "; the register must hold each individual's current quasi-identifiers",
    )
    # each distinct value looked up once (np.isin would sort every record's text)
    codes, distinct, values = as_text(df[sensitive])
    empty = values == ""
    if empty.any():
        raise InputError(f"{path}, line {_line(empty)}, column {sensitive!r}: empty sensitive value")
    if sensitive_domain is not None:
        unknown = ~pd.Index(distinct).isin(list(sensitive_domain))[codes]
        if unknown.any():
            raise InputError(
                f"{path}, line {_line(unknown)}, column {sensitive!r}: value {quoted(values[unknown][0])} "
                "is not in the "
                f"sensitive domain{spelling_hint(str(values[unknown][0]), sorted(sensitive_domain))}"
            )
    return Snapshot(table=df, individual=rows, value=values, sensitive=sensitive)


def as_text(column: pd.Series) -> tuple[npt.NDArray[np.int64], pd.Index, npt.NDArray[np.str_]]:
    """``column.to_numpy(dtype=str)`` (the third item, shape (R,)), converted once per distinct
    value (converting every record's value was far slower), with the
    factorization it came from: the code of every record (R,) and the distinct values (as
    ``pd.factorize`` with missing values as a value of their own). A column with missing
    values (which fails its input suite) is converted per record: factorize turns None into
    NaN, whose text differs."""
    codes, distinct = pd.factorize(column, use_na_sentinel=False)
    distinct = pd.Index(distinct)
    texts = column.to_numpy(dtype=str) if column.isna().any() else np.asarray(distinct.to_numpy(dtype=str))[codes]
    return np.asarray(codes, dtype=np.int64), distinct, texts


def _check_same_as_register(
    df: pd.DataFrame,
    path: Path | str,
    id_column: str,
    qis: Sequence[str],
    register: Register,
    hierarchies: Mapping[str, Hierarchy],
    rows: npt.NDArray[np.int64],
    fix: str = "",
) -> None:
    """InputError naming the first record whose value of a QI (among those ``df`` has)
    differs from the register's for that individual (register row ``rows``)."""
    for a, q in enumerate(qis):
        if q not in df.columns:
            continue
        differs = leaf_codes(df, q, hierarchies[q], path) != register.keys[rows, a]
        if differs.any():
            i = int(np.flatnonzero(differs)[0])
            raise InputError(
                f"{path}, line {i + 2}, column {q!r}: value {quoted(df[q].iloc[i])} differs from the register's "
                f"{quoted(hierarchies[q].labels[register.keys[rows[i], a]])} for individual "
                f"{quoted(df[id_column].iloc[i])}{fix}"
            )


def present_rows(
    path: Path, id_column: str, qis: Sequence[str], register: Register, hierarchies: Mapping[str, Hierarchy]
) -> npt.NDArray[np.int64]:
    """Register rows of the individuals a snapshot lists (the present individuals), shape (R,).

    Used where candidates are the present individuals (presence dilution, docs/design.md
    section 1): ``serialpub import-release --snapshot`` and ``serialpub state verify``. The
    file is a CSV with the id column; QI columns it also has must agree with the register,
    other columns are ignored.

    Raises:
        InputError: unreadable file, no id column, an empty or repeated id, an id not in the
            register, or a QI value differing from the register's (file, line and value named).
    """
    df = read_csv(path, "snapshot")
    if id_column not in df.columns:
        raise InputError(f"{path}: no {id_column!r} column; the snapshot must list the present individuals' ids")
    ids = df[id_column]
    bad = (ids.str.strip() == "").to_numpy() | ids.duplicated().to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"{path}, line {i + 2}: id {quoted(ids.iloc[i])} is empty or appears twice; list each individual once"
        )
    rows = register.rows_of(ids)
    if (rows < 0).any():
        i = int(np.flatnonzero(rows < 0)[0])
        raise InputError(f"{path}, line {i + 2}: individual {quoted(ids.iloc[i])} is not in the population register")
    _check_same_as_register(df, path, id_column, qis, register, hierarchies, rows)
    return rows
