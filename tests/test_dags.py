"""The Airflow release DAG (dags/serialpub_release.py) run with ``dag.test()`` on a
migrated Airflow metadata database, on the bundled Adult data.

Each run happens in its own process (tests/airflow_runner.py) because Airflow reads its
configuration at import. A human's sign-off is answered from a thread of that process,
as Airflow's REST handler records it; tests/test_airflow_standalone.py answers through
the REST API itself.

Every test has its own dataset name, so its DAG id and runs never meet another test's in
the shared metadata database.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import PERIODS, airflow_env, airflow_workspace, make_workspace, release_listing

from serialpub.config import load_config
from serialpub.io.release_files import sha256_file
from serialpub.workflow import orchestration
from state.store import StateStore, open_engine

RUNNER = Path(__file__).with_name("airflow_runner.py")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("airflow")
    proc = subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        env=airflow_env(home, []),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return home


def run_dag(
    home: Path,
    root: Path,
    conf: dict[str, Any],
    respond: str | None = None,
    by: str = "alice",
    comment: str = "",
    logical_date: str | None = None,
    more: tuple[tuple[str, str, str], ...] = (),
) -> tuple[dict[str, Any], str]:
    """Run the workspace's release DAG once; returns the runner's result and its log.
    ``more``: (answer, approver, comment) of the next gates (``sign_off_2``, ...)."""
    dataset = load_config(root).config.dataset
    args = [sys.executable, str(RUNNER), f"serialpub_release_{dataset}", json.dumps(conf)]
    for answer, who, text in ((respond, by, comment), *more) if respond else ():
        args += ["--respond", answer, "--by", who, "--comment", text]
    if logical_date:
        args += ["--logical-date", logical_date]
    proc = subprocess.run(args, env=airflow_env(home, [root]), capture_output=True, text=True, timeout=900)
    log = proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, log[-5000:]
    return json.loads(lines[-1][len("RESULT ") :]), log


def _store(root: Path) -> StateStore:
    return StateStore(open_engine(load_config(root).database_url))


def test_release_dag_publishes_in_period_order_with_sign_off(
    airflow_home: Path, adult_template: Path, tmp_path: Path
) -> None:
    root = airflow_workspace(adult_template, tmp_path, "adult_series")
    ws = load_config(root)
    store = _store(root)

    # a calendar run on 1 July 2024 publishes the half year before, after alice approves
    result, log = run_dag(
        airflow_home, root, {}, respond="Approve", comment="checked the page", logical_date="2024-07-01T00:00:00+00:00"
    )
    assert result["state"] == "success", log[-5000:]
    assert set(result["tasks"].values()) == {"success"}, result["tasks"]
    [published] = store.published(ws.config.dataset)
    folder = ws.dataset_dir / "release-0001"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["period"] == "2024-H1" and manifest["validation"]["success"] is True
    sign_off = manifest["sign_off"]
    assert (sign_off["decision"], sign_off["approver"], sign_off["comment"], sign_off["automatic"]) == (
        "approved",
        "alice",
        "checked the page",
        False,
    )
    assert sign_off["report_sha256"] == sha256_file(folder / "report.html")
    [stored] = store.sign_offs(ws.config.dataset, 1)
    assert (stored.approver, stored.decision, stored.report_sha256) == ("alice", "approved", sign_off["report_sha256"])
    assert published.manifest_sha256 == sha256_file(folder / "manifest.json")
    [event] = result["events"]
    assert event["asset"] == f"serialpub_release_published_{ws.config.dataset}"
    assert event["extra"]["release"] == 1 and event["extra"]["period"] == "2024-H1"
    assert event["extra"]["manifest_sha256"] == published.manifest_sha256
    assert not list(ws.dataset_dir.glob(".staging-*"))

    # the same period again: a no-op that says so
    result, log = run_dag(airflow_home, root, {"period": "2024-H1"})
    assert result["state"] == "success" and result["tasks"]["needs_release"] == "success"
    assert "is already published as release 1; nothing to do" in log
    assert result["tasks"]["publish"] == "skipped" and result["events"] == []

    # period 2 drafted and validated by a run now waiting at its sign-off: period 3 is refused
    owner = "airflow:serialpub_release_adult_series/waiting-run"
    snapshot2 = str(ws.landing_dir / "snapshot-2024-H2.csv")
    drafted = orchestration.anonymize(root, snapshot2, "2024-H2", owner)
    orchestration.validate_release(root, drafted["seq"])
    result, log = run_dag(airflow_home, root, {"period": "2025-H1"})
    assert result["state"] == "failed" and result["tasks"]["ingest"] == "failed"
    assert "release 2 (period '2024-H2') is validated and not yet decided" in log
    assert [r.seq for r in store.published(ws.config.dataset)] == [1]

    # period 2 decided, then period 3 runs
    orchestration.decide(root, 2, True, "bob", "ok", None)
    orchestration.publish(root, 2)
    result, log = run_dag(airflow_home, root, {"period": "2025-H1"}, respond="Approve", by="carol")
    assert result["state"] == "success", log[-5000:]
    assert [(r.seq, r.period) for r in store.published(ws.config.dataset)] == list(enumerate(PERIODS, start=1))
    assert release_listing(ws.dataset_dir) == ["release-0001", "release-0002", "release-0003"]


def test_rejected_sign_off_publishes_nothing(airflow_home: Path, adult_template: Path, tmp_path: Path) -> None:
    root = airflow_workspace(adult_template, tmp_path, "adult_rejected")
    ws = load_config(root)
    store = _store(root)
    result, log = run_dag(
        airflow_home, root, {"period": "2024-H1"}, respond="Reject", by="dana", comment="query error too high"
    )
    assert result["tasks"]["sign_off"] == "success" and result["tasks"]["publish"] == "skipped", result["tasks"]
    # a rejection ends the run failed, so that a green run always means published
    assert result["state"] == "failed" and result["tasks"]["finalize"] == "failed" and result["events"] == []
    assert "release 1 (period '2024-H1') was rejected by dana at the sign-off: nothing was published" in log
    assert store.published(ws.config.dataset) == [] and store.latest_statistics(ws.config.dataset) is None
    assert store.open_release(ws.config.dataset) is None
    [decision] = store.sign_offs(ws.config.dataset, 1)
    assert (decision.decision, decision.approver, decision.comment) == ("rejected", "dana", "query error too high")
    assert decision.report_sha256
    assert list(ws.dataset_dir.iterdir()) == []


def test_an_automatic_sign_off_publishes_and_the_run_succeeds(
    airflow_home: Path, adult_template: Path, tmp_path: Path
) -> None:
    # the automatic sign-off returned a dict, which Airflow split into one XCom per key:
    # finalize read the key "decision" as the string "approved" and failed a published run
    root = airflow_workspace(adult_template, tmp_path, "adult_auto")
    config = yaml.safe_load((root / "serialpub.yaml").read_text())
    config["sign_off"] = {"auto_approve": True}
    (root / "serialpub.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    ws = load_config(root)
    result, log = run_dag(airflow_home, root, {"period": "2024-H1"})
    assert result["state"] == "success", log[-5000:]
    assert set(result["tasks"].values()) == {"success"}, result["tasks"]
    manifest = json.loads((ws.dataset_dir / "release-0001" / "manifest.json").read_text())
    assert manifest["sign_off"]["automatic"] is True
    assert [r.seq for r in _store(root).published(ws.config.dataset)] == [1]
    assert [e["extra"]["release"] for e in result["events"]] == [1]


def test_two_required_approvals_are_two_gates_by_two_approvers(
    airflow_home: Path, adult_template: Path, tmp_path: Path
) -> None:
    root = airflow_workspace(adult_template, tmp_path, "adult_two")
    config = yaml.safe_load((root / "serialpub.yaml").read_text())
    config["sign_off"].update(approvers=["alice", "bob"], required_approvals=2)
    (root / "serialpub.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    ws = load_config(root)
    result, log = run_dag(
        airflow_home,
        root,
        {"period": "2024-H1"},
        respond="Approve",
        by="alice",
        comment="one",
        more=(("Approve", "bob", "two"),),
    )
    assert result["state"] == "success", log[-5000:]
    assert result["tasks"]["sign_off"] == result["tasks"]["sign_off_2"] == "success", result["tasks"]
    manifest = json.loads((ws.dataset_dir / "release-0001" / "manifest.json").read_text())
    assert (manifest["sign_off"]["approver"], manifest["sign_off"]["comment"]) == ("bob", "two")
    assert [(a["approver"], a["comment"]) for a in manifest["sign_off"]["earlier_approvals"]] == [("alice", "one")]
    assert [(s.approver, s.decision) for s in _store(root).sign_offs(ws.config.dataset, 1)] == [
        ("alice", "approved"), ("bob", "approved"),
    ]  # fmt: skip


def test_failing_validation_fails_the_run_and_publishes_nothing(
    airflow_home: Path, adult_template: Path, tmp_path: Path
) -> None:
    root = airflow_workspace(adult_template, tmp_path, "adult_strict", validation={"max_group_size": 1})
    ws = load_config(root)
    store = _store(root)
    result, log = run_dag(airflow_home, root, {"period": "2024-H1"})
    assert result["state"] == "failed"
    assert result["tasks"]["validate_release"] == "failed" and result["tasks"]["finalize"] == "failed"
    assert result["tasks"]["sign_off"] == "upstream_failed" and result["tasks"]["publish"] == "upstream_failed"
    results = store.validation_results(ws.config.dataset, 1)
    assert [r["suite"] for r in results if not r["success"]] == ["utility"], log[-3000:]
    assert all(r["release_status"] == "failed" for r in results)
    assert store.published(ws.config.dataset) == [] and store.open_release(ws.config.dataset) is None
    assert not ws.dataset_dir.exists() or list(ws.dataset_dir.iterdir()) == []


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"dataset": "census", "period": "2024-H1"}, "unknown dataset 'census': this DAG publishes 'adult_conf'"),
        ({"period": "2024 first half"}, "period '2024 first half' is malformed"),
    ],
)
def test_bad_run_configuration_fails_at_the_first_task(
    airflow_home: Path, adult_template: Path, tmp_path: Path, conf: dict[str, Any], message: str
) -> None:
    root = airflow_workspace(adult_template, tmp_path, "adult_conf")
    result, log = run_dag(airflow_home, root, conf)
    assert result["state"] == "failed" and result["tasks"]["ingest"] == "failed"
    assert all(state in ("upstream_failed", "failed") for task, state in result["tasks"].items() if task != "ingest")
    assert message in log
    assert _store(root).published("adult_conf") == []


def test_period_of_a_calendar_run() -> None:
    from datetime import UTC, datetime

    assert orchestration.half_year_before(datetime(2025, 7, 1, tzinfo=UTC)) == "2025-H1"
    assert orchestration.half_year_before(datetime(2025, 1, 1, tzinfo=UTC)) == "2024-H2"
    assert orchestration.half_year_before(datetime(2025, 3, 15, tzinfo=UTC)) == "2024-H2"


def test_parsing_the_dag_file_imports_no_pipeline_library(adult_template: Path, tmp_path: Path) -> None:
    """The DAG processor parses the file every few seconds: it lists the DAGs from the
    configurations alone and imports the steps (pandas, pyarrow, Great Expectations, the
    anonymizer, the state store) only inside the tasks (benchmarks/bench_dag_parse.py
    measures the time). SQLAlchemy is not checked: Airflow imports it itself. The
    configuration's settings are enumerations of ``anonymizer.settings``, and error messages
    shorten quoted values with ``anonymizer.quoting``; both import only the standard library."""
    code = (
        "import runpy, sys; ns = runpy.run_path(sys.argv[1]); "
        "print(sorted(k for k in ns if k.startswith('serialpub_release_'))); "
        "print(sorted(({m.split('.')[0] for m in sys.modules} & "
        "{'pandas', 'pyarrow', 'great_expectations', 'checks', 'state'}) | "
        "{m for m in sys.modules if m.startswith('anonymizer.') and m not in ('anonymizer.settings', "
        "'anonymizer.quoting')}))"
    )
    env = airflow_env(tmp_path / "home", [adult_template])
    dag_file = Path(__file__).resolve().parent.parent / "dags" / "serialpub_release.py"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(dag_file)], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    dags, heavy = proc.stdout.strip().splitlines()[-2:]
    assert dags == f"['serialpub_release_{load_config(adult_template).config.dataset}']"
    assert heavy == "[]", heavy


def test_one_bad_workspace_does_not_take_the_dag_file_down(tmp_path: Path) -> None:
    """A workspace whose serialpub.yaml is refused (here: an alias) is left out, with one
    line in the DAG processor's log; the other workspaces' DAGs are still listed."""
    good = make_workspace(tmp_path / "good")
    bad = make_workspace(tmp_path / "bad", dataset="clinic_bad")
    with (bad / "serialpub.yaml").open("a", encoding="utf-8") as f:
        f.write("x: &x [1, 2]\ny: *x\n")
    code = (
        "import runpy, sys; ns = runpy.run_path(sys.argv[1]); "
        "print(sorted(k for k in ns if k.startswith('serialpub_release_')))"
    )
    env = airflow_env(tmp_path / "home", [bad, good])
    dag_file = Path(__file__).resolve().parent.parent / "dags" / "serialpub_release.py"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(dag_file)], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "['serialpub_release_clinic']"
    log = proc.stdout + proc.stderr
    assert f"serialpub: workspace {bad} skipped: {bad / 'serialpub.yaml'}: not valid YAML" in log, log[-3000:]
    assert "alias '*x' is not allowed in a configuration file" in log
