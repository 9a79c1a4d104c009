"""The reader installs alone (docs/data-users.md, "Install the reader"): the core
dependencies are what verifies, queries and expands a public copy; the publisher's packages
are the extra ``serialpub[publisher]``, which the repository's own environment installs
through a default dependency group. ``tests/reader_only.py`` runs the command line with
those packages (and Airflow) blocked, as a reader install lacks them. The public copy
carries a README.md (serialpub.workflow.public_copy.readme_text)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from conftest import PYCACHE
from helpers import cli, snapshot

from serialpub.cli.app import PUBLISHER_MODULES, error_line
from serialpub.config import load_config
from serialpub.workflow.publisher import Publisher

ROOT = Path(__file__).resolve().parent.parent
READER_ONLY = Path(__file__).resolve().parent / "reader_only.py"
PUBLISHER_DISTRIBUTIONS = {"pyyaml", "sqlalchemy", "alembic", "psycopg", "great-expectations", "jinja2", "matplotlib"}


def _name(requirement: str) -> str:
    """The normalized distribution name (PEP 503) of a requirement or a distribution."""
    return re.sub(r"[-_.]+", "-", re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0]).lower()


@pytest.mark.slow
def test_the_core_dependencies_are_the_readers_and_the_publishers_are_an_extra() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    core = {_name(r) for r in pyproject["project"]["dependencies"]}
    extra = {_name(r) for r in pyproject["project"]["optional-dependencies"]["publisher"]}
    assert core.isdisjoint(PUBLISHER_DISTRIBUTIONS | {"apache-airflow"}), core
    assert extra == PUBLISHER_DISTRIBUTIONS
    # the repository's environment (uv run --frozen, the README's commands) holds the extra:
    # uv installs the default groups, and no extra unless asked
    groups = pyproject["dependency-groups"]
    defaults = pyproject["tool"]["uv"]["default-groups"]
    assert any("serialpub[publisher]" in groups[g] for g in defaults), defaults
    # every package of the extra is named by its modules in the list the command line and
    # the blocking runner use
    provided = importlib.metadata.packages_distributions()
    for dist in extra:
        modules = {m for m, dists in provided.items() if dist in {_name(d) for d in dists}}
        assert modules & PUBLISHER_MODULES, f"{dist}: none of its modules {sorted(modules)} is in PUBLISHER_MODULES"


def test_a_missing_publisher_package_is_one_line_naming_the_extra() -> None:
    code, text = error_line(ModuleNotFoundError("No module named 'sqlalchemy.exc'", name="sqlalchemy.exc"))
    assert code == 2 and "\n" not in text
    assert text.endswith("(sqlalchemy is not installed): pip install 'serialpub[publisher]'"), text
    # any other missing module stays an internal error
    assert error_line(ModuleNotFoundError("No module named 'nosuch'", name="nosuch"))[0] == 1


@pytest.fixture(scope="module")
def copy_and_workspace(tmp_path_factory: pytest.TempPathFactory, published_workspaces: Any) -> tuple[Path, Path]:
    """A public copy (with the register) of the clinic workspace after two releases, and
    that workspace."""
    base = tmp_path_factory.mktemp("reader")
    ws = published_workspaces.copy(base / "ws", releases=2)
    out = base / "public"
    done = cli("public-copy", "--config", ws, "--out", out, "--with-register")
    assert done.returncode == 0, done.stderr
    return out, ws


def reader(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``serialpub ARGS`` in a fresh process without the publisher's packages (``env``: more
    variables, e.g. ``READER_ONLY_BLOCK``)."""
    env = {**os.environ, "COLUMNS": "200", "PYTHONPYCACHEPREFIX": str(PYCACHE), **(env or {})}
    for name in ("SERIALPUB_DATABASE_URL", "SERIALPUB_CRASH_AT", "SERIALPUB_DEBUG", "PYTHONDONTWRITEBYTECODE"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, str(READER_ONLY), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


@pytest.mark.slow
def test_a_reader_install_verifies_queries_and_expands(copy_and_workspace: tuple[Path, Path]) -> None:
    copy, _ = copy_and_workspace
    assert reader("--help", cwd=copy).returncode == 0
    assert reader("query", "--help", cwd=copy).returncode == 0
    audited = reader("audit", ".", "--public-key", "keys/publisher.pub", cwd=copy)
    assert audited.returncode == 0 and "verdict: PASS" in audited.stdout, audited.stdout + audited.stderr
    asked = reader("query", ".", "--where", "sex=F", "--json", cwd=copy)
    assert asked.returncode == 0, asked.stderr
    answers = json.loads(asked.stdout)["answers"]
    assert [a["release"] for a in answers] == [1, 2]
    expanded = reader("expand", ".", "--out", "tables", cwd=copy)
    assert expanded.returncode == 0, expanded.stderr
    assert sorted(p.name for p in (copy / "tables").glob("*.parquet")) == [f"release-000{n}.parquet" for n in (1, 2)]


@pytest.mark.slow
def test_a_query_and_an_expand_import_no_scipy(copy_and_workspace: tuple[Path, Path], tmp_path: Path) -> None:
    """scipy is the writer side's (the workload error, the learners' logistic fit): a data
    user's query, first (verifying and resolving) or from the cache, never imports it."""
    copy, _ = copy_and_workspace
    env = {"READER_ONLY_BLOCK": "scipy", "SERIALPUB_CACHE_DIR": str(tmp_path / "verdicts")}
    for _ in range(2):  # the first verifies and resolves, the second reads the cache
        asked = reader("query", ".", "--by", "sex", "--where", "zipcode=6500*", "--json", cwd=copy, env=env)
        assert asked.returncode == 0, asked.stderr
    assert len(list((tmp_path / "verdicts").glob("copy-*.npz"))) > 0
    expanded = reader("expand", ".", "--out", tmp_path / "tables", cwd=copy, env=env)
    assert expanded.returncode == 0, expanded.stderr
    blocked = reader("query", ".", "--json", cwd=copy, env={**env, "READER_ONLY_BLOCK": "cryptography"})
    assert blocked.returncode != 0, "the blocking is not in effect: this test could not fail"


@pytest.mark.slow
def test_a_second_query_from_the_cache_imports_neither_pandas_nor_pyarrow(
    copy_and_workspace: tuple[Path, Path], tmp_path: Path
) -> None:
    """pandas and pyarrow are about 40 % of a short query's time: a query answered from the
    cache (verdict and resolved arrays), as a table or JSON, runs without them; the first
    (decoding the releases' Parquet files) uses them."""
    copy, _ = copy_and_workspace
    env = {"SERIALPUB_CACHE_DIR": str(tmp_path / "verdicts")}
    where = ["--where", "zipcode=6500*", "--where", "age=[20, 24]", "--sensitive", "flu,cold"]
    first = reader("query", ".", *where, "--json", cwd=copy, env=env)
    assert first.returncode == 0, first.stderr
    no_pandas = {**env, "READER_ONLY_BLOCK": "pandas,pyarrow"}
    again = reader("query", ".", *where, "--json", cwd=copy, env=no_pandas)
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout
    table = reader("query", ".", *where, "--release", "2", cwd=copy, env=no_pandas)
    assert table.returncode == 0 and "estimate" in table.stdout, table.stderr
    uncached = reader("query", ".", *where, "--json", "--no-cache", cwd=copy, env=no_pandas)
    assert uncached.returncode != 0, "the blocking is not in effect: this test could not fail"


@pytest.mark.slow
def test_bad_input_to_a_reader_install_is_one_line(copy_and_workspace: tuple[Path, Path]) -> None:
    copy, _ = copy_and_workspace
    done = reader("query", ".", "--where", "zip=65001", cwd=copy)
    assert done.returncode == 2, done.stderr
    named = "serialpub: error: --where 'zip=65001': 'zip' is not a quasi-identifier; they are sex, zipcode, age"
    assert done.stderr.strip() == named


@pytest.mark.slow
@pytest.mark.parametrize("command", [["public-copy", "--out", "elsewhere"], ["history"]])
def test_a_publisher_command_in_a_reader_install_names_the_extra(
    copy_and_workspace: tuple[Path, Path], command: list[str], tmp_path: Path
) -> None:
    _, ws = copy_and_workspace
    done = reader(*command, "--config", ws, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "is the publisher's and needs its packages" in done.stderr
    assert done.stderr.strip().endswith("pip install 'serialpub[publisher]'"), done.stderr


@pytest.mark.slow
def test_the_public_copy_carries_a_readme_the_audit_accepts(copy_and_workspace: tuple[Path, Path]) -> None:
    copy, _ = copy_and_workspace
    text = (copy / "README.md").read_text(encoding="utf-8")
    assert text.startswith("# Public copy of the release series 'clinic' (releases 1-2)\n")
    # every kind of file the copy holds is described
    for path in [
        "releases/clinic/release-NNNN/data.parquet",
        "manifest.sig",
        "checkpoint.json",
        "hierarchies/",
        "hierarchy-versions/",
        "register.csv",
        "registers/",
        "keys/publisher.pub",
    ]:
        assert f"`{path}" in text or f"{path}`" in text, path
    assert "The quasi-identifiers are sex, zipcode, age; the sensitive attribute is disease." in " ".join(text.split())
    assert "pip install ./serialpub" in text
    for command in ["audit", "query", "expand"]:
        assert f"serialpub {command} . --key-fingerprint SHA256:" in text, command
    assert "apart" in text and "SHA256:" in text and not re.search(r"SHA256:[A-Za-z0-9+/]{43}", text)
    audited = cli("audit", copy, "--public-key", copy / "keys" / "publisher.pub")
    assert audited.returncode == 0 and "verdict: PASS" in audited.stdout, audited.stdout


@pytest.mark.slow
def test_the_readme_follows_the_copy(published_workspaces: Any, tmp_path: Path) -> None:
    ws = published_workspaces.copy(tmp_path / "ws", releases=1)
    out = tmp_path / "public"
    assert cli("public-copy", "--config", ws, "--out", out).returncode == 0
    first = (out / "README.md").read_text(encoding="utf-8")
    assert "(releases 1-1)" in first and "This copy holds no register" in first and "`register.csv`, `" not in first
    publisher = Publisher(load_config(ws))
    publisher.publish(snapshot(ws, 2))
    publisher.store.engine.dispose()
    done = cli("public-copy", "--config", ws, "--out", out, "--with-register")
    assert done.returncode == 0, done.stderr
    second = (out / "README.md").read_text(encoding="utf-8")
    assert "(releases 1-2)" in second and "This copy holds no register" not in second
