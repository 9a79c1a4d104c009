"""Failures of the environment under a run: a full disk, a state database
that refuses writes, an internal error. Each ends in one line on standard error with the
exit code of docs/commands.md, the traceback only with ``--debug``; nothing half-done is
published, and the next command recovers and publishes."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import cli, make_workspace, snapshot, state_of

from serialpub.io import release_files
from serialpub.workflow import drafting


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def _release_2(root: Path, *options: str) -> tuple[int, str]:
    result = cli(*options, "release", "--config", root, "--snapshot", snapshot(root, 2), "--period", "0002")
    return result.returncode, result.stderr


def _disk_full(name: str) -> None:
    if name == "after_data_written":
        raise OSError(errno.ENOSPC, "No space left on device", "staging/data.parquet")


@pytest.mark.slow
def test_a_full_disk_is_one_line_and_the_rerun_publishes(published_once: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = state_of(published_once)
    with monkeypatch.context() as patch:
        patch.setattr(release_files, "checkpoint", _disk_full)
        code, err = _release_2(published_once)
    assert code == 4
    line = _one_line(err)
    assert line.startswith("serialpub: error: staging/data.parquet: No space left on device"), line
    assert "nothing half-done is published" in line
    assert state_of(published_once)[0] == before[0]  # nothing published
    code, err = _release_2(published_once)  # space again: recovery, then release 2
    assert code == 0, err
    assert [r[1] for r in state_of(published_once)[0]] == ["0001", "0002"]


def test_a_read_only_state_database_is_one_line(published_once: Path) -> None:
    before = state_of(published_once)
    database = published_once / "state.sqlite"
    read_only = f"sqlite:///file:{database}?mode=ro&uri=true"
    result = cli(
        "release",
        "--config",
        published_once,
        "--snapshot",
        snapshot(published_once, 2),
        "--period",
        "0002",
        env={"SERIALPUB_DATABASE_URL": read_only},
    )
    assert result.returncode == 4, result.stderr
    assert "the state database refused the operation: attempt to write a readonly database" in _one_line(result.stderr)
    assert state_of(published_once) == before


def _broken(*_args: object, **_kwargs: object) -> None:
    raise RuntimeError("a bug")


@pytest.mark.slow
def test_an_internal_error_is_one_line_and_debug_shows_the_traceback(
    published_once: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = state_of(published_once)
    monkeypatch.setattr(drafting, "published_table", _broken)
    code, err = _release_2(published_once)
    assert code == 1
    assert _one_line(err) == (
        "serialpub: internal error: RuntimeError: a bug; rerun with --debug for the traceback and report it"
    )
    assert state_of(published_once)[0] == before[0]
    with pytest.raises(RuntimeError, match="a bug"):  # --debug: the exception itself, traceback and all
        _release_2(published_once, "--debug")


def test_serialpub_debug_in_the_environment_also_shows_the_traceback(
    published_once: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(drafting, "published_table", _broken)
    with pytest.raises(RuntimeError, match="a bug"):
        cli(
            "release",
            "--config",
            published_once,
            "--snapshot",
            snapshot(published_once, 2),
            env={"SERIALPUB_DEBUG": "1"},
        )


#: ``serialpub ARGS`` in a new process whose state server goes away (``ROLE`` loses LOGIN and
#: its connections are ended) once the release's data is staged, before anything is committed
_LOSE_SERVER = """
import sys
from sqlalchemy import create_engine, text
from serialpub import cli
from serialpub.io import release_files

ADMIN_URL, ROLE = sys.argv[1:3]

def server_gone(name):
    if name == "after_data_written":
        admin = create_engine(ADMIN_URL)
        with admin.begin() as conn:
            conn.execute(text(f'ALTER ROLE "{ROLE}" NOLOGIN'))
            conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = :r"),
                         {"r": ROLE})
        admin.dispose()

release_files.checkpoint = server_gone
sys.argv = ["serialpub", *sys.argv[3:]]
cli.main()
"""


@pytest.mark.slow
def test_postgresql_lost_mid_run_is_one_line_and_the_rerun_publishes(tmp_path: Path) -> None:
    """The state's PostgreSQL server goes away after the release was staged and before its
    commit. Ending the run's connections alone is not enough (the pool reconnects), so its
    login role also loses LOGIN. Both runs are processes of their own, as a person's are:
    the rerun rolls back the draft of a process that no longer exists."""
    from conftest import StateDatabases, postgres_url
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from state.store import StateStore, open_engine

    dbs = StateDatabases(tmp_path / "db")
    admin = create_engine(postgres_url())
    schema_url = make_url(dbs.new("postgresql"))
    role = schema_url.query["application_name"]  # the schema's name, unique to this test
    url = schema_url.set(username=role).render_as_string(hide_password=False)

    def as_admin(statement: str) -> None:
        with admin.begin() as conn:
            conn.execute(text(statement))

    def release_2(*prefix: str) -> subprocess.CompletedProcess[str]:
        args = ["release", "--config", str(root), "--snapshot", str(snapshot(root, 2)), "--period", "0002"]
        return subprocess.run(
            [*prefix, *args],
            env={**os.environ, "SERIALPUB_DATABASE_URL": url},
            capture_output=True,
            text=True,
            timeout=600,
        )

    as_admin(f'CREATE ROLE "{role}" LOGIN')
    as_admin(f'GRANT USAGE, CREATE ON SCHEMA "{role}" TO "{role}"')
    try:
        root = make_workspace(tmp_path / "ws")
        env = {"SERIALPUB_DATABASE_URL": url}
        first = cli("release", "--config", root, "--snapshot", snapshot(root, 1), "--period", "0001", env=env)
        assert first.returncode == 0, first.stderr

        lost = release_2(sys.executable, "-c", _LOSE_SERVER, postgres_url(), role)
        assert lost.returncode == 4, lost.stderr
        line = _one_line(lost.stderr)
        assert line.startswith("serialpub: error: the state database "), line
        assert f'role "{role}" is not permitted to log in' in line and "nothing half-done is published" in line

        as_admin(f'ALTER ROLE "{role}" LOGIN')  # the server is back
        store = StateStore(open_engine(url))
        assert [r.period for r in store.published("clinic")] == ["0001"]
        assert not (root / "releases" / "clinic" / "release-0002").exists()
        again = release_2(str(Path(sys.executable).with_name("serialpub")))
        assert again.returncode == 0, again.stderr
        assert [r.period for r in store.published("clinic")] == ["0001", "0002"]
        assert cli("state", "verify", "--config", root, env=env).returncode == 0
        store.engine.dispose()
    finally:
        as_admin(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'")
        dbs.close()
        as_admin(f'DROP ROLE IF EXISTS "{role}"')
        admin.dispose()
