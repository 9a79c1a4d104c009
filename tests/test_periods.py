"""Periods: a period comes from --period or from snapshot-<period>.csv,
is written in the configured format, and cannot be skipped by accident (the probes: a
snapshot named extract_final.csv published as period 'extract_final', and period 0003
published while 0002 was still to come, so that 0002 could never be published)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import cli, read_config, snapshot, state_of, write_config
from hypothesis import given
from hypothesis import strategies as st

from serialpub.config import load_config
from serialpub.io.periods import PeriodFormat, detect, skipped, successor
from serialpub.workflow.publisher import Publisher
from serialpub.workflow.request import ReleaseRequest
from state.store import StateStore, open_engine


@pytest.mark.parametrize(
    ("fmt", "period", "after"),
    [
        (PeriodFormat.SEQUENCE, "0009", "0010"),
        (PeriodFormat.SEQUENCE, "99", "100"),
        (PeriodFormat.YEAR, "2025", "2026"),
        (PeriodFormat.HALF_YEAR, "2025-H1", "2025-H2"),
        (PeriodFormat.HALF_YEAR, "2025-H2", "2026-H1"),
        (PeriodFormat.QUARTER, "2025-Q4", "2026-Q1"),
        (PeriodFormat.MONTH, "2025-09", "2025-10"),
        (PeriodFormat.MONTH, "2025-12", "2026-01"),
        (PeriodFormat.FREE, "extract", None),
    ],
)
def test_successor(fmt: PeriodFormat, period: str, after: str | None) -> None:
    assert successor(period, fmt) == after


@given(st.integers(2000, 2100), st.integers(0, 11), st.integers(1, 40))
def test_months_between_are_counted_exactly(year: int, month: int, gap: int) -> None:
    start = f"{year}-{month + 1:02d}"
    end_index = year * 12 + month + gap
    end = f"{end_index // 12}-{end_index % 12 + 1:02d}"
    between = skipped(start, end, PeriodFormat.MONTH)
    assert len(between) == gap - 1 and detect(start) is PeriodFormat.MONTH
    assert all(a < b for a, b in zip([start, *between], [*between, end], strict=True))


def _release(root: Path, snap: Path, *options: str) -> tuple[int, str]:
    result = cli("release", "--config", root, "--snapshot", snap, *options)
    return result.returncode, result.stderr


def test_a_file_name_without_a_period_is_refused(published_once: Path) -> None:
    before = state_of(published_once)
    extract = published_once / "snapshots" / "extract_final.csv"
    shutil.copyfile(snapshot(published_once, 2), extract)
    code, err = _release(published_once, extract)
    assert code == 2
    assert "extract_final.csv: cannot tell the period from this file name" in err and "--period" in err
    assert state_of(published_once) == before


@pytest.mark.slow
def test_a_skipped_period_is_refused_then_recorded_when_explicit(published_once: Path) -> None:
    before = state_of(published_once)
    code, err = _release(published_once, snapshot(published_once, 3))  # period 0003 after 0001
    assert code == 2
    assert "period '0003' skips 0002 (the last published period is '0001'); publish '0002' first" in err
    assert state_of(published_once) == before
    code, err = _release(published_once, snapshot(published_once, 3), "--skip-periods", "0002 extract lost")
    assert code == 0, err
    ws = load_config(published_once)
    last = StateStore(open_engine(ws.database_url)).published("clinic")[-1]
    assert (last.period, last.params.skipped_periods, last.params.skip_reason) == (
        "0003",
        ["0002"],
        "0002 extract lost",
    )


def test_a_period_in_another_format_is_refused(published_once: Path) -> None:
    before = state_of(published_once)
    code, err = _release(published_once, snapshot(published_once, 2), "--period", "2025-H1")
    assert code == 2
    expected = "period '2025-H1' is not a sequence period (period_format: auto, as the first published period '0001')"
    assert expected in err
    config = read_config(published_once)
    config["period_format"] = "half-year"
    write_config(published_once, config)
    code, err = _release(published_once, snapshot(published_once, 2), "--period", "0002")
    assert code == 2 and "period '0002' is not a half-year period" in err
    assert state_of(published_once) == before


def test_sequence_periods_keep_the_first_width(published_once: Path) -> None:
    code, err = _release(published_once, snapshot(published_once, 2), "--period", "00002")
    assert code == 2 and "sequence periods keep the width of the first, '0001' (write '0002')" in err


def test_a_draft_allowed_a_gap_is_validated_under_that_decision_by_another_process(published_once: Path) -> None:
    """The Airflow tasks draft and validate in different processes: the validating one was
    not given --skip-periods, and checks the snapshot under what the draft recorded."""
    ws = load_config(published_once)
    request = ReleaseRequest(skip_reason="0002 extract lost")
    staged = Publisher(ws, request=request).draft(snapshot(published_once, 3))
    results = Publisher(load_config(published_once)).validate(staged.seq)
    assert results and all(r.success for r in results)
    row = StateStore(open_engine(ws.database_url)).open_release("clinic")
    assert row is not None and row.status == "validated" and row.params.skip_reason == "0002 extract lost"
