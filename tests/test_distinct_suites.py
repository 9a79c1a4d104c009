"""Input suites with their per-value expectations on distinct values (``checks.distinct``):
the same verdict, failure lines and, on a failure, the same evidence as the suite run row by
row; on a pass, the same expectations in the same order with the QI and
sensitive columns counted as distinct values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_input_suites import (
    CATALOGUE,
    DISEASES,
    HIERARCHIES,
    ID,
    QIS,
    SENSITIVE,
    Case,
    good_register,
    good_snapshot,
    run_register,
    run_snapshot,
)

from checks import distinct, gx, input_suites


def _row_by_row(name: str, table: pd.DataFrame, expectations: list[Any], columns: Any, row_label: str = "row") -> Any:
    return gx.run_suite(name, table, expectations, row_label)


def _both(run: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    reduced = run()
    monkeypatch.setattr(input_suites, "run_suite_on_distinct_values", _row_by_row)
    try:
        rows = run()
    finally:
        monkeypatch.setattr(input_suites, "run_suite_on_distinct_values", distinct.run_suite_on_distinct_values)
    return reduced, rows


def _run(case: Case) -> Any:
    if case.table == "register":
        return lambda: run_register(case.mutate(good_register()))
    return lambda: run_snapshot(case.mutate(good_snapshot()), **case.overrides)


@pytest.mark.slow
@pytest.mark.parametrize("case", CATALOGUE, ids=[c.name for c in CATALOGUE])
def test_a_bad_input_gets_the_row_by_row_verdict_and_evidence(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    reduced, rows = _both(_run(case), monkeypatch)
    assert reduced.success is rows.success is False
    assert reduced.failures == rows.failures
    assert reduced.result == rows.result
    assert reduced.sha256 == rows.sha256


def _configs(result: Any) -> list[Any]:
    return [r["expectation_config"] for r in result.result["results"]]


@pytest.mark.parametrize("table", ["register", "snapshot"])
def test_a_good_input_passes_with_its_values_counted_once(table: str, monkeypatch: pytest.MonkeyPatch) -> None:
    df = good_register() if table == "register" else good_snapshot()
    run = (lambda: run_register(df)) if table == "register" else (lambda: run_snapshot(df))
    reduced, rows = _both(run, monkeypatch)
    assert reduced.success is rows.success is True
    assert reduced.failures == rows.failures == []
    assert _configs(reduced) == _configs(rows)
    assert reduced.result["statistics"] == rows.result["statistics"]
    per_value = [c for c in ([*QIS, SENSITIVE] if table == "snapshot" else QIS)]
    counted = {
        r["expectation_config"]["kwargs"].get("column"): r["result"].get("element_count")
        for r in reduced.result["results"]
        if r["expectation_config"]["type"] == "expect_column_values_to_not_be_null"
    }
    # each column's distinct values, padded to the longest one's count
    assert {c: counted[c] for c in per_value} == {c: max(df[c].nunique() for c in per_value) for c in per_value}
    assert max(df[c].nunique() for c in per_value) < len(df)
    assert counted[ID] == len(df)  # the ids stay rows: their uniqueness needs them
    assert reduced.result["meta"]["evaluated_on"]["distinct values"] == per_value
    # the same inputs, the same evidence
    again = run()
    assert again.sha256 == reduced.sha256


def test_distinct_table_keeps_columns_dtype_and_a_missing_value() -> None:
    df = pd.DataFrame({"id": ["a", "b", "c", "d"], "q": ["x", None, "x", "y"], "r": ["1", "1", "1", "1"]}).astype(
        {"id": "str"}
    )
    out = distinct.distinct_table(df, ["q", "r"])
    assert list(out.columns) == ["id", "q", "r"]
    assert len(out) == 3
    assert out["q"].iloc[0] == "x" and pd.isna(out["q"].iloc[1]) and out["q"].iloc[2] == "y"
    assert out["r"].tolist() == ["1", "1", "1"]  # padded with a value that is there
    assert out["id"].tolist() == ["a", "b", "c"]
    assert out["q"].dtype == df["q"].dtype


_LEAF = {q: [str(v) for v in HIERARCHIES[q].leaves] for q in QIS}


@st.composite
def _mutated_snapshot(draw: st.DrawFn) -> pd.DataFrame:
    df = good_snapshot()
    n = len(df)
    for _ in range(draw(st.integers(0, 3))):
        row = draw(st.integers(0, n - 1))
        column = draw(st.sampled_from([ID, *QIS, SENSITIVE]))
        choices: list[Any] = ["", "  ", None, "zz"]
        choices += _LEAF.get(column, DISEASES if column == SENSITIVE else [f"p{i:03d}" for i in range(25)])
        df.loc[row, column] = draw(st.sampled_from(choices))
    return df


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(snap=_mutated_snapshot())
def test_random_snapshots_get_the_row_by_row_verdict(snap: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> None:
    reduced, rows = _both(lambda: run_snapshot(snap.copy()), monkeypatch)
    assert reduced.success is rows.success
    assert reduced.failures == rows.failures
    if not rows.success:
        assert reduced.sha256 == rows.sha256
    else:
        assert _configs(reduced) == _configs(rows)
        assert [r["success"] for r in reduced.result["results"]] == [r["success"] for r in rows.result["results"]]


def test_the_rows_run_holds_only_the_columns_read_row_by_row(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[list[str], int]] = []
    real = distinct.run_suite

    def spy(name: str, table: pd.DataFrame, expectations: list[Any], row_label: str = "row") -> Any:
        seen.append((list(table.columns), len(table)))
        return real(name, table, expectations, row_label)

    monkeypatch.setattr(distinct, "run_suite", spy)
    snap = good_snapshot()
    assert run_snapshot(snap).success
    longest = int(np.max([snap[c].nunique() for c in [*QIS, SENSITIVE]]))
    assert seen == [([ID], len(snap)), (list(snap.columns), longest)]


@st.composite
def _mutated_release(draw: st.DrawFn) -> pd.DataFrame:
    df = good_snapshot()[[*QIS, SENSITIVE]].copy().astype(object)
    n = len(df)
    for _ in range(draw(st.integers(0, 3))):
        row = draw(st.integers(0, n - 1))
        column = draw(st.sampled_from([*QIS, SENSITIVE]))
        choices: list[Any] = ["", None, np.nan, 5, "zz", "*"]
        choices += _LEAF.get(column, DISEASES)
        df.loc[row, column] = draw(st.sampled_from(choices))
    if draw(st.booleans()):
        df[ID] = [f"p{i:03d}" for i in range(n)]  # an identifier column, which the contract refuses
    return df


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(table=_mutated_release())
def test_random_releases_get_the_contract_verdict_of_the_rows(table: pd.DataFrame) -> None:
    """The release contract (checks.release_suites) on distinct values: every expectation
    reads a column's set of values or the column names, so the verdict and the failure
    lines are those of the run on the rows."""
    from checks.release_suites import contract_expectations

    def expectations() -> list[Any]:
        return contract_expectations(QIS, SENSITIVE, HIERARCHIES, ID, DISEASES)

    reduced = distinct.run_suite_on_distinct_values("contract", table, expectations(), [*QIS, SENSITIVE])
    rows = gx.run_suite("contract", table, expectations())
    assert reduced.success is rows.success
    assert reduced.failures == rows.failures
    if rows.success:
        assert [r["success"] for r in reduced.result["results"]] == [r["success"] for r in rows.result["results"]]
        assert reduced.result["meta"]["evaluated_on"]["distinct values"] == [*QIS, SENSITIVE]
    else:
        assert reduced.sha256 == rows.sha256


_REGISTER_CASES = [c for c in CATALOGUE if c.table == "register"]


@pytest.mark.parametrize("case", [None, *_REGISTER_CASES], ids=["good", *(c.name for c in _REGISTER_CASES)])
def test_a_register_read_with_dictionaries_gets_the_same_result(case: Case | None, tmp_path: Any) -> None:
    """The register's QI columns are read as dictionaries (Categoricals; a third of the
    memory of text at a 50M-person register): the suite's verdict, failure lines, stored
    result and the register's codes are those of the register read as text."""
    from serialpub.io.inputs import read_csv, register_from_table
    from serialpub.workflow.register_reader import by_file_line

    df = good_register() if case is None else case.mutate(good_register())
    path = tmp_path / "register.csv"
    df.to_csv(path, index=False)
    text = read_csv(path, "population register")
    coded = read_csv(path, "population register", dictionary=QIS)
    assert any(isinstance(coded[q].dtype, pd.CategoricalDtype) for q in QIS if q in coded.columns)
    a, b = run_register(by_file_line(text)), run_register(by_file_line(coded))
    assert (a.success, a.failures, a.result, a.sha256) == (b.success, b.failures, b.result, b.sha256)
    if case is None:
        assert a.success
        r_text = register_from_table(text, path, ID, QIS, HIERARCHIES)
        r_coded = register_from_table(coded, path, ID, QIS, HIERARCHIES)
        np.testing.assert_array_equal(r_text.keys.dense(), r_coded.keys.dense())
        assert r_text.ids.equals(r_coded.ids)
