"""Messages of the command line (docs/commands.md, exit codes): each failure below is one
line of at most 300 characters that names the file, row or setting and the fix, and
never says the next command recovers when it would not. Each test runs the failure's old
trigger on the small clinic workspace (``helpers.make_workspace``)."""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from helpers import Result, cli, make_workspace, snapshot, state_of

from serialpub.config import load_config
from serialpub.errors import InputError
from serialpub.io import signing
from serialpub.workflow.publisher import Publisher

MAX_LINE = 300


def _one_line(result: Result, code: int) -> str:
    """The single line a failed command printed, checked: its exit code, no traceback,
    at most MAX_LINE characters."""
    assert result.returncode == code, result.stderr[:2000]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[:2000]
    assert len(lines[0]) <= MAX_LINE, f"{len(lines[0])} characters: {lines[0][:2000]}"
    return lines[0]


def _release_2(root: Path, path: Path | None = None, **kwargs: object) -> Result:
    return cli("release", "--config", root, "--snapshot", path or snapshot(root, 2), "--period", "0002", **kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# values from the inputs


@pytest.mark.slow
@pytest.mark.parametrize(("column", "size"), [("disease", 5_000_000), ("id", 1_000_000)])
def test_a_huge_cell_is_quoted_short(published_once: Path, tmp_path: Path, column: str, size: int) -> None:
    """A huge sensitive value gave a message twice its size (quoted by the suite and the
    spelling hint), a huge id one as large: every value is quoted shortened (anonymizer.quoting)."""
    before = state_of(published_once)
    lines = snapshot(published_once, 2).read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[1].split(",")
    cells[header.index(column)] = "x" * size
    lines[1] = ",".join(cells)
    bad = tmp_path / "snapshot-0002.csv"
    bad.write_text("\n".join(lines) + "\n")
    result = _release_2(published_once, bad)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    # the message, then one line per failed expectation (docs/commands.md): each short
    assert lines[0].startswith(f"serialpub: error: {bad}: the snapshot failed its input checks")
    assert len(lines) == 2 and all(len(line) <= MAX_LINE for line in lines), [len(x) for x in lines]
    assert "xxxxxxxxxx…xxxxxxxxxx" in lines[1] and "line(s) [2]" in lines[1]
    assert state_of(published_once) == before


def test_a_row_with_an_extra_field_names_its_line(published_once: Path, tmp_path: Path) -> None:
    lines = snapshot(published_once, 2).read_text().splitlines()
    lines[3] += ",extra"
    bad = tmp_path / "snapshot-0002.csv"
    bad.write_text("\n".join(lines) + "\n")
    line = _one_line(_release_2(published_once, bad), 2)
    assert line.startswith(f"serialpub: error: {bad}, line 4: 6 field(s), the header has 5 ("), line
    assert "remove the extra field" in line


def test_a_long_row_with_an_extra_field_is_quoted_short(published_once: Path, tmp_path: Path) -> None:
    lines = snapshot(published_once, 2).read_text().splitlines()
    lines[5] += "," + "y" * 1_000_000
    bad = tmp_path / "snapshot-0002.csv"
    bad.write_text("\n".join(lines) + "\n")
    assert f"{bad}, line 6: 6 field(s)" in _one_line(_release_2(published_once, bad), 2)


def test_a_folder_given_as_the_snapshot_is_bad_input(published_once: Path) -> None:
    """It exited 4, 'the next command recovers': nothing was wrong with the environment."""
    before = state_of(published_once)
    folder = published_once / "snapshots"
    line = _one_line(_release_2(published_once, folder), 2)
    assert line == (
        f"serialpub: error: {folder}: is a folder, not a snapshot file; give the file itself "
        "(a .csv or .parquet file in it)"
    )
    assert state_of(published_once) == before


# ---------------------------------------------------------------------------------------
# the state database's disk and folder


def _sqlite_refuses(monkeypatch: pytest.MonkeyPatch, reason: str) -> None:
    """SQLite refuses every new connection with ``reason``, as it does on a full disk
    (it cannot create the -wal and -shm files) or a read-only folder."""

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise sqlite3.OperationalError(reason)

    monkeypatch.setattr(sqlite3.dbapi2, "connect", refuse)


@pytest.mark.slow
def test_a_full_disk_at_opening_names_the_disk(published_once: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It exited 2 with 'cannot reach the state database ...: disk I/O error'."""
    before = state_of(published_once)
    database = published_once / "state.sqlite"
    real_usage = shutil.disk_usage

    def full(path: object) -> object:
        usage = real_usage(path)  # type: ignore[arg-type]
        return type(usage)(usage.total, usage.total, 0)

    with monkeypatch.context() as patch:
        _sqlite_refuses(patch, "disk I/O error")
        patch.setattr(shutil, "disk_usage", full)
        line = _one_line(_release_2(published_once), 4)
    assert line == (
        f"serialpub: error: the state database {database} cannot be opened: its disk is full (0 bytes free; "
        "SQLite: disk I/O error); free space there and rerun; nothing was changed"
    )
    with monkeypatch.context() as patch:  # SQLite's own word for it
        _sqlite_refuses(patch, "database or disk is full")
        assert "its disk is full (" in _one_line(_release_2(published_once), 4)
    assert state_of(published_once) == before
    assert _release_2(published_once).returncode == 0  # space again


def test_a_read_only_folder_names_the_database(published_once: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It exited 2 with 'cannot reach the state database ...: unable to open database file'."""
    database = published_once / "state.sqlite"
    real_access = os.access

    def read_only(path: object, mode: int, **kwargs: object) -> bool:
        if mode & os.W_OK and Path(str(path)) in (published_once, database):
            return False  # as access(2) answers EROFS on a read-only file system, even to root
        return real_access(path, mode, **kwargs)  # type: ignore[arg-type]

    with monkeypatch.context() as patch:
        _sqlite_refuses(patch, "unable to open database file")
        patch.setattr(os, "access", read_only)
        line = _one_line(_release_2(published_once), 4)
    assert line == (
        f"serialpub: error: the state database {database} cannot be opened for writing: its folder is read-only; "
        "make it writable or set database_url / SERIALPUB_DATABASE_URL elsewhere; nothing was changed"
    )
    assert "recovers" not in line


def test_a_read_only_database_mid_run_does_not_promise_recovery(published_once: Path) -> None:
    database = published_once / "state.sqlite"
    read_only = f"sqlite:///file:{database}?mode=ro&uri=true"
    line = _one_line(_release_2(published_once, env={"SERIALPUB_DATABASE_URL": read_only}), 4)
    assert "attempt to write a readonly database" in line and "make it writable" in line
    assert "recovers" not in line


# ---------------------------------------------------------------------------------------
# sign-off


@pytest.mark.slow
def test_publish_after_one_of_two_approvals_asks_for_another_approver(tmp_path: Path) -> None:
    """It suggested '--by NAME', which may only repeat the caller's own account."""
    root = make_workspace(
        tmp_path / "ws",
        sign_off={"auto_approve": False, "approvers": ["erin", "frank"], "required_approvals": 2},
    )
    assert cli("release", "--config", root, "--snapshot", snapshot(root, 1), login="pat").returncode == 0
    assert cli("approve", "--config", root, "--release", "1", login="erin").returncode == 0
    line = _one_line(cli("publish", "--config", root, "--release", "1"), 2)
    assert line == (
        "serialpub: error: release 1 of 'clinic' has 1 of 2 required approvals ('erin'; sign_off.required_approvals); "
        "another approver must approve it under their own account: serialpub approve --release 1"
    )
    line = _one_line(cli("publish", "--config", root, "--release", "1", login="frank"), 2)
    assert "--by" not in line


@pytest.mark.slow
def test_a_second_approval_of_an_approved_release_is_refused_not_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An approved release waits for the key holder; a second 'approve' with a new comment
    returned the first sign-off and dropped the comment without a word."""
    root = make_workspace(tmp_path / "ws", sign_off={"auto_approve": False, "approvers": ["erin", "frank"]})
    Publisher(load_config(root)).prepare(snapshot(root, 1), owner="awaiting sign-off")

    def unreadable(path: Path) -> None:
        raise InputError(f"{path}: this account cannot read the signing key")

    monkeypatch.setattr(signing, "load_private_key", unreadable)
    first = cli("approve", "--config", root, "--release", "1", "--comment", "looks right", login="erin")
    assert first.returncode == 0 and "not published yet" in first.stdout, first.stderr
    for login, comment in (("frank", "agreed"), ("erin", "on second thought, see ticket 7")):
        line = _one_line(cli("approve", "--config", root, "--release", "1", "--comment", comment, login=login), 2)
        assert line == (
            "serialpub: error: release 1 of 'clinic' is approved already (by erin); this approval and its comment "
            "were not recorded. Publish it: serialpub publish --release 1; or, to decide again, reject it "
            "(serialpub reject --release 1 --comment WHY) and prepare it again"
        )
    # the same command again (a retry) is no new decision
    again = cli("approve", "--config", root, "--release", "1", "--comment", "looks right", login="erin")
    assert again.returncode == 0, again.stderr
    store = Publisher(load_config(root)).store
    assert [(s.approver, s.comment) for s in store.sign_offs("clinic", 1)] == [("erin", "looks right")]


# ---------------------------------------------------------------------------------------
# kept hierarchy versions


def test_an_altered_hierarchy_version_is_named(published_once: Path) -> None:
    """An edited hierarchy-versions/ file was read as the release's hierarchy: the audit
    and 'state verify' reported its groups, not the file."""
    age = published_once / "hierarchies" / "age.csv"
    age.write_text(age.read_text() + "30;[30, 34];*\n")  # today's hierarchy is another version
    [kept] = (published_once / "hierarchy-versions" / "age").glob("*.csv")
    kept.write_text("".join(f"{a};[{a // 2 * 2}, {a // 2 * 2 + 1}];*\n" for a in range(20, 30)))
    line = _one_line(cli("audit", published_once), 2)
    assert line.startswith(f"serialpub: error: {kept}: altered: its sha256 (") and "restore it from a backup" in line
    verify = cli("state", "verify", "--config", published_once)
    assert verify.returncode == 1
    assert f"{kept}: altered: its sha256" in verify.stdout.replace("\n", "")
    out = published_once.parent / "public"
    assert f"{kept}: altered" in _one_line(cli("public-copy", "--config", published_once, "--out", out), 2)


def test_the_full_disk_errno_at_run_time_still_recovers(published_once: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run-time path keeps its promise, which is true there (tests/test_error_exits.py)."""
    from serialpub.io import release_files

    def full(name: str) -> None:
        if name == "after_data_written":
            raise OSError(errno.ENOSPC, "No space left on device", "staging/data.parquet")

    with monkeypatch.context() as patch:
        patch.setattr(release_files, "checkpoint", full)
        line = _one_line(_release_2(published_once), 4)
    assert "No space left on device" in line and "the next command recovers" in line
