"""Running a plan: the inputs read and checked once, then the candidates in parallel
processes (one :class:`concurrent.futures.ProcessPoolExecutor` worker per core by default),
each publishing its series in memory (:mod:`serialpub.planning.series`)."""

from __future__ import annotations

import multiprocessing
import os
import queue as queue_module
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anonymizer import overlap
from serialpub.config import Workspace
from serialpub.io.inputs import Snapshot
from serialpub.planning.grid import Candidate
from serialpub.planning.series import (
    DEFAULT_LEARNERS,
    Measured,
    PlanInputs,
    measure_snapshot,
    measured,
    run_candidate,
)
from serialpub.planning.snapshots import read_snapshot, simulated_snapshots, slim, snapshot_files


@dataclass
class PlanSetup:
    """A plan's checked inputs: the workspace's inputs and register, the snapshots and what is measured
    on them independently of the candidates, and the learners run on every candidate's series
    (names of :data:`anonymizer.learners.core.LEARNERS`; none when empty)."""

    plan: PlanInputs
    snapshots: list[Snapshot]
    measure: Measured
    source: str
    learners: tuple[str, ...] = DEFAULT_LEARNERS


def prepare(
    ws: Workspace,
    snapshots: Path | None,
    simulate: str | None,
    rounds: int,
    seed: int = 0,
    plan: PlanInputs | None = None,
) -> PlanSetup:
    """Read the workspace (``plan``: its inputs when read already) and the snapshots
    (``snapshots`` DIR, else ``simulate`` PRESET, else the workspace's own ``snapshots/``
    folder) and draw their query workloads.

    Raises:
        InputError: bad rounds, a missing folder, snapshots that do not match the register.
    """
    from serialpub.errors import InputError

    if rounds < 1:
        raise InputError(f"--rounds must be at least 1, got {rounds}")
    if snapshots is not None and simulate is not None:
        raise InputError("give --snapshots DIR or --simulate PRESET, not both")
    plan = plan if plan is not None else PlanInputs.read(ws)
    if simulate is not None:
        snaps = simulated_snapshots(plan, simulate, rounds, seed)
        source = f"simulated: preset {simulate}, seed {seed}"
    else:
        folder = snapshots if snapshots is not None else ws.root / "snapshots"
        if not folder.is_dir():
            raise InputError(f"--snapshots {folder}: not a folder; give the folder of the snapshot files")
        # one snapshot's table at a time: read, checked, its workload drawn, then slimmed
        workloads, baseline = [], []
        snaps = []
        for path in snapshot_files(folder, rounds):
            snap = read_snapshot(plan, path)
            w, error = measure_snapshot(plan, snap)
            workloads.append(w)
            baseline.append(error)
            snaps.append(slim(snap))
        measure = Measured(workloads, baseline, plan.register.register.keys)
        return PlanSetup(plan, snaps, measure, str(folder))
    return PlanSetup(plan, [slim(s) for s in snaps], measured(plan, snaps), source)


# -- worker processes --------------------------------------------------------------------
_WORKER: dict[str, Any] = {}


def _init_worker(
    ws: Workspace, snapshots: list[Snapshot], measure: Measured, ticks: Any, learners: tuple[str, ...]
) -> None:
    _WORKER.update(plan=PlanInputs.read(ws), snapshots=snapshots, measure=measure, ticks=ticks, learners=learners)


def _work(index: int, candidate: Candidate) -> tuple[int, dict[str, Any]]:
    ticks = _WORKER["ticks"]
    # the workers already fill the cores, so threads inside each would only contend; the
    # environment's switch, when an operator set it, still wins (anonymizer.overlap: the
    # same bytes either way)
    with overlap.in_turn(True):
        result = run_candidate(
            _WORKER["plan"],
            _WORKER["snapshots"],
            _WORKER["measure"],
            candidate,
            lambda: ticks.put(index),
            _WORKER["learners"],
        )
    return index, result.summary()


def run_plan(
    setup: PlanSetup,
    candidates: Sequence[Candidate],
    jobs: int | None = None,
    tick: Callable[[], None] | None = None,
) -> tuple[list[dict[str, Any]], float]:
    """Every candidate's series and figures (:meth:`CandidateResult.summary`), in
    ``candidates`` order, and the wall time in seconds. ``jobs`` worker processes (default
    ``os.cpu_count()``; 1 runs in this process); ``tick`` is called once per release of
    every candidate (candidates × rounds in all)."""
    started = time.perf_counter()
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(candidates)))
    if jobs == 1:
        with overlap.in_turn(setup.plan.ws.config.sequential):
            out = [
                run_candidate(setup.plan, setup.snapshots, setup.measure, c, tick, setup.learners).summary()
                for c in candidates
            ]
        return out, time.perf_counter() - started
    results: dict[int, dict[str, Any]] = {}
    # each worker reads the register again: from the cache entry this process wrote, once written
    setup.plan.register.cache_writes.wait()
    # spawned workers: a fork would copy the parent's threads' locks (rich's live display)
    mp = multiprocessing.get_context("spawn")
    with mp.Manager() as manager:
        ticks = manager.Queue()
        with ProcessPoolExecutor(
            max_workers=jobs,
            mp_context=mp,
            initializer=_init_worker,
            initargs=(setup.plan.ws, setup.snapshots, setup.measure, ticks, setup.learners),
        ) as pool:
            pending: set[Future[tuple[int, dict[str, Any]]]] = {
                pool.submit(_work, i, c) for i, c in enumerate(candidates)
            }
            while pending:
                done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                _drain(ticks, tick)
                for f in done:
                    i, summary = f.result()
                    results[i] = summary
            _drain(ticks, tick)
    return [results[i] for i in range(len(candidates))], time.perf_counter() - started


def _drain(ticks: Any, tick: Callable[[], None] | None) -> None:
    while True:
        try:
            ticks.get_nowait()
        except queue_module.Empty:
            return
        if tick:
            tick()
