"""Group-size measures of a release: the discernibility metric C_DM (Bayardo & Agrawal,
ICDE 2005), the average QI-group (equivalence-class) size and C_AVG (LeFevre, DeWitt &
Ramakrishnan, ICDE 2006), and the suppression rate.

These papers are not in ``papers/``: the definitions are the ones the field cites. Conventions
(suppressed records, the snapshot as the original table) are :mod:`.utility`'s.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from anonymizer.measures._checks import IntArray, check_count, int_array


def _check_sizes(group_sizes: npt.ArrayLike) -> IntArray:
    sizes = int_array(group_sizes, "group_sizes", 1)
    if sizes.size and sizes.min() < 1:
        raise ValueError("group_sizes: every QI-group must hold at least one record")
    return sizes


def discernibility(group_sizes: npt.ArrayLike, suppressed: int) -> int:
    """Discernibility metric C_DM of a release.

    ``C_DM = Σ_groups |E|² + |suppressed| · |D|``: every published record is charged the size
    of its QI-group (equivalence class E), every suppressed record the size |D| of the whole
    snapshot (published + suppressed), Bayardo & Agrawal's penalty for a record that cannot be
    told apart from any other. Minimum |D| (every record alone, nothing suppressed), maximum
    |D|² (one group, or everything suppressed). Bayardo & Agrawal also charge |D| per record of
    a group smaller than k; a release has no such published group, so no k is needed.

    Args:
        group_sizes: published records per QI-group, shape (G,), each ≥ 1
            (``np.bincount(group)`` of the per-record group codes).
        suppressed: number of suppressed snapshot records, ≥ 0.

    Returns:
        C_DM in records² (exact integer).

    Raises:
        ValueError: a group size below 1, non-integers, or a negative suppressed count.

    Source: Bayardo & Agrawal, "Data privacy through optimal k-anonymization", ICDE 2005.
    """
    sizes = _check_sizes(group_sizes)
    sup = check_count(suppressed, "suppressed")
    snapshot = int(sizes.sum()) + sup
    return int(np.dot(sizes, sizes)) + sup * snapshot


def average_group_size(group_sizes: npt.ArrayLike) -> float:
    """Published records per QI-group (records / groups), in records.

    Raises:
        ValueError: no groups (nothing published), a group size below 1, non-integers.
    """
    sizes = _check_sizes(group_sizes)
    if sizes.size == 0:
        raise ValueError("no QI-groups: the average group size of an empty release is undefined")
    return float(sizes.sum()) / sizes.size


def normalized_average_group_size(group_sizes: npt.ArrayLike, k: float) -> float:
    """C_AVG = (records / groups) / k, dimensionless; 1 is ideal (every group exactly k).

    ``records`` counts published records (the records in groups); suppression is reported by
    :func:`suppression_rate` and :func:`discernibility`.

    Raises:
        ValueError: k not positive, no groups, a group size below 1, non-integers.

    Source: LeFevre, DeWitt & Ramakrishnan, "Mondrian multidimensional k-anonymity",
    ICDE 2006 (C_AVG).
    """
    if not (isinstance(k, int | float | np.integer | np.floating) and np.isfinite(k) and k > 0):
        raise ValueError(f"k must be a positive number, got {k!r}")
    return average_group_size(group_sizes) / float(k)


def suppression_rate(suppressed: int, snapshot_records: int) -> float:
    """Suppressed records / snapshot records, in [0, 1] (0.0 for an empty snapshot).

    Raises:
        ValueError: negative counts or more suppressed than snapshot records.
    """
    sup = check_count(suppressed, "suppressed")
    n = check_count(snapshot_records, "snapshot_records")
    if sup > n:
        raise ValueError(f"{sup} suppressed records out of a snapshot of {n}")
    return sup / n if n else 0.0
