"""The learning adversary's audit (``serialpub audit --learners all``): its figures and time
per learner on published workspaces, and the learner stage alone on registers with more
distinct QI combinations.

For each workspace: the audit without learners and with all of them (with
``<workspace>/snapshots`` when it exists, so the report is calibrated), and one table row
per workspace (groups per release, the charge's max, each learner's max P', pairs above
1/ℓ, the true ones among them and seconds), as docs/threat-model.md ("The learning
adversary") cites it.

The learners' work is per register cell (distinct QI combination) and per candidate pair,
so their time grows with the cells, not the individuals: the scale workspaces of
``bench_scaling.py`` resample Adult rows and keep Adult's cells at any register size.
``--tile k`` therefore also times the learner stage on the first workspace's series with
every cell repeated k times (k times the cells, candidate pairs and serial cells; each
region's individuals and records multiplied by k, so the charges stay the same), the
cost of a register with k times as many distinct combinations.

``--report NAMES`` times instead what every release report adds
(:mod:`serialpub.workflow.learning`, the ``report.learners`` setting): per release t of
each workspace (``--releases``: which ones, default all), reading the tables of releases
1..t, resolving them against the register and running the charge and the learners NAMES,
in wall and CPU seconds (the workspace's register read once beforehand, as the publisher
holds it), with the figures the report would show.

Usage::

    uv run python benchmarks/bench_learners.py /tmp/l-demo /tmp/l-rare --tile 1 5 25
    uv run python benchmarks/bench_learners.py /tmp/l-demo --report nb            # per release of the demo
    uv run python benchmarks/bench_learners.py SCALE_WS --report nb --releases 2  # release 2 at 1M/5M
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from anonymizer.learners.core import LEARNERS, LearnerSeries, Release, Version, posteriors
from serialpub.analysis.audit import audit_workspace


def peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def groups_per_release(ws: Path) -> str:
    counts = [
        json.loads(m.read_text(encoding="utf-8")).get("groups")
        for m in sorted((ws / "releases").glob("*/release-*/manifest.json"))
    ]
    known = [c for c in counts if isinstance(c, int)]
    return f"{min(known):,}-{max(known):,}" if known else "?"


def tiled(series: LearnerSeries, k: int) -> LearnerSeries:
    """``series`` with every cell repeated k times (see the module docstring)."""
    versions = [Version(np.tile(v.leaves, (k, 1)), np.tile(v.counts, k)) for v in series.versions]
    releases = []
    for r in series.releases:
        c = series.versions[r.version].counts.size
        cell = np.concatenate([r.cell + i * c for i in range(k)])
        serial = np.concatenate([np.where(r.serial >= 0, r.serial + i * c, -1) for i in range(k)])
        releases.append(Release.of(r.version, cell, np.tile(r.group, k), r.candidates * k, r.counts * k, serial))
    n = series.counts.size * k
    return LearnerSeries(
        series.qis,
        series.vocab,
        series.domain,
        series.values,
        series.ell,
        versions,
        releases,
        pd.Index(np.arange(n).astype(str)),
        np.arange(n),
        np.arange(n),
        np.tile(series.counts, k),
        None,
    )


def report_cost(ws: Path, names: list[str], which: list[int] | None) -> None:
    """Per release t of ``ws``: the release report's learner step on releases 1..t, timed."""
    from serialpub.config import load_config
    from serialpub.io import release_files
    from serialpub.workflow.learning import series_learners
    from serialpub.workflow.publisher import Publisher

    publisher = Publisher(load_config(ws))
    inputs, register = publisher.inputs, publisher.register_reader
    t0 = time.perf_counter()
    cells = register.register.keys.counts.size  # read and code the register before the clock starts
    print(f"{ws}: register {len(register.register.ids):,} individuals, {cells:,} cells, read in "
          f"{time.perf_counter() - t0:.1f} s; learners {', '.join(names)}", flush=True)  # fmt: skip
    seqs = [r.seq for r in publisher.series.store.published(publisher.ws.config.dataset)]
    for t in which or seqs:
        wall, cpu = time.perf_counter(), time.process_time()
        tables = [release_files.read_release(publisher.ws.dataset_dir / release_files.release_name(s))[1]
                  for s in seqs if s <= t]  # fmt: skip
        read_s = time.perf_counter() - wall
        report = series_learners(tables, inputs, register, float(publisher.ws.config.ell), names)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        fits = ", ".join(f"{f.name} {f.max_p:.4f} ({f.above} > 1/ℓ, {f.seconds:.2f} s)" for f in report.learners)
        print(f"  release {t}: {wall:.2f} s wall ({read_s:.2f} s reading {len(tables)} tables), {cpu:.2f} s CPU, "
              f"peak RSS {peak_gib():.2f} GiB; {fits}", flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workspaces", nargs="+", type=Path)
    ap.add_argument(
        "--tile", type=int, nargs="*", default=[], help="time the learner stage with cells repeated k times"
    )
    ap.add_argument("--report", help="time the release report's learners (comma-separated names) per release")
    ap.add_argument("--releases", type=int, nargs="*", default=None, help="with --report: these releases only")
    args = ap.parse_args()
    if args.report:
        for ws in args.workspaces:
            report_cost(ws, [n for n in LEARNERS if n in args.report.split(",")], args.releases)
        return
    first: LearnerSeries | None = None
    for ws in args.workspaces:
        snapshots = ws / "snapshots" if (ws / "snapshots").is_dir() else None
        t = time.perf_counter()
        plain = audit_workspace(ws, snapshots=snapshots)
        audit_s = time.perf_counter() - t
        t = time.perf_counter()
        result = audit_workspace(ws, snapshots=snapshots, learners=LEARNERS)
        total_s = time.perf_counter() - t
        report = result.learners
        assert report is not None
        first = first or report.inputs
        print(
            f"{ws}: {len(result.releases)} releases, groups {groups_per_release(ws)}, audit {audit_s:.1f} s, "
            f"with the learners {total_s:.1f} s, peak RSS {peak_gib():.2f} GiB, "
            f"cells {sum(v.counts.size for v in report.inputs.versions):,}, verdict max p {plain.max_p:.4f}"
        )
        for f in report.learners:
            true = "" if f.above_true is None else f", true {f.above_true}"
            figures = f"max P' {f.max_p:.4f} (charge {f.max_uniform:.4f}), > 1/ℓ {f.above}{true}"
            print(f"  {f.name:<15} {figures}, {f.seconds:.1f} s")
    for k in args.tile:
        assert first is not None
        series = tiled(first, k)
        cells = sum(v.counts.size for v in series.versions)
        t = time.perf_counter()
        times = {}
        for name, _, _, _ in posteriors(series, LEARNERS):
            now = time.perf_counter()
            times[name] = now - t
            t = now
        shown = ", ".join(f"{n} {s:.1f} s" for n, s in times.items())
        print(f"tile {k}: {cells:,} cells: {shown}; total {sum(times.values()):.1f} s", flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
