"""One release's settings are declared once (serialpub/io/release_settings.py) and every
other place that spells them is in step with that declaration: the configuration, the
row a draft writes (state/params.py), the manifest (serialpub/io/manifest.py) and its page
(docs/release-contract.md), the options of ``serialpub demo`` and ``serialpub plan``, and
the plan's candidates. A setting added in one place and not the others fails here, naming
the place."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer

from anonymizer import overlap
from serialpub.cli.app import app
from serialpub.config import Config, config_of, load_config
from serialpub.errors import InputError
from serialpub.io.manifest import Manifest
from serialpub.io.release_settings import (
    DEMO_OPTIONS,
    OPTIONAL_RECORDED,
    PLAN_OPTIONS,
    PLAN_TAKES,
    RECORDED,
    ReleaseSettings,
)
from serialpub.planning.grid import Candidate, build_grid
from serialpub.workflow.publisher import Publisher
from state.params import SETTINGS as ROW_SETTINGS
from state.params import DraftParams
from tests.helpers import make_workspace, read_config, snapshot, write_config

DOCS = Path(__file__).resolve().parents[1] / "docs"
#: the manifest's keys that are no release setting (docs/release-contract.md)
MANIFEST_ONLY = {
    "format_version", "dataset", "release", "period", "created", "records", "groups", "suppressed",
    "max_breach_probability", "constant_ratio_target", "utility", "register_marginals", "measures", "search_levels",
    "sha256", "previous_release", "previous_manifest_sha256", "signing_key", "validation", "sign_off", "imported",
    "source_sha256", "report",
}  # fmt: skip
#: the options of ``serialpub demo`` that choose no release setting
DEMO_ONLY = {"--out", "--rounds", "--seed", "--evolving-register", "--help"}
#: the options of ``serialpub plan`` that are no axis of its grid
PLAN_ONLY = {
    "--config", "--rounds", "--snapshots", "--simulate", "--seed", "--grid", "--json", "--html", "--jobs",
    "--max-candidates", "--learners", "--tune-ratio", "--help",
}  # fmt: skip
#: a configuration that sets every release setting away from its default
EVERY_SETTING: dict[str, Any] = {
    "dataset": "d", "quasi_identifiers": ["age", "zip"], "numeric": ["age"], "sensitive": "disease",
    "protected_values": ["flu"], "l": 3.0, "strategy": "constant", "k_prime": 7, "after_k_prime": "stop",
    "alpha": 1.5, "guarantee": "localized", "dilution": "presence", "suppression_model": "paper",
    "algorithm": "bottomup", "partition_model": "parts", "accept_known_breach": ["parts", "paper"],
    "suppression_budget": 0.1, "propensity_ratio": 3,
}  # fmt: skip


def _options(command: str) -> set[str]:
    group = typer.main.get_command(app)
    found = group.commands[command]  # type: ignore[attr-defined]
    return {opt for p in found.params for opt in [*p.opts, *p.secondary_opts] if opt.startswith("--")}


def test_the_configuration_is_the_release_settings_and_the_workspace_s_own() -> None:
    assert issubclass(Config, ReleaseSettings)
    for name, field in ReleaseSettings.model_fields.items():
        assert repr(Config.model_fields[name]) == repr(field), f"Config redeclares the release setting {name!r}"


def test_every_recorded_setting_is_a_manifest_key_and_every_manifest_setting_is_declared() -> None:
    settings = set(Manifest.model_fields) - MANIFEST_ONLY
    assert settings - set(RECORDED) == set(), "a manifest key that is no release setting (declare it once)"
    assert set(RECORDED) - settings == set(), "a release setting the manifest cannot record"


def test_every_recorded_setting_is_a_field_of_the_draft_s_row() -> None:
    # the row keeps the acknowledgement beside the settings it compares with the manifest
    assert set(RECORDED) - set(DraftParams.model_fields) == set(), "a release setting the row cannot record"
    assert set(ROW_SETTINGS) | set(OPTIONAL_RECORDED) == set(RECORDED), "state.params.SETTINGS is out of step"


def test_every_recorded_setting_is_on_the_release_contract_page() -> None:
    page = (DOCS / "release-contract.md").read_text(encoding="utf-8")
    keys = {k for row in re.findall(r"^\| (.+?) \|", page, re.MULTILINE) for k in re.findall(r"`([a-z_]+)`", row)}
    assert set(RECORDED) - keys == set(), "a recorded setting docs/release-contract.md does not describe"


def test_the_recorded_settings_go_through_the_row_and_the_manifest_unchanged() -> None:
    cfg = config_of(EVERY_SETTING, "test")
    recorded = cfg.recorded()
    # the noisy split test's keys and the history split rule's: only under them, which the
    # bottom-up search of EVERY_SETTING excludes
    assert set(recorded) == set(RECORDED) - {"partition_test", "partition_epsilon", "split_rule"}
    row = DraftParams(**recorded)
    assert DraftParams.read(json.loads(json.dumps(row.record()))).recorded_settings() == {
        k: v for k, v in row.record().items() if k in ROW_SETTINGS
    }
    manifest = {
        "format_version": 2, "dataset": "d", "release": 1, "period": "1", "created": "2026-01-01T00:00:00+00:00",
        **row.record(), "records": 1, "groups": 1, "suppressed": 0,
        "sha256": {"data.parquet": None, "register": "b" * 64, "hierarchies": {}}, "previous_release": None,
        "validation": None, "sign_off": None,
    }  # fmt: skip
    read = Manifest.parse(manifest, "test").to_dict()
    assert {k: read[k] for k in recorded} == {k: v for k, v in row.record().items() if k in recorded}
    # read back as the configuration spells them: the same settings
    spelled = cfg.model_dump(mode="json", by_alias=True, include=set(ReleaseSettings.model_fields))
    assert read["l"] == spelled["l"] and read["numeric_quasi_identifiers"] == spelled["numeric"]
    assert read["accepted_known_breach"] == spelled["accept_known_breach"]


def test_the_noisy_split_test_s_settings_go_through_the_row_and_the_manifest_unchanged() -> None:
    noisy = {
        "dataset": "d", "quasi_identifiers": ["age", "zip"], "sensitive": "disease", "l": 2.0,
        "protected_values": ["flu"], "partition_test": "noisy", "partition_epsilon": 0.5,
        "signing_key": "keys/publisher.key",
    }  # fmt: skip
    recorded = config_of(noisy, "test").recorded()
    assert recorded["partition_test"].value == "noisy" and recorded["partition_epsilon"] == 0.5
    row = DraftParams(**recorded).record()
    assert row["partition_test"] == "noisy" and row["partition_epsilon"] == 0.5


def test_the_history_split_rule_goes_through_the_row_and_is_refused_where_it_would_read_presence() -> None:
    base = {
        "dataset": "d", "quasi_identifiers": ["age", "zip"], "sensitive": "disease", "l": 2.0,
        "protected_values": ["flu"],
    }  # fmt: skip
    assert "split_rule" not in config_of(base, "test").recorded()  # widest: the default series keep their keys
    recorded = config_of({**base, "split_rule": "history"}, "test").recorded()
    assert recorded["split_rule"].value == "history"
    assert DraftParams(**recorded).record()["split_rule"] == "history"
    with pytest.raises(InputError, match="split_rule"):
        config_of({**base, "split_rule": "history", "dilution": "presence"}, "test")


def test_an_older_manifest_without_the_newer_settings_still_reads() -> None:
    # the keys a release published before them does not have: each recorded setting the
    # manifest declares optional
    required = {k for k, f in Manifest.model_fields.items() if f.is_required()}
    assert required & set(RECORDED) == {
        "quasi_identifiers",
        "sensitive",
        "l",
        "strategy",
        "k_prime",
        "alpha",
        "guarantee",
        "dilution",
        "protected_values",
    }, "a setting added since the first manifests must be optional there (old copies must still verify)"


def test_the_demo_s_options_are_the_declared_ones() -> None:
    options = _options("demo")
    assert set(DEMO_OPTIONS.values()) - options == set(), "a declared demo option serialpub demo lacks"
    assert options - DEMO_ONLY - set(DEMO_OPTIONS.values()) == set(), "a demo option no setting declares"


def test_the_plan_s_options_and_candidates_are_the_declared_ones() -> None:
    options = _options("plan")
    assert set(PLAN_OPTIONS.values()) - options == set(), "a declared plan option serialpub plan lacks"
    extra = options - PLAN_ONLY - {"--k-prime"} - set(PLAN_OPTIONS.values())
    assert extra == set(), "a plan option no setting declares"
    assert set(PLAN_TAKES) == set(PLAN_OPTIONS), "a plan axis without what it takes"
    cfg = config_of(
        EVERY_SETTING
        | {
            "algorithm": "topdown",
            "suppression_model": "mechanism",
            "accept_known_breach": ["parts"],
            "suppression_budget": 0,
        },
        "test",
    )
    (candidate,) = build_grid({}, cfg, ["flu", "cold"])
    # a candidate of the sound split test records no ε, one of the widest split rule no rule
    # (the history rule needs register dilution, which EVERY_SETTING leaves)
    unrecorded = {"partition_epsilon", "split_rule"}
    assert set(candidate.record()) == set(PLAN_OPTIONS) - unrecorded, "a plan axis the candidate lacks"
    assert isinstance(candidate, Candidate)
    spelled = cfg.model_dump(mode="json", by_alias=True)
    expected = {k: spelled[k] for k in PLAN_OPTIONS if k not in unrecorded} | {"alpha": None}  # constant: no α
    assert candidate.record() == expected, "the grid's default is not the workspace's"


@pytest.mark.parametrize("env", [None, "0", "1"])
def test_the_sequential_setting_runs_the_steps_in_turn_unless_the_environment_overrides_it(
    env: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if env is None:
        monkeypatch.delenv(overlap.SEQUENTIAL_ENV, raising=False)
    else:
        monkeypatch.setenv(overlap.SEQUENTIAL_ENV, env)
    assert overlap.sequential() is (env == "1")
    for setting in (False, True):
        with overlap.in_turn(setting):
            assert overlap.sequential() is (setting if env is None else env == "1")
            with overlap.Overlap(1, "test") as beside:  # work handed to a thread sees the block's setting
                assert beside.submit(overlap.sequential).result() is overlap.sequential()


@pytest.mark.slow
def test_the_publisher_applies_the_workspace_s_sequential_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(overlap.SEQUENTIAL_ENV, raising=False)
    root = make_workspace(tmp_path / "ws", periods=1)
    write_config(root, read_config(root) | {"sequential": True})
    seen: list[bool] = []
    real = overlap.Overlap.__init__

    def spy(self: overlap.Overlap, workers: int, name: str) -> None:
        seen.append(overlap.sequential())
        real(self, workers, name)

    monkeypatch.setattr(overlap.Overlap, "__init__", spy)
    Publisher(load_config(root)).draft(snapshot(root, 1))
    assert seen and all(seen), "a step overlapped although the workspace says sequential: true"
