"""Each setting is described once, in its field (serialpub/config.py): the commented
``serialpub.yaml`` (serialpub.config_render) and the tables of docs/configuration.md
(serialpub.config_docs) are written from the models, and the file reads back as the
configuration it was written from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from serialpub import config_docs
from serialpub.config import Config, ReportConfig, SignOffSettings, ValidationThresholds, config_of, load_config
from serialpub.config_render import WIDTH, dotted_keys, extra, render_config, settings
from serialpub.errors import InputError

BASE: dict[str, Any] = {"dataset": "clinic", "quasi_identifiers": ["sex", "zipcode", "age"], "sensitive": "flu", "l": 2}

#: configurations far from the defaults, each as a file would spell it
CASES: dict[str, dict[str, Any]] = {
    "defaults": {},
    "geometric, presence, localized": {
        "strategy": "geometric", "alpha": 1.5, "k_prime": None, "dilution": "presence", "guarantee": "localized",
        "after_k_prime": "stop", "l": 3.5,
    },
    "bottom-up under the paper model, acknowledged": {
        "algorithm": "bottomup", "suppression_model": "paper", "suppression_budget": 0.05,
        "accept_known_breach": ["parts", "paper"], "validation": {"max_suppression_rate": 0.05},
    },
    "parts, protected list, signing key, sections": {
        "partition_model": "parts", "accept_known_breach": ["parts"], "protected_values": ["flu", "hiv", "yes", "010"],
        "numeric": ["age"], "signing_key": "keys/publisher.key", "period_format": "half-year",
        "sign_off": {"auto_approve": False, "approvers": ["erin", "frank\n\u2028\x85 x"], "required_approvals": 2,
                     "timeout_hours": 0.5, "four_eyes": False},
        "report": {"categories": {"cancer": ["C34", "C50"], "null": ["true"]}, "recursive_c": 1e-05},
        "validation": {"min_snapshot_rows_ratio": None, "max_query_error": 0.25, "min_gain": -1.0,
                       "max_group_size": 40},
    },
    "SQL register and databases": {
        "register": "sql:SELECT *\n  FROM persons\r\nWHERE kind = 'a: b' # x", "input_database_url": "sqlite:///in.db",
        "database_url": "postgresql+psycopg://user@127.0.0.1:5432/serialpub", "sensitive_domain": "domain.txt",
        "hierarchies": "/abs/hierarchies", "id_column": "person id", "query_seed": 7, "dataset": "a.b-c_1",
    },
}  # fmt: skip


def _read_back(tmp_path: Path, text: str) -> Config:
    (tmp_path / "serialpub.yaml").write_text(text, encoding="utf-8")
    return load_config(tmp_path).config


@pytest.mark.parametrize("case", list(CASES))
def test_the_written_file_reads_back_as_its_configuration(tmp_path: Path, case: str) -> None:
    config = config_of({**BASE, **CASES[case]}, case)
    assert _read_back(tmp_path, render_config(config)) == config


#: any text, line breaks and control characters included
_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)


@hypothesis_settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    protected=st.one_of(st.just("all"), st.lists(_text, max_size=4)),
    ell=st.floats(min_value=2, max_value=1e6, allow_nan=False),
    approvers=st.lists(_text, max_size=3),
    ratio=st.one_of(st.none(), st.floats(min_value=0, max_value=1)),
    seed=st.integers(min_value=-(2**62), max_value=2**62),
    register=_text,
)
def test_any_such_configuration_reads_back(
    tmp_path: Path, protected: Any, ell: float, approvers: list[str], ratio: float | None, seed: int, register: str
) -> None:
    """Strings that YAML 1.1 would read as something else (yes, 010, null, a leading
    '#' or '*'), strings with line breaks (in a section too) and floats of any size are
    written so that they read back as they are."""
    config = config_of(
        {
            **BASE,
            "protected_values": protected,
            "l": ell,
            "query_seed": seed,
            "register": register,
            "sign_off": {"approvers": approvers},
            "validation": {"min_snapshot_rows_ratio": ratio},
        },
        "hypothesis",
    )
    assert _read_back(tmp_path, render_config(config)) == config


def test_every_setting_is_described_and_written_with_its_description() -> None:
    text = render_config(config_of(BASE, "base"))
    for model in (Config, ValidationThresholds, SignOffSettings, ReportConfig):
        assert model.__doc__, model
        for name, field in model.model_fields.items():
            if field.annotation in (ValidationThresholds, SignOffSettings, ReportConfig):
                continue
            assert field.description, f"{model.__name__}.{name} has no description"
    # the description of a setting stands above it, its Markdown link reduced to the text
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("dilution:"))
    block = " ".join(line.lstrip("# ") for line in lines[at - 3 : at])
    assert "Read when dilution is safe to claim" in block and "](" not in text and "`" not in text
    assert all(len(line) <= WIDTH for line in lines if line.lstrip().startswith("#")), "a comment is too wide"


def test_a_null_setting_with_an_example_is_written_commented_out(tmp_path: Path) -> None:
    text = render_config(config_of(BASE, "base"))
    assert "\n# database_url: postgresql+psycopg://" in text and "\n# sensitive_domain: domain.txt" in text
    assert "\n  # categories: {cancer: [C34, C50], infectious: [A15, B20]}" in text
    examples = [k for m in (Config, ReportConfig) for _, k, field, _ in settings(m) if "example" in extra(field)]
    assert examples == ["input_database_url", "database_url", "sensitive_domain", "categories"]
    for k in examples:  # uncommented, each example is a valid setting
        assert _read_back(tmp_path, text.replace(f"# {k}: ", f"{k}: ")) != config_of(BASE, "base"), k


def test_notes_say_why_a_value_was_chosen_and_a_note_for_no_setting_is_refused(tmp_path: Path) -> None:
    config = config_of({**BASE, "sign_off": {"auto_approve": True}}, "base")
    text = render_config(config, {"sign_off.auto_approve": "A test environment.", "l": "The office's choice."})
    lines = text.splitlines()
    assert lines[lines.index("  auto_approve: true") - 1] == "  # A test environment."
    assert lines[lines.index("l: 2.0") - 1] == "# The office's choice."
    assert _read_back(tmp_path, text) == config
    with pytest.raises(ValueError, match=r"sign_off\.auto_aprove, which is no setting"):
        render_config(config, {"sign_off.auto_aprove": "typo"})
    assert "sign_off.auto_approve" in dotted_keys() and "validation.min_gain" in dotted_keys()


def test_settings_chosen_in_code_are_refused_in_one_line() -> None:
    with pytest.raises(InputError) as err:
        config_of({**BASE, "strategy": "linear"}, "serialpub demo")
    assert str(err.value).startswith("serialpub demo: setting 'strategy': ") and "\n" not in str(err.value)


def test_the_docs_tables_are_in_step_with_the_models() -> None:
    page = config_docs.PAGE.read_text(encoding="utf-8")
    assert config_docs.generated(page) == page, (
        f"the settings tables of {config_docs.PAGE} are out of step with serialpub/config.py; "
        f"run: {config_docs.COMMAND}"
    )


def test_the_docs_check_notices_an_edited_table(tmp_path: Path) -> None:
    page = tmp_path / "configuration.md"
    text = config_docs.PAGE.read_text(encoding="utf-8")
    page.write_text(text.replace("| `query_seed` | integer | `0` |", "| `query_seed` | integer | `1` |"))
    assert config_docs.main(["--page", str(page)]) == 1
    assert config_docs.main(["--page", str(page), "--write"]) == 0
    assert page.read_text(encoding="utf-8") == config_docs.generated(text)
    with pytest.raises(ValueError, match="no '<!-- settings table"):
        config_docs.generated("# a page without tables\n")


def test_the_docs_table_row_of_a_setting() -> None:
    rows = {line.split(" | ")[0]: line for line in config_docs.table(Config).splitlines()}
    assert rows["| `l`"] == (
        "| `l` | number | **required** | ℓ of the global guarantee: over all releases, every probability of "
        "linking an individual to a protected value (breach probability) stays at most 1/ℓ | ≥ 2 |"
    )
    assert "| `suppression_budget` | number | `0.0` |" in rows["| `suppression_budget`"]
    assert rows["| `suppression_budget`"].endswith("| 0 ≤ value ≤ 1; must be 0 under `mechanism` or `topdown` |")
    assert rows["| `accept_known_breach`"].startswith("| `accept_known_breach` | list of `parts`, `paper` | `[]` |")
    assert rows["| `validation`"].startswith("| `validation` | mapping | see below | Utility expectations")
    assert yaml.safe_load(config_docs.table(ReportConfig).splitlines()[2].split(" | ")[2].strip("`")) == 0.9
