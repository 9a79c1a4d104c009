"""Running Great Expectations suites on pandas DataFrames, in memory, and turning the
results into evidence: a JSON-serializable record with a checksum and a one-line
explanation of every failed expectation.

Great Expectations 1.x with an ephemeral context: no project folder, no network, no
telemetry (GX_ANALYTICS_ENABLED=False is set before import); GX itself creates a
temporary directory for its docs site, which serialpub does not use. The fields of a
result that change on every run (clock, run and validation ids, per-expectation UUIDs)
are dropped, so the same inputs give the same evidence and the same sha256.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any

os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")

import great_expectations as gx
import pandas as pd
from great_expectations.data_context.types.base import ProgressBarsConfig
from great_expectations.execution_engine import pandas_execution_engine
from great_expectations.expectations.expectation import Expectation

from anonymizer.quoting import quoted
from checks import gx_kwargs  # noqa: F401  (GX reads an expectation's kwargs once per lookup)

# GX fingerprints every in-memory batch below its size threshold with an md5 of pandas' row
# hashes (the result's meta.batch_markers.pandas_data_fingerprint): a pass over every row,
# and no verdict depends on it. The evidence binds its inputs otherwise: the
# manifest records the sha256 of the register and snapshot bytes (docs/validation.md), so
# no batch is fingerprinted. (GX has no setting for it; its threshold is a module constant.)
pandas_execution_engine.HASH_THRESHOLD = 0

#: result fields that differ between two runs on the same inputs
_VOLATILE_META = ("run_id", "validation_time", "validation_id")


@dataclass(frozen=True)
class SuiteResult:
    """Outcome of one suite on one table.

    Attributes:
        suite: the suite's name.
        success: every expectation met.
        failures: one readable line per failed expectation (what, where, how many).
        result: the full Great Expectations result as JSON-compatible data.
        sha256: checksum of ``result`` serialized with sorted keys.
    """

    suite: str
    success: bool
    failures: list[str] = field(default_factory=list)
    result: dict[str, Any] = field(default_factory=dict)
    sha256: str = ""


def _context() -> Any:
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    # an ephemeral context keeps its data sources in its config object; "saving" that config
    # only serializes it to YAML into an in-memory store nothing reads back, once per data
    # source, asset and batch definition added (GX's own docstring: "Ephemeral: not saved")
    context._save_project_config = _not_saved  # type: ignore[method-assign]
    return context


def _not_saved() -> None:
    return None


def _plain(x: Any) -> Any:
    """Numpy scalars inside lists and tuples as Python values, so failure lines read
    ``(0.98, True)`` rather than ``(np.float64(0.98), np.True_)``."""
    if isinstance(x, list | tuple):
        return type(x)(_plain(v) for v in x)
    return x.item() if hasattr(x, "item") and getattr(x, "ndim", None) == 0 else x


def _describe(r: Any, row_label: str = "row") -> str:
    cfg = r.expectation_config
    kwargs = {k: v for k, v in cfg.kwargs.items() if k not in ("batch_id", "result_format")}
    where = f" column {kwargs.pop('column')!r}" if "column" in kwargs else ""
    res = r.result or {}
    detail = ""
    if res.get("unexpected_count"):
        examples = res.get("partial_unexpected_list") or res.get("unexpected_list") or []
        rows = res.get("partial_unexpected_index_list") or res.get("unexpected_index_list") or []
        detail = f": {res['unexpected_count']} unexpected value(s)"
        if examples:
            detail += f", e.g. {quoted(_plain(list(examples[:3])))}"
        if rows:
            detail += f" at {row_label}(s) {_plain(list(rows)[:3])!r}"
    elif "observed_value" in res:
        detail = f": observed {res['observed_value']!r}"
    if r.exception_info and r.exception_info.get("raised_exception"):
        detail += f" (error: {r.exception_info.get('exception_message')})"
    description = getattr(cfg, "description", None) or cfg.type
    return f"{description}{where}{detail}"


def run_suite(name: str, table: pd.DataFrame, expectations: list[Expectation], row_label: str = "row") -> SuiteResult:
    """Validate ``table`` against ``expectations`` in an ephemeral context.

    Args:
        row_label: what the table's index values are, as the failure lines name them
            (``"row"`` for a 0-based position; ``"line"`` when the caller indexed the table
            by file line, as the input suites do).

    Returns:
        the :class:`SuiteResult`; never raises for failed expectations.
    """
    context = _context()
    batch_def = (
        context.data_sources.add_pandas(name=f"{name}_source")
        .add_dataframe_asset(name=f"{name}_table")
        .add_batch_definition_whole_dataframe(f"{name}_batch")
    )
    # handed over at construction: add_expectation would save the suite to the context's
    # store once per expectation
    suite = context.suites.add(gx.ExpectationSuite(name=name, expectations=list(expectations)))
    vd = context.validation_definitions.add(gx.ValidationDefinition(name=f"{name}_run", data=batch_def, suite=suite))
    outcome = vd.run(
        batch_parameters={"dataframe": table},
        result_format={"result_format": "SUMMARY", "partial_unexpected_count": 5, "include_unexpected_rows": False},
    )
    payload = json.loads(json.dumps(outcome.to_json_dict(), default=str))
    meta = payload.get("meta") or {}
    for key in _VOLATILE_META:
        meta.pop(key, None)
    (meta.get("batch_markers") or {}).pop("ge_load_time", None)
    for r in payload.get("results", []):
        (r.get("expectation_config") or {}).pop("id", None)
    failures = [_describe(r, row_label) for r in outcome.results if not r.success]
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    return SuiteResult(suite=name, success=bool(outcome.success), failures=failures, result=payload, sha256=digest)
