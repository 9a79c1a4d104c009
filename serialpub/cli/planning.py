"""``serialpub plan``: candidate settings tried in memory before the first release
(:mod:`serialpub.planning`; docs/choosing.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table

from serialpub.cli.app import app, console, split_list
from serialpub.errors import InputError

_LIST = "comma-separated candidates"


def _protected_items(text: str) -> list[Any]:
    """``all``, ``rarest:m``, or values joined with ``|`` (one list) per comma-separated item."""
    out: list[Any] = []
    for item in split_list(text):
        out.append(item if item == "all" or item.startswith("rarest:") else [v.strip() for v in item.split("|")])
    return out


@app.command()
def plan(
    config: Annotated[Path, typer.Option("--config", help="serialpub.yaml or its folder")] = Path("."),
    rounds: Annotated[int, typer.Option("--rounds", help="releases to publish in memory per candidate")] = 20,
    snapshots: Annotated[
        Path | None, typer.Option("--snapshots", help="folder of snapshot files (default: the workspace's snapshots/)")
    ] = None,
    simulate: Annotated[
        str | None, typer.Option("--simulate", help="simulate the snapshots with a preset: paper or cohort")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="seed of the simulated snapshots")] = 0,
    grid: Annotated[Path | None, typer.Option("--grid", help="YAML file: setting -> list of values")] = None,
    ell: Annotated[str | None, typer.Option("--l", help=f"ℓ values, {_LIST}")] = None,
    k_prime: Annotated[str | None, typer.Option("--k", "--k-prime", help=f"k' values, {_LIST}")] = None,
    strategy: Annotated[str | None, typer.Option("--strategy", help=f"constant, geometric; {_LIST}")] = None,
    alpha: Annotated[str | None, typer.Option("--alpha", help=f"α values, {_LIST}")] = None,
    protected: Annotated[
        str | None,
        typer.Option("--protected", help=f"all, rarest:m, or values joined by '|'; {_LIST}"),
    ] = None,
    partition_model: Annotated[
        str | None, typer.Option("--partition-model", help=f"published, parts (known breach); {_LIST}")
    ] = None,
    after_k: Annotated[str | None, typer.Option("--after-k", help=f"renew, stop; {_LIST}")] = None,
    partition_epsilon: Annotated[
        str | None,
        typer.Option("--partition-epsilon", help=f"sound, or ε of the noisy split test (at most 0.6931); {_LIST}"),
    ] = None,
    split_rule: Annotated[
        str | None,
        typer.Option("--split-rule", help=f"widest, history (cuts placed by the published history); {_LIST}"),
    ] = None,
    propensity_ratio: Annotated[
        str | None,
        typer.Option(
            "--propensity-ratio",
            help=f"ρ of the charge, whole numbers >= 1, or value=ρ items joined by / (one ρ per value); {_LIST}",
        ),
    ] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="write every figure as JSON here")] = None,
    html_out: Annotated[Path | None, typer.Option("--html", help="write the plan's page here")] = None,
    jobs: Annotated[int | None, typer.Option("--jobs", help="worker processes (default: the machine's cores)")] = None,
    max_candidates: Annotated[
        int | None,
        typer.Option("--max-candidates", help="the most candidates the grid may have (without it: 200)"),
    ] = None,
    learners: Annotated[
        str,
        typer.Option(
            "--learners",
            help="learning adversaries run on every candidate's series: all, none, or names joined by commas "
            "(nb, nb-em3, nb-em10, logistic-pairs)",
        ),
    ] = "nb",
    tune_ratio: Annotated[
        int,
        typer.Option(
            "--tune-ratio",
            help="raise ρ per protected value by the rule of docs/threat-model.md for at most this many steps, "
            "each step the candidate's series published again (0: off); reads nb and logistic-pairs",
        ),
    ] = 0,
) -> None:
    """Try candidate settings on the workspace's register and snapshots before release 1.

    Each candidate's series is published in memory with the real anonymizer (no state, no
    release store); the table ranks the candidates that last all rounds by their gain over
    a release of the sensitive histogram alone. Beside the largest breach probability (the
    uniform charge), the learners' largest posterior (``--learners``, naive Bayes by default)
    is shown and flagged when it comes within 5 % of 1/ℓ.
    """
    from serialpub.config import load_config
    from serialpub.planning.grid import MAX_CANDIDATES, build_grid, read_grid_file

    if jobs is not None and jobs < 1:
        raise InputError(f"--jobs must be at least 1, got {jobs}")
    if tune_ratio < 0:
        raise InputError(f"--tune-ratio must be 0 (off) or a number of steps, got {tune_ratio}")
    if max_candidates is not None and max_candidates < 1:
        raise InputError(f"--max-candidates must be at least 1, got {max_candidates}")
    given: dict[str, list[Any]] = read_grid_file(grid) if grid is not None else {}
    for name, text in (
        ("l", ell),
        ("k_prime", k_prime),
        ("strategy", strategy),
        ("alpha", alpha),
        ("partition_model", partition_model),
        ("after_k_prime", after_k),
        ("partition_epsilon", partition_epsilon),
        ("propensity_ratio", propensity_ratio),
        ("split_rule", split_rule),
    ):
        if text is not None:
            given[name] = split_list(text)
    if protected is not None:
        given["protected_values"] = _protected_items(protected)
    ws = load_config(config)
    # the anonymizer, pandas and the validation suites only once the grid and the
    # configuration are read: a bad file is refused without their start-up cost
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from serialpub.analysis.audit.learners import learner_names
    from serialpub.planning.page import advice, flag_texts, protected_setting, ranked, write_page
    from serialpub.planning.run import prepare, run_plan
    from serialpub.planning.series import PlanInputs
    from serialpub.planning.tune import ONE_PASS, tune_ratios, tuning_lines, tuning_record
    from serialpub.workflow.measuring import QUERY_COUNT, QUERY_DIMENSIONS, QUERY_SELECTIVITY

    names = learner_names(learners)
    if tune_ratio and not set(names) & set(ONE_PASS):
        raise InputError(
            f"--tune-ratio reads the one-pass learners ({', '.join(ONE_PASS)}); give --learners nb,logistic-pairs"
        )
    # the grid checked before the register is read: a bad grid writes nothing, not even the
    # register cache entry a plan leaves (serialpub.planning.series)
    plan_inputs = PlanInputs.read(ws)
    domain = list(plan_inputs.inputs.sensitive_domain or [])
    candidates = build_grid(given, ws.config, domain, max_candidates or MAX_CANDIDATES)
    setup = replace(prepare(ws, snapshots, simulate, rounds, seed, plan_inputs), learners=names)
    total = len(candidates) * rounds * (tune_ratio + 1)  # tuning: at most, a candidate may stop early
    with Progress(
        TextColumn("candidates × releases"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as bar:
        task = bar.add_task("plan", total=total)
        if tune_ratio:
            trails, seconds = tune_ratios(setup, candidates, tune_ratio, jobs, lambda: bar.advance(task))
            rows = [t[-1] for t in trails]  # each candidate at the ρ the rule reached
        else:
            rows, seconds = run_plan(setup, candidates, jobs, lambda: bar.advance(task))
            trails = []
    cfg = ws.config
    order = ranked(rows, rounds)
    used_jobs = max(1, min(jobs or os.cpu_count() or 1, len(candidates)))
    lines = advice(order, rounds, len(domain))
    document: dict[str, Any] = {
        "dataset": cfg.dataset,
        "workspace": str(ws.root),
        "source": setup.source,
        "rounds": rounds,
        "guarantee": cfg.guarantee.value,
        "dilution": cfg.dilution.value,
        "queries": {
            "count": QUERY_COUNT,
            "qd": QUERY_DIMENSIONS,
            "selectivity": QUERY_SELECTIVITY,
            "seed": cfg.query_seed,
        },
        "seconds": seconds,
        "jobs": used_jobs,
        "learners": list(names),
        "advice": lines,
        "candidates": order,
    }
    if tune_ratio:
        document["tuning"] = tuning_record(trails)
    console.print(_table(order, rounds, flag_texts))
    # serialpub.yaml needs the values themselves: what each rarest:m of the grid stands for
    for spec, r in {
        r["settings"]["protected_values"]: r
        for r in order
        if str(r["settings"]["protected_values"]).startswith("rarest:")
    }.items():
        console.print(f"{spec} = {protected_setting(r)}", markup=False)
    for line in lines:
        console.print(f"• {line}")
    for line in tuning_lines(document.get("tuning", [])):
        console.print(line, markup=False)
    for r in order:
        if r["reason"]:
            reason = r["reason"] if len(r["reason"]) <= 240 else r["reason"][:239] + "…"
            console.print(f"refused: {r['candidate']}, release {r['refused_at']}: {reason}", markup=False)
    series = f" ({sum(len(t) for t in trails)} series with the rule's steps)" if tune_ratio else ""
    console.print(
        f"{len(candidates)} candidates × {rounds} releases{series} in {seconds:.1f} s on {used_jobs} process(es)"
    )
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        console.print(f"JSON: {json_out}")
    if html_out is not None:
        console.print(f"page: {write_page(html_out, document)}")


def _table(rows: list[dict[str, Any]], rounds: int, flag_texts: Callable[[dict[str, Any]], list[str]]) -> Table:
    table = Table(
        title=f"Candidates, most useful first (those lasting {rounds} releases without a flag, by gain)",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        caption=(
            "pub: releases published before the first refusal; max p: largest breach probability; groups: mean a "
            "release; err: mean relative error of 5,000 range-count queries read with the register's joint "
            "distribution; base: the same for the sensitive histogram alone; gain = base − err; unif: paper 001's "
            "uniform reading; linked: individuals per linked releases at the end; ! known breach (parts); learned: the "
            "learners' largest posterior P' (docs/threat-model.md); flags: refused, a release of 1 group, max p or "
            "learned P' within 5 % of 1/ℓ"
        ),
        caption_justify="left",
    )
    columns = (
        "#",
        "candidate",
        "flags",
        "pub",
        "refused",
        "max p",
        "learned",
        "groups",
        "err",
        "base",
        "gain",
        "unif",
        "linked",
        "s",
    )
    for col in columns:
        table.add_column(col, justify="left" if col in ("candidate", "flags", "linked") else "right")

    def f(v: float | None, fmt: str = ".3f") -> str:
        return "-" if v is None else format(v, fmt)

    for i, r in enumerate(rows, 1):
        linked = " ".join(f"{k}:{v}" for k, v in r["linked"].items())
        table.add_row(
            str(i),
            ("! " if r["known_breach"] else "") + r["candidate"],
            "; ".join(f for f in flag_texts(r) if f != "known breach"),
            str(r["published"]),
            "-" if r["refused_at"] is None else str(r["refused_at"]),
            f(r["max_breach"], ".4f"),
            f(r["learners_max_posterior"], ".4f"),
            f(r["groups_mean"], ",.0f"),
            f(r["error"]),
            f(r["baseline"]),
            f(r["gain"]),
            f(r["uniform"]),
            linked,
            f(r["seconds"], ".1f"),
        )
    return table
