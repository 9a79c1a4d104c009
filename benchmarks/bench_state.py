"""Benchmark of the state over a long series: a 5,000,000-person register (Adult rows
resampled under fresh ids) and 20 releases made by the paper's simulator (equal
partitions of 250,000, 20 % carried over), published one after the other.

Reported per release: loading the statistics file plus committing the new one
("state"), anonymization, the whole publication, and the size of the statistics blobs.

Usage::

    SERIALPUB_DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/test \\
        uv run python benchmarks/bench_state.py [--register 5000000] [--rounds 20]

Without SERIALPUB_DATABASE_URL it uses SQLite in the workspace. The PostgreSQL run uses
the schema ``bench_state`` (dropped and recreated).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sqlalchemy import create_engine, text

from serialpub.config import CONFIG_NAME, DATABASE_ENV, Config, SignOffSettings, load_config
from serialpub.config_render import render_config
from serialpub.datasets import adult
from serialpub.series_files import write_series
from serialpub.simulate import SeriesSpec
from serialpub.workflow.publisher import Publisher

OUT = Path(__file__).resolve().parent / "out"


def build(root: Path, n_register: int, rounds: int) -> None:
    if (root / CONFIG_NAME).exists():
        return
    root.mkdir(parents=True, exist_ok=True)
    base = adult.load_adult()
    rows = np.random.default_rng(1).integers(0, len(base), size=n_register)
    table = base.iloc[rows][[*adult.QUASI_IDENTIFIERS, adult.SENSITIVE]].reset_index(drop=True)
    table.insert(0, "id", pd.Series(np.arange(1, n_register + 1)).astype(str))
    write_series(
        root,
        table,
        "id",
        adult.QUASI_IDENTIFIERS,
        adult.SENSITIVE,
        SeriesSpec(rounds=rounds, carry_over=0.2, redraw=0.2, seed=0),
        "Adult resampled",
    )
    (root / "hierarchies").mkdir(exist_ok=True)
    for col in [*adult.QUASI_IDENTIFIERS, adult.SENSITIVE]:
        shutil.copyfile(adult.hierarchy_dir() / f"{col}.csv", root / "hierarchies" / f"{col}.csv")
    config = Config(
        dataset="adult",
        quasi_identifiers=adult.QUASI_IDENTIFIERS,
        sensitive=adult.SENSITIVE,
        l=2,
        sign_off=SignOffSettings(auto_approve=True),
    )
    (root / CONFIG_NAME).write_text(render_config(config, {"sign_off.auto_approve": "A benchmark workspace."}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--register", type=int, default=5_000_000)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    root = OUT / f"state-{args.register}"
    t = time.perf_counter()
    build(root, args.register, args.rounds)
    print(f"workspace ready in {time.perf_counter() - t:.1f} s", flush=True)
    url = os.environ.get(DATABASE_ENV)
    if url and url.startswith("postgresql"):
        engine = create_engine(url)
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA IF EXISTS bench_state CASCADE"))
            conn.execute(text("CREATE SCHEMA bench_state"))
        engine.dispose()
        os.environ[DATABASE_ENV] = url + ("&" if "?" in url else "?") + "options=-csearch_path%3Dbench_state"
    else:
        for f in root.glob("state.sqlite*"):
            f.unlink()
    shutil.rmtree(root / "releases", ignore_errors=True)
    ws = load_config(root)
    t = time.perf_counter()
    publisher = Publisher(ws)
    print(f"register loaded in {time.perf_counter() - t:.1f} s", flush=True)
    rows = []
    for snap in sorted((root / "snapshots").glob("snapshot-*.csv")):
        o = publisher.publish(snap)
        stats = publisher.store.latest_statistics(ws.config.dataset)
        assert stats is not None
        row = {
            "release": o.seq,
            "records": o.records,
            "groups": o.groups,
            "state_s": round(o.seconds_state, 2),
            "anonymize_s": round(o.seconds_anonymize, 2),
            "publish_s": round(o.seconds, 2),
            "history_classes": stats[1].column("class").to_numpy().max() + 1 if stats[1].num_rows else 0,
            "max_p": round(o.max_breach, 4),
        }
        rows.append(row)
        print(json.dumps({k: (int(v) if isinstance(v, np.integer) else v) for k, v in row.items()}), flush=True)
    df = pd.DataFrame(rows)
    print(df.to_string(index=False))
    print(f"state per release: median {df.state_s.median():.2f} s, max {df.state_s.max():.2f} s")
    (OUT / "state.json").write_text(df.to_json(orient="records", indent=1))


if __name__ == "__main__":
    main()
