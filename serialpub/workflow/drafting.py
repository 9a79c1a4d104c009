"""Drafting a release (docs/design.md section 6): check the inputs, open the draft,
anonymize against the state, measure, and stage the release's data and manifest; the
state records its figures, groups and the statistics file after it, not counted until
the release is published.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from anonymizer import privacy
from anonymizer.hierarchy import Hierarchy
from anonymizer.overlap import Overlap, sequential
from anonymizer.queries import QueryErrorResult
from anonymizer.release import History, ReleaseResult
from anonymizer.search import InfeasibleError, ValueInfeasibleError
from anonymizer.settings import Dilution, Guarantee, Strategy, SuppressionModel
from serialpub.config import Config
from serialpub.errors import REFUSED, InputError
from serialpub.faults import checkpoint
from serialpub.io import release_files
from serialpub.io.inputs import Snapshot
from serialpub.io.sources import InputSource
from serialpub.workflow import anonymizing, preflight, progress, release_record, series_integrity
from serialpub.workflow.anonymizing import Anonymized, anonymize_snapshot, load_state, release_noise, take
from serialpub.workflow.dataset_inputs import DatasetInputs
from serialpub.workflow.dataset_series import DatasetSeries
from serialpub.workflow.input_checks import (
    InputChecks,
    code_snapshot,
    keep_checks,
    period_of_source,
    read_snapshot,
    run_snapshot_suite,
    snapshot_source,
)
from serialpub.workflow.measuring import measure, snapshot_workload
from serialpub.workflow.publishing import recover
from serialpub.workflow.register_reader import RegisterReader
from serialpub.workflow.request import ReleaseRequest
from state.store import OpenRelease


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
    series: DatasetSeries,
    inputs: DatasetInputs,
    register: RegisterReader,
    request: ReleaseRequest,
    snapshot: str | Path | InputSource,
    period: str | None = None,
    owner: str | None = None,
) -> StagedRelease:
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
    source = snapshot_source(series.ws, snapshot)
    period = period or period_of_source(source)
    recover(series)
    preflight.check_before_drafting(series)  # refused now, not after the computation and sign-off
    _ = series.signing_key  # a missing or wrong key is refused now, not after the sign-off
    series_integrity.check_next_key(series)
    read = read_snapshot(series, inputs, register, request, source, period)
    ahead: Future[Anonymized | None] | None = None
    if isinstance(read, InputChecks):  # this very snapshot was checked with this reader before
        checked = read
    else:
        # the snapshot is coded on the second core while its suite runs (Great Expectations'
        # Python holds the GIL; the coding is numpy and pandas work that releases it), and on
        # that thread after the coding, which holds the snapshot's memory until then, the state
        # is loaded and the snapshot anonymized for the draft about to be opened (_ahead). The
        # suite's verdict is still the one reported first: when it fails, nothing waits for
        # the work ahead, which is told to stop. Run in turn (anonymizer.overlap.sequential),
        # nothing is done ahead: _compute computes it after opening the draft
        stop = threading.Event()
        with Overlap(1, "serialpub-snapshot") as beside:
            try:
                coding = beside.submit(code_snapshot, inputs, register, read)
                if not sequential():
                    ahead = beside.submit(lambda: _ahead(series, inputs, register, coding.result(), stop))
                suite = run_snapshot_suite(series, register, read)
                with progress.step("checking the snapshot against the register"):
                    snap = coding.result()
            except BaseException:
                stop.set()  # and the work not yet started is dropped
                raise
            beside.release()  # the work ahead goes on: it is waited for below
        checked = keep_checks(register, read, suite, snap)
    staged = _open_and_stage(
        series, inputs, register, request, source, period, checked, ahead.result if ahead else lambda: None, owner
    )
    return replace(staged, outcome=replace(staged.outcome, seconds=time.perf_counter() - started))


def _open_and_stage(
    series: DatasetSeries,
    inputs: DatasetInputs,
    register: RegisterReader,
    request: ReleaseRequest,
    source: InputSource,
    period: str,
    checked: InputChecks,
    anonymized_ahead: Callable[[], Anonymized | None],
    owner: str | None,
) -> StagedRelease:
    """:func:`draft`'s second half, once the inputs passed: open the draft, anonymize (or
    take what ``anonymized_ahead`` gives, None when nothing was done ahead), stage the
    release with its measures. Its outcome's ``seconds`` are the caller's to set."""
    cfg = series.ws.config
    snap = checked.snapshot
    published = series.store.published(cfg.dataset)
    checkpoint("after_snapshot")
    fields = release_record.snapshot_fields(cfg, request, source, period, checked, published)
    opened = release_record.open_draft(series, period, release_record.params_record(cfg, inputs), **fields)
    checkpoint("after_draft")
    # the register and hierarchy versions are stored while the release is computed (reading
    # and diffing a register of millions takes a while; Arrow releases the GIL), and waited for
    # before the staged manifest names them
    _ = register.file_sums  # hashed here, not in the thread
    with Overlap(1, "serialpub-versions") as beside:
        keeping = beside.submit(register.keep_input_versions)
        beside.release()
    try:
        # the queries and their answers on the snapshot need no release: this thread draws them
        # while the snapshot is anonymized ahead (its other core runs the anonymizer)
        workload = snapshot_workload(cfg, inputs, snap)
        done = take(series, anonymized_ahead(), opened)
        computed = _compute(series, inputs, register, opened, snap, source.label, done)
        previous = published[-1].seq if published else None
        # the query workload and the utility measures read the draft in memory, not its files
        # or state: they run on the other thread while this one writes the data file and
        # stages the state. The manifest is written first without them and again with them
        # before the release is handed to its owner, so no other task reads it without
        with Overlap(1, "serialpub-queries") as beside:
            measuring = beside.submit(measure, cfg, inputs, register, snap, computed.result, computed.table, workload)
            keeping.result()  # the versions exist before anything names them: the staged manifest does
            staging, manifest, t_state = release_record.stage_draft(
                series, inputs, register, opened, computed.result, computed.table, previous
            )
            query, utility = measuring.result()
        t_commit = time.perf_counter()
        release_record.finish_staging(series, opened, staging, manifest, query, utility, owner)
        t_commit = t_state + time.perf_counter() - t_commit
    except BaseException as exc:
        series.abandon(opened, exc)
        raise
    outcome = _outcome(opened.seq, period, series.ws.dataset_dir, computed, query)
    outcome = replace(outcome, seconds_state=outcome.seconds_state + t_commit)
    return StagedRelease(id=opened.id, seq=opened.seq, period=period, staging=staging, outcome=outcome)


@dataclass(frozen=True)
class _Computed:
    """A draft's anonymization: the state before it, the anonymizer's result, the release
    table and the seconds spent loading and anonymizing."""

    history: History
    result: ReleaseResult
    table: pd.DataFrame
    seconds_state: float
    seconds_anonymize: float


def _compute(
    series: DatasetSeries,
    inputs: DatasetInputs,
    register: RegisterReader,
    opened: OpenRelease,
    snap: Snapshot,
    snapshot_path: str,
    done: Anonymized | None,
) -> _Computed:
    """Load the state and anonymize the snapshot for the draft ``opened``, or take ``done``,
    what was computed ahead for exactly this draft (:func:`serialpub.workflow.anonymizing.take`).

    Raises:
        InputError: no generalization fits the suppression budget (with what to do).
    """
    cfg = series.ws.config
    hierarchies = register.search_hierarchies()
    if done is not None:  # anonymized while the snapshot suite ran, for exactly this draft
        checkpoint("after_state_load")
        checkpoint("after_anonymize")
        table = done.table if done.table is not None else published_table(inputs, snap, done.result, hierarchies)
        return _Computed(done.history, done.result, table, done.seconds_state, done.seconds_anonymize)
    t_state = time.perf_counter()
    history = load_state(series, register)
    t_state = time.perf_counter() - t_state
    checkpoint("after_state_load")
    t_anon = time.perf_counter()
    try:
        result = anonymize_snapshot(
            cfg, inputs, register, snap, history, opened.seq, release_noise(series.ws, opened.seq)
        )
    except InfeasibleError as exc:
        if isinstance(exc, ValueInfeasibleError):  # the values by name, as the operator knows them
            exc = InfeasibleError(exc.describe([repr(inputs.protected[v]) for v in exc.values]))
        raise InputError(
            f"{snapshot_path}: {REFUSED} = {cfg.ell:g}: {exc}. {infeasible_advice(cfg, history)}"
        ) from None
    t_anon = time.perf_counter() - t_anon
    checkpoint("after_anonymize")
    return _Computed(history, result, published_table(inputs, snap, result, hierarchies), t_state, t_anon)


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
    series: DatasetSeries, inputs: DatasetInputs, register: RegisterReader, snap: Snapshot, stop: threading.Event
) -> Anonymized | None:
    """:func:`serialpub.workflow.anonymizing.ahead`, then the release table of its result on
    the same thread, which is free once the anonymizer is done while the main thread still
    draws the query workload. The table is a function of the snapshot and the result only,
    so it is the draft's whenever the result is (``take``); an error building it is raised
    to the draft."""
    done = anonymizing.ahead(series, inputs, register, snap, stop)
    if done is None or stop.is_set():
        return done
    return replace(done, table=published_table(inputs, snap, done.result, register.search_hierarchies()))


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
