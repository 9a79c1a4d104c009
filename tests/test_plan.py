"""``serialpub plan`` (serialpub.planning): each candidate's figures equal those of a real
series published with ``serialpub release`` under the same settings; bad grids and inputs
get one line and exit 2 with nothing written; the plan page opens in headless Chromium."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from anonymizer.joint import JointRelease, joint_answers
from anonymizer.queries import draw_workload
from serialpub.analysis.audit import audit_workspace
from serialpub.analysis.audit.learners import LEARNERS
from serialpub.config import load_config
from serialpub.errors import InputError, quoted
from serialpub.io.inputs import read_csv, snapshot_from_table
from serialpub.planning.grid import MAX_CANDIDATES, SETTINGS, build_grid, read_grid_file
from serialpub.planning.run import prepare, run_plan
from serialpub.workflow.measuring import QUERY_COUNT, QUERY_DIMENSIONS, QUERY_SELECTIVITY
from serialpub.workflow.publisher import Publisher
from tests.helpers import cli, make_workspace, nested_aliases, read_config, snapshot, write_config

PERIODS = 3
#: the clinic workspace's sensitive domain
DOMAIN = ["flu", "cold", "fever", "gastritis", "hiv", "cancer"]
#: two candidates whose settings each change the series: under paper 004's rule ("stop")
#: the first is refused at release 2 (with "renew" it lasts); the second's ℓ, α, rarest
#: values and partition model each change its groups
CANDIDATES: list[dict[str, Any]] = [
    {"l": 2, "strategy": "constant", "k_prime": 1, "protected_values": "all", "partition_model": "published",
     "after_k_prime": "stop"},
    {"l": 3, "strategy": "geometric", "alpha": 2, "protected_values": "rarest:2", "partition_model": "parts"},
]  # fmt: skip


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _written(root: Path, before: list[str]) -> list[str]:
    """The files a plan added to ``root``: its register cache entry alone (checked here) or nothing."""
    added = sorted(set(_files(root)) - set(before))
    assert set(_files(root)) >= set(before)
    assert [Path(a).suffix for a in added if a != "cache"] in ([], [".arrow", ".sha256"]), added
    assert all(a == "cache" or a.startswith("cache/register-") for a in added), added
    return added


def _real_series(root: Path, settings: dict[str, Any], protected: list[str]) -> list[dict[str, Any]]:
    """Publish the periods with ``serialpub release`` under ``settings``; per published
    release its figures read back from the release store."""
    config = read_config(root)
    config.update({k: v for k, v in settings.items() if k != "protected_values"}, protected_values=protected)
    if settings["strategy"] == "geometric":
        config.pop("k_prime", None)
    if settings["partition_model"] == "parts":  # a real series must acknowledge the model's known breach
        config["accept_known_breach"] = ["parts"]
    write_config(root, config)
    ws = load_config(root)
    ctx = Publisher(ws)
    out = []
    for t in range(1, PERIODS + 1):
        proc = cli("release", "--config", root, "--snapshot", snapshot(root, t))
        if proc.returncode != 0:
            out.append({"refused": t, "message": proc.stderr})
            break
        folder = ws.dataset_dir / f"release-{t:04d}"
        manifest = json.loads((folder / "manifest.json").read_text())
        table = pd.read_parquet(folder / "data.parquet")
        domain = set(ctx.sensitive_domain or [])
        table_t = read_csv(snapshot(root, t), "snapshot")
        snap = snapshot_from_table(
            table_t, snapshot(root, t), "id", ctx.qis, "disease", ctx.register, ctx.hierarchies, domain
        )
        w = draw_workload(
            snap.table[[*ctx.qis, "disease"]],
            ctx.hierarchies,
            "disease",
            n_queries=QUERY_COUNT,
            qd=QUERY_DIMENSIONS,
            selectivity=QUERY_SELECTIVITY,
            seed=0,
        )
        read = ctx.read_hierarchies(table)
        release = JointRelease.of(
            table,
            ctx.qis,
            "disease",
            [read[q] for q in ctx.qis],
            np.asarray(ctx.register.keys[:]),
            w.ranges.sensitive_values,
        )
        a = joint_answers(release, w.ranges)
        out.append(
            {
                "groups": manifest["groups"],
                "records": manifest["records"],
                "max_breach": manifest["max_breach_probability"],
                "error": float((np.abs(w.actual - a.estimate) / w.actual).mean()),
                "uniform": float((np.abs(w.actual - a.uniform) / w.actual).mean()),
            }
        )
    return out


@pytest.mark.slow
@pytest.mark.parametrize("which", [0, 1])
def test_plan_figures_equal_a_real_series(tmp_path: Path, which: int) -> None:
    settings = CANDIDATES[which]
    # every learner on the series of three releases; naive Bayes alone on the one refused at
    # release 2, where the other learners would repeat the same comparison on one release
    learners = LEARNERS if which == 1 else ("nb",)
    planned_root = make_workspace(tmp_path / "plan", periods=PERIODS)
    before = _files(planned_root)
    ws = load_config(planned_root)
    setup = replace(prepare(ws, None, None, PERIODS), learners=learners)
    grid = {k: [v] for k, v in settings.items()}
    (candidate,) = build_grid(grid, ws.config, list(setup.plan.inputs.sensitive_domain or []))
    (row,), _ = run_plan(setup, [candidate], jobs=1)
    setup.plan.register.cache_writes.wait()
    # no state, no release store: the register cache entry alone
    assert len(_written(planned_root, before)) == 3

    real_root = make_workspace(tmp_path / "real", periods=PERIODS)
    real = _real_series(real_root, settings, row["protected"])
    published = [r for r in real if "refused" not in r]
    assert row["published"] == len(published)
    refused = [r for r in real if "refused" in r]
    assert row["refused_at"] == (refused[0]["refused"] if refused else None)
    assert row["known_breach"] == (settings["partition_model"] == "parts")
    for mine, theirs in zip(row["releases"], published, strict=True):
        assert mine["groups"] == theirs["groups"]
        assert mine["records"] == theirs["records"]
        assert mine["max_breach"] == pytest.approx(theirs["max_breach"], rel=1e-12, abs=0)
        assert mine["error"] == pytest.approx(theirs["error"], rel=1e-9)
        assert mine["uniform"] == pytest.approx(theirs["uniform"], rel=1e-9)
        assert mine["gain"] == pytest.approx(mine["baseline"] - theirs["error"], rel=1e-9)
    assert row["published"] >= 1  # the comparison compared something
    # the learners' figures are the audit's on the series published for real (its public files)
    audited = {f.name: f for f in audit_workspace(real_root, learners=learners).learners.learners}
    assert [x["name"] for x in row["learners"]] == list(learners)
    for mine in row["learners"]:
        theirs = audited[mine["name"]]
        # the logistic fit stops at its gradient tolerance: its cells in another order end a
        # few 1e-6 away; the naive Bayes learners are closed forms
        tol = 1e-4 if mine["name"] == "logistic-pairs" else 1e-9
        assert mine["max_p"] == pytest.approx(theirs.max_p, rel=tol, abs=1e-12), mine["name"]
        assert mine["max_uniform"] == pytest.approx(theirs.max_uniform, rel=1e-9, abs=1e-12), mine["name"]
        assert (mine["above"], mine["max_value"]) == (theirs.above, theirs.max_value), mine["name"]
    assert row["learners_max_posterior"] == max(x["max_p"] for x in row["learners"]) > 0
    if settings["protected_values"] == "rarest:2":  # the two values with the fewest records over the snapshots
        counts = pd.concat([pd.read_csv(snapshot(planned_root, t))["disease"] for t in range(1, PERIODS + 1)])
        per = counts.value_counts().reindex(["flu", "cold", "fever", "gastritis", "hiv", "cancer"], fill_value=0)
        assert set(row["protected"]) == set(per.sort_values(kind="stable").index[:2])


def test_the_baseline_is_the_histogram_alone(tmp_path: Path) -> None:
    """The baseline reads one group, every QI '*': the same as a release published under
    settings that generalize everything, read with the same estimator."""
    ws = load_config(make_workspace(tmp_path / "ws", periods=1))
    setup = prepare(ws, None, None, 1)
    w = setup.measure.workloads[0]
    snap = setup.snapshots[0]
    table = pd.DataFrame({q: "*" for q in setup.plan.inputs.qis}, index=range(len(snap.individual)))
    table["disease"] = snap.value
    hs = [setup.plan.inputs.hierarchies[q] for q in setup.plan.inputs.qis]
    a = joint_answers(
        JointRelease.of(table, setup.plan.inputs.qis, "disease", hs, setup.measure.leaves, w.ranges.sensitive_values),
        w.ranges,
    )
    assert setup.measure.baseline[0] == pytest.approx(float((np.abs(w.actual - a.estimate) / w.actual).mean()))


def test_plan_command_writes_json_and_page_and_ranks_lasting_candidates(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws", periods=2)
    before = _files(root)
    proc = cli(
        "plan",
        "--config",
        root,
        "--rounds",
        "2",
        "--l",
        "2,3",
        "--protected",
        "all,rarest:1",
        "--jobs",
        "1",
        "--json",
        tmp_path / "p.json",
        "--html",
        tmp_path / "p.html",
    )
    assert proc.returncode == 0, proc.stderr
    assert len(_written(root, before)) == 3
    doc = json.loads((tmp_path / "p.json").read_text())
    rows = doc["candidates"]
    assert len(rows) == 4 and doc["advice"]
    lasted = [r["published"] >= 2 for r in rows]
    assert lasted == sorted(lasted, reverse=True)  # the candidates that last come first ...
    gains = [r["gain"] for r in rows if r["published"] >= 2]
    assert gains == sorted(gains, reverse=True)  # ... by gain
    page = (tmp_path / "p.html").read_text()
    assert 'id="plan-table"' in page and "<svg" in page


def test_parts_candidates_are_flagged_as_a_known_breach(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws", periods=1)
    proc = cli(
        "plan",
        "--config",
        root,
        "--rounds",
        "1",
        "--partition-model",
        "published,parts",
        "--jobs",
        "1",
        "--json",
        tmp_path / "p.json",
    )
    assert proc.returncode == 0, proc.stderr
    rows = json.loads((tmp_path / "p.json").read_text())["candidates"]
    assert {r["settings"]["partition_model"]: r["known_breach"] for r in rows} == {"published": False, "parts": True}
    assert "! " in proc.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--l", ""], "--l: no value given; the grid is empty"),
        (["--protected", "hiv|HIV"], "'HIV' not in the sensitive domain"),
        (["--protected", "rarest:9"], "rarest:m needs a whole m from 1 to 6"),
        (["--l", "1"], "ℓ = 1 is impossible; ℓ must be greater than 1"),
        (["--strategy", "geometric", "--alpha", "1"], "α = 1 is impossible; α must be greater than 1"),
        (["--k", "0"], "k' = 0 is impossible; k' must be a whole number >= 1"),
        (["--strategy", "linear"], "--strategy: 'linear' is not one of constant, geometric"),
        (["--rounds", "9"], "3 snapshot file(s) for --rounds 9"),
        # a long value is quoted short: its start and end around an ellipsis
        (["--l", "9" * 4000 + "x"], f"--l: {quoted('9' * 4000 + 'x')} is not a number"),
        (["--l", "1.9999999"], "ℓ = 1.9999999; serialpub allows ℓ >= 2"),
        (["--k", "2." + "5" * 4000], "k' = 2.5555555555555554 is impossible"),
        (["--strategy", "s" * 5000], "is not one of constant, geometric"),
        (["--protected", "p" * 5000], f"{quoted('p' * 5000)} not in the sensitive domain of 6 values"),
        (["--protected", "rarest:" + "9" * 5000], "rarest:m needs a whole m from 1 to 6"),
        (["--protected", "rarest:²"], "rarest:m needs a whole m from 1 to 6"),
        (["--l", "2,3", "--max-candidates", "0"], "--max-candidates must be at least 1, got 0"),
    ],
)
def test_bad_grid_gets_one_line_exit_2_and_nothing_written(tmp_path: Path, args: list[str], says: str) -> None:
    root = make_workspace(tmp_path / "ws")
    before = _files(root)
    out = tmp_path / "out"
    proc = cli("plan", "--config", root, "--rounds", "2", *args, "--json", out / "p.json", "--html", out / "p.html")
    assert proc.returncode == 2, proc.stdout
    line = proc.stderr.strip()
    assert "\n" not in line and len(line) <= 300 and says in line, line
    assert _files(root) == before and not out.exists()


def test_snapshots_that_do_not_match_the_register_are_refused(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    other = tmp_path / "other"
    other.mkdir()
    for t in (1, 2):
        shutil.copy(snapshot(root, t), other / f"snapshot-{t:04d}.csv")
    text = (other / "snapshot-0002.csv").read_text().splitlines()
    fields = text[1].split(",")
    fields[1] = "F" if fields[1] == "M" else "M"  # a sex the register does not hold for this person
    (other / "snapshot-0002.csv").write_text("\n".join([text[0], ",".join(fields), *text[2:]]) + "\n")
    proc = cli("plan", "--config", root, "--snapshots", other, "--rounds", "2", "--json", tmp_path / "p.json")
    assert proc.returncode == 2
    assert "snapshot-0002.csv" in proc.stderr and "\n" not in proc.stderr.strip()
    assert not (tmp_path / "p.json").exists()


def test_grid_file(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws", periods=1)
    grid = tmp_path / "grid.yaml"
    grid.write_text("l: [2, 3]\nprotected: [hiv, cancer]\nstrategy: [constant, geometric]\nalpha: [2, 3]\n")
    ws = load_config(root)
    from serialpub.planning.grid import read_grid_file

    cands = build_grid(read_grid_file(grid), ws.config, ["hiv", "cancer", "flu"])
    # constant: one per ℓ (α does not apply); geometric: ℓ × α; one protected list
    assert len(cands) == 2 + 4
    assert {c.protected for c in cands} == {("hiv", "cancer")}


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace the tests below only read (none gets as far as planning)."""
    return make_workspace(tmp_path_factory.mktemp("planned") / "ws", periods=1)


@pytest.mark.parametrize("depth", [6, 9])
@pytest.mark.parametrize("key", [*SETTINGS, "ell", "protected", "k"])
def test_nested_aliases_in_a_grid_are_refused_at_the_first_alias(
    tmp_path: Path, planned: Path, key: str, depth: int
) -> None:
    """A grid of nested aliases expanded to 9^depth strings when its value was checked or
    quoted in the refusal. The grid is now read as serialpub.yaml is: the first alias is
    refused before anything is expanded, so nothing grows with the depth; the message names
    the alias and where it is."""
    bomb = nested_aliases(depth)
    grid = tmp_path / "grid.yaml"
    grid.write_text(f"{key}: {bomb}\n", encoding="utf-8")
    out = tmp_path / "out"
    proc = cli("plan", "--config", planned, "--rounds", "1", "--grid", grid, "--json", out / "p.json")
    assert proc.returncode == 2, proc.stdout
    column = len(f"{key}: ") + bomb.index("*a") + 1
    assert proc.stderr == (
        f"serialpub: error: {grid}: not valid YAML (line 1, column {column}: alias '*a' is not allowed in a grid "
        "file; write the value out)\n"
    )
    assert len(proc.stderr.encode()) < 300 and not out.exists()


def test_nested_aliases_in_a_grid_never_expand_in_a_bounded_process(tmp_path: Path) -> None:
    """The grid read and checked in a process limited in address space: before aliases were
    refused, quoting the expanded value in the refusal ran out of it."""
    grid = tmp_path / "grid.yaml"
    grid.write_text(f"k_prime: {nested_aliases(9)}\n", encoding="utf-8")
    code = textwrap.dedent(
        """
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        from pathlib import Path
        from serialpub.config import Config
        from serialpub.errors import InputError
        from serialpub.planning.grid import build_grid, read_grid_file
        config = Config.model_validate({"dataset": "d", "quasi_identifiers": ["q"], "sensitive": "s", "l": 2})
        try:
            build_grid(read_grid_file(Path(sys.argv[1])), config, ["hiv"])
        except InputError as exc:
            print("REFUSED", exc)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code, str(grid)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("REFUSED ") and "alias '*a' is not allowed in a grid file" in proc.stdout


def _grid(tmp_path: Path, text: str) -> Path:
    grid = tmp_path / "grid.yaml"
    grid.write_text(text, encoding="utf-8")
    return grid


_PROTECTED = "all, rarest:m, or values of the domain"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("k_prime: [true]\n", "setting --k: true is a boolean; write a whole number >= 1"),
        ("k: true\n", "setting --k: true is a boolean; write a whole number >= 1"),
        ("l: [2, false]\n", "setting --l: false is a boolean; write a number >= 2"),
        ("strategy: geometric\nalpha: [true]\n", "setting --alpha: true is a boolean; write a number > 1"),
        ("protected: [hiv, true]\n", f"setting --protected: true is a boolean; write {_PROTECTED}"),
        ("protected: [[hiv, true]]\n", f"setting --protected: true is a boolean; write {_PROTECTED}"),
    ],
)
def test_a_boolean_in_a_grid_is_refused(tmp_path: Path, planned: Path, text: str, says: str) -> None:
    """Python counts true as 1: ``k_prime: [true]`` ran as k' = 1."""
    with pytest.raises(InputError) as err:
        build_grid(read_grid_file(_grid(tmp_path, text)), load_config(planned).config, DOMAIN)
    assert str(err.value) == says


def test_a_boolean_k_prime_stops_the_plan_command(tmp_path: Path, planned: Path) -> None:
    out = tmp_path / "out"
    grid = _grid(tmp_path, "k_prime: [true]\n")
    proc = cli("plan", "--config", planned, "--rounds", "1", "--jobs", "1", "--grid", grid, "--json", out / "p.json")
    assert proc.returncode == 2
    assert proc.stderr == "serialpub: error: setting --k: true is a boolean; write a whole number >= 1\n"
    assert not out.exists()


def test_a_long_unknown_key_in_a_grid_is_quoted_short(tmp_path: Path) -> None:
    grid = _grid(tmp_path, f"{'x' * 1000}: [2]\n")  # a plain YAML key is at most 1024 characters
    with pytest.raises(InputError) as err:
        read_grid_file(grid)
    assert str(err.value) == (
        f"{grid}: unknown setting {quoted('x' * 1000)}; a grid sets protected_values, l, strategy, k_prime, "
        "after_k_prime, alpha, partition_model, partition_epsilon, split_rule, propensity_ratio"
    )


def test_an_oversized_grid_file_is_refused_unparsed(tmp_path: Path) -> None:
    grid = _grid(tmp_path, "l: [2]\n# " + "x" * (256 << 10) + "\n")
    with pytest.raises(InputError, match=r"grid.yaml: the grid file is larger than 256 KiB"):
        read_grid_file(grid)


def test_a_grid_over_the_cap_is_refused_unless_asked(planned: Path) -> None:
    """At most MAX_CANDIDATES candidates unless the caller allows more; the count is exact
    (k' and after_k_prime multiply the constant ratio only, α the geometric strategy)."""
    config = load_config(planned).config
    assert MAX_CANDIDATES == 200
    at_cap = {"l": [2, 3], "k_prime": list(range(1, 101))}
    assert len(build_grid(at_cap, config, DOMAIN)) == 200
    over = {"l": [2, 3, 4], "k_prime": list(range(1, 68))}  # 201
    with pytest.raises(InputError) as err:
        build_grid(over, config, DOMAIN)
    assert str(err.value) == (
        "the grid has 201 candidates, more than the 200 a plan runs unless asked (each publishes every round in "
        "memory); give fewer values, or --max-candidates 201 to run them all"
    )
    assert len(build_grid(over, config, DOMAIN, max_candidates=201)) == 201
    # mixed strategies: 2 ℓ × 2 protected × (3 k' × 2 after + 4 α) = 40, duplicates given twice counted once
    mixed = {"l": [2, 3, 2.0], "strategy": ["constant", "geometric"], "k_prime": [5, 10, 20, 5],
             "alpha": [1.5, 2, 3, 4], "after_k_prime": ["renew", "stop"],
             "protected_values": ["all", "rarest:2"]}  # fmt: skip
    assert len(build_grid(mixed, config, DOMAIN, max_candidates=40)) == 40
    with pytest.raises(InputError, match="the grid has 40 candidates, more than the 39"):
        build_grid(mixed, config, DOMAIN, max_candidates=39)


def test_the_split_rule_and_the_propensity_ratio_are_axes_of_the_grid(planned: Path) -> None:
    """Each value is a candidate of its own, labelled and recorded only away from its default,
    and each reaches the anonymizer's parameters."""
    from types import SimpleNamespace

    from anonymizer.release import PrivacyParams
    from serialpub.planning.series import candidate_params

    config = load_config(planned).config
    grid = build_grid({"split_rule": ["widest", "history"], "propensity_ratio": [1, 3]}, config, DOMAIN)
    assert len(grid) == 4
    labels = sorted(c.label.split("published")[-1] for c in grid)
    assert labels == ["", " cuts=history", " ρ=3", " ρ=3 cuts=history"]
    history = next(c for c in grid if c.split_rule == "history" and c.propensity_ratio == 3)
    assert history.record()["split_rule"] == "history" and history.record()["propensity_ratio"] == 3
    assert "split_rule" not in grid[0].record() and "propensity_ratio" not in grid[0].record()
    workspace_params = SimpleNamespace(inputs=SimpleNamespace(params=PrivacyParams(ell=2)))
    params = candidate_params(history, workspace_params, list(DOMAIN))  # type: ignore[arg-type]
    assert params.split_rule.value == "history" and params.propensity_ratio == 3
    # one ρ per value: value=ρ items joined by /, recorded as the configuration's mapping,
    # charged over the candidate's protected values (a value it does not protect left out)
    (per_value,) = build_grid({"propensity_ratio": [f"{DOMAIN[1]}=3/{DOMAIN[0]}=2"]}, config, DOMAIN)
    assert per_value.label.endswith(" ρ=cold=3/flu=2")  # in the order of the values' names
    assert per_value.record()["propensity_ratio"] == {DOMAIN[0]: 2, DOMAIN[1]: 3}
    params = candidate_params(per_value, workspace_params, [DOMAIN[1], DOMAIN[2]])  # type: ignore[arg-type]
    assert params.propensity_ratio == (3, 1)
    with pytest.raises(InputError, match="value=ρ items joined by /"):
        build_grid({"propensity_ratio": [f"{DOMAIN[0]}=0"]}, config, DOMAIN)
    for bad, says in ((["nearest"], "not one of widest, history"), ([0], "ρ must be a whole number")):
        key = "split_rule" if bad == ["nearest"] else "propensity_ratio"
        with pytest.raises(InputError, match=says):
            build_grid({key: bad}, config, DOMAIN)


def test_a_grid_of_a_million_candidates_is_refused_before_it_is_built(tmp_path: Path, planned: Path) -> None:
    out = tmp_path / "out"
    thousand = ",".join(str(2 + i / 1000) for i in range(1000))
    proc = cli(
        "plan",
        "--config",
        planned,
        "--rounds",
        "1",
        "--l",
        thousand,
        "--k",
        ",".join(map(str, range(1, 1001))),
        "--json",
        out / "p.json",
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("serialpub: error: the grid has 1,000,000 candidates, more than the 200 ")
    assert "--max-candidates 1000000 to run them all" in proc.stderr and proc.stderr.count("\n") == 1
    assert not out.exists()


def test_the_cap_is_documented_with_the_option() -> None:
    commands = (Path(__file__).resolve().parent.parent / "docs" / "commands.md").read_text(encoding="utf-8")
    row = next(line for line in commands.splitlines() if line.startswith("| `--max-candidates`"))
    assert f"`{MAX_CANDIDATES}`" in row


CHROMIUM = next((p for n in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(n))), None)
#: the plan page's screenshot in the docs (docs/choosing.md); the test writes it there when
#: SCREENSHOTS_ENV names a folder (``SERIALPUB_SCREENSHOTS=docs/images``), else only its own copy
SCREENSHOTS_ENV = "SERIALPUB_SCREENSHOTS"
#: a grid on the clinic workspace whose candidates raise every flag but the known breach:
#: rarest:2 lasts without a flag of the uniform charge; rarest:3 and all collapse to 1 group;
#: at ℓ = 2.2 rarest:3 ends at max p 0.4524 >= 0.95/2.2 and all is refused at release 3. On
#: this tiny register the default learner (naive Bayes) reaches 0.4603-0.535 >= 0.95/ℓ on
#: every candidate: each also carries the learner's flag
FLAGGED_GRID = ["--rounds", "3", "--l", "2,2.2", "--k", "1", "--protected", "all,rarest:2,rarest:3"]


@pytest.fixture(scope="module")
def flagged_plan(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """The JSON document and the page of :data:`FLAGGED_GRID`."""
    out = tmp_path_factory.mktemp("flagged")
    root = make_workspace(out / "ws", periods=3)
    proc = cli(
        "plan", "--config", root, *FLAGGED_GRID, "--jobs", "1", "--json", out / "p.json", "--html", out / "plan.html"
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads((out / "p.json").read_text()), out / "plan.html"


def _summary(ell: float, groups: list[int], max_p: float, refused_at: int | None = None) -> dict[str, Any]:
    from serialpub.planning.grid import Candidate
    from serialpub.planning.series import CandidateResult

    candidate = Candidate(ell, "constant", 3, None, "rarest:2", "published", "renew")
    releases = [{"release": i, "groups": g, "max_breach": max_p, "error": 0.1, "baseline": 0.3, "gain": 0.2,
                 "uniform": 1.0} for i, g in enumerate(groups, 1)]  # fmt: skip
    return CandidateResult(candidate, ["hiv", "cancer"], releases, refused_at=refused_at).summary()


def test_flags_near_the_bound_collapse_and_refusal() -> None:
    """max p >= 0.95/ℓ is near the bound (the top pick that ended at 0.4754 against 0.5 was
    not flagged); a release of 1 group is a collapse, named by release."""
    near = _summary(2, [978, 961, 960], 0.4754)
    assert near["flags"] == ["near_bound"] and near["groups_per_release"] == [978, 961, 960]
    assert _summary(2, [978, 961, 960], 0.4749)["flags"] == []
    collapsed = _summary(3, [978, 700, 650, 500, 400, 1, 1, 300], 0.2)
    assert collapsed["flags"] == ["collapsed"] and collapsed["collapsed_releases"] == [6, 7]
    refused = _summary(2, [5, 1], 0.3, refused_at=3)
    assert refused["flags"] == ["refused", "collapsed"]
    from serialpub.planning.page import flag_texts

    assert flag_texts(collapsed) == ["1 group in releases 6-7"]
    assert flag_texts(near) == ["max p 0.4754 within 5% of 1/ℓ = 0.5000"]


def test_the_learner_flag_from_within_5_percent_of_the_bound() -> None:
    """A learner's largest posterior P' >= 0.95/ℓ raises ``learner_near_bound``, worded with
    the strongest learner and whether it is above 1/ℓ; without learners there is no figure."""
    from serialpub.planning.page import flag_texts
    from serialpub.planning.series import CandidateResult

    assert _summary(2, [900], 0.3)["learners_max_posterior"] is None

    def learned(*max_p: float) -> dict[str, Any]:
        row = _summary(2, [900, 800], 0.3)
        names = ["nb", "logistic-pairs"][: len(max_p)]
        learners = [{"name": n, "max_p": p, "above": 0} for n, p in zip(names, max_p, strict=True)]
        result = CandidateResult(**{**_result_fields(row), "learners": learners})
        return result.summary()

    assert learned(0.4749)["flags"] == [] and learned(0.4749)["learners_max_posterior"] == 0.4749
    near = learned(0.30, 0.4750)
    assert near["flags"] == ["learner_near_bound"]
    assert flag_texts(near) == ["learner logistic-pairs: P' 0.4750 within 5% of 1/ℓ = 0.5000"]
    assert flag_texts(learned(0.646))[0] == "learner nb: P' 0.6460 above 1/ℓ = 0.5000"


def _result_fields(row: dict[str, Any]) -> dict[str, Any]:
    from serialpub.planning.grid import Candidate

    return {"candidate": Candidate(2, "constant", 3, None, "rarest:2", "published", "renew"),
            "protected": row["protected"], "releases": row["releases"]}  # fmt: skip


def test_a_flagged_candidate_is_not_silently_first() -> None:
    from serialpub.planning.page import advice, ranked

    clear = dict(_summary(2, [900, 800], 0.30), candidate="clear", gain=0.15)
    near = dict(_summary(2, [900, 800], 0.48), candidate="near", gain=0.25)
    collapsed = dict(_summary(2, [900, 1], 0.30), candidate="collapsed", gain=0.20)
    refused = dict(_summary(2, [900], 0.30, refused_at=2), candidate="refused", gain=0.30)
    order = ranked([refused, collapsed, near, clear], 2)
    assert [r["candidate"] for r in order] == ["clear", "near", "collapsed", "refused"]
    lines = advice(order, 2, 6)
    assert lines[0].startswith("Of the candidates without a flag that last all 2 releases, clear is the most useful")
    below = next(line for line in lines if line.startswith("Ranked below the candidates without a flag"))
    assert "near (gain 0.250; max p 0.4800 within 5% of 1/ℓ = 0.5000)" in below
    assert "collapsed (gain 0.200; 1 group in release 2)" in below


def test_the_plan_json_carries_flags_groups_per_release_and_protected_values(
    flagged_plan: tuple[dict[str, Any], Path],
) -> None:
    doc, page = flagged_plan
    by = {(r["settings"]["l"], r["settings"]["protected_values"]): r for r in doc["candidates"]}
    assert len(by) == 6
    assert doc["learners"] == ["nb"]
    assert by[(2.0, "rarest:2")]["flags"] == ["learner_near_bound"]
    assert by[(2.2, "rarest:2")]["flags"] == ["learner_near_bound"]
    assert by[(2.2, "rarest:3")]["flags"] == ["collapsed", "near_bound", "learner_near_bound"]
    assert by[(2.2, "rarest:3")]["groups_per_release"] == [8, 12, 1]
    assert by[(2.2, "rarest:3")]["collapsed_releases"] == [3]
    assert by[(2.2, "all")]["flags"] == ["refused", "collapsed", "learner_near_bound"]
    assert by[(2.2, "all")]["refused_at"] == 3
    assert by[(2.0, "all")]["flags"] == ["collapsed", "learner_near_bound"]
    for r in doc["candidates"]:  # the learner's figure beside the uniform one, flagged from 0.95/ℓ
        assert [x["name"] for x in r["learners"]] == ["nb"] and r["learners_max_posterior"] == r["learners"][0]["max_p"]
        assert r["learners_max_posterior"] >= 0.95 * r["bound"] and r["max_breach"] <= r["bound"]
    # every candidate flagged: those that last by gain, then the refused one
    lasting = [r["gain"] for r in doc["candidates"][:-1]]
    assert lasting == sorted(lasting, reverse=True) and doc["candidates"][-1]["refused_at"] == 3
    rarest3 = by[(2.2, "rarest:3")]["protected"]
    assert len(rarest3) == 3 and set(rarest3) <= set(DOMAIN)
    html = page.read_text()
    assert "protected_values: [" + ", ".join(f"&#34;{v}&#34;" for v in rarest3) + "]" in html
    # every release says, per level of the search, what blocked its splits, values by name
    for release in by[(2.2, "rarest:3")]["releases"]:
        levels = release["search_levels"]
        assert levels[0]["level"] == 1 and levels[0]["regions"] == 1
        ended = sum(lv["leaf"] + lv["blocked"] for lv in levels)
        assert ended >= release["groups"]  # regions without records publish no group
        assert {b["value"] for lv in levels for b in lv["blocks"]} <= set(rarest3)


def _keep_screenshot(shot: Path) -> None:
    folder = os.environ.get(SCREENSHOTS_ENV)
    if folder:
        shutil.copyfile(shot, Path(folder) / shot.name)


@pytest.mark.slow
def test_plan_page_renders_in_headless_chromium(flagged_plan: tuple[dict[str, Any], Path], tmp_path: Path) -> None:
    """The page a publisher chooses from, in a real browser: every frontier point labelled
    with its rank, the flags and the protected values visible, the groups per release drawn."""
    if CHROMIUM is None:
        message = "no Chromium on PATH: install Debian's 'chromium' package (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    doc, page_file = flagged_plan
    shot = tmp_path / "plan-page.png"
    problems: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.goto(page_file.as_uri(), wait_until="load")
            plot = page.locator("#fig-plan-frontier svg").first.bounding_box()
            labels = page.eval_on_selector_all("#fig-plan-frontier svg text", "els => els.map(e => e.textContent)")
            rows = page.locator("#plan-table tr.candidate")
            cells = [
                {"flags": rows.nth(i).locator("td.flags").inner_text(),
                 "protected": rows.nth(i).locator("code.protected").inner_text(),
                 "flag_visible": [f.is_visible() for f in rows.nth(i).locator(".flag").all()],
                 "protected_visible": rows.nth(i).locator("code.protected").is_visible(),
                 "spark": rows.nth(i).locator("td.groups svg.spark").count()}
                for i in range(rows.count())
            ]  # fmt: skip
            advice = page.locator("#advice li").all_inner_texts()
            learners = [rows.nth(i).locator("td.learners").inner_text() for i in range(rows.count())]
            learners_header = page.locator("#plan-table th.learners").is_visible()
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert problems == []
    assert plot is not None and plot["width"] > 400 and plot["height"] > 150
    # each candidate's rank labels its point in both panels
    for rank in range(1, len(doc["candidates"]) + 1):
        assert labels.count(str(rank)) == 2, (rank, labels)
    assert len(cells) == len(doc["candidates"]) == 6
    for cell, row in zip(cells, doc["candidates"], strict=True):
        assert cell["protected_visible"] and all(cell["flag_visible"])
        assert cell["protected"].startswith("protected_values: ")
        every = row["settings"]["protected_values"] == "all"
        spelled = every or all(f'"{v}"' in cell["protected"] for v in row["protected"])
        assert spelled, cell
        assert cell["spark"] == (1 if row["published"] else 0)
    assert "max p 0.4524 within 5% of 1/ℓ = 0.4545" in "".join(c["flags"] for c in cells)
    assert "1 group in release 3" in "".join(c["flags"] for c in cells)
    assert "refused at release 3" in cells[-1]["flags"]
    # the learner's largest posterior beside the uniform one, and its flag in every row
    assert learners_header
    for cell, text, row in zip(cells, learners, doc["candidates"], strict=True):
        assert text == f"nb {row['learners_max_posterior']:.4f}"
        assert f"learner nb: P' {row['learners_max_posterior']:.4f}" in cell["flags"]
    assert any(line.startswith("No candidate without a flag") for line in advice)
    _keep_screenshot(shot)


def test_simulated_snapshots_are_seeded_and_an_unknown_preset_is_refused(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws", periods=2)
    ws = load_config(root)
    a = prepare(ws, None, "paper", 2, seed=1)
    b = prepare(ws, None, "paper", 2, seed=1)
    c = prepare(ws, None, "paper", 2, seed=2)
    assert [s.individual.tolist() for s in a.snapshots] == [s.individual.tolist() for s in b.snapshots]
    assert [s.individual.tolist() for s in a.snapshots] != [s.individual.tolist() for s in c.snapshots]
    proc = cli("plan", "--config", root, "--simulate", "weekly", "--rounds", "2", "--json", tmp_path / "p.json")
    assert proc.returncode == 2 and "unknown preset; use one of paper, cohort" in proc.stderr
    assert not (tmp_path / "p.json").exists()


@pytest.mark.slow
def test_worker_processes_give_the_figures_of_one_process(tmp_path: Path) -> None:
    ws = load_config(make_workspace(tmp_path / "ws", periods=2))
    setup = prepare(ws, None, None, 2)
    cands = build_grid(
        {"l": [2, 3], "protected_values": ["all", "rarest:2"]},
        ws.config,
        ["hiv", "cancer", "flu", "cold", "fever", "gastritis"],
    )
    ticks: list[int] = []
    one, _ = run_plan(setup, cands, jobs=1)
    two, _ = run_plan(setup, cands, jobs=2, tick=lambda: ticks.append(1))

    def strip(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:  # all but the times
        def timeless(d: dict[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in d.items() if k != "seconds"}

        return [{**timeless(r), "learners": [timeless(x) for x in r["learners"]]} for r in rows]

    assert strip(two) == strip(one) and any(r["learners"] for r in one)
    assert len(ticks) == len(cands) * 2  # the progress bar's candidates × releases


def test_a_workspace_under_the_paper_suppression_model_flags_every_candidate(tmp_path: Path) -> None:
    # the top-down search with the published partition: only the suppression model is at fault
    root = make_workspace(
        tmp_path / "ws",
        periods=1,
        suppression_model="paper",
        partition_model="published",
        accept_known_breach=["paper"],
    )
    proc = cli("plan", "--config", root, "--rounds", "1", "--jobs", "1", "--json", tmp_path / "p.json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads((tmp_path / "p.json").read_text())["candidates"]
    assert rows and all(r["known_breach"] for r in rows)


def test_the_plan_keeps_each_snapshot_without_its_table(tmp_path: Path) -> None:
    """Once its workload is drawn a snapshot is held (and sent to the workers) as its
    register rows and values alone: the same rows, values and value order as read."""
    from serialpub.planning.snapshots import read_snapshot

    root = make_workspace(tmp_path / "ws", periods=1)
    setup = prepare(load_config(root), None, None, 1)
    for t, kept in enumerate(setup.snapshots, start=1):
        full = read_snapshot(setup.plan, snapshot(root, t))
        assert len(kept.table) == 0 and list(kept.table.columns) == list(full.table.columns)
        assert np.array_equal(kept.individual, full.individual) and kept.value.tolist() == full.value.tolist()
        (codes, labels), (full_codes, full_labels) = kept.value_order, full.value_order
        assert np.array_equal(codes, full_codes) and labels.tolist() == full_labels.tolist()
