"""Many count queries for one verification of a copy: a file of queries, and a cross-tab.

``serialpub query --queries FILE`` reads one query per line (docs/data-users.md, "Many
queries at once"): conditions written as for ``--where`` (:mod:`serialpub.analysis.querying`),
joined by `` AND ``; a condition on the sensitive attribute (``occupation=Sales|Tech-support``)
sets the values that line counts, which otherwise are ``--sensitive``'s (default: all).
Blank lines and lines starting with ``#`` are skipped::

    # age bands of women
    sex=Female AND age=[20,29]
    sex=Female AND age=[30,39] AND occupation=Exec-managerial|Sales

``serialpub query --by sex,race`` makes one query per combination of the named QIs'
leaves (the values of the newest release's hierarchies), each AND the ``--where``
conditions: the cells of a cross-tab. Both are answered by
:func:`serialpub.analysis.querying.answers`, every release's queries in one vectorized call.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from serialpub.analysis.querying import Condition, Query, parse_condition
from serialpub.errors import InputError, quoted

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["MAX_CELLS", "crosstab_queries", "parse_queries", "query_lines"]

#: The most cells a cross-tab may have: beyond it the table is no longer read, and a
#: product of fine QIs (zipcode × age) is more likely a slip than a wish.
MAX_CELLS = 100_000

_AND = re.compile(r"\s+AND\s+")


def query_lines(path: Path) -> list[tuple[int, str]]:
    """The query lines of a batch file: (line number from 1, text stripped), blank lines and
    ``#`` comments left out. Read before the copy is verified, so that a wrong path costs
    nothing.

    Raises:
        InputError: the file cannot be read, is not UTF-8 text, or holds no query.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text; write one query per line") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror or type(exc).__name__})") from None
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), start=1)]
    kept = [(n, t) for n, t in lines if t and not t.startswith("#")]
    if not kept:
        raise InputError(f"{path}: no query in it; write one per line, conditions joined by ' AND '")
    return kept


def parse_queries(
    path: Path,
    lines: Sequence[tuple[int, str]],
    attributes: Sequence[str],
    sensitive: str,
    default: Sequence[str] | None = None,
) -> list[Query]:
    """The queries of :func:`query_lines`, each with ``origin`` naming its file and line.

    Args:
        path: the file (named in errors and origins).
        lines: its query lines.
        attributes: the quasi-identifiers a condition may name.
        sensitive: the sensitive attribute, whose condition sets a line's values counted.
        default: the values counted by a line that names none (None: all).

    Raises:
        InputError: ``FILE, line N: ...`` for an empty condition, one :func:`parse_condition`
            refuses, or two conditions on the sensitive attribute.
    """
    out = []
    for n, text in lines:  # one step per query line
        origin = f"{path}, line {n}"
        conditions: list[Condition] = []
        values: tuple[str, ...] | None = None if default is None else tuple(default)
        named = False
        for part in _AND.split(text):
            name, sep, value = part.partition("=")
            if sep and name.strip() == sensitive:
                if named:
                    raise InputError(f"{origin}: two conditions on {sensitive}; join its values with '|'")
                values, named = tuple(v.strip() for v in value.split("|")), True
                continue
            try:
                conditions.append(parse_condition(part, attributes))
            except InputError as exc:
                raise InputError(f"{origin}: {str(exc).removeprefix('--where ')}") from None
        out.append(Query(tuple(conditions), values, origin))
    return out


def crosstab_queries(
    by: Sequence[str],
    hierarchies: Mapping[str, Sequence[str]],
    where: Sequence[Condition],
    sensitive: Sequence[str] | None = None,
) -> tuple[pd.DataFrame, list[Query]]:
    """The cells of a cross-tab and their queries.

    Args:
        by: the QIs to cross, in column order.
        hierarchies: the leaves of every quasi-identifier (the newest release's).
        where: conditions every cell adds (AND).
        sensitive: the values counted (None: all).

    Returns:
        the cells, one column per QI of ``by`` holding its leaf, one row per combination
        (the first QI outermost); and one :class:`Query` per cell, in the same order.

    Raises:
        InputError: ``--by`` empty, naming a QI twice or an attribute that is no
            quasi-identifier, or crossing more than :data:`MAX_CELLS` combinations.
    """
    import pandas as pd

    names = [b.strip() for b in by if b.strip()]
    if not names:
        raise InputError("--by: name one or more quasi-identifiers, comma-separated")
    for b in names:
        if b not in hierarchies:
            raise InputError(f"--by {quoted(b)}: not a quasi-identifier; they are {', '.join(hierarchies)}")
    if len(set(names)) < len(names):
        raise InputError(f"--by {','.join(names)}: a quasi-identifier is named twice")
    leaves = [list(hierarchies[b]) for b in names]
    size = 1
    for values in leaves:
        size *= len(values)
    if size > MAX_CELLS:
        raise InputError(
            f"--by {','.join(names)}: {size:,} combinations, more than {MAX_CELLS:,}; cross fewer or coarser "
            "quasi-identifiers, or use serialpub expand"
        )
    cells = pd.DataFrame(list(itertools.product(*leaves)), columns=names)
    counted = None if sensitive is None else tuple(sensitive)
    queries = [
        Query((*where, *(Condition(b, v) for b, v in zip(names, cell, strict=True))), counted)
        for cell in itertools.product(*leaves)
    ]
    return cells, queries
