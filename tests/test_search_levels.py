"""The top-down search's account of what blocked its splits (``partition(..., explain=True)``,
:func:`anonymizer.topdown.level_report`): hand-computed on tiny cells, and never a change to
the partition itself."""

from __future__ import annotations

import numpy as np
import pytest
from test_topdown import AGE, HS, _cells

from anonymizer.topdown import name_values, partition


def test_a_blocked_split_names_its_part_value_ratio_and_target() -> None:
    """Age a and b, 10 candidates each, one record of the value in each, requirement 10.
    Under the published model the split into a and b is judged against the region's 2
    records: 10 < 10 · 2, a ratio of 10 / 2 = 5 against a target of 10, so the root stays
    whole and the level says so."""
    keys = np.array([[0, 0, 0], [1, 0, 0]])
    gen = partition(_cells(keys, [[1], [1]], 10.0), HS, False, explain=True)
    assert gen.groups.keys.shape[0] == 1
    assert gen.levels == [{
        "level": 1, "regions": 1, "split": 0, "forced": 0, "leaf": 0, "blocked": 1, "blocked_candidates": 20,
        "blocks": [{"qi": "age", "value": 0, "regions": 1, "candidates": 20, "example": {
            "region_candidates": 20, "part": "a", "part_n": 10, "n_s": 2, "ratio": 5.0, "target": 10.0}}],
    }]  # fmt: skip
    assert name_values(gen.levels, ["Tech-support"])[0]["blocks"][0]["value"] == "Tech-support"  # type: ignore[index]


def test_under_the_parts_model_the_blocking_count_is_the_parts_own() -> None:
    """Two records in age a and none in b: the parts model judges a on its own 2 records
    (10 < 10 · 2) and names a; b, holding none, blocks nothing."""
    keys = np.array([[0, 0, 0], [1, 0, 0]])
    gen = partition(_cells(keys, [[2], [0]], 10.0), HS, False, model="parts", explain=True)
    assert gen.levels is not None
    block = gen.levels[0]["blocks"][0]  # type: ignore[index]
    assert block["example"] == {"region_candidates": 20, "part": "a", "part_n": 10, "n_s": 2, "ratio": 5.0,
                                "target": 10.0}  # fmt: skip


def test_a_split_taken_and_a_region_at_its_leaves_are_not_blocked() -> None:
    """Requirement 10 and one record in a: the split is admissible (10 >= 10 · 1); its two
    parts are single cells, so the next level finds nothing to split (leaves)."""
    keys = np.array([[0, 0, 0], [1, 0, 0]])
    gen = partition(_cells(keys, [[1], [0]], 10.0), HS, False, explain=True)
    assert gen.levels is not None
    assert [(lv["split"], lv["leaf"], lv["blocked"]) for lv in gen.levels] == [(1, 0, 0), (0, 2, 0)]
    assert AGE.labels[int(gen.groups.keys[0, 0])] in {"a", "b"}


@pytest.mark.parametrize("model", ["published", "parts"])
def test_explaining_changes_no_partition_and_every_block_really_fails(model: str) -> None:
    rng = np.random.default_rng(7)
    for _ in range(30):
        keys = np.stack([rng.integers(0, h.n_leaves, 40) for h in HS], axis=1)
        counts = rng.integers(0, 3, (40, 1)).tolist()
        req = float(rng.choice([2.0, 4.0, 6.0]))
        plain = partition(_cells(keys, counts, req), HS, False, model=model)
        told = partition(_cells(keys, counts, req), HS, False, model=model, explain=True)
        assert plain.levels is None
        assert np.array_equal(plain.groups.keys, told.groups.keys)
        assert np.array_equal(plain.group_of_cell, told.group_of_cell)
        assert told.levels is not None
        # every region ends once: by a leaf or a block, the rest split
        ended = sum(int(lv["leaf"]) + int(lv["blocked"]) for lv in told.levels)  # type: ignore[call-overload]
        assert ended == told.groups.keys.shape[0]
        for lv in told.levels:
            for b in lv["blocks"]:  # type: ignore[attr-defined]
                ex = b["example"]
                assert ex["part_n"] < ex["target"] * ex["n_s"]
