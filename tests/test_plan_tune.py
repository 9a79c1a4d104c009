"""``serialpub plan --tune-ratio`` (serialpub.planning.tune): the per-value rule of
docs/threat-model.md ("Choosing the ratio per value") step by step, each step's ρ the
rule's answer to the previous step's figures, and the last step the plain plan of the ρ
reached."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from serialpub.config import load_config
from serialpub.planning.grid import build_grid, ratio_text
from serialpub.planning.run import prepare, run_plan
from serialpub.planning.tune import (
    MAX_RATIO,
    learned_per_value,
    next_ratios,
    outcome,
    ratio_of,
    tune_ratios,
)
from tests.helpers import cli, make_workspace

DOMAIN = ["flu", "cold", "fever", "gastritis", "hiv", "cancer"]
FIVE = ["Armed-Forces", "Farming-fishing", "Priv-house-serv", "Protective-serv", "Tech-support"]


def test_the_rule_on_the_five_rarest_demo_figures() -> None:
    """The rule's steps on the learners' per-value max P' measured on the five-rarest demo
    (docs/threat-model.md's table): ρ = 1 names three values, the next step Armed-Forces,
    whose ρ = 2 leaves the groups as they were; the rule multiplies it again, to 4 and 8."""
    rho = dict.fromkeys(FIVE, 1)
    step1 = next_ratios(rho, dict(zip(FIVE, [0.452, 0.528, 0.713, 0.534, 0.321], strict=True)), 2)
    assert step1 == {"Armed-Forces": 1, "Farming-fishing": 2, "Priv-house-serv": 2, "Protective-serv": 2,
                     "Tech-support": 1}  # fmt: skip
    step2 = next_ratios(step1, dict(zip(FIVE, [0.600, 0.320, 0.420, 0.314, 0.290], strict=True)), 2)
    assert step2 == {**step1, "Armed-Forces": 2}
    step3 = next_ratios(step2, {"Armed-Forces": 0.698}, 2)
    assert step3 == {**step1, "Armed-Forces": 4}
    assert next_ratios(step3, {"Armed-Forces": 0.51}, 2) == {**step1, "Armed-Forces": 8}
    assert next_ratios(step3, dict(zip(FIVE, [0.338, 0.320, 0.369, 0.323, 0.272], strict=True)), 2) is None


@pytest.mark.parametrize(
    ("ell", "m", "factor"),
    [(2, 0.5000001, 2), (2, 0.999, 2), (2, 1.0, 2), (3, 0.34, 2), (3, 0.67, 3), (3, 1.0, 3), (4, 0.9, 4)],
)
def test_the_factor_is_the_ceiling_of_ell_times_m(ell: float, m: float, factor: int) -> None:
    assert next_ratios({"a": 3}, {"a": m, "b": 0.1}, ell) == {"a": 3 * factor, "b": 1}


def test_at_the_bound_nothing_moves_and_a_ratio_past_the_cap_stops_the_rule() -> None:
    assert next_ratios({}, {"a": 0.5, "b": 0.2}, 2) is None  # P' = 1/ℓ is within the bound
    assert next_ratios({"a": MAX_RATIO // 2}, {"a": 0.6}, 2) == {"a": MAX_RATIO // 2 * 2}
    assert next_ratios({"a": MAX_RATIO // 2 + 1}, {"a": 0.6}, 2) is None


def test_the_rule_reads_only_the_one_pass_learners() -> None:
    figures = [
        {"name": "nb", "max_per_value": {"a": 0.4, "b": 0.7}},
        {"name": "nb-em10", "max_per_value": {"a": 0.99, "b": 0.99}},
        {"name": "logistic-pairs", "max_per_value": {"a": 0.6, "b": 0.1}},
    ]
    assert learned_per_value(figures) == {"a": 0.6, "b": 0.7}


def _timeless(row: dict[str, Any]) -> dict[str, Any]:
    def strip(d: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in d.items() if k != "seconds"}

    return {**strip(row), "learners": [strip(x) for x in row["learners"]]}


@pytest.mark.slow
def test_tuning_follows_the_rule_and_ends_on_the_plain_plan_of_the_ratio_reached(tmp_path: Path) -> None:
    """On a clinic workspace where naive Bayes reads one value above 1/ℓ at ρ = 1: each
    step's ρ is :func:`next_ratios` of the step before, the last step has every value's m_s
    within 1/ℓ, and its figures are those of a plan run at that ρ on its own."""
    ws = load_config(make_workspace(tmp_path / "ws", seed=0, n=120, periods=3))
    setup = replace(prepare(ws, None, None, 3), learners=("nb", "logistic-pairs"))
    grid = {"protected_values": ["rarest:2"], "k_prime": [1]}
    (trail,), _ = tune_ratios(setup, build_grid(grid, ws.config, DOMAIN), 3, jobs=1)
    assert len(trail) >= 2 and max(learned_per_value(trail[0]["learners"]).values()) > 0.5
    for before, after in itertools.pairwise(trail):
        (cand,) = build_grid({**grid, **_ratio_axis(before)}, ws.config, DOMAIN)
        expected = next_ratios(ratio_of(cand, before["protected"]), learned_per_value(before["learners"]), 2)
        assert expected is not None
        assert after["settings"]["propensity_ratio"] == {v: r for v, r in expected.items() if r > 1}
    assert outcome(trail) == "converged"
    assert all(p <= 0.5 for p in learned_per_value(trail[-1]["learners"]).values())
    reached = build_grid({**grid, **_ratio_axis(trail[-1])}, ws.config, DOMAIN)
    (plain,), _ = run_plan(setup, reached, jobs=1)
    assert _timeless(plain) == _timeless(trail[-1])


def _ratio_axis(row: dict[str, Any]) -> dict[str, list[Any]]:
    rho = row["settings"].get("propensity_ratio", 1)
    return {"propensity_ratio": [rho if isinstance(rho, int) else ratio_text(tuple(sorted(rho.items())))]}


@pytest.mark.slow
def test_the_command_prints_each_step_and_writes_the_tuning(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws", seed=0, n=120, periods=3)
    out = tmp_path / "p.json"
    args = ["plan", "--config", root, "--rounds", "3", "--k", "1", "--protected", "rarest:2", "--jobs", "1"]
    proc = cli(*args, "--learners", "nb,logistic-pairs", "--tune-ratio", "3", "--json", out)
    assert proc.returncode == 0, proc.stderr
    (entry,) = json.loads(out.read_text())["tuning"]
    assert entry["outcome"] == "converged" and len(entry["steps"]) >= 2
    assert entry["steps"][0]["propensity_ratio"] == 1 and entry["reached"] == entry["steps"][-1]["propensity_ratio"]
    assert "step 0: ρ=1" in proc.stdout and "converged" in proc.stdout
    assert f"({len(entry['steps'])} series with the rule's steps)" in proc.stdout
    # the table ranks each candidate at the ρ reached
    (row,) = json.loads(out.read_text())["candidates"]
    assert row["settings"]["propensity_ratio"] == entry["reached"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--tune-ratio", "-1"], "--tune-ratio must be 0 (off) or a number of steps, got -1"),
        (["--tune-ratio", "2", "--learners", "nb-em3"], "--tune-ratio reads the one-pass learners"),
    ],
)
def test_a_bad_tuning_gets_one_line_and_exit_2(tmp_path: Path, args: list[str], says: str) -> None:
    root = make_workspace(tmp_path / "ws")
    proc = cli("plan", "--config", root, "--rounds", "2", *args)
    assert proc.returncode == 2, proc.stdout
    line = proc.stderr.strip()
    assert "\n" not in line and says in line, line
