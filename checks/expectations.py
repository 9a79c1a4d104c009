"""Custom Great Expectations (1.x) expectations of the release suites.

The built-in expectations cannot state serial publishing's guarantee or the disjointness
of group regions, so these are proper GX expectations (a metric provider registered with
GX plus an expectation class; subclassing registers both), run like any other through
:func:`checks.gx.run_suite`:

- :class:`ExpectBreachProbabilityAtMost`: column-pair map over the breach table
  (:func:`checks.breach.breach_table`): a row is unexpected when its exact verdict
  ``exceeds`` is True, or when its float ``p`` exceeds the bound by more than
  :data:`anonymizer.privacy.UNDECIDED_BAND` (a table whose verdicts contradict its
  probabilities is not trusted). ``exceeds`` is decided in exact rational arithmetic for
  values within 1e-9 of the bound, so floating point never turns a violation into a pass.
- :class:`ExpectGroupRegionsPairwiseDisjoint`: table-level; over one row per group with
  ``<qi>_lo``/``<qi>_hi`` leaf intervals (:func:`checks.breach.region_spans`); reports the
  number of overlapping pairs (regions intersecting on every QI) and the first few
  (:func:`anonymizer.regions.overlapping_pairs`).
- :class:`ExpectGroupsLDiverse`: column-pair map over one row per group; a group is
  unexpected when ``max_n_s · ℓ > n_j`` (a protected value's share above 1/ℓ).
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")

import numpy as np
import pandas as pd
from great_expectations.core.metric_domain_types import MetricDomainTypes
from great_expectations.execution_engine import ExecutionEngine, PandasExecutionEngine
from great_expectations.expectations.expectation import (
    BatchExpectation,
    ColumnMapExpectation,
    ColumnPairMapExpectation,
)
from great_expectations.expectations.metrics.map_metric_provider import (
    ColumnMapMetricProvider,
    ColumnPairMapMetricProvider,
    column_condition_partial,
    column_pair_condition_partial,
)
from great_expectations.expectations.metrics.metric_provider import metric_value
from great_expectations.expectations.metrics.table_metric_provider import TableMetricProvider

from anonymizer.privacy import UNDECIDED_BAND
from anonymizer.regions import overlapping_pairs

# ------------------------------------------------------------------ the guarantee


class ColumnPairBreachWithinBound(ColumnPairMapMetricProvider):
    """Row condition: ``not exceeds and not p > bound + UNDECIDED_BAND``."""

    condition_metric_name = "column_pair_values.breach_within_bound"
    condition_domain_keys = (
        "batch_id",
        "table",
        "column_A",
        "column_B",
        "row_condition",
        "condition_parser",
        "ignore_row_if",
    )
    condition_value_keys = ("bound",)

    @column_pair_condition_partial(engine=PandasExecutionEngine)
    def _pandas(cls, column_A: pd.Series, column_B: pd.Series, **kwargs: Any) -> pd.Series:
        bound = float(kwargs["bound"])
        p = column_A.astype("float64")
        exceeds = column_B.astype(bool)
        return ~exceeds & ~(p > bound + UNDECIDED_BAND)


class ExpectBreachProbabilityAtMost(ColumnPairMapExpectation):
    """Expect every (individual, protected value) pair of the breach table to have
    p <= bound (= 1/ℓ), decided exactly.

    ``column_A`` is the float probability ``p``; ``column_B`` is the exact verdict
    ``exceeds`` computed by :func:`checks.breach.breach_table` (values within 1e-9 of the
    bound are re-decided there in rational arithmetic). A row is unexpected when
    ``exceeds`` is True, or when ``p`` is more than 1e-9 above the bound whatever
    ``exceeds`` says. The unexpected rows are the violating pairs.
    """

    column_A: str = "p"
    column_B: str = "exceeds"
    bound: float
    ignore_row_if: str = "neither"

    map_metric = "column_pair_values.breach_within_bound"
    success_keys = ("column_A", "column_B", "bound", "ignore_row_if", "mostly")
    args_keys = ("column_A", "column_B", "bound")


# ------------------------------------------------------------------ text columns


class ColumnValuesAreText(ColumnMapMetricProvider):
    """Row condition: the value is a Python/pandas string (a string dtype passes at once)."""

    condition_metric_name = "column_values.are_text"

    @column_condition_partial(engine=PandasExecutionEngine)
    def _pandas(cls, column: pd.Series, **kwargs: Any) -> pd.Series:
        if isinstance(column.dtype, pd.StringDtype):
            return pd.Series(True, index=column.index)
        codes, uniques = pd.factorize(column)  # one type test per distinct value
        is_text = np.array([isinstance(u, str) for u in uniques], dtype=bool)
        return pd.Series(is_text[codes] if is_text.size else np.zeros(len(column), bool), index=column.index)


class ExpectColumnValuesToBeText(ColumnMapExpectation):
    """Expect every non-null value of the column to be a string (the release contract
    publishes generalized values as text, docs/design.md section 5). Works with object columns and
    with pandas' string dtypes alike, which the built-in type expectations do not."""

    map_metric = "column_values.are_text"


# ------------------------------------------------------------------ localized ℓ-diversity


class ColumnPairShareWithinEll(ColumnPairMapMetricProvider):
    """Row condition: ``max_n_s · ℓ <= n_j`` (column_A = max_n_s, column_B = n_j)."""

    condition_metric_name = "column_pair_values.share_within_ell"
    condition_domain_keys = (
        "batch_id",
        "table",
        "column_A",
        "column_B",
        "row_condition",
        "condition_parser",
        "ignore_row_if",
    )
    condition_value_keys = ("ell",)

    @column_pair_condition_partial(engine=PandasExecutionEngine)
    def _pandas(cls, column_A: pd.Series, column_B: pd.Series, **kwargs: Any) -> pd.Series:
        ell = float(kwargs["ell"])
        return column_A.astype("float64") * ell <= column_B.astype("float64")


class ExpectGroupsLDiverse(ColumnPairMapExpectation):
    """Expect every group to hold at most ``n_j / ℓ`` records of any one protected value.

    Over one row per group: ``column_A`` (default ``max_n_s``) the largest count of one
    protected value, ``column_B`` (default ``n_j``) the group's candidates. Compared as
    ``max_n_s · ℓ <= n_j``, exact for integer ℓ. Unexpected rows are the groups whose
    localized share ``max_n_s / n_j`` exceeds 1/ℓ.
    """

    column_A: str = "max_n_s"
    column_B: str = "n_j"
    ell: float
    ignore_row_if: str = "neither"

    map_metric = "column_pair_values.share_within_ell"
    success_keys = ("column_A", "column_B", "ell", "ignore_row_if", "mostly")
    args_keys = ("column_A", "column_B", "ell")


# ------------------------------------------------------------------ disjointness


class TableRegionOverlaps(TableMetricProvider):
    """Metric ``table.region_overlaps``: count and first pairs of overlapping group regions."""

    metric_name = "table.region_overlaps"
    value_keys = ("attributes", "max_examples")

    @metric_value(engine=PandasExecutionEngine)
    def _pandas(
        cls,
        execution_engine: PandasExecutionEngine,
        metric_domain_kwargs: dict[str, Any],
        metric_value_kwargs: dict[str, Any],
        metrics: dict[str, Any],
        runtime_configuration: dict[str, Any],
    ) -> dict[str, Any]:
        df, _, _ = execution_engine.get_compute_domain(
            domain_kwargs=metric_domain_kwargs, domain_type=MetricDomainTypes.TABLE
        )
        attributes = list(metric_value_kwargs["attributes"])
        max_examples = int(metric_value_kwargs.get("max_examples") or 5)
        lo = df[[f"{a}_lo" for a in attributes]].to_numpy(dtype=np.int64)
        hi = df[[f"{a}_hi" for a in attributes]].to_numpy(dtype=np.int64)
        count, pairs = overlapping_pairs(lo, hi, max_examples)
        labelled = [a for a in attributes if a in df.columns]
        index = df.index.to_numpy()
        described: list[Any] = []
        for i, j in pairs.tolist():
            if labelled:
                described.append([{a: str(df[a].iloc[i]) for a in labelled}, {a: str(df[a].iloc[j]) for a in labelled}])
            else:
                described.append([int(index[i]), int(index[j])])
        return {
            "count": count,
            "rows": [[int(index[i]), int(index[j])] for i, j in pairs.tolist()],
            "pairs": described,
        }


class ExpectGroupRegionsPairwiseDisjoint(BatchExpectation):
    """Expect the regions of the groups to be pairwise disjoint (docs/design.md section 1).

    The table has one row per group and, for every attribute in ``attributes``, the
    columns ``<attribute>_lo`` and ``<attribute>_hi``: the inclusive interval of the group's
    node in a depth-first leaf order (:func:`checks.breach.region_spans`), where a node's
    leaves are contiguous. Two regions overlap when their intervals intersect on every
    attribute. The result gives the number of overlapping pairs (``unexpected_count``), the
    first ``max_examples`` pairs by row (``partial_unexpected_index_list``) and by label
    (``partial_unexpected_list``, when the table has a column per attribute).
    """

    attributes: list[str]
    max_examples: int = 5

    metric_dependencies = ("table.region_overlaps",)
    domain_keys: ClassVar[tuple[str, ...]] = ("row_condition", "condition_parser")
    success_keys = ("attributes", "max_examples")
    args_keys = ("attributes",)

    def _validate(
        self,
        metrics: dict[str, Any],
        runtime_configuration: dict[str, Any] | None = None,
        execution_engine: ExecutionEngine | None = None,
    ) -> dict[str, Any]:
        found = metrics["table.region_overlaps"]
        count = int(found["count"])
        return {
            "success": count == 0,
            "result": {
                "observed_value": count,
                "unexpected_count": count,
                "partial_unexpected_list": found["pairs"],
                "partial_unexpected_index_list": found["rows"],
            },
        }
