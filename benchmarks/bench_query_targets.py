"""The data user's answer times, with the real command line in fresh processes
(docs/data-users.md, docs/benchmarks.md "Answer times of `serialpub query`").

On the demo's public copy (``serialpub demo`` then ``serialpub public-copy --with-register``,
built under ``benchmarks/out/query-targets/`` when ``--copy`` is not given), with an empty
verdict folder (``SERIALPUB_CACHE_DIR``) at the start:

* ``first query``: the docs' example (``--where "age=[30,40]" --where sex=Female --sensitive
  Exec-managerial,Sales``, all 20 releases), which verifies the copy and leaves its verdict;
* ``second query``: the same again (the verdict read from the cache), and the same on one
  release (``--release 20``);
* ``--no-cache``: the same with the whole verification, for comparison;
* ``cross-tab 14 x 2``: occupation × sex (the 14 occupations, the sensitive attribute,
  crossed with the two sexes: 28 queries in one ``--queries`` file) over the 20 releases;
* ``imports``: the interpreter with the modules a query imports, and nothing else; ``floor``:
  the interpreter with numpy, pandas, pyarrow, typer (and the pydantic adapters it builds a
  command's parameters with) and rich only, the floor of any query in a fresh process;
* before the cross-tab is timed, the example and the cross-tab (``--json``) are run with the
  cache (verdict and arrays) and with ``--no-cache``: the script stops unless they print the
  same.

With ``--scale WORKSPACE`` (the scaling study's 1M-record release over the 5M register:
``bench_scaling.py``, docs/benchmarks.md "National scale"), a public copy of it
(``public-copy --with-register``) answers 5,000 random queries in one ``--queries`` file
on release 1 (``--json``), first and second.

Each figure is the wall time of the subprocess and its CPU time (user + system); the load
average is printed beside them (the 2-core machine is shared).

Usage::

    uv run python benchmarks/bench_query_targets.py [--copy DIR] [--scale WORKSPACE] [--repeat 3]

Writes ``benchmarks/out/query-targets.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from machine_info import machine

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
CLI = [sys.executable, "-m", "serialpub.cli"]
EXAMPLE = ["--where", "age=[30,40]", "--where", "sex=Female", "--sensitive", "Exec-managerial,Sales"]
IMPORTS = "import serialpub.cli, serialpub.analysis.reader, serialpub.analysis.querying, serialpub.analysis.batch"
#: what any query imports before serialpub's own code: the floor of a query in a fresh process
#: (typer builds its parameters with pydantic when a command runs: its adapters are imported too)
FLOOR = "import numpy, pandas, pyarrow.parquet, typer, typer._adapters, rich.table"


def run(args: list[str], cwd: Path, env: dict[str, str]) -> dict[str, float]:
    """Wall and CPU seconds of one subprocess; raises when it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    t = time.perf_counter()
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "load": round(load, 2)}


def same(cwd: Path, env: dict[str, str], argv: list[str]) -> None:
    """Exits unless ``argv`` prints the same with the cache (verdict and arrays) as with
    ``--no-cache``."""
    cached, fresh = (
        subprocess.run(a, cwd=cwd, env=env, capture_output=True, text=True) for a in (argv, [*argv, "--no-cache"])
    )
    if cached.returncode or fresh.returncode or cached.stdout != fresh.stdout:
        raise SystemExit(
            f"{' '.join(argv)}: the cached answer differs from the one made afresh\n{cached.stderr[-2000:]}"
        )
    print(f"same output with and without the cache: {' '.join(argv[3:])}", flush=True)


def demo_copy() -> Path:
    """The demo's public copy under ``out/query-targets/``, made once."""
    base = OUT / "query-targets"
    copy = base / "received"
    if not (copy / "releases").is_dir():
        if not (base / "demo" / "serialpub.yaml").is_file():
            subprocess.run([*CLI, "demo", "--out", str(base / "demo")], check=True, capture_output=True)
        shutil.rmtree(copy, ignore_errors=True)
        subprocess.run(
            [*CLI, "public-copy", "--config", str(base / "demo"), "--out", str(copy), "--with-register"],
            check=True,
            capture_output=True,
        )
    return copy


def crosstab_file(folder: Path) -> Path:
    """occupation × sex: the 14 occupations of the demo crossed with the two sexes."""
    occupations = [
        line.split(";")[0]
        for line in (folder / "hierarchies" / "occupation.csv").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    lines = [f"sex={s} AND occupation={o}" for o in occupations for s in ("Female", "Male")]
    path = Path(tempfile.mkdtemp()) / "crosstab.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"cross-tab: {len(occupations)} occupations x 2 sexes = {len(lines)} queries")
    return path


def random_queries(copy: Path, n: int, seed: int = 0) -> Path:
    """``n`` random lines of one to three conditions: an age range and leaves of the
    categorical QIs of ``hierarchies/`` (the register's own values)."""
    rng = np.random.default_rng(seed)
    leaves = {}
    for path in sorted((copy / "hierarchies").glob("*.csv")):
        if path.stem in ("age", "diagnosis", "occupation"):
            continue
        # a leaf such as "<=50K" would read as a range: left out
        leaves[path.stem] = [
            leaf
            for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and not (leaf := line.split(";")[0]).startswith(("<", ">", "["))
        ]
    names = sorted(q for q, values in leaves.items() if values)
    lines = []
    for _ in range(n):
        lo = int(rng.integers(17, 80))
        parts = [f"age=[{lo},{lo + int(rng.integers(0, 15))}]"]
        for q in rng.choice(names, size=int(rng.integers(0, 3)), replace=False):
            parts.append(f"{q}={rng.choice(leaves[str(q)])}")
        lines.append(" AND ".join(parts))
    path = Path(tempfile.mkdtemp()) / "queries.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copy", type=Path, help="a public copy of the demo (default: made under benchmarks/out)")
    ap.add_argument("--scale", type=Path, help="the scaling study's workspace with release 1 published")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each warm figure; all are printed")
    ap.add_argument("--scale-only", action="store_true", help="with --scale: leave the demo's figures out")
    args = ap.parse_args()
    result: dict[str, object] = {"machine": machine(), "demo": {}, "scale": {}}
    copy = (args.copy or demo_copy()).resolve() if not args.scale_only else Path.cwd()
    verdicts = Path(tempfile.mkdtemp(prefix="verdicts-"))
    env = {**os.environ, "SERIALPUB_CACHE_DIR": str(verdicts), "OPENBLAS_NUM_THREADS": "1"}
    demo: dict[str, object] = result["demo"]  # type: ignore[assignment]

    def measure(label: str, argv: list[str], cwd: Path, into: dict[str, object], repeat: int) -> None:
        runs = [run(argv, cwd, env) for _ in range(repeat)]
        into[label] = runs
        shown = ", ".join(f"{r['wall_s']:.2f} s ({r['cpu_s']:.2f} s CPU, load {r['load']})" for r in runs)
        print(f"{label:<38} {shown}", flush=True)

    if not (args.scale_only and args.scale is not None):
        measure("floor: numpy, pandas, pyarrow, typer", [sys.executable, "-c", FLOOR], copy, demo, args.repeat)
        measure("imports only", [sys.executable, "-c", IMPORTS], copy, demo, args.repeat)
        measure("first query (verifies, empty cache)", [*CLI, "query", ".", *EXAMPLE], copy, demo, 1)
        measure("second query (verdict cached)", [*CLI, "query", ".", *EXAMPLE], copy, demo, args.repeat)
        measure(
            "second query, --release 20", [*CLI, "query", ".", *EXAMPLE, "--release", "20"], copy, demo, args.repeat
        )
        measure("query --no-cache", [*CLI, "query", ".", *EXAMPLE, "--no-cache"], copy, demo, args.repeat)
        same(copy, env, [*CLI, "query", ".", *EXAMPLE, "--json"])
        table = crosstab_file(copy)
        same(copy, env, [*CLI, "query", ".", "--queries", str(table), "--json"])
        measure("cross-tab 14 x 2, 20 releases", [*CLI, "query", ".", "--queries", str(table)], copy, demo, args.repeat)
        measure(
            "cross-tab 14 x 2, 20 releases, --json",
            [*CLI, "query", ".", "--queries", str(table), "--json"],
            copy,
            demo,
            args.repeat,
        )
    if args.scale is not None:
        scale: dict[str, object] = result["scale"]  # type: ignore[assignment]
        public = OUT / "query-targets" / "scale-copy"
        if not (public / "releases").is_dir():
            t = time.perf_counter()
            subprocess.run(
                [*CLI, "public-copy", "--config", str(args.scale), "--out", str(public), "--with-register"],
                check=True,
                capture_output=True,
            )
            print(f"public copy of {args.scale}: {time.perf_counter() - t:.1f} s")
        queries = random_queries(public, 5_000)
        argv = [*CLI, "query", ".", "--queries", str(queries), "--release", "1", "--json"]
        measure("5,000 queries at 1M/5M, first", argv, public, scale, 1)
        measure("5,000 queries at 1M/5M, second", argv, public, scale, args.repeat)
    OUT.mkdir(exist_ok=True)
    (OUT / "query-targets.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    shutil.rmtree(verdicts, ignore_errors=True)


if __name__ == "__main__":
    main()
