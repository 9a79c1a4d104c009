"""The catalogue of bad inputs: each case is one small mutation of a good
workspace (a snapshot, the register, a hierarchy, the configuration, or the draft release
between anonymization and validation) run through the real pipeline
(``serialpub.workflow.publisher.Publisher``). Each must fail with its own readable message (the file,
the line or column, what is wrong) and leave the state and the release store exactly as
they were: published releases, the statistics file and the folder listing
(``test_pipeline.state_of``), and no staging folder.

Which error a user sees:

- ``InputChecksFailed`` (exit 2): the register or snapshot input suite failed; its
  ``failures`` name the expectation, the column, how many values and their file lines.
- ``InputError`` (exit 2): a problem found outside the suites (unreadable file, period out of
  order, configuration, a snapshot's QIs differing from the register's).
- ``ValidationFailed`` (exit 3): a draft failed a release suite; it is recorded as failed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from helpers import cli, make_workspace, read_config, snapshot, state_of, write_config

from serialpub.config import load_config
from serialpub.errors import InputChecksFailed, InputError, ValidationFailed
from serialpub.workflow import drafting
from serialpub.workflow.publisher import Publisher

Edit = Callable[[pd.DataFrame], pd.DataFrame]


def _read(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def _set(row: int, column: str, value: str) -> Edit:
    def edit(df: pd.DataFrame) -> pd.DataFrame:
        df.loc[row, column] = value
        return df

    return edit


def _bad_snapshot(root: Path, edit: Edit) -> Path:
    out = root / "snapshots" / "bad-0002.csv"
    edit(_read(snapshot(root, 2))).to_csv(out, index=False)
    return out


def _expect_unchanged(root: Path, before: Any) -> None:
    assert state_of(root) == before
    assert not list((root / "releases" / "clinic").glob(".staging-*"))
    ws = load_config(root)
    assert Publisher(ws).store.open_release(ws.config.dataset) is None


def _message(exc: BaseException) -> str:
    return "\n".join([str(exc), *getattr(exc, "failures", [])])


# ---------------------------------------------------------------------------------------
# snapshots: the snapshot input suite (InputChecksFailed), lines are file lines

SNAPSHOT_SUITE_CASES: dict[str, tuple[Edit, list[str]]] = {
    "individual not in the register": (
        _set(3, "id", "zz999"),
        ["in the population register", "'zz999'", "line(s) [5]"],
    ),
    "individual twice": (
        lambda df: pd.concat([df, df.iloc[[2]]], ignore_index=True),
        ["at most once", "'p004'", "line(s) [4, {last}]"],
    ),
    "QI value outside its hierarchy": (
        _set(4, "zipcode", "99999"),
        ["'zipcode'", "leaf of its hierarchy", "'99999'", "line(s) [6]"],
    ),
    "missing column": (lambda df: df.drop(columns=["age"]), ["has a column 'age'"]),
    "extra column": (lambda df: df.assign(note="x"), ["exactly the columns", "'note'"]),
    "blank id": (_set(1, "id", " "), ["'id'", "empty or blank", "line(s) [3]"]),
    "blank QI value": (_set(0, "sex", ""), ["'sex'", "empty or blank", "line(s) [2]"]),
    "blank sensitive value": (_set(2, "disease", ""), ["'disease'", "empty or blank", "line(s) [4]"]),
    "sensitive value outside the domain": (
        _set(5, "disease", "ebola"),
        ["declared domain", "'ebola'", "line(s) [7]"],
    ),
    "sudden halving of the snapshot": (
        lambda df: df.iloc[: len(df) // 3],
        ["between", "previous snapshot", "extract failure"],
    ),
}


@pytest.mark.parametrize("case", list(SNAPSHOT_SUITE_CASES))
def test_snapshot_failing_its_input_suite(published_once: Path, case: str) -> None:
    edit, expected = SNAPSHOT_SUITE_CASES[case]
    bad = _bad_snapshot(published_once, edit)
    last = len(bad.read_text().splitlines())
    before = state_of(published_once)
    with pytest.raises(InputChecksFailed) as err:
        Publisher(load_config(published_once)).publish(bad, period="0002")
    assert str(bad) in str(err.value) and "input checks" in str(err.value)
    text = _message(err.value)
    assert err.value.failures and all(line.startswith("expect_") for line in err.value.failures), text
    for part in expected:
        assert part.format(last=last) in text, text
    _expect_unchanged(published_once, before)


# ---------------------------------------------------------------------------------------
# snapshots: problems found outside the suite (InputError)


def _write(text: bytes) -> Callable[[Path], Path]:
    def make(root: Path) -> Path:
        out = root / "snapshots" / "bad-0002.csv"
        out.write_bytes(text)
        return out

    return make


def _qi_differs(root: Path) -> Path:
    return _bad_snapshot(root, lambda df: _set(0, "sex", "F" if df.loc[0, "sex"] == "M" else "M")(df))


SNAPSHOT_FILE_CASES: dict[str, tuple[Callable[[Path], Path], str | None, list[str]]] = {
    "QI differs from the register's": (_qi_differs, "0002", ["line 2", "column 'sex'", "differs from the register"]),
    "not UTF-8": (
        _write("id,sex,zipcode,age,disease\np001,M,65001,2\xb0,flu\n".encode("latin-1")),
        "0002",
        ["not UTF-8"],
    ),
    "header only": (_write(b"id,sex,zipcode,age,disease\n"), "0002", ["header but no rows"]),
    "column named twice": (_write(b"id,sex,sex,age,disease\np001,M,M,21,flu\n"), "0002", ["line 1", "twice"]),
    "file missing": (lambda root: root / "snapshots" / "snapshot-0002-lost.csv", "0002", ["file not found"]),
    "period already published": (lambda root: snapshot(root, 2), "0001", ["'0001'", "already published"]),
    "period before the last": (lambda root: snapshot(root, 2), "0000", ["'0000'", "not later than the last"]),
}


@pytest.mark.parametrize("case", list(SNAPSHOT_FILE_CASES))
def test_snapshot_rejected_before_the_suite(published_once: Path, case: str) -> None:
    make, period, expected = SNAPSHOT_FILE_CASES[case]
    path = make(published_once)
    before = state_of(published_once)
    with pytest.raises(InputError) as err:
        Publisher(load_config(published_once)).publish(path, period=period)
    assert not isinstance(err.value, InputChecksFailed)
    for part in expected:
        assert part in str(err.value), str(err.value)
    _expect_unchanged(published_once, before)


# ---------------------------------------------------------------------------------------
# the population register: the register input suite, at start


REGISTER_CASES: dict[str, tuple[Edit, list[str]]] = {
    "id twice": (lambda df: pd.concat([df, df.iloc[[7]]], ignore_index=True), ["at most once", "line(s) [9, {last}]"]),
    "QI value outside its hierarchy": (_set(9, "age", "101"), ["'age'", "leaf of its hierarchy", "line(s) [11]"]),
    "missing QI column": (lambda df: df.drop(columns=["zipcode"]), ["has a column 'zipcode'"]),
    "blank id": (_set(0, "id", ""), ["'id'", "empty or blank", "line(s) [2]"]),
}


@pytest.mark.parametrize("case", list(REGISTER_CASES))
def test_register_failing_its_input_suite(published_once: Path, case: str) -> None:
    edit, expected = REGISTER_CASES[case]
    path = published_once / "register.csv"
    good = path.read_bytes()
    before = state_of(published_once)
    edit(_read(path)).to_csv(path, index=False)
    last = len(path.read_text().splitlines())
    with pytest.raises(InputChecksFailed) as err:
        Publisher(load_config(published_once)).publish(snapshot(published_once, 2))
    assert str(path) in str(err.value) and "population register" in str(err.value)
    text = _message(err.value)
    for part in expected:
        assert part.format(last=last) in text, text
    path.write_bytes(good)  # state_of reads the register through nothing, but be tidy
    _expect_unchanged(published_once, before)


# ---------------------------------------------------------------------------------------
# configuration and hierarchies


def _config_case(setting: str, value: Any, **also: Any) -> Callable[[Path], None]:
    def damage(root: Path) -> None:
        config = read_config(root)
        config[setting] = value
        config.update(also)
        write_config(root, config)

    return damage


def _config_text(text: str) -> Callable[[Path], None]:
    def damage(root: Path) -> None:
        (root / "serialpub.yaml").write_text(text, encoding="utf-8")

    return damage


def _remove_hierarchy(root: Path) -> None:
    (root / "hierarchies" / "age.csv").unlink()


def _hierarchy_gap(root: Path) -> None:
    path = root / "hierarchies" / "zipcode.csv"
    lines = path.read_text().splitlines()
    lines[2] = lines[2].split(";")[0] + ";;*"  # an empty level in the middle of a path
    path.write_text("\n".join(lines) + "\n")


CONFIG_CASES: dict[str, tuple[Callable[[Path], None], list[str]]] = {
    "protected value not in the domain": (_config_case("protected_values", ["hiv", "ebola"]), ["'ebola'"]),
    "l below 2": (_config_case("l", 1), ["setting 'l'"]),
    "geometric alpha of 1": (_config_case("alpha", 1, strategy="geometric"), ["setting 'alpha'"]),
    "misspelled setting": (_config_case("k_prme", 3), ["'k_prme'"]),
    "numeric column that is not a QI": (_config_case("numeric", ["disease"]), ["'disease'", "quasi_identifiers"]),
    "numeric QI with words for leaves": (_config_case("numeric", ["sex"]), ["'numeric'", "sex.csv", "not numbers"]),
    "unknown after_k_prime": (_config_case("after_k_prime", "forever"), ["after_k_prime"]),
    "negative utility threshold": (_config_case("validation", {"max_query_error": -1}), ["validation.max_query_error"]),
    "row bound above 1": (_config_case("validation", {"min_snapshot_rows_ratio": 1.5}), ["min_snapshot_rows_ratio"]),
    "not YAML": (_config_text("dataset: [clinic\n"), ["not valid YAML"]),
    "setting given twice": (_config_text("dataset: clinic\nl: 2\nl: 3\n"), ["'l' is given twice", "line 3"]),
    "l as a string": (_config_case("l", "2"), ["setting 'l'", "number"]),
    "infinite l": (_config_case("l", float("inf")), ["setting 'l'", "finite"]),
    "auto_approve as a word": (_config_case("sign_off", {"auto_approve": "yes"}), ["sign_off.auto_approve", "boolean"]),
    "hierarchy file missing": (_remove_hierarchy, ["age.csv"]),
    "hierarchy with an empty level": (_hierarchy_gap, ["zipcode.csv", "line 3"]),
}


@pytest.mark.parametrize("case", list(CONFIG_CASES))
def test_damaged_configuration(published_once: Path, case: str) -> None:
    damage, expected = CONFIG_CASES[case]
    paths = [published_once / "serialpub.yaml", *(published_once / "hierarchies").iterdir()]
    files = {p: p.read_bytes() for p in paths}
    before = state_of(published_once)
    damage(published_once)
    with pytest.raises(InputError) as err:
        Publisher(load_config(published_once)).publish(snapshot(published_once, 2))
    for part in expected:
        assert part in str(err.value), str(err.value)
    for path, data in files.items():  # state_of needs a readable configuration
        path.write_bytes(data)
    _expect_unchanged(published_once, before)


# ---------------------------------------------------------------------------------------
# damaged releases: the draft altered between anonymization and validation


def _add_identifier(table: pd.DataFrame) -> pd.DataFrame:
    return table.assign(id=[f"p{i:03d}" for i in range(len(table))])


def _overlap(table: pd.DataFrame) -> pd.DataFrame:
    """Give the first group's records the root of 'zipcode' (and a specific age), so its
    region covers other groups' regions."""
    first = (table.drop(columns="disease") == table.drop(columns="disease").iloc[0]).all(axis=1)
    table = table.copy()
    table.loc[first, "zipcode"] = "*"
    table.loc[first, "age"] = "*"
    table.loc[first, "sex"] = "*"
    table.loc[~first, "sex"] = table.loc[~first, "sex"].where(table.loc[~first, "sex"] != "*", "M")
    return table


def _outside_hierarchy(table: pd.DataFrame) -> pd.DataFrame:
    table = table.copy()
    table.loc[0, "zipcode"] = "Atlantis"
    return table


def _added_records(table: pd.DataFrame) -> pd.DataFrame:
    """Add, to the first group, as many 'hiv' records as the whole register (so p > 1/2 for
    its members whatever the group's candidates)."""
    row = table.iloc[[0]].assign(disease="hiv")
    return pd.concat([table, *([row] * 60)], ignore_index=True)


RELEASE_CASES: dict[str, tuple[Callable[[pd.DataFrame], pd.DataFrame], str, list[str]]] = {
    "identifier column": (_add_identifier, "contract", ["no identifier column", "'id'"]),
    "overlapping regions": (_overlap, "disjointness", ["pairwise disjoint"]),
    "value outside its hierarchy": (_outside_hierarchy, "contract", ["'zipcode'", "'Atlantis'"]),
    # mechanism-aware validation counts the snapshot's records, so added ones are caught as
    # records the snapshot does not hold
    "records added to a group": (_added_records, "coverage", ["excess_records", "more records"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(RELEASE_CASES))
def test_damaged_release_fails_validation(published_once: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    damage, suite, expected = RELEASE_CASES[case]
    original = drafting.published_table
    monkeypatch.setattr(drafting, "published_table", lambda *args: damage(original(*args)))
    before = state_of(published_once)
    publisher = Publisher(load_config(published_once))
    with pytest.raises(ValidationFailed) as err:
        publisher.publish(snapshot(published_once, 2))
    text = _message(err.value)
    assert "release 2" in str(err.value) and "nothing was published" in str(err.value)
    suite_lines = [line for line in err.value.failures if line.startswith(f"{suite}:")]
    assert suite_lines, text
    for part in expected:
        assert any(part in line for line in suite_lines), text
    stored = publisher.store.validation_results("clinic", 2)
    assert {r["suite"] for r in stored if not r["success"]} >= {suite}
    assert {r["suite"] for r in stored if r["success"]} >= {"register", "snapshot"}
    _expect_unchanged(published_once, before)


# ---------------------------------------------------------------------------------------
# the command line


def test_cli_prints_every_failed_input_expectation_and_exits_2(published_once: Path) -> None:
    bad = _bad_snapshot(published_once, lambda df: _set(4, "zipcode", "99999")(_set(3, "id", "zz999")(df)))
    before = state_of(published_once)
    proc = cli("release", "--config", published_once, "--snapshot", bad, "--period", "0002")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("serialpub: error: ") and str(bad) in lines[0]
    details = lines[1:]
    assert len(details) == 2 and all(line.startswith("  - expect_") for line in details), proc.stderr
    assert any("'zz999'" in line and "line(s) [5]" in line for line in details)
    assert any("'99999'" in line and "line(s) [6]" in line for line in details)
    assert "Traceback" not in proc.stderr + proc.stdout
    _expect_unchanged(published_once, before)


def test_release_evidence_holds_the_input_suites(published_once: Path) -> None:
    ws = load_config(published_once)
    stored = Publisher(ws).store.validation_results("clinic", 1)
    suites = [r["suite"] for r in stored]
    assert suites == [
        "register",
        "snapshot",
        "contract",
        "disjointness",
        "guarantee",
        "coverage",
        "localized",
        "utility",
    ]
    assert all(r["success"] for r in stored)


def test_a_bad_hierarchy_before_the_first_release_leaves_no_database(tmp_path: Path) -> None:
    """The inputs are read before the state database is opened: refused input leaves no
    trace, not even an empty database."""
    root = make_workspace(tmp_path / "ws")
    _remove_hierarchy(root)
    result = cli("release", "--config", root, "--snapshot", snapshot(root, 1))
    assert result.returncode == 2 and "age.csv" in result.stderr, result.stderr
    assert not list(root.glob("state.sqlite*")) and not (root / "releases").exists()
