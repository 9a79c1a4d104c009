"""Benchmark of the release report (serialpub/report) on a large release.

One snapshot of R records over a register of N individuals (the scale workspace of
``bench_release.py``: Adult rows resampled under fresh ids) is anonymized as release 1;
then each part of its report is timed as the pipeline runs it:

* utility figures (computed at draft time from the anonymizer's result),
* privacy figures (breach table recomputed from the published table and the register,
  distribution, budget, and every measure of ``anonymizer.measures``),
* rendering (plots and the HTML/JSON files).

Target: the report of a 1,000,000-record release within a minute (docs/reports.md).

Usage::

    uv run python benchmarks/bench_report.py [--register 5000000] [--records 1000000] [--k-prime 20]
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from bench_release import OUT, make_scale_workspace
from machine_info import machine

from anonymizer.release import History, SnapshotCodes, anonymize_history
from checks.breach import Draft, Population, PriorState, compute_breach
from serialpub.config import ReportConfig, load_config
from serialpub.io.manifest import Validation
from serialpub.report.privacy import PrivacyInputs, privacy_figures
from serialpub.report.render import measure_records, write_release_report
from serialpub.report.utility import utility_measures
from serialpub.workflow.measuring import query_settings
from serialpub.workflow.publisher import Publisher
from serialpub.workflow.release_record import new_manifest, set_measures


def _rss() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--register", type=int, default=5_000_000)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--k-prime", type=int, default=20)
    args = ap.parse_args()
    snapshot = make_scale_workspace(args.register, args.records)
    ws = load_config(snapshot.parent.parent)
    ws.config.k_prime = args.k_prime
    t = time.perf_counter()
    pub = Publisher(ws)
    snap = pub.check_inputs(snapshot, "bench").snapshot
    cfg = ws.config
    n_ind = len(pub.register.ids)
    history = History.empty(np.full(n_ind, float(cfg.ell)), len(pub.protected))
    record_set = pd.Index(pub.protected).get_indexer(pd.Index(snap.value)).astype(np.int64)
    hs = pub.search_hierarchies
    snapshot = SnapshotCodes(snap.individual, record_set, len(pub.protected))
    result = anonymize_history(pub.register.keys, snapshot, history, pub.params, hs, False, seed=1)
    table = pub.published_table(snap, result)
    setup = time.perf_counter() - t
    print(
        f"setup (register, snapshot, anonymize): {setup:.1f} s; {len(table):,} records in "
        f"{result.group_nodes.shape[0]:,} groups over {n_ind:,} register individuals"
    )

    timings: dict[str, float] = {}
    t = time.perf_counter()
    utility = utility_measures(
        result,
        pub.register.keys[snap.individual],
        hs,
        None,
        query_settings(cfg),
        pd.factorize(snap.value)[0].astype(np.int64),
    )
    timings["utility"] = time.perf_counter() - t

    t = time.perf_counter()
    draft = Draft(table, pub.qis, cfg.sensitive, pub.read_hierarchies(table))
    breach = compute_breach(  # shared with the guarantee suite in the pipeline (serialpub.workflow.validating)
        draft,
        Population(pub.register.keys, pub.register.ids.to_numpy()),
        PriorState(pub.protected, history.survival, cfg.ell, history.class_of),
        per_unit=True,
        unit_classes=history.class_of,
    )
    timings["breach"] = time.perf_counter() - t
    t = time.perf_counter()
    inputs = PrivacyInputs(
        draft=draft,
        breach=breach,
        history=history,
        params=pub.params,
        presence=False,
        protected=pub.protected,
        sensitive_hierarchy=pub.inputs.sensitive_hierarchy,
        sensitive_domain=pub.sensitive_domain or [],
    )
    figures = privacy_figures(inputs, ReportConfig())
    timings["privacy"] = time.perf_counter() - t

    manifest = new_manifest(cfg, pub.inputs, pub.register_reader, 1, "bench", None, result)
    set_measures(cfg, manifest, None, utility)
    manifest.validation = Validation(success=True, sha256="-", global_guarantee_checked=True, suites={})
    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        sums = write_release_report(Path(tmp), manifest, "benchmark", figures, False)
        size = (Path(tmp) / "report.html").stat().st_size
    timings["render"] = time.perf_counter() - t
    total = sum(timings.values())
    for name, seconds in timings.items():
        print(f"{name:8s} {seconds:7.2f} s")
    print(f"report   {total:7.2f} s (target ≤ 60 s); report.html {size / 1024:.0f} KiB; peak RSS {_rss():.2f} GiB")
    for m in figures.measures + utility:
        print(f"  {m.name}: {m.value if m.value is not None else 'not computed: ' + m.note}")
    out = {
        "register": n_ind, "records": len(table), "groups": int(result.group_nodes.shape[0]),
        "timings_s": timings, "report_s": total, "peak_rss_gib": _rss(), "html_bytes": size, "sha256": sums,
        "measures": measure_records(figures.measures + utility), "machine": machine(),
    }  # fmt: skip
    OUT.mkdir(exist_ok=True)
    (OUT / f"report-{args.records}.json").write_text(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
