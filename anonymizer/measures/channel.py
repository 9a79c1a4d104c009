"""Information-theoretic privacy of a sanitization mechanism seen as a noisy channel
(Askari, Safavi-Naini & Barker, CODASPY'12, paper 003).

The mechanism is a noisy channel (paper 003 §3): its input is the original table T, its output
the published table T', its matrix ℙ(T'|T). Privacy is the adversary's error (Bayes risk) when
guessing T from T' with the MAP rule (§4.1 eq 1–7); the expected utility degradation of the
mechanism (§4.2 eq 16) also averages over the channel. Table utility (§4.2 eq 8–15) is
:mod:`.entropy_utility`'s; k-anonymity as a channel (§5) is :mod:`.kanonymity_channel`'s.

Corrections of the source, implemented here:

- eq 3 as printed maximizes the posterior ℙ(T|T'); the consistent form (eq 2, eq 5, the bounds
  and the Appendix example) is Error_f = 1 − (1/n) Σ_{T'} max_T ℙ(T'|T), column maxima of the
  channel matrix;
- eq 7 lacks the minus sign: H(T|T') = −Σ_{T'} ℙ(T') Σ_T ℙ(T|T') log₂ ℙ(T|T') (base 2, as the
  bound 2^{−H} of eq 6 implies).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Tolerance of the row-sum check of float channel matrices.
STOCHASTIC_TOL = 1e-9


# ---------------------------------------------------------------------------------------
# channel privacy (§4.1)


def _channel(channel: npt.ArrayLike) -> tuple[npt.NDArray[Any], bool]:
    a = np.asarray(channel)
    if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"the channel must be a non-empty (inputs, outputs) matrix, got shape {a.shape}")
    if a.dtype == object:
        if not all(isinstance(x, (int, Fraction)) for x in a.flat):
            raise ValueError("a channel of dtype object must hold ints or fractions.Fraction only")
        exact = True
        ok = all(sum(row) == 1 for row in a)
    else:
        if not np.issubdtype(a.dtype, np.number):
            raise ValueError(f"the channel must be numeric, got dtype {a.dtype}")
        a = a.astype(np.float64)
        if not np.isfinite(a).all():
            raise ValueError("the channel has non-finite entries")
        exact = False
        ok = bool(np.allclose(a.sum(axis=1), 1.0, rtol=0, atol=STOCHASTIC_TOL))
    if any(x < 0 for x in a.flat):
        raise ValueError("the channel has negative probabilities")
    if not ok:
        raise ValueError("every row ℙ(·|T) of the channel must sum to 1")
    return a, exact


def _prior(prior: npt.ArrayLike | None, n: int, exact: bool) -> npt.NDArray[Any]:
    if prior is None:
        return np.array([Fraction(1, n)] * n, dtype=object) if exact else np.full(n, 1.0 / n)
    p = np.asarray(prior)
    if p.shape != (n,):
        raise ValueError(f"the prior must have one probability per input table, shape ({n},), got {p.shape}")
    if p.dtype == object:
        if not all(isinstance(x, (int, Fraction)) for x in p.flat):
            raise ValueError("a prior of dtype object must hold ints or fractions.Fraction only")
        total_ok = sum(p) == 1
    else:
        p = p.astype(np.float64)
        total_ok = bool(np.isfinite(p).all() and abs(p.sum() - 1.0) <= STOCHASTIC_TOL)
    if any(x < 0 for x in p.flat) or not total_ok:
        raise ValueError("the prior must be non-negative and sum to 1")
    if exact and p.dtype != object:
        raise ValueError("an exact (Fraction) channel needs an exact prior or None")
    return p


def privacy_error(channel: npt.ArrayLike, prior: npt.ArrayLike | None = None) -> Any:
    """The adversary's MAP error of guessing the input table, the privacy of the mechanism
    (paper 003 §4.1 eq 5; eq 3 with the ERRATUM for the uniform prior).

    Error_f = 1 − Σ_{T'} max_T ℙ(T'|T)·ℙ(T); for the uniform prior 1 − (1/n) Σ_{T'} max_T ℙ(T'|T).
    Higher is more private; in [1 − m/n, 1 − 1/n] under the uniform prior (see :func:`error_bounds`).

    Args:
        channel: ℙ(T'|T), shape (n inputs, m outputs), rows sum to 1; float, or an object
            array of Fractions for an exact result.
        prior: ℙ(T), shape (n,), the adversary's background knowledge; None = uniform (no knowledge).

    Returns:
        Fraction for exact input, else float.

    Raises:
        ValueError: malformed channel or prior.
    """
    a, exact = _channel(channel)
    p = _prior(prior, a.shape[0], exact)
    best = (a * p[:, None]).max(axis=0)
    return 1 - sum(best) if exact else float(1.0 - best.sum())


def error_bounds(n_inputs: int, n_outputs: int) -> tuple[float, float]:
    """Bounds on the uniform-prior error (paper 003 §4.1): max(0, 1 − m/n) ≤ Error_f ≤ 1 − 1/n.

    The source states 1 − m/n, which assumes m ≤ n outputs (ERRATUM, docs/reports.md D7); the
    lower bound is clipped at 0 otherwise.

    Raises:
        ValueError: a count below 1.
    """
    if n_inputs < 1 or n_outputs < 1:
        raise ValueError("the channel needs at least one input and one output")
    return max(0.0, 1.0 - n_outputs / n_inputs), 1.0 - 1.0 / n_inputs


def posterior(channel: npt.ArrayLike, prior: npt.ArrayLike | None = None) -> tuple[FloatArray, FloatArray]:
    """ℙ(T') and the posterior ℙ(T|T') by Bayes (paper 003 §4.1).

    Returns:
        (p_out (m,), post (n, m)); a column of an output with ℙ(T') = 0 is all zeros.

    Raises:
        ValueError: malformed channel or prior.
    """
    a, exact = _channel(channel)
    p = _prior(prior, a.shape[0], exact)
    joint = np.asarray(a * p[:, None], dtype=np.float64)
    p_out = joint.sum(axis=0)
    post = np.divide(joint, p_out, out=np.zeros_like(joint), where=p_out > 0)
    return p_out, post


def map_decision(channel: npt.ArrayLike, prior: npt.ArrayLike | None = None) -> IntArray:
    """The MAP guess f(T') = argmax_T ℙ(T'|T)ℙ(T) for every output (paper 003 §3.1), shape (m,);
    ties go to the lowest input index. Raises ValueError for a malformed channel or prior."""
    a, exact = _channel(channel)
    p = _prior(prior, a.shape[0], exact)
    return np.asarray(np.argmax(np.asarray(a * p[:, None], dtype=np.float64), axis=0), dtype=np.int64)


def conditional_entropy(channel: npt.ArrayLike, prior: npt.ArrayLike | None = None) -> float:
    """H(T|T') in bits (paper 003 §4.1 eq 7 with the ERRATUM's minus sign).

    Raises:
        ValueError: malformed channel or prior.
    """
    p_out, post = posterior(channel, prior)
    joint = post * p_out
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(joint > 0, joint * np.log2(np.where(post > 0, post, 1.0)), 0.0)
    return float(-terms.sum())


def santhi_vardy_bound(channel: npt.ArrayLike, prior: npt.ArrayLike | None = None) -> float:
    """Upper bound 1 − 2^{−H(T|T')} on the MAP error (paper 003 §4.1 eq 6, Santhi–Vardy).
    Raises ValueError for a malformed channel or prior."""
    return 1.0 - 2.0 ** (-conditional_entropy(channel, prior))


def mutual_information(channel: npt.ArrayLike, prior: npt.ArrayLike | None = None) -> float:
    """I(T;T') = H(T) − H(T|T') in bits ([DERIVED] leakage figure, docs/reports.md D4; not the paper's
    privacy measure). Raises ValueError for a malformed channel or prior."""
    a, exact = _channel(channel)
    p = np.asarray(_prior(prior, a.shape[0], exact), dtype=np.float64)
    nz = p[p > 0]
    return float(-(nz * np.log2(nz)).sum()) - conditional_entropy(channel, prior)


def mechanism_utility(
    channel: npt.ArrayLike,
    input_utilities: npt.ArrayLike,
    output_utilities: npt.ArrayLike,
    prior: npt.ArrayLike | None = None,
) -> float:
    """Utility_G = Σ_T ℙ(T) Σ_{T'} Utility_Deg(T, T')·ℙ(T'|T), the expected degradation of the
    mechanism (paper 003 §4.2 eq 16). Lower is better.

    Args:
        channel: ℙ(T'|T), shape (n, m); input_utilities: Utility_T per input, (n,);
        output_utilities: Utility_T' per output, (m,); prior: ℙ(T), (n,), None = uniform.

    Raises:
        ValueError: malformed channel/prior or utilities of the wrong shape.
    """
    a, exact = _channel(channel)
    p = np.asarray(_prior(prior, a.shape[0], exact), dtype=np.float64)
    ui = np.asarray(input_utilities, dtype=np.float64)
    uo = np.asarray(output_utilities, dtype=np.float64)
    if ui.shape != (a.shape[0],) or uo.shape != (a.shape[1],):
        raise ValueError(f"utilities must have shapes ({a.shape[0]},) and ({a.shape[1]},)")
    af = np.asarray(a, dtype=np.float64)
    return float(np.sum(p[:, None] * af * (ui[:, None] - uo[None, :])))


__all__ = [
    "STOCHASTIC_TOL",
    "conditional_entropy",
    "error_bounds",
    "map_decision",
    "mechanism_utility",
    "mutual_information",
    "posterior",
    "privacy_error",
    "santhi_vardy_bound",
]
