"""Failures of the environment under a run (issue 18, item 5): a full disk, a state database
that refuses writes, an internal error. Each ends in one line on standard error with the
exit code of docs/commands.md, the traceback only with ``--debug``; nothing half-done is
published, and the next command recovers and publishes."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from helpers import cli, snapshot, state_of

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


def test_a_full_disk_is_one_line_and_the_rerun_publishes(
    published_once: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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
        "release", "--config", published_once, "--snapshot", snapshot(published_once, 2), "--period", "0002",
        env={"SERIALPUB_DATABASE_URL": read_only},
    )
    assert result.returncode == 4, result.stderr
    assert "the state database refused the operation: attempt to write a readonly database" in _one_line(result.stderr)
    assert state_of(published_once) == before


def _broken(*_args: object, **_kwargs: object) -> None:
    raise RuntimeError("a bug")


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
        cli("release", "--config", published_once, "--snapshot", snapshot(published_once, 2),
            env={"SERIALPUB_DEBUG": "1"})  # fmt: skip
