"""Airflow DAGs of serialpub: one release DAG per configured dataset (docs/airflow.md).

The DAG only wires the steps of :mod:`serialpub.workflow.orchestration` (docs/design.md section 6):

    ingest -> validate_inputs -> anonymize -> validate_release -> report -> sign_off
           -> publish -> emit_release_published -> finalize

- **Datasets**: the workspace folders in ``SERIALPUB_WORKSPACES`` (separated by ':'), each
  with its ``serialpub.yaml``; the DAG id is ``serialpub_release_<dataset>``.
- **Schedule**: a "snapshot landed" Asset event (``serialpub_snapshot_landed_<dataset>``,
  whose extra may carry ``snapshot`` and ``period``) or the semi-annual timetable (00:00 UTC
  on 1 January and 1 July, publishing the half year that just ended). A manual run takes
  ``period`` and optionally ``snapshot`` (and ``dataset``) in its configuration.
- **Order**: ``max_active_runs=1``; a period already published is a no-op that says so; a
  period while another release waits for its decision is refused. Backfills of historic
  half years: ``airflow backfill create --dag-id serialpub_release_<dataset>
  --from-date ... --to-date ...`` (runs oldest first, one at a time).
- **Sign-off**: ``ApprovalOperator`` (human in the loop); the approver's decision, name,
  time, comment and the checksum of the release report they read are stored in the state
  and the manifest. ``sign_off.auto_approve: true`` replaces it with an automatic approval
  (recorded as such). No decision within ``sign_off.timeout_hours`` fails the run.
- **Failure**: ``finalize`` runs whatever happened; if a step failed or the sign-off timed
  out it closes the run's open release as failed (nothing published, state unchanged)
  and fails the run with the first error. A rejection is recorded by the gate itself and
  ends the run without publishing.
- **Retries**: none on the steps that change the state; ``publish`` is idempotent and is
  retried.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pendulum
from airflow.exceptions import AirflowFailException
from airflow.providers.standard.operators.hitl import ApprovalOperator, HITLOperator
from airflow.sdk import Asset, AssetOrTimeSchedule, CronTriggerTimetable, Param, dag, get_current_context, task

from serialpub.config import load_config
from serialpub.errors import InputError
from serialpub.workspaces import workspaces

if TYPE_CHECKING:
    from types import ModuleType


def _steps() -> ModuleType:
    """:mod:`serialpub.workflow.orchestration`, imported when a task runs, not when the file is
    parsed: it pulls in the pipeline (pandas, pyarrow, Great Expectations, SQLAlchemy),
    whose import the DAG processor would otherwise pay on every parse
    (benchmarks/bench_dag_parse.py, docs/benchmarks.md)."""
    from serialpub.workflow import orchestration

    return orchestration


log = logging.getLogger(__name__)
SEMI_ANNUAL = "0 0 1 1,7 *"


def snapshot_landed(dataset: str, landing_dir: str) -> Asset:
    """The Asset an upstream extract (or a file sensor) updates when a snapshot lands."""
    return Asset(name=f"serialpub_snapshot_landed_{dataset}", uri=f"file://{landing_dir}")


def release_published(dataset: str, dataset_dir: str) -> Asset:
    """The Asset the DAG updates when a release is published (extra: release, period,
    manifest and data checksums)."""
    return Asset(name=f"serialpub_release_published_{dataset}", uri=f"file://{dataset_dir}")


def gate_ids(required_approvals: int) -> list[str]:
    """Task ids of the sign-off gates, one per required approval: ``sign_off``,
    ``sign_off_2``, ... (``sign_off.required_approvals``)."""
    return ["sign_off"] + [f"sign_off_{i}" for i in range(2, required_approvals + 1)]


def steps(required_approvals: int = 1) -> list[str]:
    """The run's steps in pipeline order."""
    return ["ingest", "needs_release", "validate_inputs", "anonymize", "validate_release", "report",
            *gate_ids(required_approvals), "publish", "emit_release_published"]  # fmt: skip


def _failure_of(context: Any, required_approvals: int) -> str | None:
    """The first step of this run (in pipeline order) that failed, or None."""
    ti = context["ti"]
    states = ti.get_task_states(dag_id=ti.dag_id, run_ids=[ti.run_id])
    states = states.get(ti.run_id, states)  # {run_id: {task_id: state}}
    failed = [t for t in steps(required_approvals) if getattr(states.get(t), "value", states.get(t)) == "failed"]
    return f"step {failed[0]} failed (see its log)" if failed else None


class SignOffGate(ApprovalOperator):
    """The standard human-in-the-loop approval, recording the answer in serialpub's state
    as it arrives: approval (approver, time, comment, sha256 of the page they saw), or
    rejection (the release ends, staged files removed, state unchanged). Downstream tasks
    are skipped on rejection, as ApprovalOperator does."""

    def __init__(self, *, workspace: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.workspace = workspace

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        answer = HITLOperator.execute_complete(self, context=context, event=event)  # raises on a timeout
        facts = context["ti"].xcom_pull(task_ids="report")
        user = answer.get("responded_by_user") or {}
        approved = (answer.get("chosen_options") or [None])[0] == self.APPROVE
        recorded = _steps().decide(
            self.workspace,
            facts["release"],
            approved,
            str(user.get("name") or user.get("id") or "unknown"),
            str((answer.get("params_input") or {}).get("comment", "")),
            facts["report_sha256"],
        )
        # read by finalize: a rejected release ends the run as failed, so that nobody reads
        # a green run as a publication
        context["ti"].xcom_push(key="decision", value=recorded)
        return super().execute_complete(context=context, event=event)


def build_release_dag(root: str) -> Any:
    ws = load_config(Path(root))
    dataset = ws.config.dataset
    landed = snapshot_landed(dataset, str(ws.landing_dir))
    published_asset = release_published(dataset, str(ws.dataset_dir))
    timeout = timedelta(hours=ws.config.sign_off.timeout_hours)
    required = ws.config.sign_off.required_approvals

    @dag(
        dag_id=f"serialpub_release_{dataset}",
        description=f"publish the next release of {dataset} under the global guarantee",
        schedule=AssetOrTimeSchedule(timetable=CronTriggerTimetable(SEMI_ANNUAL, timezone="UTC"), assets=landed),
        start_date=pendulum.datetime(2020, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        default_args={"retries": 0},
        params={
            "period": Param(None, type=["null", "string"], description="period label, e.g. 2025-H1"),
            "snapshot": Param(None, type=["null", "string"], description="snapshot CSV (default: landing zone)"),
            "dataset": Param(None, type=["null", "string"], description=f"must be {dataset!r} if given"),
        },
        tags=["serialpub", dataset],
        doc_md=__doc__,
    )
    def release_dag() -> None:
        @task
        def ingest() -> dict[str, Any]:
            context = get_current_context()
            dag_run = context["dag_run"]
            conf = {k: v for k, v in (dag_run.conf or {}).items() if v is not None}
            extras = [
                dict(event.extra or {})
                for events in (context.get("triggering_asset_events") or {}).values()
                for event in events
            ]
            # the logical date names the period of calendar runs and backfills, and of a
            # manual run given a logical date but no period
            decision = _steps().ingest(root, conf, extras, dag_run.logical_date)
            print(decision["message"])
            return decision

        @task.short_circuit
        def needs_release(decision: dict[str, Any]) -> bool:
            return not decision["skip"]  # False: the period is already published, skip the rest

        @task
        def validate_inputs(decision: dict[str, Any]) -> dict[str, Any]:
            return _steps().validate_inputs(root, decision["snapshot"], decision["period"])

        @task
        def anonymize(decision: dict[str, Any]) -> dict[str, Any]:
            context = get_current_context()
            owner = f"airflow:{context['dag'].dag_id}/{context['run_id']}"
            # who triggered the run prepared the release (four eyes); None for a scheduled run
            preparer = getattr(context["dag_run"], "triggering_user_name", None)
            return _steps().anonymize(root, decision["snapshot"], decision["period"], owner, preparer)

        @task
        def validate_release(drafted: dict[str, Any]) -> dict[str, Any]:
            return _steps().validate_release(root, drafted["seq"])

        @task
        def report(validated: dict[str, Any]) -> dict[str, Any]:
            from airflow.configuration import conf

            # the prompt links to the report through serialpub's plugin on the api-server
            base_url = conf.get("api", "base_url", fallback=None) or "http://localhost:8080"
            return _steps().report(root, validated["seq"], base_url)

        if ws.config.sign_off.auto_approve:
            # one XCom, as the gate's: a dict return would otherwise be split into one XCom
            # per key, and finalize would read the key "decision" as the string "approved"
            @task(task_id="sign_off", multiple_outputs=False)
            def automatic_sign_off(facts: dict[str, Any]) -> dict[str, Any]:
                recorded = _steps().auto_approve(root, facts["release"])
                for line in recorded["known_breach"]:  # the task log: no person read the risk
                    print(line)
                get_current_context()["ti"].xcom_push(key="decision", value=recorded)
                return recorded

            gate: Any = None
        else:
            # one gate per required approval, in a row: each records its approval, the last
            # one makes the release approved (serialpub counts distinct approvers and refuses
            # one who already approved); a rejection at any gate skips the rest
            gates = []
            for n, gate_id in enumerate(gate_ids(required), start=1):
                which = "" if required == 1 else f" (approval {n} of {required}, each by a different approver)"
                gates.append(
                    SignOffGate(
                        workspace=root,
                        task_id=gate_id,
                        subject=f"Sign off release of {dataset}, period "
                        f"{{{{ ti.xcom_pull(task_ids='ingest')['period'] }}}}{which}",
                        body="{{ ti.xcom_pull(task_ids='report')['markdown'] }}",
                        params={"comment": Param("", type="string", description="recorded with the decision")},
                        response_timeout=timeout,
                        # only the approvers may answer (Airflow checks the user's id, which is the
                        # user name under the simple auth manager); serialpub checks again on record
                        assigned_users=[{"id": a, "name": a} for a in ws.config.sign_off.approvers] or None,
                    )
                )
            gate = gates[-1]

        @task(retries=2, retry_delay=timedelta(seconds=30))
        def publish(facts: dict[str, Any]) -> dict[str, Any]:
            return _steps().publish(root, facts["release"])  # the gate recorded the approval

        @task(outlets=[published_asset])
        def emit_release_published(release: dict[str, Any]) -> dict[str, Any]:
            outlet_events = get_current_context()["outlet_events"]
            outlet_events[published_asset].extra = {
                k: release[k] for k in ("dataset", "release", "period", "manifest_sha256", "data_sha256")
            }
            return release

        @task(trigger_rule="all_done")
        def finalize() -> str:
            context = get_current_context()
            owner = f"airflow:{context['dag'].dag_id}/{context['run_id']}"
            failure = _failure_of(context, required)
            ingested = context["ti"].xcom_pull(task_ids="ingest") or {}
            if failure is not None:
                closed = _steps().close_run(root, owner, f"Airflow run {context['run_id']}: {failure}")
                note = f"; release {closed['closed']} closed as failed" if closed["closed"] else ""
                # say what is true: the period may have been published meanwhile (serialpub
                # approve --force from the command line)
                if ingested.get("period") and _steps().is_published(root, ingested["period"]):
                    raise AirflowFailException(
                        f"{failure}{note}; period {ingested['period']!r} is published nonetheless "
                        "(decided outside this run)"
                    )
                raise AirflowFailException(f"{failure}{note}: nothing was published and the state did not move")
            decisions = context["ti"].xcom_pull(task_ids=gate_ids(required), key="decision") or []
            rejected = [d for d in decisions if d and d.get("decision") == "rejected"]
            if rejected:
                decision = rejected[0]
                raise AirflowFailException(
                    f"release {decision['seq']} (period {ingested.get('period')!r}) was rejected by "
                    f"{decision['approver']} at the sign-off: nothing was published and the state did not move"
                )
            return "done"

        decision = ingest()
        go = needs_release(decision)
        checked = validate_inputs(decision)
        drafted = anonymize(decision)
        validated = validate_release(drafted)
        facts = report(validated)
        go >> checked >> drafted
        sign_off = automatic_sign_off(facts) if gate is None else gate
        if gate is not None:
            for upstream, downstream in zip([facts, *gates[:-1]], gates, strict=True):
                upstream >> downstream
        done = publish(facts)
        sign_off >> done
        emitted = emit_release_published(done)
        emitted >> finalize()

    return release_dag()


# one bad workspace (an invalid serialpub.yaml, say) must not take the others' DAGs down with
# it: it is left out, and the DAG processor's log says why
_skipped: list[str] = []
for _dataset, _root in workspaces(skipped=_skipped).items():
    try:
        globals()[f"serialpub_release_{_dataset}"] = build_release_dag(str(_root))
    except InputError as _exc:  # the file changed since it was listed
        _skipped.append(f"workspace {_root} skipped: {_exc}")
for _line in _skipped:
    log.error("serialpub: %s", _line)
