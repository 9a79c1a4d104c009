"""The typed release contract: strict parsing of manifest.json and byte-identical round trips."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonymizer.settings import Dilution, Strategy
from serialpub.errors import InputError
from serialpub.io.manifest import FORMAT_VERSION, Manifest

#: a manifest as publishing writes it (values from a demo release, measures shortened)
PUBLISHED: dict[str, Any] = {
    "format_version": 1,
    "dataset": "adult",
    "release": 3,
    "period": "0003",
    "created": "2026-11-24T18:44:00+00:00",
    "quasi_identifiers": ["age", "sex"],
    "sensitive": "occupation",
    "l": 2.0,
    "strategy": "constant",
    "k_prime": 20,
    "after_k_prime": "renew",
    "alpha": None,
    "guarantee": "global",
    "dilution": "register",
    "suppression_model": "mechanism",
    "algorithm": "topdown",
    "numeric_quasi_identifiers": ["age"],
    "suppression_budget": 0.0,
    "protected_values": ["Sales", "Tech-support"],
    "records": 2804,
    "groups": 545,
    "suppressed": 0,
    "max_breach_probability": 0.09761295822676896,
    "constant_ratio_target": 29.356788873216473,
    "utility": {
        "average_relative_error": 0.9690316963492587,
        "register_weighted_error": 0.2261,
        "queries": 5000,
        "qd": 3,
        "selectivity": 0.05,
        "seed": 0,
    },
    "register_marginals": {"age": {"17": 395, "18": 0}, "sex": {"Female": 14695, "Male": 30527}},
    "measures": [
        {"name": "suppression rate", "value": 0.0, "unit": "fraction", "source": "s", "note": "n", "family": "utility"},
        {"name": "smallest c", "value": "inf", "unit": "", "source": "s", "note": "n", "family": "privacy"},
        {"name": "MAP error", "value": None, "unit": "p", "source": "s", "note": "n", "family": "privacy"},
    ],
    "sha256": {"data.parquet": "a" * 64, "register": "b" * 64, "hierarchies": {"age": "c" * 64, "sex": "d" * 64}},
    "previous_release": 2,
    "validation": {
        "success": True,
        "sha256": "e" * 64,
        "global_guarantee_checked": True,
        "suites": {"register": {"success": True, "sha256": "f" * 64}},
    },
    "sign_off": {
        "decision": "approved",
        "approver": "Dana",
        "comment": "",
        "decided_at": "2026-11-24T18:44:01",
        "report_sha256": "1" * 64,
        "automatic": False,
    },
    "report": {"report.html": "1" * 64, "report.json": "2" * 64},
}

#: keys a manifest may lack (releases made before they existed, imported releases)
OPTIONAL = ["after_k_prime", "suppression_model", "algorithm", "numeric_quasi_identifiers", "suppression_budget",
            "max_breach_probability", "constant_ratio_target", "utility", "register_marginals", "measures",
            "report"]  # fmt: skip


def text(manifest: dict[str, Any]) -> str:
    return json.dumps(manifest, indent=2) + "\n"


def test_a_published_manifest_parses_and_writes_back_byte_for_byte() -> None:
    m = Manifest.parse(text(PUBLISHED), "m.json")
    assert m.strategy is Strategy.CONSTANT and m.dilution is Dilution.REGISTER
    assert m.sha256.data_parquet == "a" * 64 and m.sha256.register_file == "b" * 64
    assert m.measures[1].value == "inf" and m.sign_off is not None and m.sign_off.approver == "Dana"
    assert m.to_json() == text(PUBLISHED)
    assert m.to_dict() == PUBLISHED


@settings(max_examples=60, deadline=None)
@given(st.sets(st.sampled_from(OPTIONAL)), st.booleans())
def test_older_and_imported_manifests_keep_exactly_their_keys(absent: set[str], imported: bool) -> None:
    manifest = {k: v for k, v in copy.deepcopy(PUBLISHED).items() if k not in absent}
    if imported:
        manifest |= {"imported": True, "source_sha256": "9" * 64}
        manifest.pop("report", None)
    m = Manifest.parse(manifest, "m.json")
    assert m.to_json() == text(manifest)  # no key added, none lost, the order kept
    if "numeric_quasi_identifiers" in absent:
        assert m.numeric_quasi_identifiers == []


def test_a_utility_record_without_the_register_weighted_error_stays_without_it() -> None:
    """Releases made before the register-weighted estimator existed read and write back as they were."""
    manifest = copy.deepcopy(PUBLISHED)
    del manifest["utility"]["register_weighted_error"]
    m = Manifest.parse(manifest, "m.json")
    assert m.utility is not None and m.utility.register_weighted_error is None
    assert m.to_json() == text(manifest)


def test_keys_added_after_parsing_are_written_in_the_contracts_order() -> None:
    draft = {k: v for k, v in copy.deepcopy(PUBLISHED).items() if k != "report"}
    draft |= {"validation": None, "sign_off": None}
    m = Manifest.parse(draft, "m.json")
    m.report = {"report.html": "1" * 64}
    assert list(json.loads(m.to_json()))[-3:] == ["validation", "sign_off", "report"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: m.pop("sensitive"), r"m\.json: key 'sensitive' is missing; the release contract requires it"),
        (lambda m: m.update(extra=1), r"m\.json: key 'extra' is not part of the release contract"),
        (lambda m: m.update(release="3"), r"m\.json: 'release' input should be a valid integer, got '3'"),
        (lambda m: m.update(release=0), r"'release' input should be greater than or equal to 1"),
        (lambda m: m.update(strategy="Constant"), r"'strategy' input should be 'constant' or 'geometric'"),
        (lambda m: m.update(dilution="everyone"), r"'dilution' input should be 'register' or 'presence'"),
        (lambda m: m.update(l=0.5), r"'l' input should be greater than or equal to 1"),
        (lambda m: m.update(format_version=FORMAT_VERSION + 1), r"'format_version' must be 1\.\.2; a newer serialpub"),
        (lambda m: m.update(numeric_quasi_identifiers=["zip"]), r"numeric_quasi_identifiers names \['zip'\]"),
        (lambda m: m["sha256"]["hierarchies"].update(age=5), r"'sha256\.hierarchies\.age' input should be a valid str"),
        (lambda m: m["sha256"].pop("register"), r"key 'sha256\.register' is missing"),
        (lambda m: m.update(records=True), r"'records' input should be a valid integer"),
        (lambda m: m.update(quasi_identifiers=[]), r"'quasi_identifiers' list should have at least 1 item"),
        (
            lambda m: m["register_marginals"]["sex"].update(Male="30527"),
            r"'register_marginals\.sex\.Male' input should be a valid integer",
        ),
    ],
)
def test_a_manifest_that_breaks_the_contract_is_refused_with_one_line(change: Any, message: str) -> None:
    manifest = copy.deepcopy(PUBLISHED)
    change(manifest)
    with pytest.raises(InputError, match=message) as err:
        Manifest.parse(manifest, "m.json")
    assert "\n" not in str(err.value)


def test_reading_a_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"manifest\.json: file missing"):
        Manifest.read(tmp_path / "manifest.json")
    (tmp_path / "manifest.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match=r"manifest\.json: is not valid JSON"):
        Manifest.read(tmp_path / "manifest.json")
    (tmp_path / "manifest.json").write_text(text(PUBLISHED), encoding="utf-8")
    assert Manifest.read(tmp_path / "manifest.json").release == 3


def test_assignments_are_checked() -> None:
    m = Manifest.parse(PUBLISHED, "m.json")
    with pytest.raises(ValueError, match="valid integer"):
        m.records = "many"  # type: ignore[assignment]
