"""A simulated series as files: the register, the snapshots and ``series.json``
(:mod:`serialpub.simulate`), and with an evolution the register of every period
(:mod:`serialpub.evolving`). Both generators are imported here, so neither imports the
other's writer.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from serialpub.evolving import Evolution, evolve_series
from serialpub.simulate import SeriesSpec, check_base_table, simulate_series

#: the folder of an evolving series' register of every period (register-NNNN.csv)
PERIOD_REGISTERS = "register-periods"


def write_series(
    out: Path,
    base: pd.DataFrame,
    id_column: str,
    quasi_identifiers: list[str],
    sensitive: str,
    spec: SeriesSpec,
    source: str,
    evolution: Evolution | None = None,
) -> list[Path]:
    """Write ``register.csv``, ``snapshots/snapshot-NNNN.csv`` and ``series.json`` into ``out``;
    with ``evolution``, the register changes from period to period
    (:mod:`serialpub.evolving`): ``register-periods/register-NNNN.csv`` holds the register
    of each period and ``register.csv`` that of the first.

    Files are byte-identical for the same base table and spec (no timestamps).

    Returns:
        the paths written, register first.
    """
    check_base_table(base, id_column, [*quasi_identifiers, sensitive], source)
    out.mkdir(parents=True, exist_ok=True)
    (out / "snapshots").mkdir(exist_ok=True)
    written = [out / "register.csv"]
    if evolution is None:
        snapshots = simulate_series(base, sensitive, spec)
        base[[id_column, *quasi_identifiers]].to_csv(written[0], index=False, lineterminator="\n")
    else:
        registers, snapshots = evolve_series(base, id_column, quasi_identifiers, sensitive, spec, evolution)
        registers[0].to_csv(written[0], index=False, lineterminator="\n")
        (out / PERIOD_REGISTERS).mkdir(exist_ok=True)
        for i, reg in enumerate(registers, start=1):
            reg.to_csv(out / PERIOD_REGISTERS / f"register-{i:04d}.csv", index=False, lineterminator="\n")
    for i, snap in enumerate(snapshots, start=1):
        path = out / "snapshots" / f"snapshot-{i:04d}.csv"
        snap[[id_column, *quasi_identifiers, sensitive]].to_csv(path, index=False, lineterminator="\n")
        written.append(path)
    meta = {
        "source": source,
        "id_column": id_column,
        "quasi_identifiers": quasi_identifiers,
        "sensitive": sensitive,
        **asdict(spec),
        **({"evolution": asdict(evolution)} if evolution is not None else {}),
        "snapshots": [p.name for p in written[1:]],
        "rows": [len(s) for s in snapshots],
    }
    (out / "series.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    written.append(out / "series.json")
    return written
