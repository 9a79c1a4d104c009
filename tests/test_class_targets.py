"""anonymizer.release.class_targets computes the never-linked pairs' target once per ℓ: every
target must be, to the bit, the strategy's formula applied to that pair's own state."""

from __future__ import annotations

import numpy as np
import pytest

from anonymizer import privacy
from anonymizer.release import History, PrivacyParams, class_targets


def _dense(params: PrivacyParams, history: History) -> np.ndarray:
    """The formula on every (class, value) pair, as class_targets computed it before."""
    ell = np.broadcast_to(history.ell[:, None], history.survival.shape)
    rho = privacy.propensity_ratios(params.propensity_ratio, history.survival.shape[1])
    return rho * privacy.strategy_targets(
        history.survival.ravel(),
        history.linked.ravel(),
        ell.ravel(),
        params.strategy,
        params.k_prime,
        params.alpha,
        renew=params.after_k_prime == "renew",
    ).reshape(history.survival.shape)


def _history(rng: np.random.Generator, k: int, v: int, linked_share: float) -> History:
    """k classes × v values, a share of the pairs linked (1-6 releases, some past k' = 4),
    a few with P = 1 though linked and a few unlinked with P < 1 (a history from elsewhere),
    and three values of ℓ."""
    linked = np.where(rng.random((k, v)) < linked_share, rng.integers(1, 7, (k, v)), 0)
    survival = np.where(linked > 0, rng.uniform(0.2, 1.0, (k, v)), 1.0)
    survival[rng.random((k, v)) < 0.01] = 1.0
    odd = rng.random((k, v)) < 0.01
    survival[odd] = rng.uniform(0.3, 1.0, int(odd.sum()))
    ell = rng.choice([2.0, 3.0, 5.5], size=k)
    return History(np.arange(k, dtype=np.int64), survival, linked.astype(np.int64), ell)


@pytest.mark.parametrize(
    "params",
    [
        PrivacyParams(ell=2, strategy="constant", k_prime=4),
        PrivacyParams(ell=2, strategy="constant", k_prime=4, after_k_prime="stop"),
        PrivacyParams(ell=2, strategy="geometric", k_prime=None, alpha=1.5),
        PrivacyParams(ell=2, strategy="constant", k_prime=4, propensity_ratio=3),
        PrivacyParams(ell=2, strategy="constant", k_prime=4, guarantee="localized"),
    ],
    ids=["constant-renew", "constant-stop", "geometric", "rho", "localized"],
)
@pytest.mark.parametrize("linked_share", [0.0, 0.01, 0.5, 1.0])
def test_class_targets_are_the_formula_on_every_pair_to_the_bit(params: PrivacyParams, linked_share: float) -> None:
    rng = np.random.default_rng(int(linked_share * 100))
    history = _history(rng, 400, 30, linked_share)
    got = class_targets(params, history)
    if params.guarantee == "localized":
        want = np.broadcast_to(history.ell[:, None], history.survival.shape) * 1.0
    else:
        want = _dense(params, history)
    assert got.shape == want.shape and got.dtype == np.float64
    assert got.tobytes() == want.tobytes()  # the same bits, inf included
