"""Inputs that were accepted silently and are now refused in one line, nothing published and
the state unchanged: last period's snapshot sent again for the next period, a period label
with spaces, and a Parquet float column (docs/commands.md, docs/configuration.md)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from helpers import cli, make_workspace, snapshot, state_of

from serialpub.config import load_config
from serialpub.errors import InputError
from serialpub.workflow import orchestration
from serialpub.workflow.publisher import Publisher
from state.store import StateStore, open_engine


def _store(root: Path) -> StateStore:
    return StateStore(open_engine(load_config(root).database_url))


def test_last_periods_snapshot_sent_again_is_refused(published_once: Path) -> None:
    before = state_of(published_once)
    again = published_once / "landing-copy" / "snapshot-0002.csv"
    again.parent.mkdir()
    again.write_bytes(snapshot(published_once, 1).read_bytes())  # named for the next period
    result = cli("release", "--config", published_once, "--snapshot", again)
    assert result.returncode == 2, result.stdout + result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line == (
        f"serialpub: error: {again}: this snapshot is byte for byte the one release 1 (period '0001') published; "
        "give this period's snapshot, or --allow-repeated-snapshot if the data truly did not change (recorded)"
    )
    assert state_of(published_once) == before


@pytest.mark.slow
def test_a_repeated_snapshot_is_published_when_allowed_and_recorded(published_once: Path) -> None:
    again = published_once / "snapshot-0002.csv"
    again.write_bytes(snapshot(published_once, 1).read_bytes())
    result = cli("release", "--config", published_once, "--snapshot", again, "--allow-repeated-snapshot")
    assert result.returncode == 0, result.stdout + result.stderr
    [first, second] = _store(published_once).published("clinic")
    assert second.period == "0002" and second.params.repeats_snapshot_of == [1]
    assert "repeats_snapshot_of" not in first.params.record()


@pytest.mark.slow
def test_a_snapshot_that_is_new_is_not_marked(published_once: Path) -> None:
    Publisher(load_config(published_once)).publish(snapshot(published_once, 2))
    assert "repeats_snapshot_of" not in _store(published_once).published("clinic")[-1].params.record()


@pytest.mark.parametrize("period", ["0002 ", " 0002", "0002\t", "0002\n", "00 02", "0002\u00a0"])
def test_a_period_with_spaces_is_refused_not_trimmed(published_once: Path, period: str) -> None:
    before = state_of(published_once)
    result = cli("release", "--config", published_once, "--snapshot", snapshot(published_once, 2), "--period", period)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"period {period!r} is malformed" in result.stderr
    with pytest.raises(InputError, match="is malformed"):
        orchestration.ingest(published_once, {"period": period})
    assert state_of(published_once) == before


def _parquet_snapshot(root: Path, age: pd.Series) -> Path:
    frame = pd.read_csv(snapshot(root, 1), dtype=str, keep_default_na=False)
    frame["age"] = age(frame["age"])
    path = root / "snapshot-0001.parquet"
    frame.to_parquet(path, index=False)
    return path


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_parquet_float_column_is_refused_even_with_whole_values(tmp_path: Path, dtype: str) -> None:
    """25.0 used to be read as the leaf '25'."""
    root = make_workspace(tmp_path / "ws")
    path = _parquet_snapshot(root, lambda ages: ages.astype(dtype))
    before = state_of(root)
    with pytest.raises(InputError) as err:
        Publisher(load_config(root)).publish(path)
    message = str(err.value)
    kind = "double" if dtype == "float64" else "float"
    assert message == (
        f"{path}: column 'age' of the snapshot is stored as {kind} (a float, e.g. 25.0); store whole numbers "
        "as an integer type and other values as text"
    )
    assert state_of(root) == before


def test_a_parquet_integer_column_is_still_read(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    path = _parquet_snapshot(root, lambda ages: ages.astype("int64"))
    assert Publisher(load_config(root)).publish(path).seq == 1


def test_a_parquet_float_register_is_refused(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws", register="register.parquet")
    frame = pd.read_csv(root / "register.csv", dtype=str, keep_default_na=False)
    frame["age"] = frame["age"].astype(float)
    frame.to_parquet(root / "register.parquet", index=False)
    with pytest.raises(InputError, match=r"register\.parquet: column 'age' of the population register is stored as"):
        Publisher(load_config(root)).publish(snapshot(root, 1))
