"""Brute-force facts about a hierarchy, from its parent array alone, for the tests to check
:class:`anonymizer.hierarchy_index.HierarchyIndex` and its users against: walking up
from a leaf is slow but leaves nothing to get wrong."""

from __future__ import annotations

import numpy as np

from anonymizer.hierarchy import Hierarchy


def path(h: Hierarchy, node: int) -> list[int]:
    """The node and its ancestors, from the node up to the root."""
    out = [node]
    while (up := int(h.parent[out[-1]])) >= 0:
        out.append(up)
    return out


def ancestor_matrix(h: Hierarchy) -> np.ndarray:
    """``m[leaf, node]`` is True when node is the leaf or one of its ancestors."""
    m = np.zeros((h.n_leaves, h.n_nodes), dtype=bool)
    for leaf in range(h.n_leaves):
        m[leaf, path(h, leaf)] = True
    return m


def leaf_counts(h: Hierarchy) -> np.ndarray:
    """Number of leaves below every node (1 for a leaf)."""
    return ancestor_matrix(h).sum(axis=0).astype(np.int64)
