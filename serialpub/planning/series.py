"""Each candidate's series published in memory, and its figures.

The inputs are read with the pipeline's own readers (:class:`PlanInputs`: the dataset's
inputs and its register reader, without the state database),
and every release is computed by the function the draft path calls,
:func:`anonymizer.release.anonymize_history`, with the release number as its seed and the
workspace's dilution; the release table is :func:`serialpub.workflow.drafting.published_table`.
So a series published with ``serialpub release`` under the same settings has the same
groups, breach probabilities and figures (tests/test_plan.py checks it). Nothing is written
but the register cache (:mod:`serialpub.io.register_cache`, without the suite's verdict, which
the plan does not run): no state, no release store. The next plan and release 1 then load the
coded register instead of coding it again.

Per release the utility is the mean relative error of the draft's query workload (5,000
range-count queries, qd 3, selectivity 0.05, the workspace's query seed; docs/design.md
section 8) read with the register-joint estimator (:mod:`anonymizer.joint`); the
**baseline** is the same estimator on a release publishing only the snapshot's sensitive
histogram (one group, every QI ``*``), and the **gain** is baseline error − release error.
Paper 001's uniform reading of the same release is kept beside it.

Beside the uniform charge the plan runs the audit's learning adversary
(:mod:`anonymizer.learners`, docs/threat-model.md "The learning adversary")
on each candidate's series, fed the groups as the public copy would show them (the same
:class:`~anonymizer.joint.JointRelease` the utility is read from): per learner its largest
posterior P', the figure ``serialpub audit --learners`` reports on the series published for real.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from anonymizer.arrays import CodedRows
from anonymizer.joint import JointRelease, joint_estimates
from anonymizer.noisy_split import noise_generator
from anonymizer.privacy import ratio_by_value
from anonymizer.queries import Workload, draw_workload
from anonymizer.release import History, PrivacyParams, ReleaseResult, SnapshotCodes, anonymize_history
from anonymizer.search import InfeasibleError
from anonymizer.settings import (
    AfterKPrime,
    Dilution,
    PartitionModel,
    PartitionTest,
    SplitRule,
    Strategy,
    SuppressionModel,
)
from anonymizer.topdown import name_values
from serialpub.config import Workspace
from serialpub.errors import REFUSED
from serialpub.io.inputs import Snapshot
from serialpub.planning.grid import RAREST, Candidate
from serialpub.planning.learners import learner_figures
from serialpub.workflow import drafting
from serialpub.workflow.dataset_inputs import DatasetInputs, read_dataset_inputs
from serialpub.workflow.measuring import QUERY_COUNT, QUERY_DIMENSIONS, QUERY_SELECTIVITY
from serialpub.workflow.register_reader import RegisterReader

FloatArray = npt.NDArray[np.float64]
#: a candidate is flagged near the bound when its largest breach probability reaches this
#: fraction of 1/ℓ: within 5 % of the bound, the releases left before a refusal are few and
#: a small change of the snapshots can end the series (docs/choosing.md, section 6)
NEAR_BOUND = 0.95
#: the flags of a candidate (:meth:`CandidateResult.summary`'s ``flags``), in the order the
#: plan shows them
FLAGS = ("refused", "collapsed", "near_bound", "learner_near_bound", "known_breach")
#: the learners a plan runs unless told (``serialpub plan --learners``): naive Bayes in one
#: pass, the cheapest; ``logistic-pairs`` costs a fit per candidate
DEFAULT_LEARNERS = ("nb",)


@dataclass(frozen=True)
class PlanInputs:
    """A workspace's inputs and register, read as the pipeline reads them, without its
    state: the planner opens no database."""

    ws: Workspace
    inputs: DatasetInputs
    register: RegisterReader

    @classmethod
    def read(cls, ws: Workspace) -> PlanInputs:
        """The inputs of ``ws`` (the register read on first use, from the register cache when
        this version was coded before, and cached when it was not).

        Raises:
            InputError: as :func:`serialpub.workflow.dataset_inputs.read_dataset_inputs`.
        """
        inputs = read_dataset_inputs(ws)
        return cls(ws, inputs, RegisterReader(ws, inputs, cache_unchecked=True))


def protected_values(candidate: Candidate, domain: list[str], snapshots: list[Snapshot]) -> list[str]:
    """The candidate's protected values: ``all`` the domain, ``rarest:m`` the m values with
    the fewest records over ``snapshots`` (ties in domain order), or its list."""
    if candidate.protected == "all":
        return list(domain)
    if isinstance(candidate.protected, str) and candidate.protected.startswith(RAREST):
        m = int(candidate.protected[len(RAREST) :])
        counts = pd.concat([pd.Series(s.value) for s in snapshots]).value_counts()
        per = counts.reindex(domain, fill_value=0).to_numpy()
        order = np.argsort(per, kind="stable")[:m]
        return [domain[i] for i in sorted(order.tolist())]
    return list(candidate.protected)


def candidate_params(candidate: Candidate, plan: PlanInputs, protected: list[str]) -> PrivacyParams:
    """The privacy parameters the draft path would use with the candidate's settings (the
    guarantee, suppression model and algorithm stay the workspace's); a per-value ρ over
    the candidate's ``protected`` values (a listed value it does not protect is left out)."""
    rho = candidate.propensity_ratio
    return replace(
        plan.inputs.params,
        ell=candidate.ell,
        strategy=Strategy(candidate.strategy),
        k_prime=candidate.k_prime,
        alpha=candidate.alpha,
        after_k_prime=AfterKPrime(candidate.after_k_prime),
        partition_model=PartitionModel(candidate.partition_model),
        partition_test=PartitionTest.SOUND if candidate.partition_epsilon is None else PartitionTest.NOISY,
        partition_epsilon=candidate.partition_epsilon,
        propensity_ratio=rho
        if isinstance(rho, int)
        else ratio_by_value({v: r for v, r in rho if v in protected}, protected),
        split_rule=SplitRule(candidate.split_rule),
    )


@dataclass
class Measured:
    """What does not depend on the candidate, per snapshot: the query workload with its
    exact answers, the register's leaf ids (as coded rows: its cells), and the baseline's errors."""

    workloads: list[Workload]
    baseline: list[float]
    leaves: CodedRows


def measured(plan: PlanInputs, snapshots: list[Snapshot]) -> Measured:
    """The workload of every snapshot (as the draft draws it) and its baseline error."""
    # the register's cells as coded (distinct combinations and their counts), never an (N, d)
    # matrix that every release would group again: JointRelease.of reads them as they are
    leaves = plan.register.register.keys
    workloads, baseline = [], []
    for snap in snapshots:
        w, error = measure_snapshot(plan, snap)
        workloads.append(w)
        baseline.append(error)
    return Measured(workloads, baseline, leaves)


def measure_snapshot(plan: PlanInputs, snap: Snapshot) -> tuple[Workload, float]:
    """A snapshot's query workload (as the draft draws it, from its table) and its baseline
    error."""
    cfg = plan.ws.config
    leaves = plan.register.register.keys
    hs = [plan.inputs.hierarchies[q] for q in plan.inputs.qis]
    w = draw_workload(
        snap.table[[*plan.inputs.qis, cfg.sensitive]],
        plan.inputs.hierarchies,
        cfg.sensitive,
        n_queries=QUERY_COUNT,
        qd=QUERY_DIMENSIONS,
        selectivity=QUERY_SELECTIVITY,
        seed=cfg.query_seed,
    )
    release = JointRelease.of(
        _histogram_release(snap, plan.inputs.qis, hs, cfg.sensitive),
        plan.inputs.qis,
        cfg.sensitive,
        hs,
        leaves,
        w.ranges.sensitive_values,
    )
    return w, _errors(release, w)[0]


def _histogram_release(snap: Snapshot, qis: Sequence[str], hs: Sequence[Any], sensitive: str) -> pd.DataFrame:
    """The release publishing only the snapshot's sensitive histogram, one row per record,
    shape (R, d + 1): every QI its hierarchy's root, the sensitive column the records'
    values. Categorical columns (the root once, each value once): the same labels as text
    columns, read by :meth:`JointRelease.of` through their categories, without a million
    strings per column to make and hash again."""
    n = len(snap.individual)
    codes, labels = snap.value_order  # labels[codes] == snap.value
    columns: dict[str, Any] = {
        q: pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=pd.Index([h.labels[h.root]]))
        for q, h in zip(qis, hs, strict=True)
    }
    columns[sensitive] = pd.Categorical.from_codes(codes, categories=pd.Index(labels.tolist()))
    return pd.DataFrame(columns)


def _errors(release: JointRelease, w: Workload) -> tuple[float, float]:
    """Mean relative errors of the register-joint and the uniform (paper 001) estimates: the
    estimates alone (no bounds nor error figure, which the plan does not read), the same
    floats to the bit as :func:`anonymizer.joint.joint_answers`', c_S(G) by the sparse product
    (every query of the workload counts its own value set)."""
    estimate, uniform = joint_estimates(release, w.ranges, uniform=True, sparse_product=True)
    actual = w.actual.astype(np.float64)
    return float((np.abs(actual - estimate) / actual).mean()), float((np.abs(actual - uniform) / actual).mean())


@dataclass
class CandidateResult:
    """A candidate's series: per published release its figures, and how it ended.

    Attributes:
        candidate: the settings.
        protected: the protected values it resolved to.
        releases: one dict per published release: ``release``, ``groups``, ``max_breach``
            (largest breach probability over the series so far), ``error`` (register-joint
            mean relative error), ``baseline``, ``gain`` (baseline − error), ``uniform``
            (paper 001's reading).
        refused_at: the release refused (None when all rounds were published).
        reason: why (the pipeline's message and advice).
        linked: individuals per number of linked releases at the end (the most for any
            protected value), {k: individuals}.
        seconds: wall time of the candidate's series.
        learners: per learner run on the series (:func:`learner_figures`), its figures.
    """

    candidate: Candidate
    protected: list[str]
    releases: list[dict[str, Any]] = field(default_factory=list)
    refused_at: int | None = None
    reason: str | None = None
    linked: dict[int, int] = field(default_factory=dict)
    seconds: float = 0.0
    learners: list[dict[str, Any]] = field(default_factory=list)
    breach_exceeded: bool = False
    #: the workspace's suppression model is paper 004's (docs/threat-model.md: a known breach)
    paper_suppression: bool = False

    def summary(self) -> dict[str, Any]:
        """The figures of the table and the JSON. Beside the means: ``groups_per_release``
        (one count per published release), ``collapsed_releases`` (those of 1 group) and
        ``flags``, the raised ones of :data:`FLAGS`: ``refused`` before the last round,
        ``collapsed``, ``near_bound`` (largest breach probability ≥ :data:`NEAR_BOUND`/ℓ),
        ``learner_near_bound`` (a learner's largest posterior P' ≥ :data:`NEAR_BOUND`/ℓ: above
        1/ℓ or within 5 % of it) and ``known_breach`` (docs/threat-model.md).
        ``learners_max_posterior``: the largest P' of the learners run (None: none run), with
        ``learners`` the figures of each."""
        r = self.releases

        def mean(key: str) -> float | None:
            return float(np.mean([x[key] for x in r])) if r else None

        max_breach = max((x["max_breach"] for x in r), default=0.0)
        collapsed = [x["release"] for x in r if x["groups"] == 1]
        known_breach = self.candidate.known_breach or self.paper_suppression
        learned = max((x["max_p"] for x in self.learners), default=None)
        raised = {
            "refused": self.refused_at is not None,
            "collapsed": bool(collapsed),
            "near_bound": max_breach >= NEAR_BOUND / self.candidate.ell,
            "learner_near_bound": learned is not None and learned >= NEAR_BOUND / self.candidate.ell,
            "known_breach": known_breach,
        }
        return {
            "candidate": self.candidate.label,
            "settings": self.candidate.record(),
            "protected": self.protected,
            "known_breach": known_breach,
            "published": len(r),
            "refused_at": self.refused_at,
            "reason": self.reason,
            "max_breach": max_breach,
            "bound": 1.0 / self.candidate.ell,
            # the noisy split test: a refusal may raise a posterior to e^ε × its charge
            **(
                {
                    "partition_epsilon": eps,
                    "noisy_bound": math.exp(eps) / self.candidate.ell,
                    "noisy_max_posterior": min(1.0, math.exp(eps) * max_breach),
                }
                if (eps := self.candidate.partition_epsilon) is not None
                else {}
            ),
            "breach_exceeded": self.breach_exceeded,
            "flags": [f for f in FLAGS if raised[f]],
            "collapsed_releases": collapsed,
            "groups_per_release": [x["groups"] for x in r],
            "groups_mean": mean("groups"),
            "groups_min": min((x["groups"] for x in r), default=None),
            "groups_max": max((x["groups"] for x in r), default=None),
            "learners_max_posterior": learned,
            "learners": self.learners,
            "error": mean("error"),
            "baseline": mean("baseline"),
            "gain": mean("gain"),
            "uniform": mean("uniform"),
            "linked": {str(k): v for k, v in sorted(self.linked.items())},
            "seconds": self.seconds,
            "releases": r,
        }


def run_candidate(
    plan: PlanInputs,
    snapshots: list[Snapshot],
    measure: Measured,
    candidate: Candidate,
    tick: Callable[[], None] | None = None,
    learners: Sequence[str] = DEFAULT_LEARNERS,
) -> CandidateResult:
    """Publish the candidate's series in memory over ``snapshots`` and measure every release.

    The series stops at the first release the anonymizer refuses (``InfeasibleError``:
    no partition meets the requirement), with the draft path's message and advice.
    ``tick`` is called once per release attempted and once per release not attempted.
    ``learners`` (names of :data:`anonymizer.learners.core.LEARNERS`) run on the
    releases published (:func:`learner_figures`); none when empty.
    """
    started = time.perf_counter()
    cfg = plan.ws.config
    domain = list(plan.inputs.sensitive_domain or [])
    protected = protected_values(candidate, domain, snapshots)
    params = candidate_params(candidate, plan, protected)
    hierarchies = plan.register.search_hierarchies(params.algorithm, plan.inputs.numeric)
    index = pd.Index(protected)
    history = History.empty(np.full(len(plan.register.register.ids), float(candidate.ell)), len(protected))
    out = CandidateResult(candidate, protected, paper_suppression=params.suppression_model is SuppressionModel.PAPER)
    presence = cfg.dilution is Dilution.PRESENCE
    joints: list[JointRelease] = []
    for seq, snap in enumerate(snapshots, start=1):
        codes, labels = snap.value_order
        record_set = index.get_indexer(pd.Index(labels.tolist())).astype(np.int64)[codes]
        try:
            result = anonymize_history(
                plan.register.register.keys,
                SnapshotCodes(snap.individual, record_set, len(protected)),
                history,
                params,
                hierarchies,
                presence,
                budget=int(np.floor(cfg.suppression_budget * len(snap.individual))),
                seed=seq,
                explain=True,
                # not the workspace's secret: a plan's noise is its own, fixed so its figures repeat
                noise=noise_generator(b"serialpub plan", cfg.dataset, seq) if candidate.partition_epsilon else None,
            )
        except InfeasibleError as exc:
            out.refused_at, out.reason = seq, f"{REFUSED} = {candidate.ell:g}: {exc}"
            for _ in range(len(snapshots) - seq + 1):
                if tick:
                    tick()
            break
        history = result.history
        figures, joint = _release_figures(plan, snap, result, hierarchies, measure, seq, protected)
        out.releases.append(figures)
        if learners:
            joints.append(joint)
        if out.releases[-1]["max_breach"] > 1.0 / candidate.ell:
            out.breach_exceeded = True
        if tick:
            tick()
    out.linked = _linked_distribution(history)
    if learners and joints:
        out.learners = learner_figures(plan, measure, protected, candidate.ell, joints, learners)
    out.seconds = time.perf_counter() - started
    return out


def _release_figures(
    plan: PlanInputs,
    snap: Snapshot,
    result: ReleaseResult,
    hierarchies: list[Any],
    measure: Measured,
    seq: int,
    protected: list[str],
) -> tuple[dict[str, Any], JointRelease]:
    cfg = plan.ws.config
    table = drafting.published_table(plan.inputs, snap, result, hierarchies)
    read = plan.inputs.read_hierarchies(table)
    w = measure.workloads[seq - 1]
    release = JointRelease.of(
        table,
        plan.inputs.qis,
        cfg.sensitive,
        [read[q] for q in plan.inputs.qis],
        measure.leaves,
        w.ranges.sensitive_values,
        result.suppressed,
    )
    error, uniform = _errors(release, w)
    base = measure.baseline[seq - 1]
    found = result.generalization.levels
    levels = {"search_levels": name_values(found, protected)} if found is not None else {}
    return {
        "release": seq,
        "records": int(result.group_records.sum()),
        "groups": int(result.group_candidates.size),
        "max_breach": result.max_breach,
        "error": error,
        "baseline": base,
        "gain": base - error,
        "uniform": uniform,
        # per level of the top-down search, which requirement blocked the splits (docs/anonymization.md)
        **levels,
    }, release


def _linked_distribution(history: History) -> dict[int, int]:
    """Individuals per number of linked releases (their most for any protected value)."""
    if history.linked.size == 0:
        return {0: int(history.class_of.size)}
    per_class = history.linked.max(axis=1)
    people = np.bincount(history.class_of, minlength=per_class.size)
    counts = np.bincount(per_class, weights=people)
    return {int(k): int(v) for k, v in enumerate(counts) if v > 0}
