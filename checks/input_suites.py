"""Input suites: the Great Expectations form of the checks on the population register and
on a snapshot, run before anonymization (docs/validation.md).

Both suites run through :func:`checks.distinct.run_suite_on_distinct_values` (the
expectations on QI and sensitive values checked on each column's distinct values, the rest
on the rows, the whole suite again on the rows when anything fails) and return a
:class:`~checks.gx.SuiteResult`: a JSON-serializable evidence record with a checksum and one
readable line per failed expectation (which expectation, which column, how many
unexpected values, the first rows). Every expectation carries a ``description`` written for
a compliance officer.

This module reads no files and imports nothing above ``checks``: the caller passes the
tables, the hierarchies, the register ids, the sensitive domain, the periods and the
previous row count.

Three custom expectations are defined here:

- :class:`ExpectColumnValuesToBeInReferenceSet`: membership of a column's values in a large
  set (the register's 5,000,000 ids) that is *not* copied into the expectation's
  configuration. The built-in ``ExpectColumnValuesToBeInSet`` stores the whole set in its
  kwargs (validated by pydantic, serialized into the result), which does not scale to a
  register's ids (docs/validation.md). The custom one holds a fingerprint
  (name, size, order-independent hash) and looks the set up in a context variable set for
  the duration of the run; the check itself is a hash lookup (``Index.get_indexer``).
- :class:`ExpectPeriodToFollow`: a table-level expectation that the snapshot's period label
  sorts after the last published one (the pipeline's rule: plain string order).
- :class:`ExpectColumnValuesToNotBeBlank`: no empty or white-space-only cell, vectorized
  (the built-in ``ExpectColumnValuesToNotMatchRegex`` runs ``re.search`` per row).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, ClassVar

import great_expectations.expectations as gxe
import numpy as np
import numpy.typing as npt
import pandas as pd
from great_expectations.execution_engine import PandasExecutionEngine
from great_expectations.expectations.expectation import BatchExpectation, ColumnMapExpectation, Expectation
from great_expectations.expectations.metrics.map_metric_provider import (
    ColumnMapMetricProvider,
    column_condition_partial,
)

from anonymizer.arrays import IdLookup, id_hashes
from anonymizer.hierarchy import Hierarchy
from checks.distinct import run_suite_on_distinct_values
from checks.gx import SuiteResult

__all__ = [
    "ExpectColumnValuesToBeInReferenceSet",
    "ExpectColumnValuesToNotBeBlank",
    "ExpectPeriodToFollow",
    "explain",
    "reference_key",
    "register_suite",
    "snapshot_suite",
]

# ---------------------------------------------------------------------------------------
# membership in a large reference set (the population register's ids)

#: the reference sets of the suite being run in this context, by key: each with its hash
#: lookup where the caller has one (the register cache keeps it) and, where the caller has
#: looked the checked column up already, that column's answer by row (:class:`_Reference`):
#: set by the suite for the extent of its run (:func:`_registered`), so a run's sets are the
#: caller's arguments, not process state, and go with the run
_REFERENCES: ContextVar[Mapping[str, _Reference]] = ContextVar("serialpub_references")


@dataclass(frozen=True)
class _Reference:
    """A reference set registered for one suite run.

    Attributes:
        values: the set's values, unique.
        lookup: their :class:`~anonymizer.arrays.IdLookup`, or None (pandas looks up).
        answered: for the one column checked against the set, whether each row's value is
            in it, indexed as the suite's table; None when the caller has not looked it up.
    """

    values: pd.Index
    lookup: IdLookup | None = None
    answered: pd.Series | None = None


def reference_key(name: str, values: pd.Index, hashes: npt.NDArray[np.uint64] | None = None) -> str:
    """A stable, order-independent identifier of a set of unique values: its name, its size
    and the sum (mod 2**64) of pandas' fixed-key hashes of its values as text
    (:func:`anonymizer.arrays.id_hashes`). ``hashes``: those hashes when the caller has them
    (an :class:`~anonymizer.arrays.IdLookup` holds them, in another order)."""
    fingerprint = _fingerprint(values) if hashes is None else int(hashes.sum(dtype=np.uint64))
    return f"{name} ({len(values)} ids, fingerprint {fingerprint:016x})"


def _fingerprint(values: pd.Index) -> int:
    hashes = id_hashes(values)
    if hashes is None:  # values that are not all text
        hashes = pd.util.hash_array(values.astype(str).to_numpy(dtype=object), categorize=False)
    return int(hashes.sum(dtype=np.uint64))


@contextmanager
def _registered(key: str, reference: _Reference) -> Iterator[None]:
    token = _REFERENCES.set({**_REFERENCES.get({}), key: reference})
    try:
        yield
    finally:
        _REFERENCES.reset(token)


class ColumnValuesInReferenceSet(ColumnMapMetricProvider):
    """Row condition: the value is in the registered reference set named by ``reference``."""

    condition_metric_name = "column_values.in_reference_set"
    condition_value_keys = ("reference",)

    @column_condition_partial(engine=PandasExecutionEngine)
    def _pandas(cls, column: pd.Series, reference: str, **kwargs: Any) -> Any:
        try:
            registered = _REFERENCES.get({})[reference]
        except KeyError:
            raise ValueError(f"reference set {reference!r} is not registered for this run") from None
        values, lookup = registered.values, registered.lookup
        if registered.answered is not None:  # looked up by the caller: read, not looked up again
            # a row the caller did not answer counts as absent: a wrong index fails the
            # expectation, it never passes it
            return registered.answered.reindex(column.index, fill_value=False)
        if values.empty:
            return np.zeros(len(column), dtype=bool)
        rows = None if lookup is None else lookup.find(values, column)  # Arrow strings compared in Arrow
        if rows is not None:
            return pd.Series(rows >= 0, index=column.index)
        try:
            found = values.get_indexer(pd.Index(column.to_numpy())) >= 0
        except TypeError:  # values of a type the index cannot compare
            found = column.isin(values).to_numpy()
        return pd.Series(found, index=column.index)


class ExpectColumnValuesToBeInReferenceSet(ColumnMapExpectation):
    """Expect every column value to be in a large reference set registered for the run
    (e.g. the population register's ids). The configuration holds only the set's
    fingerprint (:func:`reference_key`), never its members."""

    reference: str
    map_metric = "column_values.in_reference_set"
    success_keys = ("reference", "mostly")
    args_keys = ("column", "reference")


class ColumnValuesNotBlank(ColumnMapMetricProvider):
    """Row condition: the value is not empty and not only white space (vectorized; the
    built-in regex expectation calls ``re.search`` once per row)."""

    condition_metric_name = "column_values.not_blank"

    @column_condition_partial(engine=PandasExecutionEngine)
    def _pandas(cls, column: pd.Series, **kwargs: Any) -> Any:
        if not (pd.api.types.is_string_dtype(column.dtype) or column.dtype == object):
            return pd.Series(True, index=column.index)
        text = column.astype("str")
        return (text.str.strip().str.len() > 0).fillna(True).astype(bool)


class ExpectColumnValuesToNotBeBlank(ColumnMapExpectation):
    """Expect no column value to be an empty string or white space only (nulls are left to
    ``ExpectColumnValuesToNotBeNull``)."""

    map_metric = "column_values.not_blank"


class ExpectPeriodToFollow(BatchExpectation):
    """Expect the batch's period label to sort strictly after the last published period
    (vacuously true when nothing was published yet)."""

    period: str
    last_period: str | None = None
    metric_dependencies = ("table.row_count",)
    domain_keys: ClassVar[tuple[str, ...]] = ("row_condition", "condition_parser")
    success_keys = ("period", "last_period")

    def _validate(
        self,
        metrics: dict[str, Any],
        runtime_configuration: dict[str, Any] | None = None,
        execution_engine: Any = None,
    ) -> dict[str, Any]:
        ok = bool(self.period.strip()) and (self.last_period is None or self.period > self.last_period)
        return {
            "success": ok,
            "result": {"observed_value": self.period, "details": {"last_period": self.last_period}},
        }


# ---------------------------------------------------------------------------------------
# the suites


def _stable(outcome: SuiteResult) -> SuiteResult:
    """``outcome`` with every failure line prefixed with its expectation's type (the lines
    follow the order of the failed results). Run-dependent fields are already dropped by
    :func:`checks.gx.run_suite`."""
    failed = [r for r in outcome.result.get("results", []) if not r.get("success")]
    failures = [
        f"{(failed[i].get('expectation_config') or {}).get('type', '?')}: {line}" if i < len(failed) else line
        for i, line in enumerate(outcome.failures)
    ]
    return SuiteResult(
        suite=outcome.suite, success=outcome.success, failures=failures, result=outcome.result, sha256=outcome.sha256
    )


def _source(q: str, sources: Mapping[str, str] | None) -> str:
    return (sources or {}).get(q) or f"hierarchies/{q}.csv"


def _text_and_filled(column: str, role: str, what: str) -> list[Expectation]:
    return [
        gxe.ExpectColumnValuesToBeOfType(
            column=column,
            type_="str",
            description=f"every value of {role} {column!r} in the {what} is read as text",
        ),
        gxe.ExpectColumnValuesToNotBeNull(
            column=column,
            description=f"no value of {role} {column!r} in the {what} is missing",
        ),
        ExpectColumnValuesToNotBeBlank(
            column=column,
            description=f"no value of {role} {column!r} in the {what} is empty or blank",
        ),
    ]


def _leaves(column: str, hierarchy: Hierarchy, what: str, source: str) -> Expectation:
    return gxe.ExpectColumnValuesToBeInSet(
        column=column,
        value_set=list(hierarchy.leaves),
        description=(
            f"every value of quasi-identifier {column!r} in the {what} is a leaf of its hierarchy {source} "
            f"({hierarchy.n_leaves} leaves)"
        ),
    )


@dataclass(frozen=True)
class DatasetColumns:
    """The columns an input file must have and what their values must be.

    Attributes:
        id_column: the individual id column.
        qis: the quasi-identifier columns.
        hierarchies: hierarchy of every QI (its leaves are the admissible values).
        sensitive: the sensitive column (snapshots only; None for the register).
        sensitive_domain: the declared sensitive values, or None for no domain check.
        hierarchy_sources: file named in the descriptions per QI; default ``hierarchies/<qi>.csv``.
    """

    id_column: str
    qis: Sequence[str]
    hierarchies: Mapping[str, Hierarchy]
    sensitive: str | None = None
    sensitive_domain: Collection[str] | None = None
    hierarchy_sources: Mapping[str, str] | None = None


@dataclass(frozen=True)
class PeriodOrder:
    """Where a snapshot stands in the series.

    Attributes:
        period: the snapshot's period label.
        last_period: the last published period label, or None before the first release.
        previous_rows: row count of the previous snapshot, or None for no count check.
        row_bounds: (lo, hi): the row count must lie in [ceil(lo * previous), floor(hi * previous)].
    """

    period: str
    last_period: str | None = None
    previous_rows: int | None = None
    row_bounds: tuple[float, float] = (0.5, 2.0)


def register_suite(register: pd.DataFrame, columns: DatasetColumns, row_label: str = "row") -> SuiteResult:
    """Validate the population register (suite ``"register"``).

    Expectations: the id column and every QI exist (other columns are allowed); ids are
    text, present, non-blank and unique; every QI is text, present, non-blank and a leaf of
    its hierarchy. Column-level expectations are left out for a column that is missing (its
    "column exists" expectation already fails), so the report names the real problem once.

    Args:
        register: the register as read (every column as text).
        columns: the id column, the QIs and their hierarchies (``sensitive`` is not used).
        row_label: what the table's index values are (see :func:`checks.gx.run_suite`).
    """
    id_column, qis, hierarchies = columns.id_column, list(columns.qis), columns.hierarchies
    hierarchy_sources = columns.hierarchy_sources
    what = "population register"
    expectations: list[Expectation] = [
        gxe.ExpectTableColumnsToMatchSet(
            column_set=[id_column, *qis],
            exact_match=False,
            description=f"the {what} has the id column {id_column!r} and every quasi-identifier "
            f"({', '.join(map(repr, qis))})",
        )
    ]
    for c in [id_column, *qis]:
        expectations.append(gxe.ExpectColumnToExist(column=c, description=f"the {what} has a column {c!r}"))
    if id_column in register.columns:
        expectations += _text_and_filled(id_column, "id column", what)
        expectations.append(
            gxe.ExpectColumnValuesToBeUnique(
                column=id_column,
                description=f"every individual appears at most once in the {what} (id column {id_column!r})",
            )
        )
    for q in qis:
        if q in register.columns:
            expectations += _text_and_filled(q, "quasi-identifier", what)
            expectations.append(_leaves(q, hierarchies[q], what, _source(q, hierarchy_sources)))
    return _stable(run_suite_on_distinct_values("register", register, expectations, qis, row_label))


def snapshot_suite(
    snapshot: pd.DataFrame,
    columns: DatasetColumns,
    register_ids: Collection[str] | pd.Index,
    order: PeriodOrder,
    row_label: str = "row",
    id_lookup: IdLookup | None = None,
    register_rows: npt.NDArray[np.int64] | None = None,
) -> SuiteResult:
    """Validate one period's snapshot (suite ``"snapshot"``).

    Expectations: exactly the columns id, QIs and sensitive; every one of them text,
    present and non-blank; ids unique and in the population register; QI values leaves of
    their hierarchies; sensitive values in the declared domain (when given); the period
    later than the last published one; the row count within ``row_bounds`` times the
    previous snapshot's (when ``previous_rows`` is given). Column-level expectations are left
    out for a missing column (its "column exists" expectation already fails).

    Args:
        snapshot: the snapshot as read (every column as text).
        columns: the column roles, the hierarchies and the sensitive domain.
        register_ids: ids of the population register (any collection; a ``pd.Index`` of
            unique ids is used as is, which is fastest).
        order: the period, the last published one and the previous snapshot's row count.
        row_label: what the table's index values are (see :func:`checks.gx.run_suite`).
        id_lookup: the :class:`anonymizer.arrays.IdLookup` of ``register_ids`` (a
            ``pd.Index``), which looks the snapshot's ids up without building pandas'
            hash table of the register's; the same verdict either way.
        register_rows: the position in ``register_ids`` of every snapshot row's id, -1 for
            one not in the register, shape (len(snapshot),), when the caller has looked them
            up (:meth:`serialpub.io.inputs.Register.rows_of`): the ids-in-register
            expectation reads them instead of looking the ids up again.

    Raises:
        ValueError: ``columns`` has no sensitive column, or ``register_rows`` is not one per
            snapshot row.
    """
    if columns.sensitive is None:
        raise ValueError("a snapshot suite needs the sensitive column (DatasetColumns.sensitive)")
    if register_rows is not None and len(register_rows) != len(snapshot):
        raise ValueError(f"{len(register_rows)} register rows for a snapshot of {len(snapshot)} rows")
    id_column, qis, sensitive = columns.id_column, list(columns.qis), columns.sensitive
    hierarchies, sensitive_domain = columns.hierarchies, columns.sensitive_domain
    hierarchy_sources = columns.hierarchy_sources
    period, last_period, previous_rows = order.period, order.last_period, order.previous_rows
    what = "snapshot"
    expected = [id_column, *qis, sensitive]
    expectations: list[Expectation] = [
        gxe.ExpectTableColumnsToMatchSet(
            column_set=expected,
            exact_match=True,
            description=f"the {what} holds exactly the columns {', '.join(map(repr, expected))} and no other "
            "(nothing unvetted may be published)",
        )
    ]
    for c in expected:
        expectations.append(gxe.ExpectColumnToExist(column=c, description=f"the {what} has a column {c!r}"))
    if id_column in snapshot.columns:
        expectations += _text_and_filled(id_column, "id column", what)
        expectations.append(
            gxe.ExpectColumnValuesToBeUnique(
                column=id_column,
                description=f"every individual appears at most once in the {what} (id column {id_column!r})",
            )
        )
    for q in qis:
        if q in snapshot.columns:
            expectations += _text_and_filled(q, "quasi-identifier", what)
            expectations.append(_leaves(q, hierarchies[q], what, _source(q, hierarchy_sources)))
    if sensitive in snapshot.columns:
        expectations += _text_and_filled(sensitive, "sensitive attribute", what)
        if sensitive_domain is not None:
            domain = sorted({str(v) for v in sensitive_domain})
            expectations.append(
                gxe.ExpectColumnValuesToBeInSet(
                    column=sensitive,
                    value_set=domain,
                    description=f"every value of sensitive attribute {sensitive!r} is in its declared domain "
                    f"({len(domain)} values)",
                )
            )
    expectations.append(
        ExpectPeriodToFollow(
            period=period,
            last_period=last_period,
            description=(
                f"the {what}'s period {period!r} is later than the last published period {last_period!r}"
                if last_period is not None
                else f"the {what}'s period {period!r} is a non-empty label (nothing published yet)"
            ),
        )
    )
    if previous_rows is not None:
        lo, hi = order.row_bounds
        low, high = math.ceil(round(lo * previous_rows, 9)), math.floor(round(hi * previous_rows, 9))
        expectations.append(
            gxe.ExpectTableRowCountToBeBetween(
                min_value=low,
                max_value=high,
                description=(
                    f"the {what} has between {low} and {high} rows ({lo:g} to {hi:g} times the previous "
                    f"snapshot's {previous_rows}); a sudden drop is more often an extract failure than reality"
                ),
            )
        )
    ids = register_ids if isinstance(register_ids, pd.Index) else pd.Index(list(register_ids))
    # a lookup of these very ids proves them unique (its hashes are distinct): pandas' check
    # would build again the hash table of every id that the lookup exists to avoid
    with_lookup = id_lookup is not None and ids is register_ids and len(id_lookup.hashes) == len(ids)
    if not with_lookup and not ids.is_unique:
        ids = ids.unique()
    key = reference_key("population register", ids, id_lookup.hashes if with_lookup and id_lookup else None)
    if id_column in snapshot.columns:
        expectations.append(
            ExpectColumnValuesToBeInReferenceSet(
                column=id_column,
                reference=key,
                description=f"every {what} individual is in the population register (id column {id_column!r})",
            )
        )
    answered = None if register_rows is None else pd.Series(register_rows >= 0, index=snapshot.index)
    with _registered(key, _Reference(ids, id_lookup if with_lookup else None, answered)):
        return _stable(run_suite_on_distinct_values("snapshot", snapshot, expectations, [*qis, sensitive], row_label))


# ---------------------------------------------------------------------------------------
# command-line text


def explain(result: SuiteResult) -> str:
    """A short multi-line text of a suite's outcome for the command line: a header line,
    then one line per failed expectation (with the missing and unexpected columns of a
    column-set mismatch)."""
    stats = result.result.get("statistics") or {}
    total = stats.get("evaluated_expectations")
    failed = [r for r in result.result.get("results", []) if not r.get("success")]
    count = f" ({len(failed)} of {total} expectations failed)" if total is not None else ""
    if result.success:
        return f"{result.suite}: passed, {total if total is not None else 'all'} expectations met"
    lines = [f"{result.suite}: FAILED{count}"]
    for i, line in enumerate(result.failures):
        extra = ""
        if i < len(failed):
            mismatched = ((failed[i].get("result") or {}).get("details") or {}).get("mismatched") or {}
            parts = [f"{k} {', '.join(map(repr, v))}" for k, v in sorted(mismatched.items()) if v]
            if parts:
                extra = f" [{'; '.join(parts)}]"
        lines.append(f"  - {line}{extra}")
    return "\n".join(lines)
