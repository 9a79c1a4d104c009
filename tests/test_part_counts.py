"""The top-down search's sparse counts (``anonymizer.part_counts``) against the dense
matrices they replace: every split's verdicts (each part valid, each region's split
admissible under either partition model, the suppression need of a forced split) equal the
dense computation of the same parts, with requirements that repeat, differ, are infinite
or NaN, and counts that are mostly zero."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_topdown import HS

from anonymizer.part_counts import ValueCounts
from anonymizer.search import suppression_need
from anonymizer.topdown import _meets, _narrow, _OpenCells, _split, _Tree

TREES = [_Tree.of(h) for h in HS]
REQUIREMENTS = [1.0, 1.5, 2.0, 3.0, 7.25, np.inf, np.nan]


@st.composite
def open_cells(draw: st.DrawFn) -> dict:  # type: ignore[type-arg]
    c = draw(st.integers(1, 24))
    v = draw(st.integers(0, 4))
    keys = np.array([[draw(st.integers(0, h.n_leaves - 1)) for h in HS] for _ in range(c)], dtype=np.int64)
    counts = np.array(
        [[draw(st.sampled_from([0, 0, 0, 1, 2, 5])) for _ in range(v)] for _ in range(c)], dtype=np.int64
    ).reshape(c, v)
    pool = [[draw(st.sampled_from(REQUIREMENTS)) for _ in range(v)] for _ in range(draw(st.integers(1, 3)))]
    requirement = np.array([pool[draw(st.integers(0, len(pool) - 1))] for _ in range(c)]).reshape(c, v)
    raw_region = np.array([draw(st.integers(0, 3)) for _ in range(c)])
    region = np.unique(raw_region, return_inverse=True)[1].astype(np.int64)  # every region holds a cell
    return {
        "keys": keys, "counts": counts, "requirement": requirement, "region": region,
        "n": np.array([draw(st.integers(0, 30)) for _ in range(c)], dtype=np.int64),
        "a": draw(st.integers(0, len(HS) - 1)), "presence": draw(st.booleans()),
        "forced": draw(st.booleans()), "published": draw(st.booleans()),
        "rule": draw(st.sampled_from(["widest", "balanced", "width_gain"])),
    }  # fmt: skip


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(open_cells())
def test_every_verdict_of_a_split_equals_the_dense_one(case: dict) -> None:  # type: ignore[type-arg]
    keys, counts, req, region, n = case["keys"], case["counts"], case["requirement"], case["region"], case["n"]
    n_open = int(region.max()) + 1
    nodes = _narrow(keys, region, n_open, TREES)
    values = ValueCounts.of(counts, req)
    cells = _OpenCells(keys, n, counts.sum(axis=1), values)
    region_counts = values.regions(region, n_open) if case["published"] else None
    a = case["a"]
    split = _split(
        a, TREES[a], region, n_open, nodes[:, a], cells, case["presence"], case["rule"], case["forced"], region_counts
    )
    # the dense computation on the parts the split found
    p = split.part_region.size
    need = np.zeros(n_open)
    admits_all = np.ones(n_open, dtype=bool)
    for part in range(p):
        inside = split.part_of_cell == part
        assert inside.any()
        n_p = np.array([n[inside].sum()], dtype=np.int64)
        counts_p = counts[inside].sum(axis=0, keepdims=True)
        req_p = req[inside].max(axis=0, keepdims=True)  # np.max: NaN stays NaN
        valid = bool(_meets(n_p, counts_p, req_p)[0])
        assert split.part_valid[part] == valid
        r = split.part_region[part]
        if case["published"]:
            region_p = counts[region == r].sum(axis=0, keepdims=True)
            admits_all[r] &= bool(_meets(n_p, region_p, req_p)[0])
        else:
            admits_all[r] &= valid
        if case["forced"]:
            need[r] += float(suppression_need(n_p, counts_p, req_p, case["presence"]).sum())
    splittable = np.zeros(n_open, dtype=bool)
    splittable[split.part_region] = True
    assert np.array_equal(split.splittable, splittable)
    assert np.array_equal(split.admissible, splittable & admits_all)
    assert np.array_equal(split.need, need)


@settings(max_examples=200, deadline=None)
@given(open_cells(), st.data())
def test_kept_cells_and_region_sums_equal_the_dense_ones(case: dict, data: st.DataObject) -> None:  # type: ignore[type-arg]
    counts, req, region = case["counts"], case["requirement"], case["region"]
    values = ValueCounts.of(counts, req)
    keep = np.array(data.draw(st.lists(st.booleans(), min_size=len(region), max_size=len(region))), dtype=bool)
    kept = values.take(keep)
    dense = np.zeros((int(keep.sum()), counts.shape[1]), dtype=np.int64)
    dense[kept.cell, kept.value] = kept.count
    assert np.array_equal(dense, counts[keep])
    assert np.all(kept.count > 0) and np.all(np.diff(kept.cell) >= 0)
    assert np.array_equal(kept.table[kept.req_row].view(np.uint64), req[keep].view(np.uint64))  # bit for bit
    n_open = int(region.max()) + 1
    sums = values.regions(region, n_open)
    dense = np.zeros((n_open, counts.shape[1]), dtype=np.int64)
    for r in range(n_open):
        span = slice(sums.start[r], sums.start[r + 1])
        dense[r, sums.value[span]] = sums.count[span]
    assert np.array_equal(dense, np.stack([counts[region == r].sum(axis=0) for r in range(n_open)]))
