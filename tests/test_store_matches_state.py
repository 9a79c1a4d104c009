"""No release is ever lost (docs/operating.md, "When the release store and the state
disagree"): a ``release-NNNN`` entry the state database does not record (a stray folder or
link, a forged appended release, a state database restored from an older backup) is
refused before anything is recorded, with one line naming it; a rename that fails after
the commit keeps the staged copy, says so truthfully, and no later command removes it."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from pathlib import Path

import pytest
from helpers import cli, snapshot, state_of

from serialpub.config import load_config
from serialpub.io import release_files
from serialpub.workflow import publishing
from serialpub.workflow.publisher import Publisher
from state.store import StateError


def _folder(root: Path, n: int) -> Path:
    return root / "releases" / "clinic" / release_files.release_name(n)


def _stray_folder(path: Path) -> None:
    path.mkdir()
    (path / "notes.txt").write_text("not a release\n")


def _stray_link(path: Path) -> None:
    target = path.parent.parent / "elsewhere"
    target.mkdir()
    path.symlink_to(target, target_is_directory=True)


def _backup(source: Path, target: Path) -> None:
    """Copy a SQLite database as ``sqlite3 .backup`` does (docs/operating.md, "Backups")."""
    with contextlib.closing(sqlite3.connect(source)) as src, contextlib.closing(sqlite3.connect(target)) as dst:
        src.backup(dst)


def _one_line(stderr: str, root: Path) -> str:
    """The one line of an error, at most 300 characters with the workspace's path as ``ws``."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and len(lines[0].replace(str(root), "ws")) <= 300, stderr
    return lines[0]


@pytest.mark.parametrize("stray", [_stray_folder, _stray_link], ids=["folder", "symlink"])
def test_a_stray_entry_at_the_next_release_is_refused_before_anything_is_recorded(
    published_once: Path, stray: object
) -> None:
    """Before: the release was committed, the rename failed (exit 4, "nothing half-done is
    published"), and the next command deleted the staged files."""
    stray(_folder(published_once, 2))  # type: ignore[operator]
    before = state_of(published_once)
    result = cli("release", "--config", published_once, "--snapshot", snapshot(published_once, 2))
    assert result.returncode == 2, result.stderr
    line = _one_line(result.stderr, published_once)
    assert f"{_folder(published_once, 2)}: not a release the state database records (it records release 1)" in line
    assert "move this out of it; nothing was published" in line
    assert state_of(published_once) == before  # no draft, no staging folder


@pytest.mark.slow
def test_a_state_restored_from_an_older_backup_is_named(tmp_path: Path, published_workspaces: object) -> None:
    """The release store holds releases 1-3, the state database only 1-2 (restored from the
    backup taken after release 2): the next release would be a second release 3."""
    root = published_workspaces.copy(tmp_path / "ws", releases=2)  # type: ignore[attr-defined]
    _backup(root / "state.sqlite", tmp_path / "backup.sqlite")
    assert cli("release", "--config", root, "--snapshot", snapshot(root, 3)).returncode == 0
    _backup(tmp_path / "backup.sqlite", root / "state.sqlite")  # restored
    result = cli("release", "--config", root, "--snapshot", snapshot(root, 3))
    assert result.returncode == 2, result.stderr
    line = _one_line(result.stderr, root)
    assert f"{_folder(root, 3)}: not a release the state database records (it records releases 1-2)" in line
    assert "restore the state database that matches the release store" in line
    assert [r[0] for r in state_of(root)[0]] == [1, 2]


@pytest.mark.slow
def test_a_stray_entry_made_during_the_sign_off_keeps_the_release_approved(published_once: Path) -> None:
    """The folder appears after the draft: the publication refuses before its commit, the
    release stays approved and staged, and publishes once the folder is moved away."""
    publisher = Publisher(load_config(published_once))
    draft = publisher.prepare(snapshot(published_once, 2))
    publisher.auto_approve(draft.seq)
    _stray_folder(_folder(published_once, 2))
    with pytest.raises(StateError, match="not a release the state database records") as err:
        publisher.finish(draft.seq)
    assert "nothing was published" in str(err.value)
    current = publisher.store.open_release("clinic")
    assert current is not None and current.status == "approved"
    assert [r.seq for r in publisher.store.published("clinic")] == [1]
    shutil.move(_folder(published_once, 2), published_once / "moved-away")
    assert publisher.finish(draft.seq) == _folder(published_once, 2)
    assert (_folder(published_once, 2) / "data.parquet").is_file()


@pytest.mark.slow
def test_a_rename_that_fails_after_the_commit_keeps_the_only_copy(
    published_once: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder appears between the commit and the rename: the message says where the
    release's files are, no later command deletes them, and moving the folder away lets
    'serialpub publish' finish the publication."""
    real = publishing.checkpoint

    def race(name: str) -> None:
        if name == "after_commit":
            _stray_folder(_folder(published_once, 2))
        real(name)

    publisher = Publisher(load_config(published_once))
    draft = publisher.prepare(snapshot(published_once, 2))
    publisher.auto_approve(draft.seq)
    staged = published_once / "releases" / "clinic" / release_files.staging_name(2, draft.id)
    with monkeypatch.context() as mp:
        mp.setattr(publishing, "checkpoint", race)
        with pytest.raises(StateError) as err:
            publisher.finish(draft.seq)
    message = str(err.value)
    assert f"release 2 is published in the state database and its files are kept in {staged.name}" in message
    assert "serialpub publish --release 2" in message and "nothing half-done" not in message
    assert staged.is_dir()

    for command in (["publish", "--release", "2"], ["release", "--snapshot", str(snapshot(published_once, 3))]):
        result = cli(*command, "--config", published_once)
        assert result.returncode == 2, result.stderr
        line = _one_line(result.stderr, published_once)
        assert f"{_folder(published_once, 2)}: not release 2 as published" in line, line
        assert staged.is_dir() and (staged / "data.parquet").is_file()  # never removed: the only copy

    shutil.move(_folder(published_once, 2), published_once / "moved-away")
    result = cli("publish", "--release", "2", "--config", published_once)
    assert result.returncode == 0, result.stderr
    assert not staged.exists() and (_folder(published_once, 2) / "manifest.json").is_file()
    assert cli("state", "verify", "--config", published_once).returncode == 0
