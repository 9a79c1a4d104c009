"""Parse time of the release DAG file, as the DAG processor pays it on every parse.

Airflow itself is imported first (the DAG processor has it loaded); then the DAG file is
executed in a fresh module namespace, as a DagBag parse does, for the workspaces in
``SERIALPUB_WORKSPACES`` (default: a demo workspace created under benchmarks/out/).
Reports the time to execute the file and which heavy libraries the parse imported.

Usage::

    .venv/bin/python benchmarks/bench_dag_parse.py
"""

from __future__ import annotations

import os
import runpy
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT, ROOT / "benchmarks"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from machine_info import machine  # noqa: E402

HEAVY = ("great_expectations", "pandas", "pyarrow", "sqlalchemy", "numpy", "anonymizer", "checks")
#: light modules of the project the configuration needs (enumerations, standard library only)
LIGHT = {"anonymizer", "anonymizer.settings"}


def main() -> int:
    if "SERIALPUB_WORKSPACES" not in os.environ:
        ws = ROOT / "benchmarks" / "out" / "dag-parse-ws"
        if not (ws / "serialpub.yaml").is_file():  # in a child, so this process stays as the processor's
            import subprocess

            code = (
                "import pathlib; from serialpub import demo; "
                f"demo.create_workspace(pathlib.Path({str(ws)!r}), rounds=2)"
            )
            subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
        os.environ["SERIALPUB_WORKSPACES"] = str(ws)
    import airflow.sdk  # noqa: F401  (loaded in the DAG processor already)
    from airflow.providers.standard.operators.hitl import ApprovalOperator  # noqa: F401

    before = set(sys.modules)
    started = time.perf_counter()
    namespace = runpy.run_path(str(ROOT / "dags" / "serialpub_release.py"))
    seconds = time.perf_counter() - started
    loaded = sorted({m.split(".")[0] for m in set(sys.modules) - before - LIGHT} & set(HEAVY))
    dags = sorted(k for k in namespace if k.startswith("serialpub_release_"))
    print(machine())
    print(
        f"DAG file parsed in {seconds:.2f} s; DAGs: {', '.join(dags)}; heavy libraries imported by the parse: "
        f"{', '.join(loaded) or 'none'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
