"""The realized within-group propensity ratio of a learner (docs/threat-model.md, "The
propensity ratio").

A release charged with ratio ρ_s for protected value s covers every adversary whose
propensity π(·, s) satisfies max π ≤ ρ_s · mean π over the candidates of every group that
holds s. For a learner's π this module measures, per release and protected value, the
largest ratio any such group realizes,

    r_t(s) = max over groups G of release t with c_s(G) > 0 of
             max_{o ∈ G} π(o, s) · |reg(G)| / Σ_{o ∈ G} π(o, s),

so the publisher sees whether the learner lies inside the covered class (r_t(s) ≤ ρ_s in
every release) and by how much it misses. The figures are float estimates reported beside
the verdict, not part of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from anonymizer.learners.figures import FloatArray

if TYPE_CHECKING:  # the learners call this module
    from anonymizer.learners.core import LearnerSeries


def realized_ratios(series: LearnerSeries, pi: list[FloatArray]) -> FloatArray:
    """r_t(s) per release and protected value (T, P) for π per version cell (C, S); 0
    where no group of the release holds the value (or the learner gives its candidates no
    mass)."""
    n_prot = len(series.values)
    out = np.zeros((len(series.releases), n_prot))
    for t, r in enumerate(series.releases):
        if not r.group.size:
            continue
        m = series.versions[r.version].counts[r.cell]
        mass = pi[r.version][r.cell][:, :n_prot]  # (pairs, P), sorted by group
        groups = r.group[r.starts]
        total = np.add.reduceat(mass * m[:, None], r.starts, axis=0)
        top = np.maximum.reduceat(mass, r.starts, axis=0)
        held = (r.counts[groups, :n_prot] > 0) & (total > 0)
        ratio = np.divide(top * r.candidates[groups][:, None], total, out=np.zeros_like(total), where=held)
        out[t] = ratio.max(axis=0, initial=0.0)
    return out
