"""Many queries for one verification of a public copy: the cross-tab (`serialpub query --by`)
and the file of queries (`serialpub query --queries`), answered together by
serialpub.analysis.querying.answers; each answer is the single query's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import QIS, cli

from serialpub.analysis.querying import Condition, answer
from serialpub.analysis.reader import PublicReleases, open_releases

_FIGURES = ["estimate", "se", "low90", "high90", "low95", "high95", "lower", "upper", "uniform"]


@pytest.fixture(scope="module")
def opened(public_copy: Path) -> PublicReleases:
    return open_releases(public_copy)


@pytest.mark.slow
def test_a_crosstab_cell_is_its_single_query_and_the_cells_add_up(public_copy: Path, opened: PublicReleases) -> None:
    by = ["--by", "sex,zipcode", "--where", "age=[20, 24]", "--sensitive", "flu,cold"]
    asked = cli("query", public_copy, *by, "--json")
    assert asked.returncode == 0, asked.stderr
    out = json.loads(asked.stdout)
    cells = out["cells"]
    sexes, zips = opened.releases[-1].hierarchies["sex"].leaves, opened.releases[-1].hierarchies["zipcode"].leaves
    assert out["by"] == ["sex", "zipcode"] and len(cells) == len(sexes) * len(zips) * 2
    assert "hypergeometric" in out["error_model"]
    assert any(c["se"] > 0 for c in cells), "no cell is uncertain: the comparison tests little"
    for cell in cells:  # each cell equals the single query with the equivalent conditions
        where = [Condition("age", "[20, 24]"), Condition("sex", cell["sex"]), Condition("zipcode", cell["zipcode"])]
        single = answer(opened, where, ["flu", "cold"], [cell["release"]]).iloc[0]
        for f in _FIGURES:
            assert cell[f] == pytest.approx(single[f], abs=1e-9), (cell, f)
        assert cell["lower"] <= cell["low90"] <= cell["estimate"] <= cell["high90"] <= cell["upper"]
    whole = answer(opened, [Condition("age", "[20, 24]")], ["flu", "cold"])
    for r in whole.itertuples():  # the cells add up to the query without --by
        mine = [c for c in cells if c["release"] == r.release]
        assert sum(c["estimate"] for c in mine) == pytest.approx(r.estimate)
        assert sum(c["lower"] for c in mine) <= r.lower and sum(c["upper"] for c in mine) >= r.upper - 1e-9

    # the same through the command line, as a table
    table = cli("query", public_copy, "--by", "sex", "--release", "2")
    assert table.returncode == 0, table.stderr
    header = next(line for line in table.stdout.splitlines() if "estimate" in line).split()
    assert header[:6] == ["sex", "release", "period", "estimate", "se", "90"]
    rows = [line.split() for line in table.stdout.splitlines() if line.split()[:1] in (["M"], ["F"])]
    single = cli("query", public_copy, "--where", "sex=F", "--release", "2", "--json")
    figure = json.loads(single.stdout)["answers"][0]
    female = next(r for r in rows if r[0] == "F")
    assert female[3] == f"{figure['estimate']:.1f}" and female[6:8] == [str(figure["lower"]), str(figure["upper"])]


@pytest.mark.slow
def test_a_file_of_queries_answers_each_line_as_its_single_query(
    public_copy: Path, opened: PublicReleases, tmp_path: Path
) -> None:
    path = tmp_path / "queries.txt"
    path.write_text(
        "# two queries and a comment\n"
        "sex=F AND zipcode=6500*\n"
        "\n"
        "age=[20, 24] AND disease=flu|cold AND zipcode=65001|65013\n"
        "age=>=25\n",
        encoding="utf-8",
    )
    asked = cli("query", public_copy, "--queries", path, "--sensitive", "flu", "--json")
    assert asked.returncode == 0, asked.stderr
    got = json.loads(asked.stdout)["answers"]
    expected = [
        (2, [Condition("sex", "F"), Condition("zipcode", "6500*")], ["flu"]),
        (4, [Condition("age", "[20, 24]"), Condition("zipcode", "65001|65013")], ["flu", "cold"]),
        (5, [Condition("age", ">=25")], ["flu"]),
    ]
    assert [(a["line"], a["release"]) for a in got] == [(n, r) for r in (1, 2) for n, _, _ in expected]
    for line, conditions, values in expected:
        single = answer(opened, conditions, values)
        mine = [a for a in got if a["line"] == line]
        for a, s in zip(mine, single.to_dict(orient="records"), strict=True):
            assert a["release"] == s["release"]
            for f in _FIGURES:
                assert a[f] == pytest.approx(s[f], abs=1e-9), (line, f)
    assert len({a["estimate"] for a in got}) > 2, "the lines give the same answers: the test tells them apart badly"

    table = cli("query", public_copy, "--queries", path, "--release", "1")
    assert table.returncode == 0, table.stderr
    assert "sex=F AND zipcode=6500*" in table.stdout and "disease IN (flu, cold)" in table.stdout


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("sex=F\nsex=X AND age=20\n", "queries.txt, line 2: sex=X: 'X' is not a value of sex"),
        ("sex=F\n\nsexy=F\n", "queries.txt, line 3: 'sexy=F': 'sexy' is not a quasi-identifier"),
        ("sex=F AND disease=aids\n", "queries.txt, line 1: 'aids' is not a value of disease; give some of flu"),
        ("sex=F AND disease=flu AND disease=cold\n", "queries.txt, line 1: two conditions on disease"),
        ("age=[40,50]\n", "queries.txt, line 1: age=[40,50]: the range holds no value of age"),
        ("# nothing\n\n", "queries.txt: no query in it"),
        (b"sex=\xff\n", "queries.txt: not UTF-8 text"),
    ],
)
def test_a_bad_line_of_the_file_is_one_line_naming_the_file_and_line(
    public_copy: Path, tmp_path: Path, text: str | bytes, named: str
) -> None:
    path = tmp_path / "queries.txt"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    done = cli("query", public_copy, "--queries", path)
    assert done.returncode == 2 and named in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and len(done.stderr) <= 400


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (["--by", "sex,foo"], "--by 'foo': not a quasi-identifier; they are sex, zipcode, age"),
        (["--by", "sex,sex"], "a quasi-identifier is named twice"),
        (["--by", "sex", "--where", "sex=Q"], "'Q' is not a value of sex"),
        (["--queries", "missing.txt", "--where", "sex=F"], "--where and --by do not combine with it"),
        (["--queries", "missing.txt"], "missing.txt: cannot read it"),
    ],
)
def test_a_bad_crosstab_or_batch_option_is_one_line(public_copy: Path, options: list[str], named: str) -> None:
    done = cli("query", public_copy, *options)
    assert done.returncode == 2 and named in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_the_crosstab_cells_are_every_combination_of_the_leaves() -> None:
    from serialpub.analysis.batch import MAX_CELLS, crosstab_queries
    from serialpub.errors import InputError

    leaves = {"sex": ("M", "F"), "zipcode": ("65001", "65002", "65003"), "age": tuple(str(a) for a in range(20, 30))}
    cells, queries = crosstab_queries(["zipcode", "sex"], leaves, [Condition("age", ">=25")], ["flu"])
    assert list(cells.columns) == ["zipcode", "sex"] and len(cells) == 6 == len(queries)
    assert cells.iloc[1].tolist() == ["65001", "F"]
    assert [str(c) for c in queries[1].conditions] == ["age=>=25", "zipcode=65001", "sex=F"]
    assert queries[1].sensitive == ("flu",)
    big = {q: tuple(str(i) for i in range(int(np.ceil(MAX_CELLS ** (1 / 3))) + 1)) for q in QIS}
    with pytest.raises(InputError, match="combinations, more than"):
        crosstab_queries(QIS, big, [])
