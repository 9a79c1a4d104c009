"""Period labels: where a release's period comes from, which formats it may take, and which
period comes next (docs/configuration.md, ``period_format``).

A period is given with ``--period`` or read from a snapshot named
``snapshot-<period>.csv`` (:func:`period_of_file`), never from an arbitrary file name. Its
format is configured (:class:`PeriodFormat`); ``auto`` takes the format of the first
published period. For every format but ``free`` the successor of a period is known, so a
period that skips one is refused unless the skip is explicit (``--skip-periods REASON``)
and then recorded.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path

from serialpub.errors import InputError

#: a snapshot file whose name says its period
SNAPSHOT_NAME = re.compile(r"^snapshot-(?P<period>.+?)(?:\.csv|\.parquet)?$")  # a file or a table


class PeriodFormat(StrEnum):
    """How period labels are written; each but ``free`` and ``auto`` has a successor."""

    AUTO = "auto"  # the format of the first published period (free when none fits)
    SEQUENCE = "sequence"  # 0001, 0002, ... (digits, all of the first one's width: compared as text)
    YEAR = "year"  # 2025
    HALF_YEAR = "half-year"  # 2025-H1, 2025-H2
    QUARTER = "quarter"  # 2025-Q1 .. 2025-Q4
    MONTH = "month"  # 2025-01 .. 2025-12
    FREE = "free"  # any label that sorts chronologically; no successor, gaps not detected


_PATTERNS = {
    PeriodFormat.SEQUENCE: re.compile(r"^\d{1,9}$"),
    PeriodFormat.YEAR: re.compile(r"^(?P<y>\d{4})$"),
    PeriodFormat.HALF_YEAR: re.compile(r"^(?P<y>\d{4})-H(?P<n>[12])$"),
    PeriodFormat.QUARTER: re.compile(r"^(?P<y>\d{4})-Q(?P<n>[1-4])$"),
    PeriodFormat.MONTH: re.compile(r"^(?P<y>\d{4})-(?P<n>0[1-9]|1[0-2])$"),
}
_PER_YEAR = {PeriodFormat.HALF_YEAR: 2, PeriodFormat.QUARTER: 4, PeriodFormat.MONTH: 12}
_EXAMPLE = {
    PeriodFormat.SEQUENCE: "0007", PeriodFormat.YEAR: "2025", PeriodFormat.HALF_YEAR: "2025-H1",
    PeriodFormat.QUARTER: "2025-Q3", PeriodFormat.MONTH: "2025-07",
}  # fmt: skip


def period_of_file(path: Path) -> str:
    """The period a snapshot's name gives (``snapshot-<period>.csv``).

    Raises:
        InputError: the name does not follow the pattern (give ``--period``).
    """
    match = SNAPSHOT_NAME.match(path.name)
    if match is None:
        raise InputError(
            f"{path}: cannot tell the period from this file name; name it snapshot-<period>.csv "
            "(e.g. snapshot-0007.csv, snapshot-2025-H1.csv) or give --period"
        )
    return match.group("period")


def detect(period: str) -> PeriodFormat:
    """The first format (in :class:`PeriodFormat` order) ``period`` is written in, else ``free``."""
    for fmt, pattern in _PATTERNS.items():
        if pattern.match(period):
            return fmt
    return PeriodFormat.FREE


def effective(fmt: PeriodFormat, first: str | None) -> PeriodFormat:
    """The format in force: ``fmt``, or under ``auto`` the first published period's (none
    published yet: no constraint beyond the label pattern until the first release)."""
    if fmt is not PeriodFormat.AUTO:
        return fmt
    return PeriodFormat.FREE if first is None else detect(first)


def check_format(period: str, fmt: PeriodFormat, where: str) -> None:
    """Raises InputError when ``period`` is not written in ``fmt`` (``free``: anything)."""
    pattern = _PATTERNS.get(fmt)
    if pattern is not None and not pattern.match(period):
        raise InputError(
            f"period {period!r} is not a {fmt.value} period ({where}), e.g. {_EXAMPLE[fmt]!r}; give the period in "
            "that format, or change period_format in serialpub.yaml"
        )


def successor(period: str, fmt: PeriodFormat) -> str | None:
    """The period after ``period`` in ``fmt`` (None for ``free``)."""
    if fmt is PeriodFormat.SEQUENCE:
        return str(int(period) + 1).zfill(len(period))
    if fmt is PeriodFormat.YEAR:
        return str(int(period) + 1)
    if fmt in _PER_YEAR:
        match = _PATTERNS[fmt].match(period)
        assert match is not None
        year, n = int(match["y"]), int(match["n"])
        year, n = (year + 1, 1) if n == _PER_YEAR[fmt] else (year, n + 1)
        return {PeriodFormat.HALF_YEAR: f"{year}-H{n}", PeriodFormat.QUARTER: f"{year}-Q{n}"}.get(
            fmt, f"{year}-{n:02d}"
        )
    return None


def skipped(last: str, period: str, fmt: PeriodFormat, limit: int = 1000) -> list[str]:
    """The periods strictly between ``last`` and ``period`` in ``fmt`` (empty for ``free``
    or when ``period`` follows ``last``); at most ``limit`` of them are listed."""

    def key(p: str) -> tuple[int, str]:
        return (int(p), "") if fmt is PeriodFormat.SEQUENCE else (0, p)  # the others sort as text

    out: list[str] = []
    current = successor(last, fmt)
    while current is not None and key(current) < key(period) and len(out) < limit:
        out.append(current)
        current = successor(current, fmt)
    return out
