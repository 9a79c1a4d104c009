"""Paper 004's experiments (Wong et al., section 8, Figures 6-9) on serialpub's anonymizer.

For one figure and one or more scenarios, runs the series of releases once per parameter
value and records, per round: the average relative error of 5,000 random range-count
queries (docs/design.md section 8, exactly as ``serialpub.workflow.drafting`` calls it: qd 3,
selectivity 0.05, the workspace's query seed 0), the average and largest group size in
candidates n_j (the paper's "anonymized group size": with virtual dilution a group holds
its register candidates) and in published records, the largest breach probability over
all releases so far (``History.max_breach``), the time of the anonymization
(``anonymize_history``: search, suppression and state update), the query-measure time,
and the suppressed records. The same snapshots are also replayed under the **localized
guarantee** (per-release ℓ-diversity, ``guarantee="localized"``) for every ℓ of the run,
and its max breach probability is recorded beside ours.

Everything runs in memory like ``serialpub.workflow.baseline.localized_baseline``: round
after round ``anonymize_history`` carries the ``History``; the validation suites, the
report, Parquet and the state database of the publishing pipeline are skipped. The
workspace (register, hierarchies, ``serialpub.yaml``, snapshots) is written once per
scenario under ``benchmarks/out/experiments/ws/`` and read with the pipeline's own
readers, so a workspace published with ``serialpub release`` gives the same figures
(``tests/test_experiments.py`` checks it).

Figures (the paper's fixed values per caption; the varied values are the paper's where it
states them: ℓ = 3, 5, 7 in the text on Figure 7; the grids of Figures 8 and 9 are not
stated, so Table 1's k' = 5, 10, 20 and Figure 5's α = 3, 5, 10 are used, with the
paper's default α = 2 added):

* ``fig6``: constant ratio, vary ℓ, k' = 3.
* ``fig7``: geometric, vary ℓ, α = 3.
* ``fig8``: constant ratio, vary k', ℓ = 2.
* ``fig9``: geometric, vary α, ℓ = 2.

Scenarios: ``adult`` (the demo's setup: every occupation protected) and ``diagnosis``
(:mod:`serialpub.datasets.diagnosis`: synthetic Zipf diagnoses, rarest 10 % protected).

A configuration whose round raises ``InfeasibleError`` records that round as infeasible
with the reason; its series stops there (nothing is published that round and the next
rounds are not attempted: the state after an infeasible round is the state before it).

Output: ``benchmarks/out/experiments/<figure>-<scenario>[-<fixed>].json`` (every point,
the command, machine and date) and ``docs/images/experiments/<same>.png`` (panels (a)
query error, (b) average group size, (c) largest group size, (d) anonymization time, all
vs rounds) plus ``<same>-breach.png`` (max breach probability per round, ours vs the
localized baseline, against 1/ℓ).

Usage::

    .venv/bin/python benchmarks/experiments.py fig6 [--scenario adult diagnosis] [--rounds 20]
        [--values 3 5 7] [--k-prime 3] [--alpha 3] [--ell 2] [--no-baseline] [--plot-only]
    .venv/bin/python benchmarks/experiments.py all
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT, ROOT / "benchmarks"):  # run as a script from anywhere, or loaded by the tests
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from machine_info import machine  # noqa: E402

from anonymizer.joint import JointRelease, joint_workload_error  # noqa: E402
from anonymizer.queries import average_relative_error, draw_workload  # noqa: E402
from anonymizer.release import History, PrivacyParams, SnapshotCodes, anonymize_history  # noqa: E402
from anonymizer.search import InfeasibleError  # noqa: E402
from anonymizer.topdown import DEFAULT_SPLIT_RULE  # noqa: E402
from serialpub.config import Workspace  # noqa: E402
from serialpub.io.inputs import Snapshot, read_csv, snapshot_from_table  # noqa: E402
from serialpub.workflow.publisher import QUERY_COUNT, QUERY_DIMENSIONS, QUERY_SELECTIVITY, Publisher  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "experiments"
IMAGES = ROOT / "docs" / "images" / "experiments"
SCENARIOS = ("adult", "diagnosis")
#: rounds of the paper's series (section 8: 20 releases)
ROUNDS = 20


@dataclass(frozen=True)
class FigureSpec:
    """One of the paper's figures: the strategy, the varied parameter and the fixed ones.

    Attributes:
        name: ``fig6`` .. ``fig9``.
        strategy: ``constant`` or ``geometric``.
        vary: ``ell``, ``k_prime`` or ``alpha``.
        values: default values of the varied parameter.
        fixed: the caption's fixed parameters (ℓ, k' or α).
        caption: the paper's caption.
    """

    name: str
    strategy: str
    vary: str
    values: tuple[float, ...]
    fixed: dict[str, float]
    caption: str


FIGURES = {
    "fig6": FigureSpec("fig6", "constant", "ell", (3, 5, 7), {"k_prime": 3},
                       "Effect of ℓ (constant-ratio strategy), k' = 3"),
    "fig7": FigureSpec("fig7", "geometric", "ell", (3, 5, 7), {"alpha": 3},
                       "Effect of ℓ (geometric strategy), α = 3"),
    "fig8": FigureSpec("fig8", "constant", "k_prime", (5, 10, 20), {"ell": 2},
                       "Effect of k' (constant-ratio strategy), ℓ = 2"),
    "fig9": FigureSpec("fig9", "geometric", "alpha", (2, 3, 5, 10), {"ell": 2},
                       "Effect of α (geometric strategy), ℓ = 2"),
}  # fmt: skip
SYMBOL = {"ell": "ℓ", "k_prime": "k'", "alpha": "α"}


# --------------------------------------------------------------------------------------
# Inputs: one workspace per scenario, read with the pipeline's readers
# --------------------------------------------------------------------------------------


@dataclass
class Scenario:
    """A workspace's register, hierarchies, protected values and checked snapshots.

    Attributes:
        name: ``adult`` or ``diagnosis`` (or a test's label).
        publisher: the workspace's :class:`serialpub.workflow.publisher.Publisher` (its readers).
        snapshots: the checked snapshots in period order.
        record_set: per snapshot, the protected-value index of every record (-1 when
            unprotected), shape (R_j,) each.
    """

    name: str
    publisher: Publisher
    snapshots: list[Snapshot]
    record_set: list[np.ndarray[Any, np.dtype[np.int64]]] = field(default_factory=list)

    @classmethod
    def from_workspace(cls, name: str, ws: Workspace, snapshot_paths: Sequence[Path]) -> Scenario:
        """Read the workspace and check every snapshot as ``serialpub release`` would.

        Raises:
            serialpub.errors.InputError: a bad workspace or snapshot (the pipeline's message).
        """
        publisher = Publisher(ws)
        cfg = ws.config
        domain = set(publisher.sensitive_domain) if publisher.sensitive_domain is not None else None
        snaps = [
            snapshot_from_table(
                read_csv(p, "snapshot"),
                p,
                cfg.id_column,
                publisher.qis,
                cfg.sensitive,
                publisher.register,
                publisher.hierarchies,
                domain,
            )
            for p in snapshot_paths
        ]
        protected = pd.Index(publisher.protected)
        sets = [protected.get_indexer(pd.Index(s.value)).astype(np.int64) for s in snaps]
        return cls(name, publisher, snaps, sets)

    @property
    def n_protected(self) -> int:
        return len(self.publisher.protected)


def build_workspace(scenario: str, seed: int = 0) -> tuple[Workspace, list[Path]]:
    """Write (or rewrite) the scenario's workspace under ``OUT/ws/`` and list its snapshots.

    Always the paper's 20-snapshot series (PRESETS["paper"]: partitions of 1/20 of the
    register, about 2,261 rows, plus 20 % carried over): a run of fewer rounds uses the
    first ones, so its snapshots are the same as in the 20-round run.

    ``adult`` is :func:`serialpub.demo.create_workspace` (the demo: every occupation
    protected); ``diagnosis`` is :func:`serialpub.datasets.diagnosis.create_workspace`.
    Both use ℓ = 2, constant ratio k' = 20, register dilution and a 5 % suppression
    budget in the file; the runner overrides ℓ, strategy and parameters per point.

    Raises:
        ValueError: an unknown scenario.
    """
    from serialpub import demo
    from serialpub.datasets import diagnosis
    from serialpub.simulate import PRESETS

    rounds = int(PRESETS["paper"]["rounds"])
    folder = OUT / "ws" / f"{scenario}-s{seed}"
    if scenario == "adult":
        ws = demo.create_workspace(folder, rounds=rounds, seed=seed)
        return ws, demo.snapshots(ws)
    if scenario == "diagnosis":
        ws = diagnosis.create_workspace(folder, rounds=rounds, seed=seed)
        return ws, diagnosis.snapshots(ws)
    raise ValueError(f"unknown scenario {scenario!r}; use one of {SCENARIOS}")


# --------------------------------------------------------------------------------------
# One series
# --------------------------------------------------------------------------------------


def run_series(
    scenario: Scenario,
    params: PrivacyParams,
    rounds: int,
    measure_queries: bool = True,
    progress: Callable[[str], None] | None = None,
    budget: float | None = None,
    split_rule: str = DEFAULT_SPLIT_RULE,
) -> list[dict[str, Any]]:
    """Publish rounds 1..``rounds`` in memory and measure each.

    Args:
        scenario: the inputs; its workspace's dilution, suppression budget and query seed
            are used (budget = floor(budget · records), anonymization seed = round, as the
            pipeline does).
        params: ℓ, strategy and its parameter, guarantee.
        rounds: how many snapshots, from the first.
        measure_queries: compute the query error (5,000 queries; about a second a round).
        progress: called with one line per round.
        budget: suppression budget as a fraction of the snapshot's records, instead of
            the workspace's ``suppression_budget``.
        split_rule: the top-down search's split rule (:data:`anonymizer.topdown.SPLIT_RULES`).

    Returns:
        one dict per attempted round: ``round``, ``feasible``, and for a feasible round
        ``records`` (published), ``snapshot_records``, ``suppressed``, ``groups``,
        ``protected_records`` (snapshot records carrying a protected value),
        ``suppressed_protected`` (of those, suppressed: only such records are ever suppressed),
        ``avg_candidates``/``max_candidates`` (n_j), ``avg_records``/``max_records``
        (records per group), ``protected_groups`` and ``avg_candidates_protected`` (the
        groups publishing a protected value, whose size the guarantee constrains),
        ``max_p`` (largest breach probability over releases 1..round),
        ``query_error`` (mean relative error, ratio; None when not measured),
        ``query_error_weighted`` (the same queries, register-weighted estimator),
        ``query_error_joint`` and ``query_error_baseline`` (the register-joint estimator on
        the release and on a release of the sensitive histogram alone, as drafting
        measures them: docs/data-users.md), ``query_error_median``, ``seconds_anonymize``,
        ``seconds_query``; for an infeasible round ``reason`` and ``seconds_anonymize``
        (time until it gave up). The list ends at the first infeasible round.
    """
    pub = scenario.publisher
    cfg = pub.ws.config
    presence = cfg.dilution == "presence"
    fraction = cfg.suppression_budget if budget is None else budget
    if fraction > 0:
        # a suppression budget means paper 004's published-count model (docs/threat-model.md)
        # (and the bottom-up search, the only one that suppresses)
        params = dataclasses.replace(params, suppression_model="paper", algorithm="bottomup")
    hierarchies = pub.hierarchies_for_search(params.algorithm, pub.numeric)
    history = History.empty(np.full(len(pub.register.ids), float(params.ell)), scenario.n_protected)
    rows: list[dict[str, Any]] = []
    for seq, (snap, record_set) in enumerate(zip(scenario.snapshots[:rounds], scenario.record_set, strict=False), 1):
        started = time.perf_counter()
        try:
            result = anonymize_history(
                pub.register.keys,
                SnapshotCodes(snap.individual, record_set, scenario.n_protected),
                history,
                params,
                hierarchies,
                presence,
                budget=int(np.floor(fraction * len(snap.individual))),
                seed=seq,
                split_rule=split_rule,
            )
        except InfeasibleError as exc:
            rows.append(
                {
                    "round": seq,
                    "feasible": False,
                    "reason": str(exc),
                    "seconds_anonymize": time.perf_counter() - started,
                }
            )
            if progress:
                progress(f"  round {seq:2d}: infeasible ({exc})")
            break
        t_anon = time.perf_counter() - started
        history = result.history
        cand, recs = result.group_candidates, result.group_records
        holds = result.group_counts.sum(axis=1) > 0
        row: dict[str, Any] = {
            "round": seq,
            "feasible": True,
            "snapshot_records": len(snap.individual),
            "records": int(recs.sum()),
            "suppressed": result.suppressed,
            "protected_records": int((record_set >= 0).sum()),
            "suppressed_protected": int((~result.published & (record_set >= 0)).sum()),
            "groups": int(cand.size),
            "protected_groups": int(holds.sum()),
            "avg_candidates_protected": float(cand[holds].mean()) if holds.any() else None,
            "avg_candidates": float(cand.mean()),
            "max_candidates": int(cand.max()),
            "avg_records": float(recs.mean()),
            "max_records": int(recs.max()),
            "max_p": history.max_breach(),
            "query_error": None,
            "query_error_weighted": None,
            "query_error_joint": None,
            "query_error_baseline": None,
            "query_error_median": None,
            "seconds_anonymize": t_anon,
            "seconds_query": None,
        }
        if measure_queries:
            t_q = time.perf_counter()
            table = pub.published_table(snap, result, hierarchies)
            query = average_relative_error(
                snap.table[[*pub.qis, cfg.sensitive]],
                table,
                pub.read_hierarchies(table),
                cfg.sensitive,
                n_queries=QUERY_COUNT,
                qd=QUERY_DIMENSIONS,
                selectivity=QUERY_SELECTIVITY,
                seed=cfg.query_seed,
                leaf_weights=pub.register_reader.register_leaf_counts,
            )
            joint = _joint_error(pub, snap, table, result.suppressed)
            row.update(
                query_error=query.mean,
                query_error_median=query.median,
                query_error_weighted=query.weighted.mean if query.weighted else None,
                query_error_joint=joint.mean,
                query_error_baseline=joint.baseline_mean,
                seconds_query=time.perf_counter() - t_q,
            )
        rows.append(row)
        if progress:
            err = "-" if row["query_error"] is None else f"{row['query_error']:.3f}"
            progress(
                f"  round {seq:2d}: {row['records']:5d} rec {row['groups']:5d} groups "
                f"n_j avg {row['avg_candidates']:8.1f} max {row['max_candidates']:6d} | "
                f"rec/group {row['avg_records']:6.1f} | p {row['max_p']:.4f} | err {err} | "
                f"{t_anon:.2f} s"
            )
    return rows


def _joint_error(pub: Publisher, snap: Snapshot, table: pd.DataFrame, suppressed: int) -> Any:
    """The register-joint errors of a release and of its histogram-only baseline, on the
    workload drafting draws (:func:`anonymizer.joint.joint_workload_error`)."""
    cfg = pub.ws.config
    raw = snap.table[[*pub.qis, cfg.sensitive]]
    workload = draw_workload(
        raw,
        pub.hierarchies,
        cfg.sensitive,
        n_queries=QUERY_COUNT,
        qd=QUERY_DIMENSIONS,
        selectivity=QUERY_SELECTIVITY,
        seed=cfg.query_seed,
    )
    values = [str(v) for v in workload.ranges.sensitive_values]
    read = pub.read_hierarchies(table)
    release = JointRelease.of(
        table,
        pub.qis,
        cfg.sensitive,
        [read[q] for q in pub.qis],
        np.asarray(pub.register.keys[:], dtype=np.int64),
        values,
        suppressed,
    )
    histogram = raw[cfg.sensitive].astype(str).value_counts().reindex(values, fill_value=0).to_numpy()
    return joint_workload_error(workload, release, histogram)


def params_for(spec: FigureSpec, value: float, fixed: dict[str, float], algorithm: str = "topdown") -> PrivacyParams:
    """The privacy parameters of one point of a figure (global guarantee, ``algorithm``'s
    search; :func:`run_series` runs the bottom-up search whenever a budget is given)."""
    p = {**fixed, spec.vary: value}
    return PrivacyParams(
        ell=float(p["ell"]),
        strategy=spec.strategy,
        k_prime=int(p["k_prime"]) if spec.strategy == "constant" else None,
        alpha=float(p["alpha"]) if spec.strategy == "geometric" else None,
        guarantee="global",
        after_k_prime="stop",  # the paper's rule: its figures are what this runner reproduces
        algorithm=algorithm,
    )


# --------------------------------------------------------------------------------------
# A figure: runs, JSON, plots
# --------------------------------------------------------------------------------------


def caption(spec: FigureSpec, fixed: dict[str, float]) -> str:
    """The paper's caption, or with the fixed values actually used when they were overridden."""
    if fixed == spec.fixed:
        return spec.caption
    name = "constant-ratio" if spec.strategy == "constant" else "geometric"
    used = ", ".join(f"{SYMBOL[k]} = {v:g}" for k, v in fixed.items())
    return f"Effect of {SYMBOL[spec.vary]} ({name} strategy), {used} (paper: {spec.caption.rsplit(', ', 1)[1]})"


def stem(
    spec: FigureSpec,
    scenario: str,
    fixed: dict[str, float],
    budget: float | None = None,
    seed: int = 0,
    rounds: int = ROUNDS,
    values: Sequence[float] | None = None,
    baseline: bool = True,
    algorithm: str | None = None,
) -> str:
    """File stem ``<figure>-<scenario>``, plus ``-<param><value>`` for a non-default fixed
    value, ``-budget<fraction>`` for a suppression budget other than the workspace's,
    ``-s<seed>`` and ``-r<rounds>`` for a seed or a number of rounds other than the
    default, ``-values<v>_<v>..`` for values other than the figure's and ``-nobaseline``
    without the localized replay, ``-<algorithm>`` for a search chosen with ``--algorithm``:
    a run with other settings never overwrites the files the docs show."""
    extra = "".join(f"-{k.replace('_', '')}{v:g}" for k, v in fixed.items() if spec.fixed.get(k) != v)
    extra += "" if budget is None else f"-budget{budget:g}"
    extra += "" if seed == 0 else f"-s{seed}"
    extra += "" if rounds == ROUNDS else f"-r{rounds}"
    extra += "" if not values or tuple(values) == spec.values else "-values" + "_".join(f"{v:g}" for v in values)
    extra += "" if baseline else "-nobaseline"
    extra += "" if algorithm is None else f"-{algorithm}"
    return f"{spec.name}-{scenario}{extra}"


def run_figure(
    spec: FigureSpec,
    scenario: Scenario,
    values: Sequence[float],
    fixed: dict[str, float],
    rounds: int,
    baseline: bool,
    command: str,
    log: Callable[[str], None] = print,
    baseline_cache: dict[float, list[dict[str, Any]]] | None = None,
    budget: float | None = None,
    seed: int = 0,
    algorithm: str = "topdown",
) -> dict[str, Any]:
    """Run every value of the figure (and the localized baseline per ℓ, with the same
    search, so that the price of the guarantee is shown at equal algorithm) on one scenario.

    ``baseline_cache`` (ℓ -> rows) shares the localized replays between figures of the
    same scenario and rounds (the baseline depends on ℓ only, not on the strategy).
    ``seed`` is the seed the scenario's workspace was built with (recorded only).

    Returns:
        the JSON record: figure, scenario, setup, command, machine, date, ``runs`` (one per
        value: its parameters, status and per-round rows) and ``baseline`` (per ℓ: per-round
        max p, group sizes, query error of the localized replay).
    """
    cfg = scenario.publisher.ws.config
    record: dict[str, Any] = {
        "format_version": 1,
        "figure": spec.name,
        "caption": caption(spec, fixed),
        "scenario": scenario.name,
        "command": command,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "setup": {
            "register": len(scenario.publisher.register.ids),
            "quasi_identifiers": scenario.publisher.qis,
            "sensitive": cfg.sensitive,
            "protected_values": scenario.n_protected,
            "sensitive_domain": len(scenario.publisher.sensitive_domain or []),
            "snapshot_records": [len(s.individual) for s in scenario.snapshots[:rounds]],
            "rounds": rounds,
            "seed": seed,
            "dilution": cfg.dilution,
            "suppression_budget": cfg.suppression_budget if budget is None else budget,
            "algorithm": "bottomup" if (cfg.suppression_budget if budget is None else budget) > 0 else algorithm,
            "strategy": spec.strategy,
            "vary": spec.vary,
            "values": list(values),
            "fixed": fixed,
            "queries": {
                "n": QUERY_COUNT,
                "qd": QUERY_DIMENSIONS,
                "selectivity": QUERY_SELECTIVITY,
                "seed": cfg.query_seed,
            },
        },
        "runs": [],
        "baseline": {},
    }
    for value in values:
        params = params_for(spec, value, fixed, algorithm)
        log(f"[{scenario.name} {spec.name}] {SYMBOL[spec.vary]} = {value:g}: {params}")
        started = time.perf_counter()
        rows = run_series(scenario, params, rounds, progress=log, budget=budget)
        infeasible = next((r for r in rows if not r["feasible"]), None)
        record["runs"].append(
            {
                "value": value,
                "params": {
                    "ell": params.ell,
                    "strategy": params.strategy,
                    "k_prime": params.k_prime,
                    "alpha": params.alpha,
                    "guarantee": params.guarantee,
                },
                "status": "complete" if infeasible is None else f"infeasible at round {infeasible['round']}",
                "seconds": time.perf_counter() - started,
                "rounds": rows,
            }
        )
    if baseline:
        ells = sorted({float(r["params"]["ell"]) for r in record["runs"]})
        for ell in ells:
            cache = {} if baseline_cache is None else baseline_cache
            if ell not in cache:
                log(f"[{scenario.name} {spec.name}] localized baseline, ℓ = {ell:g}")
                params = PrivacyParams(
                    ell=ell, strategy="constant", k_prime=20, guarantee="localized", algorithm=algorithm
                )  # ℓ and the search only
                cache[ell] = run_series(scenario, params, rounds, progress=log, budget=budget)
            record["baseline"][f"{ell:g}"] = cache[ell]
    return record


COLORS = ("#2166ac", "#1b7837", "#762a83", "#b35806", "#4d4d4d")


def _series(rows: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    ok = [r for r in rows if r["feasible"] and r.get(key) is not None]
    return [r["round"] for r in ok], [float(r[key]) for r in ok]


def figure_title(record: dict[str, Any]) -> str:
    """``<scenario>: <caption>``, plus the suppression budget (the paper's model) when it is
    not the default 0."""
    budget = record["setup"]["suppression_budget"]
    return f"{record['scenario']}: {record['caption']}" + ("" if budget == 0 else f", suppression budget {budget:g}")


def plot_figure(record: dict[str, Any], out_dir: Path, name: str) -> list[Path]:
    """Write ``<name>.png`` (:func:`panels_figure`) and ``<name>-breach.png``
    (:func:`breach_figure`) into ``out_dir``; returns the two paths."""
    from serialpub.report import plots  # sets the Agg backend and the house style

    out_dir.mkdir(parents=True, exist_ok=True)
    panels = out_dir / f"{name}.png"
    panels.write_bytes(plots.to_png(panels_figure(record)))
    breach = out_dir / f"{name}-breach.png"
    breach.write_bytes(plots.to_png(breach_figure(record)))
    return [panels, breach]


def panels_figure(record: dict[str, Any]) -> Any:
    """The paper's four panels, each vs the round: (a) average relative query error,
    (b) average group size (solid: candidates n_j, the paper's measure under dilution;
    dashed: published records; dotted: n_j of the groups publishing a protected value),
    (c) largest group size (same), (d) anonymization time in seconds. An infeasible round
    is marked with an ×, at the bottom of each panel. Returns the matplotlib Figure."""
    from matplotlib.ticker import MaxNLocator

    from serialpub.report import plots  # sets the Agg backend and the house style

    plt = plots.plt
    sym = SYMBOL[record["setup"]["vary"]]
    title = figure_title(record)
    fig, axes = plt.subplots(1, 4, figsize=(13.5, 3.1))
    for i, run in enumerate(record["runs"]):
        color = COLORS[i % len(COLORS)]
        label = f"{sym} = {run['value']:g}"
        rows = run["rounds"]
        for ax, key, dashed in (
            (axes[0], "query_error", None),
            (axes[1], "avg_candidates", "avg_records"),
            (axes[2], "max_candidates", "max_records"),
            (axes[3], "seconds_anonymize", None),
        ):
            x, y = _series(rows, key)
            ax.plot(x, y, marker="o", ms=2.5, color=color, label=label)
            if dashed:
                x, y = _series(rows, dashed)
                ax.plot(x, y, ls="--", marker=".", ms=2, color=color, alpha=0.7)
            if key == "avg_candidates":
                x, y = _series(rows, "avg_candidates_protected")
                ax.plot(x, y, ls=":", lw=1.6, color=color, alpha=0.9)
            bad = [r["round"] for r in rows if not r["feasible"]]
            if bad:
                ax.plot(bad, [0] * len(bad), marker="x", ms=7, mew=2, color=color, ls="none", clip_on=False)
    titles = (
        "(a) average relative error",
        "(b) average group size\n(solid: candidates n_j; dashed: records;\n"
        "dotted: n_j of groups with a protected value)",
        "(c) largest group size\n(solid: candidates n_j; dashed: records)",
        "(d) anonymization time (s)",
    )
    for ax, panel_title in zip(axes, titles, strict=True):
        ax.set_title(panel_title, fontsize=8.5)
        ax.set_xlabel("round (release)")
        ax.set_ylim(bottom=0)
        ax.set_xlim(0.5, record["setup"]["rounds"] + 0.5)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in axes[1:3]:
        ax.set_yscale("symlog", linthresh=10)
        ax.set_ylim(bottom=0)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(
        handles, labels, frameon=False, fontsize=8, loc="lower center", ncol=len(labels), bbox_to_anchor=(0.5, -0.06)
    )
    fig.suptitle(
        title + (" (× = infeasible round)" if any(r["status"] != "complete" for r in record["runs"]) else ""),
        fontsize=10,
    )
    fig.tight_layout()
    return fig


def breach_figure(record: dict[str, Any]) -> Any:
    """The largest breach probability per round: ours per value of the varied parameter,
    the localized baseline per ℓ, and the bound 1/ℓ. Returns the matplotlib Figure."""
    from matplotlib.ticker import MaxNLocator

    from serialpub.report import plots

    plt = plots.plt
    sym = SYMBOL[record["setup"]["vary"]]
    fig, ax = plt.subplots(figsize=(7.5, 3.3))
    ells = sorted({float(r["params"]["ell"]) for r in record["runs"]})
    for i, run in enumerate(record["runs"]):
        color = COLORS[i % len(COLORS)]
        x, y = _series(run["rounds"], "max_p")
        ax.plot(x, y, marker="o", ms=3, color=color, label=f"global, {sym} = {run['value']:g}")
    for j, ell in enumerate(ells):
        base = record["baseline"].get(f"{ell:g}")
        bcolor = plots.BASELINE_COLOR if len(ells) == 1 else COLORS[j % len(COLORS)]
        if base:
            x, y = _series(base, "max_p")
            ax.plot(x, y, marker="s", ms=3, ls=":", color=bcolor, label=f"localized baseline, ℓ = {ell:g}")
        ax.axhline(1.0 / ell, color=plots.BOUND_COLOR, lw=1.0, ls="--", alpha=0.4 + 0.6 / (j + 1))
        ax.text(
            record["setup"]["rounds"] + 0.6, 1.0 / ell, f"1/{ell:g}", va="center", fontsize=7, color=plots.BOUND_COLOR
        )
    ax.set_ylim(0, 1.02)
    ax.set_xlim(0.5, record["setup"]["rounds"] + 1.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("round (release)")
    ax.set_ylabel("max breach probability")
    ax.set_title(f"{figure_title(record)}:\nlargest p(o, s) over all releases so far", fontsize=9)
    ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.06, 1.0), fontsize=7)
    return fig


def summary(record: dict[str, Any]) -> str:
    """A text table: per value, rounds done, mean/last error and group sizes, final max p."""
    sym = SYMBOL[record["setup"]["vary"]]
    head = (
        f"  {sym:>6} | status                  | err mean | n_j avg | n_j max | rec/grp | max p  | anon s/round"
        " | supp (prot.) | n_j prot."
    )
    lines = [f"{record['scenario']} {record['figure']} ({record['caption']})", head]
    for run in record["runs"]:
        ok = [r for r in run["rounds"] if r["feasible"]]
        if not ok:
            lines.append(f"  {run['value']:>6g} | {run['status']:<23} |")
            continue
        errs = [r["query_error"] for r in ok if r["query_error"] is not None]
        lines.append(
            f"  {run['value']:>6g} | {run['status']:<23} | {np.mean(errs) if errs else float('nan'):8.3f} | "
            f"{np.mean([r['avg_candidates'] for r in ok]):7.1f} | {max(r['max_candidates'] for r in ok):7d} | "
            f"{np.mean([r['avg_records'] for r in ok]):7.1f} | {ok[-1]['max_p']:.4f} | "
            f"{np.mean([r['seconds_anonymize'] for r in ok]):.2f} | "
            f"{np.mean([r['suppressed'] for r in ok]):5.1f} ({np.mean([r['protected_records'] for r in ok]):5.1f}) | "
            f"{np.mean([r['avg_candidates_protected'] or 0 for r in ok]):7.1f}"
        )
    for ell, rows in record["baseline"].items():
        ok = [r for r in rows if r["feasible"]]
        if ok:
            lines.append(
                f"  localized ℓ = {ell}: max p after round {ok[-1]['round']} = {ok[-1]['max_p']:.4f}, "
                f"err mean {np.mean([r['query_error'] for r in ok]):.3f}, "
                f"rec/grp {np.mean([r['avg_records'] for r in ok]):.1f}"
            )
    return "\n".join(lines)


def _run_rows(
    records: Sequence[tuple[str, dict[str, Any]]], n_cols: int, keep: Callable[[dict[str, Any]], bool] = bool
) -> Any:
    """Per run of every (file stem, JSON record): ``(row start, rounds published, run,
    record)``; the row start holds the first three of a table's ``n_cols`` cells. A run
    with no round published (``keep`` filters the rounds) gives its whole row and no rounds."""
    for name, record in records:
        sym = SYMBOL[record["setup"]["vary"]]
        for run in record["runs"]:
            ok = [r for r in run["rounds"] if r["feasible"] and keep(r)]
            first = f"| {name} | {sym} = {run['value']:g} |"
            if not ok:
                yield f"{first} 0 ({run['status']}) |" + " |" * (n_cols - 3), ok, run, record
                continue
            done = f"{len(ok)}" + ("" if run["status"] == "complete" else f" (round {len(ok) + 1} infeasible)")
            yield f"{first} {done} |", ok, run, record


def key_numbers(records: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """The Markdown table of docs/experiments.md ("Key numbers"): one row per run of every
    (file stem, JSON record), figures averaged over the rounds published."""
    head = (
        "| run | value | rounds published | query error: mean (min-max) | avg n_j | max n_j | avg records/group "
        "| n_j prot. | suppressed/round | max p | localized max p | anonymize s/round |"
    )
    lines = [head, "|" + "---|" * 12]
    for start, ok, run, record in _run_rows(records, 12):
        if not ok:
            lines.append(start)
            continue
        errs = [r["query_error"] for r in ok]
        base = record["baseline"].get(f"{run['params']['ell']:g}", [])
        local = next((r["max_p"] for r in base if r["round"] == ok[-1]["round"]), None)
        prot = [r["avg_candidates_protected"] for r in ok if r["avg_candidates_protected"] is not None]
        lines.append(
            f"{start} {np.mean(errs):.3f} ({min(errs):.2f}-{max(errs):.2f}) "
            f"| {np.mean([r['avg_candidates'] for r in ok]):.0f} | {max(r['max_candidates'] for r in ok)} "
            f"| {np.mean([r['avg_records'] for r in ok]):.1f} | {np.mean(prot) if prot else float('nan'):.0f} "
            f"| {np.mean([r['suppressed'] for r in ok]):.1f} | {ok[-1]['max_p']:.3f} "
            f"| {'-' if local is None else f'{local:.3f}'} | {np.mean([r['seconds_anonymize'] for r in ok]):.2f} |"
        )
    return "\n".join(lines)


def estimator_numbers(records: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """The Markdown table of docs/experiments.md (the second "Key numbers" table): per run,
    the mean over the rounds published of each round's mean relative query error under the
    register-joint, register-marginal and uniform (paper 001) estimators, the
    histogram-only baseline and the gain (baseline − joint)."""
    head = (
        "| run | value | rounds published | groups (mean) | joint | marginal | uniform (paper 001) "
        "| baseline | gain | max p |"
    )
    lines = [head, "|" + "---|" * 10]
    for start, ok, _, _ in _run_rows(records, 10, lambda r: r.get("query_error_joint") is not None):
        if not ok:
            lines.append(start)
            continue
        joint = float(np.mean([r["query_error_joint"] for r in ok]))
        base = float(np.mean([r["query_error_baseline"] for r in ok]))
        lines.append(
            f"{start} {np.mean([r['groups'] for r in ok]):,.0f} "
            f"| **{joint:.3f}** | {np.mean([r['query_error_weighted'] for r in ok]):.3f} "
            f"| {np.mean([r['query_error'] for r in ok]):.2f} | {base:.3f} | {base - joint:.3f} "
            f"| {ok[-1]['max_p']:.3f} |"
        )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line; options a run would silently ignore are errors (SystemExit 2)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("figure", choices=[*FIGURES, "all"])
    parser.add_argument("--scenario", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument(
        "--rounds",
        type=int,
        default=ROUNDS,
        choices=range(1, ROUNDS + 1),
        metavar="1..20",
        help="releases per series: the first of the paper's 20 snapshots (default all 20)",
    )
    parser.add_argument("--values", type=float, nargs="+", help="values of the varied parameter")
    parser.add_argument("--ell", type=float, help="override the fixed ℓ (figs 8-9)")
    parser.add_argument("--k-prime", type=int, help="override the fixed k' (fig 6)")
    parser.add_argument("--alpha", type=float, help="override the fixed α (fig 7)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the series (and of the diagnoses)")
    parser.add_argument(
        "--budget",
        type=float,
        help="suppression budget, fraction of records; above 0 runs the paper's model (default: the workspace's, 0)",
    )
    parser.add_argument("--no-baseline", action="store_true", help="skip the localized baseline")
    parser.add_argument(
        "--algorithm",
        choices=["topdown", "bottomup"],
        help="the search, for the series and the localized baseline alike (default topdown; a budget above 0 "
        "always runs bottomup, the only search that suppresses)",
    )
    parser.add_argument("--plot-only", action="store_true", help="redraw the PNGs from the JSON files")
    parser.add_argument(
        "--table", action="store_true", help="print the Markdown key-number table of the JSON files (runs nothing)"
    )
    parser.add_argument(
        "--estimators",
        action="store_true",
        help="with --table: the three query-error estimators, baseline and gain instead of the key numbers",
    )
    parser.add_argument("--images", type=Path, default=IMAGES, help="where the PNGs go")
    args = parser.parse_args(argv)
    args.overrides = {k: v for k, v in (("ell", args.ell), ("k_prime", args.k_prime), ("alpha", args.alpha))
                      if v is not None}  # fmt: skip
    args.specs = list(FIGURES.values()) if args.figure == "all" else [FIGURES[args.figure]]
    if args.values and args.figure == "all":
        parser.error("--values needs one figure (fig6..fig9): the figures vary different parameters")
    unused = [k for k in args.overrides if not any(k in spec.fixed for spec in args.specs)]
    if unused:
        flags = ", ".join("--" + k.replace("_", "-") for k in unused)
        parser.error(f"{flags} is not a fixed parameter of {args.figure} (the figure varies it or does not use it)")
    return args


def outputs(args: argparse.Namespace) -> list[tuple[str, FigureSpec, dict[str, float]]]:
    """Per figure and scenario of a parsed command: the file stem of its JSON and PNGs,
    the figure and its fixed parameters."""
    planned = []
    for scenario_name in args.scenario:
        for spec in args.specs:
            fixed = {**spec.fixed, **{k: v for k, v in args.overrides.items() if k in spec.fixed}}
            name = stem(
                spec,
                scenario_name,
                fixed,
                args.budget,
                args.seed,
                args.rounds,
                args.values,
                not args.no_baseline,
                args.algorithm,
            )
            planned.append((name, spec, fixed))
    return planned


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    raw = list(sys.argv[1:]) if argv is None else list(argv)
    command = shlex.join([".venv/bin/python", "benchmarks/experiments.py", *raw])
    planned = outputs(args)  # scenario-major: the figures of one scenario share its workspace
    if args.table:
        found = [(name, OUT / f"{name}.json") for name, _, _ in planned]
        records = [(name, json.loads(path.read_text(encoding="utf-8"))) for name, path in found if path.exists()]
        print(estimator_numbers(records) if args.estimators else key_numbers(records))
        return 0
    for i, scenario_name in enumerate(args.scenario):
        scenario: Scenario | None = None
        baselines: dict[float, list[dict[str, Any]]] = {}
        for name, spec, fixed in planned[i * len(args.specs) : (i + 1) * len(args.specs)]:
            path = OUT / f"{name}.json"
            if args.plot_only:
                record = json.loads(path.read_text(encoding="utf-8"))
            else:
                if scenario is None:
                    t0 = time.perf_counter()
                    ws, paths = build_workspace(scenario_name, args.seed)
                    scenario = Scenario.from_workspace(scenario_name, ws, paths)
                    print(f"[{scenario_name}] workspace {ws.root} ready in {time.perf_counter() - t0:.1f} s")
                values = args.values or spec.values
                record = run_figure(
                    spec,
                    scenario,
                    values,
                    fixed,
                    args.rounds,
                    not args.no_baseline,
                    command,
                    baseline_cache=baselines,
                    budget=args.budget,
                    seed=args.seed,
                    algorithm=args.algorithm or "topdown",
                )
                OUT.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
                print(f"wrote {path}")
            for png in plot_figure(record, args.images, name):
                print(f"wrote {png}")
            print(summary(record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
