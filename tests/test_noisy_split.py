"""The noisy split test's bound (``anonymizer.noisy_split``), by exact enumeration of
possible worlds on tiny regions, with and without the clip.

A region of n candidates, cut by its one public candidate split into parts of n_p
candidates, holds c records of a protected value with requirement r (the release publishes
c and n). The sound test refused the split; the noisy test refused it too, so the region is
a final group. A world places the c records on c of the n candidates, all worlds equally
likely a priori: the charge of every candidate is c / n. The refusal's probability in a
world is ``P_refuse(slack)``, slack = min over parts holding records of n_p - r · c_p, so
the adversary's posterior that a candidate of part p holds the value is

    Σ_(c_1..c_k) Π C(n_q, c_q) · (c_p / n_p) · P_refuse / Σ_(c_1..c_k) Π C(n_q, c_q) · P_refuse,

computed here in exact rationals (every float probability is converted exactly), and must
not exceed e^ε · c / n = c / (n · P_refuse(W)).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from anonymizer.noisy_split import DEFAULT_MARGIN, NoisySplitTest
from anonymizer.settings import MAX_EPSILON


def _worst_ratio(test: NoisySplitTest, sizes: tuple[int, ...], c: int, r: float) -> Fraction:
    """The largest posterior / charge over the region's candidates, exactly."""
    n = sum(sizes)
    num = [Fraction(0)] * len(sizes)
    den = Fraction(0)
    for split in itertools.product(*(range(min(s, c) + 1) for s in sizes)):
        if sum(split) != c:
            continue
        weight = Fraction(math.prod(math.comb(s, k) for s, k in zip(sizes, split, strict=True)))
        held = [s - r * k for s, k in zip(sizes, split, strict=True) if k > 0]
        slack = min(held) if held else math.inf
        p = Fraction(float(test.refusal_probability(np.array([slack]))[0]))
        den += weight * p
        for q, (s, k) in enumerate(zip(sizes, split, strict=True)):
            num[q] += weight * Fraction(k, s) * p
    charge = Fraction(c, n)
    return max(x / den for x in num) / charge


def _cases() -> list[tuple[tuple[int, ...], int, float]]:
    """Tiny regions the sound test refuses and that meet their requirement as a whole."""
    out = []
    for sizes in [(4, 4), (2, 6), (3, 5), (1, 7), (6, 10), (2, 14), (3, 3, 4), (2, 4, 8), (5, 25), (8, 24)]:
        n = sum(sizes)
        for r in (1.5, 2.0, 3.0, 4.0):
            for c in range(1, n + 1):
                sound_refuses = min(sizes) < r * c
                if n >= r * c and sound_refuses:
                    out.append((sizes, c, r))
    return out


@pytest.mark.parametrize("epsilon", [0.2, MAX_EPSILON])
@pytest.mark.parametrize("clip", [2.0, 4.0])
def test_a_refusal_moves_no_posterior_above_e_to_the_epsilon_times_the_charge(epsilon: float, clip: float) -> None:
    test = NoisySplitTest.for_epsilon(epsilon, clip=clip)
    assert test.epsilon <= epsilon * (1 + 1e-12)
    bound = 1 / Fraction(test.refusal_at_clip())  # e^ε, exactly as the mechanism computes it
    worst = max(_worst_ratio(test, sizes, c, r) for sizes, c, r in _cases())
    assert worst <= bound
    assert worst > 1  # the refusal is evidence: the bound is not vacuous here
    assert bound <= Fraction(2) * (1 + Fraction(1, 10**12))  # ε <= ln 2


def test_without_the_clip_a_refusal_breaks_the_bound() -> None:
    """The same noise without the clip: a world where the split's slack exceeds T + B
    cannot refuse, so a refusal rules it out and the posterior leaves the bound."""
    clipped = NoisySplitTest.for_epsilon(MAX_EPSILON, clip=2.0)
    unclipped = NoisySplitTest(math.inf, clipped.scale, clipped.bound, clipped.margin)
    bound = 1 / Fraction(clipped.refusal_at_clip())
    worst = max(_worst_ratio(unclipped, sizes, c, r) for sizes, c, r in _cases())
    assert worst > bound
    assert worst > 1.5 * bound  # not a rounding matter
    assert unclipped.epsilon == math.inf


def test_a_split_is_taken_only_with_the_margin_in_every_part() -> None:
    """Z <= B and T = B + margin: no noise draw takes a split whose slack is below the margin."""
    test = NoisySplitTest.for_epsilon(MAX_EPSILON)
    u = np.linspace(0.0, 1.0, 10_001)[:-1]
    for slack in (-np.inf, -3.0, 0.0, 0.5, DEFAULT_MARGIN - 1e-9):
        assert not test.decide(np.full(u.size, slack), u).any()
        assert float(test.refusal_probability(np.array([slack]))[0]) == 1.0


def test_the_draw_follows_the_refusal_probability() -> None:
    """decide(slack, u) takes the split exactly when u >= P_refuse(slack) (the inverse CDF),
    away from rounding at the boundary; the largest acceptance is 1 - e^-ε."""
    test = NoisySplitTest.for_epsilon(MAX_EPSILON)
    u = np.linspace(0.0, 1.0, 2_001)[:-1]
    for slack in (1.5, 4.0, 8.0, 12.0, 16.0, 1e6):
        p = float(test.refusal_probability(np.array([slack]))[0])
        taken = test.decide(np.full(u.size, slack), u)
        away = np.abs(u - p) > 1e-9
        assert np.array_equal(taken[away], (u >= p)[away])
    assert math.isclose(1 - test.refusal_at_clip(), 0.5, rel_tol=1e-9)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan])
def test_a_non_positive_or_infinite_epsilon_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="partition_epsilon must be a positive number"):
        NoisySplitTest.for_epsilon(bad)
