"""The diagnosis scenario (serialpub.datasets.diagnosis) and the experiment runner
(benchmarks/experiments.py): the generator's promises, a workspace that publishes, and
runner figures equal to what the publishing pipeline produces for the same snapshots."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd
import pytest

from anonymizer.release import PrivacyParams
from serialpub.config import load_config
from serialpub.datasets import adult, diagnosis
from serialpub.io.hierarchies import read_hierarchy
from serialpub.report.wording.utility import BASELINE_ERROR, JOINT_ERROR, QUERY_ERROR, WEIGHTED_ERROR
from serialpub.workflow.publisher import Publisher

ROOT = Path(__file__).resolve().parent.parent
ROUNDS = 3
# the publishing tests use a small workspace: a seeded sample of the Adult register and
# 5 x 4 x 10 = 200 codes (Great Expectations' cost grows with the domain's values)
ROWS = 3000
CHAPTERS, BLOCKS = 5, 4


def _runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("experiments", ROOT / "benchmarks" / "experiments.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["experiments"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated(adult_table: pd.DataFrame) -> diagnosis.DiagnosisData:
    return diagnosis.generate(seed=0, base=adult_table)


def test_generator_is_deterministic_heavy_tailed_and_protects_the_rarest_tenth(
    generated: diagnosis.DiagnosisData, adult_table: pd.DataFrame
) -> None:
    data = generated
    again = diagnosis.generate(seed=0, base=adult_table)
    pd.testing.assert_frame_equal(data.table, again.table)
    assert data.protected == again.protected
    other = diagnosis.generate(seed=1, base=adult_table)
    assert (other.table[diagnosis.SENSITIVE] != data.table[diagnosis.SENSITIVE]).mean() > 0.9

    # the register is Adult, ids and QIs untouched
    assert len(data.table) == adult.CLEAN_ROWS
    pd.testing.assert_frame_equal(
        data.table[[adult.ID_COLUMN, *adult.QUASI_IDENTIFIERS]],
        adult_table[[adult.ID_COLUMN, *adult.QUASI_IDENTIFIERS]],
    )
    # about 2,000 codes, each occurring, counts as reported
    codes = data.hierarchy["code"].to_numpy(dtype=str)
    assert codes.size == 2000 and np.unique(codes).size == 2000
    observed = data.table[diagnosis.SENSITIVE].value_counts().reindex(codes, fill_value=0).to_numpy()
    np.testing.assert_array_equal(observed, data.counts)
    assert data.counts.min() >= 1
    assert data.probability.sum() == pytest.approx(1.0)
    # heavy tail: the most common tenth of the codes holds most records, the rarest tenth under 2 %
    ranked = np.sort(data.counts)[::-1]
    assert ranked[:200].sum() > 0.6 * ranked.sum()
    assert ranked[-200:].sum() < 0.02 * ranked.sum()
    assert ranked[0] > 100 * np.median(ranked)
    # protected: exactly the 200 least frequent codes (no unprotected code is rarer)
    assert len(data.protected) == 200 and len(set(data.protected)) == 200
    is_protected = np.isin(codes, data.protected)
    assert data.counts[is_protected].max() <= data.counts[~is_protected].min()


def test_hierarchy_file_covers_every_code(generated: diagnosis.DiagnosisData, tmp_path: Path) -> None:
    lines = diagnosis.hierarchy_lines(generated.hierarchy)
    assert lines[0] == "A00.0;A00;A00-A09;*"
    path = tmp_path / "diagnosis.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    h = read_hierarchy(path)
    assert set(h.leaves) == set(generated.hierarchy["code"])
    assert h.depth == 4  # code, block, chapter, *
    h.check_domain(generated.table[diagnosis.SENSITIVE].unique(), "generated")


@pytest.fixture(scope="module")
def small_ws(tmp_path_factory: pytest.TempPathFactory, adult_table: pd.DataFrame) -> Path:
    """A small diagnosis workspace: 3,000 individuals, 200 codes (20 protected), 20
    snapshots of about 180 records."""
    root = tmp_path_factory.mktemp("diag") / "ws"
    diagnosis.create_workspace(root, rows=ROWS, auto_approve=True, base=adult_table, chapters=CHAPTERS, blocks=BLOCKS)
    return root


def test_the_full_workspace_loads_and_foreign_folders_are_refused(adult_table: pd.DataFrame, tmp_path: Path) -> None:
    from serialpub.errors import InputError

    ws = diagnosis.create_workspace(tmp_path / "full", base=adult_table)
    assert load_config(tmp_path / "full") == ws
    assert ws.config.sensitive == "diagnosis" and ws.config.quasi_identifiers == adult.QUASI_IDENTIFIERS
    assert ws.config.guarantee == "global" and ws.config.sign_off.auto_approve is False
    assert ws.config.protected_values == diagnosis.generate(seed=0, base=adult_table).protected
    assert len(diagnosis.snapshots(ws)) == 20
    assert "SYNTHETIC" in (tmp_path / "full" / "serialpub.yaml").read_text(encoding="utf-8")
    publisher = Publisher(ws)
    assert publisher.protected == ws.config.protected_values and len(publisher.sensitive_domain or []) == 2000
    assert len(publisher.register.ids) == adult.CLEAN_ROWS
    # a second run replaces its own folder; anything else is refused and left alone
    diagnosis.create_workspace(tmp_path / "full", rounds=2, base=adult_table)
    assert len(diagnosis.snapshots(load_config(tmp_path / "full"))) == 2
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(InputError, match="not a diagnosis workspace"):
        diagnosis.create_workspace(tmp_path / "mine", rows=ROWS)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


@pytest.fixture(scope="module")
def published(small_ws: Path) -> list[dict]:
    """Manifests of releases 1..ROUNDS of ``small_ws`` published by the pipeline.

    Release 1 runs every validation suite. Releases 2..ROUNDS replace the snapshot and
    release suites by passing stubs: Great Expectations is slow on a release with a
    2,000-value domain, and the suites only check a draft, they never change it (the
    figures compared below are computed before validation, by ``serialpub.workflow.drafting``).
    """
    from checks.gx import SuiteResult

    ws = load_config(small_ws)
    publisher = Publisher(ws)
    paths = diagnosis.snapshots(ws)[:ROUNDS]
    outcomes = [publisher.publish(paths[0])]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("serialpub.workflow.input_checks.snapshot_suite", lambda *a, **k: SuiteResult("snapshot", True))
        mp.setattr("serialpub.workflow.validating.release_suite", lambda *a, **k: [SuiteResult("stub", True)])
        outcomes += [publisher.publish(p) for p in paths[1:]]
    manifests = []
    for o in outcomes:
        m = json.loads((o.directory / "manifest.json").read_text(encoding="utf-8"))
        # the query error is evidence (report.json): the published manifest leaves it out
        report = json.loads((o.directory / "report.json").read_text(encoding="utf-8"))
        m["report_utility"] = {u["name"]: u["value"] for u in report["utility"]}
        manifests.append(m)
    return manifests


@pytest.mark.slow
def test_a_small_diagnosis_release_publishes_and_passes_validation(published: list[dict]) -> None:
    first = published[0]
    assert first["validation"]["success"] is True
    assert {"snapshot", "guarantee"} <= set(first["validation"]["suites"])
    assert first["sign_off"]["automatic"] is True
    assert len(first["protected_values"]) == 20
    assert first["max_breach_probability"] <= 0.5


@pytest.mark.slow
def test_runner_figures_equal_the_published_series_and_the_series_report_baseline(
    small_ws: Path, published: list[dict]
) -> None:
    from serialpub.workflow.baseline import localized_baseline

    ex = _runner()
    ws = load_config(small_ws)
    paths = diagnosis.snapshots(ws)[:ROUNDS]
    scenario = ex.Scenario.from_workspace("small", ws, paths)
    cfg = ws.config
    ours = ex.run_series(scenario, PrivacyParams(ell=cfg.ell, strategy=cfg.strategy, k_prime=cfg.k_prime), ROUNDS)
    assert [r["round"] for r in ours] == [1, 2, 3] and all(r["feasible"] for r in ours)
    for r, m in zip(ours, published, strict=True):
        assert r["max_p"] == pytest.approx(m["max_breach_probability"], abs=1e-12)
        assert (r["records"], r["groups"], r["suppressed"]) == (m["records"], m["groups"], m["suppressed"])
        assert r["query_error"] == pytest.approx(m["report_utility"][QUERY_ERROR], rel=1e-12)
        assert r["query_error_weighted"] == pytest.approx(m["report_utility"][WEIGHTED_ERROR], rel=1e-12)
        assert r["query_error_joint"] == pytest.approx(m["report_utility"][JOINT_ERROR], rel=1e-12)
        assert r["query_error_baseline"] == pytest.approx(m["report_utility"][BASELINE_ERROR], rel=1e-12)
    assert max(r["max_p"] for r in ours) <= 1 / cfg.ell
    # the localized replay equals the series report's (which tests/test_report.py checks
    # against a workspace published under the localized guarantee)
    local = ex.run_series(scenario, PrivacyParams(ell=cfg.ell, guarantee="localized"), ROUNDS, measure_queries=False)
    publisher = Publisher(ws)
    expected = localized_baseline(
        publisher.series, publisher.inputs, publisher.register_reader, publisher.store.published(cfg.dataset)
    )
    assert [r["max_p"] for r in local] == pytest.approx(expected.max_p, abs=1e-12)


@pytest.mark.slow
def test_runner_records_an_infeasible_point_and_writes_json_and_plots(
    small_ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from anonymizer.search import InfeasibleError

    ex = _runner()
    real = ex.anonymize_history

    def second_round_infeasible_for_k1(*args: Any, **kwargs: Any) -> Any:
        if kwargs["seed"] == 2 and args[3].k_prime == 1:  # (keys, snapshot, history, params, ...)
            raise InfeasibleError("12 records would have to be suppressed but the budget is 9")
        return real(*args, **kwargs)

    monkeypatch.setattr(ex, "anonymize_history", second_round_infeasible_for_k1)
    ws = load_config(small_ws)
    scenario = ex.Scenario.from_workspace("small", ws, diagnosis.snapshots(ws)[:3])
    record = ex.run_figure(ex.FIGURES["fig8"], scenario, [1, 20], {"ell": 2.0}, 3, True, "test", log=lambda _: None)
    tight, easy = record["runs"]
    assert tight["status"] == "infeasible at round 2"
    assert [r["feasible"] for r in tight["rounds"]] == [True, False]  # the series stops there
    assert "budget is 9" in tight["rounds"][-1]["reason"]
    assert easy["status"] == "complete" and len(easy["rounds"]) == 3
    assert [r["round"] for r in record["baseline"]["2"]] == [1, 2, 3]
    assert record["setup"]["protected_values"] == 20 and record["command"] == "test"
    json.dumps(record)  # serializable as is
    paths = ex.plot_figure(record, tmp_path, "fig8-small")
    assert [p.name for p in paths] == ["fig8-small.png", "fig8-small-breach.png"]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in paths)
    table = ex.key_numbers([("fig8-small", record)]).splitlines()
    assert len(table) == 4 and table[2].startswith("| fig8-small | k' = 1 | 1 (round 2 infeasible) |")
    assert table[3].startswith("| fig8-small | k' = 20 | 3 |")
    assert table[3].split(" | ")[9] == f"{easy['rounds'][-1]['max_p']:.3f}"  # max p after the last round
    # the figures say what they show: scenario and caption on top, one title per panel
    panels = ex.panels_figure(record)
    assert panels._suptitle.get_text() == (
        "small: Effect of k' (constant-ratio strategy), ℓ = 2 (× = infeasible round)"
    )
    assert [ax.get_title().split("\n")[0] for ax in panels.axes] == [
        "(a) average relative error", "(b) average group size", "(c) largest group size",
        "(d) anonymization time (s)",
    ]  # fmt: skip
    breach = ex.breach_figure({**record, "setup": {**record["setup"], "suppression_budget": 0.05}})
    assert (
        breach.axes[0]
        .get_title()
        .startswith("small: Effect of k' (constant-ratio strategy), ℓ = 2, suppression budget 0.05:")
    )


def _doc_commands() -> list[str]:
    """The runner's command lines in docs/experiments.md (comments after # dropped)."""
    text = (ROOT / "docs" / "experiments.md").read_text(encoding="utf-8")
    prefix = ".venv/bin/python benchmarks/experiments.py "
    return [line.split("#")[0].strip() for line in text.splitlines() if line.startswith(prefix)]


def test_every_figure_in_the_docs_comes_from_a_command_shown_there() -> None:
    import shlex

    ex = _runner()
    text = (ROOT / "docs" / "experiments.md").read_text(encoding="utf-8")
    shown = set(re.findall(r"images/experiments/([\w.-]+)\.png", text))
    commands = _doc_commands()
    assert len(commands) >= 4
    made: set[str] = set()
    for line in commands:
        args = ex.parse_args(shlex.split(line)[2:])  # SystemExit on a flag the runner lacks
        for name, _, _ in ex.outputs(args):
            made |= {name, f"{name}-breach"}
    assert shown, "docs/experiments.md shows no figure"
    assert shown <= made, f"figures without a command on the page: {sorted(shown - made)}"
    missing = [n for n in sorted(made) if not (ROOT / "docs" / "images" / "experiments" / f"{n}.png").is_file()]
    assert not missing, f"commands on the page whose PNGs are not committed: {missing}"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["all", "--values", "3"], "--values needs one figure"),
        (["fig6", "--ell", "2"], "--ell is not a fixed parameter of fig6"),
        (["fig8", "--alpha", "3"], "--alpha is not a fixed parameter of fig8"),
    ],
)
def test_runner_refuses_options_it_would_ignore(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        _runner().parse_args(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_output_names_record_every_non_default_setting() -> None:
    ex = _runner()
    names = [n for n, _, _ in ex.outputs(ex.parse_args(["fig6", "--scenario", "adult", "diagnosis"]))]
    assert names == ["fig6-adult", "fig6-diagnosis"]
    argv = ["fig6", "--scenario", "adult", "--k-prime", "20", "--budget", "0", "--seed", "3", "--rounds", "5"]
    assert [n for n, _, _ in ex.outputs(ex.parse_args(argv))] == ["fig6-adult-kprime20-budget0-s3-r5"]
    argv = ["fig8", "--scenario", "diagnosis", "--values", "4", "8", "--no-baseline"]
    assert [n for n, _, _ in ex.outputs(ex.parse_args(argv))] == ["fig8-diagnosis-values4_8-nobaseline"]
    argv = ["fig9", "--scenario", "adult", "--algorithm", "bottomup"]
    assert [n for n, _, _ in ex.outputs(ex.parse_args(argv))] == ["fig9-adult-bottomup"]
    argv = ["fig8", "--scenario", "adult", "--values", "5", "10", "20"]  # the figure's own values
    assert [n for n, _, _ in ex.outputs(ex.parse_args(argv))] == ["fig8-adult"]
