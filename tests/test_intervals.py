"""Numeric intervals as hierarchy nodes (anonymizer/intervals.py): the search's binary
interval hierarchy and the per-release hierarchy readers build from a table's labels."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hierarchy_oracle import ancestor_matrix
from hypothesis import given, settings
from hypothesis import strategies as st

from anonymizer.hierarchy import ROOT, Hierarchy
from anonymizer.intervals import (
    extend_hierarchy,
    interval_label,
    parse_interval,
    quantile_hierarchy,
    release_hierarchies,
)


def numeric_hierarchy(values: list[int], band: int = 10) -> Hierarchy:
    """Leaves in the given (file) order, one level of ``[lo, hi]`` bands, then '*'."""
    rows = [
        (i + 1, [str(v), f"[{v // band * band}, {v // band * band + band - 1}]", ROOT]) for i, v in enumerate(values)
    ]
    return Hierarchy.from_rows("age", rows, "age.csv")


def leaves_of(h: Hierarchy, label: str) -> set[str]:
    m = ancestor_matrix(h)
    return {h.labels[x] for x in np.flatnonzero(m[:, h.node(label)])}


def test_parse_interval() -> None:
    assert parse_interval("[30, 39]") == (30.0, 39.0)
    assert parse_interval("[1.5,2]") == (1.5, 2.0)
    for bad in ["30", "[39, 30]", "[a, 3]", "(1, 2)", "[1, 2, 3]", "[nan, 2]", "[]"]:
        assert parse_interval(bad) is None, bad
    assert interval_label("17", "25") == "[17, 25]"


def test_quantile_hierarchy_halves_at_the_weighted_median() -> None:
    h = numeric_hierarchy([20, 21, 22, 23, 24, 25])
    # most of the register is 20 or 21: the first cut falls right after them
    q = quantile_hierarchy(h, [50, 40, 3, 3, 2, 2])
    assert q.leaves == h.leaves  # leaf ids unchanged
    root_children = {q.labels[v] for v in range(q.n_nodes) if q.parent[v] == q.root}
    # 50 of 100 left of the 20|21 cut is half; 90 of 100 left of 21|22 is not (one leaf is the leaf)
    assert root_children == {"20", "[21, 25]"}
    # every inner node is the interval its label spells
    for v in range(q.n_leaves, q.n_nodes):
        label = q.labels[v]
        if label == ROOT:
            continue
        lo, hi = parse_interval(label)  # type: ignore[misc]
        assert leaves_of(q, label) == {x for x in h.leaves if lo <= float(x) <= hi}


def test_quantile_hierarchy_sorts_by_number_not_file_order() -> None:
    h = numeric_hierarchy([25, 3, 100, 40])
    q = quantile_hierarchy(h, [1, 1, 1, 1])
    assert leaves_of(q, "[3, 25]") == {"3", "25"}
    assert leaves_of(q, "[40, 100]") == {"40", "100"}


def test_quantile_hierarchy_refuses_non_numeric_leaves() -> None:
    h = Hierarchy.from_rows("sex", [(1, ["Male", ROOT]), (2, ["Female", ROOT])], "sex.csv")
    with pytest.raises(ValueError, match="not numbers"):
        quantile_hierarchy(h, [1, 1])


def test_extend_reads_intervals_declared_labels_and_drops_what_is_not_a_tree() -> None:
    h = numeric_hierarchy(list(range(17, 41)))
    labels = ["[20, 29]", "[17, 25]", "[22, 24]", "[30, 33]", "[26, 31]", "bogus", "[50, 60]", "*", "18"]
    e = extend_hierarchy(h, labels)
    assert e.leaves == h.leaves
    assert leaves_of(e, "[20, 29]") == {str(v) for v in range(20, 30)}  # the declared node
    assert leaves_of(e, "[22, 24]") == {"22", "23", "24"}
    assert leaves_of(e, "[30, 33]") == {"30", "31", "32", "33"}
    # [17, 25] partially overlaps the declared [20, 29]; [26, 31] overlaps [30, 33] (kept first)
    for dropped in ["[17, 25]", "[26, 31]", "bogus", "[50, 60]"]:
        assert not e.has_label(dropped), dropped
    # a reader resolves the kept labels, and '*' and the leaves, to the same leaves as before
    assert e.has_label("*") and e.has_label("18")


def test_release_hierarchies_only_touches_numeric_columns() -> None:
    h = numeric_hierarchy([1, 2, 3, 4])
    s = Hierarchy.from_rows("sex", [(1, ["Male", ROOT]), (2, ["Female", ROOT])], "sex.csv")
    table = pd.DataFrame({"age": ["[1, 2]", "[3, 4]"], "sex": ["*", "*"]})
    out = release_hierarchies({"age": h, "sex": s}, ["age"], table)
    assert out["sex"] is s
    assert leaves_of(out["age"], "[3, 4]") == {"3", "4"}


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.integers(0, 60), min_size=2, max_size=14, unique=True),
    weights=st.data(),
)
def test_extension_of_a_quantile_hierarchy_is_the_same_tree(values: list[int], weights: st.DataObject) -> None:
    """Brute force: reading back every label of the search's hierarchy (as a release that
    used them all would publish them) gives every label the same leaves, and any subset
    of them (a release uses some) is kept whole."""
    h = numeric_hierarchy(values)
    w = weights.draw(st.lists(st.integers(0, 9), min_size=len(values), max_size=len(values)))
    q = quantile_hierarchy(h, w)
    labels = [q.labels[v] for v in range(q.n_leaves, q.n_nodes)]
    subset = weights.draw(st.lists(st.sampled_from(labels), unique=True))
    for chosen in (labels, subset):
        e = extend_hierarchy(h, chosen)
        assert e.leaves == h.leaves
        for label in chosen:
            assert e.has_label(label)
            assert leaves_of(e, label) == leaves_of(q, label)
    # the tree is binary down to the leaves: n_leaves - 1 splits, so 2 n_leaves - 1 nodes
    assert q.n_nodes == 2 * len(values) - 1
