"""The anonymizer of an older checkout against this one on random series:
both ``anonymize_history`` functions publish the same releases of the same random
series (the strategy of ``tests/test_topdown.py``: tiny registers, 1-3 releases, both
strategies, both dilution modes), run with both searches, and must give the same arrays with
the same dtypes, the same states and the same refusals; ``History.empty`` too, with mixed ℓ.
The new code is given the register as coded rows (``anonymizer.arrays.CodedRows``, tenth
pass), the old one the dense (N, d) leaf ids.
Prints how many releases were compared; an AssertionError names the first difference.

Usage::

    git worktree add /tmp/before <commit>
    uv run python benchmarks/compare_anonymize_history.py /tmp/before [--examples 1500]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from test_topdown import HS, series  # noqa: E402

import anonymizer.release as new  # noqa: E402
from anonymizer.arrays import CodedRows  # noqa: E402
from anonymizer.search import InfeasibleError  # noqa: E402

RESULT = ("published", "group_of_record", "group_nodes", "group_candidates", "group_counts", "group_records")
HISTORY = ("class_of", "survival", "linked", "ell")


def _old(checkout: Path) -> Any:
    """The older checkout's anonymizer/release.py as a module of its own (it imports the rest
    of the anonymizer from this checkout, which the comparison does not change)."""
    spec = importlib.util.spec_from_file_location("anonymizer.old_release", checkout / "anonymizer" / "release.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _same(a: Any, b: Any, names: tuple[str, ...]) -> None:
    for name in names:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path, help="the older checkout")
    ap.add_argument("--examples", type=int, default=1500)
    args = ap.parse_args()
    old = _old(args.old)
    compared = [0]

    @settings(max_examples=args.examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(series())
    def check(case: Any) -> None:
        keys, releases, params, presence, n_sets = case
        # the new code gets the register as it now holds it (coded rows), the old one dense
        given_keys = {new: CodedRows.of(keys, [h.n_leaves for h in HS]), old: keys}
        for algorithm in ("topdown", "bottomup"):
            p = dataclasses.replace(params, algorithm=algorithm)
            h_new = new.History.empty(np.full(keys.shape[0], p.ell), n_sets)
            h_old = old.History.empty(np.full(keys.shape[0], p.ell), n_sets)
            for seq, (rows, sets) in enumerate(releases, start=1):
                outcomes = []
                for module, history in ((new, h_new), (old, h_old)):
                    try:
                        codes = module.SnapshotCodes(rows, sets, n_sets)
                        given = given_keys[module]
                        outcomes.append(module.anonymize_history(given, codes, history, p, HS, presence, seed=seq))
                    except InfeasibleError as exc:
                        outcomes.append(str(exc))
                a, b = outcomes
                if isinstance(a, str) or isinstance(b, str):
                    assert a == b, (a, b)
                    break
                _same(a, b, RESULT)
                _same(a.history, b.history, HISTORY)
                assert a.suppressed == b.suppressed
                h_new, h_old = a.history, b.history
                compared[0] += 1

    check()
    for ell in (np.array([2.0, 3, 2, 5]), np.array([3.0] * 5), np.array([], dtype=float)):
        _same(new.History.empty(ell, 2), old.History.empty(ell, 2), HISTORY)
    print(f"the same results, states and refusals over {compared[0]} releases")


if __name__ == "__main__":
    main()
