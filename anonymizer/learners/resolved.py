"""The learners' inputs from releases resolved against one register in memory
(:class:`anonymizer.joint.JointRelease`): what the planner holds of a candidate series and
the writer holds of the releases published so far and the draft.

Each group's candidates are the register individuals of its region (or its records, if
more), and the sensitive domain is the protected values, then every other value published,
as the audit reads a public copy (:func:`serialpub.analysis.audit.learners.learner_series`),
so the learners' figures on it are the audit's on the same series (tests/test_plan.py,
tests/test_report_learners.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import pandas as pd

from anonymizer.hierarchy import Hierarchy
from anonymizer.learners.core import LearnerSeries, cell_series
from anonymizer.learners.figures import IntArray


class Resolved(Protocol):
    """What the learners read of a release resolved against a register: the attributes of
    :class:`anonymizer.joint.JointRelease`, named here rather than imported, because that
    module resolves regions with the writer side's geometry, which the audit (the learners'
    other caller) must not import."""

    @property
    def qis(self) -> tuple[str, ...]: ...
    @property
    def hierarchies(self) -> tuple[Hierarchy, ...]: ...
    @property
    def sensitive_values(self) -> tuple[str, ...]: ...
    @property
    def counts(self) -> IntArray: ...
    @property
    def cell_leaves(self) -> IntArray: ...
    @property
    def cell_counts(self) -> IntArray: ...
    @property
    def group_of_cell(self) -> IntArray: ...
    @property
    def register_in_group(self) -> IntArray: ...


def resolved_series(
    releases: Sequence[Resolved], protected: Sequence[str], ell: float, ids: pd.Index, cell_of: IntArray
) -> LearnerSeries:
    """The :class:`LearnerSeries` of ``releases``, each resolved against the same register
    (the same cells in the same order), for the ``protected`` values and the guarantee's ℓ.

    Args:
        ids, cell_of: the register's individual ids (N,) and the cell of each (N,), in the
            releases' cell order.

    Raises:
        ValueError: no release, or releases resolved against different registers."""
    if not releases:
        raise ValueError("the learners need at least one release")
    protected = list(protected)
    others = sorted(
        {
            v
            for r in releases
            for v, n in zip(r.sensitive_values, r.counts.sum(axis=0), strict=True)
            if n > 0 and v not in protected
        }
    )
    domain = [*protected, *others]
    column = {v: i for i, v in enumerate(domain)}
    cells = releases[0]
    per_release = []
    for r in releases:
        if r.cell_counts.size != cells.cell_counts.size:
            raise ValueError("the releases are resolved against one register")
        counts = np.zeros((r.counts.shape[0], len(domain)), dtype=np.int64)
        for u, v in enumerate(r.sensitive_values):
            if v in column:
                counts[:, column[v]] = r.counts[:, u]
        candidates = np.maximum(r.register_in_group, r.counts.sum(axis=1))
        per_release.append((r.group_of_cell, candidates, counts))
    return cell_series(
        list(cells.qis),
        [h.n_leaves for h in cells.hierarchies],
        cells.cell_leaves,
        cells.cell_counts,
        per_release,
        domain,
        protected,
        ell,
        ids,
        np.asarray(cell_of, dtype=np.int64),
    )
