"""Published node ids of a release held per QI-group: the form the anonymizer gives them in.

Every record of a QI-group is published with the group's nodes, so a measure that reads the
published nodes of R records needs no (R, d) array: a column is the group table's column
gathered by each record's group, and a node's records are its groups' sizes summed. This
module does no I/O and no checking (:mod:`._checks` does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

IdArray = npt.NDArray[np.integer[Any]]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class PublishedNodes:
    """Node id per QI of R published records: record i has the nodes ``table[group[i]]``.

    Build it with :meth:`per_record` or :meth:`grouped`.

    Attributes:
        table: node id per QI of every row, shape (G, d); with ``group`` None, one row per record.
        group: row of ``table`` of every record, shape (R,), codes in [−G, G), or None
            (``table`` is per record). A negative code counts from the end, as numpy indexing
            does (the snapshot's suppressed records take a row of roots appended last, −1).
        sizes: records per row of ``table``, shape (G,).
    """

    table: IdArray
    group: IdArray | None
    sizes: IntArray

    @classmethod
    def per_record(cls, nodes: IdArray) -> PublishedNodes:
        """An (R, d) array of node ids as it is."""
        return cls(nodes, None, np.ones(nodes.shape[0], dtype=np.int64))

    @classmethod
    def grouped(cls, table: IdArray, group: IdArray) -> PublishedNodes:
        """Rows ``table`` (G, d) and the row of every record ``group`` (R,), codes in [−G, G)."""
        rows = table.shape[0]
        folded = np.mod(group, rows) if group.size and int(group.min()) < 0 else group
        return cls(table, group, np.bincount(folded, minlength=rows).astype(np.int64))

    @property
    def shape(self) -> tuple[int, int]:
        """(R records, d QIs)."""
        rows = self.table.shape[0] if self.group is None else self.group.shape[0]
        return rows, self.table.shape[1]

    def column(self, j: int) -> IdArray:
        """Node id of QI ``j`` of every record, shape (R,)."""
        col = self.table[:, j]
        return col if self.group is None else col[self.group]

    def present(self) -> IdArray:
        """The rows of ``table`` that some record has, shape (G', d)."""
        return self.table if self.group is None else self.table[self.sizes > 0]

    def node_counts(self, j: int, n_nodes: int) -> IntArray:
        """Records published with each node of QI ``j``, shape (n_nodes,), int64."""
        if self.group is None:
            return np.bincount(self.table[:, j], minlength=n_nodes).astype(np.int64, copy=False)
        # integer sizes summed in float64 are exact (fewer than 2**53 records)
        return np.bincount(self.table[:, j], weights=self.sizes, minlength=n_nodes).astype(np.int64)
