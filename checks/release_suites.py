"""Validation suites of a draft release, run before sign-off (docs/design.md sections 1 and 5).

:func:`release_suite` runs five Great Expectations suites and returns their results:

- ``contract``: the draft's columns are exactly the QIs and the sensitive column (no
  identifier, nothing derived from one), every column is text without nulls, every QI
  value is a node label of its hierarchy, the sensitive values lie in their domain. Every
  one of these reads only the column names or the set of values of a column, so it runs on
  each column's distinct values (:func:`checks.distinct.run_suite_on_distinct_values`:
  the same verdicts, and a failure is reported from a run on the rows, naming them);
- ``disjointness``: group regions pairwise disjoint
  (:class:`checks.expectations.ExpectGroupRegionsPairwiseDisjoint` over
  :func:`checks.breach.region_spans`);
- ``guarantee``: the breach table (:func:`checks.breach.compute_breach`, recomputed from
  the draft, the register, the hierarchies and the state before, one row per unit of
  individuals that share every figure) has no row with p > 1/ℓ
  (:class:`checks.expectations.ExpectBreachProbabilityAtMost`);
- ``coverage`` (mechanism-aware counting only): every snapshot record lies in a published
  region and no group publishes more than the snapshot holds there;
- ``localized``: every group's largest share of one protected value is at most 1/ℓ
  (:class:`checks.expectations.ExpectGroupsLDiverse`), a cheap second line of defence;
- ``utility``: a one-row table of utility figures checked with the built-in
  ``ExpectColumnValuesToBeBetween`` against the configured thresholds (None skips one).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import great_expectations.expectations as gxe
import numpy as np
import pandas as pd
from great_expectations.expectations.expectation import Expectation

from anonymizer.hierarchy import Hierarchy
from anonymizer.privacy import UNDECIDED_BAND
from checks.breach import BreachComputation, Draft, region_spans
from checks.distinct import run_suite_on_distinct_values
from checks.expectations import (
    ExpectBreachProbabilityAtMost,
    ExpectColumnValuesToBeText,
    ExpectGroupRegionsPairwiseDisjoint,
    ExpectGroupsLDiverse,
)
from checks.gx import SuiteResult, run_suite

#: Utility figure -> threshold key of ``thresholds``.
UTILITY_THRESHOLDS: Mapping[str, str] = MappingProxyType(
    {
        "suppression_rate": "max_suppression_rate",
        "query_error": "max_query_error",
        "avg_group_size": "max_avg_group_size",
        "max_group_size": "max_group_size",
    }
)
#: Utility figure -> threshold key of a lower bound (the release's gain over the
#: histogram-only baseline, docs/configuration.md).
UTILITY_MINIMA: Mapping[str, str] = MappingProxyType({"query_gain": "min_gain"})


def contract_expectations(
    qis: Sequence[str],
    sensitive: str,
    hierarchies: Mapping[str, Hierarchy],
    id_column: str = "id",
    sensitive_domain: Sequence[str] | None = None,
) -> list[Expectation]:
    """Expectations of the release contract (docs/design.md section 5) on the draft table."""
    columns = [*qis, sensitive]
    out: list[Expectation] = [
        gxe.ExpectTableColumnsToMatchSet(
            column_set=columns,
            exact_match=True,
            description=(
                f"columns are exactly the quasi-identifiers and {sensitive!r}: no identifier column "
                f"(such as {id_column!r}) and no other column"
            ),
        )
    ]
    for c in columns:
        out.append(gxe.ExpectColumnValuesToNotBeNull(column=c, description=f"{c!r} has no empty value"))
        out.append(
            ExpectColumnValuesToBeText(column=c, description=f"{c!r} holds text (generalized values are strings)")
        )
    for q in qis:
        out.append(
            gxe.ExpectColumnValuesToBeInSet(
                column=q,
                value_set=list(hierarchies[q].labels),
                description=f"every value of {q!r} is a node label of its hierarchy",
            )
        )
    if sensitive_domain is not None:
        out.append(
            gxe.ExpectColumnValuesToBeInSet(
                column=sensitive,
                value_set=list(sensitive_domain),
                description=f"every value of {sensitive!r} is in the sensitive domain",
            )
        )
    return out


def name_breaches(result: SuiteResult, table: pd.DataFrame, ell: float, examples: int = 5) -> SuiteResult:
    """``result`` (a failed guarantee suite) with one more failure line naming the first
    violating pairs of the breach table by register id and value, with p and the group's
    figures: GX names unexpected rows by their position in the breach table, which means
    nothing to a reader. A table with one row per unit (``weight`` individuals sharing
    every figure) names one of them and counts them all.

    The rows are those the expectation rejects: the exact verdict ``exceeds``, or p more
    than :data:`anonymizer.privacy.UNDECIDED_BAND` above 1/ℓ.
    """
    bad = table[table["exceeds"].to_numpy(dtype=bool) | (table["p"].to_numpy() > 1.0 / ell + UNDECIDED_BAND)]
    if bad.empty:
        return result
    weight = bad["weight"].to_numpy() if "weight" in bad.columns else np.ones(len(bad), dtype=np.int64)
    shown = bad.sort_values("p", ascending=False, kind="stable").head(examples)
    shown_weight = shown["weight"].to_numpy() if "weight" in shown.columns else np.ones(len(shown), dtype=np.int64)
    pairs = "; ".join(
        f"individual {str(r.individual)!r}"
        + (f" (and {int(w) - 1} more with the same figures)" if w > 1 else "")
        + f" and {str(r.value)!r}: p = {r.p:.6f} in group {r.group} (n_j = {r.n_j}, n_s = {r.n_s})"
        for r, w in zip(shown.itertuples(index=False), shown_weight, strict=True)
    )
    # every member of a unit has the same pairs, so individuals = distinct units' weights
    units = bad.drop_duplicates("individual")
    individuals = int(units["weight"].to_numpy().sum()) if "weight" in bad.columns else len(units)
    line = (
        f"{int(weight.sum())} (individual, protected value) pair(s) of {individuals} individual(s) above "
        f"1/{ell:g}, largest first: {pairs}"
    )
    return SuiteResult(
        suite=result.suite,
        success=False,
        failures=[*result.failures, line],
        result=result.result,
        sha256=result.sha256,
    )


def release_suite(
    draft: Draft,
    breach: BreachComputation | Callable[[], BreachComputation],
    ell: float,
    thresholds: Mapping[str, float | None],
    metrics: Mapping[str, float | None] | None = None,
    id_column: str = "id",
    sensitive_domain: Sequence[str] | None = None,
) -> list[SuiteResult]:
    """Run the release suites on a draft; see the module docstring.

    Args:
        draft: the draft as read back from its staging folder.
        breach: :func:`checks.breach.compute_breach` of the draft (per individual or per
            unit); mechanism-aware when computed with the snapshot, which adds the
            ``coverage`` suite. Or a function returning it, called once after the contract and
            disjointness suites, which do not need it (the caller computes it meanwhile).
        ell: ℓ (the bound is 1/ℓ).
        thresholds: ``max_suppression_rate``, ``max_query_error``, ``min_gain``, ``max_avg_group_size``,
            ``max_group_size``; a missing or None threshold is not checked.
        metrics: figures computed by the caller: ``suppression_rate`` (suppressed records /
            snapshot records), ``query_error`` (average relative error of the query workload under
            the register-joint estimator, docs/data-users.md) and ``query_gain`` (the
            histogram-only baseline's error minus ``query_error``).
            Group sizes are computed here from the draft (published records per group).
        id_column: the register's id column, named in the contract's failure message.
        sensitive_domain: the admissible sensitive values; None skips that check.

    Returns:
        one :class:`checks.gx.SuiteResult` per suite, in the order contract, disjointness,
        guarantee, coverage (mechanism-aware only), localized, utility.
    """
    qis, sensitive, hierarchies = draft.qis, draft.sensitive, draft.hierarchies
    # on the distinct values: the rows repeat them, the verdict is the same (checks/distinct.py)
    contract = contract_expectations(qis, sensitive, hierarchies, id_column, sensitive_domain)
    # the columns factorized once (draft.labels): the distinct values here, the groups of the
    # disjointness suite and of the breach computation on the other thread
    results = [
        run_suite_on_distinct_values(
            "contract", draft.table, contract, [*qis, sensitive], distinct=draft.labels.distinct
        )
    ]
    spans = region_spans(draft, qis, hierarchies)
    results.append(
        run_suite(
            "disjointness",
            spans,
            [
                ExpectGroupRegionsPairwiseDisjoint(
                    attributes=list(qis), description="group regions are pairwise disjoint"
                )
            ],
        )
    )
    computed = breach() if callable(breach) else breach
    guarantee = run_suite(
        "guarantee",
        computed.table,
        [
            ExpectBreachProbabilityAtMost(
                bound=1.0 / float(ell),
                description=f"global guarantee: every (individual, protected value) has p <= 1/{ell:g}",
            )
        ],
    )
    results.append(guarantee if guarantee.success else name_breaches(guarantee, computed.table, float(ell)))
    if computed.mechanism_aware:
        results.append(
            run_suite(
                "coverage",
                pd.DataFrame(
                    {"uncovered_records": [computed.uncovered_records], "excess_records": [computed.excess_records]}
                ),
                [
                    gxe.ExpectColumnValuesToBeBetween(
                        column="uncovered_records",
                        max_value=0,
                        description="every snapshot record lies in a published group's region, where the "
                        "mechanism-aware counts charge it (a region that holds records but publishes none "
                        "would link its candidates unseen)",
                    ),
                    gxe.ExpectColumnValuesToBeBetween(
                        column="excess_records",
                        max_value=0,
                        description="no group publishes more records, or more of a protected value, than the "
                        "snapshot holds in its region (the draft is this snapshot's anonymization)",
                    ),
                ],
            )
        )
    results.append(
        run_suite(
            "localized",
            computed.groups,
            [
                ExpectGroupsLDiverse(
                    ell=float(ell),
                    description=f"localized {ell:g}-diversity: no group's share of a protected value exceeds 1/{ell:g}",
                ),
                gxe.ExpectColumnPairValuesAToBeGreaterThanB(
                    column_A="candidates",
                    column_B="records",
                    or_equal=True,
                    description="no group holds more records than register individuals in its region",
                ),
            ],
        )
    )
    records = computed.groups["records"].to_numpy()
    figures: dict[str, Any] = dict(metrics or {})
    figures["avg_group_size"] = float(records.mean()) if records.size else 0.0
    figures["max_group_size"] = float(records.max()) if records.size else 0.0
    expectations: list[Expectation] = []
    row: dict[str, list[float]] = {}
    bounds = [(f, k, "max") for f, k in UTILITY_THRESHOLDS.items()] + [(f, k, "min") for f, k in UTILITY_MINIMA.items()]
    for figure, key, side in bounds:
        limit = thresholds.get(key)
        if limit is None:
            continue
        value = figures.get(figure)
        row[figure] = [float(value) if value is not None else float("nan")]
        expectations.append(
            gxe.ExpectColumnValuesToBeBetween(
                column=figure, max_value=float(limit), description=f"{figure} at most {key} = {limit:g}"
            )
            if side == "max"
            else gxe.ExpectColumnValuesToBeBetween(
                column=figure, min_value=float(limit), description=f"{figure} at least {key} = {limit:g}"
            )
        )
        if value is None:
            expectations.append(gxe.ExpectColumnValuesToNotBeNull(column=figure, description=f"{figure} was computed"))
    table = pd.DataFrame(row) if row else pd.DataFrame({"none": [np.nan]})
    results.append(run_suite("utility", table, expectations))
    return results
