"""Mechanism-aware counting in the pipeline, the audit with snapshots, and the sensitive
domain that closes the spelling bypass (docs/threat-model.md).

The small clinic workspace of ``tests/test_pipeline.py`` is published in-process; the
audit reads it back from disk.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import DISEASES, make_workspace, read_config, snapshot, write_config

from serialpub.analysis.audit import audit_workspace, format_report
from serialpub.config import load_config
from serialpub.errors import InputChecksFailed, InputError
from serialpub.workflow.publisher import Publisher


def _publish(root: Path, releases: int = 3) -> list[dict]:
    publisher = Publisher(load_config(root))
    for t in range(1, releases + 1):
        publisher.publish(snapshot(root, t))
    return [
        json.loads((root / "releases" / "clinic" / f"release-{t:04d}" / "manifest.json").read_text())
        for t in range(1, releases + 1)
    ]


@pytest.mark.slow
@pytest.mark.parametrize("dilution", ["register", "presence"])
def test_audit_with_snapshots_agrees_with_the_state(tmp_path: Path, dilution: str) -> None:
    """Default model: nothing suppressed, every manifest says 'mechanism', and the data
    holder's audit recomputes the state's maximum to 1e-12 from the snapshots."""
    protected = ["hiv", "cancer", "fever"] if dilution == "register" else ["hiv", "cancer"]
    root = make_workspace(tmp_path / "ws", dilution=dilution, protected_values=protected)
    manifests = _publish(root)
    assert all(m["suppression_model"] == "mechanism" and m["suppressed"] == 0 for m in manifests)
    exact = audit_workspace(root, snapshots=root / "snapshots")
    assert exact.ok, format_report(exact)
    assert "with the snapshots: max p = " in format_report(exact) and "mechanism-aware" in format_report(exact)
    assert exact.mechanism_max_p == pytest.approx(manifests[-1]["max_breach_probability"], rel=1e-12, abs=1e-12)
    assert exact.max_p == exact.mechanism_max_p
    # nothing suppressed: the published counts are the mechanism-aware ones
    assert exact.published_count_max_p == pytest.approx(exact.mechanism_max_p, rel=1e-12, abs=1e-12)
    public = audit_workspace(root)
    assert public.mechanism_max_p is None
    if dilution == "presence":
        assert public.upper_bound is not None and "upper bound" in format_report(public)
        assert public.max_p >= exact.max_p - 1e-12
    else:
        assert public.upper_bound is None
        assert public.max_p == pytest.approx(exact.max_p, rel=1e-12, abs=1e-12)


@pytest.mark.slow
def test_paper_model_is_recorded_and_the_audit_charges_what_it_suppressed(tmp_path: Path) -> None:
    """The paper's model suppresses value-selectively; the published counts miss those
    records, the snapshots show them, and the audit without snapshots says so."""
    root = make_workspace(
        tmp_path / "ws",
        dilution="presence",
        suppression_model="paper",
        suppression_budget=0.5,
        algorithm="bottomup",
        protected_values=["flu", "cold"],
        k_prime=4,
        accept_known_breach=["parts", "paper"],
    )
    manifests = _publish(root, releases=2)
    assert all(m["suppression_model"] == "paper" for m in manifests)
    assert sum(m["suppressed"] for m in manifests) > 0
    exact = audit_workspace(root, snapshots=root / "snapshots")
    assert exact.mechanism_max_p is not None
    assert exact.mechanism_max_p > exact.published_count_max_p
    public = audit_workspace(root)
    assert any("suppressed records" in n for n in public.notes)
    report = (root / "releases" / "clinic" / "release-0001" / "report.html").read_text(encoding="utf-8")
    assert "weaker" in report and "published-count model" in report


def test_a_suppression_budget_under_the_default_model_is_refused(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws", suppression_budget=0.05)
    with pytest.raises(InputError, match=r"suppression_budget 0\.05 has no effect under suppression_model 'mechanism'"):
        load_config(root)


def test_a_suppression_budget_with_the_top_down_search_is_refused(tmp_path: Path) -> None:
    """The paper model's suppression needs the bottom-up search: the top-down one never
    suppresses, so a budget there would be a setting that silently does nothing."""
    root = make_workspace(
        tmp_path / "ws",
        suppression_model="paper",
        suppression_budget=0.05,
        algorithm="topdown",
        accept_known_breach=["paper"],
    )
    with pytest.raises(
        InputError,
        match=r"serialpub\.yaml: .*suppression_budget 0\.05 with algorithm 'topdown'.*"
        r"algorithm: bottomup",
    ):
        load_config(root)
    ok = make_workspace(
        tmp_path / "ok",
        suppression_model="paper",
        suppression_budget=0.05,
        algorithm="bottomup",
        accept_known_breach=["parts", "paper"],
    )
    assert load_config(ok).config.algorithm == "bottomup"


def test_audit_with_snapshots_names_a_missing_snapshot(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    _publish(root, releases=1)
    empty = tmp_path / "none"
    empty.mkdir()
    with pytest.raises(InputError, match=r"snapshot-0001\.csv: file missing"):
        audit_workspace(root, snapshots=empty)


# ---------------------------------------------------------------------------------------
# the sensitive domain: no spelling bypass


def test_protected_values_need_the_sensitive_domain(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    (root / "hierarchies" / "disease.csv").unlink()
    with pytest.raises(InputError, match="needs its domain"):
        Publisher(load_config(root))
    (root / "domain.txt").write_text("\n".join(DISEASES) + "\n", encoding="utf-8")
    config = read_config(root)
    config["sensitive_domain"] = "domain.txt"
    write_config(root, config)
    publisher = Publisher(load_config(root))
    assert publisher.sensitive_domain == DISEASES
    assert publisher.protected == ["hiv", "cancer"]


def test_a_misspelled_protected_value_is_refused_with_the_domain_spelling(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws", protected_values=["HIV", "cancer "])
    with pytest.raises(InputError) as err:
        Publisher(load_config(root))
    message = str(err.value)
    assert "protected_values" in message
    assert "'HIV'; did you mean 'hiv'?" in message and "'cancer '; did you mean 'cancer'?" in message


def test_a_snapshot_value_spelled_otherwise_is_refused_naming_line_and_spelling(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    path = snapshot(root, 1)
    lines = path.read_text(encoding="utf-8").splitlines()
    fields = lines[3].split(",")
    lines[3] = ",".join([*fields[:-1], "HIV "])
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    publisher = Publisher(load_config(root))
    with pytest.raises(InputChecksFailed) as err:
        publisher.publish(path)
    hints = [f for f in err.value.failures if "did you mean" in f]
    assert len(hints) == 1 and hints[0].startswith("expect_column_values_to_be_in_set")
    assert hints[0].endswith("nearest allowed spellings: 'HIV ' (line 4): did you mean 'hiv'?")
    assert not (root / "releases" / "clinic").exists() or not any((root / "releases" / "clinic").iterdir())
    assert publisher.store.published("clinic") == []


def test_a_domain_file_line_with_white_space_is_refused(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    (root / "hierarchies" / "disease.csv").unlink()
    (root / "domain.txt").write_text("flu\nhiv \n", encoding="utf-8")
    config = read_config(root)
    config["sensitive_domain"] = "domain.txt"
    write_config(root, config)
    with pytest.raises(InputError, match=r"domain\.txt, line 2: 'hiv ' has leading or trailing white space"):
        Publisher(load_config(root))


# ---------------------------------------------------------------------------------------
# the data holder's audit refuses snapshots it cannot use, and reports a wrong one


def _edit_snapshot(root: Path, folder: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    import pandas as pd

    folder.mkdir()
    frame = pd.read_csv(snapshot(root, 1), dtype=str, keep_default_na=False)
    edit(frame).to_csv(folder / "snapshot-0001.csv", index=False)
    return folder


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda f: f.drop(columns=["disease"]), "no 'disease' column"),
        (lambda f: f.assign(id=[f["id"].iloc[0]] * len(f)), "appears twice"),
        (lambda f: f.assign(id=["zz" + str(i) for i in range(len(f))]), "is not in the population register"),
    ],
    ids=["no sensitive column", "repeated id", "unknown individual"],
)
def test_audit_refuses_an_unusable_snapshot_naming_file_and_line(
    published_once: Path, tmp_path: Path, edit: object, message: str
) -> None:
    folder = _edit_snapshot(published_once, tmp_path / "snaps", edit)
    with pytest.raises(InputError, match=message) as err:
        audit_workspace(published_once, snapshots=folder)
    assert "snapshot-0001.csv" in str(err.value)


def test_audit_with_the_wrong_snapshot_reports_it(published_once: Path, tmp_path: Path) -> None:
    """A snapshot holding fewer protected records than the release published (not the one
    it was made from) is a finding, and so is a record outside every published region."""
    folder = _edit_snapshot(published_once, tmp_path / "snaps", lambda f: f.assign(disease="flu"))
    result = audit_workspace(published_once, snapshots=folder)
    assert not result.ok
    assert any("publish more records of a protected value than the snapshot holds" in f for f in result.findings)


def test_audit_without_the_snapshots_folder_says_so(published_once: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such folder"):
        audit_workspace(published_once, snapshots=tmp_path / "absent")


def test_privacy_parameters_refuse_an_unknown_suppression_model() -> None:
    from anonymizer.release import PrivacyParams

    with pytest.raises(ValueError, match="suppression_model must be one of"):
        PrivacyParams(ell=2.0, suppression_model="published")


def test_audit_refuses_a_snapshot_it_cannot_read_or_find(published_once: Path, tmp_path: Path) -> None:
    folder = tmp_path / "snaps"
    folder.mkdir()
    (folder / "snapshot-0001.csv").write_bytes(b"id,disease\n\xff\xfe,flu\n")
    with pytest.raises(InputError, match="not UTF-8 text"):
        audit_workspace(published_once, snapshots=folder)
    ws = tmp_path / "copy"  # the published workspace is shared with other tests
    shutil.copytree(published_once, ws)
    manifest_path = ws / "releases" / "clinic" / "release-0001" / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    del manifest["period"]  # the snapshot's file name comes from the period
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(InputError, match=r"release-0001/manifest\.json: key 'period' is missing"):
        audit_workspace(ws, snapshots=folder)


def test_audit_releases_needs_one_snapshot_per_release(published_once: Path) -> None:
    import pandas as pd

    from serialpub.analysis.audit import audit_releases
    from serialpub.io.hierarchies import read_hierarchies

    directory = published_once / "releases" / "clinic" / "release-0001"
    manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    register = pd.read_csv(published_once / "register.csv", dtype=str)
    hierarchies = read_hierarchies(published_once / "hierarchies", manifest["quasi_identifiers"])
    with pytest.raises(ValueError, match="one per release"):
        data = pd.read_parquet(directory / "data.parquet")
        audit_releases(register, "id", hierarchies, [(directory, manifest, data)], snapshots=[])
