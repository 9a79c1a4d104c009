"""The ``logistic-pairs`` learner: a multinomial logistic model of P(s | QI leaves) with
pairwise interactions, fitted once on the soft labels E (docs/threat-model.md, "The
learning adversary").

Features of a register cell: one indicator per QI leaf, and one per pair of QIs (a, b)
and pair of leaves (v_a, v_b) that at least :data:`MIN_PAIR_SUPPORT` register individuals
hold (summed over the register versions); rarer pairs get no feature, which keeps the
model's size bounded by the register. The fit minimizes the weighted cross-entropy per
unit of label mass plus an L2 penalty on the coefficients (not the intercepts):

    L(W, b) = (1/T) Σ_c Σ_s Y(c, s) (log Σ_s' exp z(c, s') − z(c, s)) + (λ/2) ||W||²,
    z(c, ·) = x_c W + b,  Y(c, s) = m_c E(c, s),  T = Σ Y,

with scipy's L-BFGS-B from W = 0, b = 0 until every gradient component is at most
:data:`GTOL` in absolute value (no randomness: the same copy gives the same fit).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import scipy.optimize
import scipy.sparse as sp

from anonymizer.learners.core import LearnerSeries, softmax
from anonymizer.learners.figures import FloatArray, IntArray

#: L2 strength λ of the coefficients, per unit of label mass
L2 = 1e-4
#: register individuals a leaf pair needs to get a feature of its own
MIN_PAIR_SUPPORT = 20
#: the fit stops when every component of the gradient is at most this, in absolute value
GTOL = 1e-5
#: L-BFGS-B iterations at most (a fit that stops there says so in the report)
MAX_ITER = 2000
MAXCOR = 20


@dataclass(frozen=True)
class LogisticFit:
    """A fitted model: ``features`` names each column (``(a,)`` + leaf for a leaf of QI
    a, ``(a, b)`` + (leaf of a, leaf of b) for a pair), coefficients (F, S) and intercepts
    (S,), π per version cell (C, S), the largest absolute gradient component at the end,
    the iterations, and a note when the fit did not reach :data:`GTOL`."""

    features: list[tuple[tuple[int, ...], tuple[int, ...]]]
    coef: FloatArray
    intercept: FloatArray
    pi: list[FloatArray]
    gradient: float
    iterations: int
    note: str | None


def design(series: LearnerSeries) -> tuple[list[sp.csr_matrix], list[tuple[tuple[int, ...], tuple[int, ...]]]]:
    """The feature matrix of every version's cells (C, F) and the name of each column."""
    d = len(series.qis)
    sizes = [len(v) for v in series.vocab]
    names: list[tuple[tuple[int, ...], tuple[int, ...]]] = [((a,), (v,)) for a in range(d) for v in range(sizes[a])]
    offsets = np.cumsum([0, *sizes])
    columns: list[list[IntArray]] = [[v.leaves[:, a] + offsets[a] for a in range(d)] for v in series.versions]
    width = int(offsets[-1])
    for a, b in itertools.combinations(range(d), 2):
        keys = [v.leaves[:, a] * sizes[b] + v.leaves[:, b] for v in series.versions]
        support = np.zeros(sizes[a] * sizes[b], dtype=np.int64)
        for k, v in zip(keys, series.versions, strict=True):
            support += np.bincount(k, weights=v.counts, minlength=support.size).astype(np.int64)
        kept = np.flatnonzero(support >= MIN_PAIR_SUPPORT)
        column_of = np.full(support.size, -1, dtype=np.int64)
        column_of[kept] = width + np.arange(kept.size)
        names.extend(((a, b), (int(x) // sizes[b], int(x) % sizes[b])) for x in kept)
        width += kept.size
        for cols, k in zip(columns, keys, strict=True):
            cols.append(column_of[k])
    matrices = []
    for v, cols in zip(series.versions, columns, strict=True):
        mat = np.stack(cols, axis=1)
        rows = np.broadcast_to(np.arange(v.counts.size)[:, None], mat.shape)
        on = mat >= 0
        matrices.append(sp.csr_matrix((np.ones(int(on.sum())), (rows[on], mat[on])), shape=(v.counts.size, width)))
    return matrices, names


def objective(theta: FloatArray, x: sp.csr_matrix, y: FloatArray) -> tuple[float, FloatArray]:
    """L (the module's formula) and its gradient at ``theta`` (coefficients (F, S)
    flattened, then intercepts (S,)); ``x`` (R, F), ``y`` (R, S) the label mass."""
    n_features, n_values = x.shape[1], y.shape[1]
    coef = theta[: n_features * n_values].reshape(n_features, n_values)
    z = x @ coef + theta[n_features * n_values :]
    top = z.max(axis=1, keepdims=True)
    lse = top[:, 0] + np.log(np.exp(z - top).sum(axis=1))
    mass = y.sum(axis=1)
    total = float(mass.sum())
    loss = float((mass * lse - (y * z).sum(axis=1)).sum()) / total + 0.5 * L2 * float((coef * coef).sum())
    g = (mass[:, None] * np.exp(z - lse[:, None]) - y) / total
    grad = np.concatenate([(x.T @ g + L2 * coef).ravel(), g.sum(axis=0)])
    return loss, grad


def fit_logistic(series: LearnerSeries, weights: list[FloatArray]) -> LogisticFit:
    """Fit on the soft labels ``weights`` (per version, (C, S): m_c E(c, s)) and return the
    model with π per version cell (each row sums to 1)."""
    matrices, names = design(series)
    x = sp.vstack(matrices, format="csr")
    y = np.vstack(weights)
    labelled = y.sum(axis=1) > 0  # cells in no group carry no label mass
    x, y = x[labelled], y[labelled]
    n_features, n_values = x.shape[1], series.n_values
    theta0 = np.zeros(n_features * n_values + n_values)
    if not labelled.any():
        res_x, gradient, iterations = theta0, 0.0, 0
    else:
        res = scipy.optimize.minimize(
            objective,
            theta0,
            args=(x, y),
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": MAX_ITER, "gtol": GTOL, "ftol": 0.0, "maxcor": MAXCOR},
        )
        res_x, iterations = res.x, int(res.nit)
        gradient = float(np.abs(objective(res_x, x, y)[1]).max())
    coef = res_x[: n_features * n_values].reshape(n_features, n_values)
    intercept = res_x[n_features * n_values :]
    pi = [softmax(np.asarray(m @ coef) + intercept) for m in matrices]
    note = None
    if gradient > GTOL:
        note = (
            f"the fit stopped after {iterations} iterations with a gradient of {gradient:.2g} (tolerance {GTOL:g}); "
            "its posteriors are those of the model reached"
        )
    return LogisticFit(names, coef, intercept, pi, gradient, iterations, note)
