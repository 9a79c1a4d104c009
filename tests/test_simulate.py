"""serialpub.simulate: the series generator of paper 004, section 8."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from serialpub.datasets import adult
from serialpub.errors import InputError
from serialpub.series_files import write_series
from serialpub.simulate import PRESETS, SeriesSpec, check_base_table, simulate_series

S = adult.SENSITIVE
ID = adult.ID_COLUMN


@pytest.fixture(scope="module")
def paper_series(adult_table: pd.DataFrame) -> list[pd.DataFrame]:
    return simulate_series(adult_table, S, SeriesSpec())


def _ids(df: pd.DataFrame, id_col: str = ID) -> set:
    return set(df[id_col].tolist())


def _check_series(
    base: pd.DataFrame, snaps: list[pd.DataFrame], spec: SeriesSpec, id_col: str = ID, sens: str = S
) -> None:
    """Structural properties any series must have, from the definition in the docstring."""
    n = len(base)
    assert len(snaps) == spec.rounds
    base_index = pd.Index(base[id_col])
    others = [c for c in base.columns if c != sens]
    base_others = base[others].to_numpy()
    base_sens = base[sens].to_numpy()
    q, r = divmod(n, spec.rounds)
    expected_sizes = sorted([q + 1] * r + [q] * (spec.rounds - r))
    new_sizes = []
    seen_new: set = set()
    prev_ids: set = set()
    prev_value: dict = {}
    for snap in snaps:
        assert list(snap.columns) == list(base.columns)
        ids = snap[id_col].tolist()
        assert len(ids) == len(set(ids)), "an id repeats within a snapshot"
        pos = base_index.get_indexer(ids)
        assert np.all(pos >= 0), "a row that is not in the base table"
        assert np.all(np.diff(pos) > 0), "rows are in base-table order"
        # every column except the sensitive one is the base row unchanged
        assert (snap[others].to_numpy() == base_others[pos]).all()
        carried = set(ids) & prev_ids
        new = set(ids) - prev_ids
        # Ti = Pi + round(carry_over·|T(i-1)|) rows of T(i-1); partitions are disjoint
        assert len(carried) == round(spec.carry_over * len(prev_ids))
        assert not (new & seen_new)
        seen_new |= new
        new_sizes.append(len(new))
        assert len(snap) == len(new) + round(spec.carry_over * len(prev_ids))
        # a value differs from its previous value (T(i-1) for carried rows, the base table
        # for new rows) only if it was redrawn, and round(redraw·|Ti|) rows are redrawn
        values = snap[sens].tolist()
        before = [prev_value[i] if i in carried else base_sens[p] for i, p in zip(ids, pos, strict=True)]
        changed = sum(a != b for a, b in zip(values, before, strict=True))
        assert changed <= round(spec.redraw * len(snap))
        assert set(values) <= set(base_sens)
        prev_ids = set(ids)
        prev_value = dict(zip(ids, values, strict=True))
    # the partitions P1..PR cover the base table exactly once, sizes differ by at most one
    assert seen_new == _ids(base, id_col)
    assert sorted(new_sizes) == expected_sizes


# ---------------------------------------------------------------------------------------
# Adult, paper preset


def test_paper_series_on_adult(adult_table: pd.DataFrame, paper_series: list[pd.DataFrame]) -> None:
    assert len(paper_series) == 20
    assert len(paper_series[0]) == 2262  # ceil(45222 / 20)
    for i in range(1, 20):
        assert len(paper_series[i]) == len(_ids(paper_series[i]) - _ids(paper_series[i - 1])) + round(
            0.2 * len(paper_series[i - 1])
        )
    assert [len(s) for s in paper_series[:3]] == [2262, 2262 + 452, 2261 + round(0.2 * 2714)]
    _check_series(adult_table, paper_series, SeriesSpec())


def test_paper_series_redraws_some_values(adult_table: pd.DataFrame, paper_series: list[pd.DataFrame]) -> None:
    base = adult_table.set_index(ID)[S]
    fractions = []
    for snap in paper_series:
        differs = snap[S].to_numpy() != base.loc[snap[ID]].to_numpy()
        fractions.append(differs.mean())
    # 20 % of rows redrawn from the overall distribution (≈ 1 - Σ p_v² ≈ 0.9 of them land
    # on another value), plus carried rows that were redrawn earlier
    assert min(fractions) > 0.1
    assert max(fractions) < 0.4
    assert 0.15 < float(np.mean(fractions)) < 0.3


def test_cohort_preset_carries_80_percent(adult_table: pd.DataFrame) -> None:
    spec = SeriesSpec(**PRESETS["cohort"], seed=3)
    assert spec.carry_over == 0.8 and spec.rounds == 20
    snaps = simulate_series(adult_table, S, spec)
    for i in range(1, 20):
        assert len(_ids(snaps[i]) & _ids(snaps[i - 1])) == round(0.8 * len(snaps[i - 1]))
    _check_series(adult_table, snaps, spec)
    assert len(snaps[-1]) > 4 * len(snaps[0])  # the cohort grows towards |P|/(1 - 0.8)


def test_same_seed_same_series_different_seed_different(adult_table: pd.DataFrame) -> None:
    spec = SeriesSpec(rounds=5, seed=11)
    a = simulate_series(adult_table, S, spec)
    b = simulate_series(adult_table, S, spec)
    c = simulate_series(adult_table, S, SeriesSpec(rounds=5, seed=12))
    for x, y in zip(a, b, strict=True):
        pd.testing.assert_frame_equal(x, y)
    assert any(not x.equals(y) for x, y in zip(a, c, strict=True))


def test_write_series_is_byte_identical_for_the_same_seed(tmp_path: Path, adult_table: pd.DataFrame) -> None:
    args = (adult_table, ID, adult.QUASI_IDENTIFIERS, S)
    w1 = write_series(tmp_path / "one", *args, SeriesSpec(), "adult")
    w2 = write_series(tmp_path / "two", *args, SeriesSpec(), "adult")
    w3 = write_series(tmp_path / "three", *args, SeriesSpec(seed=1), "adult")
    assert len(w1) == 22
    assert [p.relative_to(tmp_path / "one") for p in w1] == [p.relative_to(tmp_path / "two") for p in w2]
    for p1, p2 in zip(w1, w2, strict=True):
        assert p1.read_bytes() == p2.read_bytes(), p1.name
    snaps1 = [p for p in w1 if p.parent.name == "snapshots"]
    snaps3 = [p for p in w3 if p.parent.name == "snapshots"]
    assert len(snaps1) == 20
    assert any(a.read_bytes() != b.read_bytes() for a, b in zip(snaps1, snaps3, strict=True))
    assert w1[0].read_bytes() == w3[0].read_bytes()  # the register does not depend on the seed

    register = pd.read_csv(w1[0], dtype=str, na_filter=False)
    assert len(register) == adult.CLEAN_ROWS == 45_222
    assert list(register.columns) == [ID, *adult.QUASI_IDENTIFIERS]
    assert register[ID].tolist() == [str(i) for i in range(1, 45_223)]

    snap = pd.read_csv(snaps1[0], dtype=str, na_filter=False)
    assert list(snap.columns) == [ID, *adult.QUASI_IDENTIFIERS, S]
    assert len(snap) == 2262
    assert snaps1[0].name == "snapshot-0001.csv" and snaps1[-1].name == "snapshot-0020.csv"

    meta = json.loads(w1[-1].read_text("utf-8"))
    assert meta["rounds"] == 20 and meta["seed"] == 0
    assert meta["carry_over"] == 0.2 and meta["redraw"] == 0.2
    assert meta["rows"] == [len(pd.read_csv(p, dtype=str, na_filter=False)) for p in snaps1]
    assert meta["sensitive"] == S and meta["quasi_identifiers"] == adult.QUASI_IDENTIFIERS


# ---------------------------------------------------------------------------------------
# a small synthetic base table


def _small_base(n: int = 10) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "pid": [f"p{i:02d}" for i in range(n)],
            "zip": [str(47000 + i) for i in range(n)],
            "sex": ["M", "F"] * (n // 2) + ["M"] * (n % 2),
            "disease": [["flu", "hiv", "cold", "ulcer", "flu"][i % 5] for i in range(n)],
        }
    )


@pytest.mark.parametrize(
    "spec",
    [
        SeriesSpec(rounds=3, carry_over=0.5, redraw=0.0, seed=1),
        SeriesSpec(rounds=3, carry_over=0.5, redraw=1.0, seed=2),
        SeriesSpec(rounds=4, carry_over=0.0, redraw=0.3, seed=3),
        SeriesSpec(rounds=5, carry_over=1.0, redraw=0.2, seed=4),
        SeriesSpec(rounds=10, carry_over=0.2, redraw=0.2, seed=5),
        SeriesSpec(rounds=1, carry_over=0.2, redraw=0.2, seed=6),
    ],
)
def test_small_base_table(spec: SeriesSpec) -> None:
    base = _small_base(10)
    snaps = simulate_series(base, "disease", spec)
    _check_series(base, snaps, spec, id_col="pid", sens="disease")
    if spec.redraw == 0:
        for snap in snaps:
            merged = snap.merge(base, on="pid", suffixes=("", "_base"))
            assert (merged["disease"] == merged["disease_base"]).all()
    if spec.carry_over == 0:
        assert sum(len(s) for s in snaps) == 10
    if spec.carry_over == 1:
        for a, b in itertools.pairwise(snaps):
            assert set(a["pid"]) <= set(b["pid"])
        assert len(snaps[-1]) == 10
    # the input is not modified
    pd.testing.assert_frame_equal(base, _small_base(10))


def test_small_base_table_partition_sizes() -> None:
    snaps = simulate_series(_small_base(10), "disease", SeriesSpec(rounds=3, carry_over=0.0, redraw=0.0))
    assert sorted(len(s) for s in snaps) == [3, 3, 4]


def test_rounds_out_of_range() -> None:
    base = _small_base(4)
    with pytest.raises(InputError, match="rounds"):
        simulate_series(base, "disease", SeriesSpec(rounds=5))
    with pytest.raises(InputError, match="rounds"):
        simulate_series(base, "disease", SeriesSpec(rounds=0))
    assert len(simulate_series(base, "disease", SeriesSpec(rounds=4))) == 4


@pytest.mark.parametrize(("carry", "redraw"), [(-0.1, 0.2), (1.5, 0.2), (0.2, -1.0), (0.2, 1.01)])
def test_fractions_out_of_range(carry: float, redraw: float) -> None:
    with pytest.raises(InputError):
        simulate_series(_small_base(), "disease", SeriesSpec(rounds=2, carry_over=carry, redraw=redraw))


def test_check_base_table_errors() -> None:
    base = _small_base()
    check_base_table(base, "pid", ["zip", "sex", "disease"], "base.csv")  # fine
    with pytest.raises(InputError) as info:
        check_base_table(base, "pid", ["zip", "age", "disease"], "base.csv")
    assert "base.csv" in str(info.value) and "age" in str(info.value)
    with pytest.raises(InputError, match="id"):
        check_base_table(base, "id", ["zip"], "base.csv")
    with pytest.raises(InputError, match="no rows"):
        check_base_table(base.iloc[:0], "pid", ["zip"], "base.csv")
    dup = pd.concat([base, base.iloc[[3]]], ignore_index=True)
    with pytest.raises(InputError) as info:
        check_base_table(dup, "pid", ["zip"], "base.csv")
    assert "p03" in str(info.value) and "base.csv" in str(info.value)


def test_write_series_rejects_bad_base_before_writing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(InputError):
        write_series(out, _small_base(), "pid", ["zip", "nope"], "disease", SeriesSpec(rounds=2), "base.csv")
    assert not out.exists()
