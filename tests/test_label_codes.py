"""A draft's columns factorized once (checks/labels.py) give every check what it computed
from the table before: the distinct values of the contract suite, the record nodes and
groups of the disjointness suite and the breach computation."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest

from anonymizer.hierarchy import Hierarchy
from anonymizer.regions import record_nodes
from checks.breach import Draft, draft_groups, region_spans
from checks.distinct import distinct_table
from checks.labels import LabelCodes

QIS = ["sex", "age"]


def _hierarchies() -> dict[str, Hierarchy]:
    ages = [[str(a), f"[{a // 5 * 5}, {a // 5 * 5 + 4}]", "*"] for a in range(20, 30)]
    return {
        "sex": Hierarchy.from_rows("sex", [(1, ["M", "*"]), (2, ["F", "*"])], "sex"),
        "age": Hierarchy.from_rows("age", [(i + 1, r) for i, r in enumerate(ages)], "age"),
    }


def _table(dtype: str) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    labels = {"sex": ["M", "F", "*", "X"], "age": ["21", "[25, 29]", "*", "[20, 24]", "99"]}
    out = {q: pd.Series(rng.choice(labels[q], size=200), dtype=dtype) for q in QIS}
    out["diagnosis"] = pd.Series(rng.choice(["a", "b", "c"], size=200), dtype=dtype)
    return pd.DataFrame(out)


TABLES = {
    "str": lambda: _table("str"),
    "object": lambda: _table("object"),
    "category": lambda: _table("category"),
    "with a missing value": lambda: _table("object").assign(diagnosis=lambda t: t["diagnosis"].where(t.index != 7)),
    "with a missing label": lambda: _table("str").assign(age=lambda t: t["age"].where(t.index != 3)),
}


@pytest.mark.parametrize("make", TABLES.values(), ids=TABLES.keys())
def test_distinct_values_are_those_of_drop_duplicates(make) -> None:
    table = make()
    labels = LabelCodes(table)
    for column in table.columns:
        pd.testing.assert_series_equal(
            labels.distinct(column), table[column].drop_duplicates().reset_index(drop=True), check_names=False
        )
    columns = list(table.columns)
    pd.testing.assert_frame_equal(distinct_table(table, columns, labels.distinct), distinct_table(table, columns))


@pytest.mark.parametrize("make", TABLES.values(), ids=TABLES.keys())
def test_nodes_groups_and_spans_are_those_of_the_table(make) -> None:
    table, hs = make(), _hierarchies()
    draft = Draft(table, QIS, "diagnosis", hs)
    nodes = draft.labels.nodes(QIS, hs)
    assert (nodes == record_nodes(table, QIS, [hs[q] for q in QIS])).all()
    assert (nodes < 0).any() and (nodes >= 0).any()  # labels outside the hierarchies are -1, the others nodes
    assert draft.labels.nodes(QIS, hs) is nodes  # once per draft
    for protected in ([], ["a", "c"]):
        by_draft = draft_groups(draft, QIS, "diagnosis", hs, protected)
        by_table = draft_groups(table, QIS, "diagnosis", hs, protected)
        for name in ("nodes", "records", "counts", "group_of_record"):
            assert np.array_equal(getattr(by_draft, name), getattr(by_table, name)), name
        assert by_draft.unknown_records == by_table.unknown_records
    pd.testing.assert_frame_equal(region_spans(draft, QIS, hs), region_spans(table, QIS, hs))


def test_codes_are_kept_through_a_pickle() -> None:
    draft = Draft(_table("str"), QIS, "diagnosis", _hierarchies())
    codes, distinct = draft.labels.codes("age")
    again = pickle.loads(pickle.dumps(draft.labels))
    kept, kept_distinct = again.codes("age")
    assert np.array_equal(kept, codes) and list(kept_distinct) == list(distinct)
