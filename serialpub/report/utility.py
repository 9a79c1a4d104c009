"""Figures of a draft computed when the draft is made: the utility measures and Askari et
al.'s information-theoretic view.

Measures such as non-uniform entropy charge each record for its own original value
against its published generalization, so they need to know which snapshot record went
into which group; the published files deliberately do not say (no identifier, no input
order). They are therefore computed from the anonymizer's result while the draft is made
and recorded in the manifest's ``measures`` list, beside the query error. The figures come
from :mod:`anonymizer.measures`; their wording from :mod:`serialpub.report.wording`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from anonymizer.hierarchy import Hierarchy
from anonymizer.measures.kanonymity_channel import channel_figures
from anonymizer.measures.published import PublishedNodes
from anonymizer.measures.utility import utility_figures
from anonymizer.queries import QueryErrorResult
from anonymizer.release import ReleaseResult
from serialpub.report.measure import Measure
from serialpub.report.wording.channel import channel_measures
from serialpub.report.wording.utility import (
    information_loss_measures,
    joint_query_error_measures,
    query_error_measure,
    weighted_query_error_measure,
)


def utility_measures(
    result: ReleaseResult,
    leaf_keys: np.ndarray,
    hierarchies: Sequence[Hierarchy],
    query: QueryErrorResult | None,
    query_settings: Mapping[str, object],
    sensitive: np.ndarray | None = None,
) -> list[Measure]:
    """Utility measures of a draft: :func:`query_measures` then :func:`draft_measures`.

    Args:
        result: the anonymizer's result for the snapshot.
        leaf_keys: leaf id per QI of every snapshot record, shape (R, d), in snapshot order.
        hierarchies: one per QI, in column order.
        query: the query-error result (None when the draft cannot be read by the measure).
        query_settings: qd, selectivity, queries and seed, for the note.
        sensitive: sensitive-value code per snapshot record, shape (R,), for the
            tuple-wise variance loss (not computed without it).
    """
    return [*query_measures(query, query_settings), *draft_measures(result, leaf_keys, hierarchies, sensitive)]


def query_measures(query: QueryErrorResult | None, query_settings: Mapping[str, object]) -> list[Measure]:
    """The query workload's measures: the register-joint estimator (the primary figure), its
    histogram-only baseline and the gain, then paper 001's uniform estimator and the
    register-marginal one, in that order."""
    weighted = None if query is None or query.weighted is None else float(query.weighted.mean)
    joint = None if query is None else query.joint
    return [
        *joint_query_error_measures(
            None if joint is None else joint.mean, None if joint is None else joint.baseline_mean, query_settings
        ),
        query_error_measure(None if query is None else float(query.mean), query_settings),
        weighted_query_error_measure(weighted, query_settings),
    ]


def draft_measures(
    result: ReleaseResult, leaf_keys: np.ndarray, hierarchies: Sequence[Hierarchy], sensitive: np.ndarray | None = None
) -> list[Measure]:
    """The information-loss measures and Askari et al.'s figures of a draft: everything but
    the query workload, which they do not depend on (the drafting step computes both at once,
    one on each core). Arguments as :func:`utility_measures`."""
    loss = utility_figures(hierarchies, leaf_keys, result.group_of_record, result.group_nodes, sensitive)
    return [*information_loss_measures(loss), *_channel(result, leaf_keys, hierarchies, sensitive)]


def _channel(
    result: ReleaseResult, leaf_keys: np.ndarray, hierarchies: Sequence[Hierarchy], sensitive: np.ndarray | None
) -> list[Measure]:
    """Askari et al.'s figures on the published records (original row i published as row i)."""
    if sensitive is None:
        return []
    keep = np.flatnonzero(result.published)
    if keep.size == 0:
        return []
    every = keep.size == result.published.size  # nothing suppressed: no copies of the records
    # the published nodes as the groups' rows and each record's group: no (R, d) array of them
    nodes = PublishedNodes.grouped(
        result.group_nodes, result.group_of_record if every else result.group_of_record[keep]
    )
    k = int(result.group_records.min()) if result.group_records.size else None
    figures = channel_figures(
        leaf_keys if every else leaf_keys[keep], nodes, hierarchies, sensitive if every else sensitive[keep], k=k
    )
    return channel_measures(figures, suppressed=result.suppressed)
