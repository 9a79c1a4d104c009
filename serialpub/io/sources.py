"""Where a population register or a snapshot is read from (docs/configuration.md, "Inputs").

A *source* is written as one string, in ``serialpub.yaml`` (``register:``) or on the command
line (``--snapshot``):

- ``path/to/file.csv``: a CSV file (UTF-8, header line, one row per individual or record);
- ``path/to/file.parquet``: a Parquet file; every column is read as text (an integer as its
  decimal digits); a floating-point column is refused, since ``25.0`` would silently become
  the value ``25``;
- ``sql:TABLE`` or ``sql:SELECT ...``: a table or a query of the database named by
  ``input_database_url`` (any SQLAlchemy URL), its rows ordered by the id column; a
  floating-point column is refused, as in Parquet.

Every source is read as the bytes of one CSV file, its *canonical form*: a CSV file's own
bytes; for Parquet and SQL a CSV written from the rows (header first, values as text, NULL
as an empty cell). The sha256 a manifest records, the version kept under ``registers/``
(:mod:`serialpub.io.versions`) and the line numbers of every error message all refer to that
form, so a register held in a database is audited and versioned exactly as a file is
(docs/design.md section 10). Line 1 is the header; line n is the (n-1)-th row in the
source's order (SQL: by id).

PostgreSQL is read with ``COPY (...) TO STDOUT (FORMAT csv, HEADER)``, which streams the
canonical form directly (a 5M-row table in seconds); other databases through SQLAlchemy,
row by row, each column read as one Arrow type. A column stored as a floating-point number
is refused on every path (its text is not what was written).
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from serialpub.errors import InputError, quoted

if TYPE_CHECKING:
    import pyarrow as pa

# pyarrow and SQLAlchemy are imported where a source is read: the configuration
# imports this module, and parsing the Airflow DAG file must stay light (docs/airflow.md)

SQL_PREFIX = "sql:"
_QUERY = re.compile(r"^\s*(select|with)\b", re.IGNORECASE)
_TABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class InputSource:
    """One register or snapshot source.

    Attributes:
        kind: ``csv``, ``parquet`` or ``sql``.
        path: the file (csv, parquet); None for sql.
        relation: the table name or the SELECT query (sql); None for files.
        url: the SQLAlchemy URL of the input database (sql); None for files.
    """

    kind: Literal["csv", "parquet", "sql"]
    path: Path | None = None
    relation: str | None = None
    url: str | None = None

    @property
    def is_query(self) -> bool:
        return self.relation is not None and bool(_QUERY.match(self.relation))

    @property
    def label(self) -> str:
        """How error messages name the source (a file path, or the table or query)."""
        if self.path is not None:
            return str(self.path)
        if self.is_query:
            return f"sql:{self.relation} (input database)"
        return f"table {self.relation} (input database)"

    @property
    def record(self) -> str:
        """The text a draft records and validation parses again (:func:`parse_source`)."""
        return str(self.path.resolve()) if self.path is not None else f"{SQL_PREFIX}{self.relation}"

    @property
    def name(self) -> str:
        """File name, or the table's name (whose last ``-`` part can give the period)."""
        if self.path is not None:
            return self.path.name
        return "" if self.is_query else str(self.relation).rsplit(".", 1)[-1]

    def stamp(self) -> object:
        """What tells whether the source changed without reading it: (inode, size, mtime)
        of a file, None for a missing one; a database table cannot tell, so a fresh object
        (never equal: a SQL register is read again by every draft)."""
        if self.path is None:
            return object()
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def exists(self) -> bool:
        return self.path is None or self.path.is_file()

    def read_bytes(self, what: str, id_column: str) -> bytes:
        """The source's canonical CSV form (module docstring).

        Raises:
            InputError: the file is missing or unreadable, or the table or query fails
                (named, with the database's first line of explanation).
        """
        if self.path is None:
            return _sql_csv(self, what, id_column)
        if self.kind == "parquet":
            return _parquet_csv(self.path, what)
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            raise InputError(f"{self.label}: {what} file not found") from None
        except IsADirectoryError:
            raise InputError(not_a_file(self.label, what)) from None


def not_a_file(label: str, what: str) -> str:
    """The message for a folder given where a file is read: bad input, not the environment
    failing, so nothing is recovered and the fix is the argument."""
    return f"{label}: is a folder, not a {what} file; give the file itself (a .csv or .parquet file in it)"


def parse_source(spec: str | Path, base: Path, url: str | None, setting: str) -> InputSource:
    """The source a string names (module docstring); relative paths are taken from ``base``.

    Args:
        setting: where the string was given, for the error message (e.g. ``register`` in
            serialpub.yaml, or ``--snapshot``).

    Raises:
        InputError: a ``sql:`` source without ``input_database_url``, a table name that is
            not a plain identifier, or a file that is neither .csv nor .parquet.
    """
    text = str(spec)
    if text.startswith(SQL_PREFIX):
        relation = text[len(SQL_PREFIX) :].strip()
        if not url:
            raise InputError(
                f"{setting}: {quoted(text)} reads the input database, but serialpub.yaml sets no input_database_url; "
                "add it (a SQLAlchemy URL, e.g. postgresql+psycopg://host/db)"
            )
        if not _QUERY.match(relation) and not _TABLE.match(relation):
            raise InputError(
                f"{setting}: {quoted(relation)} is neither a table name (letters, digits, '_', '.', '-') nor a "
                "SELECT query; write sql:TABLE or sql:SELECT ..."
            )
        return InputSource("sql", relation=relation, url=url)
    path = Path(text)
    path = path if path.is_absolute() else base / path
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return InputSource("parquet", path=path)
    if suffix in (".csv", ""):
        return InputSource("csv", path=path)
    raise InputError(f"{setting}: {path} is neither a .csv nor a .parquet file; give one, or sql:TABLE")


def _to_csv(table: pa.Table) -> bytes:
    """A table's canonical CSV form: every column cast to text, NULL as an empty cell."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pa_csv

    columns = []
    for col in table.columns:
        text = col if pa.types.is_string(col.type) else pc.cast(col, pa.string())
        columns.append(pc.fill_null(text, ""))
    sink = io.BytesIO()
    pa_csv.write_csv(pa.table(columns, names=table.column_names), sink, pa_csv.WriteOptions(quoting_style="needed"))
    return sink.getvalue()


def _parquet_csv(path: Path, what: str) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except FileNotFoundError:
        raise InputError(f"{path}: {what} file not found") from None
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"{path}: the {what} is not a readable Parquet file ({exc})") from None
    for field in table.schema:
        if pa.types.is_floating(field.type):
            raise _float_column(str(path), str(field.name), what, str(field.type))
    try:
        return _to_csv(table)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise InputError(f"{path}: a column of the {what} cannot be read as text ({exc}); store it as text") from None


def _float_column(where: str, column: str, what: str, stored_as: str) -> InputError:
    """The refusal of a column stored as a floating-point number. A float's text is not what
    was written: 25.0 would be read as the leaf '25' and a code 250.10 as '250.1', another
    spelling of another value, while 24.9999999 or 1e+20 are values nobody wrote. Whole
    numbers are stored as integers, the rest as text."""
    return InputError(
        f"{where}: column {column[:60]!r} of the {what} is stored as {stored_as} (a float, e.g. 25.0); store "
        "whole numbers as an integer type and other values as text"
    )


#: PostgreSQL's type oids of ``real`` and ``double precision`` (pg_type)
_PG_FLOATS = {700: "real", 701: "double precision"}


def _select(source: InputSource, quote: str, id_column: str) -> str:
    """The source's rows ordered by the id column, as one SELECT (a table's dotted name
    quoted part by part; a query wrapped as a subquery)."""
    column = quote + id_column.replace(quote, quote * 2) + quote
    if source.is_query:
        return f"SELECT * FROM ({source.relation}) AS serialpub_source ORDER BY {column}"
    table = ".".join(quote + part + quote for part in str(source.relation).split("."))
    return f"SELECT * FROM {table} ORDER BY {column}"


def _sql_csv(source: InputSource, what: str, id_column: str) -> bytes:
    import sqlalchemy as sa

    try:
        engine = sa.create_engine(str(source.url))
    except (sa.exc.ArgumentError, ImportError) as exc:
        raise InputError(
            f"input_database_url: {exc}; give a SQLAlchemy URL, e.g. postgresql+psycopg://host/db"
        ) from None
    failures: tuple[type[Exception], ...] = (sa.exc.SQLAlchemyError, *_driver_errors())
    try:
        with engine.connect() as conn:
            quote = conn.dialect.identifier_preparer.initial_quote
            select = _select(source, quote, id_column)
            if conn.dialect.name == "postgresql":
                raw = conn.connection.dbapi_connection
                out = bytearray()
                with raw.cursor() as cur:  # type: ignore[union-attr]
                    # the columns' types first: COPY writes a float as its shortest text
                    cur.execute(f"SELECT * FROM ({select}) AS serialpub_types LIMIT 0")
                    for column in cur.description or []:
                        if column.type_code in _PG_FLOATS:
                            raise _float_column(source.label, column.name, what, _PG_FLOATS[column.type_code])
                    with cur.copy(f"COPY ({select}) TO STDOUT (FORMAT csv, HEADER true)") as copy:
                        for block in copy:
                            out += block
                return bytes(out)
            result = conn.execute(sa.text(select))
            names, rows = [str(k) for k in result.keys()], result.fetchall()
    except failures as exc:
        first = str(getattr(exc, "orig", exc)).strip().splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"{source.label}: the {what} could not be read from the input database ({first})") from None
    finally:
        engine.dispose()
    return _to_csv(_rows_table(source.label, what, names, rows))


def _rows_table(label: str, what: str, names: list[str], rows: Sequence[Sequence[Any]]) -> pa.Table:
    """A query's rows as a table of one Arrow type per column: an integer column with NULLs
    stays integer (pandas would have made its values floats, 25 read back as '25.0'), and a
    column holding a float is refused (:func:`_float_column`). A column whose values differ
    in type (SQLite stores each value as given) is read as the values' text.

    Raises:
        InputError: a column holds a floating-point value.
    """
    import pyarrow as pa

    columns = list(zip(*rows, strict=True)) if rows else [() for _ in names]
    arrays = []
    for name, values in zip(names, columns, strict=True):
        try:
            array = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            if any(isinstance(v, float) for v in values):
                raise _float_column(label, name, what, "a floating-point number") from None
            array = pa.array([None if v is None else str(v) for v in values], pa.string())
        if pa.types.is_floating(array.type):
            raise _float_column(label, name, what, "a floating-point number")
        arrays.append(array)
    return pa.table(arrays, names=names)


def _driver_errors() -> tuple[type[Exception], ...]:
    """The PostgreSQL driver's errors (the COPY path talks to it directly)."""
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg is a dependency
        return ()
    return (psycopg.Error,)
