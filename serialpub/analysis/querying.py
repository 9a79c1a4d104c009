"""A data user's count queries and weighted microdata on a verified release series.

Conditions (``serialpub query --where``; docs/data-users.md) are written ``QI=VALUE``:

- a leaf or a node of the QI's hierarchy (``sex=F``, ``zipcode=6500*``, ``age=[20, 24]``
  when that label is a node): the individuals whose value lies below it;
- several of them separated by ``|`` (``zipcode=65001|65013``): their union;
- for a QI with numeric leaves, a closed range ``[lo,hi]`` (``age=[30,40]``): the leaves
  whose number v has lo <= v <= hi; ``>=lo`` and ``<=hi`` are half-open ranges.

Several conditions are joined by AND. The sensitive values (``--sensitive a,b``) form the
set S; by default every value. Each query is answered per release by the register-joint
estimator with its error figure (the standard error of the within-group allocation under
the estimator's own model, and the nominal 90 % and 95 % intervals clipped to the certain
bounds), its certain bounds and paper 001's uniform estimate
(:func:`anonymizer.joint.joint_answers`; the model and its bias: docs/data-users.md).

:func:`expand` writes what the estimator reads as weighted microdata: one row per
(distinct register QI combination inside a published region, sensitive value), weighted
by the records it is expected to hold, c_s(G) · n(cell) / n(G); summing the weights of
the rows that satisfy a query gives the joint estimate. Each row's ``variance`` is that of
its own count under the same model; summed over a query's rows it bounds the query's
variance from above (the rows of a group are drawn together: docs/data-users.md).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from anonymizer.hierarchy import Hierarchy
from anonymizer.joint import Z_95, allocation_variance, joint_answers
from anonymizer.workload import QueryRanges
from serialpub.analysis.reader import PublicReleases, PublishedRelease
from serialpub.errors import InputError, quoted
from serialpub.io.atomic import own_tmp

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ERROR_MODEL",
    "Condition",
    "Query",
    "answer",
    "answers",
    "expand",
    "in_no_region",
    "parse_condition",
    "sensitive_domain",
    "write_expanded",
]

#: The error figure's model in one sentence, as ``query`` prints it (table caption, JSON).
ERROR_MODEL = (
    "se: the standard error of the estimate if each group's records of the values counted were "
    "held by individuals of its region drawn at random like the register's (hypergeometric "
    "allocation, summed over groups); the 90 % and 95 % intervals are estimate ± 1.645 se and "
    "± 1.960 se clipped to the certain bounds. It leaves out the bias of that assumption: where "
    "the value depends on a QI inside a region, the estimate leans toward independence"
)

BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_HALF = re.compile(r"^(>=|<=)\s*(.+)$")
_RANGE = re.compile(r"^\[\s*([^,\]]+?)\s*,\s*([^,\]]+?)\s*\]$")


def _shown(values: Sequence[str], limit: int = 200) -> str:
    text = ""
    for i, v in enumerate(values):
        nxt = (", " if text else "") + v
        if len(text) + len(nxt) > limit:
            return text + f", ... ({len(values) - i} more)"
        text += nxt
    return text


@dataclass(frozen=True)
class Condition:
    """``attribute=value`` as written (see the module docstring)."""

    attribute: str
    value: str

    def __str__(self) -> str:
        return f"{self.attribute}={self.value}"

    def mask(self, h: Hierarchy, anc: BoolArray | None = None, numbers: FloatArray | None = None) -> BoolArray:
        """The leaves of ``h`` that satisfy the condition, bool (n_leaves,). ``anc`` and
        ``numbers``: ``h``'s ancestor matrix and leaf numbers when the caller made them once
        for many conditions (a batch), else made here.

        Raises:
            InputError: a value that is no leaf or node of the hierarchy, a range on a QI
                whose leaves are not numbers, an unreadable or empty range; the line names
                the allowed values.
        """
        anc = h.index.ancestor_matrix() if anc is None else anc
        text = self.value.strip()
        if h.has_label(text):
            return np.asarray(anc[:, h.node(text)])
        parts = [p.strip() for p in text.split("|")]
        # labels first: a label may itself begin like a range ('<=50K', '>50K'), in any part
        if text and all(h.has_label(p) for p in parts):
            return np.asarray(anc[:, [h.node(p) for p in parts]].any(axis=1))
        if numbers is None and h.numeric:
            numbers = h.leaf_numbers()
        lo = hi = None
        single = len(parts) == 1  # several values joined by '|' are labels, never a range
        if single and (m := _RANGE.match(text)) is not None:
            lo, hi = m.group(1), m.group(2)
        elif single and (m := _HALF.match(text)) is not None:
            lo, hi = (m.group(2), None) if m.group(1) == ">=" else (None, m.group(2))
        if lo is not None or hi is not None:
            if numbers is None:
                raise InputError(
                    f"--where {self}: a range needs numeric values, and {self.attribute} has none; "
                    f"give one of {_shown(list(h.labels))}"
                )
            try:
                low = -np.inf if lo is None else float(lo)
                high = np.inf if hi is None else float(hi)
            except ValueError:
                raise InputError(f"--where {self}: write a range as [lo,hi], >=lo or <=hi with numbers") from None
            inside = (numbers >= low) & (numbers <= high)
            if not inside.any():
                raise InputError(
                    f"--where {self}: the range holds no value of {self.attribute} "
                    f"(its values run from {h.leaves[int(np.argmin(numbers))]} to {h.leaves[int(np.argmax(numbers))]})"
                )
            return np.asarray(inside)
        unknown = [p for p in parts if not h.has_label(p)]
        raise InputError(
            f"--where {self}: {quoted(unknown[0] if unknown else text)} is not a value of {self.attribute}; "
            f"give a leaf or node of its hierarchy: {_shown(list(h.labels))}"
        )


def parse_condition(text: str, attributes: Sequence[str]) -> Condition:
    """One ``--where`` text as a :class:`Condition`.

    Raises:
        InputError: no ``=``, or an attribute that is not a quasi-identifier (named, with
            the quasi-identifiers there are).
    """
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep:
        raise InputError(f"--where {text!r}: write a condition as QI=VALUE, e.g. {attributes[0]}=...")
    if name not in attributes:
        raise InputError(f"--where {text!r}: {name!r} is not a quasi-identifier; they are {', '.join(attributes)}")
    if not value.strip():
        raise InputError(f"--where {text!r}: no value after '='")
    return Condition(name, value.strip())


def sensitive_domain(copy: PublicReleases) -> list[str]:
    """The sensitive values a query may name: the leaves of ``hierarchies/<sensitive>.csv``
    when the copy has it, else every value published in the series."""
    from serialpub.io.hierarchies import read_hierarchy

    sensitive = copy.releases[-1].sensitive
    path = copy.root / "hierarchies" / f"{sensitive}.csv"
    if path.is_file():
        return list(read_hierarchy(path, sensitive).leaves)
    seen: dict[str, None] = {}
    for r in copy.releases:
        seen.update(dict.fromkeys(sorted(r.data[sensitive].astype(str).unique())))
    return list(seen)


@dataclass(frozen=True)
class Query:
    """One count query of a batch: QI ``conditions`` joined by AND, the sensitive values
    counted (None: the call's default), and where it was written (``origin``, e.g.
    ``queries.txt, line 3``), which prefixes any error about it."""

    conditions: tuple[Condition, ...]
    sensitive: tuple[str, ...] | None = None
    origin: str = ""


def _s_values(copy: PublicReleases, domain: list[str], sensitive: Sequence[str] | None) -> list[str]:
    if sensitive is None:
        return domain
    s_values = [s.strip() for s in sensitive if s.strip()]
    bad = [s for s in s_values if s not in domain]
    if bad or not s_values:
        raise InputError(
            f"--sensitive: {bad[0] if bad else 'nothing'!r} is not a value of "
            f"{copy.releases[-1].sensitive}; give some of {_shown(domain)}"
        )
    return s_values


def _located(origin: str, exc: InputError) -> InputError:
    """``exc`` prefixed with where its query was written (a batch file's line)."""
    return InputError(f"{origin}: {str(exc).removeprefix('--where ').removeprefix('--sensitive: ')}") if origin else exc


def _ranges(
    release: PublishedRelease, queries: Sequence[Query], domain: list[str], s_sets: list[list[str]], s_of: IntArray
) -> QueryRanges:
    """The queries as leaf masks over ``release``'s hierarchies, (Q, n_leaves) per QI named
    by a condition. Each distinct condition is resolved once (:meth:`Condition.mask`, one
    ancestor matrix per hierarchy); the queries' masks gather and AND those rows, one step per
    QI and per repeat of a QI in a query, never one per query. ``s_sets``: the distinct sets
    of sensitive values counted, each a list of ``domain``'s values; ``s_of`` (Q,): the set
    of each query. The first condition (in query order) a release cannot resolve is refused,
    naming its query."""
    n = len(queries)
    code: dict[Condition, int] = {}
    first: list[tuple[Condition, str]] = []  # each distinct condition and the query it first appears in
    at_query: list[int] = []
    at_condition: list[int] = []
    for i, q in enumerate(queries):  # coding only: one dict lookup per condition
        for c in q.conditions:
            k = code.get(c)
            if k is None:
                k = code[c] = len(first)
                first.append((c, q.origin))
            at_query.append(i)
            at_condition.append(k)
    rows: list[BoolArray] = []
    of: dict[str, tuple[Hierarchy, BoolArray, FloatArray | None]] = {}  # made once per QI
    for c, origin in first:  # one step per distinct condition, in order of first appearance
        if c.attribute not in release.qis:
            missing = InputError(f"--where {c}: release {release.number} does not publish {c.attribute}")
            raise _located(origin, missing)
        if c.attribute not in of:
            h = release.hierarchies[c.attribute]
            of[c.attribute] = (h, h.index.ancestor_matrix(), h.leaf_numbers() if h.numeric else None)
        try:
            rows.append(c.mask(*of[c.attribute]))
        except InputError as exc:
            raise _located(origin, exc) from None
    query_of = np.asarray(at_query, dtype=np.int64)
    condition_of = np.asarray(at_condition, dtype=np.int64)
    attribute = np.array([list(of).index(c.attribute) for c, _ in first], dtype=np.int64)
    masks: dict[str, BoolArray] = {}
    for a, name in enumerate(of):  # one step per QI named
        mine = np.flatnonzero(attribute == a)
        table = np.stack([rows[k] for k in mine]) if mine.size else np.zeros((0, of[name][0].n_leaves), dtype=bool)
        local = np.full(len(first), -1, dtype=np.int64)
        local[mine] = np.arange(mine.size)
        on = local[condition_of] >= 0
        qs, ks = query_of[on], local[condition_of[on]]
        # qs is non-decreasing: a query's k-th condition on this QI has rank k
        rank = np.arange(qs.size) - np.searchsorted(qs, qs, side="left")
        mask = np.ones((n, table.shape[1]), dtype=bool)
        for r in range(int(rank.max()) + 1 if rank.size else 0):  # one step per repeat of the QI in a query
            at = rank == r
            mask[qs[at]] &= table[ks[at]]
        masks[name] = mask
    position = {v: k for k, v in enumerate(domain)}
    s_rows = np.zeros((len(s_sets), len(domain)), dtype=bool)
    for k, values in enumerate(s_sets):  # one step per distinct value set
        s_rows[k, [position[v] for v in values]] = True
    return QueryRanges(masks, tuple(domain), s_rows[s_of])


def answer(
    copy: PublicReleases,
    conditions: Sequence[Condition],
    sensitive: Sequence[str] | None = None,
    releases: Sequence[int] | None = None,
) -> pd.DataFrame:
    """One count query on every (or the given) release.

    Args:
        copy: the verified series (:func:`serialpub.analysis.reader.open_releases`).
        conditions: QI conditions, joined by AND.
        sensitive: the set S (default: every value).
        releases: release numbers (default: all).

    Returns:
        one row per release: ``release``, ``period``, ``estimate`` (register-joint, records),
        ``se`` (its standard error under the model, :data:`ERROR_MODEL`), ``low90``,
        ``high90``, ``low95``, ``high95`` (the nominal intervals, clipped to the bounds),
        ``lower``, ``upper`` (certain bounds of the snapshot's count), ``uniform`` (paper
        001), ``records`` (published) and ``generalized``: the QIs (comma-separated; empty
        if none) whose condition cuts a generalized value of a group the estimate depends
        on, where it may be pulled toward independence and the error figure does not cover
        that bias.

    Raises:
        InputError: an unknown sensitive value (named, with the allowed ones); a condition
            :meth:`Condition.mask` refuses; the copy holds no register.
    """
    query = Query(tuple(conditions), None if sensitive is None else tuple(sensitive))
    return answers(copy, [query], releases).drop(columns="query")


def answers(copy: PublicReleases, queries: Sequence[Query], releases: Sequence[int] | None = None) -> pd.DataFrame:
    """Several count queries on every (or the given) release, all of a release's queries in
    one vectorized call (:func:`anonymizer.joint.joint_answers`): what ``query --queries``
    and ``query --by`` answer after verifying the copy once.

    Args:
        copy: the verified series (:func:`serialpub.analysis.reader.open_releases`).
        queries: the queries; a query's ``sensitive`` None counts every value.
        releases: release numbers (default: all).

    Returns:
        one row per (release, query), releases outer: ``query`` (0-based position in
        ``queries``) and the columns of :func:`answer`.

    Raises:
        InputError: as :func:`answer`, prefixed with the query's ``origin`` when it has one.
    """
    import pandas as pd

    return pd.DataFrame(answer_columns(copy, queries, releases))


def answer_columns(
    copy: PublicReleases, queries: Sequence[Query], releases: Sequence[int] | None = None
) -> dict[str, npt.NDArray[Any]]:
    """:func:`answers` as its columns, one array each: a command that only prints them need not import pandas."""
    domain = sensitive_domain(copy)
    # each distinct --sensitive list resolved once: a batch mostly counts one (domain or command's)
    code: dict[tuple[str, ...] | None, int] = {}
    s_sets: list[list[str]] = []
    s_of = np.empty(len(queries), dtype=np.int64)
    for i, q in enumerate(queries):
        k = code.get(q.sensitive)
        if k is None:
            try:
                s_sets.append(_s_values(copy, domain, q.sensitive))
            except InputError as exc:
                raise _located(q.origin, exc) from None
            k = code[q.sensitive] = len(s_sets) - 1
        s_of[i] = k
    chosen = copy.releases if releases is None else [copy.release(n) for n in releases]
    columns = ["query", "release", "period", "estimate", "se", "low90", "high90", "low95", "high95", "lower",
               "upper", "uniform", "records", "generalized"]  # fmt: skip
    parts: dict[str, list[npt.NDArray[Any]]] = {c: [] for c in columns}
    n = len(queries)
    for r in chosen:  # one step per release; the queries are columns of its arrays
        j = r.joint()
        a = joint_answers(j, _ranges(r, queries, domain, s_sets, s_of))
        low90, high90 = a.interval()
        low95, high95 = a.interval(Z_95)
        names = np.asarray(j.qis, dtype=object)
        cut = np.array([",".join(names[row]) for row in a.generalized], dtype=object)
        per = [np.arange(n), np.full(n, r.number), np.full(n, r.manifest.period, dtype=object), a.estimate, a.se,
               low90, high90, low95, high95, a.lower, a.upper, a.uniform, np.full(n, r.records), cut]  # fmt: skip
        for c, values in zip(columns, per, strict=True):
            parts[c].append(values)
    if not chosen or not n:
        return {c: np.array([], dtype=object) for c in columns}
    # the releases' columns put end to end, not a table per release
    return {c: np.concatenate(parts[c]) for c in columns}


def expand(release: PublishedRelease) -> pd.DataFrame:
    """The release as weighted microdata over its register.

    Returns:
        one row per (distinct register QI combination inside a published region, sensitive
        value the region's group holds): ``release``, ``period``, the QI values (leaf
        labels; numbers for a QI the manifest declares numeric), the sensitive value,
        ``weight`` = c_s(G) · n(cell) / n(G) (expected records), ``variance`` (of the
        row's records under the model: :func:`anonymizer.joint.allocation_variance` of
        c_s(G), n(cell), n(G)), ``lower`` = max(0, c_s(G) − (n(G) − n(cell))) and
        ``upper`` = min(c_s(G), n(cell)) (certain bounds of the row's published records:
        the bounds of :mod:`anonymizer.joint` for a query holding that one combination),
        ``individuals`` (n(cell)), ``group`` and, per QI ``q``, ``group_q``: the group's
        published (generalized) label, as text. Σ weight over the rows satisfying a query is
        its register-joint estimate (:mod:`anonymizer.joint`); Σ variance over them is at
        least the query's variance (a group's rows are drawn together, so their counts are
        not independent; ``serialpub query`` gives the exact figure); Σ weight per group and
        value is the published count. Register individuals in no published region have no
        row (:func:`in_no_region`).

    Raises:
        InputError: the copy holds no register.
    """
    import pandas as pd

    j = release.joint()
    covered = np.flatnonzero(j.group_of_cell >= 0)
    n_g = j.register_in_group
    cells = pd.DataFrame({"cell": covered, "group": j.group_of_cell[covered]})
    nz = j.nonzero  # (group, value) entries in row-major order, as np.nonzero of the dense table
    held = pd.DataFrame({"group": nz.rows, "value": nz.column, "count": nz.count.astype(np.int64)})
    rows = cells.merge(held, on="group", how="inner", sort=False)
    cell = rows["cell"].to_numpy()
    group = rows["group"].to_numpy()
    count = rows["count"].to_numpy()
    individuals = j.cell_counts[cell]
    out = pd.DataFrame({"release": release.number, "period": release.manifest.period}, index=range(len(rows)))
    for a, q in enumerate(j.qis):
        h = release.hierarchies[q]
        leaves = np.asarray(h.leaves, dtype=object)[j.cell_leaves[cell, a]]
        numeric = q in release.manifest.numeric and h.numeric
        out[q] = pd.to_numeric(leaves) if numeric else pd.Categorical(leaves)
    out[release.sensitive] = pd.Categorical(np.asarray(j.sensitive_values, dtype=object)[rows["value"].to_numpy()])
    out["weight"] = count * individuals / n_g[group]
    out["variance"] = allocation_variance(count, individuals, n_g[group])
    out["lower"] = np.maximum(0, count - (n_g[group] - individuals))
    out["upper"] = np.minimum(count, individuals)
    out["individuals"] = individuals
    out["group"] = group
    for a, (q, h) in enumerate(zip(j.qis, j.hierarchies, strict=True)):
        labels = np.asarray(h.labels, dtype=object)[j.group_nodes[group, a]]
        out[f"group_{q}"] = pd.Categorical(labels)
    return out


def in_no_region(release: PublishedRelease) -> int:
    """The register individuals whose QI values lie in no published region of ``release``:
    none of them was in the period's snapshot, unless as one of the records the release
    suppressed (docs/threat-model.md, "What a release reveals about presence"). They have no
    row in :func:`expand`.

    Raises:
        InputError: the copy holds no register.
    """
    j = release.joint()
    return int(j.cell_counts[j.group_of_cell < 0].sum())


def write_expanded(copy: PublicReleases, out: Path, releases: Sequence[int] | None = None) -> list[Path]:
    """:func:`expand` of every (or the given) release written to ``out/release-NNNN.parquet``,
    all of them or none: each table is written under a hidden temporary name beside its
    target (:func:`serialpub.io.atomic.own_tmp`), and the tables are renamed into place once
    every one is written. On a failure the temporary tables are removed, and so are the
    folders this call created, so ``out`` holds what it held before (docs/commands.md,
    ``serialpub expand``).

    Raises:
        InputError: ``out`` exists and is not a folder; the copy holds no register, or a
            release's table cannot be made (:func:`expand`): the message adds that nothing
            was written.
        OSError: a table cannot be written (a full disk) or renamed: ``filename`` is the
            table, and the message says what was left in ``out`` (nothing, unless a rename
            failed after others had replaced their tables).
    """
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: not a folder; --out names the folder to write the tables into")
    chosen = copy.releases if releases is None else [copy.release(n) for n in releases]
    created = [p for p in (out, *out.parents) if not p.exists()]  # innermost first
    out.mkdir(parents=True, exist_ok=True)
    staged: list[tuple[Path, Path]] = []
    try:
        for r in chosen:  # one table per release
            path = out / f"release-{r.number:04d}.parquet"
            staged.append((own_tmp(path), path))
            expand(r).to_parquet(staged[-1][0], index=False)
    except BaseException as exc:
        _discard([tmp for tmp, _ in staged], created)
        if isinstance(exc, InputError):
            raise InputError(f"{exc}; nothing was written to {out}") from None
        if isinstance(exc, OSError):
            raise _unwritten(exc, staged[-1][1] if staged else out, f"nothing was written to {out}") from None
        raise
    placed: list[Path] = []
    try:
        for tmp, path in staged:
            os.replace(tmp, path)
            placed.append(path)
    except OSError as exc:
        _discard([tmp for tmp, _ in staged[len(placed) :]], [] if placed else created)
        names = ", ".join(p.name for p in placed)
        left = (
            f"{len(placed)} complete table(s) now in {out} ({names}), the others not written"
            if placed
            else f"nothing was written to {out}"
        )
        raise _unwritten(exc, staged[len(placed)][1], left) from None
    return placed


def _discard(temporary: list[Path], created: list[Path]) -> None:
    """Remove the temporary tables, then the folders made for them (innermost first; a
    folder something else wrote into meanwhile stays)."""
    for tmp in temporary:
        tmp.unlink(missing_ok=True)
    for folder in created:
        try:
            folder.rmdir()
        except OSError:
            return


def _unwritten(exc: OSError, table: Path, left: str) -> OSError:
    """``exc`` naming the table it stopped at and what was left, in one line."""
    reason = exc.strerror or (str(exc).splitlines() or [type(exc).__name__])[0]
    return OSError(exc.errno, f"{reason}; {left}", str(table))
