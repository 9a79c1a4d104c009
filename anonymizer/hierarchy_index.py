"""The encoded index of one generalization hierarchy, shared by the whole writer side.

A :class:`~anonymizer.hierarchy.Hierarchy` gives every node an integer id (leaves first)
and its parent. The searches, the measures and the region geometry all need the same
few derived arrays: each node's depth, each leaf's ancestors, each node's leaf set as a
run of one depth-first leaf order, and each node's subtree as a run of a pre-order over
all nodes. :class:`HierarchyIndex` holds them, built once per hierarchy
(:attr:`anonymizer.hierarchy.Hierarchy.index`) with a loop over the hierarchy's levels,
never over records (docs/design.md section 9, "One index of a hierarchy").

The independent audit (:mod:`serialpub.analysis.audit`) keeps its own geometry and does
not use this index, so that a bug here cannot both make and pass a release.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from anonymizer.hierarchy import Hierarchy

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, eq=False)
class HierarchyIndex:
    """Depths, ancestors, depth-first leaf runs and pre-order ranges of one hierarchy.

    Sorting the leaves by their root-to-leaf path (node ids compared from the root down)
    puts the leaves of every node next to each other, so a node's leaf set is exactly the
    positions ``lo..hi`` of that order, and two nodes share a leaf iff their runs
    intersect (docs/design.md section 5: a node's leaves form one subtree). Listing the
    nodes by ``(lo, depth)`` is a pre-order of the whole tree consistent with that leaf
    order (an ancestor comes first among the nodes that start at the same leaf, and the
    nodes starting inside a node's run are its descendants), so a node's subtree is the
    pre-order range ``pre..end - 1``.

    Attributes:
        parent: parent node id of every node, -1 for the root, shape (n_nodes,).
        depth: number of edges from the root to every node, shape (n_nodes,). (Not
            :attr:`anonymizer.hierarchy.Hierarchy.depth`, the number of columns of a row.)
        anc: ``anc[leaf, k]`` is the leaf's ancestor at depth k, the leaf itself at and
            below its own depth, shape (n_leaves, max depth + 1).
        order: leaf id at each depth-first position, shape (n_leaves,).
        position: depth-first position of each leaf id, shape (n_leaves,).
        lo, hi: first and last position (inclusive) of every node's leaves, shape (n_nodes,).
        size: number of leaves below every node (1 for a leaf), shape (n_nodes,).
        pre: pre-order rank of every node, shape (n_nodes,).
        end: one past the pre-order rank of every node's last descendant, shape (n_nodes,):
            the subtree of x (x included) is the nodes y with ``pre[x] <= pre[y] < end[x]``.
    """

    parent: IntArray
    depth: IntArray
    anc: IntArray
    order: IntArray
    position: IntArray
    lo: IntArray
    hi: IntArray
    size: IntArray
    pre: IntArray
    end: IntArray

    def __post_init__(self) -> None:
        # one index is shared by every user of its hierarchy: none may write into it
        for name in ("parent", "depth", "anc", "order", "position", "lo", "hi", "size", "pre", "end"):
            getattr(self, name).setflags(write=False)

    @property
    def n_leaves(self) -> int:
        return int(self.order.size)

    @property
    def n_nodes(self) -> int:
        return int(self.parent.size)

    @classmethod
    def of(cls, h: Hierarchy) -> HierarchyIndex:
        """Build the index of ``h``; use :attr:`anonymizer.hierarchy.Hierarchy.index`,
        which builds it once per hierarchy.

        Raises:
            ValueError: a node's leaves do not form one run of the depth-first order
                (impossible for a hierarchy that
                :meth:`anonymizer.hierarchy.Hierarchy.from_rows` accepted).
        """
        parent = np.array(h.parent, dtype=np.int64)
        n_leaves = h.n_leaves
        depth = np.zeros(parent.size, dtype=np.int64)
        cur = parent.copy()
        while (alive := cur >= 0).any():  # at most the hierarchy's depth steps
            depth[alive] += 1
            cur[alive] = parent[cur[alive]]
        leaves = np.arange(n_leaves, dtype=np.int64)
        anc = np.repeat(leaves[:, None], int(depth.max()) + 1, axis=1)
        cur = leaves.copy()
        alive = np.ones(n_leaves, dtype=bool)
        while alive.any():  # one step up per level
            anc[leaves[alive], depth[cur[alive]]] = cur[alive]
            nxt = np.where(alive, parent[cur], -1)
            alive = nxt >= 0
            cur = np.where(alive, nxt, cur)
        # lexsort's primary key is the last row: the root column, then downwards to the leaf
        order = np.lexsort(h.leaf_nodes).astype(np.int64)
        position = np.empty(n_leaves, dtype=np.int64)
        position[order] = leaves
        lo = np.full(parent.size, n_leaves, dtype=np.int64)
        hi = np.full(parent.size, -1, dtype=np.int64)
        # a leaf's path is anc[leaf, :depth + 1]; the columns below its depth repeat the leaf
        on_path = np.arange(anc.shape[1])[None, :] <= depth[leaves][:, None]
        path_node = anc[on_path]
        path_pos = np.broadcast_to(position[:, None], anc.shape)[on_path]
        np.minimum.at(lo, path_node, path_pos)
        np.maximum.at(hi, path_node, path_pos)
        size = np.bincount(path_node, minlength=parent.size).astype(np.int64)
        if np.any(hi - lo + 1 != size):
            raise ValueError(f"hierarchy of {h.attribute!r}: a node's leaves do not form one subtree")
        pre, end = _pre_order(lo, hi, depth)
        return cls(parent, depth, anc, order, position, lo, hi, size, pre, end)

    @classmethod
    def flat(cls, n_values: int) -> HierarchyIndex:
        """The index of a flat domain: ``n_values`` leaves and no node above them (not even
        a root), for a sensitive attribute declared without a hierarchy."""
        ids = np.arange(n_values, dtype=np.int64)
        return cls(
            parent=np.full(n_values, -1, dtype=np.int64),
            depth=np.zeros(n_values, dtype=np.int64),
            anc=ids[:, None].copy(),
            order=ids.copy(),
            position=ids.copy(),
            lo=ids.copy(),
            hi=ids.copy(),
            size=np.ones(n_values, dtype=np.int64),
            pre=ids.copy(),
            end=ids + 1,
        )

    def leaves(self, node: int) -> IntArray:
        """Leaf ids of one node, ascending, shape (size[node],)."""
        return np.sort(self.order[self.lo[node] : self.hi[node] + 1])

    def leaf_mask(self, nodes: npt.ArrayLike) -> BoolArray:
        """Leaf membership of several nodes, shape (len(nodes), n_leaves), by leaf id."""
        node = np.asarray(nodes, dtype=np.int64)
        pos = self.position[None, :]
        return np.asarray((pos >= self.lo[node][:, None]) & (pos <= self.hi[node][:, None]), dtype=bool)

    def ancestor_matrix(self) -> BoolArray:
        """``m[leaf, node]`` is True when node is the leaf or one of its ancestors, shape
        (n_leaves, n_nodes)."""
        m = np.zeros((self.n_leaves, self.n_nodes), dtype=bool)
        m[np.arange(self.n_leaves)[:, None], self.anc] = True
        return m

    def contains(self, outer: npt.ArrayLike, inner: npt.ArrayLike) -> BoolArray:
        """Elementwise: whether the leaf set of ``outer`` includes that of ``inner``."""
        a, b = np.asarray(outer, dtype=np.int64), np.asarray(inner, dtype=np.int64)
        return np.asarray((self.lo[a] <= self.lo[b]) & (self.hi[b] <= self.hi[a]), dtype=bool)

    def intersects(self, a: npt.ArrayLike, b: npt.ArrayLike) -> BoolArray:
        """Elementwise: whether the leaf sets of ``a`` and ``b`` share a leaf."""
        x, y = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        return np.asarray((self.lo[x] <= self.hi[y]) & (self.lo[y] <= self.hi[x]), dtype=bool)

    def used_above(self, used: BoolArray) -> tuple[IntArray, IntArray]:
        """The ``used`` nodes at or above every leaf, as CSR rows by leaf id.

        Args:
            used: bool per node, shape (n_nodes,).

        Returns:
            (start, nodes): leaf x's used nodes are ``nodes[start[x]:start[x + 1]]``, from
            the leaf itself up to the root; start has shape (n_leaves + 1,).
        """
        n_leaves = self.n_leaves
        leaves = np.arange(n_leaves, dtype=np.int64)
        rows_leaf: list[IntArray] = []
        rows_node: list[IntArray] = []
        last = self.anc.shape[1] - 1
        for k in range(last, -1, -1):  # one pass per level, from the leaves up
            node = self.anc[:, k]
            fresh = np.ones(n_leaves, dtype=bool) if k == last else node != self.anc[:, k + 1]
            keep = fresh & used[node]
            rows_leaf.append(leaves[keep])
            rows_node.append(node[keep])
        leaf = np.concatenate(rows_leaf)
        node = np.concatenate(rows_node)
        order = np.argsort(leaf, kind="stable")
        start = np.zeros(n_leaves + 1, dtype=np.int64)
        np.cumsum(np.bincount(leaf, minlength=n_leaves), out=start[1:])
        return start, node[order]


def _pre_order(lo: IntArray, hi: IntArray, depth: IntArray) -> tuple[IntArray, IntArray]:
    """Pre-order rank and subtree end of every node from its leaf run and depth.

    Leaf runs of a hierarchy are nested or disjoint, so among the nodes whose run starts
    at one leaf the shallower is the ancestor, and a node listed after x whose run starts
    inside x's run lies inside it: x's descendants are the nodes after x with ``lo <= hi[x]``.
    """
    listing = np.lexsort((depth, lo))
    pre = np.empty(lo.size, dtype=np.int64)
    pre[listing] = np.arange(lo.size, dtype=np.int64)
    end = np.searchsorted(lo[listing], hi, side="right").astype(np.int64)
    return pre, end
