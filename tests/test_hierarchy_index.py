"""anonymizer.hierarchy_index: every field of a hierarchy's index against a brute-force
walk up its parent array (tests/hierarchy_oracle.py), on random hierarchies with chains,
leaves kept on higher levels and rows in any order."""

from __future__ import annotations

import numpy as np
import pytest
from hierarchy_oracle import ancestor_matrix, path
from hypothesis import given, settings
from hypothesis import strategies as st

from anonymizer.hierarchy import Hierarchy
from anonymizer.hierarchy_index import HierarchyIndex
from serialpub.datasets import adult
from serialpub.io.hierarchies import read_hierarchy


def random_hierarchy(rng: np.random.Generator) -> Hierarchy:
    """1-12 leaves under 1-4 levels, each a random grouping of the one below. A group of one
    either gets its own label (a chain of distinct labels over the same leaves) or repeats
    its member's label on the next column (a chain in the file, "c;C;C;*", or a leaf kept on
    a higher level, "e;e;AB;*"); the rows come in a random order, so node ids follow no
    level order."""
    n_leaves = int(rng.integers(1, 13))
    rows = [[f"x{i}"] for i in range(n_leaves)]
    node_of = np.arange(n_leaves)
    label_of = [f"x{i}" for i in range(n_leaves)]
    for level in range(int(rng.integers(1, 5))):
        n_nodes = int(node_of.max()) + 1
        parent = np.unique(rng.integers(0, max(1, n_nodes // 2 + 1), n_nodes), return_inverse=True)[1].reshape(-1)
        members = np.bincount(parent)
        keep = rng.random(parent.max() + 1) < 0.5
        labels = []
        for g in range(int(parent.max()) + 1):
            if members[g] == 1 and keep[g]:
                labels.append(label_of[int(np.flatnonzero(parent == g)[0])])
            else:
                labels.append(f"n{level}.{g}")
        node_of = parent[node_of]
        label_of = labels
        for row, x in zip(rows, node_of, strict=True):
            row.append(labels[x])
    for row in rows:
        row.append("*")
    shuffled = [rows[i] for i in rng.permutation(n_leaves)]
    return Hierarchy.from_rows("a", [(i + 2, row) for i, row in enumerate(shuffled)], "random")


def _check_against_brute_force(h: Hierarchy) -> None:
    ix = h.index
    n, m = h.n_leaves, h.n_nodes
    paths = [path(h, x) for x in range(m)]
    depth = np.array([len(p) - 1 for p in paths])
    anc = ancestor_matrix(h)
    assert ix.n_leaves == n and ix.n_nodes == m
    assert ix.parent.tolist() == h.parent.tolist()
    assert ix.depth.tolist() == depth.tolist()
    assert ix.anc.shape == (n, int(depth.max()) + 1)
    for leaf in range(n):
        down = paths[leaf][::-1]  # root first
        want = down + [leaf] * (ix.anc.shape[1] - len(down))
        assert ix.anc[leaf].tolist() == want
    # the depth-first order: leaves sorted by the node ids of their file row, root column first
    order = sorted(range(n), key=lambda leaf: h.leaf_nodes[::-1, leaf].tolist())
    assert ix.order.tolist() == order
    assert [order.index(leaf) for leaf in range(n)] == ix.position.tolist()
    size = anc.sum(axis=0)
    assert ix.size.tolist() == size.tolist()
    for x in range(m):
        positions = sorted(order.index(int(leaf)) for leaf in np.flatnonzero(anc[:, x]))
        assert (ix.lo[x], ix.hi[x]) == (positions[0], positions[-1])
        assert positions == list(range(positions[0], positions[-1] + 1))  # one run
    assert (ix.ancestor_matrix() == anc).all()
    # the pre-order: a permutation whose range of x holds exactly x's subtree, and the one a
    # depth-first walk visiting children in ascending node id gives (the file's rows allow
    # no other, so the leaf order is that walk's too)
    assert sorted(ix.pre.tolist()) == list(range(m))
    for x in range(m):
        inside = {y for y in range(m) if x in paths[y]}
        assert {y for y in range(m) if ix.pre[x] <= ix.pre[y] < ix.end[x]} == inside
    walk = _walk(h)
    assert [walk.index(x) for x in range(m)] == ix.pre.tolist()
    assert [x for x in walk if x < n] == order


def _walk(h: Hierarchy) -> list[int]:
    """Nodes in the order of a depth-first walk from the root, children in ascending id."""
    children: dict[int, list[int]] = {}
    for x, p in enumerate(h.parent.tolist()):
        children.setdefault(p, []).append(x)
    out: list[int] = []
    stack = [h.root]
    while stack:
        x = stack.pop()
        out.append(x)
        stack.extend(reversed(children.get(x, [])))
    return out


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_index_fields_agree_with_brute_force(seed: int) -> None:
    _check_against_brute_force(random_hierarchy(np.random.default_rng(seed)))


@pytest.mark.parametrize("attribute", [*adult.QUASI_IDENTIFIERS, adult.SENSITIVE])
def test_index_of_the_bundled_hierarchies(attribute: str) -> None:
    _check_against_brute_force(read_hierarchy(adult.hierarchy_dir() / f"{attribute}.csv", attribute))


def test_the_index_is_built_once_and_read_only() -> None:
    h = Hierarchy.from_rows("a", [(1, ["x", "*"]), (2, ["y", "*"])], "two")
    assert h.index is h.index
    with pytest.raises(ValueError, match="read-only"):
        h.index.size[0] = 5
    assert h.parent.flags.writeable  # the hierarchy's own arrays are not frozen with it


def test_flat_index_has_no_node_above_the_values() -> None:
    ix = HierarchyIndex.flat(3)
    assert ix.parent.tolist() == [-1, -1, -1] and ix.size.tolist() == [1, 1, 1]
    assert ix.pre.tolist() == [0, 1, 2] and ix.end.tolist() == [1, 2, 3]
    assert (ix.ancestor_matrix() == np.eye(3, dtype=bool)).all()
