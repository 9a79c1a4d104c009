"""The state's group rows of a draft (serialpub.workflow.release_record.release_group_rows), built from
whole columns: the rows the GroupRow contract gives, group by group."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from anonymizer.hierarchy import Hierarchy
from serialpub.io.manifest import GroupRow
from serialpub.workflow.release_record import release_group_rows


def _hier(attribute: str, rows: list[list[str]]) -> Hierarchy:
    return Hierarchy.from_rows(attribute, [(i + 1, r) for i, r in enumerate(rows)], "test")


AGE = _hier("age", [["a0", "a01", "*"], ["a1", "a01", "*"], ["a2", "a23", "*"], ["a3", "a23", "*"]])
TRI = _hier("t", [["x", "xy", "*"], ["y", "xy", "*"], ["z", "zz", "*"]])


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 8), st.integers(0, 2**32 - 1))
def test_group_rows_are_the_contract_rows(n_groups: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    hierarchies = [AGE, TRI]
    protected = ["flu", "hiv", "cancer"]
    counts = rng.integers(0, 3, size=(n_groups, len(protected))) * rng.integers(0, 2, size=(n_groups, len(protected)))
    result = SimpleNamespace(
        group_nodes=np.column_stack([rng.integers(0, h.n_nodes, n_groups) for h in hierarchies]).reshape(n_groups, 2),
        group_counts=counts,
        group_candidates=rng.integers(0, 50, n_groups),
        group_records=rng.integers(0, 20, n_groups),
    )
    expected = [
        GroupRow(
            labels=[h.labels[result.group_nodes[g, a]] for a, h in enumerate(hierarchies)],
            candidates=int(result.group_candidates[g]),
            records=int(result.group_records[g]),
            counts={protected[v]: int(counts[g, v]) for v in np.flatnonzero(counts[g])},
        ).model_dump()
        for g in range(n_groups)
    ]
    got = release_group_rows(
        hierarchies, result.group_nodes, result.group_candidates, result.group_records, result.group_counts, protected
    )
    assert got == expected
    assert [list(r["counts"]) for r in got] == [list(r["counts"]) for r in expected]  # key order too
