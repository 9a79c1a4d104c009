"""Choosing ρ per protected value on the plan's own series (``serialpub plan --tune-ratio``):
the rule of docs/threat-model.md ("Choosing the ratio per value") iterated, each step a
candidate's series published again in memory with the ρ the previous step's learners ask
for. The rule reads only the learners' largest P' per value, which the audit's per-value
table gives on published releases, so a publisher can follow it by hand; this module saves
the rounds of reading and retyping. On a plan those figures come from series made of the
publisher's own snapshots (what the ρ reached then reveals: docs/threat-model.md, "Choosing
the ratio per value")."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from serialpub.planning.grid import Candidate
from serialpub.planning.run import PlanSetup, run_plan

#: the learners the rule reads: fitted once on the charge's soft labels. The EM learners
#: over-fit at every ρ (most of their pairs above 1/ℓ are not true), so a rule that chased
#: them would only coarsen the groups (docs/threat-model.md)
ONE_PASS = ("nb", "logistic-pairs")
#: the largest ρ the plan's grid takes; a value that would need more stops the rule
MAX_RATIO = 1000


def learned_per_value(learners: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """m_s: per protected value, the largest P' of the one-pass learners among ``learners``
    (the plan's per-learner figures, each with ``max_per_value``)."""
    m: dict[str, float] = {}
    for f in learners:
        if f["name"] in ONE_PASS:
            for v, p in f["max_per_value"].items():
                m[v] = max(m.get(v, 0.0), float(p))
    return m


def next_ratios(rho: Mapping[str, int], m: Mapping[str, float], ell: float) -> dict[str, int] | None:
    """Step 2 of the rule: every value with m_s > 1/ℓ has its ρ_s multiplied by ⌈ℓ·m_s⌉ (at
    least 2), the factor that would bring m_s to 1/ℓ if P' fell in proportion to the
    charge; the others keep theirs. A step that leaves the groups as they were does not stop
    the rule: the value's ρ is multiplied again until its groups grow. None when no value
    exceeds 1/ℓ (the rule has converged) or a ρ would pass :data:`MAX_RATIO`.

    ``rho`` gives ρ_s for the values it names (1 for the others of ``m``)."""
    bound = 1.0 / ell
    out = {v: int(rho.get(v, 1)) for v in sorted(set(rho) | set(m))}
    raised = False
    for v, p in m.items():
        if p > bound:
            out[v] *= max(2, math.ceil(ell * p))
            raised = True
    if not raised or max(out.values()) > MAX_RATIO:
        return None
    return out


def ratio_of(candidate: Candidate, protected: Sequence[str]) -> dict[str, int]:
    """The candidate's ρ per protected value (a single ρ repeated; 1 where a mapping is silent)."""
    rho = candidate.propensity_ratio
    if isinstance(rho, int):
        return dict.fromkeys(protected, rho)
    given = dict(rho)
    return {v: given.get(v, 1) for v in protected}


def _as_setting(rho: Mapping[str, int]) -> int | tuple[tuple[str, int], ...]:
    """The grid's form of a per-value ρ: 1 when every value is at 1, else the sorted pairs of
    the values above 1 (as ``--propensity-ratio value=ρ/…`` spells it)."""
    pairs = tuple(sorted((v, r) for v, r in rho.items() if r > 1))
    return pairs if pairs else 1


def tune_ratios(
    setup: PlanSetup,
    candidates: Sequence[Candidate],
    steps: int,
    jobs: int | None = None,
    tick: Callable[[], None] | None = None,
) -> tuple[list[list[dict[str, Any]]], float]:
    """Per candidate, the plan's summaries of the series the rule publishes: the
    candidate's own, then one per step while the rule raises a ρ, at most ``steps`` more.
    A candidate stops when no value's m_s exceeds 1/ℓ (``outcome`` of :func:`outcome`), when
    it is refused or collapses (coarser ρ cannot help it), or after ``steps`` steps. The
    candidates still tuning run in parallel at each step (:func:`run_plan`). Returns the
    trails and the wall time in seconds."""
    trails: list[list[dict[str, Any]]] = [[] for _ in candidates]
    current = list(candidates)
    active = list(range(len(candidates)))
    seconds = 0.0
    for step in range(steps + 1):
        rows, took = run_plan(setup, [current[i] for i in active], jobs, tick)
        seconds += took
        still = []
        for i, row in zip(active, rows, strict=True):
            trails[i].append(row)
            if step == steps or stopped(row):
                continue
            m = learned_per_value(row["learners"])
            rho = next_ratios(ratio_of(current[i], row["protected"]), m, current[i].ell)
            if rho is not None:
                current[i] = replace(current[i], propensity_ratio=_as_setting(rho))
                still.append(i)
        active = still
        if not active:
            break
    return trails, seconds


def stopped(row: Mapping[str, Any]) -> bool:
    """A series the rule cannot improve by a larger ρ: refused before the last round, or
    collapsed to a single group in some release."""
    return bool({"refused", "collapsed"} & set(row["flags"]))


def outcome(trail: Sequence[Mapping[str, Any]]) -> str:
    """How the rule ended on a candidate's trail: ``converged`` (the one-pass learners at or
    under 1/ℓ on every value), ``refused`` / ``collapsed``, or ``unconverged`` (steps used
    up, or a ρ past :data:`MAX_RATIO`)."""
    last = trail[-1]
    if "refused" in last["flags"]:
        return "refused"
    if "collapsed" in last["flags"]:
        return "collapsed"
    m = learned_per_value(last["learners"])
    return "converged" if all(p <= last["bound"] for p in m.values()) else "unconverged"


def tuning_record(trails: Sequence[Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The plan JSON's ``tuning``: per candidate, each step's ρ per value, m_s per value,
    groups (mean a release), gain and flags, then the ρ reached and the :func:`outcome`."""
    out = []
    for trail in trails:
        steps = [
            {
                "candidate": row["candidate"],
                "propensity_ratio": row["settings"].get("propensity_ratio", 1),
                "learned_per_value": learned_per_value(row["learners"]),
                "groups_mean": row["groups_mean"],
                "gain": row["gain"],
                "flags": row["flags"],
            }
            for row in trail
        ]
        out.append({"steps": steps, "reached": steps[-1]["propensity_ratio"], "outcome": outcome(trail)})
    return out


def tuning_lines(record: Sequence[Mapping[str, Any]]) -> list[str]:
    """The console's account of ``tuning`` (:func:`tuning_record`): one line per step, m_s
    of the values above 1/ℓ named, then the ρ reached."""
    lines = []
    for entry in record:
        first = entry["steps"][0]["candidate"]
        lines.append(f"tune-ratio, {first}:")
        for k, s in enumerate(entry["steps"]):
            m = ", ".join(f"{v} {p:.3f}" for v, p in sorted(s["learned_per_value"].items()))
            gain = "-" if s["gain"] is None else f"{s['gain']:.3f}"
            groups = "-" if s["groups_mean"] is None else f"{s['groups_mean']:.0f}"
            lines.append(f"  step {k}: ρ={_shown(s['propensity_ratio'])} groups {groups} gain {gain}; max P' {m}")
        lines.append(f"  reached ρ={_shown(entry['reached'])}: {entry['outcome']}")
    return lines


def _shown(rho: int | Mapping[str, int]) -> str:
    return str(rho) if isinstance(rho, int) else "/".join(f"{v}={r}" for v, r in sorted(rho.items()))
