"""Validating a staged draft and writing its report (docs/design.md section 6;
docs/validation.md, docs/reports.md).

Everything is read back from the staging folder, the snapshot file and the state, not
taken from the anonymizer's memory. The draft becomes ``validated`` (evidence and report
in its staging folder, the manifest updated) or ``failed`` (staging removed, nothing
counted).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from anonymizer.learners.figures import LearnerReport
from anonymizer.overlap import Overlap
from anonymizer.release import History
from anonymizer.settings import Dilution, Guarantee, SuppressionModel
from checks.breach import BreachComputation, Draft, Population, PriorState, SnapshotRecords, compute_breach
from checks.evidence import HTML_FILE, write_evidence
from checks.gx import SuiteResult
from checks.release_suites import release_suite
from serialpub.config import Config
from serialpub.errors import InputError, ValidationFailed
from serialpub.faults import checkpoint
from serialpub.io import release_files
from serialpub.io.inputs import Snapshot
from serialpub.io.manifest import Manifest, SuiteVerdict, Validation
from serialpub.known_breach import RISK
from serialpub.report.measure import Measure
from serialpub.report.privacy import PrivacyFigures, PrivacyInputs, classical_measures, privacy_figures
from serialpub.report.render import HTML_FILE as REPORT_FILE
from serialpub.report.render import report_plots, write_release_report
from serialpub.workflow import manifest_binding, progress
from serialpub.workflow.anonymizing import record_sets
from serialpub.workflow.dataset_inputs import DatasetInputs
from serialpub.workflow.dataset_series import DatasetSeries
from serialpub.workflow.input_checks import InputChecks, check_inputs, snapshot_source
from serialpub.workflow.learning import draft_learners
from serialpub.workflow.register_reader import RegisterReader
from serialpub.workflow.request import ReleaseRequest
from state.store import OpenRelease, ReleaseStatus, StateError, this_process


def validate(series: DatasetSeries, inputs: DatasetInputs, register: RegisterReader, seq: int) -> list[SuiteResult]:
    """Run the input and release suites on the staged draft ``seq`` and store their
    results with it; it becomes ``validated`` (evidence written into its staging folder,
    the manifest updated) or ``failed`` (staging removed, nothing counted) and
    :class:`ValidationFailed` is raised. A release already validated is left as it is (an
    empty list is returned; its results are in the state).

    Raises:
        ValidationFailed: a suite failed.
        StateError: ``seq`` is not the dataset's open draft, or its snapshot file
            changed since the draft was made.
    """
    rel = series.open_release(seq)
    if rel.status != ReleaseStatus.DRAFT:
        return []
    try:
        return _validate(series, inputs, register, rel)
    except ValidationFailed:
        series.remove_staging(rel)  # record_validation already closed it as failed
        raise
    except BaseException as exc:
        series.abandon(rel, exc)
        raise


def _validate(
    series: DatasetSeries, inputs: DatasetInputs, register: RegisterReader, rel: OpenRelease
) -> list[SuiteResult]:
    """The body of :func:`validate`: the staged draft and its inputs checked against what
    was drafted, the release suites beside the report's figures, the verdict recorded, the
    evidence and the report written. Under the localized baseline the global-guarantee
    suite is left out (that baseline exists to show the leak); the manifest says so."""
    cfg = series.ws.config
    staging = series.staging_dir(rel)
    manifest, table = release_files.read_release(staging)
    checked = _inputs_as_drafted(series, inputs, register, rel, manifest)
    register_check, snapshot_check = checked.suites
    # the draft's own, when this process drafted it: found by the file's sha256, not read again
    ell = np.full(len(register.register.ids), float(cfg.ell))
    history = register.statistics.load_latest(series.store, cfg.dataset, ell)
    draft = Draft(table, inputs.qis, cfg.sensitive, inputs.read_hierarchies(table))
    learn = partial(draft_learners, series, inputs, register, table, cfg.report.learners)
    suites, figuring, measuring, learning = _release_suites(
        cfg, inputs, register, manifest, draft, checked.snapshot, history, learn
    )
    suites = [register_check, snapshot_check, *suites]
    passed = series.store.record_validation(
        rel.id, [(r.suite, r.success, r.result, r.sha256) for r in suites], this_process()
    )
    if not passed:
        failures = [f"{r.suite}: {f}" for r in suites for f in r.failures]
        raise ValidationFailed(
            f"release {rel.seq} of {cfg.dataset!r} failed validation and was marked failed; nothing was "
            f"published and the state did not move ({len(failures)} failed expectation(s))",
            failures,
        )
    manifest.validation = Validation(
        success=True,
        sha256=write_evidence(staging, f"{cfg.dataset} release {rel.seq} (period {rel.period})", suites),
        global_guarantee_checked=cfg.guarantee is Guarantee.GLOBAL,
        suites={r.suite: SuiteVerdict(success=r.success, sha256=r.sha256) for r in suites},
        # the page a person reads is evidence as much as the JSON: bound by its checksum too
        page_sha256=release_files.sha256_file(staging / HTML_FILE),
    )
    with progress.step("report"):
        figures_drawn, plots = figuring.result()
        figures_drawn = replace(
            figures_drawn, measures=[*figures_drawn.measures, *measuring.result()], learners=learning.result()
        )
        manifest.report = write_report(cfg, staging, manifest, figures_drawn, plots)
    release_files.write_manifest(staging, manifest)
    manifest_binding.bind(series, rel.id, manifest)
    checkpoint("after_validation")
    return suites


def _inputs_as_drafted(
    series: DatasetSeries, inputs: DatasetInputs, register: RegisterReader, rel: OpenRelease, manifest: Manifest
) -> InputChecks:
    """The input checks of the draft's snapshot, after checking that the staged manifest,
    the register, the hierarchies and the snapshot are the ones the draft was made with.
    They run under the request the draft was made under (its recorded period gap and
    repeated snapshot), whichever process validates it.

    Raises:
        StateError: any of them changed since the draft was made.
    """
    staging = series.staging_dir(rel)
    edited = manifest_binding.differences(series, rel, manifest, validated=False)
    if edited:
        # validation would vouch for the edit: refuse it before anything is recorded
        raise StateError(
            f"{staging / release_files.MANIFEST_FILE}: the staged manifest changed after release {rel.seq} was drafted "
            f"({edited[0]}); the draft was failed and nothing was published: prepare the release again "
            "('serialpub release')"
        )
    sums = register.file_sums
    if sums["register"] != manifest.sha256.register_file or sums["hierarchies"] != manifest.sha256.hierarchies:
        # validated against other inputs than the draft's, the verdict would not be the release's
        raise StateError(
            f"{series.ws.register_source.label}: the register or a hierarchy file changed after release {rel.seq} was "
            "drafted "
            f"(with register sha256 {manifest.sha256.register_file[:12]}...); the draft was failed and nothing was "
            "published: prepare the release again ('serialpub release') with the period's files"
        )
    if rel.params.snapshot is None:  # every draft records it: the row was changed outside serialpub
        raise StateError(
            f"release {rel.seq}: its release row names no snapshot; end it with 'serialpub reject "
            f"--release {rel.seq}' and prepare it again"
        )
    source = snapshot_source(series.ws, rel.params.snapshot)
    request = ReleaseRequest.as_drafted(rel.params)
    checked = check_inputs(series, inputs, register, request, source, rel.period) if source.exists() else None
    if checked is None or checked.sha256 != rel.params.snapshot_sha256:
        raise StateError(
            f"{source.label}: the snapshot of release {rel.seq} changed or disappeared after the release was drafted; "
            f"end it with 'serialpub reject --release {rel.seq}' and prepare it again"
        )
    return checked


def _release_suites(
    cfg: Config,
    inputs: DatasetInputs,
    register: RegisterReader,
    manifest: Manifest,
    draft: Draft,
    snap: Snapshot,
    history: History,
    learn: Callable[[], LearnerReport | None],
) -> tuple[
    list[SuiteResult],
    Future[tuple[PrivacyFigures, dict[str, str]]],
    Future[list[Measure]],
    Future[LearnerReport | None],
]:
    """The release suites' results (without the global-guarantee suite under the localized
    baseline), with the report's figures and measures computed beside them, and the
    learning adversary's figures (``learn``: :func:`draft_learners`)."""
    presence = cfg.dilution is Dilution.PRESENCE
    thresholds = cfg.validation.model_dump()
    if thresholds["max_suppression_rate"] is None:
        thresholds["max_suppression_rate"] = cfg.suppression_budget
    # one breach computation per release, shared by the guarantee suite and the report: per
    # unit (individuals sharing their QI cell and history class share every figure), and
    # mechanism-aware under the default model (docs/threat-model.md). It runs on the second
    # core while the contract and disjointness suites, which do not need it, run on this one
    coded = register.register
    population = Population(coded.keys, coded.ids, presence, snap.individual if presence else None)
    prior = PriorState(inputs.protected, history.survival, cfg.ell, history.class_of, inputs.params.propensity_ratio)
    records = (
        SnapshotRecords(snap.individual, record_sets(inputs.protected, snap))
        if cfg.suppression_model is SuppressionModel.MECHANISM
        else None
    )

    def breach_probabilities() -> BreachComputation:
        with progress.step("breach probabilities"):
            return compute_breach(draft, population, prior, records, per_unit=True, unit_classes=history.class_of)

    with Overlap(2, "serialpub-breach") as beside:
        computing = beside.submit(breach_probabilities)

        # the report's figures, plots and per-release measures need the breach computation, not
        # the suites' verdicts: the two other threads make them after it, while the suites run
        # here. They are used only if every suite passes; an error in them is raised then, not
        # before a suite's failure
        def figures() -> tuple[PrivacyFigures, dict[str, str]]:
            breach = computing.result()
            with progress.step("report figures"):
                return report_figures(cfg, inputs, draft, breach, history)

        def measures() -> list[Measure]:
            breach = computing.result()
            with progress.step("report measures"):
                return classical_measures(report_inputs(cfg, inputs, draft, breach, history), cfg.report)

        figuring, measuring = beside.submit(figures), beside.submit(measures)
        # it reads the releases and the register, not the breach computation: it starts on
        # the first thread free
        learning = beside.submit(learn)
        with progress.step("release suites"):
            suites = release_suite(
                draft,
                computing.result,
                cfg.ell,
                thresholds,
                metrics={
                    "suppression_rate": (manifest.suppressed or 0) / max(len(snap.individual), 1),
                    **query_figures(manifest),
                },
                id_column=cfg.id_column,
                sensitive_domain=inputs.sensitive_domain,
            )
    computing.result()  # a computation that failed raises here, before anything is recorded
    if cfg.guarantee is Guarantee.LOCALIZED:
        suites = [r for r in suites if r.suite != "guarantee"]
    return suites, figuring, measuring, learning


def report_figures(
    cfg: Config, inputs: DatasetInputs, draft: Draft, breach: BreachComputation, history: History
) -> tuple[PrivacyFigures, dict[str, str]]:
    """The release report's privacy figures and plots, from the staged draft as read back by
    :func:`_validate` and the breach computation its guarantee suite checked; without the
    per-release measures of the source papers, which :func:`_validate` computes beside them
    (:func:`serialpub.report.privacy.classical_measures`) and appends."""
    figures = privacy_figures(report_inputs(cfg, inputs, draft, breach, history), cfg.report, classical=False)
    return figures, report_plots(figures, cfg.dilution is Dilution.PRESENCE)


def report_inputs(
    cfg: Config, inputs: DatasetInputs, draft: Draft, breach: BreachComputation, history: History
) -> PrivacyInputs:
    """What the report's privacy figures are computed from."""
    presence = cfg.dilution is Dilution.PRESENCE
    domain = inputs.sensitive_domain
    if domain is None:
        # no hierarchy file: the values seen, the protected ones and the categories' (a
        # release need not hold every protected value)
        named = [v for values in (cfg.report.categories or {}).values() for v in values]
        domain = sorted({*draft.table[cfg.sensitive].astype(str), *inputs.protected, *named})
    return PrivacyInputs(
        draft=draft,
        breach=breach,
        history=history,
        params=inputs.params,
        presence=presence,
        protected=inputs.protected,
        sensitive_hierarchy=inputs.sensitive_hierarchy,
        sensitive_domain=domain,
    )


def write_report(
    cfg: Config, staging: Path, manifest: Manifest, figures: PrivacyFigures, plots: dict[str, str]
) -> dict[str, str]:
    """Write the release report into the staging folder from :func:`report_figures`; returns
    the files' checksums for the manifest (the sign-off records the checksum of the page
    the approver saw)."""
    return write_release_report(
        staging,
        manifest,
        # the page is signed as it is, so it keeps this status after the decision: say where
        # the decision is
        "validated, awaiting sign-off when this page was made (the page is what the approver signed; the "
        "decision, approver and time are in manifest.json's sign_off and in 'serialpub history --all')",
        figures,
        cfg.dilution is Dilution.PRESENCE,
        plots,
    )


class ApprovalFacts(BaseModel):
    """What the approver sees of a release awaiting sign-off (:func:`summary`): its figures,
    the verdict of every suite, the release report and its checksum (stored with the
    sign-off as what was seen), and the acknowledged models with a known breach."""

    model_config = ConfigDict(frozen=True)

    dataset: str
    release: int
    period: str
    status: str
    records: int
    groups: int
    suppressed: int | None
    max_breach_probability: float | None
    l: float  # noqa: E741 - the paper's ℓ, as the manifest names it
    average_relative_error: float | None
    register_weighted_error: float | None
    register_joint_error: float | None
    histogram_baseline_error: float | None
    #: the manifest's validation record (``success``, ``suites`` with each verdict, ...)
    validation: dict[str, Any] | None
    validation_page: str | None
    report_page: str | None
    report_sha256: str | None
    #: model -> its risk in one sentence (:mod:`serialpub.known_breach`)
    known_breach: dict[str, str]


def summary(series: DatasetSeries, seq: int) -> ApprovalFacts:
    """What the approver sees for the open release ``seq`` (:class:`ApprovalFacts`)."""
    rel = series.open_release(seq)
    staging = series.staging_dir(rel)
    manifest = Manifest.read(staging / release_files.MANIFEST_FILE)
    page = staging / HTML_FILE
    report = staging / REPORT_FILE
    utility = manifest.utility
    return ApprovalFacts(
        dataset=series.dataset,
        release=rel.seq,
        period=rel.period,
        status=rel.status,
        records=manifest.records,
        groups=manifest.groups,
        suppressed=manifest.suppressed,
        max_breach_probability=manifest.max_breach_probability,
        l=manifest.l,
        average_relative_error=utility.average_relative_error if utility else None,
        register_weighted_error=utility.register_weighted_error if utility else None,
        register_joint_error=utility.register_joint_error if utility else None,
        histogram_baseline_error=utility.histogram_baseline_error if utility else None,
        validation=manifest.validation.model_dump() if manifest.validation else None,
        validation_page=str(page) if page.exists() else None,
        report_page=str(report) if report.exists() else None,
        report_sha256=release_files.sha256_file(report) if report.exists() else None,
        # the breachable models acknowledged in the configuration, each with its risk
        known_breach={str(b): RISK[b] for b in manifest.accepted_known_breach},
    )


def report_page(series: DatasetSeries, seq: int) -> Path:
    """The report of release ``seq``: in its release folder once published, in its
    staging folder while it awaits sign-off.

    Raises:
        InputError: release ``seq`` has no report (not validated yet, imported, failed
            or rejected, or published before reports existed).
    """
    cfg = series.ws.config
    page: Path | None
    if any(r.seq == seq for r in series.store.published(cfg.dataset)):
        page = series.ws.dataset_dir / release_files.release_name(seq) / REPORT_FILE
    else:
        rel = series.store.open_release(cfg.dataset)
        page = series.staging_dir(rel) / REPORT_FILE if rel is not None and rel.seq == seq else None
    if page is None or not page.is_file():
        raise InputError(
            f"release {seq} of {cfg.dataset!r} has no report: reports are written when a release is validated "
            "(imported, failed and rejected releases have none)"
        )
    return page


def query_figures(manifest: Manifest) -> dict[str, float | None]:
    """The utility suite's query figures: ``query_error``, the register-joint estimator's
    (paper 001's uniform one for a release made before it existed), and ``query_gain``
    over the histogram-only baseline (docs/configuration.md, ``max_query_error``, ``min_gain``)."""
    u = manifest.utility
    if u is None:
        return {"query_error": None, "query_gain": None}
    joint, base = u.register_joint_error, u.histogram_baseline_error
    return {
        "query_error": joint if joint is not None else u.average_relative_error,
        "query_gain": None if joint is None or base is None else base - joint,
    }
