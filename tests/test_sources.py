"""Inputs from where they live: the register and the snapshots read from
Parquet files and from SQL tables and queries (PostgreSQL for real, SQLite through
SQLAlchemy), published exactly as from CSV files, audited, and refused in one line when
wrong (serialpub.io.sources)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import PublishedWorkspaces, StateDatabases, run_cli
from helpers import make_workspace, read_config, snapshot, state_of, write_config

from serialpub.analysis.audit import audit_workspace
from serialpub.analysis.verify import verify_state
from serialpub.config import DATABASE_ENV, load_config
from serialpub.errors import InputChecksFailed, InputError
from serialpub.io.inputs import read_csv
from serialpub.io.sources import InputSource, parse_source
from serialpub.workflow.public_copy import write_public_copy
from serialpub.workflow.publisher import Publisher


@pytest.fixture(autouse=True)
def _own_state(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DATABASE_ENV, raising=False)
    monkeypatch.delenv("SERIALPUB_CRASH_AT", raising=False)


def _csv(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def _publish_all(root: Path, snapshots: list[str | Path]) -> list[bytes]:
    publisher = Publisher(load_config(root))
    out = [(publisher.publish(s).directory / "data.parquet").read_bytes() for s in snapshots]
    publisher.store.engine.dispose()
    return out


@pytest.fixture(scope="module")
def csv_releases(tmp_path_factory: pytest.TempPathFactory, published_workspaces: PublishedWorkspaces) -> list[bytes]:
    """data.parquet of releases 1..3 of the clinic workspace published from its CSV files."""
    root = published_workspaces.copy(tmp_path_factory.mktemp("csv") / "ws", releases=3)
    return [(root / "releases" / "clinic" / f"release-{t:04d}" / "data.parquet").read_bytes() for t in (1, 2, 3)]


@pytest.mark.slow
def test_parquet_register_and_snapshots_publish_as_csv_does(tmp_path: Path, csv_releases: list[bytes]) -> None:
    root = make_workspace(tmp_path / "ws", register="register.parquet")
    _csv(root / "register.csv").to_parquet(root / "register.parquet", index=False)
    (root / "register.csv").unlink()  # nothing may read the CSV any more
    parquet = []
    for t in (1, 2, 3):
        frame = _csv(snapshot(root, t))
        frame["age"] = frame["age"].astype(int)  # a numeric column is read as its decimal text
        parquet.append(snapshot(root, t).with_suffix(".parquet"))
        frame.to_parquet(parquet[-1], index=False)
        snapshot(root, t).unlink()
    assert _publish_all(root, list(parquet)) == csv_releases
    result = audit_workspace(root)  # reads the register from the version kept under registers/
    assert result.ok and result.findings == [], (result.findings, result.max_p)


def test_a_parquet_snapshot_names_the_line_of_a_bad_value(published_once: Path) -> None:
    frame = _csv(snapshot(published_once, 2))
    frame.loc[4, "zipcode"] = "99999"
    path = published_once / "snapshot-0002.parquet"
    frame.to_parquet(path, index=False)
    before = state_of(published_once)
    with pytest.raises(InputChecksFailed) as err:
        Publisher(load_config(published_once)).publish(path)
    text = "\n".join([str(err.value), *err.value.failures])
    assert str(path) in text and "99999" in text and "line(s) [6]" in text, text  # row 4 = line 6 (header line 1)
    assert state_of(published_once) == before


def test_source_strings_parse_and_refuse(tmp_path: Path) -> None:
    assert parse_source("r.csv", tmp_path, None, "register") == InputSource("csv", path=tmp_path / "r.csv")
    assert parse_source("/a/r.parquet", tmp_path, None, "x").kind == "parquet"
    sql = parse_source("sql:snapshot-2025-H1", tmp_path, "sqlite://", "--snapshot")
    assert (sql.kind, sql.relation, sql.name, sql.is_query) == ("sql", "snapshot-2025-H1", "snapshot-2025-H1", False)
    query = parse_source("sql:SELECT * FROM s WHERE period = 'H1'", tmp_path, "sqlite://", "--snapshot")
    assert query.is_query and query.name == ""
    with pytest.raises(InputError, match="input_database_url"):
        parse_source("sql:persons", tmp_path, None, "register")
    with pytest.raises(InputError, match="neither a table name"):
        parse_source("sql:persons; DROP TABLE x", tmp_path, "sqlite://", "register")
    with pytest.raises(InputError, match=r"neither a \.csv nor a \.parquet"):
        parse_source("register.xlsx", tmp_path, None, "register")


def test_a_sql_register_without_a_database_url_is_refused_at_load(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws", register="sql:persons")
    with pytest.raises(InputError, match="input_database_url"):
        load_config(root)


# ---------------------------------------------------------------------------------------
# SQL: PostgreSQL (the COPY path) and SQLite (SQLAlchemy and pandas)


def _load_tables(url: str, root: Path) -> None:
    """The workspace's register as table ``persons`` and snapshot t as table ``snapshot-000t``."""
    from sqlalchemy import create_engine

    engine = create_engine(url)
    with engine.begin() as conn:
        register = _csv(root / "register.csv")
        register["age"] = register["age"].astype(int)  # an integer column, as a database would hold it
        register.sample(frac=1.0, random_state=1).to_sql("persons", conn, index=False)  # stored out of order
        for t in (1, 2, 3):
            _csv(snapshot(root, t)).to_sql(f"snapshot-{t:04d}", conn, index=False)
    engine.dispose()


@pytest.fixture
def pg_url(tmp_path: Path) -> Iterator[str]:
    """A fresh PostgreSQL schema as the input database (search_path set in the URL; skipped
    without the server), made and dropped as the state tests' databases are."""
    dbs = StateDatabases(tmp_path / "inputs-db")
    try:
        yield dbs.new("postgresql")
    finally:
        dbs.close()


def _sql_workspace(root: Path, url: str, **overrides: Any) -> Path:
    make_workspace(root, register="sql:persons", input_database_url=url, **overrides)
    _load_tables(url, root)
    return root


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["postgresql", "sqlite"])
def test_a_sql_register_and_snapshots_publish_as_csv_does(
    engine: str, tmp_path: Path, csv_releases: list[bytes], request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("pg_url") if engine == "postgresql" else f"sqlite:///{tmp_path / 'inputs.sqlite'}"
    root = _sql_workspace(tmp_path / "ws", url)
    (root / "register.csv").unlink()
    releases = _publish_all(root, ["sql:snapshot-0001", "sql:snapshot-0002", "sql:snapshot-0003"])
    assert releases == csv_releases
    result = audit_workspace(root)
    assert result.ok and result.findings == [], (result.findings, result.max_p)
    manifests = sorted((root / "releases" / "clinic").glob("release-*/manifest.json"))
    assert len(manifests) == 3
    report = verify_state(load_config(root))  # rebuilt from the register the database holds
    assert report.ok, [(d.kind, d.examples) for d in report.differences]
    # the public copy carries the register in its canonical form, and audits PASS from it
    copy = write_public_copy(Publisher(load_config(root)).series, tmp_path / "public", with_register=True)
    assert copy.releases == [1, 2, 3]
    assert audit_workspace(tmp_path / "public").ok


@pytest.mark.slow
def test_a_postgresql_snapshot_query_with_period_through_the_command_line(
    tmp_path: Path, pg_url: str, csv_releases: list[bytes]
) -> None:
    root = _sql_workspace(tmp_path / "ws", pg_url)
    url = f"sqlite:///{root / 'state.sqlite'}"
    proc = run_cli("release", "--config", root, "--snapshot", 'sql:SELECT * FROM "snapshot-0001"', url=url, cwd=root)
    assert proc.returncode == 2 and "give --period" in proc.stderr, proc.stderr  # a query has no name to tell it
    assert "Traceback" not in proc.stderr
    proc = run_cli(
        "release",
        "--config",
        root,
        "--snapshot",
        'sql:SELECT * FROM "snapshot-0001"',
        "--period",
        "0001",
        url=url,
        cwd=root,
    )
    assert proc.returncode == 0, proc.stderr
    assert (root / "releases" / "clinic" / "release-0001" / "data.parquet").read_bytes() == csv_releases[0]


def test_a_bad_postgresql_register_row_is_named_and_nothing_moves(tmp_path: Path, pg_url: str) -> None:
    from sqlalchemy import create_engine, text

    root = _sql_workspace(tmp_path / "ws", pg_url)
    engine = create_engine(pg_url)
    with engine.begin() as conn:  # the id sorting first, so line 2 of the canonical form
        conn.execute(text("INSERT INTO persons (id, sex, zipcode, age) VALUES ('a000', 'X', '13053', 25)"))
    engine.dispose()
    before = state_of(root)
    with pytest.raises(InputChecksFailed) as err:
        Publisher(load_config(root)).publish("sql:snapshot-0001")
    text_ = "\n".join([str(err.value), *err.value.failures])
    assert "table persons (input database)" in text_ and "'X'" in text_ and "line(s) [2]" in text_, text_
    assert state_of(root) == before


@pytest.mark.slow
def test_a_missing_table_is_one_line(tmp_path: Path, pg_url: str) -> None:
    root = _sql_workspace(tmp_path / "ws", pg_url)
    config = read_config(root)
    config["register"] = "sql:nobody"
    write_config(root, config)
    proc = run_cli(
        "release", "--config", root, "--snapshot", "sql:snapshot-0001", url=f"sqlite:///{root / 's.db'}", cwd=root
    )
    assert proc.returncode == 2, proc.stderr
    assert "table nobody (input database)" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_large_file_is_read_into_one_chunk_per_column(tmp_path: Path) -> None:
    # pyarrow's reader returns one chunk per block; filtering a chunked column concatenates
    # the chunks on every call, which Great Expectations does three times per expectation
    rows = 150_000  # several of the reader's blocks
    path = tmp_path / "big.csv"
    pd.DataFrame({"id": [f"p{i:07d}" for i in range(rows)], "age": ["37"] * rows}).to_csv(path, index=False)
    table = read_csv(path, "snapshot")
    assert len(table) == rows and table["id"].iloc[-1] == f"p{rows - 1:07d}"
    assert [table[c].array.__arrow_array__().num_chunks for c in table.columns] == [1, 1]


def test_a_csv_register_is_hashed_as_parsed_not_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CSV register is hashed as it is read and again as it is parsed, never held whole
    (a national register need not fit in memory): the parse gives the table read_csv gives from
    the bytes, and a register that changed between the two reads is refused in one line,
    with nothing published."""
    import hashlib

    from serialpub.io import release_files

    root = make_workspace(tmp_path / "ws")
    register = root / "register.csv"
    data = register.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    qis = load_config(root).config.quasi_identifiers
    from_bytes = read_csv(register, "population register", data, dictionary=qis)
    assert read_csv(register, "population register", dictionary=qis, sha256=sha).equals(from_bytes)
    with pytest.raises(InputError, match=r"register\.csv: the population register changed while it was being read"):
        read_csv(register, "population register", dictionary=qis, sha256="0" * 64)

    hashed = release_files.sha256_file

    def hashed_then_edited(path: Path) -> str:  # the register edited just after it was hashed
        out = hashed(path)
        if path == register:
            lines = data.splitlines(keepends=True)
            register.write_bytes(b"".join([lines[0], lines[2], lines[1], *lines[3:]]))
        return out

    monkeypatch.setattr(release_files, "sha256_file", hashed_then_edited)
    publisher = Publisher(load_config(root))
    # named by the parse, before any draft (storing the version would also notice it)
    with pytest.raises(InputError, match=r"register\.csv: the population register changed while it was being read"):
        publisher.publish(snapshot(root, 1))
    assert publisher.register_reader._content is None and publisher.register_reader._bytes is None  # never held
    assert state_of(root)[0] == []


# ---------------------------------------------------------------------------------------
# a column stored as a float: its text is not what was written (serialpub/io/sources.py)


def _sql_table(url: str, ddl: str, rows: str) -> None:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text(ddl))
        conn.execute(text(rows))
    engine.dispose()


@pytest.mark.parametrize("engine", ["postgresql", "sqlite"])
def test_a_float_column_in_the_input_database_is_refused_naming_it(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A diagnosis code 250.10 held as a float reads back as '250.1', another code's
    spelling; an age 25.0 as the leaf '25'. Refused as a Parquet float column is."""
    url = request.getfixturevalue("pg_url") if engine == "postgresql" else f"sqlite:///{tmp_path / 'in.sqlite'}"
    kind = "double precision" if engine == "postgresql" else "real"
    _sql_table(url, f"CREATE TABLE visits (id text, code {kind})", "INSERT INTO visits VALUES ('1', 250.10)")
    source = parse_source("sql:visits", tmp_path, url, "--snapshot")
    with pytest.raises(InputError) as err:
        source.read_bytes("snapshot", "id")
    assert "column 'code' of the snapshot is stored as" in str(err.value) and "(a float, e.g. 25.0)" in str(err.value)
    assert "table visits (input database)" in str(err.value)


def test_an_integer_column_with_an_empty_value_reads_as_integers(tmp_path: Path) -> None:
    """Read through pandas, a NULL made the column's values floats ('25.0')."""
    url = f"sqlite:///{tmp_path / 'in.sqlite'}"
    _sql_table(
        url,
        "CREATE TABLE people (id text, age integer, sex text)",
        "INSERT INTO people VALUES ('2', NULL, 'F'), ('1', 25, 'M')",
    )
    text_ = parse_source("sql:people", tmp_path, url, "register").read_bytes("register", "id").decode()
    assert text_.splitlines() == ['"id","age","sex"', '"1","25","M"', '"2","","F"'], text_
