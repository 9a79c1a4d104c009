"""What one workflow step pays before it starts, on a 5,000,000-person register.

Every Airflow task builds a :class:`serialpub.workflow.publisher.Publisher`. Drafting and
validating need the register (read, parsed, integer-coded and hashed); approving,
publishing and closing a release do not, and do not read it.
Reported: constructing the Publisher (what approve/publish/close pay now) and then
building the register, its sha256 and the statistics codec (what every step paid before,
when the constructor did all of it). Uses ``benchmarks/bench_state.py``'s workspace.

Usage::

    .venv/bin/python benchmarks/bench_step_startup.py [--register 5000000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT, ROOT / "benchmarks"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from bench_state import OUT, build  # noqa: E402
from machine_info import machine  # noqa: E402

from serialpub.config import load_config  # noqa: E402
from serialpub.workflow.publisher import Publisher  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--register", type=int, default=5_000_000)
    args = ap.parse_args()
    root = OUT / f"state-{args.register}"
    build(root, args.register, 1)
    print(machine())
    ws = load_config(root)
    for attempt in (1, 2):
        t = time.perf_counter()
        publisher = Publisher(ws)
        construct = time.perf_counter() - t
        t = time.perf_counter()
        _ = publisher.register, publisher.register_reader.file_sums, publisher.statistics
        register = time.perf_counter() - t
        print(
            f"run {attempt}: Publisher() {construct:.2f} s (approve, publish, close); register, sha256 and "
            f"statistics codec {register:.2f} s more (draft, validate; every step before)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
