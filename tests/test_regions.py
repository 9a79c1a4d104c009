"""The writer side's region geometry (anonymizer/regions.py, docs/design.md sections 1, 5 and 9)
against brute force on random hierarchies, releases and registers: the row-key encoder is a
bijection, a node's leaf set is what the hierarchy says, and locating finds the group whose
region holds each register combination.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from hierarchy_oracle import ancestor_matrix
from hypothesis import given, settings
from hypothesis import strategies as st

from anonymizer.arrays import CodedRows, factorize, factorize_rows, row_keys
from anonymizer.hierarchy import Hierarchy
from anonymizer.intervals import extend_hierarchy, interval_label, quantile_hierarchy
from anonymizer.regions import (
    MAX_LISTED_OVERLAPS,
    RegisterCells,
    _is_cut,
    cover_pairs,
    group_release,
    label_nodes,
    locate_groups,
    overlapping_pairs,
    record_nodes,
)

SETTINGS = settings(max_examples=60, deadline=None)


def random_hierarchy(rng: np.random.Generator, name: str) -> Hierarchy:
    """A random hierarchy: 1-12 leaves, 1-3 inner levels, each level a random grouping of
    the one below (a group of one is a chain of distinct labels over the same leaves)."""
    n_leaves = int(rng.integers(1, 13))
    leaves = [f"{name}{i}" for i in range(n_leaves)]
    cells = [[x] for x in leaves]
    node_of = np.arange(n_leaves)  # every leaf's node at the current level
    for level in range(int(rng.integers(1, 4))):
        n_nodes = int(node_of.max()) + 1
        parent = rng.integers(0, max(1, n_nodes // 2 + 1), n_nodes)
        parent = np.unique(parent, return_inverse=True)[1].reshape(-1)  # dense
        node_of = parent[node_of]
        for row, x in zip(cells, node_of, strict=True):
            row.append(f"{name}.{level}.{x}")
    for row in cells:
        row.append("*")
    return Hierarchy.from_rows(name, [(i + 2, row) for i, row in enumerate(cells)], f"random {name}")


def seeds() -> st.SearchStrategy[int]:
    return st.integers(0, 2**32 - 1)


# --------------------------------------------------------------------------- row keys


@SETTINGS
@given(seeds(), st.integers(0, 5), st.integers(0, 60), st.booleans())
def test_row_keys_are_a_bijection(seed: int, d: int, n: int, huge: bool) -> None:
    rng = np.random.default_rng(seed)
    radices = [int(r) for r in rng.integers(1, 2**20 if huge else 6, d)]
    mat = np.stack([rng.integers(0, r, n) for r in radices], axis=1) if d else np.zeros((n, 0), dtype=np.int64)
    keys = row_keys(mat, radices)
    assert keys.shape == (n,) and keys.dtype == np.int64
    same_row = (mat[:, None, :] == mat[None, :, :]).all(axis=2)
    assert ((keys[:, None] == keys[None, :]) == same_row).all()
    if np.prod(np.asarray(radices, dtype=float)) < 2.0**62:  # the exact mixed-radix number
        assert (np.stack(np.unravel_index(keys, radices), axis=1) == mat).all() if d else not keys.any()
        order = np.lexsort(mat.T[::-1]) if d else np.arange(n)
        assert (np.diff(keys[order]) >= 0).all()  # keys sort like the rows


def test_row_keys_past_int64_stay_exact() -> None:
    rng = np.random.default_rng(1)
    radices = [2**31 - 1] * 5  # product far beyond int64
    base = rng.integers(0, 2**31 - 1, (50, 5))
    mat = np.concatenate([base, base[::3]])
    keys = row_keys(mat, radices)
    assert len(np.unique(keys)) == 50
    assert (keys[50:] == keys[:50:3]).all()


# --------------------------------------------------------------------------- leaf sets


@SETTINGS
@given(seeds())
def test_index_runs_are_the_hierarchys_leaf_sets(seed: int) -> None:
    h = random_hierarchy(np.random.default_rng(seed), "a")
    sp = h.index
    anc = ancestor_matrix(h)  # anc[leaf, node]
    assert (sp.leaf_mask(np.arange(h.n_nodes)) == anc.T).all()
    assert (sp.size == anc.sum(axis=0)).all()
    for node in range(h.n_nodes):
        assert sp.leaves(node).tolist() == np.flatnonzero(anc[:, node]).tolist()
    x, y = (a.reshape(-1) for a in np.meshgrid(np.arange(h.n_nodes), np.arange(h.n_nodes)))
    inter = (anc[:, x] & anc[:, y]).any(axis=0)
    subset = ~(anc[:, y] & ~anc[:, x]).any(axis=0)
    assert (sp.intersects(x, y) == inter).all()
    assert (sp.contains(x, y) == subset).all()
    assert sorted(sp.order.tolist()) == list(range(h.n_leaves))
    assert (sp.order[sp.position] == np.arange(h.n_leaves)).all()


@SETTINGS
@given(seeds())
def test_used_above_lists_the_used_ancestors_of_every_leaf(seed: int) -> None:
    rng = np.random.default_rng(seed)
    h = random_hierarchy(rng, "a")
    used = rng.random(h.n_nodes) < 0.5
    start, items = h.index.used_above(used)
    anc = ancestor_matrix(h)
    for leaf in range(h.n_leaves):
        assert sorted(items[start[leaf] : start[leaf + 1]].tolist()) == np.flatnonzero(anc[leaf] & used).tolist()


def test_interval_nodes_of_a_release_are_leaf_sets_too() -> None:
    leaves = [str(v) for v in range(20, 40)]
    declared = Hierarchy.from_rows("age", [(i + 2, [x, "*"]) for i, x in enumerate(leaves)], "age")
    for h in (
        quantile_hierarchy(declared, np.arange(1, 21, dtype=float)),
        extend_hierarchy(declared, [interval_label("20", "29"), interval_label("24", "26"), "[30, 39]"]),
    ):
        sp = h.index
        numbers = h.leaf_numbers()
        for label in h.labels[h.n_leaves :]:
            if label == "*":
                continue
            lo, hi = (float(v) for v in label.strip("[]").split(","))
            want = np.flatnonzero((numbers >= lo) & (numbers <= hi))
            assert sp.leaves(h.node(label)).tolist() == want.tolist(), label


# --------------------------------------------------------------------------- labels and groups


def test_label_nodes_reads_text_and_categorical_columns() -> None:
    h = Hierarchy.from_rows("a", [(2, ["x", "X", "*"]), (3, ["y", "X", "*"]), (4, ["z", "Z", "*"])], "a")
    values = ["x", "X", "*", "nope", None, "z", "x"]
    want = [h.node("x"), h.node("X"), h.node("*"), -1, -1, h.node("z"), h.node("x")]
    assert label_nodes(pd.Series(values, dtype=object), h).tolist() == want
    assert label_nodes(pd.Series(values, dtype="category"), h).tolist() == want
    assert label_nodes(pd.Series([], dtype=object), h).tolist() == []
    table = pd.DataFrame({"a": ["x", "Z"], "b": ["X", "q"]})
    assert record_nodes(table, ["a", "b"], [h, h]).tolist() == [[h.node("x"), h.node("X")], [h.node("Z"), -1]]


@SETTINGS
@given(seeds())
def test_group_release_against_pandas(seed: int) -> None:
    rng = np.random.default_rng(seed)
    hs = [random_hierarchy(rng, q) for q in "ab"]
    r, v = int(rng.integers(0, 40)), int(rng.integers(0, 3))
    nodes = np.stack([rng.integers(0, h.n_nodes, r) for h in hs], axis=1)
    value = rng.integers(-1, v, r) if v else np.full(r, -1)
    g = group_release(nodes, value, v, hs)
    # groups numbered by first appearance, their nodes and counts
    frame = pd.DataFrame({"a": nodes[:, 0], "b": nodes[:, 1], "v": value})
    assert (g.nodes[g.of_record] == nodes).all()
    firsts = frame.drop_duplicates(["a", "b"])
    assert (g.nodes == firsts[["a", "b"]].to_numpy()).all()
    assert g.records.tolist() == np.bincount(g.of_record, minlength=len(firsts)).tolist()
    for k in range(v):
        assert g.counts[:, k].tolist() == [int(((g.of_record == i) & (value == k)).sum()) for i in range(len(firsts))]


@SETTINGS
@given(seeds())
def test_register_cells(seed: int) -> None:
    rng = np.random.default_rng(seed)
    hs = [random_hierarchy(rng, q) for q in "abc"]
    keys = np.stack([rng.integers(0, h.n_leaves, 50) for h in hs], axis=1)
    cells = RegisterCells.of(keys, hs)
    assert (cells.leaves[cells.of_individual] == keys).all()
    assert len(np.unique(cells.leaves, axis=0)) == len(cells.leaves)
    assert (keys[cells.first] == cells.leaves).all()
    assert (cells.first == [int(np.flatnonzero(cells.of_individual == c)[0]) for c in range(len(cells.first))]).all()
    assert cells.counts.sum() == 50 and (cells.counts == np.bincount(cells.of_individual)).all()


# --------------------------------------------------------------------------- locating and disjointness


def brute_force(
    hs: list[Hierarchy], group_nodes: np.ndarray, cell_leaves: np.ndarray
) -> tuple[set[tuple[int, int]], list[tuple[int, int]]]:
    """(cell, group) pairs whose region holds the cell, and overlapping group pairs (i < j),
    from the hierarchies' ancestor matrices."""
    anc = [ancestor_matrix(h) for h in hs]
    cover = {
        (c, g)
        for c in range(len(cell_leaves))
        for g in range(len(group_nodes))
        if all(anc[a][cell_leaves[c, a], group_nodes[g, a]] for a in range(len(hs)))
    }
    overlaps = [
        (i, j)
        for i, j in itertools.combinations(range(len(group_nodes)), 2)
        if all((anc[a][:, group_nodes[i, a]] & anc[a][:, group_nodes[j, a]]).any() for a in range(len(hs)))
    ]
    return cover, overlaps


@settings(max_examples=80, deadline=None)
@given(seeds(), st.booleans())
def test_locate_groups_against_brute_force(seed: int, partition: bool) -> None:
    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 4))
    hs = [random_hierarchy(rng, q) for q in "abc"[:d]]
    if partition:  # a release as serialpub makes them: one cut per attribute, disjoint
        cuts = []
        for h in hs:
            level = int(rng.integers(0, h.depth))
            cuts.append(np.unique(h.leaf_nodes[level]))
        group_nodes = np.array(list(itertools.product(*cuts)), dtype=np.int64)
        group_nodes = group_nodes[rng.permutation(len(group_nodes))[: int(rng.integers(1, len(group_nodes) + 1))]]
    else:  # random boxes, possibly overlapping
        group_nodes = np.unique(np.stack([rng.integers(0, h.n_nodes, 12) for h in hs], axis=1), axis=0)
        group_nodes = group_nodes[rng.permutation(len(group_nodes))]
    cell_leaves = np.unique(np.stack([rng.integers(0, h.n_leaves, 30) for h in hs], axis=1), axis=0)
    spans = [h.index for h in hs]

    cover, overlaps = brute_force(hs, group_nodes, cell_leaves)
    ci, gi = cover_pairs(group_nodes, cell_leaves, spans)
    assert set(zip(ci.tolist(), gi.tolist(), strict=True)) == cover and len(ci) == len(cover)
    assert (np.diff(ci) >= 0).all()

    located = locate_groups(cell_leaves, group_nodes, spans)
    assert located.overlap_pairs == len(overlaps)
    assert located.overlaps == overlaps[:MAX_LISTED_OVERLAPS]
    for c in range(len(cell_leaves)):
        holding = [g for cc, g in cover if cc == c]
        assert located.group_of_cell[c] == (max(holding) if holding else -1)
    if partition:
        assert located.overlap_pairs == 0


def test_overlapping_pairs_lists_the_first_pairs_in_order() -> None:
    rng = np.random.default_rng(3)
    lo = rng.integers(0, 6, (30, 2))
    hi = lo + rng.integers(0, 3, (30, 2))
    count, all_pairs = overlapping_pairs(lo, hi, max_examples=10_000)
    listed = all_pairs.tolist()
    assert listed == sorted(listed) and count == len(listed) > 5
    count3, first3 = overlapping_pairs(lo, hi, max_examples=3)
    assert count3 == count and first3.tolist() == listed[:3]
    assert overlapping_pairs(lo, hi, max_examples=0)[1].shape == (0, 2)
    assert overlapping_pairs(lo[:1], hi[:1])[0] == 0


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-50, 50), st.integers(0, 6)), max_size=25), st.sampled_from([1, 1 << 40, 1 << 56])
)
def test_a_column_is_a_cut_exactly_when_its_distinct_intervals_are_disjoint(
    intervals: list[tuple[int, int]], scale: int
) -> None:
    """``_is_cut`` on int64 keys, and past their range on rows, against the pairwise definition."""
    lo = np.array([a * scale for a, _ in intervals], dtype=np.int64)
    hi = lo + np.array([w for _, w in intervals], dtype=np.int64)
    distinct = sorted(set(zip(lo.tolist(), hi.tolist(), strict=True)))
    disjoint = all(b[0] > a[1] or a[0] > b[1] for a, b in itertools.combinations(distinct, 2))
    assert _is_cut(lo, hi) is disjoint


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31), st.integers(0, 4), st.integers(0, 60))
def test_factorize_rows_is_the_grouping_of_the_row_keys(seed: int, d: int, n: int) -> None:
    """Dense or coded (CodedRows), the rows get the codes and firsts of their row keys."""
    rng = np.random.default_rng(seed)
    radices = [int(r) for r in rng.integers(1, 5, size=d)]
    mat = np.floor(rng.random((n, d)) * np.array(radices, dtype=np.float64)).astype(np.int64)
    expected = factorize(row_keys(mat, radices))
    coded = CodedRows.of(mat, radices)
    for given_mat in (mat, coded, CodedRows.checked(coded.codes, coded.table)):
        codes, first = factorize_rows(given_mat, radices)
        assert np.array_equal(codes, expected[0]) and np.array_equal(first, expected[1])
        assert not codes.flags.writeable and not first.flags.writeable
    assert np.array_equal(coded.dense(), mat) and coded.shape == mat.shape
    assert np.array_equal(coded.counts, np.bincount(expected[0], minlength=expected[1].size))
