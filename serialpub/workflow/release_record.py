"""The release record of a draft or an import (docs/release-contract.md): its row's params
opened in the state, its manifest, its group rows, and the staging of its data file,
manifest and state, not counted until the release is published.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from anonymizer import privacy
from anonymizer.hierarchy import Hierarchy
from anonymizer.queries import QueryErrorResult
from anonymizer.release import ReleaseResult
from anonymizer.settings import Strategy
from anonymizer.topdown import name_values
from serialpub.config import Config
from serialpub.io import release_files
from serialpub.io.manifest import FORMAT_VERSION, Checksums, Manifest, MeasureRecord, QueryWorkload
from serialpub.io.sources import InputSource
from serialpub.report.measure import Measure
from serialpub.report.render import measure_records
from serialpub.workflow import identity, manifest_binding, progress
from serialpub.workflow.dataset_inputs import DatasetInputs
from serialpub.workflow.dataset_series import DatasetSeries
from serialpub.workflow.input_checks import InputChecks, skipped_periods
from serialpub.workflow.measuring import query_settings
from serialpub.workflow.register_reader import RegisterReader
from serialpub.workflow.request import ReleaseRequest
from state.params import DraftParams
from state.store import OpenRelease, PublishedRelease, this_process


def release_group_rows(
    hierarchies: Sequence[Hierarchy],
    nodes: npt.NDArray[np.integer[Any]],
    candidates: npt.NDArray[np.integer[Any]],
    records: npt.NDArray[np.integer[Any]],
    counts: npt.NDArray[np.integer[Any]],
    protected: Sequence[str],
) -> list[dict[str, Any]]:
    """The state's row of every QI-group of a release, drafted or imported: the fields of
    :class:`serialpub.io.manifest.GroupRow` (``labels``, ``candidates``, ``records``,
    ``counts`` of the protected values it holds).

    Args:
        hierarchies: one per QI, in QI order, the groups' nodes are nodes of.
        nodes: shape (groups, QIs), each group's node per QI.
        candidates, records: shape (groups,), n_j and the published records of each group.
        counts: shape (groups, protected values), n_{j,s}.
        protected: the protected values, in the order of ``counts``' columns.
    """
    # built from whole columns, not a validated GroupRow per group, which costs a Python
    # object per group. Every figure is a count the release holds (≥ 0)
    labels = zip(
        *(np.asarray(h.labels, dtype=object)[nodes[:, a]].tolist() for a, h in enumerate(hierarchies)), strict=True
    )
    group, value = np.nonzero(counts)  # group-major, values ascending
    held = np.searchsorted(group, np.arange(nodes.shape[0] + 1))
    names = np.asarray(protected, dtype=object)[value].tolist()
    held_counts = counts[group, value].tolist()
    return [
        {"labels": list(lab), "candidates": cand, "records": recs,
         "counts": dict(zip(names[held[g]:held[g + 1]], held_counts[held[g]:held[g + 1]], strict=True))}
        for g, (lab, cand, recs) in enumerate(zip(labels, candidates.tolist(), records.tolist(), strict=True))
    ]  # fmt: skip


def params_record(cfg: Config, inputs: DatasetInputs) -> dict[str, Any]:
    """The release's privacy settings as the draft's row and its manifest record them
    (:meth:`serialpub.io.release_settings.ReleaseSettings.recorded`), with what the inputs
    resolved: the QIs and numeric QIs in the inputs' order, the protected values listed,
    and the strategy's parameters as the search uses them."""
    return cfg.recorded(
        quasi_identifiers=inputs.qis,
        numeric=inputs.numeric,
        protected_values=inputs.protected,
        k_prime=inputs.params.k_prime,
        alpha=inputs.params.alpha,
    )


def open_draft(series: DatasetSeries, period: str, settings: dict[str, Any], **fields: Any) -> OpenRelease:
    """Open the dataset's next release as a draft owned by this process, its row's params
    the privacy ``settings`` (:func:`params_record`, or an import's) and ``fields`` (the
    other fields of :class:`state.params.DraftParams`): the one place a release row's params
    are made, for drafts and imports alike.

    Raises:
        pydantic.ValidationError: a key that is no field of ``DraftParams``, or a value of
            the wrong type (a programming error, not bad input).
        StateError: another release of the dataset is open, or the period is not later
            than the last published one (:meth:`state.store.StateStore.begin_draft`).
    """
    params = DraftParams(**settings, **fields)
    return series.store.begin_draft(series.dataset, period, params, this_process())


def new_manifest(
    cfg: Config,
    inputs: DatasetInputs,
    register: RegisterReader,
    seq: int,
    period: str,
    previous: int | None,
    result: ReleaseResult,
) -> Manifest:
    """The manifest of a draft, before its data file's checksum, validation, measures
    (:func:`set_measures`) and sign-off."""
    manifest = release_manifest(
        cfg,
        inputs,
        register.file_sums,
        seq,
        period,
        previous,
        params_record(cfg, inputs),
        records=int(result.published.sum()),
        groups=int(result.group_nodes.shape[0]),
        suppressed=result.suppressed,
        max_breach_probability=result.max_breach,
        constant_ratio_target=(
            privacy.constant_ratio_target(cfg.ell, cfg.k_prime)
            if cfg.strategy is Strategy.CONSTANT and cfg.k_prime
            else None
        ),
        utility=None,
        register_marginals={
            q: {label: int(n) for label, n in zip(inputs.hierarchies[q].leaves, counts, strict=True)}
            for q, counts in register.register_leaf_counts.items()
        },
        measures=[],
        **search_levels(inputs, result),
    )
    set_measures(cfg, manifest, None, [])
    return manifest


def search_levels(inputs: DatasetInputs, result: ReleaseResult) -> dict[str, Any]:
    """The draft manifest's ``search_levels``: the top-down search's per-level account of
    what blocked its splits, the protected values by name, for the release report
    (:func:`anonymizer.topdown.level_report`); none for the bottom-up search, which has no
    levels."""
    levels = result.generalization.levels
    return {} if levels is None else {"search_levels": name_values(levels, inputs.protected)}


def release_manifest(
    cfg: Config,
    inputs: DatasetInputs,
    file_sums: dict[str, Any],
    seq: int,
    period: str,
    previous: int | None,
    settings: dict[str, Any],
    **fields: Any,
) -> Manifest:
    """The manifest of a release, drafted or imported, before its data file's checksum and
    its seal: the keys every release has (docs/release-contract.md), its privacy
    ``settings`` (:func:`params_record`, or an import's) and ``fields``, its figures and what
    only a draft or only an import records. Its keys are the ones given (``exclude_unset``).
    ``file_sums``: the register's and the hierarchies' sha256 (:attr:`RegisterReader.file_sums`).

    Raises:
        pydantic.ValidationError: a field breaks the contract (a programming error).
    """
    return Manifest(
        format_version=FORMAT_VERSION,
        dataset=cfg.dataset,
        release=seq,
        period=period,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        **{"quasi_identifiers": inputs.qis, "sensitive": cfg.sensitive, **settings},
        sha256=Checksums(data_parquet=None, register_file=file_sums["register"], hierarchies=file_sums["hierarchies"]),
        previous_release=previous,
        validation=None,
        sign_off=None,
        **fields,
    )


def set_measures(cfg: Config, manifest: Manifest, query: QueryErrorResult | None, utility: list[Measure]) -> None:
    """Put a draft's query workload and utility measures into its manifest."""
    manifest.utility = QueryWorkload(
        average_relative_error=query.mean if query else None,
        register_weighted_error=query.weighted.mean if query and query.weighted else None,
        register_joint_error=query.joint.mean if query and query.joint else None,
        histogram_baseline_error=query.joint.baseline_mean if query and query.joint else None,
        **query_settings(cfg),
    )
    # figures that need the link between snapshot records and groups (report.utility)
    manifest.measures = [MeasureRecord(**r) for r in measure_records(utility)]


def snapshot_fields(
    cfg: Config,
    request: ReleaseRequest,
    source: InputSource,
    period: str,
    checked: InputChecks,
    published: list[PublishedRelease],
) -> dict[str, Any]:
    """The fields of a draft's row params (:class:`state.params.DraftParams`) beside its
    settings: its snapshot, who prepared it, and the decisions of ``request`` it was drafted
    under (a repeated snapshot, skipped periods)."""
    fields: dict[str, Any] = {
        "snapshot": source.record,
        "snapshot_rows": len(checked.snapshot.individual),
        "snapshot_sha256": checked.sha256,
        # the account that prepared it: under sign_off.four_eyes it cannot approve it. The
        # rule is the one on now, at drafting: a configuration changed before the sign-off
        # does not apply to this draft (docs/compliance.md, "Who may sign off")
        "prepared_by": request.preparer or identity.os_login(),
        "four_eyes": cfg.sign_off.four_eyes,
    }
    repeated = [r.seq for r in published if r.params.snapshot_sha256 == checked.sha256]
    if repeated:  # allowed only with request.allow_repeated_snapshot (check_repeated_snapshot): kept
        fields["repeats_snapshot_of"] = repeated
    gap = skipped_periods(cfg, period, published)
    if gap:  # allowed only with request.skip_reason (check_period): the decision is kept
        fields |= {"skipped_periods": gap, "skip_reason": request.skip_reason}
    return fields


def stage_draft(
    series: DatasetSeries,
    inputs: DatasetInputs,
    register: RegisterReader,
    opened: OpenRelease,
    result: ReleaseResult,
    table: pd.DataFrame,
    previous: int | None,
) -> tuple[Path, Manifest, float]:
    """Stage the draft ``opened``: its data file (``table``, :func:`serialpub.workflow.drafting.published_table`)
    and its manifest without measures in its staging folder, its figures, group rows and
    statistics file in the state. Returns the staging folder, the manifest and the seconds
    spent on the state. ``previous``: the newest published release's number, None before
    the first. The register's input versions must be kept already: the manifest names them."""
    cfg, ws, store = series.ws.config, series.ws, series.store
    seq = opened.seq
    manifest = new_manifest(cfg, inputs, register, seq, opened.period, previous, result)
    staging = series.staging_dir(opened)
    # the release row names its staging folder, for operators looking at an open draft
    store.set_staging(opened.id, str(staging))
    with progress.step("staging the draft"):
        release_files.write_staging(ws.dataset_dir, seq, opened.id, table, manifest)
    t_state = time.perf_counter()
    with progress.step("saving the draft's state"):
        figures = {"records": manifest.records, "groups": manifest.groups, "suppressed": manifest.suppressed,
                   "max_breach": result.max_breach, "data_sha256": manifest.sha256.data_parquet}  # fmt: skip
        rows = release_group_rows(
            register.search_hierarchies(),
            result.group_nodes,
            result.group_candidates,
            result.group_records,
            result.group_counts,
            inputs.protected,
        )
        store.stage(opened.id, figures, rows, register.statistics.tables(result.history), str(staging))
    return staging, manifest, time.perf_counter() - t_state


def finish_staging(
    series: DatasetSeries,
    opened: OpenRelease,
    staging: Path,
    manifest: Manifest,
    query: QueryErrorResult | None,
    utility: list[Measure],
    owner: str | None,
) -> None:
    """Write the staged draft's manifest again with its query workload's errors and utility
    measures (:func:`set_measures`), bind it to the release row, and hand the draft to
    ``owner`` (None: it stays this process's)."""
    set_measures(series.ws.config, manifest, query, utility)
    release_files.write_manifest(staging, manifest)
    manifest_binding.bind(series, opened.id, manifest)
    if owner is not None:
        series.store.hand_over(opened.id, owner)
