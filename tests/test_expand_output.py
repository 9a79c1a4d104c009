"""``serialpub expand`` writes all of its tables or none (serialpub.analysis.querying.write_expanded):
a full disk or a release whose table cannot be made leaves no partial table in ``--out``,
and the one-line message says what was left there."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from helpers import cli

from serialpub.analysis import querying
from serialpub.errors import InputError


def _everything(folder: Path) -> list[str]:
    """Every entry under ``folder``, hidden temporary files included."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _full_disk_at(call: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``call``-th table written gets half its bytes onto the disk, then ENOSPC."""
    real = pd.DataFrame.to_parquet
    calls = {"n": 0}

    def writer(frame: pd.DataFrame, path: Any, *args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] < call:
            return real(frame, path, *args, **kwargs)
        Path(path).write_bytes(b"PAR1" + b"\0" * 100)  # a partial table, as a full disk leaves one
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pd.DataFrame, "to_parquet", writer)


def _label_error_at(number: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Release ``number``'s table cannot be made: a label the reader cannot place."""
    real = querying.expand

    def expand(release: Any) -> pd.DataFrame:
        if release.number == number:
            raise InputError(f"{release.folder / 'data.parquet'}: 'zip=6500x' is not a label of zipcode's hierarchy")
        return real(release)

    monkeypatch.setattr(querying, "expand", expand)


@pytest.mark.parametrize(
    ("fault", "code", "said"),
    [
        (lambda mp: _full_disk_at(2, mp), 4, "release-0002.parquet: No space left on device; nothing was written to"),
        (lambda mp: _full_disk_at(1, mp), 4, "release-0001.parquet: No space left on device; nothing was written to"),
        (lambda mp: _label_error_at(2, mp), 2, "is not a label of zipcode's hierarchy; nothing was written to"),
    ],
    ids=["full disk at release 2", "full disk at release 1", "label error at release 2"],
)
def test_a_failed_expand_leaves_no_table_and_says_so(
    public_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: Any, code: int, said: str
) -> None:
    """Before: release-0001.parquet stayed in --out (and a half-written release-0002.parquet
    on a full disk), while the message said nothing half-done was published."""
    fault(monkeypatch)
    out = tmp_path / "new" / "tables"
    done = cli("expand", public_copy, "--out", out)
    assert _everything(tmp_path) == []  # no table, whole or partial, and not the folders it made
    assert done.returncode == code, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert f"{said} {out}" in line, line


def test_a_failed_expand_keeps_the_tables_of_an_earlier_run(
    public_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "tables"
    assert cli("expand", public_copy, "--out", out).returncode == 0
    before = {name: (out / name).read_bytes() for name in _everything(out)}
    assert sorted(before) == ["release-0001.parquet", "release-0002.parquet"]
    (out / "notes.txt").write_text("mine\n")
    _full_disk_at(2, monkeypatch)
    done = cli("expand", public_copy, "--out", out)
    assert done.returncode == 4 and f"nothing was written to {out}" in done.stderr, done.stderr
    assert _everything(out) == sorted([*before, "notes.txt"])  # no temporary table left beside them
    assert all((out / name).read_bytes() == data for name, data in before.items())


def test_a_failed_rename_names_the_tables_it_replaced(
    public_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every table is written before the first is renamed: only a rename that fails after
    others leaves some, each whole, and the message names them."""
    out = tmp_path / "tables"
    (out / "release-0002.parquet").mkdir(parents=True)  # something a table cannot replace
    done = cli("expand", public_copy, "--out", out)
    assert done.returncode == 4, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert f"release-0002.parquet: Is a directory; 1 complete table(s) now in {out} (release-0001.parquet)" in line
    assert _everything(out) == ["release-0001.parquet", "release-0002.parquet"]
    assert len(pd.read_parquet(out / "release-0001.parquet")) > 0
