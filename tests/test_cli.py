"""The ``serialpub`` command line.

The cases run ``serialpub.cli.main`` in this process (``tests/helpers.cli``); two of them
also run the real entry point (``python -m serialpub.cli``) in fresh interpreters, and
``test_in_process_runner_agrees_with_subprocess`` checks that both give the same exit
code and output.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from helpers import cli

from serialpub import cli as cli_module
from serialpub.datasets import adult

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


Runner = Callable[..., Result]


def run_subprocess(*args: str) -> Result:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    proc = subprocess.run(
        [sys.executable, "-m", "serialpub.cli", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=REPO,
        env=env,
        timeout=300,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def assert_input_error(result: Result, *fragments: str) -> str:
    """Exit code 2, one line on stderr starting 'serialpub: error:', no traceback."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("serialpub: error:"), result.stderr
    for frag in fragments:
        assert frag in lines[0], (frag, lines[0])
    return lines[0]


def _write_small_base(path: Path) -> Path:
    pd.DataFrame(
        {
            "id": [str(i) for i in range(1, 13)],
            "zip": [str(47000 + i) for i in range(12)],
            "sex": ["M", "F"] * 6,
            "disease": ["flu", "hiv", "cold"] * 4,
        }
    ).to_csv(path, index=False)
    return path


@dataclass
class Workspace:
    root: Path
    base: Path
    header_only: Path
    zero_byte: Path
    missing: Path
    results: dict[str, Result]


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    root = tmp_path_factory.mktemp("cli")
    base = _write_small_base(root / "base.csv")
    header_only = root / "header-only.csv"
    header_only.write_text("id,zip,sex,disease\n", encoding="utf-8")
    zero_byte = root / "zero.csv"
    zero_byte.write_bytes(b"")
    missing = root / "does-not-exist.csv"
    small = ["--base", str(base), "--qi", "zip,sex", "--sensitive", "disease"]
    commands = {
        "l2k20": ["strategy", "--l", "2", "--k-prime", "20"],
        "l5k20": ["strategy", "--l", "5", "--k-prime", "20"],
        "l2k2": ["strategy", "--l", "2", "--k-prime", "2"],
        "no_k_no_alpha": ["strategy", "--l", "2"],
        "alpha1": ["strategy", "--l", "2", "--alpha", "1"],
        "missing_column": [
            "simulate",
            "--out",
            str(root / "o1"),
            "--base",
            str(base),
            "--qi",
            "zip,age",
            "--sensitive",
            "disease",
        ],
        "header_only": [
            "simulate",
            "--out",
            str(root / "o2"),
            "--base",
            str(header_only),
            "--qi",
            "zip,sex",
            "--sensitive",
            "disease",
        ],
        "zero_byte": [
            "simulate",
            "--out",
            str(root / "o3"),
            "--base",
            str(zero_byte),
            "--qi",
            "zip",
            "--sensitive",
            "d",
        ],
        "nonexistent": [
            "simulate",
            "--out",
            str(root / "o4"),
            "--base",
            str(missing),
            "--qi",
            "zip",
            "--sensitive",
            "d",
        ],
        "rounds0": ["simulate", "--out", str(root / "o5"), *small, "--rounds", "0"],
        "small_ok": ["simulate", "--out", str(root / "small"), *small, "--rounds", "3", "--seed", "5"],
        "adult": ["simulate", "--out", str(root / "adult")],
    }
    # two cases through the real entry point in fresh interpreters (running meanwhile), the
    # rest in this process; test_in_process_runner_agrees_with_subprocess compares the two
    with ThreadPoolExecutor(max_workers=len(SUBPROCESS_CASES)) as pool:
        futures = {name: pool.submit(run_subprocess, *commands[name]) for name in SUBPROCESS_CASES}
        results = {name: cli(*args, cwd=REPO) for name, args in commands.items() if name not in SUBPROCESS_CASES}
        results.update({name: f.result() for name, f in futures.items()})
    return Workspace(root, base, header_only, zero_byte, missing, results)


#: the cases of :func:`ws` that run in a separate interpreter
SUBPROCESS_CASES = ("l2k20", "alpha1")


# ---------------------------------------------------------------------------------------
# strategy


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "expected"),
    [("l2k20", "29.3568"), ("l5k20", "90.1293"), ("l2k2", "3.4142")],
)
def test_strategy_constant_ratio_target(ws: Workspace, name: str, expected: str) -> None:
    result = ws.results[name]
    assert result.returncode == 0, result.stderr
    assert expected in result.stdout
    assert result.stderr == ""


def test_strategy_needs_k_prime_or_alpha(ws: Workspace) -> None:
    assert_input_error(ws.results["no_k_no_alpha"], "--k-prime", "--alpha")


def test_strategy_alpha_one(ws: Workspace) -> None:
    assert_input_error(ws.results["alpha1"], "--alpha")


# ---------------------------------------------------------------------------------------
# simulate


def test_simulate_missing_column_names_file_and_column(ws: Workspace) -> None:
    assert_input_error(ws.results["missing_column"], str(ws.base), "age")
    assert not (ws.root / "o1").exists()


def test_simulate_header_only_base(ws: Workspace) -> None:
    assert_input_error(ws.results["header_only"], str(ws.header_only))


def test_simulate_zero_byte_base(ws: Workspace) -> None:
    assert_input_error(ws.results["zero_byte"], str(ws.zero_byte))


def test_simulate_nonexistent_base(ws: Workspace) -> None:
    assert_input_error(ws.results["nonexistent"], str(ws.missing))


def test_simulate_rounds_zero(ws: Workspace) -> None:
    assert_input_error(ws.results["rounds0"], "--rounds")


def test_simulate_small_base(ws: Workspace) -> None:
    result = ws.results["small_ok"]
    assert result.returncode == 0, result.stderr
    out = ws.root / "small"
    assert sorted(p.name for p in (out / "snapshots").iterdir()) == [f"snapshot-000{i}.csv" for i in (1, 2, 3)]
    register = pd.read_csv(out / "register.csv", dtype=str)
    assert list(register.columns) == ["id", "zip", "sex"]
    assert len(register) == 12
    snap1 = pd.read_csv(out / "snapshots" / "snapshot-0001.csv", dtype=str)
    assert list(snap1.columns) == ["id", "zip", "sex", "disease"]
    assert len(snap1) == 4


def test_simulate_adult_writes_22_files(ws: Workspace) -> None:
    result = ws.results["adult"]
    assert result.returncode == 0, result.stderr
    out = ws.root / "adult"
    files = sorted(p for p in out.rglob("*") if p.is_file())
    assert len(files) == 22
    assert (out / "register.csv").is_file() and (out / "series.json").is_file()
    assert len(list((out / "snapshots").glob("snapshot-*.csv"))) == 20
    with (out / "register.csv").open(encoding="utf-8") as fh:
        assert fh.readline().strip() == ",".join([adult.ID_COLUMN, *adult.QUASI_IDENTIFIERS])
        assert sum(1 for _ in fh) == adult.CLEAN_ROWS


# ---------------------------------------------------------------------------------------
# more option checks, in-process through cli.main


@pytest.fixture
def run_main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Runner:
    def _run(*args: str) -> Result:
        monkeypatch.setattr(sys, "argv", ["serialpub", *args])
        code: int = 0
        try:
            cli_module.main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return _run


def test_in_process_runner_agrees_with_subprocess(ws: Workspace, run_main: Runner) -> None:
    cases = (
        ("l2k20", ("strategy", "--l", "2", "--k-prime", "20")),
        ("alpha1", ("strategy", "--l", "2", "--alpha", "1")),
    )
    for name, args in cases:
        for got in (run_main(*args), cli(*args)):
            assert got.returncode == ws.results[name].returncode
            assert got.stderr == ws.results[name].stderr
            assert got.stdout == ws.results[name].stdout


def test_strategy_geometric_table(run_main: Runner) -> None:
    result = run_main("strategy", "--l", "2", "--alpha", "2", "--releases", "5")
    assert result.returncode == 0, result.stderr
    # α·ñ(k) for ℓ = 2, α = 2: 4, 6, 10, 18, 34 (worked by hand in test_privacy_paper.py)
    for target in ("4.0000", "6.0000", "10.0000", "18.0000", "34.0000"):
        assert target in result.stdout
    assert "0.4844" in result.stdout  # p after five releases = 31/64


def test_strategy_constant_ratio_never_after_k_prime(run_main: Runner) -> None:
    result = run_main("strategy", "--l", "2", "--k-prime", "2", "--releases", "4")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("never") == 2
    assert "0.5000" in result.stdout  # after k' = 2 releases at ñ_c: p = 1/ℓ


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--l", "2", "--alpha", "0.5"], "--alpha"),
        (["--l", "2", "--alpha", "-3"], "--alpha"),
        (["--l", "0.5", "--k-prime", "3"], "--l"),
        (["--l", "2", "--k-prime", "0"], "--k-prime"),
        (["--l", "2", "--k-prime", "3", "--releases", "0"], "--releases"),
    ],
)
def test_strategy_other_bad_values(run_main: Runner, args: list[str], fragment: str) -> None:
    assert_input_error(run_main("strategy", *args), fragment)


def test_simulate_missing_sensitive_column(run_main: Runner, tmp_path: Path) -> None:
    base = _write_small_base(tmp_path / "base.csv")
    assert_input_error(
        run_main(
            "simulate", "--out", str(tmp_path / "out"), "--base", str(base), "--qi", "zip", "--sensitive", "diagnosis"
        ),
        str(base),
        "diagnosis",
    )


def test_simulate_more_rounds_than_rows(run_main: Runner, tmp_path: Path) -> None:
    base = _write_small_base(tmp_path / "base.csv")
    assert_input_error(
        run_main(
            "simulate",
            "--out",
            str(tmp_path / "out"),
            "--base",
            str(base),
            "--qi",
            "zip,sex",
            "--sensitive",
            "disease",
            "--rounds",
            "13",
        ),
        "13",
    )


@pytest.mark.parametrize(("option", "value"), [("--carry-over", "1.5"), ("--redraw", "-0.1")])
def test_simulate_fraction_out_of_range(run_main: Runner, tmp_path: Path, option: str, value: str) -> None:
    base = _write_small_base(tmp_path / "base.csv")
    assert_input_error(
        run_main(
            "simulate",
            "--out",
            str(tmp_path / "out"),
            "--base",
            str(base),
            "--qi",
            "zip,sex",
            "--sensitive",
            "disease",
            "--rounds",
            "2",
            option,
            value,
        ),
        option,
    )


def test_simulate_duplicate_id(run_main: Runner, tmp_path: Path) -> None:
    path = tmp_path / "dup.csv"
    path.write_text("id,zip,d\n1,47000,flu\n2,47001,flu\n1,47002,hiv\n", encoding="utf-8")
    assert_input_error(
        run_main("simulate", "--out", str(tmp_path / "out"), "--base", str(path), "--qi", "zip", "--sensitive", "d"),
        str(path),
        "'1'",
    )


def test_simulate_base_without_qi(run_main: Runner, tmp_path: Path) -> None:
    base = _write_small_base(tmp_path / "base.csv")
    assert_input_error(run_main("simulate", "--out", str(tmp_path / "out"), "--base", str(base)), "--qi")


def test_simulate_unknown_preset(run_main: Runner, tmp_path: Path) -> None:
    assert_input_error(run_main("simulate", "--out", str(tmp_path / "out"), "--preset", "bogus"), "--preset")
