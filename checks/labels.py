"""The labels of a draft table coded once per column, for every check that reads them
(docs/validation.md, "Distinct values").

A draft's validation reads the same 1,000,000-record label columns in several places: the
contract suite checks each column's distinct values (:mod:`checks.distinct`), the
disjointness suite and the breach computation both turn the QI labels into hierarchy nodes
(:func:`checks.breach.draft_groups`), and the report's measures code the sensitive
column against its domain. Each of them hashed every record's text again. A
:class:`LabelCodes` factorizes each column once (``pd.factorize``, as each of them did) and
hands out the same codes, so every reader gets what it computed before, from one pass.

The suites and the breach computation run on two threads (:mod:`serialpub.workflow.validating`):
a lock makes the second reader of a column wait for the first's codes rather than compute
them again.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from anonymizer.hierarchy import Hierarchy
from anonymizer.regions import label_nodes, nodes_of_labels

IntArray = npt.NDArray[np.int64]


class LabelCodes:
    """The columns of one table (not copied; the table must not change while this is used),
    each factorized at most once.

    Args:
        table: the draft's rows, one label column per QI and the sensitive column.
    """

    def __init__(self, table: pd.DataFrame) -> None:
        self.table = table
        self._lock = threading.Lock()  # the codes
        self._nodes_lock = threading.Lock()  # the nodes (taken before the codes' lock, never after)
        self._codes: dict[str, tuple[IntArray, pd.Index]] = {}
        self._nodes: dict[tuple[str, ...], IntArray] = {}

    def __getstate__(self) -> dict[str, Any]:  # a lock does not pickle; the codes are kept
        return {"table": self.table, "_codes": self._codes, "_nodes": self._nodes}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock, self._nodes_lock = threading.Lock(), threading.Lock()

    def codes(self, column: str) -> tuple[IntArray, pd.Index]:
        """``pd.factorize(table[column], use_na_sentinel=True)``: the code of every row,
        shape (R,), int64, -1 for a missing value, and the distinct values in order of first
        appearance (missing values left out).

        Raises:
            KeyError: no such column.
        """
        with self._lock:
            if column not in self._codes:
                found, uniques = pd.factorize(self.table[column], use_na_sentinel=True)
                self._codes[column] = (np.asarray(found, dtype=np.int64), pd.Index(uniques))
            return self._codes[column]

    def nodes(self, qis: Sequence[str], hierarchies: Mapping[str, Hierarchy]) -> IntArray:
        """:func:`anonymizer.regions.record_nodes` of the ``qis`` columns: the node id per QI of
        every row, shape (R, d), -1 where a label is no node of its hierarchy. Computed once
        per list of QIs (the hierarchies are the draft's, one per QI)."""
        key = tuple(qis)
        with self._nodes_lock:
            if key not in self._nodes:
                out = np.empty((len(self.table), len(qis)), dtype=np.int64)
                for a, q in enumerate(qis):
                    column = self.table[q]
                    if isinstance(column.dtype, pd.CategoricalDtype):  # coded already, by its categories
                        out[:, a] = label_nodes(column, hierarchies[q])
                    else:
                        found, uniques = self.codes(q)
                        out[:, a] = nodes_of_labels(found, [str(x) for x in uniques], hierarchies[q])
                self._nodes[key] = out
            return self._nodes[key]

    def distinct(self, column: str) -> pd.Series:
        """``table[column].drop_duplicates()`` with a fresh index: the distinct values in order
        of first appearance, in the column's dtype; from the codes for a column of pandas'
        string dtype without a missing value (a draft's), else as pandas computes it."""
        series = self.table[column]
        if isinstance(series.dtype, pd.StringDtype):  # as read from a release's parquet file
            found, uniques = self.codes(column)
            if uniques.dtype == series.dtype and not (found < 0).any():
                return pd.Series(uniques.array, name=column, copy=False)
        return series.drop_duplicates().reset_index(drop=True)
