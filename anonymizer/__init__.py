"""The anonymizer of serialpub: one release of a serial publication, computed from arrays.

Given the register's QI leaves, the snapshot's records, the history of earlier releases
(the statistics file's survival products, paper 004 section 7) and the privacy parameters,
:func:`anonymize_history` picks the release's QI-groups, each meeting its group-size-ratio
requirement (paper 004, Theorem 1 and the strategies of section 6), and returns the
release with the history after it. The breach arithmetic of Lemma 4 and its exact decision
are :mod:`anonymizer.privacy`'s; the report's measures are :mod:`anonymizer.measures`'.
Terms (cell, QI-group, region) as in docs/concepts.md.

No I/O: hierarchy rows, the register and the snapshot arrive already read, as rows and
arrays, and nothing here imports ``state``, ``checks``, ``serialpub`` or ``dags``
(docs/design.md section 9; import contracts in pyproject.toml). Nothing is kept between
calls; the top-down search splits two QIs at a time on two threads.

The public API is :data:`__all__`, importable from the package itself; the modules below
it are the implementation and may change. Importing the package imports nothing else:
each name is loaded on first use, so that a reader of the settings alone
(:mod:`anonymizer.settings`, the DAG file) does not pay for numpy and pandas.
"""

from __future__ import annotations

import importlib
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from anonymizer.hierarchy import Hierarchy, HierarchyError
    from anonymizer.privacy import breach_probabilities, exact_breach, exceeds_threshold, min_ratio
    from anonymizer.release import (
        History,
        PrivacyParams,
        ReleaseResult,
        SnapshotCodes,
        advance_history,
        anonymize_history,
        anonymize_release,
    )
    from anonymizer.search import InfeasibleError, TableInfeasibleError

#: public name -> the module that defines it
_HOME = MappingProxyType(
    {
        "Hierarchy": "anonymizer.hierarchy",
        "HierarchyError": "anonymizer.hierarchy",
        "History": "anonymizer.release",
        "PrivacyParams": "anonymizer.release",
        "ReleaseResult": "anonymizer.release",
        "SnapshotCodes": "anonymizer.release",
        "advance_history": "anonymizer.release",
        "anonymize_history": "anonymizer.release",
        "anonymize_release": "anonymizer.release",
        "InfeasibleError": "anonymizer.search",
        "TableInfeasibleError": "anonymizer.search",
        "breach_probabilities": "anonymizer.privacy",
        "exact_breach": "anonymizer.privacy",
        "exceeds_threshold": "anonymizer.privacy",
        "min_ratio": "anonymizer.privacy",
    }
)

__all__ = (
    "Hierarchy",
    "HierarchyError",
    "History",
    "InfeasibleError",
    "PrivacyParams",
    "ReleaseResult",
    "SnapshotCodes",
    "TableInfeasibleError",
    "advance_history",
    "anonymize_history",
    "anonymize_release",
    "breach_probabilities",
    "exact_breach",
    "exceeds_threshold",
    "min_ratio",
)


def __getattr__(name: str) -> Any:
    """The public names, imported from their module on first use (PEP 562)."""
    if name in _HOME:
        return getattr(importlib.import_module(_HOME[name]), name)
    raise AttributeError(f"module 'anonymizer' has no attribute {name!r}")
