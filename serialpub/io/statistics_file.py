"""The statistics file (paper 004, section 7) between the state database and
:class:`anonymizer.release.History`.

The database keeps two tables per release (``state.store``): *members* (individual,
register row, history class, ℓ; tagged with the register's sha256) and *classes* (class,
protected value, survival product, linked releases; pairs never linked left out). This
module turns them into a History over the current register's rows and back.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from anonymizer.release import History
from serialpub.io.inputs import Register
from state.engine import StateError


class StatisticsFile:
    """Reads and writes the statistics file for one register and list of protected values."""

    def __init__(self, register: Register, protected: list[str], register_sha256: str) -> None:
        self.register = register
        self.protected = protected
        self.register_sha256 = register_sha256
        self._ids = pa.array(register.ids.to_numpy().astype(str))

    def load(self, stats: tuple[pa.Table, pa.Table] | None, ell: np.ndarray) -> History:
        """The History over the register's rows; before any release, one class per ℓ.

        Args:
            stats: (members, classes) as ``StateStore.latest_statistics`` returns them.
            ell: ℓ per register individual, shape (N,); used for individuals new to the
                register since the state was written (they form one fresh class).

        Raises:
            StateError: the state names individuals missing from the register, or protected
                values no longer configured.
        """
        if stats is None:
            return History.empty(ell, len(self.protected))
        members, classes = stats
        meta = members.schema.metadata or {}
        if meta.get(b"register_sha256", b"").decode() == self.register_sha256:
            rows = members.column("row").to_numpy().astype(np.int64)  # same register: row numbers hold
        else:
            rows = self.register.rows_of(pd.Series(members.column("individual").to_numpy(zero_copy_only=False)))
            if (rows < 0).any():
                raise StateError("the state names individuals missing from the register; the register may only grow")
        n = len(self.register.ids)
        known = np.zeros(n, dtype=bool)
        known[rows] = True
        class_col = members.column("class").to_numpy().astype(np.int64)
        n_classes = int(class_col.max()) + 1 if class_col.size else 0
        class_of = np.full(n, n_classes, dtype=np.int64)  # newcomers to the register: a fresh class
        class_of[rows] = class_col
        class_ell = np.full(n_classes + 1, float(ell[0]) if n else 2.0)
        class_ell[class_col] = members.column("ell").to_numpy()
        if not known.all():
            class_ell[n_classes] = float(ell[~known][0])
        survival = np.ones((n_classes + 1, len(self.protected)))
        linked = np.zeros((n_classes + 1, len(self.protected)), dtype=np.int64)
        values = classes.column("value").combine_chunks()
        to_protected = pd.Index(self.protected).get_indexer(values.dictionary.to_pylist())
        cols = to_protected[values.indices.to_numpy()]
        if (cols < 0).any():
            raise StateError("the state names protected values the configuration no longer protects")
        k = classes.column("class").to_numpy().astype(np.int64)
        survival[k, cols] = classes.column("survival").to_numpy()
        linked[k, cols] = classes.column("linked").to_numpy()
        return History(class_of, survival, linked, class_ell)

    def tables(self, history: History) -> tuple[pa.Table, pa.Table]:
        """(members, classes) for the state database."""
        members = pa.table(
            {
                "individual": self._ids,
                "row": pa.array(np.arange(len(self.register.ids), dtype=np.int64)),
                "class": pa.array(history.class_of.astype(np.int32)),
                "ell": pa.array(history.ell[history.class_of]),
            }
        ).replace_schema_metadata({"register_sha256": self.register_sha256})
        k, cols = np.nonzero(history.linked)
        classes = pa.table(
            {
                "class": pa.array(k.astype(np.int32)),
                "value": pa.DictionaryArray.from_arrays(pa.array(cols.astype(np.int32)), pa.array(self.protected)),
                "survival": pa.array(history.survival[k, cols]),
                "linked": pa.array(history.linked[k, cols].astype(np.int32)),
            }
        )
        return members, classes
