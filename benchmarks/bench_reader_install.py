"""The reader's install against the publisher's: size, packages, import time and the wall
time of a query (docs/benchmarks.md, "Installing the reader").

Usage::

    uv run python benchmarks/bench_reader_install.py COPY [--out benchmarks/out/reader-install] [--repeat 5]

Makes two virtual environments under ``--out`` with the system's ``python3`` and pip, from
PyPI (kept for the next run): ``reader`` with ``pip install REPO`` (the documented reader
install, docs/data-users.md) and ``publisher`` with ``pip install REPO[publisher]`` (what
``pip install serialpub`` installed before the publisher's packages became an extra). For
each: its size on disk, its packages, the cumulative import time of ``serialpub.cli``
(``python -X importtime``), the wall time of ``serialpub query --help`` and of
``serialpub query COPY --json`` on a public copy, medians over ``--repeat`` runs, and which
of the publisher's modules the query imported (none, in both).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from serialpub.cli.app import PUBLISHER_MODULES  # noqa: E402


def _size_mib(folder: Path) -> float:
    """Allocated size, as du counts it."""
    total = 0
    for base, _, files in os.walk(folder):
        for name in files:
            path = Path(base) / name
            if not path.is_symlink():
                total += path.stat().st_blocks * 512
    return total / 2**20


def _install(venv: Path, spec: str) -> float | None:
    """Make the environment unless it exists; the install's wall seconds, or None if kept."""
    if (venv / "bin" / "serialpub").exists():
        return None
    start = time.perf_counter()
    subprocess.run(["python3", "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", spec], check=True)
    return time.perf_counter() - start


def _wall(cmd: list[str], cwd: Path, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _imports(python: Path, args: list[str], cwd: Path) -> tuple[float, list[str]]:
    """The cumulative import time of serialpub.cli (s) and the publisher's modules imported."""
    done = subprocess.run([str(python), "-X", "importtime", *args], cwd=cwd, check=True, capture_output=True, text=True)
    cli, publisher = 0.0, set()
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|(\s*)(\S+)$", line)
        if match is None:
            continue
        name = match.group(3)
        if name == "serialpub.cli":
            cli = int(match.group(1)) / 1e6
        if name.partition(".")[0] in PUBLISHER_MODULES:
            publisher.add(name.partition(".")[0])
    return cli, sorted(publisher)


def measure(venv: Path, spec: str, copy: Path, repeat: int) -> dict[str, object]:
    installed = _install(venv, spec)
    python, serialpub = venv / "bin" / "python", venv / "bin" / "serialpub"
    frozen = subprocess.run(
        [str(venv / "bin" / "pip"), "list", "--format=freeze"], check=True, capture_output=True, text=True
    ).stdout.split()
    packages = [p for p in frozen if p.split("==")[0].lower() not in {"pip", "setuptools", "serialpub"}]
    cli_imports = [_imports(python, ["-c", "import serialpub.cli"], copy)[0] for _ in range(repeat)]
    _, query_publisher = _imports(python, ["-m", "serialpub.cli", "query", ".", "--json"], copy)
    return {
        "install_s": installed,
        "size_mib": round(_size_mib(venv)),
        "packages": len(packages),
        "import_serialpub_cli_s": round(statistics.median(cli_imports), 3),
        "query_help_wall_s": round(_wall([str(serialpub), "query", "--help"], copy, repeat), 2),
        "query_wall_s": round(_wall([str(serialpub), "query", ".", "--json"], copy, repeat), 2),
        "publisher_modules_imported_by_query": query_publisher,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("copy", type=Path, help="a public copy made --with-register")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out" / "reader-install")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = {
        "reader": measure(args.out / "reader", str(ROOT), args.copy.resolve(), args.repeat),
        "publisher": measure(args.out / "publisher", f"{ROOT}[publisher]", args.copy.resolve(), args.repeat),
    }
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
