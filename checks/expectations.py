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
  number of overlapping pairs (regions intersecting on every QI) and the first few.
- :class:`ExpectGroupsLDiverse`: column-pair map over one row per group; a group is
  unexpected when ``max_n_s · ℓ > n_j`` (a protected value's share above 1/ℓ).
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")

import numpy as np
import numpy.typing as npt
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

from anonymizer.arrays import expand_ranges
from anonymizer.privacy import UNDECIDED_BAND

IntArray = npt.NDArray[np.int64]

#: Pairs examined per numpy step when listing overlapping regions.
PAIR_CHUNK = 1 << 22

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


def _codes(mat: IntArray) -> IntArray:
    """Dense codes of the rows of an int matrix (n, k), k >= 0."""
    key = np.zeros(mat.shape[0], dtype=np.int64)
    for col in mat.T:
        radix = int(col.max()) + 1 if col.size else 1
        key = key * radix + col
        key = np.asarray(pd.factorize(key)[0], dtype=np.int64)
    return key


def _is_cut(lo: IntArray, hi: IntArray) -> bool:
    """Whether the distinct intervals are pairwise disjoint (equal intervals share a code)."""
    if lo.size == 0:
        return True
    pairs = np.unique(np.stack([lo, hi], axis=1), axis=0)  # sorted by lo, then hi
    return bool(np.all(pairs[1:, 0] > pairs[:-1, 1]))


def overlapping_pairs(lo: IntArray, hi: IntArray, max_examples: int = 5) -> tuple[int, IntArray]:
    """Pairs of rows whose boxes ``[lo, hi]`` (inclusive, shape (G, d)) intersect on every column.

    Columns whose distinct intervals are pairwise disjoint (a "cut", the usual case) can
    only intersect by being equal, so rows are first bucketed by their intervals on those
    columns. Among the remaining columns, the one giving the fewest candidate pairs is
    swept: after sorting by (bucket, lo), the rows whose lo falls inside row i's interval are
    one contiguous range (two intervals intersect iff one's lo lies in the other). The
    candidates are then filtered on every other column, chunk by chunk.

    Returns:
        (number of overlapping unordered pairs, the first ``max_examples`` as an int array
        (k, 2) of row positions, i < j).
    """
    lo = np.asarray(lo, dtype=np.int64)
    hi = np.asarray(hi, dtype=np.int64)
    g, d = lo.shape
    if g < 2:
        return 0, np.empty((0, 2), dtype=np.int64)
    cut = [a for a in range(d) if _is_cut(lo[:, a], hi[:, a])]
    free = [a for a in range(d) if a not in cut]
    bucket = _codes(lo[:, cut])
    span = int(max(hi.max(), 0)) + 2
    sweep_lo = np.zeros(g, dtype=np.int64)
    best = None
    choices: list[int | None] = list(free) if free else [None]
    for a in choices:
        s_lo = lo[:, a] if a is not None else np.zeros(g, dtype=np.int64)
        s_hi = hi[:, a] if a is not None else np.zeros(g, dtype=np.int64)
        key = bucket * span + s_lo
        order = np.argsort(key, kind="stable")
        sk = key[order]
        left = np.searchsorted(sk, bucket * span + s_lo, side="left")
        right = np.searchsorted(sk, bucket * span + s_hi, side="right")
        total = int((right - left).sum())
        if best is None or total < best[0]:
            best = (total, a, order, left, right)
            sweep_lo = s_lo
    assert best is not None
    _, chosen, order, left, right = best
    others = [a for a in free if a != chosen]
    count = 0
    examples: list[IntArray] = []
    for i, k in expand_ranges(left.astype(np.int64), right.astype(np.int64), PAIR_CHUNK):
        j = order[k]
        # each unordered pair once: j's lo inside i's interval; equal lo only with i < j
        keep = (j != i) & ((sweep_lo[j] > sweep_lo[i]) | (j > i))
        for a in others:
            keep &= (lo[j, a] <= hi[i, a]) & (lo[i, a] <= hi[j, a])
        hits = np.flatnonzero(keep)
        count += hits.size
        if hits.size and sum(e.shape[0] for e in examples) < max_examples:
            pairs = np.stack([np.minimum(i[hits], j[hits]), np.maximum(i[hits], j[hits])], axis=1)
            examples.append(pairs)
    listed = np.concatenate(examples) if examples else np.empty((0, 2), dtype=np.int64)
    listed = listed[np.lexsort((listed[:, 1], listed[:, 0]))][:max_examples] if listed.size else listed
    return count, listed


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
