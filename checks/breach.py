"""Independent recomputation of a draft release's breach probabilities (docs/design.md sections 1 and 5).

The release suites must not trust the anonymizer's bookkeeping, so this module recomputes
everything from the draft table itself, the population register (as leaf ids), the
hierarchies and the state *before* the draft (per-individual survival products):

- the draft's groups are its distinct QI label tuples; their region is the box of the
  labels' leaf sets;
- the candidates of a group are the register individuals whose QI values lie in its region
  (``presence=False``, virtual dilution) or the present individuals among them
  (``presence=True``, where ``n_j`` is the group's published record count, as the release
  contract and ``anonymizer.release`` define it);
- every candidate o of a group holding ``n_s > 0`` records of protected value s gets
  ``p = 1 - P_before(o, s) · (1 - n_s / n_j)`` (Lemma 4 of paper 004).

Nothing here imports the anonymizer's search or release code (only
:class:`anonymizer.hierarchy.Hierarchy`, the writer side's region geometry
:mod:`anonymizer.regions` and the exact arithmetic of :mod:`anonymizer.privacy`). All work
is vectorized over distinct register QI combinations (and distinct (survival, n_j, n_s, ℓ)
figures for the exact verdict); individuals appear only in the final expansion of the table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from anonymizer.arrays import CodedRows, expand_csr, factorize
from anonymizer.hierarchy import Hierarchy
from anonymizer.privacy import (
    UNDECIDED_BAND,
    PropensityRatio,
    breach_after_release,
    charged_counts,
    exact_breach,
    propensity_ratios,
)
from anonymizer.regions import PresenceShown, RegisterCells, cover_pairs, group_release, presence_shown, record_nodes
from checks.labels import LabelCodes

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: Columns of the breach table, in order (per unit: and ``weight``).
BREACH_COLUMNS = ("individual", "value", "p", "n_j", "n_s", "group", "exceeds")


@dataclass(frozen=True)
class Draft:
    """A draft release as read back from its staging folder.

    Attributes:
        table: one string column per QI (hierarchy node labels) and the sensitive column.
        qis, sensitive: column names; ``qis`` in the order of the register keys' columns.
        hierarchies: one per QI, by name (a release's intervals as nodes).
        labels: the table's columns factorized once for every check that reads them
            (:class:`checks.labels.LabelCodes`; the table must not change after).
    """

    table: pd.DataFrame
    qis: Sequence[str]
    sensitive: str
    hierarchies: Mapping[str, Hierarchy]
    labels: LabelCodes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", LabelCodes(self.table))


@dataclass(frozen=True)
class Population:
    """Who can be a candidate (paper 004 §5; docs/design.md section 2).

    Attributes:
        keys: leaf id per QI of every register individual, shape (N, d), an array or
            :class:`anonymizer.arrays.CodedRows` (the register's; its codes are then the
            individuals' QI combinations, not grouped again).
        ids: the id of every register individual, shape (N,), unique; a ``pd.Index`` is
            used as given, keeping its cached uniqueness.
        presence: candidates are the present individuals (no virtual dilution); ``n_j``
            is then the group's published record count, or every present individual of
            its region under mechanism-aware counting.
        present_rows: register rows of the individuals present in the snapshot (presence
            mode), shape (P,); None means every register individual.
    """

    keys: npt.ArrayLike | CodedRows
    ids: npt.ArrayLike
    presence: bool = False
    present_rows: npt.ArrayLike | None = None


@dataclass(frozen=True)
class PriorState:
    """The state before the draft: what is protected and what earlier releases linked.

    Attributes:
        protected: the protected values, in the column order of ``survival``.
        survival: survival product Π(1 - n_{j,s}/n_j) per individual and value before the
            draft, shape (N, V) (ones before the first release); or, with
            ``history_class``, one row per history class, shape (C, V).
        ell: ℓ, scalar or one per register individual, shape (N,); decides ``exceeds``.
        history_class: the row of ``survival`` of every register individual, shape (N,),
            ints in [0, C): the statistics file's compact form, not an (N, V) array, which
            grows with individuals times protected values.
        propensity_ratio: ρ of the draft: its groups are charged ``min(n_j, ρ·n_s)``
            records (:func:`anonymizer.privacy.charged_counts`).
    """

    protected: Sequence[str]
    survival: npt.ArrayLike
    ell: float | npt.ArrayLike = 2.0
    history_class: npt.ArrayLike | None = None
    propensity_ratio: PropensityRatio = 1


@dataclass(frozen=True)
class SnapshotRecords:
    """The snapshot the draft anonymizes, for mechanism-aware counting
    (docs/threat-model.md): the register row of every record, shape (R,), and the index
    of its value in the protected values or -1, shape (R,)."""

    rows: npt.ArrayLike
    value: npt.ArrayLike


@dataclass(frozen=True)
class DraftGroups:
    """The groups of a draft: node ids, record counts and protected-value counts.

    Attributes:
        nodes: node id per QI of every group, shape (G, d); groups numbered by first
            appearance in the draft.
        records: published records per group, shape (G,).
        counts: records per group and protected value, shape (G, V).
        group_of_record: group of every draft row, -1 where a QI label is unknown, shape (R,).
        unknown_records: rows dropped because a QI label is not a node of its hierarchy.
    """

    nodes: IntArray
    records: IntArray
    counts: IntArray
    group_of_record: IntArray
    unknown_records: int


def draft_groups(
    draft: pd.DataFrame | Draft,
    qis: Sequence[str],
    sensitive: str,
    hierarchies: Mapping[str, Hierarchy],
    protected: Sequence[str],
) -> DraftGroups:
    """Groups of the draft (distinct QI label tuples) with their counts.

    Rows carrying a label that is not a node of its hierarchy belong to no group (the
    contract suite reports them); they are counted in ``unknown_records``. A :class:`Draft`
    is read through its :attr:`Draft.labels` (columns factorized once for every check);
    the groups are the same as from its table.
    """
    labels = draft.labels if isinstance(draft, Draft) else None
    table = draft.table if isinstance(draft, Draft) else draft
    r = len(table)
    hs = [hierarchies[q] for q in qis]
    nodes = labels.nodes(qis, hierarchies) if labels is not None else record_nodes(table, qis, hs)
    known = (nodes >= 0).all(axis=1)
    value_index = {v: i for i, v in enumerate(protected)}
    if labels is not None:
        s_codes, s_uniques = labels.codes(sensitive)
    else:
        s_codes, s_uniques = pd.factorize(table[sensitive], use_na_sentinel=True)
    s_map = np.array([value_index.get(str(u), -1) for u in s_uniques], dtype=np.int64)
    s_codes = np.asarray(s_codes, dtype=np.int64)
    rec_value = np.where(s_codes >= 0, s_map[np.maximum(s_codes, 0)], -1) if s_map.size else np.full(r, -1)
    groups = group_release(nodes[known], rec_value[known], len(protected), hs)
    group_of_record = np.full(r, -1, dtype=np.int64)
    group_of_record[known] = groups.of_record
    return DraftGroups(
        nodes=groups.nodes,
        records=groups.records,
        counts=groups.counts,
        group_of_record=group_of_record,
        unknown_records=int((~known).sum()),
    )


def _history_classes(surv: FloatArray, ell: FloatArray, members: IntArray, row_of: IntArray | None) -> IntArray:
    """Dense class per member: equal survival rows and equal ℓ share a class. With
    ``row_of`` (survival given per history class) the member's class row is the key."""
    everyone = members.size == ell.shape[0] and bool((members == np.arange(members.size)).all())
    if row_of is not None:
        key = factorize(row_of if everyone else row_of[members])[0]
        cols = [np.asarray(ell)]
    else:
        key = np.zeros(members.size, dtype=np.int64)
        cols = [surv[:, j] for j in range(surv.shape[1])] + [np.asarray(ell)]
    for col in cols:  # one column at a time: no (N, V) copy
        c = col if everyone else col[members]
        if c.size and c.min() == c.max():
            continue  # a constant column (no history yet) separates nobody
        codes = np.asarray(pd.factorize(c)[0], dtype=np.int64)
        key = factorize(key * (int(codes.max()) + 1) + codes)[0]
    return key


def g_max_fits(a: IntArray) -> bool:
    """Whether an int array fits int32 (keeps the breach table compact)."""
    return not a.size or int(a.max()) < 2**31 - 1


def _exceeds(survival: FloatArray, n_j: IntArray, n_s: IntArray, ell: FloatArray, p: FloatArray) -> BoolArray:
    """Exact verdict ``p > 1/ℓ`` per row.

    Decided in floating point outside :data:`anonymizer.privacy.UNDECIDED_BAND` of the
    bound; inside it, once per distinct (survival, n_j, n_s, ℓ), in rational arithmetic:
    the survival before is the exact rational of its float, the draft's factor is exact
    (``privacy.exact_breach``), so floating point never turns a violation into a pass.
    """
    bound = 1.0 / ell
    verdict = p > bound
    band = np.flatnonzero(np.abs(p - bound) <= UNDECIDED_BAND)
    if band.size:
        figures = pd.DataFrame({"s": survival[band], "n": n_j[band], "k": n_s[band], "l": ell[band]})
        distinct = figures.groupby(["s", "n", "k", "l"], sort=False).ngroup().to_numpy()
        codes, first = factorize(np.asarray(distinct, dtype=np.int64))
        decided = np.empty(first.size, dtype=bool)
        for u, row in enumerate(first):  # one exact decision per distinct figure tuple
            i = int(band[row])
            before = Fraction(float(survival[i]))
            factor = 1 - exact_breach([(int(n_j[i]), int(n_s[i]))])
            decided[u] = 1 - before * factor > 1 / Fraction(float(ell[i]))
        verdict[band] = decided[codes]
    return np.asarray(verdict, dtype=bool)


@dataclass(frozen=True)
class BreachComputation:
    """The breach table and the per-group figures it was computed from.

    Attributes:
        table: one row per (register individual, protected value, group) linked by the
            draft, columns :data:`BREACH_COLUMNS`.
        groups: one row per draft group: ``group``, ``records``, ``candidates`` (members
            covered by the region), ``n_j`` (the denominator used: ``records`` under
            presence, else ``max(candidates, records)``) and ``max_n_s`` (the largest count
            of one protected value).
        unknown_records: draft rows left out because a QI label is not a hierarchy node.
        uncovered_records: with the snapshot given (mechanism-aware counting), its records
            whose QI values lie in no draft group's region; such a record is charged
            nowhere, so a release with any is invalid under that model. 0 without it.
        excess_records: with the snapshot given, draft records beyond what the snapshot
            holds in their group's region, overall or of one protected value (a draft that
            is not the snapshot's anonymization). 0 without it.
        mechanism_aware: the counts are the snapshot's (the snapshot was given).
        per_unit: ``table`` has one row per unit with its ``weight`` (see
            :func:`compute_breach`), not one per individual.
        group_of_record: the group of every draft row, -1 where a QI label is unknown,
            shape (R,) (:attr:`DraftGroups.group_of_record`): the report's per-record
            figures take it rather than grouping the draft's labels again.
        presence_shown: what the draft reveals about who was in the snapshot, whatever the
            dilution (:class:`PresenceShown`; docs/threat-model.md, "What a release
            reveals about presence").
    """

    table: pd.DataFrame
    groups: pd.DataFrame
    unknown_records: int
    uncovered_records: int = 0
    excess_records: int = 0
    mechanism_aware: bool = False
    per_unit: bool = False
    group_of_record: IntArray | None = None
    presence_shown: PresenceShown | None = None


def _survival_rows(surv: FloatArray, history_class: npt.ArrayLike | None, n_ind: int, v: int) -> IntArray | None:
    """Check the history's shapes; the row of ``surv`` per individual (None: row = individual)."""
    if history_class is None:
        if surv.shape != (n_ind, v):
            raise ValueError(f"PriorState.survival must have shape ({n_ind}, {v}), got {surv.shape}")
        return None
    row_of = np.asarray(history_class)
    if not np.issubdtype(row_of.dtype, np.integer):
        raise ValueError(f"PriorState.history_class must hold integer rows, got dtype {row_of.dtype}")
    row_of = row_of.astype(np.int64, copy=False)
    if surv.ndim != 2 or surv.shape[1] != v:
        raise ValueError(f"PriorState.survival must have shape (classes, {v}), got {surv.shape}")
    if row_of.shape != (n_ind,):
        raise ValueError(f"PriorState.history_class must have shape ({n_ind},), got {row_of.shape}")
    if n_ind and (int(row_of.min()) < 0 or int(row_of.max()) >= surv.shape[0]):
        raise ValueError(f"PriorState.history_class must hold rows of PriorState.survival, 0..{surv.shape[0] - 1}")
    return row_of


def compute_breach(
    draft: Draft,
    population: Population,
    prior: PriorState,
    snapshot: SnapshotRecords | None = None,
    *,
    per_unit: bool = False,
    unit_classes: npt.ArrayLike | None = None,
) -> BreachComputation:
    """Breach table and group figures of a draft; see :func:`breach_table`.

    With ``snapshot`` the counts are mechanism-aware
    (docs/threat-model.md): ``n_s`` of a group is every snapshot record of s whose QI
    values lie in its region, published or not, and under presence ``n_j`` is every
    present individual in the region; ``present_rows`` is then ignored (the snapshot's
    rows are the present individuals). Without it the counts are the draft's own (paper
    004's published-count model).

    With ``per_unit`` the table is not expanded to individuals: one row per unit (register
    individuals sharing their QI combination and history, hence every figure), naming one
    of them as ``individual`` (categorical over the representatives' ids only), its register
    row as ``row`` and their number as ``weight``. The report uses it; at 5M register
    individuals the expansion is most of the cost. ``unit_classes`` (one int per
    register individual, shape (N,)) splits units further, so that every member of a unit
    also shares the caller's class (the report keeps per-class linked-release counts,
    which the survival product alone does not determine). Validation and the report share
    one such computation per release.

    Raises:
        ValueError: inconsistent shapes, or duplicate register ids (per unit: among the
            units' representatives; the register suite checks them all before a draft).
    """
    qis, sensitive, hierarchies, protected = draft.qis, draft.sensitive, draft.hierarchies, prior.protected
    presence, present_rows = population.presence, population.present_rows
    keys = population.keys
    if not isinstance(keys, CodedRows):  # the register's coded rows are used as they are
        keys = np.asarray(keys)
        if keys.dtype.kind not in "iu":
            keys = keys.astype(np.int64)
    n_ind = keys.shape[0]
    surv = np.asarray(prior.survival, dtype=np.float64)
    v = len(protected)
    row_of = _survival_rows(surv, prior.history_class, n_ind, v)
    ell_ind = np.broadcast_to(np.asarray(prior.ell, dtype=np.float64), (n_ind,))
    ids = population.ids if isinstance(population.ids, pd.Index) else pd.Index(np.asarray(population.ids))
    if len(ids) != n_ind:
        raise ValueError("Population.ids must hold one id per register row (Population.keys)")
    hs = [hierarchies[q] for q in qis]
    dg = draft_groups(draft, qis, sensitive, hierarchies, protected)
    g = dg.records.size

    # candidates: distinct QI combinations of the members (present individuals or everyone)
    if snapshot is not None:
        snap_rows = np.asarray(snapshot.rows, dtype=np.int64)
        snap_value = np.asarray(snapshot.value, dtype=np.int64)
        if snap_rows.shape != snap_value.shape:
            raise ValueError("snapshot: one protected-value index per record is needed")
        present_rows = snap_rows
    everyone = not presence or present_rows is None
    members = np.arange(n_ind, dtype=np.int64) if everyone else np.asarray(present_rows, dtype=np.int64)
    # everyone's keys as given: coded rows are grouped already
    cells = RegisterCells.of(keys if everyone else keys[members], hs)
    cell_of_member, first, cell_count = cells.of_individual, cells.first, cells.counts
    pc, pg = cover_pairs(dg.nodes, cells.leaves, [h.index for h in hs])
    in_region = np.bincount(pg, weights=cell_count[pc], minlength=g).astype(np.int64)
    counts, uncovered, excess = dg.counts, 0, 0
    if snapshot is not None:
        counts, records_in, uncovered = _snapshot_counts(snap_rows, snap_value, members, cell_of_member, pc, pg, g, v)
        excess = int(np.maximum(dg.records - records_in, 0).sum() + np.maximum(dg.counts - counts, 0).sum())
        # every present individual of the region is a candidate, published or not
        n_j = in_region if presence else np.maximum(in_region, dg.records)
    else:
        # a group cannot hold more records than candidates: if the register misses some, count records
        n_j = dg.records.copy() if presence else np.maximum(in_region, dg.records)
    max_n_s = counts.max(axis=1) if v else np.zeros(g, dtype=np.int64)
    groups = pd.DataFrame(
        {"group": np.arange(g), "records": dg.records, "candidates": in_region, "n_j": n_j, "max_n_s": max_n_s}
    )
    # over every register individual: under presence the members above are the present ones only
    shown = (
        presence_shown(cells, dg.nodes, dg.records, hs, (pc, pg))
        if everyone
        else presence_shown(RegisterCells.of(keys, hs), dg.nodes, dg.records, hs)
    )

    # (cell, group, value) rows for every protected value the group holds
    nz_g, nz_v = np.nonzero(counts)  # row-major: sorted by group
    per_group = np.bincount(nz_g, minlength=g).astype(np.int64)
    gstart = np.zeros(g + 1, dtype=np.int64)
    np.cumsum(per_group, out=gstart[1:])
    rep, k = expand_csr(pg, gstart, np.arange(nz_g.size, dtype=np.int64))
    row_cell, row_group, row_value = pc[rep], nz_g[k].astype(np.int64), nz_v[k].astype(np.int64)

    # units: members sharing a combination and a history (survival row and ℓ) share every
    # figure, so p and the exact verdict are computed once per unit and value
    hist_class = _history_classes(surv, ell_ind, members, row_of)
    if unit_classes is not None:
        extra = np.asarray(unit_classes, dtype=np.int64)[members]
        hist_class = factorize(hist_class * (int(extra.max(initial=0)) + 1) + extra)[0]
    n_class = int(hist_class.max()) + 1 if hist_class.size else 1
    unit_of_member, unit_first = factorize(cell_of_member * n_class + hist_class)
    unit_count = np.bincount(unit_of_member, minlength=unit_first.size).astype(np.int64)
    unit_cell = cell_of_member[unit_first]
    unit_order = np.argsort(unit_cell, kind="stable")
    ustart = np.zeros(first.size + 1, dtype=np.int64)
    np.cumsum(np.bincount(unit_cell, minlength=first.size), out=ustart[1:])
    rep, unit = expand_csr(row_cell, ustart, unit_order)
    grp, val = row_group[rep], row_value[rep]
    nj, ns = n_j[grp], counts[grp, val]
    rho = propensity_ratios(prior.propensity_ratio, counts.shape[1])
    charged = charged_counts(nj, ns, rho if rho.ndim == 0 else rho[val])
    rep_member = members[unit_first[unit]]
    before = surv[rep_member if row_of is None else row_of[rep_member], val]
    p = breach_after_release(before, nj, charged)
    exceeds = _exceeds(before, nj, charged, ell_ind[rep_member], p)
    if per_unit:
        # the ids of the units' representatives only: a categorical over all N register ids
        # would hash them all to check their uniqueness in every process
        named, named_code = np.unique(rep_member, return_inverse=True)
        table = pd.DataFrame(
            {
                "individual": pd.Categorical.from_codes(named_code.reshape(-1), categories=ids[named]),
                "row": rep_member,
                "value": pd.Categorical.from_codes(val.astype(np.int16), categories=pd.Index(list(protected))),
                "p": p,
                "n_j": nj,
                "n_s": ns,
                "group": grp,
                "exceeds": exceeds,
                "weight": unit_count[unit],
            },
            copy=False,
        )
        return BreachComputation(
            table=table,
            groups=groups,
            unknown_records=dg.unknown_records,
            uncovered_records=uncovered,
            excess_records=excess,
            mechanism_aware=snapshot is not None,
            per_unit=True,
            group_of_record=dg.group_of_record,
            presence_shown=shown,
        )

    id_type = pd.CategoricalDtype(ids)  # raises ValueError on duplicate ids
    # expand to individuals: members sorted by unit
    order = np.argsort(unit_of_member, kind="stable")
    mstart = np.zeros(unit_first.size + 1, dtype=np.int64)
    np.cumsum(unit_count, out=mstart[1:])
    rep, member_pos = expand_csr(unit, mstart, order)
    int_type = np.int32 if g_max_fits(np.r_[nj, ns, grp, members.size]) else np.int64
    table = pd.DataFrame(
        {
            "individual": pd.Categorical.from_codes(members[member_pos], dtype=id_type),
            "value": pd.Categorical.from_codes(val.astype(np.int16)[rep], categories=pd.Index(list(protected))),
            "p": p[rep],
            "n_j": nj.astype(int_type)[rep],
            "n_s": ns.astype(int_type)[rep],
            "group": grp.astype(int_type)[rep],
            "exceeds": exceeds[rep],
        },
        copy=False,
    )
    return BreachComputation(
        table=table,
        groups=groups,
        unknown_records=dg.unknown_records,
        uncovered_records=uncovered,
        excess_records=excess,
        mechanism_aware=snapshot is not None,
        group_of_record=dg.group_of_record,
        presence_shown=shown,
    )


def _snapshot_counts(
    rows: IntArray,
    value: IntArray,
    members: IntArray,
    cell_of_member: IntArray,
    pc: IntArray,
    pg: IntArray,
    g: int,
    v: int,
) -> tuple[IntArray, IntArray, int]:
    """n*_{g,s}: snapshot records of every protected value per group whose region holds
    them (all groups covering a record, should regions overlap), shape (G, V); the
    snapshot records of any value per group, shape (G,); and the number of records that
    no region covers."""
    position = np.full(int(members.max(initial=-1)) + 1, -1, dtype=np.int64)
    position[members] = np.arange(members.size, dtype=np.int64)
    rec_cell = cell_of_member[position[rows]]
    order = np.argsort(pc, kind="stable")
    cstart = np.zeros(int(cell_of_member.max(initial=-1)) + 2, dtype=np.int64)
    np.cumsum(np.bincount(pc, minlength=cstart.size - 1), out=cstart[1:])
    per_record = cstart[rec_cell + 1] - cstart[rec_cell]
    rep, grp = expand_csr(rec_cell, cstart, pg[order])
    records = np.bincount(grp, minlength=g).astype(np.int64)
    hit = value[rep] >= 0
    counts = np.bincount(grp[hit] * v + value[rep][hit], minlength=g * v).reshape(g, v).astype(np.int64)
    return counts, records, int((per_record == 0).sum())


def breach_table(draft: Draft, population: Population, prior: PriorState) -> pd.DataFrame:
    """One row per (register individual, protected value) that the draft links, under
    paper 004's published-count model (:func:`compute_breach` with the snapshot gives the
    mechanism-aware counts).

    Returns:
        DataFrame with columns ``individual`` (register id, categorical), ``value``
        (categorical), ``p`` (float), ``n_j``, ``n_s``, ``group`` (index of the draft group
        in order of first appearance, as :func:`region_spans`), ``exceeds`` (exact verdict
        ``p > 1/ℓ``). An individual covered by two overlapping groups (an invalid draft)
        gets one row per group.

    Raises:
        ValueError: inconsistent shapes, or duplicate register ids.
    """
    return compute_breach(draft, population, prior).table


def region_spans(draft: pd.DataFrame | Draft, qis: Sequence[str], hierarchies: Mapping[str, Hierarchy]) -> pd.DataFrame:
    """Per draft group and QI, the leaf interval of its label in depth-first leaf order
    (:attr:`anonymizer.hierarchy.Hierarchy.index`). A :class:`Draft` is grouped through its
    :attr:`Draft.labels`, which the breach computation shares.

    Returns:
        one row per group (numbered as in :func:`breach_table`): ``group``, the QI labels,
        ``<qi>_lo`` and ``<qi>_hi`` (inclusive) for every QI. Rows whose labels are not
        hierarchy nodes form no group.
    """
    dg = draft_groups(draft, qis, qis[0] if qis else "", hierarchies, []) if qis else None
    out: dict[str, Any] = {}
    if dg is None:
        rows = len(draft.table) if isinstance(draft, Draft) else len(draft)
        return pd.DataFrame({"group": np.zeros(1 if rows else 0, dtype=np.int64)})
    out["group"] = np.arange(dg.records.size)
    for a, qi in enumerate(qis):
        h = hierarchies[qi]
        out[qi] = np.asarray(h.labels, dtype=object)[dg.nodes[:, a]]
    for a, qi in enumerate(qis):
        spans = hierarchies[qi].index
        out[f"{qi}_lo"] = spans.lo[dg.nodes[:, a]]
        out[f"{qi}_hi"] = spans.hi[dg.nodes[:, a]]
    return pd.DataFrame(out)
