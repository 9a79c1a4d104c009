"""What an Airflow run adds to one release over the command line, on the scaling
study's register (default 5,000,000 people) and a 1,000,000-record diagnosis snapshot.

Both publish release 1 of a fresh state from the same snapshot, automatic sign-off, with
the register cache warm (one untimed ``serialpub release`` fills it first), so each pays
what a publisher pays every period:

* **command line**: ``serialpub release --snapshot ... --period 0001`` in a fresh process;
* **Airflow**: the workspace's release DAG with ``{"snapshot": ..., "period": "0001"}`` run
  by ``tests/airflow_runner.py`` (``dag.test()``: every task of the DAG in one fresh
  process, each building its own ``Publisher`` as it would in a worker) on a migrated
  metadata database made once under ``out/airflow-home``.

Reported: the seconds of each (whole processes, interpreter start and imports included)
and their difference. Each pair runs back to back, ``--repeat`` times. The last DAG run's
task ends and step lines (with their times) are kept in ``out/airflow_overhead_tasks.log``,
with the process's start and end, its first output line, the DAG's loading, the run's
creation and each task's start.

Usage::

    .venv/bin/python benchmarks/bench_airflow_overhead.py [--register 5000000] [--records 1000000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from bench_scaling import register_root, snapshot_pair, write_config
from machine_info import machine

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(__file__).resolve().parent / "out"
BIN = Path(sys.executable).parent


def airflow_env(home: Path, workspace: Path) -> dict[str, str]:
    """An Airflow process on ``home`` with the repository's DAGs and one workspace."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "SERIALPUB_"))}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(ROOT / "dags"),
        AIRFLOW__CORE__UNIT_TEST_MODE="False",
        SERIALPUB_WORKSPACES=str(workspace),
        GX_ANALYTICS_ENABLED="False",
    )
    return env


def reset(root: Path) -> None:
    """A fresh state: no releases, no state database, no snapshot verdict (the register
    cache stays: it is warm every period; a new period's snapshot never has a verdict)."""
    for stale in [*root.glob("state.sqlite*"), *root.glob("cache/snapshot-*")]:
        stale.unlink()
    shutil.rmtree(root / "releases", ignore_errors=True)


def timed(args: list[str], env: dict[str, str] | None = None, log: Path | None = None) -> float:
    """Seconds of a whole process; exits naming the command when it fails (for the DAG
    runner: when its run did not succeed). ``log``: where to keep the task ends and the
    steps' lines of its output, with their times (where a run spends them)."""
    started = datetime.now(UTC)
    t = time.perf_counter()
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - t
    ended = datetime.now(UTC)
    results = [json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or any(r.get("state") != "success" for r in results):
        sys.exit(f"{' '.join(args[:3])} ... failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-4000:]}")
    if log is not None:
        lines = (proc.stdout + proc.stderr).splitlines()
        # the process's start and end, its first line (Airflow imported), the DAG filled and
        # the run created, and each task's first API call: where the time before the first
        # task and after the last one goes
        marks = (
            "serialpub.progress",
            "[DAG TEST] end task",
            "Filling up the DagBag",
            "Created dag run",
            "Task started",
        )
        kept = [
            f"{started.isoformat()} process started", *lines[:1],
            *(x for x in lines[1:] if any(m in x for m in marks)), f"{ended.isoformat()} process ended",
        ]  # fmt: skip
        log.write_text("\n".join(kept) + "\n")
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--register", type=int, default=5_000_000)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    root = register_root(args.register)
    snapshot = snapshot_pair(root, "diagnosis", args.records)[0]
    write_config(root, "diagnosis", "register")
    home = OUT / "airflow-home"
    if not (home / "airflow.db").exists():
        home.mkdir(parents=True, exist_ok=True)
        timed([str(BIN / "airflow"), "db", "migrate"], airflow_env(home, root))
    cli = [str(BIN / "serialpub"), "release", "--config", str(root), "--snapshot", str(snapshot), "--period", "0001"]
    reset(root)
    timed(cli)  # fills the register cache; not counted
    conf = json.dumps({"snapshot": str(snapshot), "period": "0001"})
    dag = [str(BIN / "python"), str(ROOT / "tests" / "airflow_runner.py"), "serialpub_release_diagnosis", conf]
    runs = []
    for _ in range(args.repeat):
        reset(root)
        cli_s = timed(cli)
        reset(root)
        dag_s = timed(dag, airflow_env(home, root), OUT / "airflow_overhead_tasks.log")
        runs.append(
            {
                "cli_seconds": round(cli_s, 1),
                "airflow_seconds": round(dag_s, 1),
                "overhead_seconds": round(dag_s - cli_s, 1),
            }
        )
        print(f"command line {cli_s:.1f} s, Airflow {dag_s:.1f} s: +{dag_s - cli_s:.1f} s")
    reset(root)
    out = {"machine": machine(), "register": args.register, "records": args.records, "runs": runs}
    (OUT / "airflow_overhead.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
