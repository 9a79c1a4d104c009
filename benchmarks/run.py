"""One entry point for the benchmarks: lists them, or runs one with its own arguments.

Usage::

    uv run python benchmarks/run.py                  # the list: script, figure, docs page, time
    uv run python benchmarks/run.py NAME [ARGS...]   # runs benchmarks/NAME.py with ARGS

``NAME`` is a script's name with or without ``bench_`` and ``.py`` (``scaling``,
``bench_scaling``, ``bench_scaling.py``). ``benchmarks/README.md`` holds the same table. A
script runs in its own process with this interpreter, from the repository's root, so that
its outputs land where its docstring says (``benchmarks/out/``).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


@dataclass(frozen=True)
class Benchmark:
    """What a script measures, where the docs cite it, and about how long it runs."""

    figure: str
    page: str
    time: str


#: every script of benchmarks/ but this runner and the machine_info helper; times are for
#: the 2-core machine of docs/benchmarks.md, at the script's default arguments
BENCHMARKS: dict[str, Benchmark] = {
    "ab_steps": Benchmark(
        "one run of ab_release.sh: release 2's seconds per step, peaks, data.parquet and report sha256",
        "testing.md",
        "5 min",
    ),
    "bench_airflow_overhead": Benchmark(
        "what an Airflow run adds to one release over the command line", "benchmarks.md", "5 min"
    ),
    "bench_anonymize": Benchmark("the anonymizing step of one large release, repeated", "benchmarks.md", "2 min"),
    "bench_audit": Benchmark("`serialpub audit` on the demo and the scale workspaces", "benchmarks.md", "5 min"),
    "bench_floor": Benchmark(
        "the floor of a release at 1M/5M: one vectorized pass over the register and the snapshot", "scaling.md", "3 min"
    ),
    "bench_learners": Benchmark(
        "the learning adversary's audit: figures and time per learner; the learner stage on k times the cells",
        "threat-model.md",
        "10 min",
    ),
    "learner_guarantee": Benchmark(
        "the learners against the guarantee on four demo series (other seeds, protected sets), with utility",
        "threat-model.md",
        "40 min",
    ),
    "bench_changing_register": Benchmark(
        "time and storage of a register that changes between releases", "benchmarks.md", "15 min"
    ),
    "bench_check_parts": Benchmark(
        "release contract suite and `check_generalizes`, rows against distinct values", "benchmarks.md", "2 min"
    ),
    "bench_csv_blocks": Benchmark("parsing the register's CSV by block size", "benchmarks.md", "2 min"),
    "bench_dag_parse": Benchmark("parse time of the release DAG file", "benchmarks.md", "1 min"),
    "bench_data_user": Benchmark(
        "verify, 5,000 queries and `expand` of one 1M-record release over the 5M register", "benchmarks.md", "5 min"
    ),
    "bench_distinct_suites": Benchmark(
        "input suites on distinct values against row by row", "validation.md, benchmarks.md", "3 min"
    ),
    "bench_draft_parts": Benchmark(
        "parts of drafting: coding, published table, group rows, statistics file", "benchmarks.md", "2 min"
    ),
    "bench_entropy_width": Benchmark(
        "the `widest` rule with an entropy width (an experiment not kept)", "anonymization.md", "10 min"
    ),
    "bench_input_suites": Benchmark("snapshot and register input suites at 1M / 5M rows", "benchmarks.md", "2 min"),
    "bench_lookups": Benchmark("per-process costs of a release, old way against new", "benchmarks.md", "2 min"),
    "bench_measures": Benchmark("time and traced peak memory of the utility measures", "benchmarks.md", "2 min"),
    "bench_memory_parts": Benchmark("resident memory inside the anonymizer's parts", "benchmarks.md", "10 min"),
    "bench_memory_steps": Benchmark("peak resident memory per step of one release", "benchmarks.md", "5 min"),
    "bench_plan": Benchmark(
        "`serialpub plan`: one candidate over 4 releases of 1M records over the 5M register", "benchmarks.md", "5 min"
    ),
    "bench_query_targets": Benchmark(
        "`serialpub query` answer times: first and cached second query, the 14 x 2 cross-tab, 5,000 queries at 1M/5M",
        "benchmarks.md, data-users.md",
        "3 min",
    ),
    "bench_queries": Benchmark("the 5,000-query utility measure, raw against release", "benchmarks.md", "1 min"),
    "bench_query_workload": Benchmark("the query workload of one large release", "benchmarks.md", "2 min"),
    "bench_utility_parts": Benchmark(
        "release 2's query workload and utility parts alone at 1M/5M, CPU seconds and a digest of their figures",
        "scaling.md",
        "8 min",
    ),
    "bench_reader_install": Benchmark(
        "size, packages, import and query time of the reader's install against the publisher's",
        "benchmarks.md",
        "5 min",
    ),
    "bench_register_growth": Benchmark(
        "peak memory and time per register individual, 5M and 50M", "scaling.md, benchmarks.md", "30 min"
    ),
    "bench_release": Benchmark("publishing the demo series and one large release", "benchmarks.md", "15 min"),
    "bench_release_steps": Benchmark(
        "per-step seconds of consecutive releases in one process", "benchmarks.md", "5 min"
    ),
    "bench_release_suites": Benchmark("the release suites on a 1M-record draft", "benchmarks.md", "2 min"),
    "bench_release_table": Benchmark("building the release table's QI columns", "benchmarks.md", "1 min"),
    "bench_report": Benchmark("the release report of a 1M-record release", "reports.md, benchmarks.md", "5 min"),
    "bench_scaling": Benchmark(
        "time and peak memory against records and register size", "scaling.md, benchmarks.md", "35 min"
    ),
    "bench_collapse": Benchmark(
        "why a 1M/5M release stays coarse: the search's blocked splits per level; the noisy split test's groups",
        "anonymization.md",
        "1 min",
    ),
    "bench_search": Benchmark(
        "search time and groups of one release at scale", "anonymization.md, benchmarks.md", "2 min"
    ),
    "bench_sources": Benchmark("reading the register from CSV, Parquet and PostgreSQL", "benchmarks.md", "5 min"),
    "bench_split_rules": Benchmark(
        "query error of the split rules on the demo series", "anonymization.md, threat-model.md", "20 min"
    ),
    "bench_state": Benchmark("the state over 20 releases at a 5M register", "benchmarks.md", "30 min"),
    "bench_step_startup": Benchmark("what one workflow step pays before it starts", "benchmarks.md", "3 min"),
    "charged_refusals": Benchmark(
        "exact posteriors under public splits and charged refusals", "threat-model.md", "10 min"
    ),
    "compare_anonymize_history": Benchmark(
        "an older checkout's anonymizer against this one: same releases", "benchmarks.md", "5 min"
    ),
    "compare_joint": Benchmark(
        "an older revision's register-joint estimator against this one's, alternated", "benchmarks.md", "1 min"
    ),
    "compare_releases": Benchmark(
        "two workspaces' releases compared, timestamps and paths masked (no figure: a same-bytes check)",
        "benchmarks/README.md",
        "1 min",
    ),
    "estimators_table": Benchmark(
        "the three query-error estimators, baseline and gain on six demo series", "data-users.md", "20 min"
    ),
    "calibrate_errors": Benchmark(
        "coverage of the register-joint error figure's 90 % and 95 % intervals on demo series",
        "data-users.md",
        "1 min",
    ),
    "demo_utility": Benchmark(
        "utility and linkage figures of published demo series", "anonymization.md, benchmarks.md", "1 min"
    ),
    "experiments": Benchmark(
        "paper 004's Figures 6-9 on serialpub's anonymizer", "experiments.md, anonymization.md", "1-3 h"
    ),
    "residual_risk": Benchmark(
        "how far an adversary who knows the algorithm gets past the charge", "threat-model.md", "15 min"
    ),
}


def resolve(name: str) -> str:
    """The BENCHMARKS key of ``name`` (``scaling``, ``bench_scaling`` or ``bench_scaling.py``)."""
    stem = name.removesuffix(".py").removeprefix("benchmarks/")
    for key in (stem, f"bench_{stem}"):
        if key in BENCHMARKS:
            return key
    raise SystemExit(f"no benchmark {name!r}; run benchmarks/run.py without arguments for the list")


def listing() -> str:
    """The table, one line per script."""
    width = max(map(len, BENCHMARKS))
    lines = [f"{'script':<{width}}  {'time':>6}  figure (docs page)"]
    lines += [f"{k:<{width}}  {b.time:>6}  {b.figure} ({b.page})" for k, b in sorted(BENCHMARKS.items())]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "list"):
        print(__doc__.split("\n\n")[0])
        print(listing())
        return 0
    key = resolve(argv[0])
    script = HERE / f"{key}.py"
    if not script.is_file():
        raise SystemExit(f"{key}: listed but not in this checkout")
    return subprocess.call([sys.executable, str(script), *argv[1:]], cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
