"""The learning adversary on a planned series (``serialpub plan --learners``): the audit's
learners (:mod:`anonymizer.learners`, docs/threat-model.md "The learning
adversary") run on the candidate's releases as the planner holds them in memory, so that
a plan shows, per candidate, the figures ``serialpub audit --learners`` would give on the
same series published for real (docs/choosing.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from anonymizer.joint import JointRelease

if TYPE_CHECKING:  # the planner's own types; serialpub.planning.series calls this module
    from serialpub.planning.series import Measured, PlanInputs


def learner_figures(
    plan: PlanInputs,
    measure: Measured,
    protected: list[str],
    ell: float,
    releases: Sequence[JointRelease],
    names: Sequence[str],
) -> list[dict[str, Any]]:
    """The learning adversary on a series held in memory: per learner of ``names`` (in the
    order of :data:`anonymizer.learners.core.LEARNERS`), its largest posterior P'
    (``max_p``) with a pair attaining it (``max_individual``, ``max_value``) and that pair's
    uniform charge (``max_uniform``), the pairs (register individual, protected value) above
    1/ℓ (``above``), its ``seconds``, and per protected value its largest P'
    (``max_per_value``, what the per-value rule of :mod:`serialpub.planning.tune` reads).

    ``releases`` are the series' releases resolved against the register as the public copy
    shows them (:class:`JointRelease`: regions, records per value); each group's candidates
    are the register individuals of its region (or its records, if more) and the sensitive
    domain is the protected values, then every other value published, as the audit reads
    them (:func:`anonymizer.learners.resolved.resolved_series`), so the figures are the
    audit's on the same series published for real (tests/test_plan.py)."""
    from anonymizer.arrays import factorize_rows
    from anonymizer.learners.core import learner_report
    from anonymizer.learners.resolved import resolved_series

    hs = [plan.inputs.hierarchies[q] for q in plan.inputs.qis]
    cell_of, _ = factorize_rows(measure.leaves, [h.n_leaves for h in hs])
    report = learner_report(resolved_series(releases, protected, ell, plan.register.register.ids, cell_of), names)
    return [
        {"name": f.name, "max_p": f.max_p, "max_individual": f.max_individual, "max_value": f.max_value,
         "max_uniform": f.max_uniform, "above": f.above, "seconds": f.seconds,
         "max_per_value": dict(zip(report.values, f.max_per_value, strict=True))}
        for f in report.learners if f.name != "uniform"
    ]  # fmt: skip
