"""Shared fixtures: the bundled Adult table is read once per test session;
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
from hypothesis import HealthCheck, settings

# The test processes (pytest and its xdist workers) keep the bytecode of the project and of
# the test modules (pytest's assertion rewriting included) in the checkout's __pycache__
# folders (ignored by git), even where PYTHONDONTWRITEBYTECODE is set: otherwise every worker
# of every run compiles and rewrites them all again. Set before the project is imported
# (nothing above imports it).
sys.dont_write_bytecode = False

# No property test may fail on timing: hypothesis' per-example deadline and its too-slow
# health check both trip when the machine is busy (two xdist workers on two cores, or a
# shared CI host), and a failure then says nothing about the code. A test that sets its own
# settings keeps them and inherits these for the rest.
settings.register_profile("serialpub", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("serialpub")


@pytest.fixture(autouse=True, scope="session")
def _verdict_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The data user's verification verdicts (serialpub.io.verdict_cache) go to a folder of
    the session, never the user's own cache folder."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SERIALPUB_CACHE_DIR", str(tmp_path_factory.mktemp("verdicts")))
        yield


@pytest.fixture(scope="session")
def adult_table() -> pd.DataFrame:
    """The cleaned Adult table. Tests must not modify it (copy first)."""
    from serialpub.datasets import adult

    return adult.load_adult()


# ---------------------------------------------------------------------------------------
# state databases: every state test runs on SQLite and on PostgreSQL


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
    from helpers import make_workspace

    from serialpub.config import DATABASE_ENV

    monkeypatch.setenv(DATABASE_ENV, state_url)
    monkeypatch.delenv("SERIALPUB_CRASH_AT", raising=False)
    return make_workspace(tmp_path / "ws")


def run_cli(*args: str | Path, url: str, cwd: Path, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m serialpub.cli ARGS`` in a fresh process on the state database ``url``."""
    return subprocess.run(
        [sys.executable, "-m", "serialpub.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=cli_env(url, crash_at),
        timeout=600,
    )


#: bytecode cache of the test subprocesses, outside the repository and the virtualenv:
#: with PYTHONDONTWRITEBYTECODE set and no .pyc in the venv, each would compile its
#: imports afresh, which would cost more than the command itself
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
    from helpers import make_workspace, snapshot

    from serialpub.config import DATABASE_ENV, load_config
    from serialpub.workflow.publisher import Publisher

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


@pytest.fixture(scope="session")
def adult_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo workspace of the Adult data with three snapshots in its landing zone (the
    Airflow tests copy it: ``helpers.airflow_workspace``)."""
    import shutil

    from helpers import PERIODS

    from serialpub.demo import create_workspace, snapshots

    ws = create_workspace(tmp_path_factory.mktemp("template") / "ws", rounds=20)
    (ws.root / "landing").mkdir()
    for snap, period in zip(snapshots(ws)[:3], PERIODS, strict=True):
        shutil.copyfile(snap, ws.root / "landing" / f"snapshot-{period}.csv")
    shutil.rmtree(ws.root / "snapshots")
    return ws.root


class PublishedWorkspaces:
    """Small clinic workspaces with their first releases published, built once per
    (settings, releases) and handed out as private copies: publishing costs seconds, a
    copy milliseconds. A copy is relocated: the paths its state records (each release's
    snapshot, folder and staging folder) name the copy's own files, so a test may change
    or delete them. The workspace with n releases is that with n - 1 copied and one more
    published (as a test that publishes on a copy does), so each release of a settings is
    published once per worker whatever order the counts are asked in."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.templates: dict[tuple[Any, ...], Path] = {}

    def _template(self, releases: int, overrides: dict[str, Any]) -> Path:
        from helpers import make_workspace, snapshot

        from serialpub.config import DATABASE_ENV, load_config
        from serialpub.workflow.publisher import Publisher

        settings = tuple(sorted((k, repr(v)) for k, v in overrides.items()))
        key = (releases, settings)
        if key not in self.templates:
            before = self._template(releases - 1, overrides) if releases else None
            root = self.base / f"template-{len(self.templates)}" / "ws"
            if before is None:
                make_workspace(root, **overrides)
            else:
                self._relocated_copy(before, root)
                with pytest.MonkeyPatch.context() as mp:
                    mp.delenv(DATABASE_ENV, raising=False)
                    mp.delenv("SERIALPUB_CRASH_AT", raising=False)
                    publisher = Publisher(load_config(root))
                    publisher.publish(snapshot(root, releases))
                    publisher.store.engine.dispose()
            self.templates[key] = root
        return self.templates[key]

    @staticmethod
    def _relocated_copy(template: Path, target: Path) -> None:
        import shutil

        from sqlalchemy import create_engine
        from sqlalchemy.orm import Session

        from state.models import Release

        shutil.copytree(template, target)
        if not (target / "state.sqlite").exists():  # nothing published yet
            return
        old, new = str(template), str(target)
        engine = create_engine(f"sqlite:///{target / 'state.sqlite'}")
        with Session(engine) as session, session.begin():
            for rel in session.query(Release).all():
                rel.params = {k: v.replace(old, new) if isinstance(v, str) else v for k, v in rel.params.items()}
                rel.directory = rel.directory.replace(old, new) if rel.directory else rel.directory
                rel.staging = rel.staging.replace(old, new) if rel.staging else rel.staging
        engine.dispose()

    def copy(self, target: Path, releases: int = 1, **overrides: Any) -> Path:
        """A private copy at ``target`` of the workspace ``make_workspace(**overrides)``
        with releases 1..``releases`` published (SQLite state inside it)."""
        self._relocated_copy(self._template(releases, overrides), target)
        return target


@pytest.fixture(scope="session")
def published_workspaces(tmp_path_factory: pytest.TempPathFactory) -> PublishedWorkspaces:
    """The factory of published clinic workspaces (:class:`PublishedWorkspaces`)."""
    return PublishedWorkspaces(tmp_path_factory.mktemp("published"))


@pytest.fixture(scope="session")
def public_copy(tmp_path_factory: pytest.TempPathFactory, published_workspaces: PublishedWorkspaces) -> Path:
    """A public copy (with the register) of the clinic workspace after two releases, one per
    worker: the data user's tests only read it; a test that edits a copy takes :func:`fresh`."""
    from helpers import cli

    base = tmp_path_factory.mktemp("public-copy")
    ws = published_workspaces.copy(base / "ws", releases=2)
    out = base / "public"
    done = cli("public-copy", "--config", ws, "--out", out, "--with-register")
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture
def fresh(public_copy: Path, tmp_path: Path) -> Path:
    """A fresh folder holding only the public copy (as received)."""
    import shutil

    target = tmp_path / "received"
    shutil.copytree(public_copy, target)
    return target


@pytest.fixture
def published_once(tmp_path: Path, published_workspaces: PublishedWorkspaces) -> Path:
    """The small clinic workspace with release 1 (period 0001) published: a private copy,
    state and release store included."""
    return published_workspaces.copy(tmp_path / "ws")


#: the modules that take longest on the 2-core machine, longest first (pytest --durations):
#: handed out first, the two workers end together instead of one running a long module alone
#: at the end while the other idles. Any module may be missing or added; the rest keep their order.
LONGEST_FIRST = (
    "test_airflow_standalone.py",
    "test_crash.py",
    "test_dags.py",
    "test_import.py",
    "test_race.py",
    "test_sign_off.py",
    "test_plan.py",
    "test_adversary_oracle.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each module keeps its order


#: an unmarked test longer than this is named at the end of the run: the inner loop
#: (``-m "not slow"``) stays quick only while its tests do (docs/testing.md)
UNMARKED_LIMIT_SECONDS = 3.0


class UnmarkedSlowTests:
    """Names, after the run, the tests not marked slow whose call took over
    :data:`UNMARKED_LIMIT_SECONDS`. A report, not a failure: a busy machine must not fail
    the suite."""

    def __init__(self) -> None:
        self.found: list[tuple[float, str]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # on the xdist controller too: the workers' reports are replayed there
        if report.when == "call" and "slow" not in report.keywords and report.duration > UNMARKED_LIMIT_SECONDS:
            self.found.append((report.duration, report.nodeid))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.found:
            terminalreporter.section(f"tests not marked slow that took over {UNMARKED_LIMIT_SECONDS:g} s")
            for seconds, nodeid in sorted(self.found, reverse=True):
                terminalreporter.write_line(f"{seconds:5.1f} s  {nodeid}  (mark it slow, or make it quicker)")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(UnmarkedSlowTests(), "serialpub-unmarked-slow")


def pytest_unconfigure(config: pytest.Config) -> None:
    # an xdist worker may leave without running atexit handlers: stop the fork server of
    # tests/forked_cli.py here, so the commands it ran count in the worker's CPU time
    if "forked_cli" in sys.modules:
        sys.modules["forked_cli"].stop_server()
