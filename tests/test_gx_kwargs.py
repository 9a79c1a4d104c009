"""``checks.gx_kwargs``: Great Expectations' kwargs lookups, reading an expectation's
configuration once per call, give the same evidence as GX's own methods. Every input-suite
case of the bad-input catalogue and the release suites on a good and a broken draft run
both ways: same verdict, same failure lines, same result (and sha256)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import great_expectations as gx_package
import pandas as pd
import pytest
from great_expectations.expectations.expectation import Expectation
from test_input_suites import CATALOGUE, good_register, good_snapshot, run_register, run_snapshot
from test_release_suites import QIS, SENSITIVE, Case

from checks import gx_kwargs
from checks.gx import SuiteResult


def _both_ways(monkeypatch: pytest.MonkeyPatch, run: Callable[[], Any]) -> tuple[Any, Any]:
    """``run()`` with the installed methods, then with GX's own."""
    patched = run()
    with monkeypatch.context() as m:
        for name, method in gx_kwargs.ORIGINAL.items():
            m.setattr(Expectation, name, method)
        original = run()
    return patched, original


def _same(a: SuiteResult, b: SuiteResult) -> None:
    assert (a.suite, a.success, a.failures, a.sha256) == (b.suite, b.success, b.failures, b.sha256)
    assert a.result == b.result


def test_the_pinned_gx_gets_the_methods() -> None:
    """The lock file pins GX 1.24: there the methods must be installed (else this module's
    speed-up would be lost without notice); on another version GX keeps its own."""
    assert gx_kwargs.APPLIED == gx_package.__version__.startswith("1.24.")
    assert gx_kwargs.APPLIED, f"GX {gx_package.__version__}: compare checks/gx_kwargs.py with its methods"
    for name in gx_kwargs.ORIGINAL:
        assert getattr(Expectation, name) is not gx_kwargs.ORIGINAL[name]


@pytest.mark.slow
@pytest.mark.parametrize("case", CATALOGUE, ids=[c.name for c in CATALOGUE])
def test_every_input_case_gives_the_same_evidence(monkeypatch: pytest.MonkeyPatch, case: Any) -> None:
    def run() -> SuiteResult:
        if case.table == "register":
            return run_register(case.mutate(good_register()))
        return run_snapshot(case.mutate(good_snapshot()), **case.overrides)

    patched, original = _both_ways(monkeypatch, run)
    assert not patched.success
    _same(patched, original)


def test_good_inputs_give_the_same_evidence(monkeypatch: pytest.MonkeyPatch) -> None:
    for run in (lambda: run_register(good_register()), lambda: run_snapshot(good_snapshot())):
        patched, original = _both_ways(monkeypatch, run)
        assert patched.success
        _same(patched, original)


@pytest.mark.parametrize("broken", [False, True])
def test_the_release_suites_give_the_same_evidence(monkeypatch: pytest.MonkeyPatch, broken: bool) -> None:
    case = Case(presence=True)
    draft = case.draft
    if broken:  # a group whose records all carry one protected value: localized and guarantee fail
        row = draft[draft[SENSITIVE] == "cancer"].iloc[0]
        draft = draft.copy()
        draft.loc[(draft[QIS] == row[QIS].tolist()).all(axis=1), SENSITIVE] = "cancer"
    patched, original = _both_ways(monkeypatch, lambda: case.suites(draft))
    assert list(patched) == list(original)
    assert any(not r.success for r in patched.values()) is broken
    for name in patched:
        _same(patched[name], original[name])


def test_runtime_kwargs_match_on_every_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Key by key, for expectations with and without explicit kwargs and a runtime override."""
    expectations = [
        gx_package.expectations.ExpectColumnValuesToBeInSet(column="a", value_set=["x", "y"], mostly=0.5),
        gx_package.expectations.ExpectColumnValuesToNotBeNull(column="a"),
        gx_package.expectations.ExpectTableRowCountToBeBetween(min_value=1, max_value=None),
    ]
    frame = pd.DataFrame({"a": ["x"]})
    assert len(frame) == 1
    for e in expectations:
        for runtime in (None, {}, {"result_format": "COMPLETE"}, {"catch_exceptions": False}):
            patched, original = _both_ways(
                monkeypatch,
                lambda e=e, r=runtime: (
                    e._get_runtime_kwargs(r),
                    e._get_success_kwargs(),
                    e._get_domain_kwargs(),
                    [e._get_success_kwarg(k, "absent") for k in (*e.success_keys, *e.runtime_keys, "no_such_key")],
                ),
            )
            assert patched == original
