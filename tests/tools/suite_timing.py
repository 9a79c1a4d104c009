"""A pytest plugin that records where a run's time goes: for every test phase, the worker
(xdist) that ran it, its wall interval and the CPU time the worker's process spent in it.

    PYTHONPATH=tests/tools .tools/bin/uv run --frozen pytest -p suite_timing --timing-out X.jsonl ...
    .venv/bin/python tests/tools/suite_timing_report.py X.jsonl

Each worker writes its own lines (append, one JSON object per phase); the report sums them
per worker and per module, shows each worker's idle end (the loadscope tail) and the ratio
of CPU to wall per module (much below one: the module waits on processes, services or sleeps).
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--timing-out", default=None, help="append per-phase timings (JSON lines) to this file")


def _cpu() -> float:
    # this process and the children it has reaped (subprocess.run waits: reaped)
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _runqueue_wait() -> float:
    """Seconds this process's threads spent runnable but not running (waiting for a core:
    the machine's load, not the test), from /proc (Linux; 0 elsewhere)."""
    total = 0
    try:
        for task in Path("/proc/self/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[1])
            except (OSError, IndexError, ValueError):
                continue  # a thread that ended meanwhile
    except OSError:
        return 0.0
    return total / 1e9


class _Recorder:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.worker = os.environ.get("PYTEST_XDIST_WORKER", "main")

    def _write(self, row: dict[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")

    def _phase(self, item: pytest.Item, when: str) -> Iterator[None]:
        wall0, cpu0, wait0 = time.time(), _cpu(), _runqueue_wait()
        yield
        self._write(
            {
                "worker": self.worker,
                "nodeid": item.nodeid,
                "module": item.path.name,
                "when": when,
                "start": wall0,
                "wall": time.time() - wall0,
                "cpu": _cpu() - cpu0,
                "runqueue": _runqueue_wait() - wait0,
                "slow": item.get_closest_marker("slow") is not None,
            }
        )

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        yield from self._phase(item, "setup")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        yield from self._phase(item, "call")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Iterator[None]:
        yield from self._phase(item, "teardown")

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self._write({"worker": self.worker, "event": "start", "time": time.time(), "cpu": _cpu()})

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self._write({"worker": self.worker, "event": "finish", "time": time.time(), "cpu": _cpu()})


def pytest_configure(config: pytest.Config) -> None:
    out = config.getoption("--timing-out")
    if out:
        config.pluginmanager.register(_Recorder(Path(out).resolve()), "suite-timing-recorder")
