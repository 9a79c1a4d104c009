"""Helpers shared by the test modules.

``cli`` runs the ``serialpub`` command in this process: the same ``serialpub.cli.main``
that the console script calls, with its arguments, environment, working directory and
output captured, and the exit code it would give. A separate interpreter pays the pandas
and Great Expectations imports on every command, so only the tests that need
one (crash, race, the module entry point, Airflow) start processes;
``tests/test_cli.py`` checks that both ways agree.

The small clinic workspace (:func:`make_workspace`) is what most pipeline tests publish;
the Adult workspace for Airflow (:func:`airflow_workspace`, :func:`airflow_env`) is copied
from one template per session (``conftest.adult_template``).
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import random
import shutil
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from anonymizer.settings import Dilution, Guarantee, Strategy
from serialpub.config import load_config
from serialpub.io import signing
from state.params import DraftParams
from state.store import StateStore, open_engine


@dataclass
class Result:
    """What a command gave: the fields of ``subprocess.CompletedProcess`` the tests read."""

    returncode: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def _environment(changes: Mapping[str, str | None]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in changes}
    try:
        for k, v in changes.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def cli(
    *args: str | Path, cwd: Path | None = None, env: Mapping[str, str | None] | None = None, login: str | None = None
) -> Result:
    """``serialpub ARGS`` in this process.

    Args:
        args: the command line after ``serialpub``.
        cwd: working directory for the command (restored afterwards).
        login: run it as this operating-system account (the identity of a sign-off,
            ``serialpub.workflow.identity.os_login``); None: the real one.
        env: variables to set (None removes one) for the command; ``SERIALPUB_DATABASE_URL``
            and ``SERIALPUB_CRASH_AT`` are removed unless given, as for a user's shell.

    Returns:
        the exit code (0 when the command returned normally) and what it printed.
    """
    from serialpub import cli as cli_module

    changes: dict[str, str | None] = {"SERIALPUB_DATABASE_URL": None, "SERIALPUB_CRASH_AT": None, **(env or {})}
    out, err = io.StringIO(), io.StringIO()
    old_argv, old_cwd = sys.argv, os.getcwd()
    code = 0
    try:
        with _environment(changes), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), as_login(login):
            if cwd is not None:
                os.chdir(cwd)
            sys.argv = ["serialpub", *map(str, args)]
            try:
                cli_module.main()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = old_argv
        os.chdir(old_cwd)
    return Result(code, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def as_login(login: str | None) -> Iterator[None]:
    """Within the block, serialpub sees ``login`` as the operating-system account running it
    (None: no change). The tests run as one account; sign-offs need approvers other than
    the preparer."""
    if login is None:
        yield
        return
    from unittest import mock

    with mock.patch("serialpub.workflow.identity.os_login", return_value=login):
        yield


# ---------------------------------------------------------------------------------------
# the small clinic workspace


QIS = ["sex", "zipcode", "age"]
SENSITIVE = "disease"
DISEASES = ["flu", "cold", "fever", "gastritis", "hiv", "cancer"]
ZIPS = {"65001": "6500*", "65002": "6500*", "65003": "6500*", "65011": "6501*", "65012": "6501*", "65013": "6501*"}
CONTRACT_KEYS = {
    "format_version",
    "dataset",
    "release",
    "period",
    "created",
    "quasi_identifiers",
    "sensitive",
    "l",
    "guarantee",
    "strategy",
    "k_prime",
    "alpha",
    "protected_values",
    "dilution",
    "suppression_model",
    "records",
    "groups",
    "suppressed",
    "sha256",
    "previous_release",
    "previous_manifest_sha256",
    "signing_key",
    "validation",
    "sign_off",
}


#: the params of a release row a test opens by hand (the clinic workspace's settings)
CLINIC_PARAMS = DraftParams(
    l=2.0,
    strategy=Strategy.CONSTANT,
    k_prime=3,
    guarantee=Guarantee.GLOBAL,
    dilution=Dilution.REGISTER,
    protected_values=["hiv", "cancer"],
)


def make_workspace(root: Path, seed: int = 0, n: int = 60, periods: int = 3, **overrides: Any) -> Path:
    """Write a small clinic workspace; returns its folder. ``overrides`` replace settings."""
    rng = random.Random(seed)
    (root / "hierarchies").mkdir(parents=True)
    (root / "snapshots").mkdir()
    (root / "hierarchies" / "sex.csv").write_text("M;*\nF;*\n", encoding="utf-8")
    (root / "hierarchies" / "zipcode.csv").write_text("".join(f"{z};{m};*\n" for z, m in ZIPS.items()))
    (root / "hierarchies" / "age.csv").write_text(
        "".join(f"{a};[{a // 5 * 5}, {a // 5 * 5 + 4}];*\n" for a in range(20, 30))
    )
    (root / "hierarchies" / f"{SENSITIVE}.csv").write_text("".join(f"{d};*\n" for d in DISEASES))
    register = [(f"p{i:03d}", rng.choice("MF"), rng.choice(list(ZIPS)), str(rng.randrange(20, 30))) for i in range(n)]
    (root / "register.csv").write_text("id,sex,zipcode,age\n" + "".join(",".join(r) + "\n" for r in register))
    for t in range(1, periods + 1):
        lines = ["id,sex,zipcode,age,disease"]
        for r in register:
            if rng.random() < 0.7:
                lines.append(",".join([*r, rng.choices(DISEASES, weights=[5, 5, 5, 5, 1, 1])[0]]))
        (root / "snapshots" / f"snapshot-{t:04d}.csv").write_text("\n".join(lines) + "\n")
    config = {
        "dataset": "clinic",
        "quasi_identifiers": QIS,
        "sensitive": SENSITIVE,
        "protected_values": ["hiv", "cancer"],
        "l": 2,
        "strategy": "constant",
        "k_prime": 3,
        "dilution": "register",
        "sign_off": {"auto_approve": True},  # tests of the sign-off gate turn it off
        "signing_key": "keys/publisher.key",  # every manifest signed, as a publisher would
    }
    config.update(overrides)
    if config.get("signing_key") == "keys/publisher.key":
        signing.create_key_pair(root / "keys" / "publisher.key")
    write_config(root, config)
    return root


def write_config(root: Path, config: dict[str, Any]) -> None:
    (root / "serialpub.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")


def read_config(root: Path) -> dict[str, Any]:
    return yaml.safe_load((root / "serialpub.yaml").read_text(encoding="utf-8"))


def nested_aliases(depth: int) -> str:
    """A YAML flow list of ``depth`` nested aliases, nine of the level below on each
    (the "billion laughs"): a few hundred bytes that expand to 9^depth strings, all defined
    and used inside the one value, so it can stand under any key; its first alias is ``*a``."""
    names = "abcdefghijklmnopqrstuvwxyz"[:depth]
    levels = [f"&a [{', '.join(['lol'] * 9)}]"]
    levels += [f"&{name} [{', '.join([f'*{prev}'] * 9)}]" for prev, name in itertools.pairwise(names)]
    return f"[[{', '.join(levels)}]]"


def snapshot(root: Path, t: int) -> Path:
    return root / "snapshots" / f"snapshot-{t:04d}.csv"


def _freeze(obj: Any) -> Any:
    """A comparable copy of whatever the state store returns (tables, frames, tuples)."""
    if obj is None or isinstance(obj, str | int | float):
        return obj
    if isinstance(obj, pd.DataFrame):
        return ("frame", obj.to_dict("list"))
    if hasattr(obj, "to_pylist") and hasattr(obj, "schema"):  # pyarrow.Table
        return ("table", str(obj.schema), obj.to_pylist())
    if isinstance(obj, tuple | list):
        return tuple(_freeze(x) for x in obj)
    raise TypeError(f"cannot compare state of type {type(obj)}")


def state_of(root: Path) -> tuple[Any, ...]:
    """Published releases, latest statistics and the release store's folder listing."""
    ws = load_config(root)
    store = StateStore(open_engine(ws.database_url))
    published = [
        (r.seq, r.period, r.records, r.groups, r.suppressed, r.max_breach, r.directory)
        for r in store.published(ws.config.dataset)
    ]
    # the signed checkpoint beside the releases is rewritten by every publication and has tests of its own
    listing = (
        sorted(p.name for p in ws.dataset_dir.iterdir() if not p.name.startswith("checkpoint."))
        if ws.dataset_dir.exists()
        else []
    )
    return published, _freeze(store.latest_statistics(ws.config.dataset)), listing


# ---------------------------------------------------------------------------------------
# Airflow: the DAGs of this repository on copies of one Adult workspace

ROOT = Path(__file__).resolve().parents[1]
PERIODS = ["2024-H1", "2024-H2", "2025-H1"]


def airflow_workspace(template: Path, where: Path, dataset: str, **settings: Any) -> Path:
    """A copy of the Adult template as dataset ``dataset``, signed off by a person."""
    root = where / dataset
    shutil.copytree(template, root)
    config = yaml.safe_load((root / "serialpub.yaml").read_text())
    approvers = ["alice", "bob", "carol", "dana", "olga"]  # Airflow users of the tests
    config.update(
        dataset=dataset, sign_off={"auto_approve": False, "timeout_hours": 1, "approvers": approvers}, **settings
    )
    (root / "serialpub.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return root


def airflow_env(home: Path, workspaces: list[Path]) -> dict[str, str]:
    """The environment of an Airflow process on ``home`` with the repository's DAGs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "SERIALPUB_"))}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(ROOT / "dags"),
        AIRFLOW__CORE__UNIT_TEST_MODE="False",
        SERIALPUB_WORKSPACES=os.pathsep.join(map(str, workspaces)),
        GX_ANALYTICS_ENABLED="False",
    )
    return env


def release_listing(dataset_dir: Path) -> list[str]:
    """The release store's entries, less the signed checkpoint every publication rewrites."""
    return sorted(p.name for p in dataset_dir.iterdir() if not p.name.startswith("checkpoint."))


def refused_series(root: Path) -> Path:
    """Try release 2 of a published clinic copy whose release 1 protects every value
    (``PublishedWorkspaces.copy(..., protected_values="all")``): the anonymizer refuses it
    (no partition meets ℓ = 2, recorded as a failed attempt). Returns the series report
    written after it (without the baseline)."""
    import pytest

    from serialpub.errors import InputError
    from serialpub.workflow.publisher import Publisher

    publisher = Publisher(load_config(root))
    with pytest.raises(InputError, match="cannot publish under ℓ = 2"):
        publisher.publish(snapshot(root, 2))
    return publisher.series_report(baseline=False)
