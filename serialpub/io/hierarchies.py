"""Reading generalization hierarchy files (ARX CSV convention) from disk."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from pathlib import Path

from anonymizer.hierarchy import Hierarchy, HierarchyError
from serialpub.errors import InputError
from serialpub.io.spelling import check_distinct_spellings, spelling_key


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
    rows = _rows(path)
    try:
        return Hierarchy.from_rows(attribute, rows, str(path))
    except HierarchyError as exc:
        raise InputError(str(exc)) from None


def _rows(path: Path) -> list[tuple[int, list[str]]]:
    """``(line number, cells)`` of every non-blank line of a hierarchy file."""
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark is not part of the first leaf
    except FileNotFoundError:
        raise InputError(f"{path}: hierarchy file not found; give one per quasi-identifier") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None
    return [
        (number, [cell.strip() for cell in line.split(";")])
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip()
    ]


def read_sensitive_hierarchy(path: Path, attribute: str) -> Hierarchy:
    """The sensitive attribute's hierarchy, whose leaves are its domain: as
    :func:`read_hierarchy`, and no two leaves may be spellings of one value
    (:mod:`serialpub.io.spelling`).

    Raises:
        InputError: as :func:`read_hierarchy`; or two leaves that are one value under
            two spellings (both lines named).
    """
    rows = _rows(path)
    try:
        hierarchy = Hierarchy.from_rows(attribute, rows, str(path))
    except HierarchyError as exc:
        raise InputError(str(exc)) from None
    check_distinct_spellings(((line, cells[0]) for line, cells in rows), str(path), "value")
    return hierarchy


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
        InputError: the file is missing or not UTF-8, or a line repeats a value, has
            leading or trailing white space, or is another spelling of an earlier line's
            value (:mod:`serialpub.io.spelling`; file and lines named).
    """
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(f"{path}: sensitive domain file not found; list one value per line") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None
    values: list[str] = []
    seen: set[str] = set()
    numbered: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if line != line.strip():
            raise InputError(f"{path}, line {number}: {line!r} has leading or trailing white space; remove it")
        if line in seen:
            raise InputError(f"{path}, line {number}: {line!r} appears twice; list each value once")
        seen.add(line)
        values.append(line)
        numbered.append((number, line))
    if not values:
        raise InputError(f"{path}: the sensitive domain is empty; list one value per line")
    check_distinct_spellings(numbered, str(path), "value")
    return values


def nearest_spelling(value: str, domain: Sequence[str]) -> str | None:
    """The domain value ``value`` most likely meant: another spelling of it
    (:func:`serialpub.io.spelling.spelling_key`), else the closest by
    :func:`difflib.get_close_matches`; None if nothing is close."""
    key = spelling_key(value)
    for v in domain:
        if spelling_key(v) == key:
            return v
    close = difflib.get_close_matches(value.strip(), list(domain), n=1, cutoff=0.6)
    return close[0] if close else None


def spelling_hint(value: str, domain: Sequence[str]) -> str:
    """``"; did you mean 'x'?"`` for :func:`nearest_spelling`, or an empty string."""
    near = nearest_spelling(value, domain)
    return f"; did you mean {near!r}?" if near is not None else ""
