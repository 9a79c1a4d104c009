"""The data user's side: from a fresh folder holding only a public copy, verify, query and
expand (serialpub.analysis.reader, serialpub.analysis.querying, `serialpub query`,
`serialpub expand`); a tampered or incomplete copy is refused with one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from helpers import QIS, SENSITIVE, cli


@pytest.mark.slow
def test_a_data_user_verifies_queries_and_expands_a_public_copy(fresh: Path) -> None:
    audited = cli("audit", ".", "--public-key", "keys/publisher.pub", cwd=fresh)
    assert audited.returncode == 0, audited.stdout + audited.stderr
    asked = cli(
        "query",
        ".",
        "--where",
        "zipcode=6500*",
        "--where",
        "age=[20, 24]",
        "--sensitive",
        "flu,cold",
        "--json",
        cwd=fresh,
    )
    assert asked.returncode == 0, asked.stderr
    answers = json.loads(asked.stdout)["answers"]
    assert [a["release"] for a in answers] == [1, 2]
    for a in answers:
        assert a["lower"] <= a["estimate"] <= a["upper"]

    # the joint estimate is the weighted microdata's SUM(weight) over the same rows
    expanded = cli("expand", ".", "--out", "tables", cwd=fresh)
    assert expanded.returncode == 0, expanded.stderr
    tables = sorted((fresh / "tables").glob("release-*.parquet"))
    assert [p.name for p in tables] == [f"release-000{n}.parquet" for n in (1, 2)]
    frame = pd.concat([pd.read_parquet(p) for p in tables])
    age_band = frame["age"].astype(str).isin([str(a) for a in range(20, 25)])
    hit = frame[frame["zipcode"].astype(str).str.startswith("6500") & age_band & frame[SENSITIVE].isin(["flu", "cold"])]
    summed = hit.groupby("release")["weight"].sum().reindex([1, 2], fill_value=0.0)
    np.testing.assert_allclose(summed.to_numpy(), [a["estimate"] for a in answers])
    # each group's weights add up to its published records
    from serialpub.analysis.reader import open_releases

    copy = open_releases(fresh)
    for r in copy.releases:
        part = frame[frame["release"] == r.number]
        assert part["weight"].sum() == pytest.approx(len(r.data))
        assert set(r.frame().columns) >= {*QIS, SENSITIVE, "group"}
        assert r.groups()["register_individuals"].ge(r.groups()["records"]).all()
        assert r.arrow().num_rows == len(r.data)

    table = cli("query", ".", "--where", "sex=F", "--release", "2", cwd=fresh)
    assert table.returncode == 0 and "estimate" in table.stdout and "uniform" in table.stdout


@pytest.mark.slow
def test_query_and_expand_give_the_error_figure_beside_the_estimate(fresh: Path) -> None:
    where = ["--where", "zipcode=6500*", "--where", "age=[20, 24]", "--sensitive", "flu,cold"]
    asked = cli("query", ".", *where, "--json", cwd=fresh)
    assert asked.returncode == 0, asked.stderr
    out = json.loads(asked.stdout)
    assert "hypergeometric" in out["error_model"]
    answers = out["answers"]
    for a in answers:
        assert a["se"] >= 0
        assert a["lower"] <= a["low95"] <= a["low90"] <= a["estimate"] <= a["high90"] <= a["high95"] <= a["upper"]
        assert a["high90"] - a["low90"] <= 2 * 1.645 * a["se"] + 1e-9
    uncertain = [a for a in answers if a["se"] > 0]
    assert uncertain, "the query cuts no group: it tests nothing"
    assert all(a["generalized"] for a in uncertain) and out["note"] and "leans toward independence" in out["note"]

    table = cli("query", ".", *where, cwd=fresh)
    assert table.returncode == 0, table.stderr
    header = next(line for line in table.stdout.splitlines() if "estimate" in line and "release" in line)
    assert header.split()[:6] == ["release", "period", "estimate", "se", "90", "%"]
    row = next(line.split() for line in table.stdout.splitlines() if line.split()[:1] == ["1"])
    first = answers[0]
    assert row[3] == f"{first['se']:.1f}" and row[4] == f"{first['low90']:.1f}-{first['high90']:.1f}"
    assert "Note: the condition on" in table.stdout

    # expand: a variance per row; over the query's rows it bounds the query's variance
    assert cli("expand", ".", "--out", "tables", cwd=fresh).returncode == 0
    frame = pd.concat([pd.read_parquet(p) for p in sorted((fresh / "tables").glob("release-*.parquet"))])
    assert (frame["variance"] >= 0).all()
    age_band = frame["age"].astype(str).isin([str(a) for a in range(20, 25)])
    hit = frame[frame["zipcode"].astype(str).str.startswith("6500") & age_band & frame[SENSITIVE].isin(["flu", "cold"])]
    summed = hit.groupby("release")["variance"].sum().reindex([1, 2], fill_value=0.0)
    assert (summed.to_numpy() >= np.array([a["se"] ** 2 for a in answers]) - 1e-9).all()


@pytest.mark.parametrize(
    ("condition", "named"),
    [
        (["--where", "zip=65001"], "'zip' is not a quasi-identifier; they are sex, zipcode, age"),
        (["--where", "zipcode=99999"], "'99999' is not a value of zipcode; give a leaf or node"),
        (["--where", "age=[40,50]"], "the range holds no value of age (its values run from 20 to 29)"),
        (["--where", "sex=[1,2]"], "a range needs numeric values"),
        (["--where", "sex"], "write a condition as QI=VALUE"),
        (["--sensitive", "aids"], "'aids' is not a value of disease; give some of flu"),
        (["--release", "9"], "no release 9; this copy holds releases 1-2"),
    ],
)
def test_a_bad_condition_is_one_line_naming_it_and_the_allowed_values(
    public_copy: Path, condition: list[str], named: str
) -> None:
    done = cli("query", public_copy, *condition)
    assert done.returncode == 2 and named in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and len(done.stderr) <= 320


def _edit_parquet(copy: Path) -> str:
    path = copy / "releases" / "clinic" / "release-0002" / "data.parquet"
    frame = pd.read_parquet(path)
    frame.loc[0, SENSITIVE] = "hiv" if frame.loc[0, SENSITIVE] != "hiv" else "flu"
    frame.to_parquet(path, index=False)
    return "release-0002/data.parquet: does not match the sha256 in its manifest"


def _delete_release(copy: Path) -> str:
    shutil.rmtree(copy / "releases" / "clinic" / "release-0001")
    return "release(s) 1 missing from the store"


def _bad_signature(copy: Path) -> str:
    sig = copy / "releases" / "clinic" / "release-0001" / "manifest.sig"
    sig.write_text("AAAA" + sig.read_text(encoding="ascii")[4:], encoding="ascii")
    return "release-0001: release 1: the signature of manifest.json does not verify"


def _truncated_file(copy: Path) -> str:
    (copy / "releases" / "clinic" / "release-0002" / "data.parquet").unlink()
    return "release-0002/data.parquet: file missing"


def _edited_register(copy: Path) -> str:
    """register.csv edited, with no kept version of the one the releases used."""
    shutil.rmtree(copy / "registers")
    path = copy / "register.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text(
        "\n".join([*lines[:-1], lines[-1].replace(",M,", ",X,").replace(",F,", ",M,").replace(",X,", ",F,")]) + "\n"
    )
    return "the register differs from the one release"


@pytest.mark.parametrize("tamper", [_edit_parquet, _delete_release, _bad_signature, _truncated_file, _edited_register])
def test_a_tampered_copy_is_refused_with_one_line_naming_the_file(fresh: Path, tamper: Any) -> None:
    named = tamper(fresh)
    for command in (["query", "."], ["expand", ".", "--out", "tables"]):
        done = cli(*command, cwd=fresh)
        assert done.returncode == 2, done.stdout + done.stderr
        assert named in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    assert not (fresh / "tables").exists()


def test_the_release_report_gives_the_joint_figure_its_baseline_and_gain(public_copy: Path) -> None:
    """The drafting step measures the register-joint error and its histogram-only baseline;
    the evidence (report.json) lists them first, beside paper 001's uniform figure."""
    from serialpub.report.wording.utility import BASELINE_ERROR, GAIN, JOINT_ERROR, QUERY_ERROR

    report = json.loads(
        (public_copy.parent / "ws" / "releases" / "clinic" / "release-0001" / "report.json").read_text()
    )
    utility = {m["name"]: m["value"] for m in report["utility"]}
    names = [m["name"] for m in report["utility"]]
    assert names[:3] == [JOINT_ERROR, BASELINE_ERROR, GAIN] and QUERY_ERROR in names
    assert 0 <= utility[JOINT_ERROR] and 0 <= utility[BASELINE_ERROR]
    assert utility[GAIN] == pytest.approx(utility[BASELINE_ERROR] - utility[JOINT_ERROR])


def test_the_sign_off_prompt_and_the_demo_table_lead_with_the_joint_figure() -> None:
    from types import SimpleNamespace

    from rich.console import Console

    from serialpub.cli.app import outcome_table
    from serialpub.workflow.orchestration import _query_line

    def facts(joint: float | None, base: float | None, u: float) -> Any:  # the three figures it reads
        return SimpleNamespace(register_joint_error=joint, histogram_baseline_error=base, average_relative_error=u)

    line = _query_line(facts(0.27, 0.32, 7.67))
    assert line.startswith("Average relative query error: 0.270 as a data user reads it (register-joint)")
    assert "gives 0.320, so this release gains +0.050" in line and "Paper 001's uniform estimator: 7.670" in line
    older = _query_line(facts(None, None, 7.67))
    assert older == "Average relative query error (paper 001's uniform estimator): 7.670."

    outcome = SimpleNamespace(
        seq=1,
        records=10,
        groups=2,
        suppressed=0,
        avg_candidates=5.0,
        max_candidates=6,
        avg_records=5.0,
        max_records=6,
        max_breach=0.1,
        query_error=7.67,
        query_error_weighted=0.7,
        query_error_joint=0.27,
        query_error_baseline=0.32,
        seconds=1.0,
        shown_absent=3,
    )
    console = Console(width=200, record=True)
    console.print(outcome_table([outcome], 2.0))
    text = console.export_text()
    header = next(x for x in text.splitlines() if "q.err" in x).split()
    row = next(x for x in text.splitlines() if x.split()[:1] == ["1"]).split()
    assert header[-6:-1] == ["q.err", "base", "gain", "q.err", "001"]
    assert row[-5:-1] == ["0.27", "0.32", "+0.05", "7.67"]


@pytest.mark.slow
def test_expand_writes_group_labels_and_bounds_and_names_those_in_no_region(fresh: Path) -> None:
    from serialpub.analysis.reader import open_releases

    done = cli("expand", ".", "--out", "tables", cwd=fresh)
    assert done.returncode == 0, done.stderr
    copy = open_releases(fresh)
    absent = []
    for r in copy.releases:
        frame = pd.read_parquet(fresh / "tables" / f"release-{r.number:04d}.parquet")
        # the group's published labels, read from data.parquet independently of the expansion
        published = r.frame().groupby("group")[QIS].first()
        for q in QIS:
            assert (frame[f"group_{q}"].astype(str).to_numpy() == published.loc[frame["group"], q].to_numpy()).all()
        assert (frame["lower"] <= frame["weight"] + 1e-9).all() and (frame["weight"] <= frame["upper"] + 1e-9).all()
        assert (frame["upper"] <= frame["individuals"]).all() and (frame["lower"] >= 0).all()
        assert (frame["upper"] > frame["lower"]).any()
        # a group's records of a value lie between the sums of its rows' bounds
        per = frame.groupby(["group", SENSITIVE], observed=True)[["lower", "upper", "weight"]].sum()
        assert (per["lower"] <= per["weight"].round() + 1e-9).all() and (per["weight"].round() <= per["upper"]).all()
        groups = r.groups()
        absent.append(len(r.register) - int(groups["register_individuals"].sum()))
    assert any(absent), "every register individual lies in a region: the note is untested"
    listed = ", ".join(f"release {r.number}: {k:,}" for r, k in zip(copy.releases, absent, strict=True) if k)
    said = " ".join(done.stdout.split())
    assert f"Register individuals in no published region, so in no row: {listed}." in said
    assert "not in that period's snapshot" in said


def test_answer_tables_print_values_as_written_not_as_rich_markup() -> None:
    """A value, label or file name with brackets (``[x]``, ``[bold]``) is data: the query's
    tables and notes print it as written; rich markup would drop it as a tag."""
    from types import SimpleNamespace

    from serialpub.cli import data_user

    copy = SimpleNamespace(verified=1, releases=[None], key_fingerprint=None)
    out = data_user._table("adult: COUNT WHERE occupation=[x] AND note=[bold]y[/bold]", copy)  # type: ignore[arg-type]
    out.add_column("query")
    out.add_row("occupation=[x]|[red]")
    with data_user.console.capture() as captured:
        data_user._print(out, "a note about [italic]z")
    text = " ".join(captured.get().split())  # the table wraps at the console's width
    for written in ("occupation=[x] AND note=[bold]y[/bold]", "occupation=[x]|[red]", "Note: a note about [italic]z."):
        assert written in text, text
