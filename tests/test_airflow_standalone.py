"""The release DAG in a running Airflow: ``airflow standalone`` (api-server,
scheduler, dag-processor, triggerer) against the project's DAGs; a snapshot lands, the
upstream extract announces it through the REST API (the "snapshot landed" Asset event),
the run waits at the sign-off, an approver answers through the REST API, and the release
is published. Every process started is stopped (SIGINT to standalone, which stops its
components; then the process group is killed if anything is left).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ROOT, airflow_env, airflow_workspace

from serialpub.config import load_config
from state.store import StateStore, open_engine

pytestmark = pytest.mark.slow


def _session_processes(sid: int) -> list[str]:
    """Processes of session ``sid`` that have not exited: ``pid state command`` each
    (zombies, already exited and waiting for their parent to reap them, are left out)."""
    out = subprocess.run(["ps", "-s", str(sid), "-o", "pid=,stat=,args="], capture_output=True, text=True).stdout
    return [line.strip() for line in out.splitlines() if line.split() and not line.split()[1].startswith("Z")]


def _wait_until_session_gone(sid: int, timeout: float) -> list[str]:
    """Poll until no process of the session is left; what is still there at the deadline."""
    deadline = time.monotonic() + timeout
    left = _session_processes(sid)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = _session_processes(sid)
    return left


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: seconds one REST call may take: longer than the ``timeout`` a writer of the shared SQLite file waits
#: for another's lock (AIRFLOW__DATABASE__SQL_ALCHEMY_CONN below), so a call queued behind the
#: scheduler's or the DAG processor's write on a loaded 2-core machine is not given up on
#: (a POST given up on may still have been applied: it cannot be retried)
CALL_TIMEOUT = 180
#: times a call answered "500 Database error" is made: the API server rolls such a request
#: back, and on a loaded 2-core machine the shared SQLite file refuses a transaction now and then
DB_ERROR_ATTEMPTS = 5


class Rest:
    """A minimal client of Airflow's REST API v2 with a SimpleAuthManager token."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.token: str | None = None

    def call(self, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None) -> Any:
        url = self.base + path + ("?" + urllib.parse.urlencode(query, doseq=True) if query else "")
        req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(), method=method)
        req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        for attempt in range(DB_ERROR_ATTEMPTS):
            try:
                with urllib.request.urlopen(req, timeout=CALL_TIMEOUT) as response:
                    raw = response.read()
                    return json.loads(raw) if raw else None
            except urllib.error.HTTPError as exc:
                text = exc.read().decode()
                if exc.code == 500 and '"Database error"' in text and attempt + 1 < DB_ERROR_ATTEMPTS:
                    # the shared SQLite file refused the request's transaction (it was rolled
                    # back, so the call is made again): four processes write to it at once
                    time.sleep(2 * (attempt + 1))
                    continue
                raise RuntimeError(f"{method} {path} -> {exc.code}: {text[:500]}") from None
        raise AssertionError("unreachable")

    def wait(self, what: str, probe: Any, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                last = probe()
                if last:
                    return last
            except (OSError, RuntimeError) as exc:
                last = exc
            time.sleep(2)
        raise TimeoutError(f"{what}: not within {timeout} s (last: {last!r})")


def _run_report(rest: Rest, run_path: str, log: Path) -> str:
    """What a failed run did: every task's state, the log of each failed task, the log's tail."""
    lines = []
    try:
        for ti in rest.call("GET", f"{run_path}/taskInstances")["task_instances"]:
            lines.append(f"{ti['task_id']}: {ti['state']} (try {ti['try_number']})")
            if ti["state"] == "failed":
                try:
                    text = rest.call("GET", f"{run_path}/taskInstances/{ti['task_id']}/logs/{ti['try_number']}")
                    lines.append(json.dumps(text)[-4000:])
                except RuntimeError as exc:
                    lines.append(f"  (no log: {exc})")
    except RuntimeError as exc:
        lines.append(f"(task instances not listed: {exc})")
    return "\n".join([*lines, "--- standalone log tail ---", log.read_text()[-3000:]])


#: the half years 'airflow backfill create --from-date 2024-07-01 --to-date 2026-01-01' publishes
BACKFILLED = ["2024-H1", "2024-H2", "2025-H1", "2025-H2"]


CHROMIUM = next((p for n in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(n))), None)


def _open_link_as(url: str, username: str, password: str) -> tuple[list[str], bytes, str]:
    """Open ``url`` in headless Chromium as a person would: Airflow sends the browser to its
    login page, the person signs in and comes back to ``url``. Returns the addresses the
    browser was at (before signing in, after), the page's bytes as served and its text."""
    from playwright.sync_api import sync_playwright

    assert CHROMIUM is not None, "no Chromium on PATH: install Debian's 'chromium' package"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto(url)
            page.locator("input[name=username]").wait_for(timeout=60_000)
            at_login = page.url
            page.locator("input[name=username]").fill(username)
            page.locator("input[name=password]").fill(password)
            with page.expect_response(lambda r: r.url == url, timeout=60_000) as served:
                page.locator("button[type=submit]").click()
            page.wait_for_url(url, timeout=60_000)
            return [at_login, page.url], served.value.body(), page.inner_text("body")
        finally:
            browser.close()


def _parked_gate(rest: Rest, dag_id: str, log: Path) -> tuple[dict[str, Any], str]:
    """Wait until a sign-off of ``dag_id`` waits for an answer and can take one; returns its
    HITL detail and its run's API path."""

    def awaiting() -> Any:
        found = rest.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/~/hitlDetails",
                          query={"response_received": "false", "task_id": "sign_off"})["hitl_details"]  # fmt: skip
        return found[0] if found else None

    detail = rest.wait(f"a sign-off of {dag_id} waiting for an answer", awaiting, 420)
    run_id = detail["task_instance"]["dag_run_id"]
    run_path = f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}"
    # the gate writes its request, then parks its task ('awaiting_input' on Airflow 3.3,
    # 'deferred' before); an answer that arrives in between races the scheduler's handling
    # of the parked task (Airflow 3.3 then marks the gate failed): answer once it is
    # parked, as a person always would
    rest.wait(
        "the sign-off task parked awaiting input",
        lambda: rest.call("GET", f"{run_path}/taskInstances/sign_off")["state"] in ("awaiting_input", "deferred"),
        300,
    )
    # On Airflow 3.3 the worker that parked the gate exits after the state changes, and
    # the scheduler then processes that workload's executor event. An answer that
    # re-queues the task before that event is processed makes the scheduler read the
    # event as the *resumed* try finishing and mark it failed (seen under load: the
    # parking worker was slow to exit). A person answers long after; so does the test,
    # once the scheduler has logged the parked try as finished in its parked state.
    marker = f"task_id=sign_off, run_id={run_id}"
    rest.wait(
        "the scheduler to process the parked gate's workload",
        lambda: (
            any(
                "TaskInstance Finished:" in line and marker in line and "state=awaiting_input" in line
                for line in log.read_text(errors="replace").splitlines()
            )
            or rest.call("GET", f"{run_path}/taskInstances/sign_off")["state"] == "deferred"
        ),
        300,
    )
    return detail, run_path


def test_standalone_airflow_publishes_after_rest_approval(tmp_path: Path, adult_template: Path) -> None:
    root = airflow_workspace(adult_template, tmp_path, "adult_live")
    ws = load_config(root)
    # a second dataset whose sign-off nobody answers, with a timeout of a few seconds (only a
    # real scheduler times deferred tasks out: dag.test never does)
    quiet = airflow_workspace(adult_template, tmp_path, "adult_timeout")
    quiet_config = yaml.safe_load((quiet / "serialpub.yaml").read_text())
    quiet_config["sign_off"]["timeout_hours"] = 0.005
    (quiet / "serialpub.yaml").write_text(yaml.safe_dump(quiet_config, sort_keys=False))
    # a third dataset published by 'airflow backfill create' over four half years
    backfilled = airflow_workspace(adult_template, tmp_path, "adult_backfill")
    bf_landing = load_config(backfilled).landing_dir
    # the next half year: the last one less its final record (a byte-identical snapshot is
    # refused as a re-sent one, and an Airflow run cannot acknowledge that)
    h1 = (bf_landing / "snapshot-2025-H1.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    (bf_landing / "snapshot-2025-H2.csv").write_text("".join(h1[:-1]), encoding="utf-8")
    landing = ws.landing_dir
    pending = tmp_path / "pending"
    pending.mkdir()
    for f in landing.iterdir():  # the landing zone starts empty: the snapshot lands during the test
        shutil.move(str(f), pending / f.name)
    home = tmp_path / "airflow"
    port = _free_port()
    env = airflow_env(home, [root, quiet, backfilled])
    env.update(
        AIRFLOW__API__PORT=str(port),
        AIRFLOW__API__BASE_URL=f"http://localhost:{port}",
        AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://localhost:{port}/execution/",
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="admin:admin,olga:admin",
        AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL="5",
        AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC="2",
        AIRFLOW__CORE__PARALLELISM="4",
        # each task runs in a process forked from a LocalExecutor worker; started from a fork
        # server that imported the pipeline once (Airflow 3.3's documented start method and
        # preload), no task imports pandas, pyarrow and Great Expectations again: that import
        # was most of the CPU of each of the test's ~50 tasks (docs/testing.md)
        AIRFLOW__SCHEDULER__MP_START_METHOD="forkserver",
        AIRFLOW__SCHEDULER__MP_FORKSERVER_PRELOAD="airflow.executors.local_executor,serialpub.workflow.orchestration",
        # a worker waits this long for the execution API (longer than the default; Airflow's advice under
        # load): with the rest of the test suite on the other core its calls took longer
        AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT="60",
        # four processes share one SQLite file: a writer waits up to ``timeout`` for another's
        # write lock instead of the driver's default, which a loaded 2-core machine exceeds
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home / 'airflow.db'}?timeout=60",
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),  # standalone runs `airflow`
    )
    migrate = subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"], env=env, capture_output=True, text=True, timeout=300
    )
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    log = (tmp_path / "standalone.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "airflow", "standalone"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    dag_id = "serialpub_release_adult_live"
    try:
        rest = Rest(f"http://localhost:{port}")
        rest.wait("api-server healthy", lambda: rest.call("GET", "/api/v2/monitor/health"), 180)
        passwords = home / "simple_auth_manager_passwords.json.generated"
        rest.wait("passwords file", passwords.exists, 60)
        password = json.loads(passwords.read_text())["olga"]
        rest.token = rest.call("POST", "/auth/token", {"username": "olga", "password": password})["access_token"]
        rest.wait("the release DAG parsed", lambda: rest.call("GET", f"/api/v2/dags/{dag_id}"), 180)
        rest.call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
        quiet_id = "serialpub_release_adult_timeout"
        rest.wait("the second DAG parsed", lambda: rest.call("GET", f"/api/v2/dags/{quiet_id}"), 180)
        rest.call("PATCH", f"/api/v2/dags/{quiet_id}", {"is_paused": False})
        quiet_run = rest.call("POST", f"/api/v2/dags/{quiet_id}/dagRuns",
                              {"logical_date": None, "conf": {"period": "2024-H1"}})["dag_run_id"]  # fmt: skip

        # the snapshot lands; the extract announces it
        snapshot = landing / "snapshot-2024-H1.csv"
        shutil.copyfile(pending / snapshot.name, snapshot)
        assets = rest.call("GET", "/api/v2/assets", query={"name_pattern": "serialpub_snapshot_landed_adult_live"})
        [asset] = assets["assets"]
        rest.call(
            "POST",
            "/api/v2/assets/events",
            {"asset_id": asset["id"], "extra": {"snapshot": str(snapshot), "period": "2024-H1"}},
        )

        detail, run_path = _parked_gate(rest, dag_id, tmp_path / "standalone.log")
        run_id = detail["task_instance"]["dag_run_id"]
        assert "adult_live release 1" in detail["body"] and "guarantee passed" in detail["body"]
        # the approver opens the report through the prompt's link, in a browser
        [link] = re.findall(r"\[Open the release report\]\((\S+?)\)", detail["body"])
        assert link == f"http://localhost:{port}/serialpub/adult_live/releases/1/report.html"
        assert f"published to `{ws.dataset_dir / 'release-0001'}`" in detail["body"]
        [signed_sha] = re.findall(r"sha256 ([0-9a-f]{64})", detail["body"])
        visited, served, text = _open_link_as(link, "olga", password)
        assert "/auth/login?next=" in visited[0] and visited[1] == link, visited
        assert hashlib.sha256(served).hexdigest() == signed_sha  # the very page the decision records
        assert "adult_live" in text and "awaiting sign-off when this page was made" in text, text[:1000]
        with pytest.raises(RuntimeError, match="-> 404: release 2 of 'adult_live' has no report"):
            rest.call("GET", "/serialpub/adult_live/releases/2/report.html")
        # 'admin' is an Airflow user but not on sign_off.approvers: the gate is
        # assigned to the approvers only, so Airflow refuses the answer and the gate waits on
        admin = Rest(rest.base)
        admin_password = json.loads(passwords.read_text())["admin"]
        admin.token = admin.call("POST", "/auth/token", {"username": "admin", "password": admin_password})[
            "access_token"
        ]
        with pytest.raises(RuntimeError, match=r"-> 403: .*not a respondent for the task"):
            admin.call(
                "PATCH",
                f"{run_path}/taskInstances/sign_off/-1/hitlDetails",
                {"chosen_options": ["Approve"], "params_input": {"comment": "not mine to approve"}},
            )
        assert rest.call("GET", f"{run_path}/taskInstances/sign_off")["state"] in ("awaiting_input", "deferred")
        rest.call(
            "PATCH",
            f"{run_path}/taskInstances/sign_off/-1/hitlDetails",
            {"chosen_options": ["Approve"], "params_input": {"comment": "approved through the REST API"}},
        )

        def finished() -> Any:
            run = rest.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}")
            return run if run["state"] in ("success", "failed") else None

        run = rest.wait("the run to finish", finished, 300)
        assert run["state"] == "success", _run_report(rest, run_path, tmp_path / "standalone.log")
        assert run["run_type"] == "asset_triggered"
        # the link in the answered prompt still opens what was signed, now from release-0001/
        request = urllib.request.Request(link, headers={"Authorization": f"Bearer {rest.token}"})
        with urllib.request.urlopen(request, timeout=CALL_TIMEOUT) as response:
            assert hashlib.sha256(response.read()).hexdigest() == signed_sha

        # the backfill: four historic half years, oldest first, each signed off in turn
        bf_id = "serialpub_release_adult_backfill"
        rest.wait("the backfill DAG parsed", lambda: rest.call("GET", f"/api/v2/dags/{bf_id}"), 180)
        rest.call("PATCH", f"/api/v2/dags/{bf_id}", {"is_paused": False})

        # `airflow backfill create` opens its own connection to the SQLite metadata database; a
        # lock the scheduler holds beyond the ``timeout`` wait fails it outright ("database is
        # locked") with nothing created (one transaction), so it is run again; whether it
        # created the backfill is read from the DAG's list of backfills. It runs as this OS
        # user, the preparer of the backfilled releases, so olga may approve them (four eyes).
        def backfill_created() -> Any:
            listed = admin.call("GET", "/api/v2/backfills", query={"dag_id": bf_id})["backfills"]
            if listed:
                return listed[0]
            created = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "airflow",
                    "backfill",
                    "create",
                    "--dag-id",
                    bf_id,
                    "--from-date",
                    "2024-07-01",
                    "--to-date",
                    "2026-01-01",
                    "--max-active-runs",
                    "1",
                ],
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert created.returncode == 0 or "database is locked" in created.stderr, created.stderr[-3000:]
            return None

        backfill = rest.wait("the backfill created", backfill_created, 600)
        assert backfill["dag_id"] == bf_id and backfill["max_active_runs"] == 1, backfill
        for n, period in enumerate(BACKFILLED, start=1):
            detail, bf_path = _parked_gate(rest, bf_id, tmp_path / "standalone.log")
            assert f"adult_backfill release {n}" in detail["body"], detail["body"][:500]
            rest.call(
                "PATCH",
                f"{bf_path}/taskInstances/sign_off/-1/hitlDetails",
                {"chosen_options": ["Approve"], "params_input": {"comment": f"backfill {period}"}},
            )

            def bf_ended(path: str = bf_path) -> Any:
                found = rest.call("GET", path)
                return found if found["state"] in ("success", "failed") else None

            bf_run = rest.wait(f"backfill run {n} to end", bf_ended, 420)
            assert bf_run["state"] == "success", _run_report(rest, bf_path, tmp_path / "standalone.log")
            assert bf_run["run_type"] == "backfill"

        # the unanswered sign-off timed out: the run failed and closed its release
        quiet_path = f"/api/v2/dags/{quiet_id}/dagRuns/{urllib.parse.quote(quiet_run, safe='')}"

        def quiet_ended() -> Any:
            found = rest.call("GET", quiet_path)
            return found if found["state"] in ("success", "failed") else None

        quiet_done = rest.wait("the unanswered run to end", quiet_ended, 420)
        tasks = {ti["task_id"]: ti["state"] for ti in rest.call("GET", f"{quiet_path}/taskInstances")["task_instances"]}
        assert quiet_done["state"] == "failed", _run_report(rest, quiet_path, tmp_path / "standalone.log")
        assert tasks["sign_off"] == "failed" and tasks["finalize"] == "failed" and tasks["publish"] != "success", tasks
    finally:
        os.kill(proc.pid, signal.SIGINT)  # standalone stops its components on SIGINT (not SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # anything left of the session
        except ProcessLookupError:
            pass
        log.close()

    bf_store = StateStore(open_engine(load_config(backfilled).database_url))
    assert [(r.seq, r.period) for r in bf_store.published("adult_backfill")] == list(enumerate(BACKFILLED, start=1))
    assert [s.comment for n in (1, 2, 3, 4) for s in bf_store.sign_offs("adult_backfill", n)] == [
        f"backfill {p}" for p in BACKFILLED
    ]
    quiet_store = StateStore(open_engine(load_config(quiet).database_url))
    assert quiet_store.published("adult_timeout") == [] and quiet_store.open_release("adult_timeout") is None
    [closed] = [r for r in quiet_store.audit_log("adult_timeout") if r["action"] == "failed"]
    assert "step sign_off failed" in closed["detail"]["reason"], closed
    assert not list(load_config(quiet).dataset_dir.glob(".staging-*"))
    store = StateStore(open_engine(ws.database_url))
    [published] = store.published("adult_live")
    assert published.period == "2024-H1"
    manifest = json.loads((ws.dataset_dir / "release-0001" / "manifest.json").read_text())
    assert manifest["sign_off"]["approver"] == "olga"
    assert manifest["sign_off"]["comment"] == "approved through the REST API"
    left = _wait_until_session_gone(proc.pid, timeout=120)
    assert not left, "processes of the standalone session still running:\n" + "\n".join(left)
    assert str(ROOT / "dags") == env["AIRFLOW__CORE__DAGS_FOLDER"]
