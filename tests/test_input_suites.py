"""Input suites: ``checks.input_suites`` on a tiny register and snapshot.

A catalogue of bad inputs, each a small mutation of a good register or snapshot; every one
must fail, and one failure line must name the expectation (by its description), the column,
the number of unexpected values and, where Great Expectations gives them, the rows.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pytest

from anonymizer.arrays import IdLookup
from anonymizer.hierarchy import Hierarchy
from checks import input_suites
from checks.input_suites import DatasetColumns, PeriodOrder, explain, register_suite, snapshot_suite

ID = "id"
QIS = ["sex", "zipcode", "age"]
SENSITIVE = "disease"
DISEASES = ["flu", "cold", "fever", "gastritis", "hiv", "cancer"]
ZIPS = {"65001": "6500*", "65002": "6500*", "65003": "6500*", "65011": "6501*", "65012": "6501*"}
PERIOD, LAST = "2024-02", "2024-01"


def _hierarchy(name: str, rows: list[list[str]]) -> Hierarchy:
    return Hierarchy.from_rows(name, [(i + 1, r) for i, r in enumerate(rows)], f"hierarchies/{name}.csv")


HIERARCHIES = {
    "sex": _hierarchy("sex", [["M", "*"], ["F", "*"]]),
    "zipcode": _hierarchy("zipcode", [[z, m, "*"] for z, m in ZIPS.items()]),
    "age": _hierarchy("age", [[str(a), f"[{a // 5 * 5}, {a // 5 * 5 + 4}]", "*"] for a in range(20, 30)]),
}


def good_register() -> pd.DataFrame:
    """20 individuals p000..p019, every column text (pandas' string dtype, as the reader gives)."""
    zips = list(ZIPS)
    rows = [(f"p{i:03d}", "MF"[i % 2], zips[i % len(zips)], str(20 + i % 10)) for i in range(20)]
    return pd.DataFrame(rows, columns=[ID, *QIS]).astype("str")


def good_snapshot() -> pd.DataFrame:
    """12 of the register's individuals with a sensitive value each."""
    reg = good_register().iloc[:12].reset_index(drop=True)
    reg[SENSITIVE] = pd.array([DISEASES[i % len(DISEASES)] for i in range(12)], dtype="str")
    return reg


REGISTER_IDS = set(good_register()[ID])


def run_register(reg: pd.DataFrame) -> Any:
    return register_suite(reg, DatasetColumns(ID, QIS, HIERARCHIES))


def run_snapshot(snap: pd.DataFrame, **overrides: Any) -> Any:
    kwargs: dict[str, Any] = {
        "register_ids": REGISTER_IDS,
        "sensitive_domain": DISEASES,
        "period": PERIOD,
        "last_period": LAST,
        "previous_rows": 12,
    }
    kwargs.update(overrides)
    columns = DatasetColumns(ID, QIS, HIERARCHIES, SENSITIVE, kwargs.pop("sensitive_domain"))
    register_ids = kwargs.pop("register_ids")
    id_lookup = kwargs.pop("id_lookup", None)
    return snapshot_suite(snap, columns, register_ids, PeriodOrder(**kwargs), id_lookup=id_lookup)


def _set(df: pd.DataFrame, row: int, column: str, value: Any) -> pd.DataFrame:
    df = df.copy()
    df[column] = df[column].astype(object)
    df.loc[row, column] = value
    df[column] = df[column].astype("str")
    return df


@dataclass(frozen=True)
class Case:
    name: str
    table: str  # "register" or "snapshot"
    mutate: Callable[[pd.DataFrame], pd.DataFrame]
    expect: list[str]  # substrings of one failure line
    overrides: dict[str, Any] = field(default_factory=dict)


def _drop(column: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    return lambda df: df.drop(columns=[column])


def _same(df: pd.DataFrame) -> pd.DataFrame:
    return df


CATALOGUE = [
    # ---- snapshot
    Case("missing column", "snapshot", _drop("age"), ["the snapshot has a column 'age'", "expect_column_to_exist"]),
    Case(
        "missing column in the column set",
        "snapshot",
        _drop("age"),
        ["holds exactly the columns", "observed ['disease', 'id', 'sex', 'zipcode']"],
    ),
    Case(
        "extra column",
        "snapshot",
        lambda df: df.assign(name=["x"] * len(df)).astype("str"),
        ["holds exactly the columns 'id', 'sex', 'zipcode', 'age', 'disease' and no other", "'name'"],
    ),
    Case(
        "null QI",
        "snapshot",
        lambda df: _set(df, 3, "sex", None),
        ["no value of quasi-identifier 'sex' in the snapshot is missing", "column 'sex'", "1 unexpected", "row(s) [3]"],
    ),
    Case(
        "empty QI",
        "snapshot",
        lambda df: _set(df, 2, "zipcode", ""),
        ["quasi-identifier 'zipcode' in the snapshot is empty or blank", "1 unexpected", "['']", "row(s) [2]"],
    ),
    Case(
        "blank QI",
        "snapshot",
        lambda df: _set(df, 7, "age", "  "),
        ["quasi-identifier 'age' in the snapshot is empty or blank", "column 'age'", "1 unexpected", "row(s) [7]"],
    ),
    Case(
        "empty sensitive value",
        "snapshot",
        lambda df: _set(df, 4, SENSITIVE, ""),
        ["sensitive attribute 'disease' in the snapshot is empty", "column 'disease'", "1 unexpected", "row(s) [4]"],
    ),
    Case(
        "null sensitive value",
        "snapshot",
        lambda df: _set(df, 5, SENSITIVE, None),
        ["sensitive attribute 'disease' in the snapshot is missing", "1 unexpected", "row(s) [5]"],
    ),
    Case(
        "duplicate id",
        "snapshot",
        lambda df: _set(df, 5, ID, "p000"),
        ["appears at most once in the snapshot", "column 'id'", "2 unexpected", "['p000', 'p000']", "row(s) [0, 5]"],
    ),
    Case(
        "id missing from register",
        "snapshot",
        lambda df: _set(df, 6, ID, "zz999"),
        ["every snapshot individual is in the population register", "column 'id'", "1 unexpected", "['zz999']", "[6]"],
    ),
    Case(
        "empty id",
        "snapshot",
        lambda df: _set(df, 2, ID, ""),
        ["no value of id column 'id' in the snapshot is empty", "column 'id'", "1 unexpected", "row(s) [2]"],
    ),
    Case(
        "null id",
        "snapshot",
        lambda df: _set(df, 8, ID, None),
        ["no value of id column 'id' in the snapshot is missing", "1 unexpected", "row(s) [8]"],
    ),
    Case(
        "QI value not a leaf",
        "snapshot",
        lambda df: _set(df, 1, "age", "[20, 24]"),
        ["'age' in the snapshot is a leaf of its hierarchy hierarchies/age.csv", "1 unexpected", "row(s) [1]"],
    ),
    Case(
        "sensitive value outside domain",
        "snapshot",
        lambda df: _set(df, 9, SENSITIVE, "ebola"),
        ["'disease' is in its declared domain (6 values)", "column 'disease'", "1 unexpected", "['ebola']", "[9]"],
    ),
    Case(
        "period equal to last",
        "snapshot",
        _same,
        ["period '2024-01' is later than the last published period '2024-01'", "observed '2024-01'"],
        {"period": "2024-01"},
    ),
    Case(
        "period earlier than last",
        "snapshot",
        _same,
        ["period '2023-12' is later than the last published period '2024-01'", "observed '2023-12'"],
        {"period": "2023-12"},
    ),
    Case(
        "empty period, first release",
        "snapshot",
        _same,
        ["period '' is a non-empty label", "observed ''"],
        {"period": "", "last_period": None},
    ),
    Case(
        "row count halved vs previous",
        "snapshot",
        _same,
        ["has between 13 and 50 rows", "previous snapshot's 25", "observed 12"],
        {"previous_rows": 25},
    ),
    Case(
        "row count doubled beyond bound",
        "snapshot",
        _same,
        ["has between 3 and 10 rows", "previous snapshot's 5", "observed 12"],
        {"previous_rows": 5},
    ),
    Case(
        "row count outside custom bounds",
        "snapshot",
        _same,
        ["has between 9 and 11 rows (0.9 to 1.1 times", "observed 12"],
        {"previous_rows": 10, "row_bounds": (0.9, 1.1)},
    ),
    Case(
        "numeric-typed column",
        "snapshot",
        lambda df: df.assign(age=df["age"].astype(int)),
        ["every value of quasi-identifier 'age' in the snapshot is read as text", "column 'age'", "int64"],
    ),
    Case(
        "mixed-typed column",
        "snapshot",
        lambda df: df.assign(sex=[*df["sex"].iloc[:-1], 1]),
        ["quasi-identifier 'sex' in the snapshot is read as text", "1 unexpected", "[1]", "row(s) [11]"],
    ),
    # ---- register
    Case(
        "register duplicate id",
        "register",
        lambda df: _set(df, 17, ID, "p003"),
        ["at most once in the population register", "column 'id'", "2 unexpected", "['p003', 'p003']", "[3, 17]"],
    ),
    Case(
        "register QI not a leaf",
        "register",
        lambda df: _set(df, 11, "zipcode", "6500*"),
        ["'zipcode' in the population register is a leaf of its hierarchy hierarchies/zipcode.csv", "1 unexpected"],
    ),
    Case(
        "register missing QI column",
        "register",
        _drop("sex"),
        ["the population register has a column 'sex'", "expect_column_to_exist"],
    ),
    Case(
        "register empty id",
        "register",
        lambda df: _set(df, 0, ID, " "),
        ["id column 'id' in the population register is empty or blank", "1 unexpected", "row(s) [0]"],
    ),
    Case(
        "register null QI",
        "register",
        lambda df: _set(df, 19, "age", None),
        ["quasi-identifier 'age' in the population register is missing", "1 unexpected", "row(s) [19]"],
    ),
    Case(
        "register numeric column",
        "register",
        lambda df: df.assign(age=df["age"].astype(int)),
        ["'age' in the population register is read as text", "int64"],
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize("case", CATALOGUE, ids=[c.name for c in CATALOGUE])
def test_bad_input_fails_with_a_specific_line(case: Case) -> None:
    if case.table == "register":
        result = run_register(case.mutate(good_register()))
    else:
        result = run_snapshot(case.mutate(good_snapshot()), **case.overrides)
    assert result.success is False
    assert result.failures
    matching = [line for line in result.failures if all(s in line for s in case.expect)]
    assert matching, f"no failure line has all of {case.expect}:\n" + "\n".join(result.failures)
    text = explain(result)
    assert text.startswith(f"{case.table}: FAILED")
    assert matching[0] in text


def test_good_inputs_pass() -> None:
    reg = run_register(good_register())
    snap = run_snapshot(good_snapshot())
    for r in (reg, snap):
        assert r.success is True, r.failures
        assert r.failures == []
        assert explain(r).startswith(f"{r.suite}: passed")
    assert reg.suite == "register" and snap.suite == "snapshot"


def test_first_release_and_no_row_count_check() -> None:
    r = run_snapshot(good_snapshot(), last_period=None, previous_rows=None, sensitive_domain=None)
    assert r.success, r.failures
    types = [x["expectation_config"]["type"] for x in r.result["results"]]
    assert "expect_table_row_count_to_be_between" not in types
    assert "expect_column_values_to_be_in_set" in types  # the QI leaves, not the domain
    assert "expect_period_to_follow" in types


def test_row_count_at_the_bounds_passes() -> None:
    assert run_snapshot(good_snapshot(), previous_rows=24).success  # 12 = 0.5 * 24
    assert run_snapshot(good_snapshot(), previous_rows=6).success  # 12 = 2 * 6
    assert not run_snapshot(good_snapshot(), previous_rows=25).success


def test_register_extra_columns_are_allowed() -> None:
    reg = good_register().assign(name=["x"] * 20).astype("str")
    assert run_register(reg).success


def test_result_is_json_and_sha256_stable() -> None:
    for run in (lambda: run_register(good_register()), lambda: run_snapshot(_set(good_snapshot(), 6, ID, "zz"))):
        a, b = run(), run()
        text = json.dumps(a.result, sort_keys=True)
        assert json.loads(text) == a.result
        assert a.sha256 == b.sha256
        assert a.result == b.result
        assert len(a.sha256) == 64


@pytest.mark.slow
def test_register_ids_as_set_list_or_index_give_the_same_evidence() -> None:
    ids = sorted(REGISTER_IDS)
    shas = {
        run_snapshot(good_snapshot(), register_ids=x).sha256
        for x in (set(ids), ids, list(reversed(ids)), pd.Index(ids), [*ids, *ids[:3]])
    }
    assert len(shas) == 1


def test_the_register_id_lookup_gives_the_same_evidence() -> None:
    ids = pd.Index(sorted(REGISTER_IDS), dtype=object)
    other = pd.Index(sorted(REGISTER_IDS), dtype=object)  # its fingerprint comes from the lookup's hashes
    built = IdLookup.of(other)
    assert built is not None
    used: list[int] = []

    class Counted(IdLookup):
        def find(self, ids: Any, wanted: Any) -> Any:
            used.append(len(wanted))
            return super().find(ids, wanted)

    lookup = Counted(built.hashes, built.rows)
    for table in (good_snapshot(), _set(good_snapshot(), 6, ID, "zz")):  # "zz" is not in the register
        plain = run_snapshot(table, register_ids=ids)
        looked_up = run_snapshot(table, register_ids=other, id_lookup=lookup)
        assert (looked_up.success, looked_up.failures) == (plain.success, plain.failures)
        assert looked_up.sha256 == plain.sha256
    # the expectation looked the ids up through it: once for the good snapshot; for the bad
    # one in the run on the rows and again in the whole suite's run that names the lines
    assert used == [len(good_snapshot())] * 3
    assert not plain.success and any("population register" in f for f in plain.failures)
    assert input_suites._REFERENCES.get({}) == {}  # released after the run


def test_register_rows_looked_up_by_the_caller_give_the_same_evidence() -> None:
    """A caller that looked the snapshot's ids up already passes their register rows: the
    expectation reads them and looks nothing up (the lookup here refuses to), with the same
    verdict, failure lines and evidence as a lookup of its own."""
    ids = pd.Index(sorted(REGISTER_IDS), dtype=object)
    built = IdLookup.of(ids)
    assert built is not None

    class Refusing(IdLookup):
        def find(self, ids: Any, wanted: Any) -> Any:
            raise AssertionError("looked up again")

    lookup = Refusing(built.hashes, built.rows)
    columns = DatasetColumns(ID, QIS, HIERARCHIES, SENSITIVE, DISEASES)
    order = PeriodOrder(period=PERIOD, last_period=LAST, previous_rows=12)
    for table in (good_snapshot(), _set(good_snapshot(), 6, ID, "zz")):  # "zz" is not in the register
        plain = run_snapshot(table, register_ids=ids)
        rows = ids.get_indexer(pd.Index(table[ID]))
        given = snapshot_suite(table, columns, ids, order, id_lookup=lookup, register_rows=rows)
        assert (given.success, given.failures, given.sha256) == (plain.success, plain.failures, plain.sha256)
    assert not plain.success and any("population register" in f for f in plain.failures)
    wrong = np.zeros(len(good_snapshot()) - 1, dtype=np.int64)
    with pytest.raises(ValueError, match="register rows"):
        snapshot_suite(good_snapshot(), columns, ids, order, register_rows=wrong)
    assert input_suites._REFERENCES.get({}) == {}  # released after the run


def test_register_ids_are_not_copied_into_the_evidence() -> None:
    big = {f"q{i:06d}" for i in range(50_000)} | REGISTER_IDS
    r = run_snapshot(good_snapshot(), register_ids=big)
    assert r.success
    text = json.dumps(r.result)
    assert "q000123" not in text
    assert "population register (50020 ids, fingerprint" in text
    assert input_suites._REFERENCES.get({}) == {}  # released after the run


def test_a_different_register_gives_a_different_fingerprint() -> None:
    a = run_snapshot(good_snapshot())
    b = run_snapshot(good_snapshot(), register_ids=REGISTER_IDS | {"p999"})
    assert a.sha256 != b.sha256


def test_a_fingerprint_is_the_same_from_the_ids_or_their_lookup_hashes() -> None:
    """The lookup's hashes (in another order) give the fingerprint of hashing the ids."""
    from anonymizer.arrays import IdLookup

    ids = pd.Index(sorted(REGISTER_IDS))
    lookup = IdLookup.of(ids)
    assert lookup is not None
    assert input_suites.reference_key("population register", ids, lookup.hashes) == input_suites.reference_key(
        "population register", ids
    )


def test_every_expectation_has_a_description() -> None:
    bad = _set(good_snapshot(), 6, ID, "zz")
    for r in (run_register(good_register()), run_snapshot(bad)):
        for x in r.result["results"]:
            assert x["expectation_config"].get("description"), x["expectation_config"]["type"]


def test_missing_column_is_reported_once_not_as_errors() -> None:
    r = run_snapshot(good_snapshot().drop(columns=[SENSITIVE]))
    assert not r.success
    assert not any("error:" in line for line in r.failures), r.failures
    assert len(r.failures) == 2  # the column set, and the column exists


def test_explain_lists_missing_and_unexpected_columns() -> None:
    snap = good_snapshot().drop(columns=["age"]).assign(name=["x"] * 12).astype("str")
    text = explain(run_snapshot(snap))
    assert "missing 'age'" in text and "unexpected 'name'" in text
    assert text.splitlines()[0].startswith("snapshot: FAILED (")


@pytest.mark.slow
def test_checks_layer_does_not_import_serialpub_or_state() -> None:
    code = (
        "import sys, checks.input_suites; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('serialpub', 'state', 'dags')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
