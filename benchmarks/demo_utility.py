"""Utility and linkage figures of a published demo series (issue: releases people can use).

Reads a workspace's published releases (each ``report.json`` and ``manifest.json``) and
its state, and prints per series: releases published, groups per release (median and
range), the average relative query error (mean and median over releases of each release's
mean; and the median of the register-weighted (marginal) and register-joint estimators', the
histogram-only baseline's and the joint gain over it), the discernibility metric
C_DM and the normalized certainty penalty NCP (mean over
releases), the largest breach probability; then, from the statistics file after the last
release, the distribution of linked-release counts over the (register individual,
protected value) pairs that were linked at least once, and the largest count. With
``--learners NAMES`` (comma-separated, of ``anonymizer.learners.core.LEARNERS``), also each
learner's largest posterior P' after the last release, its pairs above 1/ℓ and the value of
the pair attaining it, fitted on every published release as the release report and
``serialpub audit --learners`` fit them (docs/threat-model.md, "The learning adversary").

Usage::

    .venv/bin/serialpub demo --out /tmp/ws [options]
    .venv/bin/python benchmarks/demo_utility.py /tmp/ws [/tmp/other-ws ...] [--learners nb,logistic-pairs]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from serialpub.config import load_config  # noqa: E402
from serialpub.workflow.publisher import Publisher  # noqa: E402


def learner_figures(publisher: Publisher, names: Sequence[str]) -> dict[str, dict[str, object]]:
    """Per learner of ``names`` (and ``uniform``, the charge): max P' after the last
    release, its pairs above 1/ℓ, the value of the pair attaining it and the seconds of the
    whole step (reading, resolving, fitting), by the release report's own code."""
    from serialpub.io import release_files
    from serialpub.workflow.learning import series_learners

    ws = publisher.ws
    t = time.perf_counter()
    seqs = [r.seq for r in publisher.series.store.published(ws.config.dataset)]
    tables = [release_files.read_release(ws.dataset_dir / release_files.release_name(s))[1] for s in seqs]
    report = series_learners(tables, publisher.inputs, publisher.register_reader, float(ws.config.ell), names)
    seconds = time.perf_counter() - t
    return {
        f.name: {"max_p": f.max_p, "above": f.above, "max_value": f.max_value, "seconds": seconds}
        for f in report.learners
    }


def measure(root: Path, learners: Sequence[str] = ()) -> dict[str, object]:
    ws = load_config(root)
    releases = sorted(ws.dataset_dir.glob("release-*"))
    rows = []
    for folder in releases:
        manifest = json.loads((folder / "manifest.json").read_text())
        utility = {m["name"]: m["value"] for m in json.loads((folder / "report.json").read_text())["utility"]}
        rows.append(
            {
                "groups": manifest["groups"],
                "error": utility["average relative error of range-count queries"],
                # absent from releases made before the register-weighted estimator existed
                "weighted": utility.get("average relative error of range-count queries, register-weighted"),
                # absent from releases made before the register-joint estimator existed
                "joint": utility.get("average relative error of range-count queries, register-joint"),
                "baseline": utility.get("average relative error of range-count queries, histogram-only baseline"),
                "gain": utility.get("gain over the histogram-only baseline"),
                "cdm": utility["discernibility metric C_DM"],
                "ncp": utility["normalized certainty penalty NCP"],
            }
        )
    publisher = Publisher(ws)
    history = publisher.statistics.load(
        publisher.store.latest_statistics(ws.config.dataset), np.full(len(publisher.register.ids), ws.config.ell)
    )
    linked = history.linked[history.class_of]  # (N, V)
    counts = np.bincount(linked[linked > 0].ravel())
    groups = [r["groups"] for r in rows]
    return {
        "workspace": str(root),
        "algorithm": ws.config.algorithm,
        "strategy": ws.config.strategy,
        "releases": len(rows),
        "groups_median": statistics.median(groups),
        "groups_range": [min(groups), max(groups)],
        "error_mean": statistics.mean(r["error"] for r in rows),
        "error_median": statistics.median(r["error"] for r in rows),
        "weighted_error_median": (
            statistics.median(r["weighted"] for r in rows) if all(r["weighted"] is not None for r in rows) else None
        ),
        **{
            f"{k}_median": (statistics.median(r[k] for r in rows) if all(r[k] is not None for r in rows) else None)
            for k in ("joint", "baseline", "gain")
        },
        "cdm_mean": statistics.mean(r["cdm"] for r in rows),
        "ncp_mean": statistics.mean(r["ncp"] for r in rows),
        "max_p": history.max_breach(),
        "linked_pairs": int(counts.sum()),
        "linked_releases_max": int(counts.size - 1),
        "linked_releases_quartiles": [float(q) for q in np.percentile(linked[linked > 0], [25, 50, 75])],
        "linked_releases_histogram": {int(k): int(v) for k, v in enumerate(counts) if v},
        **({"learners": learner_figures(publisher, learners)} if learners else {}),
    }


def main() -> int:
    args = sys.argv[1:]
    learners: list[str] = []
    if "--learners" in args:
        at = args.index("--learners")
        learners = args[at + 1].split(",")
        args = args[:at] + args[at + 2 :]
    for arg in args:
        print(json.dumps(measure(Path(arg), learners)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
