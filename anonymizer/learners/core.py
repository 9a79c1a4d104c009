"""The learning adversary's core: posteriors learned from published groups and the register.

The charge of a group G's candidate o for value s is uniform, c_s(G)/|reg(G)| (paper 004,
section 4). An adversary can learn from the releases and the register how s depends on
the QIs and re-weight each group's candidates by that propensity (Kifer, "Attacks on
privacy and deFinetti's theorem", SIGMOD 2009). This module runs the learners that
docs/threat-model.md ("The learning adversary") defines on a :class:`LearnerSeries`:

- E(o, s) = Σ_t p_t(o, s), p_t(o, s) = c_s(G)/|reg(G)| for o's group G in release t (0 where
  o lies in no region of t), over every sensitive value, protected or not;
- π(o, s) = P(s | QI leaves of o): naive Bayes (:func:`fit_nb`) or a multinomial logistic
  model with pairwise interactions (:mod:`.logistic`), fitted on the soft labels E;
- p'_t(o, s) = min(1, c_s(G) π(o, s) / Σ_{o'∈G} π(o', s)) and P'(o, s) = 1 − Π_t (1 − p'_t(o, s))
  (:func:`reweight`), reported for the protected values; EM passes recompute E = Σ_t p'_t.

It lives below both readers of a series so that each runs the same learners on what it
holds: the audit prepares the series from a public copy's files
(:func:`serialpub.analysis.audit.learners.learner_series`), the planner and the release
report from releases resolved against one register in memory (:func:`cell_series`). It
reads published groups and the register only, never the search.

Cost. π depends only on an individual's QI leaves, so all work is per register cell (with
its multiplicity) and per group; serial cells carry a cell's factors across register
versions. Time and memory grow with (cells) × (sensitive values) × (releases) per pass.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import numpy.typing as npt
import pandas as pd

from anonymizer.learners.figures import FloatArray, LearnerFigures, LearnerReport, bands
from anonymizer.learners.ratios import realized_ratios

IntArray = npt.NDArray[np.int64]

#: the learners, in the order they are reported; ``uniform`` is the charge itself
LEARNERS = ("nb", "nb-em3", "nb-em10", "logistic-pairs")
#: EM passes of the ``nb-em*`` learners
EM_PASSES: Mapping[str, int] = MappingProxyType({"nb-em3": 3, "nb-em10": 10})


@dataclass(frozen=True)
class Version:
    """One register version's cells: their QI leaves as codes of the series' leaf
    vocabulary (C, d) and the individuals each stands for (C,)."""

    leaves: IntArray
    counts: IntArray


@dataclass(frozen=True)
class Release:
    """One release as the learners read it: its register version, its candidate pairs
    (cell ``cell[i]`` of that version in group ``group[i]``, both (P,)), each group's
    |reg(G)| (or its records, if more) (G,), its records per sensitive value of the domain
    (G, S), and its column of the serial cells' indices (-1: not in this register). The
    pairs are sorted by group."""

    version: int
    cell: IntArray
    group: IntArray
    candidates: IntArray
    counts: IntArray
    serial: IntArray
    starts: IntArray
    disjoint: bool

    @classmethod
    def of(
        cls, version: int, cell: IntArray, group: IntArray, candidates: IntArray, counts: IntArray, serial: IntArray
    ) -> Release:
        """The release with its pairs sorted by group; ``starts``: the first pair of every
        group that has candidates; ``disjoint``: no cell lies in two groups (the regions do
        not overlap)."""
        order = np.lexsort((cell, group))
        cell, group = cell[order], group[order]
        starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]]) if group.size else group
        disjoint = bool(np.unique(cell).size == cell.size)
        return cls(version, cell, group, candidates, counts, serial, starts, disjoint)


@dataclass(frozen=True)
class LearnerSeries:
    """Everything the learners read, prepared from the audit's own geometry.

    Attributes:
        qis: the quasi-identifiers; ``vocab[a]``: the leaf labels of QI a over every
            hierarchy version (the features' vocabulary).
        domain: the sensitive values (the protected ones first, in ``values`` order, then
            every other published value); S = len(domain), P = len(values).
        versions, releases: see :class:`Version`, :class:`Release`.
        ids, code, first, counts: the register individuals of every version (U), their
            serial cell (U,), one individual (U index) per serial cell and its size (K,).
        truth: individuals of each serial cell who carry each protected value in at least
            one release's snapshot (K, P), or None without the snapshots.
    """

    qis: list[str]
    vocab: list[list[str]]
    domain: list[str]
    values: list[str]
    ell: float
    versions: list[Version]
    releases: list[Release]
    ids: pd.Index
    code: IntArray
    first: IntArray
    counts: IntArray
    truth: IntArray | None

    @property
    def n_values(self) -> int:
        return len(self.domain)


def cell_series(
    qis: list[str],
    n_leaves: Sequence[int],
    cell_leaves: IntArray,
    cell_counts: IntArray,
    releases: Sequence[tuple[IntArray, IntArray, IntArray]],
    domain: list[str],
    values: list[str],
    ell: float,
    ids: pd.Index,
    cell_of: IntArray,
) -> LearnerSeries:
    """The learners' inputs from a series held in memory over one register (the planner's:
    :mod:`serialpub.planning.series`), without files: the same :class:`LearnerSeries` that
    :func:`serialpub.analysis.audit.learners.learner_series` prepares from the audit's
    geometry of the same series.

    Args:
        qis: the quasi-identifiers; ``n_leaves[a]``: the leaves of QI a's hierarchy (the
            features' vocabulary, leaf ids ``0..n_leaves[a]-1``).
        cell_leaves, cell_counts: the register's cells, leaf id per QI (C, d), and the
            individuals in each (C,).
        releases: per release, the group whose region holds each cell, -1 for none (C,)
            (regions that do not overlap), each group's |reg(G)| (or its records, if more)
            (G,) and its records per value of ``domain`` (G, S).
        domain: the sensitive values, the protected ``values`` first in their order.
        ell: the guarantee's ℓ.
        ids, cell_of: the register's individual ids (N,) and the cell of each (N,).

    Raises:
        ValueError: a domain that does not start with ``values``, or a release whose arrays
            do not match the cells or the domain."""
    if list(domain[: len(values)]) != list(values):
        raise ValueError("the domain must list the protected values first, in their order")
    n_cells = cell_counts.size
    out = []
    for group_of_cell, candidates, counts in releases:
        if group_of_cell.shape != (n_cells,) or counts.shape != (candidates.size, len(domain)):
            raise ValueError(
                f"a release of {group_of_cell.size} cells and {counts.shape} counts for {n_cells} cells, "
                f"{candidates.size} groups and {len(domain)} values"
            )
        inside = np.flatnonzero(group_of_cell >= 0).astype(np.int64)
        out.append(
            Release.of(
                0,
                inside,
                group_of_cell[inside].astype(np.int64),
                candidates.astype(np.int64),
                counts.astype(np.int64),
                np.arange(n_cells, dtype=np.int64),
            )
        )
    first = np.full(n_cells, -1, dtype=np.int64)
    first[cell_of[::-1]] = np.arange(cell_of.size - 1, -1, -1)  # lowest index wins, as the serial cells'
    vocab = [[str(i) for i in range(n)] for n in n_leaves]
    return LearnerSeries(
        list(qis),
        vocab,
        list(domain),
        list(values),
        ell,
        [Version(cell_leaves.astype(np.int64), cell_counts)],
        out,
        ids,
        np.asarray(cell_of, dtype=np.int64),
        first,
        cell_counts.astype(np.int64),
        None,
    )


def _per_row(index: IntArray, weights: FloatArray, n: int) -> FloatArray:
    """Column-wise sums of ``weights`` (P, S) by row ``index`` (P,): shape (n, S)."""
    columns = np.ascontiguousarray(weights.T)  # one contiguous pass per column
    out = np.empty((n, weights.shape[1]), dtype=np.float64)
    for s in range(weights.shape[1]):
        out[:, s] = np.bincount(index, weights=columns[s], minlength=n)
    return out


def _per_cell(r: Release, weights: FloatArray, n: int) -> FloatArray:
    """Sums of ``weights`` (P, S) per cell of ``r``: shape (n, S). Disjoint regions put a
    cell in one group at most, so the sum is a scatter."""
    if not r.disjoint:
        return _per_row(r.cell, weights, n)
    out = np.zeros((n, weights.shape[1]), dtype=np.float64)
    out[r.cell] = weights
    return out


def _per_group(r: Release, weights: FloatArray) -> FloatArray:
    """Sums of ``weights`` (P, S) per group of ``r`` (its pairs are sorted by group): (G, S)."""
    out = np.zeros((r.candidates.size, weights.shape[1]), dtype=np.float64)
    if r.group.size:
        out[r.group[r.starts]] = np.add.reduceat(weights, r.starts, axis=0)
    return out


def fit_nb(series: LearnerSeries, weights: list[FloatArray]) -> list[FloatArray]:
    """Naive Bayes with Laplace smoothing 1 on soft counts: π(c, s) = P(s | c's leaves) per
    version cell (C, S), each row summing to 1.

    N(s) = Σ weights[., s]; N_a(v, s) = Σ over cells with leaf v on QI a; P(s) = (N(s) + 1) /
    (Σ N + S); P(v | s) = (N_a(v, s) + 1) / (N(s) + V_a), V_a the QI's leaves over every
    hierarchy version (docs/threat-model.md, "The learning adversary")."""
    n_s = sum(w.sum(axis=0) for w in weights)
    log_prior = np.log((n_s + 1.0) / (n_s.sum() + series.n_values))
    tables = []
    for a, names in enumerate(series.vocab):
        n_av = np.zeros((len(names), series.n_values))
        for v, w in zip(series.versions, weights, strict=True):
            n_av += _per_row(v.leaves[:, a], w, len(names))  # (C, S) by leaf: a handful of bincounts
        tables.append(np.log((n_av + 1.0) / (n_s + len(names))))
    out = []
    for v in series.versions:
        logit = np.broadcast_to(log_prior, (v.counts.size, series.n_values)).copy()
        for a, table in enumerate(tables):
            logit += table[v.leaves[:, a]]
        out.append(softmax(logit))
    return out


def softmax(logit: FloatArray) -> FloatArray:
    """Row-wise softmax of (C, S) logits."""
    z = np.exp(logit - logit.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def reweight(series: LearnerSeries, pi: list[FloatArray] | None) -> tuple[list[FloatArray], FloatArray]:
    """Every release re-weighted by π (per version cell (C, S); None: the uniform charge).

    Returns the next fitting weights, per version (C, S): m_c · Σ_t p'_t(c, s); and P'
    per serial cell and protected value (K, P), P' = 1 − Π_t (1 − p'_t)."""
    n_prot = len(series.values)
    weights = [np.zeros((v.counts.size, series.n_values)) for v in series.versions]
    log_survival = np.zeros((series.counts.size, n_prot))
    for r in series.releases:
        m = series.versions[r.version].counts
        n_cells = m.size
        if pi is None:
            p = r.counts[r.group] / r.candidates[r.group][:, None]
        else:
            mass = pi[r.version][r.cell]  # (P, S)
            total = _per_group(r, mass * m[r.cell][:, None])
            share = np.divide(mass, total[r.group], out=np.zeros_like(mass), where=total[r.group] > 0)
            p = np.minimum(1.0, r.counts[r.group] * share)
        weights[r.version] += _per_cell(r, p * m[r.cell][:, None], n_cells)
        with np.errstate(divide="ignore"):  # p' = 1 is a log-survival of -inf: P' = 1
            cell_log = _per_cell(r, np.log1p(-p[:, :n_prot]), n_cells)
        present = r.serial >= 0
        log_survival[present] += cell_log[r.serial[present]]
    return weights, -np.expm1(log_survival)


def posteriors(
    series: LearnerSeries, names: Sequence[str]
) -> Iterator[tuple[str, FloatArray, str | None, list[FloatArray] | None]]:
    """``uniform`` (the charge), then each learner of ``names`` (of :data:`LEARNERS`), in
    the order of :data:`LEARNERS`: its name, P' (K, P), a note on its fit (or None) and its
    π per version cell (C, S) (None for the charge). The EM learners share their first
    passes.

    Raises:
        ValueError: a name that is not in :data:`LEARNERS` (the command line refuses it
            before, :func:`serialpub.analysis.audit.learners.learner_names`)."""
    unknown = [n for n in names if n not in LEARNERS]
    if unknown:
        raise ValueError(f"unknown learner(s) {', '.join(unknown)}; known: {', '.join(LEARNERS)}")
    start, charge = reweight(series, None)
    yield "uniform", charge, None, None
    em = [n for n in LEARNERS if n in names and n != "logistic-pairs"]
    if em:
        passes = max(EM_PASSES.get(n, 0) for n in em)
        weights = start
        for k in range(passes + 1):
            pi = fit_nb(series, weights)
            weights, p = reweight(series, pi)
            for n in em:
                if EM_PASSES.get(n, 0) == k:
                    yield n, p, None, pi
    if "logistic-pairs" in names:
        from anonymizer.learners.logistic import fit_logistic  # scipy is imported only when asked

        fit = fit_logistic(series, start)
        yield "logistic-pairs", reweight(series, fit.pi)[1], fit.note, fit.pi


def learner_report(
    series: LearnerSeries, names: Sequence[str], notes: Sequence[str] = (), declared: IntArray | None = None
) -> LearnerReport:
    """The charge (``uniform``) and each learner of ``names``, summarized per
    :class:`LearnerFigures`; with ``series.truth``, calibrated; with ``declared``, ρ_s per
    release and protected value (T, P), whether each learner's realized ratio stays within
    it. Seconds: the time of each learner's own fit and re-weighting; the naive Bayes
    learners are one chain of passes, so each one's time runs from the end of the charge."""
    weight = np.broadcast_to(series.counts[:, None], (series.counts.size, len(series.values)))
    report = LearnerReport(series.ell, int(weight.sum()), notes=list(notes), calibrated=series.truth is not None)
    report.values = list(series.values)
    report.declared = [] if declared is None else [int(r) for r in declared.min(axis=0, initial=1000)]
    report.inputs = series
    charge: FloatArray | None = None
    bound = 1.0 / series.ell
    previous = time.perf_counter()
    after_charge = previous
    for name, p, note, pi in posteriors(series, names):
        now = time.perf_counter()
        if charge is None:
            charge, after_charge = p, now
        seconds = now - (after_charge if name.startswith("nb") else previous)
        previous = now
        realized = None if pi is None else realized_ratios(series, pi)
        top = np.unravel_index(int(np.argmax(p)), p.shape) if p.size else (0, 0)
        linked = p.size > 0 and float(p[top]) > 0
        above = p > bound
        report.learners.append(
            LearnerFigures(
                name=name,
                max_p=float(p[top]) if linked else 0.0,
                max_individual=str(series.ids[int(series.first[top[0]])]) if linked else None,
                max_value=series.values[int(top[1])] if linked else None,
                max_uniform=float(charge[top]) if linked else 0.0,
                above=int(weight[above].sum()),
                above_true=None if series.truth is None else int(series.truth[above].sum()),
                bands=bands(p, weight, series.truth, series.ell),
                seconds=seconds,
                note=note,
                ratios=[] if realized is None else [float(r) for r in realized.max(axis=0, initial=0.0)],
                max_per_value=[float(x) for x in p.max(axis=0, initial=0.0)],
                covered=None if realized is None or declared is None else np.all(realized <= declared, axis=0).tolist(),
            )
        )
    return report
