"""Runs the release DAG of one workspace with ``dag.test()`` in a fresh process, for
tests/test_dags.py, and prints one JSON line: the run's state, every task's state, the
asset events the run emitted, and what ingest decided.

Airflow reads its configuration when imported, so each run gets its own process with
``AIRFLOW_HOME`` (a migrated metadata database), ``AIRFLOW__CORE__DAGS_FOLDER`` (the
project's ``dags/``) and ``SERIALPUB_WORKSPACES`` set by the caller.

A human's answer at the sign-off gate is given from a second thread while ``dag.test()``
waits, the way Airflow's REST handler for ``PATCH .../hitlDetails`` records it (the
HITL detail row, then the resume event); the REST API itself is exercised by the
``airflow standalone`` test.

Usage: python airflow_runner.py DAG_ID CONF_JSON [--respond Approve|Reject --by NAME
--comment TEXT]... [--logical-date ISO]

``--respond``, ``--by`` and ``--comment`` may be repeated: the n-th answer goes to the n-th
gate (``sign_off``, ``sign_off_2``, ...: ``sign_off.required_approvals``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import threading
import time
from datetime import datetime
from typing import Any


def respond(
    dag_id: str, chosen: str, user: str, comment: str, after: datetime, wait: float = 300.0, task_id: str = "sign_off"
) -> dict[str, Any]:
    """Answer the pending sign-off gate ``task_id`` of ``dag_id`` created after ``after``."""
    from airflow._shared.timezones import timezone
    from airflow.models.hitl import HITLDetail
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.trigger import handle_event_submit
    from airflow.triggers.base import TriggerEvent
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState
    from sqlalchemy import select
    from sqlalchemy.orm import joinedload

    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        with create_session() as session:
            ti = session.scalars(
                select(TaskInstance)
                .join(HITLDetail, HITLDetail.ti_id == TaskInstance.id)
                .where(
                    TaskInstance.dag_id == dag_id,
                    TaskInstance.task_id == task_id,
                    TaskInstance.state == TaskInstanceState.AWAITING_INPUT,
                    HITLDetail.responded_at.is_(None),
                    HITLDetail.created_at >= after,
                )
                .options(joinedload(TaskInstance.hitl_detail))
            ).first()
            if ti is not None:
                detail = ti.hitl_detail
                detail.responded_by = {"id": user, "name": user}
                detail.responded_at = timezone.utcnow()
                detail.chosen_options = [chosen]
                detail.params_input = {"comment": comment}
                session.add(detail)
                handle_event_submit(TriggerEvent(detail.as_resume_event_payload()), task_instance=ti, session=session)
                return {"run_id": ti.run_id, "body": detail.body}
        time.sleep(0.5)
    raise TimeoutError(f"no sign-off of {dag_id} awaited an answer within {wait} s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dag_id")
    parser.add_argument("conf")
    parser.add_argument("--respond", choices=["Approve", "Reject"], action="append", default=[])
    parser.add_argument("--by", action="append", default=[])
    parser.add_argument("--comment", action="append", default=[])
    parser.add_argument("--logical-date")
    args = parser.parse_args()

    # configure the ORM in this thread first: the responder thread and dag.test's lazy
    # imports otherwise deadlock on SQLAlchemy's mapper lock against the import lock
    import airflow.models.dagrun
    import airflow.models.hitl
    import airflow.models.taskinstance  # noqa: F401
    from airflow._shared.timezones import timezone
    from sqlalchemy.orm import configure_mappers

    configure_mappers()
    path = os.path.join(os.environ["AIRFLOW__CORE__DAGS_FOLDER"], "serialpub_release.py")
    spec = importlib.util.spec_from_file_location("serialpub_release_dags", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dag = getattr(module, args.dag_id)

    answered: dict[str, Any] = {}
    started = timezone.utcnow()
    if args.respond:

        def answer() -> None:
            try:
                for n, chosen in enumerate(args.respond):
                    task_id = "sign_off" if n == 0 else f"sign_off_{n + 1}"
                    by = args.by[n] if n < len(args.by) else "tester"
                    comment = args.comment[n] if n < len(args.comment) else ""
                    answered.update(respond(args.dag_id, chosen, by, comment, started, task_id=task_id))
            except Exception as exc:  # reported in the JSON line
                answered["error"] = repr(exc)

        threading.Thread(target=answer, daemon=True).start()
    kwargs: dict[str, Any] = {"run_conf": json.loads(args.conf)}
    if args.logical_date:
        kwargs["logical_date"] = datetime.fromisoformat(args.logical_date)
    run = dag.test(**kwargs)

    from airflow.models.asset import AssetEvent
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        tis = session.scalars(
            select(TaskInstance).where(TaskInstance.dag_id == args.dag_id, TaskInstance.run_id == run.run_id)
        ).all()
        events = session.scalars(
            select(AssetEvent).where(AssetEvent.source_dag_id == args.dag_id, AssetEvent.source_run_id == run.run_id)
        ).all()
        result = {
            "state": str(getattr(run.state, "value", run.state)),
            "tasks": {ti.task_id: str(getattr(ti.state, "value", ti.state)) for ti in tis},
            "events": [{"asset": e.asset.name, "extra": e.extra} for e in events],
            "answered": answered,
        }
    print("RESULT " + json.dumps(result, default=str))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
