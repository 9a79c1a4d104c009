"""The randomized split test of ``partition_test: noisy`` (docs/anonymization.md,
"partition_test: noisy"; docs/threat-model.md, "The noisy split test").

The sound test (:mod:`anonymizer.topdown`, ``published`` model) admits a split only if
every part would meet its requirement even if it held all of its region's records of a
value; it reads no count the release does not publish, so the partition is no evidence.
The noisy test is tried only where the sound test admits nothing, on **one** candidate
split per region chosen from public data (the split rule's best splittable QI), and reads
the parts' *own* counts through a clipped statistic and bounded noise:

* ``slack`` = min over the parts p and the protected values s they hold of
  ``n_p - r_{p,s} · c_{p,s}`` (candidates; ``-inf`` where a requirement is infinite), the
  least margin by which a part meets its requirement on its own counts;
* ``x = clip(slack, 0, W)`` (``W``: :attr:`NoisySplitTest.clip`, in candidates);
* ``Z``: Laplace noise of scale ``b`` truncated to ``[-B, B]``;
* the split is taken when ``x + Z >= T`` with ``T = B + margin``.

**Validity.** ``Z <= B``, so a split is taken only if ``x >= margin > 0``, i.e. every part
meets its requirement on its own counts with ``margin`` candidates to spare: every group
still meets its requirement, as under the sound test.

**The bound.** Let a world be an assignment of the release's records to candidates that
gives the published counts (every final group's), all equally likely a priori: the charge
``n_s / n`` of a group is the fraction of its worlds in which a given candidate holds s. A
split that was *taken* published its parts' counts (as sums of the groups below), so its
statistic, and the probability of taking it, is the same in every such world. A split
*refused* leaves its region a final group, and each final group has at most one refused
noisy split (its own). Worlds are a product over final groups, so the adversary's
posterior that candidate i of group G holds s is the world fraction re-weighted by the
probability ``P_refuse(x_G(w))`` of G's refusal alone, and since ``x`` lies in ``[0, W]``::

    posterior <= (max_x P_refuse(x) / min_x P_refuse(x)) · n_s / n
              =  (P_refuse(0) / P_refuse(W)) · n_s / n  =  e^ε · charge,
    ε = -ln P(Z < T - W)   (P_refuse(0) = 1 because T > B).

No δ (the noise is bounded and no world makes a refusal impossible: ``T - W > -B``), and
no composition along the split path (only the final refusal differs between worlds).
Without the clip, ``x`` can exceed ``T + B`` in some world, where a refusal is impossible,
and the ratio is unbounded: ``tests/test_noisy_split.py`` enumerates worlds with and
without it. The bound multiplies whatever charge the search uses: with a per-candidate
learned charge instead of ``n_s / n``, read that charge in place of ``n_s / n``.

The noise must be secret (a seed kept beside the signing key, never published): with the
seed known, ``Z`` is known and a refusal says ``x < T - Z`` exactly.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: the default clip W, in candidates: a part meeting its requirement with this many to spare gets
#: the largest acceptance probability, 1 - e^-ε
DEFAULT_CLIP = 16.0
#: the least slack (candidates) a taken split keeps in every part
DEFAULT_MARGIN = 1.0


def _laplace_cdf(t: FloatArray | float, scale: float) -> FloatArray:
    t = np.asarray(t, dtype=np.float64)
    return np.where(t < 0, 0.5 * np.exp(np.minimum(t, 0.0) / scale), 1.0 - 0.5 * np.exp(-np.maximum(t, 0.0) / scale))


@dataclass(frozen=True)
class NoisySplitTest:
    """The noise and thresholds of the test (module docstring), all in candidates.

    Attributes:
        clip: W, the statistic's upper clip; ``math.inf`` for none (unsound: tests only).
        scale: b, the Laplace scale.
        bound: B, the truncation of the noise to [-B, B].
        margin: T - B, the least slack of a taken split.
    """

    clip: float
    scale: float
    bound: float
    margin: float = DEFAULT_MARGIN

    @property
    def threshold(self) -> float:
        """T = B + margin."""
        return self.bound + self.margin

    @classmethod
    def for_epsilon(cls, epsilon: float, clip: float = DEFAULT_CLIP, margin: float = DEFAULT_MARGIN) -> NoisySplitTest:
        """The test whose :attr:`epsilon` is at most ``epsilon``, with scale ``clip / 4``.

        Solves ``P(Z < B + margin - W) = e^-ε`` for the truncation B by bisection, keeping the
        side where the probability is at least ``e^-ε`` (so the resulting ε never exceeds the
        one asked for; :attr:`epsilon` is the exact one).

        Raises:
            ValueError: ε not in (0, ∞), or ``clip <= margin``.
        """
        if not (epsilon > 0 and math.isfinite(epsilon)):
            raise ValueError(f"partition_epsilon must be a positive number, got {epsilon!r}")
        if not clip > margin:
            raise ValueError(f"the clip ({clip}) must exceed the margin ({margin})")
        scale = clip / 4.0
        goal = math.exp(-epsilon)
        lo, hi = (clip - margin) / 2.0, (clip - margin) / 2.0 + 1.0
        while cls(clip, scale, hi, margin).refusal_at_clip() < goal:
            hi = lo + 2.0 * (hi - lo)
        for _ in range(200):
            mid = (lo + hi) / 2.0
            if cls(clip, scale, mid, margin).refusal_at_clip() >= goal:
                hi = mid
            else:
                lo = mid
        return cls(clip, scale, hi, margin)

    def noise_cdf(self, t: FloatArray | float) -> FloatArray:
        """P(Z < t) for the truncated Laplace noise, elementwise."""
        low, high = _laplace_cdf(-self.bound, self.scale), _laplace_cdf(self.bound, self.scale)
        return np.asarray(np.clip((_laplace_cdf(t, self.scale) - low) / (high - low), 0.0, 1.0))

    def statistic(self, slack: FloatArray) -> FloatArray:
        """x = clip(slack, 0, W): the part's least own-count margin, in candidates."""
        return np.clip(np.asarray(slack, dtype=np.float64), 0.0, self.clip)

    def refusal_probability(self, slack: FloatArray) -> FloatArray:
        """P(x + Z < T) for each slack: the probability the split is refused."""
        return self.noise_cdf(self.threshold - self.statistic(slack))

    def refusal_at_clip(self) -> float:
        return float(self.noise_cdf(self.threshold - self.clip))

    @property
    def epsilon(self) -> float:
        """ln(P_refuse(0) / P_refuse(W)) = -ln P(Z < T - W): posterior <= e^ε × the charge.
        inf without the clip."""
        if not math.isfinite(self.clip):
            return math.inf
        return -math.log(self.refusal_at_clip())

    def decide(self, slack: FloatArray, uniform: FloatArray) -> BoolArray:
        """Whether each split is taken: ``x + Z >= T`` with Z drawn from ``uniform`` (in
        [0, 1), one per split) by the inverse of :meth:`noise_cdf`."""
        u = np.asarray(uniform, dtype=np.float64)
        low, high = _laplace_cdf(-self.bound, self.scale), _laplace_cdf(self.bound, self.scale)
        p = low + u * (high - low)
        z = np.where(p < 0.5, self.scale * np.log(2.0 * p), -self.scale * np.log(2.0 * (1.0 - p)))
        z = np.clip(z, -self.bound, self.bound)
        return np.asarray(self.statistic(slack) + z >= self.threshold, dtype=bool)


def noise_generator(secret: bytes, dataset: str, release: int) -> np.random.Generator:
    """The noise of one release: a generator seeded by SHA-256 of the secret seed, the
    dataset and the release number, so no two releases share noise and nothing published
    determines it."""
    digest = hashlib.sha256(secret + b"\0" + dataset.encode() + b"\0" + str(release).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest, "big"))


@dataclass(frozen=True)
class NoisyPartition:
    """What the top-down search needs to run the noisy test: the test and the release's
    secret noise (:func:`noise_generator`), drawn in a fixed order (level, then region)."""

    test: NoisySplitTest
    rng: np.random.Generator
