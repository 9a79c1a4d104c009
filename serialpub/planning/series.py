"""Each candidate's series published in memory, and its figures.

The inputs are read with the pipeline's own readers (:class:`PlanInputs`: the dataset's
inputs and its register reader, without the state database),
and every release is computed by the function the draft path calls,
:func:`anonymizer.release.anonymize_history`, with the release number as its seed and the
workspace's dilution; the release table is :func:`serialpub.workflow.drafting.published_table`.
So a series published with ``serialpub release`` under the same settings has the same
groups, breach probabilities and figures (tests/test_plan.py checks it). Nothing is written:
no state, no release store, no register cache.

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
from pathlib import Path
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
from serialpub.errors import REFUSED, InputError
from serialpub.io.inputs import Snapshot, read_csv, snapshot_from_table
from serialpub.planning.grid import RAREST, Candidate
from serialpub.planning.learners import learner_figures
from serialpub.simulate import PRESETS, SeriesSpec, simulate_series
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
        """The inputs of ``ws`` (the register read on first use).

        Raises:
            InputError: as :func:`serialpub.workflow.dataset_inputs.read_dataset_inputs`.
        """
        inputs = read_dataset_inputs(ws)
        return cls(ws, inputs, RegisterReader(ws, inputs))


def _snapshot_files(folder: Path) -> list[Path]:
    return sorted([*folder.glob("*.csv"), *folder.glob("*.parquet")])


def read_snapshots(plan: PlanInputs, folder: Path, rounds: int) -> list[Snapshot]:
    """The first ``rounds`` snapshots of ``folder`` (file-name order), checked against the
    register as ``serialpub release`` checks them.

    Raises:
        InputError: fewer files than rounds, or a snapshot that does not match the register
            (the pipeline's message, naming the file and line).
    """
    files = _snapshot_files(folder)
    if len(files) < rounds:
        raise InputError(
            f"--snapshots {folder}: {len(files)} snapshot file(s) for --rounds {rounds}; give at most "
            f"{len(files)} rounds or more snapshots"
        )
    cfg = plan.ws.config
    domain = set(plan.inputs.sensitive_domain) if plan.inputs.sensitive_domain is not None else None
    out = []
    for p in files[:rounds]:
        table = read_csv(p, "snapshot") if p.suffix == ".csv" else pd.read_parquet(p).astype(str)
        out.append(
            snapshot_from_table(
                table,
                p,
                cfg.id_column,
                plan.inputs.qis,
                cfg.sensitive,
                plan.register.register,
                plan.inputs.hierarchies,
                domain,
            )
        )
    return out


def simulated_snapshots(plan: PlanInputs, preset: str, rounds: int, seed: int = 0) -> list[Snapshot]:
    """Snapshots simulated by paper 004's generator (:mod:`serialpub.simulate`, the preset's
    carry-over and redraw, ``seed``) from a base table of the register's individuals.

    The register holds no sensitive value, so each individual takes the last one recorded
    for them in the workspace's own ``snapshots/`` folder; the generator partitions the
    individuals found there into max(rounds, the preset's rounds) periods. On the demo
    workspace (whose snapshots cover its whole base table) the preset ``paper`` with seed 0
    gives the demo's snapshots.

    Raises:
        InputError: an unknown preset, or a workspace without snapshots to take values from.
    """
    if preset not in PRESETS:
        raise InputError(f"--simulate {preset!r}: unknown preset; use one of {', '.join(PRESETS)}")
    cfg = plan.ws.config
    files = _snapshot_files(plan.ws.root / "snapshots")
    if not files:
        raise InputError(
            f"--simulate {preset}: {plan.ws.root / 'snapshots'} holds no snapshot to take the sensitive values "
            "from (the register has none); give --snapshots DIR"
        )
    seen = pd.concat([read_csv(p, "snapshot") for p in files], ignore_index=True)
    base = seen.drop_duplicates(cfg.id_column, keep="last")
    rows = plan.register.register.rows_of(base[cfg.id_column])
    base = base.iloc[np.argsort(rows, kind="stable")].reset_index(drop=True)  # register order
    p = PRESETS[preset]
    spec = SeriesSpec(rounds=max(rounds, int(p["rounds"])), carry_over=p["carry_over"], redraw=p["redraw"], seed=seed)
    domain = set(plan.inputs.sensitive_domain) if plan.inputs.sensitive_domain is not None else None
    return [
        snapshot_from_table(
            t[[cfg.id_column, *plan.inputs.qis, cfg.sensitive]].reset_index(drop=True), f"simulated snapshot {i}",
            cfg.id_column, plan.inputs.qis, cfg.sensitive, plan.register.register, plan.inputs.hierarchies, domain,
        )
        for i, t in enumerate(simulate_series(base, cfg.sensitive, spec)[:rounds], start=1)
    ]  # fmt: skip


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
    cfg = plan.ws.config
    # the register's cells as coded (distinct combinations and their counts), never an (N, d)
    # matrix that every release would group again: JointRelease.of reads them as they are
    leaves = plan.register.register.keys
    workloads, baseline = [], []
    hs = [plan.inputs.hierarchies[q] for q in plan.inputs.qis]
    for snap in snapshots:
        w = draw_workload(
            snap.table[[*plan.inputs.qis, cfg.sensitive]],
            plan.inputs.hierarchies,
            cfg.sensitive,
            n_queries=QUERY_COUNT,
            qd=QUERY_DIMENSIONS,
            selectivity=QUERY_SELECTIVITY,
            seed=cfg.query_seed,
        )
        workloads.append(w)
        histogram = pd.DataFrame({q: h.labels[h.root] for q, h in zip(plan.inputs.qis, hs, strict=True)}, index=[0])
        histogram = histogram.loc[np.zeros(len(snap.individual), dtype=np.int64)].reset_index(drop=True)
        histogram[cfg.sensitive] = snap.value
        release = JointRelease.of(histogram, plan.inputs.qis, cfg.sensitive, hs, leaves, w.ranges.sensitive_values)
        baseline.append(_errors(release, w)[0])
    return Measured(workloads, baseline, leaves)


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
