"""Shared fixtures: the bundled Adult table is read once per test session (about 2 s);
state databases on SQLite and PostgreSQL, the small workspace on them, a reference run."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from serialpub.datasets import adult


@pytest.fixture(scope="session")
def adult_table() -> pd.DataFrame:
    """The cleaned Adult table. Tests must not modify it (copy first)."""
    return adult.load_adult()


# ---------------------------------------------------------------------------------------
# state databases (issue 4): every state test runs on SQLite and on PostgreSQL


PG_URL_ENV = "SERIALPUB_TEST_POSTGRES_URL"
PG_DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
ENGINES = ("sqlite", "postgresql")


def postgres_url() -> str:
    return os.environ.get(PG_URL_ENV) or PG_DEFAULT_URL


@functools.cache
def postgres_unavailable() -> str | None:
    """None if the test PostgreSQL server answers, else why its tests are skipped."""
    from sqlalchemy import create_engine

    from state.engine import masked

    url = postgres_url()
    try:
        engine = create_engine(url, connect_args={"connect_timeout": 5})
        with engine.connect():
            pass
        engine.dispose()
    except Exception as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return f"PostgreSQL tests skipped: cannot connect to {masked(url)} ({reason}); set {PG_URL_ENV} to use another"
    return None


class StateDatabases:
    """Makes empty state databases: SQLite files under ``folder``, or one PostgreSQL schema
    per database (``search_path`` set in the URL) that :meth:`close` drops with CASCADE."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.schemas: list[str] = []

    def new(self, kind: str) -> str:
        if kind == "sqlite":
            self.folder.mkdir(parents=True, exist_ok=True)
            return f"sqlite:///{self.folder / f'state-{uuid.uuid4().hex[:8]}.sqlite'}"
        assert kind == "postgresql", kind
        reason = postgres_unavailable()
        if reason:
            pytest.skip(reason)
        from sqlalchemy import create_engine, text
        from sqlalchemy.engine import make_url

        schema = f"sp_test_{os.getpid()}_{uuid.uuid4().hex[:10]}"
        engine = create_engine(postgres_url())
        with engine.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        engine.dispose()
        self.schemas.append(schema)
        # application_name tags the connections so close() can end those left in pools
        url = make_url(postgres_url()).update_query_dict(
            {"options": f"-csearch_path={schema}", "application_name": schema}
        )
        return url.render_as_string(hide_password=False)

    def close(self) -> None:
        if not self.schemas:
            return
        from sqlalchemy import create_engine, text

        engine = create_engine(postgres_url())
        with engine.begin() as conn:
            for schema in self.schemas:
                conn.execute(
                    text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = :s"),
                    {"s": schema},
                )
                conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        engine.dispose()
        self.schemas.clear()


@pytest.fixture(scope="session")
def state_databases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StateDatabases]:
    """Factory of fresh state databases for module- or session-scoped fixtures."""
    dbs = StateDatabases(tmp_path_factory.mktemp("state-db"))
    yield dbs
    dbs.close()


@pytest.fixture(params=ENGINES)
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """URL of an empty state database, on SQLite and on PostgreSQL (own schema)."""
    dbs = StateDatabases(tmp_path / "db")
    try:
        yield dbs.new(request.param)
    finally:
        dbs.close()


@pytest.fixture
def state_ws(tmp_path: Path, state_url: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The small clinic workspace of test_pipeline, its state in ``state_url``
    (``SERIALPUB_DATABASE_URL`` is set for this test)."""
    from test_pipeline import make_workspace

    from serialpub.config import DATABASE_ENV

    monkeypatch.setenv(DATABASE_ENV, state_url)
    monkeypatch.delenv("SERIALPUB_CRASH_AT", raising=False)
    return make_workspace(tmp_path / "ws")


def run_cli(*args: str | Path, url: str, cwd: Path, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m serialpub.cli ARGS`` in a fresh process on the state database ``url``."""
    return subprocess.run(
        [sys.executable, "-m", "serialpub.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd,
        env=cli_env(url, crash_at), timeout=120,
    )


#: bytecode cache of the test subprocesses, outside the repository and the virtualenv:
#: with PYTHONDONTWRITEBYTECODE set and no .pyc in the venv, each would compile its
#: imports afresh (about 2.4 s instead of 0.9 s per command on the CI machine)
PYCACHE = Path(tempfile.gettempdir()) / f"serialpub-test-pycache-{os.getuid()}"


def cli_env(url: str, crash_at: str | None = None) -> dict[str, str]:
    env = {**os.environ, "COLUMNS": "200", "SERIALPUB_DATABASE_URL": url, "PYTHONPYCACHEPREFIX": str(PYCACHE)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("SERIALPUB_CRASH_AT", None)
    if crash_at:
        env["SERIALPUB_CRASH_AT"] = crash_at
    return env


def freeze_stats(stats: Any) -> Any:
    """Comparable content of ``StateStore.latest_statistics`` (None or two tables)."""
    if stats is None:
        return None
    return tuple((str(t.schema), t.to_pylist()) for t in stats)


@pytest.fixture(scope="session")
def reference_series(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """An uninterrupted in-process run of the small workspace's three releases (SQLite):
    ``data[k]`` the bytes of release k's data.parquet, ``stats[k]`` the frozen statistics
    file after release k (``stats[0]`` None)."""
    from test_pipeline import make_workspace, snapshot

    from serialpub.config import DATABASE_ENV, load_config
    from serialpub.pipeline import Publisher

    root = make_workspace(tmp_path_factory.mktemp("reference") / "ws")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(DATABASE_ENV, f"sqlite:///{root / 'state.sqlite'}")
        mp.delenv("SERIALPUB_CRASH_AT", raising=False)
        publisher = Publisher(load_config(root))
        data, stats = {}, {0: None}
        for k in (1, 2, 3):
            outcome = publisher.publish(snapshot(root, k))
            data[k] = (outcome.directory / "data.parquet").read_bytes()
            stats[k] = freeze_stats(publisher.store.latest_statistics("clinic"))
    return {"data": data, "stats": stats}
