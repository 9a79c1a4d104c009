"""Generalization hierarchies of quasi-identifiers, integer-coded.

A hierarchy is given in the ARX CSV convention (docs/design.md section 5): one row per leaf,
columns from the leaf up to the root ``*``. Every label names one node; a node's leaves
must form one subtree (all rows carrying a label agree on every label above it). Nodes
get integer ids so that generalization is array indexing, never a loop over records.

This module does no I/O: :func:`Hierarchy.from_rows` takes rows already read, with
their line numbers, and raises :class:`HierarchyError` naming the source and line.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import numpy.typing as npt

from anonymizer.hierarchy_index import HierarchyIndex

ROOT = "*"


class HierarchyError(ValueError):
    """A malformed hierarchy; the message names the source, the line and the fix."""

    def __init__(self, source: str, line: int | None, message: str) -> None:
        where = f"{source}, line {line}" if line is not None else source
        super().__init__(f"{where}: {message}")
        self.source = source
        self.line = line


@dataclass(frozen=True)
class Hierarchy:
    """A generalization hierarchy of one attribute.

    Attributes:
        attribute: the column it generalizes.
        labels: label of every node, shape (n_nodes,); leaves first, in file order, so a
            leaf's node id is its leaf index.
        parent: parent node id of every node, -1 for the root.
        height: height of every node (0 for leaves) in the longest leaf row.
        leaf_nodes: ``leaf_nodes[h][leaf]`` is the node at column h of the leaf's row,
            shape (depth, n_leaves).
        numeric: True when every leaf label is a number (ordered attribute).
    """

    attribute: str
    labels: tuple[str, ...]
    parent: npt.NDArray[np.int64]
    leaf_nodes: npt.NDArray[np.int64]
    numeric: bool
    _index: dict[str, int] = field(repr=False, compare=False)

    @property
    def n_leaves(self) -> int:
        return int(self.leaf_nodes.shape[1])

    @property
    def n_nodes(self) -> int:
        return len(self.labels)

    @property
    def depth(self) -> int:
        """Number of columns of a row (leaf and root included)."""
        return int(self.leaf_nodes.shape[0])

    @property
    def leaves(self) -> tuple[str, ...]:
        return self.labels[: self.n_leaves]

    @property
    def root(self) -> int:
        return int(self.leaf_nodes[-1, 0])

    def node(self, label: str) -> int:
        """Node id of a label; raises KeyError if the label is not in the hierarchy."""
        return self._index[label]

    def has_label(self, label: str) -> bool:
        return label in self._index

    def leaf_codes(self, values: Iterable[str]) -> npt.NDArray[np.int64]:
        """Leaf ids of values; raises KeyError naming the first value that is not a leaf."""
        vals = list(values)
        codes = np.fromiter((self._index.get(v, -1) for v in vals), dtype=np.int64, count=len(vals))
        bad = np.flatnonzero((codes < 0) | (codes >= self.n_leaves))
        if bad.size:
            raise KeyError(vals[int(bad[0])])
        return codes

    @cached_property
    def index(self) -> HierarchyIndex:
        """The encoded index of this hierarchy (:class:`anonymizer.hierarchy_index.HierarchyIndex`:
        depths, ancestors, depth-first leaf runs, leaves below every node, pre-order ranges),
        built on first use and kept, since a hierarchy never changes."""
        return HierarchyIndex.of(self)

    def check_domain(self, values: Iterable[str], source: str) -> None:
        """Raise :class:`HierarchyError` if a data value is not a leaf of this hierarchy."""
        missing = sorted({str(v) for v in values} - set(self.leaves))
        if missing:
            shown = ", ".join(repr(m) for m in missing[:5]) + (" ..." if len(missing) > 5 else "")
            raise HierarchyError(
                source,
                None,
                f"{len(missing)} value(s) of column '{self.attribute}' are not leaves of the "
                f"hierarchy: {shown}; add a row for each of them",
            )

    @classmethod
    def from_rows(cls, attribute: str, rows: Sequence[tuple[int, Sequence[str]]], source: str) -> Hierarchy:
        """Build and validate a hierarchy from ``(line number, cells)`` rows.

        Raises:
            HierarchyError: empty file, an empty cell, rows of unequal depth, a duplicate
                leaf, a last column that is not ``*``, or a label whose leaves are not one
                subtree (two rows give it different ancestors, or it names two sets of leaves).
        """
        if not rows:
            raise HierarchyError(source, None, "the file is empty; give one row per leaf, leaf;...;*")
        depth = len(rows[0][1])
        for line, cells in rows:
            if len(cells) != depth:
                raise HierarchyError(
                    source,
                    line,
                    f"row has {len(cells)} columns, the first row has {depth}; "
                    "every row must run from its leaf to '*' over the same number of columns",
                )
            for c in cells:
                if c == "":
                    raise HierarchyError(source, line, "empty cell; every column needs a label")
            if cells[-1] != ROOT:
                raise HierarchyError(source, line, f"the last column is {cells[-1]!r}; it must be the root '*'")
        if depth < 2:
            raise HierarchyError(source, rows[0][0], "a row needs at least a leaf and the root '*'")

        labels: list[str] = []
        index: dict[str, int] = {}
        first_line: dict[str, int] = {}
        for line, cells in rows:
            leaf = cells[0]
            if leaf in index:
                raise HierarchyError(source, line, f"leaf {leaf!r} appears twice (first on line {first_line[leaf]})")
            index[leaf] = len(labels)
            labels.append(leaf)
            first_line[leaf] = line
        n_leaves = len(labels)

        leaf_nodes = np.empty((depth, n_leaves), dtype=np.int64)
        leaf_nodes[0] = np.arange(n_leaves)
        # parent label of every label: the next different label up its row
        parent_of: dict[str, str | None] = {}
        leafset: dict[str, set[str]] = {}
        for li, (line, cells) in enumerate(rows):
            for h, label in enumerate(cells):
                if h > 0 and label in index and index[label] < n_leaves and label != cells[0]:
                    raise HierarchyError(
                        source,
                        line,
                        f"label {label!r} is a leaf elsewhere but generalizes {cells[0]!r} here; "
                        "a label must name one set of leaves",
                    )
                if label not in index:
                    index[label] = len(labels)
                    labels.append(label)
                    first_line[label] = line
                leaf_nodes[h, li] = index[label]
                leafset.setdefault(label, set()).add(cells[0])
                up = next((c for c in cells[h + 1 :] if c != label), None)
                if label in parent_of and parent_of[label] != up:
                    raise HierarchyError(
                        source,
                        line,
                        f"label {label!r} has parent {up!r} here but {parent_of[label]!r} on line "
                        f"{first_line[label]}; the leaves of a label must form one subtree",
                    )
                parent_of[label] = up
        # a label used at two columns must cover the same leaves at both (a chain)
        per_column: dict[tuple[int, str], set[str]] = {}
        first_row: dict[tuple[int, str], int] = {}
        for line, cells in rows:
            for h, label in enumerate(cells):
                per_column.setdefault((h, label), set()).add(cells[0])
                first_row.setdefault((h, label), line)
        for (h, label), col_leaves in per_column.items():
            if col_leaves != leafset[label]:
                raise HierarchyError(
                    source,
                    first_row[(h, label)],
                    f"label {label!r} stands in different columns for different sets of leaves; rename one of them",
                )
        parent = np.array([index[p] if (p := parent_of.get(lbl)) is not None else -1 for lbl in labels], dtype=np.int64)
        numeric = all(_is_number(x) for x in labels[:n_leaves])
        return cls(attribute, tuple(labels), parent, leaf_nodes, numeric, index)

    def leaf_numbers(self) -> npt.NDArray[np.float64]:
        """Numeric value of every leaf; raises ValueError if the attribute is not numeric."""
        if not self.numeric:
            raise ValueError(f"attribute {self.attribute!r} is not numeric")
        return np.array([float(x) for x in self.leaves])


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
