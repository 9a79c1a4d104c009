"""Running a suite with its per-value expectations on distinct values
(docs/validation.md, "Distinct values").

A snapshot of 1,000,000 records has a few dozen distinct values per quasi-identifier and
sensitive column, and whether every value is text, present, non-blank and in its set
depends only on which values occur, not on how often. Great Expectations filters the whole
table several times per map expectation, so checking 40 such expectations row by row costs
seconds where the distinct values take milliseconds.

:func:`run_suite_on_distinct_values` splits one suite into two runs of
:func:`checks.gx.run_suite`:

- **rows**: the table's columns outside ``distinct_columns`` (the id column), with every
  expectation on them and every table-level expectation that reads the rows (row count,
  uniqueness, custom batch expectations);
- **distinct values**: a table with the same columns in the same order whose
  ``distinct_columns`` hold each column's distinct values (padded to one length by
  repeating the last one), with the expectations in :data:`SET_EXPECTATIONS` on those
  columns and the ones that read only the column names (:data:`NAME_EXPECTATIONS`).

Every expectation gets the verdict it gets on the rows: a per-value expectation fails on
the rows iff some row's value fails, iff some distinct value fails; padding repeats a value
that is there. When both runs pass, the result is their results in the suite's order
(``element_count`` of a per-value expectation then counts distinct values, and the
result's ``meta.evaluated_on`` says which columns were reduced). When either fails, the
whole suite runs again on the rows, so the failure lines name the file lines and read as
they always did; that result is returned.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Collection
from typing import Any

import numpy as np
import pandas as pd
from great_expectations.expectations.expectation import Expectation

from checks.gx import SuiteResult, run_suite

#: expectation types whose verdict depends only on the set of values of their column
SET_EXPECTATIONS = frozenset(
    {
        "expect_column_values_to_be_of_type",
        "expect_column_values_to_not_be_null",
        "expect_column_values_to_not_be_blank",
        "expect_column_values_to_be_in_set",
        "expect_column_values_to_be_in_reference_set",
        "expect_column_values_to_be_text",  # checks.expectations.ExpectColumnValuesToBeText
    }
)
#: expectation types that read only the table's column names
NAME_EXPECTATIONS = frozenset({"expect_table_columns_to_match_set", "expect_column_to_exist"})


def _on_distinct(expectation: Expectation, distinct_columns: Collection[str]) -> bool:
    kind = expectation.expectation_type
    if kind in NAME_EXPECTATIONS:
        return True
    column = getattr(expectation, "column", None)
    return kind in SET_EXPECTATIONS and column in distinct_columns


#: a column's distinct values as ``table[column].drop_duplicates()`` gives them (index aside)
Distinct = Callable[[str], pd.Series]


def distinct_table(
    table: pd.DataFrame, distinct_columns: Collection[str], distinct: Distinct | None = None
) -> pd.DataFrame:
    """``table``'s columns in order, each of ``distinct_columns`` reduced to its distinct
    values (dtype kept, a Categorical's as its values' dtype; a missing value kept once)
    and repeated at the end up to the longest one's count; every other column is its first
    rows (only its name is read).

    Args:
        distinct: a column's distinct values in order of first appearance, when the caller
            has them (:meth:`checks.labels.LabelCodes.distinct`); ``drop_duplicates`` otherwise.

    Returns:
        shape (m, table's columns), m the largest distinct count (at least 1 when the table
        has rows).
    """
    values_of = distinct or (lambda c: table[c].drop_duplicates())
    reduced = {c: _as_text(values_of(c)) for c in table.columns if c in distinct_columns}
    m = max((len(v) for v in reduced.values()), default=min(len(table), 1))
    out = {}
    for c in table.columns:
        values = reduced[c] if c in reduced else table[c].iloc[:m]
        at = np.minimum(np.arange(m), len(values) - 1)
        out[c] = values.iloc[at].reset_index(drop=True)
    return pd.DataFrame(out, columns=table.columns)


def _as_text(column: pd.Series) -> pd.Series:
    """A Categorical column (a register's QI read as a dictionary,
    :func:`serialpub.io.inputs.read_csv`) as its values in their own dtype, the column read
    as text would have; any other column as it is. The expectations see the same values and
    dtype either way."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.astype(column.cat.categories.dtype)
    return column


def as_text(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with every Categorical column as text (:func:`_as_text`); itself when it has none."""
    categorical = [c for c in table.columns if isinstance(table[c].dtype, pd.CategoricalDtype)]
    if not categorical:
        return table
    return table.assign(**{c: _as_text(table[c]) for c in categorical})


def run_suite_on_distinct_values(
    name: str,
    table: pd.DataFrame,
    expectations: list[Expectation],
    distinct_columns: Collection[str],
    row_label: str = "row",
    distinct: Distinct | None = None,
) -> SuiteResult:
    """The verdict of :func:`checks.gx.run_suite` ``(name, table, expectations, row_label)``,
    with the per-value expectations on ``distinct_columns`` run on those columns' distinct
    values (module docstring). On a failure the returned result is the row-level run's.

    Args:
        table: the table as read, indexed as the failure lines should name its rows.
        distinct_columns: columns whose values may be checked as a set (QIs, sensitive);
            the id column is not one of them (its uniqueness needs the rows).
        distinct: the distinct values of a column of ``table``, as :func:`distinct_table`
            takes them (the same verdicts and results; computed from the table without it).
    """
    reduced = [c for c in table.columns if c in distinct_columns]
    if not reduced or len(table) == 0:
        return run_suite(name, as_text(table), expectations, row_label)
    on_distinct = [_on_distinct(e, reduced) for e in expectations]
    parts = {on: [i for i, d in enumerate(on_distinct) if d is on] for on in (False, True)}

    def those(on: bool) -> list[Expectation]:
        # copies: a run binds its expectations to its suite, and a bound one joins no other
        return [copy.copy(expectations[i]) for i in parts[on]]

    read_on_rows = {getattr(expectations[i], "column", None) for i in parts[False]}
    rows_columns = [c for c in table.columns if c not in reduced or c in read_on_rows]
    rows = run_suite(name, as_text(table[rows_columns]), those(False), row_label)
    values = run_suite(name, distinct_table(table, reduced, distinct), those(True), row_label) if rows.success else None
    merged = None if values is None or not values.success else _merged(name, expectations, parts, rows, values, reduced)
    # on a failure the rows as text: the evidence of a table read without dictionaries
    return merged or run_suite(name, as_text(table), [copy.copy(e) for e in expectations], row_label)


def _column(expectation: Expectation) -> str | None:
    column = getattr(expectation, "column", None)
    return column if isinstance(column, str) else None


def reported_order(expectations: list[Expectation]) -> list[int]:
    """The positions of ``expectations`` in the order Great Expectations reports their
    results: grouped by column in the order the columns first appear (the expectations
    without a column as one group), in suite order within a group (its
    ``Validator.process_expectations_for_validation``)."""
    groups: dict[str | None, list[int]] = {}
    for i, e in enumerate(expectations):
        groups.setdefault(_column(e), []).append(i)
    return [i for group in groups.values() for i in group]


def _merged(
    name: str,
    expectations: list[Expectation],
    parts: dict[bool, list[int]],
    rows: SuiteResult,
    values: SuiteResult,
    reduced: list[str],
) -> SuiteResult | None:
    """One passed result of the two runs: their results in the order one run would report
    them, the statistics of both, the rows run's meta with ``evaluated_on``. None when a
    result does not belong where the order puts it (a Great Expectations that orders its
    results otherwise): the caller then runs the suite on the rows."""
    by_position: dict[int, dict[str, Any]] = {}
    for on, run in ((False, rows), (True, values)):
        positions = parts[on]
        order = reported_order([expectations[i] for i in positions])
        if len(run.result["results"]) != len(order):
            return None
        for j, result in zip(order, run.result["results"], strict=True):
            by_position[positions[j]] = result
    results = [by_position[i] for i in reported_order(expectations)]
    for i, result in zip(reported_order(expectations), results, strict=True):
        config = result.get("expectation_config") or {}
        if config.get("type") != expectations[i].expectation_type or (config.get("kwargs") or {}).get(
            "column"
        ) != _column(expectations[i]):
            return None
    n = len(results)
    payload: dict[str, Any] = dict(rows.result)
    payload["results"] = results
    payload["statistics"] = {
        "evaluated_expectations": n,
        "successful_expectations": n,
        "unsuccessful_expectations": 0,
        "success_percent": 100.0 if n else None,
    }
    payload["meta"] = {
        **(rows.result.get("meta") or {}),
        "evaluated_on": {"distinct values": reduced, "rows": "every other expectation"},
    }
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    return SuiteResult(suite=name, success=True, failures=[], result=payload, sha256=digest)
