"""The audit's own region geometry: ancestor tables, row identities and joins.

The writer side (the import, ``serialpub state verify``, validation's checks, the utility
measure) shares :mod:`anonymizer.regions`, built on depth-first leaf intervals and the
mixed-radix row keys of :func:`anonymizer.arrays.row_keys`. The audit recomputes the same
regions here, independently and by other means: a node contains another when it is on its
ancestor chain, equal rows are found with numpy's ``ravel_multi_index`` (pandas' grouping
when the radices' product does not fit int64), and combinations meet regions by a
sort-merge join. A bug in the shared geometry therefore cannot both make a release and
pass its audit (docs/design.md section 9).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from anonymizer.arrays import expand_ranges, factorize
from anonymizer.hierarchy import Hierarchy

if TYPE_CHECKING:
    import pandas as pd

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Pairs materialized at once by the chunked joins (bounds memory, not results).
JOIN_CHUNK = 2_000_000


@dataclass(frozen=True)
class Tree:
    """Ancestor table of a hierarchy: ``chain[x, k]`` is x's ancestor at level k (root 0)."""

    hierarchy: Hierarchy
    level: IntArray  # (n_nodes,)
    chain: IntArray  # (n_nodes, max level + 1), -1 below the node's own level

    @classmethod
    def of(cls, h: Hierarchy) -> Tree:
        parent = np.asarray(h.parent, dtype=np.int64)
        n = parent.size
        level = np.zeros(n, dtype=np.int64)
        cur = parent.copy()
        while (alive := cur >= 0).any():  # at most depth steps
            level[alive] += 1
            cur[alive] = parent[cur[alive]]
        chain = np.full((n, int(level.max()) + 1), -1, dtype=np.int64)
        rows = np.arange(n)
        cur = rows.copy()
        alive = np.ones(n, dtype=bool)
        while alive.any():
            chain[rows[alive], level[cur[alive]]] = cur[alive]
            nxt = np.where(alive, parent[cur], -1)
            alive = nxt >= 0
            cur = np.where(alive, nxt, cur)
        return cls(h, level, chain)

    def contains(self, node: IntArray, other: IntArray) -> BoolArray:
        """Whether ``node`` is an ancestor-or-self of ``other`` (elementwise)."""
        return np.asarray(self.chain[other, self.level[node]] == node)

    def comparable(self, a: IntArray, b: IntArray) -> BoolArray:
        """Whether the leaf sets of a and b intersect: in a tree, one contains the other."""
        return self.contains(a, b) | self.contains(b, a)

    def cut_lookup(self, used: IntArray) -> tuple[bool, IntArray]:
        """Whether the used nodes are pairwise disjoint, and the used node of every leaf.

        Returns:
            (is_cut, lookup): lookup has shape (n_leaves,), the used node that is the leaf
            or its ancestor, -1 if none; meaningful only when is_cut.
        """
        is_used = np.zeros(self.level.size, dtype=bool)
        is_used[used] = True
        anc = self.chain[used]
        own = np.arange(anc.shape[1])[None, :] == self.level[used][:, None]
        proper = (anc >= 0) & ~own
        if is_used[anc[proper]].any():
            return False, np.empty(0, dtype=np.int64)
        leaves = np.arange(self.hierarchy.n_leaves)
        lookup = np.full(leaves.size, -1, dtype=np.int64)
        for k in range(self.chain.shape[1]):  # one pass per hierarchy level
            a = self.chain[leaves, k]
            hit = (a >= 0) & is_used[np.maximum(a, 0)]
            lookup[hit] = a[hit]
        return True, lookup


def column_codes(column: pd.Series) -> tuple[IntArray, list[str]]:
    """Integer codes of a column's values (-1 for missing) and the distinct values as text.

    A categorical column (as :func:`audit_workspace` reads them) gives its codes for free;
    only categories that occur are returned, so unused categories are never reported.
    """
    import pandas as pd

    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = np.asarray(column.cat.codes.to_numpy(), dtype=np.int64)
        used = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(column.cat.categories)))
        remap = np.full(len(column.cat.categories) + 1, -1, dtype=np.int64)  # last slot: code -1
        remap[used] = np.arange(used.size)
        categories = column.cat.categories
        return remap[codes], [str(categories[int(i)]) for i in used]
    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    return np.asarray(codes, dtype=np.int64), [str(u) for u in uniques]


def distinct_sorted(keys: IntArray) -> IntArray:
    """Sorted distinct values of an int array (sort-based; see :func:`anonymizer.arrays.factorize`)."""
    s = np.sort(keys)
    return s[np.r_[True, s[1:] != s[:-1]]] if s.size else s


def equi_join(left_keys: IntArray, right_keys: IntArray) -> Iterator[tuple[IntArray, IntArray]]:
    """All (i, j) with left_keys[i] == right_keys[j], chunked (sort-merge join)."""
    order = np.argsort(right_keys, kind="stable")
    sorted_keys = right_keys[order]
    lo = np.searchsorted(sorted_keys, left_keys, side="left")
    hi = np.searchsorted(sorted_keys, left_keys, side="right")
    for i, j in expand_ranges(lo.astype(np.int64), hi.astype(np.int64), JOIN_CHUNK):
        yield i, order[j]


def row_ids(mat: npt.NDArray[np.integer], radices: Sequence[int]) -> tuple[IntArray, IntArray]:
    """Equal rows of an int matrix (n, d) with ``mat[:, j] < radices[j]``.

    Returns:
        the id of every row (equal rows, equal ids; numbered by first appearance), shape
        (n,), and the first row of every id, shape (distinct rows,).
    """
    import pandas as pd

    n, d = mat.shape
    flat: IntArray = np.zeros(n, dtype=np.int64)
    if d:
        try:  # the row's index in the C-ordered array of shape ``radices``
            flat = np.asarray(np.ravel_multi_index(tuple(np.asarray(mat).T), tuple(radices)), dtype=np.int64)
        except ValueError:  # that array would exceed int64: pandas' own multi-column grouping
            frame = pd.DataFrame(np.asarray(mat))
            flat = np.asarray(frame.groupby(list(frame.columns), sort=False).ngroup().to_numpy(), dtype=np.int64)
    return factorize(flat)
