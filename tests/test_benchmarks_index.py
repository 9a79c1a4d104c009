"""benchmarks/run.py and benchmarks/README.md list every benchmark script, and only those,
with a docs page that exists (benchmarks/README.md)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"

#: listed before the scripts exist (they arrive with the draft path's rebuild)
NOT_YET_ADDED = {"bench_data_user", "bench_plan"}


def _runner():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("benchmarks_run", BENCH / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def test_every_script_is_listed_once_by_the_runner_and_the_readme() -> None:
    run = _runner()
    scripts = {p.stem for p in BENCH.glob("*.py")} - {"run", "machine_info"}
    listed = set(run.BENCHMARKS)
    assert scripts - listed == set(), "scripts the runner does not list"
    assert listed - scripts <= NOT_YET_ADDED, "listed scripts that do not exist"
    readme = re.findall(r"^\| `(\w+)\.py` \|", (BENCH / "README.md").read_text(encoding="utf-8"), re.MULTILINE)
    assert sorted(readme) == sorted(listed)


def test_every_named_docs_page_exists_and_names_resolve() -> None:
    run = _runner()
    for name, bench in run.BENCHMARKS.items():
        for page in bench.page.split(", "):
            path = ROOT / page if "/" in page else ROOT / "docs" / page
            assert path.is_file(), (name, page)
    assert run.resolve("scaling") == run.resolve("bench_scaling.py") == "bench_scaling"
