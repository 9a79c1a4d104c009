"""The evolving-register simulator (serialpub/evolving.py; docs/design.md section 10)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from serialpub.datasets import adult
from serialpub.errors import InputError
from serialpub.evolving import Evolution, evolve_series
from serialpub.series_files import PERIOD_REGISTERS, write_series
from serialpub.simulate import SeriesSpec

QIS = adult.QUASI_IDENTIFIERS


@pytest.fixture(scope="module")
def base() -> pd.DataFrame:
    return adult.load_adult().iloc[:4000].reset_index(drop=True)


def _evolve(base: pd.DataFrame, seed: int = 0, **kw: object) -> tuple[list[pd.DataFrame], list[pd.DataFrame]]:
    ev = Evolution(move_columns=["marital-status", "workclass"], **kw)  # type: ignore[arg-type]
    return evolve_series(base, adult.ID_COLUMN, QIS, adult.SENSITIVE, SeriesSpec(rounds=10, seed=seed), ev)


def test_the_register_changes_at_the_stated_rates(base: pd.DataFrame) -> None:
    registers, snapshots = _evolve(base, leave_per_year=0.1, join_per_year=0.1, move_per_year=0.1)
    n = len(base)
    first = registers[0].set_index("id")
    assert first.equals(base[["id", *QIS]].astype(str).set_index("id"))
    for r in range(1, len(registers)):
        prev, cur = registers[r - 1].set_index("id"), registers[r].set_index("id")
        left = prev.index.difference(cur.index)
        joined = cur.index.difference(prev.index)
        # 5 % a period, binomial: well inside 2-9 % of 4,000
        assert 0.02 * n < len(left) < 0.09 * n and 0.02 * n < len(joined) < 0.09 * n
        stayed = prev.index.intersection(cur.index)
        older = cur.loc[stayed, "age"].astype(int) - prev.loc[stayed, "age"].astype(int)
        assert set(older.unique()) <= {0, 1}
        assert 0.4 < older.mean() < 0.6  # half have their birthday in a period of two
        moved = cur.loc[stayed, ["marital-status", "workclass"]] != prev.loc[stayed, ["marital-status", "workclass"]]
        assert 0 < moved.any(axis=1).mean() < 0.1
        unchanged = [q for q in QIS if q not in ("age", "marital-status", "workclass")]
        assert (cur.loc[stayed, unchanged] == prev.loc[stayed, unchanged]).all().all()
    for reg in registers:
        assert reg["age"].astype(int).between(17, 90).all()
        assert not reg["id"].duplicated().any()
    for reg, snap in zip(registers, snapshots, strict=True):
        # a snapshot holds individuals of its period's register, with that register's QIs
        merged = snap.merge(reg, on="id", suffixes=("", "_reg"), how="left")
        assert merged["age_reg"].notna().all()
        assert all((merged[q] == merged[f"{q}_reg"]).all() for q in QIS)
    assert any(snap["id"].str.startswith("j").any() for snap in snapshots[1:])  # joiners are released too


def test_the_same_seed_gives_the_same_series(base: pd.DataFrame) -> None:
    a, b, c = _evolve(base, seed=3), _evolve(base, seed=3), _evolve(base, seed=4)
    assert all(x.equals(y) for x, y in zip(a[0] + a[1], b[0] + b[1], strict=True))
    assert not all(x.equals(y) for x, y in zip(a[0] + a[1], c[0] + c[1], strict=True))


def test_bad_rates_are_refused(base: pd.DataFrame) -> None:
    with pytest.raises(InputError, match="leave-per-year must be a fraction"):
        _evolve(base, leave_per_year=1.5)
    with pytest.raises(InputError, match="not a quasi-identifier"):
        evolve_series(base, "id", QIS, adult.SENSITIVE, SeriesSpec(rounds=2), Evolution(move_columns=["salary"]))


def test_write_series_keeps_each_periods_register(base: pd.DataFrame, tmp_path: Path) -> None:
    ev = Evolution(move_columns=["workclass"])
    written = write_series(tmp_path, base, "id", QIS, adult.SENSITIVE, SeriesSpec(rounds=3), "test", ev)
    periods = sorted((tmp_path / PERIOD_REGISTERS).glob("register-*.csv"))
    assert [p.name for p in periods] == ["register-0001.csv", "register-0002.csv", "register-0003.csv"]
    assert written[0].read_bytes() == periods[0].read_bytes()
    assert json.loads((tmp_path / "series.json").read_text())["evolution"]["move_columns"] == ["workclass"]
    ids = [set(pd.read_csv(p, dtype=str)["id"]) for p in periods]
    assert ids[0] != ids[2] and np.mean([len(i) for i in ids]) > 3900
