"""Reading generalization hierarchy files (ARX CSV convention) from disk."""

from __future__ import annotations

from collections.abc import Iterable
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
