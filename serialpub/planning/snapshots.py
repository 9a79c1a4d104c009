"""The snapshots of a plan: read from a folder and checked against the register as
``serialpub release`` checks them, or simulated (:mod:`serialpub.simulate`); and, once
their workloads are drawn, slimmed to what a candidate's series reads of them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from serialpub.errors import InputError
from serialpub.io.inputs import Snapshot, read_csv, snapshot_from_table
from serialpub.simulate import PRESETS, SeriesSpec, simulate_series

if TYPE_CHECKING:
    from serialpub.planning.series import PlanInputs


def _snapshot_files(folder: Path) -> list[Path]:
    return sorted([*folder.glob("*.csv"), *folder.glob("*.parquet")])


def snapshot_files(folder: Path, rounds: int) -> list[Path]:
    """The first ``rounds`` snapshot files of ``folder`` (file-name order).

    Raises:
        InputError: fewer files than rounds.
    """
    files = _snapshot_files(folder)
    if len(files) < rounds:
        raise InputError(
            f"--snapshots {folder}: {len(files)} snapshot file(s) for --rounds {rounds}; give at most "
            f"{len(files)} rounds or more snapshots"
        )
    return files[:rounds]


def read_snapshot(plan: PlanInputs, path: Path) -> Snapshot:
    """One snapshot file (CSV or Parquet), checked against the register as ``serialpub
    release`` checks it.

    Raises:
        InputError: a snapshot that does not match the register (the pipeline's message,
            naming the file and line).
    """
    cfg = plan.ws.config
    domain = set(plan.inputs.sensitive_domain) if plan.inputs.sensitive_domain is not None else None
    table = read_csv(path, "snapshot") if path.suffix == ".csv" else pd.read_parquet(path).astype(str)
    return snapshot_from_table(
        table, path, cfg.id_column, plan.inputs.qis, cfg.sensitive, plan.register.register, plan.inputs.hierarchies,
        domain,
    )  # fmt: skip


def slim(snap: Snapshot) -> Snapshot:
    """What a candidate's series reads of a snapshot once its workload is drawn: the
    records' register rows and sensitive values, with their value order
    (:attr:`Snapshot.value_order`, as computed from the table); the table's rows dropped
    (its columns kept) and the values as references to the few labels, shape (R,) each.
    A plan of 20 snapshots of 1,000,000 records holds and sends its worker processes
    tens of MiB, not the tables' GiB."""
    codes, labels = snap.value_order
    out = Snapshot(
        table=snap.table.iloc[:0],
        individual=snap.individual,
        value=np.asarray(labels.tolist(), dtype=object)[codes],
        sensitive=snap.sensitive,
    )
    out.__dict__["value_order"] = (codes, labels)  # the cached property, as the full snapshot computed it
    return out


def simulated_snapshots(plan: PlanInputs, preset: str, rounds: int, seed: int = 0) -> list[Snapshot]:
    """Snapshots simulated by paper 004's generator (:mod:`serialpub.simulate`, the preset's
    carry-over and redraw, ``seed``) from a base table of the register's individuals.

    The register holds no sensitive value, so each individual takes the last one recorded
    for them in the workspace's own ``snapshots/`` folder; the generator partitions the
    individuals found there into max(rounds, the preset's rounds) periods. On the demo
    workspace (whose snapshots cover its whole base table) the preset ``paper`` with seed 0
    gives the demo's snapshots.

    Raises:
        InputError: an unknown preset, or a workspace without snapshots to take values from.
    """
    if preset not in PRESETS:
        raise InputError(f"--simulate {preset!r}: unknown preset; use one of {', '.join(PRESETS)}")
    cfg = plan.ws.config
    files = _snapshot_files(plan.ws.root / "snapshots")
    if not files:
        raise InputError(
            f"--simulate {preset}: {plan.ws.root / 'snapshots'} holds no snapshot to take the sensitive values "
            "from (the register has none); give --snapshots DIR"
        )
    seen = pd.concat([read_csv(p, "snapshot") for p in files], ignore_index=True)
    base = seen.drop_duplicates(cfg.id_column, keep="last")
    rows = plan.register.register.rows_of(base[cfg.id_column])
    base = base.iloc[np.argsort(rows, kind="stable")].reset_index(drop=True)  # register order
    p = PRESETS[preset]
    spec = SeriesSpec(rounds=max(rounds, int(p["rounds"])), carry_over=p["carry_over"], redraw=p["redraw"], seed=seed)
    domain = set(plan.inputs.sensitive_domain) if plan.inputs.sensitive_domain is not None else None
    return [
        snapshot_from_table(
            t[[cfg.id_column, *plan.inputs.qis, cfg.sensitive]].reset_index(drop=True), f"simulated snapshot {i}",
            cfg.id_column, plan.inputs.qis, cfg.sensitive, plan.register.register, plan.inputs.hierarchies, domain,
        )
        for i, t in enumerate(simulate_series(base, cfg.sensitive, spec)[:rounds], start=1)
    ]  # fmt: skip
