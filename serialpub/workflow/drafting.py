"""Drafting a release (docs/design.md section 6): check the inputs, open the draft,
anonymize against the state, measure, and stage the release's data and manifest; the
state records its figures, groups and the statistics file after it, not counted until
the release is published.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from anonymizer import privacy
from anonymizer.hierarchy import Hierarchy
from anonymizer.joint import JointRelease, JointWorkloadError, joint_workload_error
from anonymizer.overlap import Overlap
from anonymizer.queries import QueryErrorResult, Workload, draw_workload, estimate_workload
from anonymizer.release import History, ReleaseResult
from anonymizer.search import InfeasibleError, ValueInfeasibleError
from anonymizer.settings import Dilution, Guarantee, Strategy, SuppressionModel
from serialpub.config import Config
from serialpub.errors import REFUSED, InputError
from serialpub.faults import checkpoint
from serialpub.io import release_files
from serialpub.io.inputs import Snapshot
from serialpub.io.manifest import FORMAT_VERSION, Checksums, Manifest, MeasureRecord, QueryWorkload
from serialpub.io.sources import InputSource
from serialpub.report.measure import Measure
from serialpub.report.render import measure_records
from serialpub.report.utility import draft_measures, query_measures
from serialpub.workflow import anonymizing, identity, manifest_binding, preflight, progress, series_integrity
from serialpub.workflow.anonymizing import Anonymized, anonymize_snapshot, load_state, release_noise, take
from serialpub.workflow.dataset_inputs import DatasetInputs
from serialpub.workflow.dataset_series import DatasetSeries
from serialpub.workflow.input_checks import check_inputs, period_of_source, skipped_periods, snapshot_source
from serialpub.workflow.publishing import recover
from serialpub.workflow.register_reader import RegisterReader
from serialpub.workflow.request import ReleaseRequest
from state.params import DraftParams
from state.store import OpenRelease, this_process

#: the query workload of every release (docs/design.md section 8)
QUERY_COUNT = 5000
QUERY_DIMENSIONS = 3
QUERY_SELECTIVITY = 0.05


@dataclass(frozen=True, kw_only=True)
class ReleaseOutcome:
    """Figures of one published release, drafted or imported (the demo prints one row per
    release; ``serialpub import-release`` prints an import's).

    Attributes:
        seq, period, directory: where it now lives in the release store.
        records, groups: counts in the data file.
        suppressed: snapshot individuals without a published record; None for an import
            without its snapshot, which cannot tell.
        avg_candidates, max_candidates: n_j over the groups; avg_records, max_records: the
            records per group.
        max_breach: largest p(o, s) over every individual after this release.
        seconds: wall time.
        query_error ... query_error_baseline: the query workload's mean relative error
            under the estimators (docs/design.md section 8); NaN when not computed (an import).
        seconds_anonymize, seconds_state: anonymizing and the state's load and commit; NaN
            for an import.
        shown_absent: register individuals in no published region, whom the release shows
            were not in its snapshot (its report's ``presence_shown``); None until the
            release is validated, and for an import.
        exceeds_bound, source_sha256, data_sha256: an import's only. ``exceeds_bound``:
            max_breach > 1/ℓ, the series imported so far already breaks the guarantee (the
            tables are public; the state records it as it is); the sha256 of the data file
            as given and of the rewritten ``data.parquet``.
    """

    seq: int
    period: str
    directory: Path
    records: int
    groups: int
    suppressed: int | None
    avg_candidates: float
    max_candidates: int
    avg_records: float
    max_records: int
    max_breach: float
    seconds: float
    query_error: float = float("nan")
    query_error_weighted: float = float("nan")  # the register-weighted estimator
    # the primary utility figure: the register-joint estimator (anonymizer.joint), and the
    # histogram-only baseline's
    query_error_joint: float = float("nan")
    query_error_baseline: float = float("nan")
    seconds_anonymize: float = float("nan")  # anonymization and the state update it computes
    seconds_state: float = float("nan")  # loading and committing the state
    shown_absent: int | None = None
    exceeds_bound: bool = False
    source_sha256: str | None = None
    data_sha256: str | None = None


@dataclass(frozen=True)
class StagedRelease:
    """A drafted release in its staging folder, not yet published.

    Attributes:
        id: its release row; seq, period: its number and period label.
        staging: the staging folder (data.parquet, manifest.json, then the evidence).
        outcome: its figures, as the demo prints them once published.
    """

    id: int
    seq: int
    period: str
    staging: Path
    outcome: ReleaseOutcome


def draft(
    series: DatasetSeries, inputs: DatasetInputs, register: RegisterReader, request: ReleaseRequest,
    snapshot: str | Path | InputSource, period: str | None = None, owner: str | None = None,
) -> StagedRelease:  # fmt: skip
    """Check the inputs, open the draft, anonymize and stage the release (data and
    manifest in its staging folder; figures, groups and the statistics file after it in
    the state, not counted). The draft is opened only for input that passed its checks,
    so bad input leaves no trace.

    Args:
        series, inputs, register: the dataset's release series, its inputs and its register
            (``register`` made for ``inputs``). They are the caller's: a caller that may see
            the register or hierarchy files change between drafts reads them anew
            (:meth:`serialpub.workflow.publisher.Publisher.draft` does).
        request: what the operator allowed of this release.
        snapshot: the id, QI and sensitive columns: a .csv or .parquet file, or
            ``sql:TABLE`` / ``sql:SELECT ...`` in the input database
            (:mod:`serialpub.io.sources`).
        period: label of the period; defaults to the file or table name's last ``-`` part
            (``snapshot-0007.csv`` gives ``0007``). Labels must sort chronologically.
        owner: who holds the release once staged (default: this process, so that
            recovery fails it if the process ends).

    Raises:
        InputError: bad input (``InputChecksFailed`` for a failed input suite), a period
            already published or not later than the last, or a requirement no partition
            meets (with what to do).
        StateError: another release of the dataset is being prepared.
    """
    started = time.perf_counter()
    cfg = series.ws.config
    source = snapshot_source(series.ws, snapshot)
    period = period or period_of_source(source)
    recover(series)
    preflight.check_before_drafting(series)  # refused now, not after the computation and sign-off
    _ = series.signing_key  # a missing or wrong key is refused now, not after the sign-off
    series_integrity.check_next_key(series)
    # the state is loaded and the snapshot anonymized while its suite runs (anonymizing.ahead)
    checked = check_inputs(series, inputs, register, request, source, period,
                           lambda coded, stop: _ahead(series, inputs, register, coded, stop))  # fmt: skip
    snap = checked.snapshot
    published = series.store.published(cfg.dataset)
    checkpoint("after_snapshot")
    fields: dict[str, Any] = {
        "snapshot": source.record,
        "snapshot_rows": len(snap.individual),
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
    opened = open_draft(series, period, params_record(cfg, inputs), **fields)
    checkpoint("after_draft")
    # the register and hierarchy versions are stored while the release is computed (reading
    # and diffing a register of millions takes a while; Arrow releases the GIL), and waited for
    # before the staged manifest names them
    _ = register.file_sums  # hashed here, not in the thread
    with Overlap(1, "serialpub-versions") as beside:
        keeping = beside.submit(register.keep_input_versions)
        beside.release()
    try:
        computed = _compute(series, inputs, register, opened, snap, source.label, checked.ahead)
        previous = published[-1].seq if published else None
        staging, query, t_commit = _write_draft(series, inputs, register, opened, snap, computed, previous, keeping,
                                                owner)  # fmt: skip
    except BaseException as exc:
        series.abandon(opened, exc)
        raise
    outcome = _outcome(opened.seq, period, series.ws.dataset_dir, computed, query)
    outcome = replace(outcome, seconds=time.perf_counter() - started,
                      seconds_state=outcome.seconds_state + t_commit)  # fmt: skip
    return StagedRelease(id=opened.id, seq=opened.seq, period=period, staging=staging, outcome=outcome)


@dataclass(frozen=True)
class _Computed:
    """A draft's anonymization: the state before it, the anonymizer's result, the release
    table, the query workload on the snapshot and the seconds spent loading and anonymizing."""

    history: History
    result: ReleaseResult
    table: pd.DataFrame
    workload: Workload | None
    seconds_state: float
    seconds_anonymize: float


def _compute(
    series: DatasetSeries, inputs: DatasetInputs, register: RegisterReader, opened: OpenRelease, snap: Snapshot,
    snapshot_path: str, ahead: Future[Anonymized | None] | None,
) -> _Computed:  # fmt: skip
    """Load the state and anonymize the snapshot for the draft ``opened``, or take what was
    computed ahead for exactly this draft (:func:`serialpub.workflow.anonymizing.take`).

    Raises:
        InputError: no generalization fits the suppression budget (with what to do).
    """
    # the queries and their answers on the snapshot need no release: this thread draws them
    # while the snapshot is anonymized ahead (its other core runs the anonymizer)
    cfg = series.ws.config
    workload = snapshot_workload(cfg, inputs, snap)
    done = take(series, ahead, opened)
    hierarchies = register.search_hierarchies()
    if done is not None:  # anonymized while the snapshot suite ran, for exactly this draft
        checkpoint("after_state_load")
        checkpoint("after_anonymize")
        table = done.table if done.table is not None else published_table(inputs, snap, done.result, hierarchies)
        return _Computed(done.history, done.result, table, workload, done.seconds_state, done.seconds_anonymize)
    t_state = time.perf_counter()
    history = load_state(series, register)
    t_state = time.perf_counter() - t_state
    checkpoint("after_state_load")
    t_anon = time.perf_counter()
    try:
        result = anonymize_snapshot(cfg, inputs, register, snap, history, opened.seq,
                                    release_noise(series.ws, opened.seq))  # fmt: skip
    except InfeasibleError as exc:
        if isinstance(exc, ValueInfeasibleError):  # the values by name, as the operator knows them
            exc = InfeasibleError(exc.describe([repr(inputs.protected[v]) for v in exc.values]))
        raise InputError(f"{snapshot_path}: {REFUSED} = {cfg.ell:g}: {exc}. "
                         f"{infeasible_advice(cfg, history)}") from None  # fmt: skip
    t_anon = time.perf_counter() - t_anon
    checkpoint("after_anonymize")
    return _Computed(history, result, published_table(inputs, snap, result, hierarchies), workload, t_state, t_anon)


def _write_draft(
    series: DatasetSeries, inputs: DatasetInputs, register: RegisterReader, opened: OpenRelease, snap: Snapshot,
    computed: _Computed, previous: int | None, keeping: Future[None], owner: str | None,
) -> tuple[Path, QueryErrorResult | None, float]:  # fmt: skip
    """Stage the draft's data file and manifest and its state, then its measures; returns
    the staging folder, the query workload's errors and the seconds spent on the state.
    ``previous``: the newest published release's number, None before the first."""
    cfg, ws, store = series.ws.config, series.ws, series.store
    seq, result = opened.seq, computed.result
    # the query workload and the utility measures read the draft in memory, not its files or
    # state: they run on the other thread while this one writes the data file and stages the
    # state. The manifest is written first without them and again with them before the
    # release is handed to its owner, so no other task reads it without
    with Overlap(1, "serialpub-queries") as beside:
        measuring = beside.submit(_measure, cfg, inputs, register, snap, result, computed.table, computed.workload)
        manifest = new_manifest(cfg, inputs, register, seq, opened.period, previous, result)
        keeping.result()  # the versions exist before anything names them: the staged manifest does
        staging = series.staging_dir(opened)
        # the release row names its staging folder, for operators looking at an open draft
        store.set_staging(opened.id, str(staging))
        with progress.step("staging the draft"):
            release_files.write_staging(ws.dataset_dir, seq, opened.id, computed.table, manifest)
        t_commit = time.perf_counter()
        with progress.step("saving the draft's state"):
            figures = {"records": manifest.records, "groups": manifest.groups, "suppressed": manifest.suppressed,
                       "max_breach": result.max_breach, "data_sha256": manifest.sha256.data_parquet}  # fmt: skip
            rows = release_group_rows(register.search_hierarchies(), result.group_nodes, result.group_candidates,
                                      result.group_records, result.group_counts, inputs.protected)  # fmt: skip
            store.stage(opened.id, figures, rows, register.statistics.tables(result.history), str(staging))
        t_state = time.perf_counter() - t_commit
        query, utility = measuring.result()
    t_commit = time.perf_counter()
    set_measures(cfg, manifest, query, utility)
    release_files.write_manifest(staging, manifest)
    manifest_binding.bind(series, opened.id, manifest)
    if owner is not None:
        store.hand_over(opened.id, owner)
    return staging, query, t_state + time.perf_counter() - t_commit


def _outcome(
    seq: int, period: str, dataset_dir: Path, computed: _Computed, query: QueryErrorResult | None
) -> ReleaseOutcome:
    """The figures of a staged draft, as the demo prints them once published (``seconds``
    is set by the caller)."""
    result = computed.result
    cand, recs = result.group_candidates, result.group_records
    return ReleaseOutcome(
        seq=seq,
        period=period,
        directory=dataset_dir / release_files.release_name(seq),
        records=int(recs.sum()),
        groups=int(cand.size),
        suppressed=result.suppressed,
        avg_candidates=float(cand.mean()),
        max_candidates=int(cand.max()),
        avg_records=float(recs.mean()),
        max_records=int(recs.max()),
        max_breach=result.max_breach,
        query_error=query.mean if query else float("nan"),
        query_error_weighted=query.weighted.mean if query and query.weighted else float("nan"),
        seconds=float("nan"),
        seconds_anonymize=computed.seconds_anonymize,
        seconds_state=computed.seconds_state,
        query_error_joint=query.joint.mean if query and query.joint else float("nan"),
        query_error_baseline=query.joint.baseline_mean if query and query.joint else float("nan"),
    )


def _ahead(
    series: DatasetSeries, inputs: DatasetInputs, register: RegisterReader, coded: Callable[[], Snapshot],
    stop: threading.Event,
) -> Anonymized | None:  # fmt: skip
    """:func:`serialpub.workflow.anonymizing.ahead`, then the release table of its result on
    the same thread, which is free once the anonymizer is done while the main thread still
    draws the query workload. The table is a function of the snapshot and the result only,
    so it is the draft's whenever the result is (``take``); an error building it is raised
    to the draft."""
    done = anonymizing.ahead(series, inputs, register, coded, stop)
    if done is None or stop.is_set():
        return done
    return replace(done, table=published_table(inputs, coded(), done.result, register.search_hierarchies()))


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


def _measure(
    cfg: Config, inputs: DatasetInputs, register: RegisterReader, snap: Snapshot, result: ReleaseResult,
    table: pd.DataFrame, workload: Workload | None,
) -> tuple[QueryErrorResult | None, list[Measure]]:  # fmt: skip
    """The query workload's errors and the utility measures of a draft whose release table
    is ``table`` (:func:`published_table`), ``workload`` its :func:`snapshot_workload`."""
    with progress.step("query workload and utility"):
        return _measures(cfg, inputs, register, snap, result, table, workload)


def _measures(
    cfg: Config, inputs: DatasetInputs, register: RegisterReader, snap: Snapshot, result: ReleaseResult,
    table: pd.DataFrame, workload: Workload | None,
) -> tuple[QueryErrorResult | None, list[Measure]]:  # fmt: skip
    sensitive_codes = snap.value_order[0]  # Π_tv and the entropies only compare values
    leaf_keys = register.register.keys[snap.individual]
    # the information-loss and then the channel figures, which do not depend on the query
    # workload, on a second thread beside its estimates, while the main thread stages the
    # draft (numpy and pandas release the GIL in their array work). Not each on a thread of
    # its own: with the staging that is four threads on two cores, no faster, and their
    # temporaries at once raise the peak (docs/scaling.md)
    with Overlap(1, "serialpub-measures") as beside:
        figures = beside.submit(draft_measures, result, leaf_keys, register.search_hierarchies(), sensitive_codes)
        # None: a draft the measure cannot read fails the contract suite, which names the value
        query = None
        if workload is not None:
            with contextlib.suppress(ValueError):
                query = estimate_workload(workload, table, inputs.read_hierarchies(table), cfg.sensitive,
                                          leaf_weights=register.register_leaf_counts)  # fmt: skip
                query = replace(query, joint=_joint_error(inputs, register, snap, table, workload))
        utility = [*query_measures(query, query_settings(cfg)), *figures.result()]
    return query, utility


def _joint_error(
    inputs: DatasetInputs, register: RegisterReader, snap: Snapshot, table: pd.DataFrame, workload: Workload
) -> JointWorkloadError:
    """The workload under the register-joint estimator and its histogram-only baseline
    (:mod:`anonymizer.joint`; docs/data-users.md), over the whole register: what a data
    user with the public copy computes."""
    hs, qis, sensitive = inputs.read_hierarchies(table), inputs.qis, inputs.sensitive
    values = [str(v) for v in workload.ranges.sensitive_values]
    release = JointRelease.of(table, qis, sensitive, [hs[q] for q in qis], register.register.keys, values, 0)
    histogram = snap.table[sensitive].astype(str).value_counts().reindex(values, fill_value=0).to_numpy()
    return joint_workload_error(workload, release, histogram)


def infeasible_advice(cfg: Config, history: History) -> str:
    """What to do when no generalization fits the budget, from the state's figures."""
    if cfg.guarantee is Guarantee.GLOBAL and cfg.strategy is Strategy.CONSTANT and cfg.k_prime:
        used_up = history.linked >= cfg.k_prime
        if used_up.any():
            people = int(np.bincount(history.class_of, minlength=used_up.shape[0])[used_up.any(axis=1)].sum())
            return (
                f"The constant-ratio budget is used up: {people} individuals have been linked to a protected "
                f"value in k' = {cfg.k_prime} releases, and the strategy allows no further release linking "
                "them to it (paper 004, section 6.1). Plan k' for the whole series; the geometric strategy "
                "has no such bound"
            )
    alpha = cfg.alpha if cfg.guarantee is Guarantee.GLOBAL and cfg.strategy is Strategy.GEOMETRIC else None
    if alpha is not None and history.max_breach() > 0:
        return (
            f"{geometric_growth(cfg.ell, alpha)}; the largest breach probability so far is "
            f"{history.max_breach():.4f}. A larger alpha keeps groups larger and lasts longer; the constant ratio "
            "bounds the series in advance (docs/choosing.md)"
        )
    # under the mechanism-aware model a suppressed record is still charged: no budget helps
    options = ["raise suppression_budget"] if cfg.suppression_model is SuppressionModel.PAPER else []
    if cfg.dilution is Dilution.PRESENCE:
        options += ["protect fewer values", "use register dilution"]
    else:
        options += [
            "protect fewer values",
            "choose a strategy with a smaller ratio target ('serialpub strategy' compares them; the constant "
            "ratio grows with k'); a snapshot holding a large share of the register leaves few candidates per "
            "record",
        ]
    text = ", ".join(options[:-1]) + ", or " + options[-1]
    return text[0].upper() + text[1:]


def geometric_growth(ell: float, alpha: float, releases: int = 5) -> str:
    """How the geometric strategy's targets grow for one (individual, value) linked in
    every release at its target, in words: the first ``releases`` of
    :func:`anonymizer.privacy.geometric_sequence` (paper 004, section 6.2)."""
    targets = privacy.geometric_sequence(ell, alpha, releases)[0]
    shown = ", ".join(f"{t:,.1f}".removesuffix(".0") for t in targets)
    return (
        f"Under the geometric strategy an individual's target grows with each release linking them to a value: "
        f"at α = {alpha:g} and ℓ = {ell:g} the first {releases} targets are {shown} "
        f"(paper 004, section 6.2; 'serialpub strategy --l {ell:g} --alpha {alpha:g}' tabulates them)"
    )


def published_table(
    inputs: DatasetInputs, snap: Snapshot, result: ReleaseResult, hierarchies: Sequence[Hierarchy]
) -> pd.DataFrame:
    """The release table as published: per kept record the QI labels of its group's
    nodes and its sensitive value, sorted by group then value (no identifier, no input
    order); shape (published records, QIs + 1). ``hierarchies``: the ones the search
    ran with (:meth:`RegisterReader.search_hierarchies`). Also used by the experiment
    runner and the report benchmark, so their figures are the pipeline's."""
    keep = np.flatnonzero(result.published)
    group = result.group_of_record[keep]
    value_codes, value_labels = snap.value_order  # codes sort as the values: no sort of 1M texts
    values = value_codes[keep]
    order = np.lexsort((values, group))
    group, values = group[order], values[order]
    cols: dict[str, Any] = {}
    for a, q in enumerate(inputs.qis):
        # Arrow takes each group's label by its node id: no Python string per record, and
        # the same column and Parquet bytes as a numpy string array would give
        labels = pa.array(list(hierarchies[a].labels), pa.string())
        nodes = pa.array(result.group_nodes[group, a].astype(np.int32))
        cols[q] = pd.array(pa.DictionaryArray.from_arrays(nodes, labels).dictionary_decode(), dtype="str")
    # the same for the sensitive value
    texts = pa.array(value_labels.tolist(), pa.string())
    sensitive = pa.DictionaryArray.from_arrays(pa.array(values.astype(np.int32)), texts)
    cols[inputs.sensitive] = pd.array(sensitive.dictionary_decode(), dtype="str")
    return pd.DataFrame(cols)


def release_group_rows(
    hierarchies: Sequence[Hierarchy], nodes: npt.NDArray[np.integer[Any]], candidates: npt.NDArray[np.integer[Any]],
    records: npt.NDArray[np.integer[Any]], counts: npt.NDArray[np.integer[Any]], protected: Sequence[str],
) -> list[dict[str, Any]]:  # fmt: skip
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
    labels = zip(*(np.asarray(h.labels, dtype=object)[nodes[:, a]].tolist()
                   for a, h in enumerate(hierarchies)), strict=True)  # fmt: skip
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
        quasi_identifiers=inputs.qis, numeric=inputs.numeric, protected_values=inputs.protected,
        k_prime=inputs.params.k_prime, alpha=inputs.params.alpha,
    )  # fmt: skip


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


def query_settings(cfg: Config) -> dict[str, Any]:
    """The query workload's settings (docs/design.md section 8)."""
    return {"queries": QUERY_COUNT, "qd": QUERY_DIMENSIONS, "selectivity": QUERY_SELECTIVITY,
            "seed": cfg.query_seed}  # fmt: skip


def new_manifest(
    cfg: Config, inputs: DatasetInputs, register: RegisterReader, seq: int, period: str, previous: int | None,
    result: ReleaseResult,
) -> Manifest:  # fmt: skip
    """The manifest of a draft, before its data file's checksum, validation, measures
    (:func:`set_measures`) and sign-off."""
    manifest = release_manifest(
        cfg, inputs, register.file_sums, seq, period, previous, params_record(cfg, inputs),
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
    )  # fmt: skip
    set_measures(cfg, manifest, None, [])
    return manifest


def release_manifest(
    cfg: Config, inputs: DatasetInputs, file_sums: dict[str, Any], seq: int, period: str, previous: int | None,
    settings: dict[str, Any], **fields: Any,
) -> Manifest:  # fmt: skip
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
        sha256=Checksums(
            data_parquet=None, register_file=file_sums["register"], hierarchies=file_sums["hierarchies"]
        ),
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
