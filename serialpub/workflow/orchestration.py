"""The pipeline steps as the Airflow release DAG runs them (docs/design.md section 6), one
function per task, importable and testable without Airflow.

Each step takes the workspace folder and plain values and returns a JSON-compatible dict
(Airflow passes it to the next task as an XCom), so a task may run in another process
or on another machine than the one before. Errors are the command line's own
(``InputError``, ``ValidationFailed``, ``StateError``) with the same messages.

Which period a run publishes (:func:`ingest`):

1. ``period`` (and optionally ``snapshot``) in the run's configuration (``dag_run.conf``);
2. else the ``snapshot``/``period`` of the "snapshot landed" Asset event that triggered it;
3. else, for a run of the semi-annual timetable, the half year that ended at the run's
   logical date (:func:`half_year_before`: a run on 1 July 2025 publishes ``2025-H1``).

The snapshot defaults to ``<landing zone>/snapshot-<period>.csv``. A period already
published makes the run a no-op that says so; a period while another release of the
dataset waits for its decision is refused (releases are strictly sequential).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from serialpub.config import Workspace, load_config
from serialpub.errors import InputError
from serialpub.io.release_files import release_name
from serialpub.io.sources import InputSource
from serialpub.known_breach import announcement
from serialpub.workflow.input_checks import period_of_source
from serialpub.workflow.publisher import Publisher, reject_release
from serialpub.workflow.request import ReleaseRequest
from serialpub.workflow.validating import ApprovalFacts
from serialpub.workspaces import report_url
from state.store import ReleaseStatus, StateError, StateStore, open_engine

#: keys a run's configuration may hold
CONF_KEYS = ("dataset", "period", "snapshot")


def _query_line(facts: ApprovalFacts) -> str:
    """The sign-off prompt's utility line: the register-joint figure first, with its
    baseline and gain, then paper 001's uniform figure."""
    joint, base = facts.register_joint_error, facts.histogram_baseline_error
    uniform = facts.average_relative_error
    paper = "n/a" if uniform is None else f"{uniform:.3f}"
    if joint is None or base is None:
        return f"Average relative query error (paper 001's uniform estimator): {paper}."
    return (
        f"Average relative query error: {joint:.3f} as a data user reads it (register-joint); a release of the "
        f"sensitive histogram alone gives {base:.3f}, so this release gains {base - joint:+.3f} "
        f"(near 0: it tells users little beyond the histogram). Paper 001's uniform estimator: {paper}."
    )


def half_year_before(moment: datetime) -> str:
    """The label of the half year that ended most recently at or before ``moment``:
    ``2025-H1`` for 2025-07-01 00:00 (a run of the semi-annual timetable), ``2024-H2`` for
    any moment from 2025-01-01 00:00 to the end of June 2025."""
    return f"{moment.year}-H1" if moment.month >= 7 else f"{moment.year - 1}-H2"


def ingest(
    root: str | Path,
    conf: dict[str, Any] | None = None,
    event_extras: list[dict[str, Any]] | None = None,
    logical_date: datetime | None = None,
) -> dict[str, Any]:
    """Decide what the run publishes (see the module docstring) and check it can start.

    Returns:
        ``{"dataset", "period", "snapshot", "skip", "message"}``; ``skip`` is True when the
        period is already published (the run then ends without doing anything).

    Raises:
        InputError: an unknown configuration key or dataset, a malformed period, no period
            to publish, a snapshot file that does not exist.
        StateError: another release of the dataset waits for its decision.
    """
    ws = load_config(Path(root))
    dataset = ws.config.dataset
    conf = dict(conf or {})
    unknown = sorted(set(conf) - set(CONF_KEYS))
    if unknown:
        raise InputError(
            f"run configuration: unknown key(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(CONF_KEYS)}"
        )
    if conf.get("dataset") not in (None, dataset):
        raise InputError(f"unknown dataset {conf['dataset']!r}: this DAG publishes {dataset!r} ({ws.root})")
    source = (
        conf
        if conf.get("period") or conf.get("snapshot")
        else next((e for e in reversed(event_extras or []) if e.get("period") or e.get("snapshot")), {})
    )
    given = ws.snapshot_source(source["snapshot"], "snapshot") if source.get("snapshot") else None
    period = source.get("period")
    if period is None and given is not None:
        period = period_of_source(given)
    if period is None and logical_date is not None:
        period = half_year_before(logical_date)
    if period is None:
        raise InputError("no period to publish: give 'period' (and optionally 'snapshot') in the run configuration")
    period = str(period)
    store = StateStore(open_engine(ws.database_url))
    Publisher.check_period_label(period)
    done = [r for r in store.published(dataset) if r.period == period]
    if done:
        message = (
            f"period {period!r} of dataset {dataset!r} is already published as release {done[0].seq}; nothing to do"
        )
        return {"dataset": dataset, "period": period, "snapshot": None, "skip": True, "message": message}
    current = store.open_release(dataset)
    if current is not None and current.period != period:
        raise StateError(
            f"dataset {dataset!r}: release {current.seq} (period {current.period!r}) is {current.status} and not yet "
            f"decided; period {period!r} is prepared after it is published or rejected"
        )
    snapshot = given or landed_snapshot(ws, period)
    if not snapshot.exists():
        raise InputError(f"{snapshot.label}: snapshot file not found for period {period!r} of dataset {dataset!r}")
    return {
        "dataset": dataset,
        "period": period,
        "snapshot": snapshot.record,
        "skip": False,
        "message": f"period {period!r} of dataset {dataset!r} from {snapshot.label}",
    }


def landed_snapshot(ws: Workspace, period: str) -> InputSource:
    """The landing zone's snapshot of ``period``: ``snapshot-<period>.csv``, else
    ``snapshot-<period>.parquet`` when only that one landed."""
    csv_file = ws.landing_dir / f"snapshot-{period}.csv"
    parquet_file = csv_file.with_suffix(".parquet")
    path = parquet_file if parquet_file.is_file() and not csv_file.is_file() else csv_file
    return ws.snapshot_source(path)


def validate_inputs(root: str | Path, snapshot: str, period: str) -> dict[str, Any]:
    """Run the register and snapshot input suites (the same as before a draft).

    Raises:
        InputChecksFailed / InputError: as ``serialpub release``.
    """
    publisher = Publisher(_workspace(root))
    checked = publisher.check_inputs(snapshot, period)
    return {"suites": {r.suite: r.success for r in checked.suites}}


def anonymize(root: str | Path, snapshot: str, period: str, owner: str, preparer: str | None = None) -> dict[str, Any]:
    """Draft and stage the release, handed to ``owner`` (the DAG run), not yet validated.
    ``preparer``: the Airflow user who triggered the run (recorded as ``prepared_by``, so
    that under four eyes they cannot approve it); None for scheduled and asset runs."""
    publisher = Publisher(_workspace(root), request=ReleaseRequest(preparer=preparer))
    current = publisher.store.open_release(publisher.ws.config.dataset)
    if current is not None and current.period == period and current.owner == owner:
        return {"seq": current.seq, "period": period}  # a retry of this run's step: already drafted
    staged = publisher.draft(snapshot, period, owner=owner)
    return {"seq": staged.seq, "period": staged.period}


def validate_release(root: str | Path, seq: int) -> dict[str, Any]:
    """Run the release suites on the staged draft (raises ValidationFailed when one fails)."""
    publisher = Publisher(_workspace(root))
    publisher.validate(seq)
    results = publisher.store.validation_results(publisher.ws.config.dataset, seq)
    # earlier attempts at the same number ended failed or rejected; this one is open
    return {
        "seq": seq,
        "suites": {
            r["suite"]: r["success"]
            for r in results
            if r["release_status"] not in (ReleaseStatus.FAILED, ReleaseStatus.REJECTED)
        },
    }


def report(root: str | Path, seq: int, base_url: str | None = None) -> dict[str, Any]:
    """What the approver sees (``Publisher.report``) and a Markdown text of it for the gate.

    ``base_url`` is Airflow's ``[api] base_url``: the text then links to the report and the
    validation page served by :mod:`serialpub.airflow_plugin`, which a person opens in a
    browser; without it the text names the files on the server.
    """
    ws = _workspace(root)
    facts = Publisher(ws).report(seq)
    suites = facts.validation["suites"] if facts.validation else {}
    final = ws.dataset_dir / release_name(seq)
    if base_url:
        where = (
            f"[Open the release report]({report_url(base_url, facts.dataset, seq)}) and read it before "
            f"deciding (sha256 {facts.report_sha256}, recorded with your decision); "
            f"[every expectation]({report_url(base_url, facts.dataset, seq, 'validation.html')})."
        )
    else:
        where = (
            f"Release report (read it before deciding): {facts.report_page} (sha256 {facts.report_sha256}); "
            f"every expectation: {facts.validation_page}."
        )
    lines = [
        f"**{facts.dataset} release {facts.release}** (period {facts.period}): {facts.records} records "
        f"in {facts.groups} groups, {facts.suppressed} suppressed.",
        f"Largest breach probability over all releases: {facts.max_breach_probability:.6f} "
        f"(bound 1/ℓ = {1 / facts.l:.6f}).",
        _query_line(facts),
        *(
            f"**Known breach, accepted in the configuration ({model}):** {risk}. The figures above hold only "
            'within this model (docs/threat-model.md, "Models with a known breach").'
            for model, risk in facts.known_breach.items()
        ),
        "Validation suites: " + ", ".join(f"{k} {'passed' if v['success'] else 'FAILED'}" for k, v in suites.items()),
        where,
        f"Approved, it is published to `{final}`; rejected, nothing is published.",
    ]
    # a JSON-able dict: the DAG passes it between tasks (XCom)
    return {**facts.model_dump(mode="json"), "markdown": "\n\n".join(lines), "final_folder": str(final)}


def decide(
    root: str | Path, seq: int, approved: bool, approver: str, comment: str, report_sha256: str | None
) -> dict[str, Any]:
    """Record the sign-off decision: approve, or reject (staged files removed, state unchanged)."""
    ws = _workspace(root)
    if approved:
        record = Publisher(ws).approve(seq, approver, comment, report_sha256)
        return {"seq": seq, "decision": record.decision, "approver": record.approver}
    reject_release(ws, seq, approver, comment, report_sha256)
    return {"seq": seq, "decision": "rejected", "approver": approver}


def auto_approve(root: str | Path, seq: int) -> dict[str, Any]:
    """Approve automatically (only with ``sign_off.auto_approve``; the manifest says so).
    ``known_breach``: one line per model with a known breach the configuration accepts
    (:func:`serialpub.known_breach.announcement`), for the task log: no person read it."""
    publisher = Publisher(_workspace(root))
    record = publisher.auto_approve(seq)
    lines = [announcement(m, automatic=True) for m in publisher.ws.config.accept_known_breach]
    return {"seq": seq, "decision": record.decision, "approver": record.approver, "known_breach": lines}


def publish(root: str | Path, seq: int) -> dict[str, Any]:
    """Publish the approved release (idempotent: a second call finishes or confirms)."""
    publisher = Publisher(_workspace(root))
    final = publisher.finish(seq)
    row = next(r for r in publisher.store.published(publisher.ws.config.dataset) if r.seq == seq)
    return {
        "dataset": publisher.ws.config.dataset,
        "release": seq,
        "period": row.period,
        "directory": str(final),
        "manifest_sha256": row.manifest_sha256,
        "data_sha256": row.data_sha256,
    }


def is_published(root: str | Path, period: str) -> bool:
    """Whether ``period`` of the workspace's dataset is published (read from the state)."""
    ws = _workspace(root)
    return any(r.period == period for r in StateStore(open_engine(ws.database_url)).published(ws.config.dataset))


def close_run(root: str | Path, owner: str, reason: str) -> dict[str, Any]:
    """End the release a failed or timed-out run left open (owned by ``owner``): it is
    marked failed and its staging folder removed; the state does not move."""
    publisher = Publisher(_workspace(root))
    current = publisher.store.open_release(publisher.ws.config.dataset)
    if current is None or current.owner != owner:
        return {"closed": None}
    publisher.close(current.seq, reason)
    return {"closed": current.seq}


def _workspace(root: str | Path) -> Workspace:
    return load_config(Path(root))
