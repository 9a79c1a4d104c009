"""The data user's side at scale: opening a release series, answering 5,000 count queries on
one release with the register-joint estimator, and ``serialpub expand`` of one release
(docs/data-users.md, docs/benchmarks.md "The data user's side").

Set-up: the scale workspace of ``bench_release.py`` (a 5,000,000-person register that
resamples UCI Adult rows under fresh ids, and a 1,000,000-record snapshot of it), with
release 1 published by the real pipeline (ℓ = 2, constant ratio k' = 20) if it is not there
yet. Three variants of the settings (``--variant``): ``all`` occupations protected (the
demo's setting; at 5× dilution the release is one group), the five ``rarest5`` (a few
groups), and ``localized`` (the default here: the five rarest under the per-release
guarantee, thousands of groups, the hard case for the estimator). The data user's commands read the workspace folder as
they read a public copy (the same files: releases, register, hierarchies, public key).

Three measurements, each in a fresh process so its peak resident memory is its own:

* ``open``: :func:`serialpub.analysis.reader.open_releases` (every signature, the hash
  chain, the checksums, the register read and coded) and resolving release 1 against the
  register (:meth:`PublishedRelease.joint`);
* ``queries``: 5,000 random range-count queries (qd 3, selectivity 0.05, seed 0, drawn on
  the snapshot as drafting draws them) answered by :func:`anonymizer.joint.joint_answers`
  on the resolved release: estimate, certain bounds and paper 001's uniform estimate. The
  clock covers the answers only; the mean relative error against the snapshot's true
  counts is printed so two versions of the code can be checked to agree;
* ``expand``: the command ``serialpub expand WORKSPACE --out DIR --release 1`` as a data
  user runs it (verification and register included), wall time and peak RSS.

Usage::

    uv run python benchmarks/bench_data_user.py [--register 5000000] [--records 1000000] [--variant localized]

Writes ``benchmarks/out/data_user-<variant>.json``.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from machine_info import machine

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
QUERIES = 5_000


def _rss_gib(who: int = resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / 2**20


def variant_workspace(snapshot: Path, variant: str) -> Path:
    """A copy of the scale workspace with the settings of ``variant`` (the register,
    hierarchies and snapshot linked, not copied); returns its snapshot.

    ``rarest5`` protects only the five occupations with the fewest records in the snapshot;
    ``localized`` also publishes under the localized guarantee (per-release ℓ-diversity,
    which leaks over a series: docs/threat-model.md), whose release keeps thousands of
    groups: the hard case for the estimator, whatever its privacy."""
    import pandas as pd

    base = snapshot.parent.parent
    root = OUT / f"{base.name}-{variant}"
    (root / "snapshots").mkdir(parents=True, exist_ok=True)
    for name in ("register.csv", "hierarchies"):
        if not (root / name).exists():
            (root / name).symlink_to(base / name)
    linked = root / "snapshots" / snapshot.name
    if not linked.exists():
        linked.symlink_to(snapshot)
    counts = pd.read_csv(snapshot, usecols=["occupation"], dtype=str)["occupation"].value_counts()
    rare = sorted(counts.sort_values(kind="stable").index[:5])
    config = (base / "serialpub.yaml").read_text()
    config = config.replace("protected_values: all", f"protected_values: {json.dumps(rare)}")
    if variant == "localized":
        config = config.replace("\nguarantee: global", "\nguarantee: localized")
    (root / "serialpub.yaml").write_text(config)
    return linked


def prepare(n_register: int, n_records: int, variant: str = "all") -> Path:
    """The scale workspace (``all``: every occupation protected; else
    :func:`variant_workspace`) with release 1 published; returns its snapshot."""
    sys.path.insert(0, str(HERE))
    from bench_release import make_scale_workspace

    snapshot = make_scale_workspace(n_register, n_records)
    if variant != "all":
        snapshot = variant_workspace(snapshot, variant)
    root = snapshot.parent.parent
    published = root / "releases" / "adult" / "release-0001" / "data.parquet"
    state = root / "state.sqlite"
    marker = root / "release-0001-snapshot.txt"  # which snapshot release 1 is (the workspace serves several sizes)
    fresh = published.is_file() and state.is_file() and marker.is_file() and marker.read_text() == snapshot.name
    if not fresh:
        marker.unlink(missing_ok=True)
        subprocess.run(
            [sys.executable, str(HERE / "bench_release.py"), "_scale_one", "--root", str(snapshot)],
            check=True,
            capture_output=True,
            text=True,
        )
        marker.write_text(snapshot.name)
    return snapshot


def measure_open_and_queries(snapshot: Path) -> dict[str, float]:
    """``open`` and ``queries`` (one process)."""
    import numpy as np

    from anonymizer.joint import joint_answers
    from anonymizer.queries import draw_workload
    from anonymizer.workload import QueryRanges
    from serialpub.analysis.reader import open_releases
    from serialpub.io.inputs import read_csv

    root = snapshot.parent.parent
    t = time.perf_counter()
    copy = open_releases(root)
    release = copy.release(1)
    t_verified = time.perf_counter()
    joint = release.joint()
    t_open = time.perf_counter()
    raw = read_csv(snapshot, "snapshot")
    sensitive = release.sensitive
    workload = draw_workload(
        raw[[*release.qis, sensitive]],
        {q: release.hierarchies[q] for q in release.qis},
        sensitive,
        n_queries=QUERIES,
        qd=3,
        selectivity=0.05,
        seed=0,
    )
    ranges = workload.ranges
    text = QueryRanges(ranges.qi, tuple(str(v) for v in ranges.sensitive_values), ranges.sensitive)
    t_q = time.perf_counter()
    answers = joint_answers(joint, text)
    t_done = time.perf_counter()
    actual = workload.actual.astype(np.float64)
    inside = bool(((answers.lower <= actual) & (actual <= answers.upper)).all())
    return {
        "records": len(raw),
        "groups": int(joint.group_nodes.shape[0]),
        "register_cells": int(joint.cell_counts.size),
        "open_verify_s": t_verified - t,
        "resolve_s": t_open - t_verified,
        "queries": QUERIES,
        "queries_s": t_done - t_q,
        "mean_joint_error": float((np.abs(actual - answers.estimate) / actual).mean()),
        "mean_uniform_error": float((np.abs(actual - answers.uniform) / actual).mean()),
        "true_counts_within_bounds": inside,
        "peak_rss_gib": _rss_gib(),
    }


def measure_expand(snapshot: Path) -> dict[str, float]:
    """``expand``: the command in a child process, its wall time and peak RSS."""
    root = snapshot.parent.parent
    out = OUT / "expanded"
    shutil.rmtree(out, ignore_errors=True)
    exe = Path(sys.executable).with_name("serialpub")
    t = time.perf_counter()
    subprocess.run([str(exe), "expand", str(root), "--out", str(out), "--release", "1"], check=True)
    wall = time.perf_counter() - t
    import pyarrow.parquet as pq

    table = out / "release-0001.parquet"
    return {
        "expand_s": wall,
        "expand_peak_rss_gib": _rss_gib(resource.RUSAGE_CHILDREN),
        "expand_rows": pq.ParquetFile(table).metadata.num_rows,
        "expand_mib": table.stat().st_size / 2**20,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--register", type=int, default=5_000_000)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument(
        "--variant",
        choices=["all", "rarest5", "localized"],
        default="localized",
        help="the release's settings (see variant_workspace); localized has the most groups",
    )
    ap.add_argument("--part", choices=["queries", "expand"], help=argparse.SUPPRESS)
    ap.add_argument("--snapshot", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    if args.part == "queries":
        print(json.dumps(measure_open_and_queries(args.snapshot)))
        return
    if args.part == "expand":
        print(json.dumps(measure_expand(args.snapshot)))
        return
    snapshot = prepare(args.register, args.records, args.variant)
    result: dict[str, object] = {
        "machine": machine(), "register": args.register, "records": args.records, "variant": args.variant,
    }  # fmt: skip
    for part in ("queries", "expand"):  # each in its own process: its own peak memory
        proc = subprocess.run(
            [sys.executable, __file__, "--part", part, "--snapshot", str(snapshot)],
            check=True,
            capture_output=True,
            text=True,
        )
        result.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    (OUT / f"data_user-{args.variant}.json").write_text(json.dumps(result, indent=2))
    for k, v in result.items():
        if k != "machine":
            print(f"{k:>28}: {v:.3f}" if isinstance(v, float) else f"{k:>28}: {v}")


if __name__ == "__main__":
    main()
