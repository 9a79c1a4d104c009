"""Reading generalization hierarchy files (ARX CSV convention) from disk."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from pathlib import Path

from anonymizer.hierarchy import Hierarchy, HierarchyError
from serialpub.errors import InputError


def read_hierarchy(path: Path, attribute: str | None = None) -> Hierarchy:
    """Read and validate one hierarchy file.

    Args:
        path: a ``;``-separated file, one row per leaf, leaf first and ``*`` last.
        attribute: the column it generalizes; defaults to the file's stem.

    Raises:
        InputError: the file is missing, not UTF-8 text, or malformed (the message names
            the file and line).
    """
    attribute = attribute or path.stem
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark is not part of the first leaf
    except FileNotFoundError:
        raise InputError(f"{path}: hierarchy file not found; give one per quasi-identifier") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None
    rows = [
        (number, [cell.strip() for cell in line.split(";")])
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip()
    ]
    try:
        return Hierarchy.from_rows(attribute, rows, str(path))
    except HierarchyError as exc:
        raise InputError(str(exc)) from None


def read_hierarchies(directory: Path, attributes: Iterable[str]) -> dict[str, Hierarchy]:
    """Read ``<directory>/<attribute>.csv`` for every attribute."""
    return {a: read_hierarchy(directory / f"{a}.csv", a) for a in attributes}


def check_domain(hierarchy: Hierarchy, values: Iterable[str], source: str) -> None:
    """Raise InputError if a value of the data is not a leaf of the hierarchy."""
    try:
        hierarchy.check_domain(values, source)
    except HierarchyError as exc:
        raise InputError(str(exc)) from None


def read_domain(path: Path) -> list[str]:
    """The sensitive attribute's domain from a text file: one value per line, exactly as
    the snapshots spell it (blank lines are skipped).

    Raises:
        InputError: the file is missing or not UTF-8, or a line repeats a value or has
            leading or trailing white space (file and line named).
    """
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(f"{path}: sensitive domain file not found; list one value per line") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None
    values: list[str] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if line != line.strip():
            raise InputError(f"{path}, line {number}: {line!r} has leading or trailing white space; remove it")
        if line in seen:
            raise InputError(f"{path}, line {number}: {line!r} appears twice; list each value once")
        seen.add(line)
        values.append(line)
    if not values:
        raise InputError(f"{path}: the sensitive domain is empty; list one value per line")
    return values


def nearest_spelling(value: str, domain: Sequence[str]) -> str | None:
    """The domain value ``value`` most likely meant: equal up to case and surrounding
    white space, else the closest by :func:`difflib.get_close_matches`; None if nothing
    is close."""
    folded = value.strip().casefold()
    for v in domain:
        if v.strip().casefold() == folded:
            return v
    close = difflib.get_close_matches(value.strip(), list(domain), n=1, cutoff=0.6)
    return close[0] if close else None


def spelling_hint(value: str, domain: Sequence[str]) -> str:
    """``"; did you mean 'x'?"`` for :func:`nearest_spelling`, or an empty string."""
    near = nearest_spelling(value, domain)
    return f"; did you mean {near!r}?" if near is not None else ""
