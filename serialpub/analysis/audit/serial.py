"""Register individuals across a series whose register changes (docs/design.md section 10).

Each release is audited against the register of its period, on that register's distinct QI
combinations (:mod:`.cells`). Two individuals share every factor of p (paper 004, Lemma 4)
only if they share a combination in *every* release, and the same presence in every
release's register; those sequences are the *serial cells*. When the register never
changes they are the cells of the one register, one to one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from anonymizer.arrays import expand_ranges, factorize
from serialpub.analysis.audit.geometry import JOIN_CHUNK
from serialpub.analysis.audit.recompute import History

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class SerialCells:
    """Individuals of every register version (U), their serial cell (U,), the first
    individual of every serial cell (S,), its size (S,), and its cell in each release's
    register, -1 where the individual was not in it (S, J)."""

    ids: pd.Index
    code: IntArray
    first: IntArray
    counts: IntArray
    local: IntArray


class SerialBuilder:
    """Serial cells, built one release at a time (:meth:`add`, then :meth:`done`)."""

    def __init__(self) -> None:
        self._ids = pd.Index(np.empty(0, dtype=object))
        self._code = np.empty(0, dtype=np.int64)
        self._local = np.empty((0, 0), dtype=np.int64)

    def add(self, ids: pd.Index, cell_of_row: IntArray) -> None:
        """Release j's register: its ids (N_j,) and the cell of each of its rows (N_j,)."""
        pos = np.asarray(self._ids.get_indexer(ids), dtype=np.int64)
        new = pos < 0
        if new.any():
            pos[new] = len(self._ids) + np.arange(int(new.sum()))
            self._ids = self._ids.append(ids[new])
        previous = np.concatenate([self._code, np.full(len(self._ids) - self._code.size, -1, dtype=np.int64)])
        local = np.full(len(self._ids), -1, dtype=np.int64)
        local[pos] = cell_of_row
        code, first = factorize((previous + 1) * (int(local.max(initial=-1)) + 2) + (local + 1))
        before = previous[first]
        history = np.full((first.size, self._local.shape[1] + 1), -1, dtype=np.int64)
        seen = before >= 0
        history[seen, :-1] = self._local[before[seen]]
        history[:, -1] = local[first]
        self._code, self._local = code, history

    def repeat(self) -> None:
        """The next release has the same register (and cells) as the one before."""
        self._local = np.concatenate([self._local, self._local[:, -1:]], axis=1)

    def done(self) -> SerialCells:
        counts = np.bincount(self._code, minlength=self._local.shape[0]).astype(np.int64)
        first = np.full(self._local.shape[0], -1, dtype=np.int64)
        first[self._code[::-1]] = np.arange(self._code.size - 1, -1, -1)  # lowest index wins
        return SerialCells(self._ids, self._code, first, counts, self._local)


def to_serial(rows: History, local: IntArray) -> History:
    """History rows over one release's cells, as rows over the serial cells that had
    that cell in that release (``local``: the release's column of ``SerialCells.local``)."""
    order = np.argsort(local, kind="stable")
    ranked = local[order]
    lo = np.searchsorted(ranked, rows.cell, side="left").astype(np.int64)
    hi = np.searchsorted(ranked, rows.cell, side="right").astype(np.int64)
    parts = list(expand_ranges(lo, hi, JOIN_CHUNK))
    if not parts:
        return History(*(np.empty(0, dtype=np.int64) for _ in range(4)))
    ri = np.concatenate([p[0] for p in parts])
    rk = np.concatenate([p[1] for p in parts])
    return History(order[rk], rows.value[ri], rows.n[ri], rows.n_s[ri])
