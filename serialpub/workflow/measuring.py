"""A draft's utility figures (docs/design.md section 8): the query workload drawn on the
snapshot and estimated on the release table, and the utility measures
(:mod:`serialpub.report.utility`), read from the draft in memory, not from its files.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from anonymizer.joint import JointRelease, JointWorkloadError, joint_workload_error
from anonymizer.overlap import Overlap
from anonymizer.queries import QueryErrorResult, Workload, draw_workload, estimate_workload
from anonymizer.regions import record_nodes
from anonymizer.release import ReleaseResult
from serialpub.config import Config
from serialpub.io.inputs import Snapshot
from serialpub.report.measure import Measure
from serialpub.report.utility import draft_measures, query_measures
from serialpub.workflow import progress
from serialpub.workflow.dataset_inputs import DatasetInputs
from serialpub.workflow.register_reader import RegisterReader

#: the query workload of every release (docs/design.md section 8)
QUERY_COUNT = 5000
QUERY_DIMENSIONS = 3
QUERY_SELECTIVITY = 0.05


def query_settings(cfg: Config) -> dict[str, Any]:
    """The query workload's settings (docs/design.md section 8)."""
    return {"queries": QUERY_COUNT, "qd": QUERY_DIMENSIONS, "selectivity": QUERY_SELECTIVITY,
            "seed": cfg.query_seed}  # fmt: skip


def snapshot_workload(cfg: Config, inputs: DatasetInputs, snap: Snapshot) -> Workload | None:
    """The query workload's queries and their exact answers on the snapshot
    (docs/design.md section 8), drawn with the declared hierarchies: a release is read with
    the same leaves (:func:`anonymizer.queries.draw_workload`). None when the measure cannot
    read the snapshot (the draft then has no query error, as :func:`_measures` says)."""
    with progress.step("query workload on the snapshot"):
        try:
            return draw_workload(
                snap.table[[*inputs.qis, cfg.sensitive]],
                inputs.hierarchies,
                cfg.sensitive,
                n_queries=QUERY_COUNT,
                qd=QUERY_DIMENSIONS,
                selectivity=QUERY_SELECTIVITY,
                seed=cfg.query_seed,
            )
        except ValueError:
            return None


def measure(
    cfg: Config,
    inputs: DatasetInputs,
    register: RegisterReader,
    snap: Snapshot,
    result: ReleaseResult,
    table: pd.DataFrame,
    workload: Workload | None,
) -> tuple[QueryErrorResult | None, list[Measure]]:
    """The query workload's errors and the utility measures of a draft whose release table
    is ``table`` (:func:`published_table`), ``workload`` its :func:`snapshot_workload`."""
    with progress.step("query workload and utility"):
        return _measures(cfg, inputs, register, snap, result, table, workload)


def _measures(
    cfg: Config,
    inputs: DatasetInputs,
    register: RegisterReader,
    snap: Snapshot,
    result: ReleaseResult,
    table: pd.DataFrame,
    workload: Workload | None,
) -> tuple[QueryErrorResult | None, list[Measure]]:
    sensitive_codes = snap.value_order[0]  # Π_tv and the entropies only compare values
    # three pieces of work beside the main thread's staging of the draft: the register-joint
    # figure on a second thread; the workload's estimates and then the information-loss and
    # channel figures on this one (numpy, pandas and scipy release the GIL in their array
    # work). The joint figure is the longest piece, so it starts first; the estimates and
    # the figures, each shorter, follow one another, so no more than three threads run at
    # once and their temporaries do not all coincide (docs/scaling.md)
    with Overlap(1, "serialpub-joint") as beside:
        # None: a draft the measure cannot read fails the contract suite, which names the value
        query: QueryErrorResult | None = None
        joint: Future[JointWorkloadError] | None = None
        if workload is not None:
            with contextlib.suppress(ValueError):
                hierarchies = inputs.read_hierarchies(table)
                # the labels resolved once, for the estimates and the register-joint figure
                # (the estimates read the QIs in the mapping's order, the figure in inputs.qis')
                names = list(hierarchies)
                nodes = record_nodes(table, names, [hierarchies[q] for q in names], np.int32)
                in_qi_order = nodes if names == list(inputs.qis) else nodes[:, [names.index(q) for q in inputs.qis]]
                joint = beside.submit(_joint_error, inputs, register, snap, table, workload, in_qi_order)
                del in_qi_order
                query = estimate_workload(
                    workload,
                    table,
                    hierarchies,
                    cfg.sensitive,
                    leaf_weights=register.register_leaf_counts,
                    nodes=nodes,
                )
                del nodes
        # the records' leaf ids made here, not held through the estimates
        leaf_keys = register.register.keys[snap.individual]
        figures = draft_measures(result, leaf_keys, register.search_hierarchies(), sensitive_codes)
        del leaf_keys
        if joint is not None:
            # read even when the estimates failed (query None): an error other than the
            # measure's own ValueError is raised, not lost with the unread future
            with contextlib.suppress(ValueError):
                figure = joint.result()
                query = None if query is None else replace(query, joint=figure)
        utility = [*query_measures(query, query_settings(cfg)), *figures]
    return query, utility


def _joint_error(
    inputs: DatasetInputs,
    register: RegisterReader,
    snap: Snapshot,
    table: pd.DataFrame,
    workload: Workload,
    nodes: np.ndarray,
) -> JointWorkloadError:
    """The workload under the register-joint estimator and its histogram-only baseline
    (:mod:`anonymizer.joint`; docs/data-users.md), over the whole register: what a data
    user with the public copy computes. ``nodes``: ``table``'s labels resolved
    (:func:`anonymizer.regions.record_nodes`)."""
    hs, qis, sensitive = inputs.read_hierarchies(table), inputs.qis, inputs.sensitive
    values = [str(v) for v in workload.ranges.sensitive_values]
    release = JointRelease.of(
        table, qis, sensitive, [hs[q] for q in qis], register.register.keys, values, 0, nodes=nodes
    )
    histogram = snap.table[sensitive].astype(str).value_counts().reindex(values, fill_value=0).to_numpy()
    return joint_workload_error(workload, release, histogram)
