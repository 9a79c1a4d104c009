"""The independent auditor (serialpub.analysis.audit) against the paper's example, hand-built
defects and a brute-force per-individual recomputation on random workspaces."""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest
from helpers import cli

from serialpub.analysis.audit import (
    EXIT_STATUS,
    AuditResult,
    Outcome,
    audit_releases,
    audit_workspace,
    collapse_notes,
    format_report,
)
from serialpub.cli.app import EXIT_ENVIRONMENT, EXIT_INPUT, EXIT_VALIDATION
from serialpub.errors import InputError
from serialpub.io.hierarchies import read_hierarchies

# ----------------------------------------------------------------------------- builders

Rows = list[list[str]]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_workspace(
    root: Path,
    register: pd.DataFrame,
    hierarchies: dict[str, Rows],
    releases: list[dict],
    dataset: str = "clinic",
    sensitive: str = "disease",
) -> Path:
    """A workspace with register.csv, hierarchies/<qi>.csv and releases/<dataset>/release-NNNN/.

    Each release is a dict with ``data`` (QI columns + sensitive column), ``l``,
    ``protected`` and ``dilution``; manifests carry correct sha256s.
    """
    root.mkdir(parents=True, exist_ok=True)
    register.to_csv(root / "register.csv", index=False, lineterminator="\n")
    hdir = root / "hierarchies"
    hdir.mkdir(exist_ok=True)
    for name, rows in hierarchies.items():
        (hdir / f"{name}.csv").write_text("".join(";".join(r) + "\n" for r in rows), encoding="utf-8")
    qis = list(hierarchies)
    for k, rel in enumerate(releases, start=1):
        d = root / "releases" / dataset / f"release-{k:04d}"
        d.mkdir(parents=True)
        data: pd.DataFrame = rel["data"]
        data.to_parquet(d / "data.parquet", index=False)
        manifest = {
            "format_version": 1,
            "dataset": dataset,
            "release": k,
            "period": f"P{k}",
            "created": "2026-01-01T00:00:00Z",
            "quasi_identifiers": qis,
            "sensitive": sensitive,
            "l": rel["l"],
            "guarantee": "global",
            "strategy": "constant",
            "k_prime": 2,
            "alpha": None,
            "protected_values": rel["protected"],
            "dilution": rel["dilution"],
            "records": len(data),
            "groups": len(data[qis].drop_duplicates()),
            "suppressed": 0,
            "sha256": {
                "data.parquet": _sha(d / "data.parquet"),
                "register": _sha(root / "register.csv"),
                "hierarchies": {q: _sha(hdir / f"{q}.csv") for q in qis},
            },
            "previous_release": k - 1 if k > 1 else None,
            **({"numeric_quasi_identifiers": rel["numeric"]} if "numeric" in rel else {}),
            "validation": None,
            "sign_off": None,
        }
        (d / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return root


def table(rows: list[tuple[str, ...]], columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=columns)


# ----------------------------------------------------------------------------- paper 004, Figures 1-4

SEX: Rows = [["M", "*"], ["F", "*"]]
ZIP: Rows = [
    ["65001", "6500*", "*"],
    ["65002", "6500*", "*"],
    ["65014", "6501*", "*"],
    ["65015", "6501*", "*"],
    ["65010", "6501*", "*"],
]
PAPER_H = {"sex": SEX, "zipcode": ZIP}
COLS = ["sex", "zipcode", "disease"]
# Figure 1: o1..o5 with their QI values (o4 only in T1, o5 only in T2)
REGISTER = pd.DataFrame(
    {
        "id": ["o1", "o2", "o3", "o4", "o5"],
        "sex": ["M", "M", "F", "F", "F"],
        "zipcode": ["65001", "65002", "65014", "65015", "65010"],
    }
)
# Figure 2: groups of two, localized guarantee only
T1_FIG2 = table(
    [("M", "6500*", "flu"), ("M", "6500*", "chlamydia"), ("F", "6501*", "flu"), ("F", "6501*", "fever")], COLS
)
T2_FIG2 = table(
    [("M", "6500*", "chlamydia"), ("M", "6500*", "flu"), ("F", "6501*", "fever"), ("F", "6501*", "flu")], COLS
)
# Figure 4: one group of four per release
T1_FIG4 = table([("*", "*", v) for v in ("flu", "chlamydia", "flu", "fever")], COLS)
T2_FIG4 = table([("*", "*", v) for v in ("chlamydia", "flu", "fever", "flu")], COLS)


def paper_releases(t1: pd.DataFrame, t2: pd.DataFrame, dilution: str) -> list[dict]:
    return [{"data": t, "l": 2, "protected": ["chlamydia"], "dilution": dilution} for t in (t1, t2)]


@pytest.mark.parametrize("dilution", ["presence", "register"])
def test_figure_2_breaches_the_global_guarantee(tmp_path: Path, dilution: str) -> None:
    ws = write_workspace(tmp_path / "ws", REGISTER, PAPER_H, paper_releases(T1_FIG2, T2_FIG2, dilution))
    result = audit_workspace(ws)
    # o2 (and o1, same group) is linked to chlamydia with p = 1 - (1/2)(1/2) = 3/4 > 1/2
    assert result.max_p == pytest.approx(0.75, abs=1e-15)
    assert result.max_p_individual in {"o1", "o2"}
    assert result.max_p_value == "chlamydia"
    assert result.max_p_releases == 2
    assert result.violations == 2 and result.violating_individuals == 2
    assert result.max_p_by_release == pytest.approx([0.5, 0.75])
    assert result.releases == [1, 2] and result.dataset == "clinic" and result.ell == 2
    assert result.overlap_pairs == 0 and result.findings == []
    assert not result.ok
    report = format_report(result)
    assert "max p = 0.75 > 1/ℓ = 0.5" in report and "verdict: FAIL" in report


def test_figure_4_meets_the_global_guarantee_with_presence_known(tmp_path: Path) -> None:
    ws = write_workspace(tmp_path / "ws", REGISTER, PAPER_H, paper_releases(T1_FIG4, T2_FIG4, "presence"))
    result = audit_workspace(ws)
    # 1 - (3/4)(3/4) = 7/16 < 1/2 for every covered individual
    assert result.max_p == 7 / 16
    assert result.violations == 0
    assert result.ok
    assert "verdict: PASS" in format_report(result)


def test_register_dilution_lowers_p(tmp_path: Path) -> None:
    # Figure 4 under register dilution: all five register individuals are candidates
    ws = write_workspace(tmp_path / "a", REGISTER, PAPER_H, paper_releases(T1_FIG4, T2_FIG4, "register"))
    assert audit_workspace(ws).max_p == pytest.approx(1 - (4 / 5) ** 2)  # 9/25 < 7/16
    # Figure 2 plus o6, a man in 6500* who is in no release: he dilutes the men's group
    reg = pd.concat([REGISTER, pd.DataFrame({"id": ["o6"], "sex": ["M"], "zipcode": ["65002"]})], ignore_index=True)
    presence = audit_workspace(
        write_workspace(tmp_path / "b", reg, PAPER_H, paper_releases(T1_FIG2, T2_FIG2, "presence"))
    )
    register = audit_workspace(
        write_workspace(tmp_path / "c", reg, PAPER_H, paper_releases(T1_FIG2, T2_FIG2, "register"))
    )
    assert presence.max_p == pytest.approx(0.75)
    assert register.max_p == pytest.approx(1 - (2 / 3) ** 2)  # 5/9
    assert register.max_p < presence.max_p
    # the absent o6 accumulates linkage too, so three men violate (p = 5/9 > 1/2)
    assert register.violations == 3


# ----------------------------------------------------------------------------- verdicts

#: what a release made under the defaults records (no known breach; releases that record
#: no model were made by the bottom-up search under the paper's suppression model)
DEFAULT_MODELS = {"algorithm": "topdown", "partition_model": "published", "suppression_model": "mechanism"}


def _edit_manifests(ws: Path, **keys: object) -> None:
    for path in sorted((ws / "releases" / "clinic").glob("release-*/manifest.json")):
        manifest = json.loads(path.read_text(encoding="utf-8"))
        path.write_text(json.dumps({**manifest, **keys}, indent=2), encoding="utf-8")


def _one_line(text: str) -> str:
    return " ".join(text.split())  # the console wraps long lines


def test_presence_above_the_bound_on_the_upper_bound_only_is_not_verifiable(tmp_path: Path) -> None:
    """Figure 2 plus o6, a man in 6500* in no release, presence known: each men's group has
    two records and three register men, so the published files cannot tell which two were
    present. On the upper bound o1, o2 and o6 reach 3/4 > 1/2, but no link is proven: the
    verdict is NOT VERIFIABLE (exit 5), naming the manifests' own figure and what checks it,
    not FAIL (it used to fail, exit 1)."""
    reg = pd.concat([REGISTER, pd.DataFrame({"id": ["o6"], "sex": ["M"], "zipcode": ["65002"]})], ignore_index=True)
    ws = write_workspace(tmp_path / "ws", reg, PAPER_H, paper_releases(T1_FIG2, T2_FIG2, "presence"))
    _edit_manifests(ws, max_breach_probability=0.4375, **DEFAULT_MODELS)
    result = audit_workspace(ws)
    assert result.max_p == pytest.approx(0.75) and result.violations == 3 and result.proven_violations == 0
    assert result.findings == [] and result.bound_releases == [1, 2]
    assert result.verdict.outcome is Outcome.NOT_VERIFIABLE and result.verdict.exit_status == 5
    assert not result.ok
    report = format_report(result)
    assert report.splitlines()[-1] == "verdict: NOT VERIFIABLE from this copy (release(s) 1-2)"
    assert "the manifests state max p = 0.4375 (release 2)" in report and "--snapshots" in report
    done = cli("audit", ws)
    assert done.returncode == 5, done.stdout + done.stderr
    assert "verdict: NOT VERIFIABLE from this copy (release(s) 1-2)" in _one_line(done.stdout)


@pytest.mark.parametrize(
    ("register", "t1", "t2", "outcome"),
    [
        # the men's regions hold exactly their two records: both present, 3/4 > 1/2 proven
        (REGISTER, T1_FIG2, T2_FIG2, Outcome.FAIL),
        # 7/16 <= 1/2 even with every register individual linked: the upper bound suffices
        (REGISTER, T1_FIG4, T2_FIG4, Outcome.PASS),
    ],
)
def test_presence_fails_on_what_the_files_prove_and_passes_on_the_upper_bound(
    tmp_path: Path, register: pd.DataFrame, t1: pd.DataFrame, t2: pd.DataFrame, outcome: Outcome
) -> None:
    ws = write_workspace(tmp_path / "ws", register, PAPER_H, paper_releases(t1, t2, "presence"))
    _edit_manifests(ws, **DEFAULT_MODELS)
    result = audit_workspace(ws)
    assert result.verdict.outcome is outcome
    assert result.proven_violations == (2 if outcome is Outcome.FAIL else 0)
    done = cli("audit", ws)
    assert done.returncode == outcome.exit_status, done.stdout + done.stderr
    assert _one_line(done.stdout).endswith(f"verdict: {outcome}")


def test_a_known_breach_passes_with_its_own_verdict_and_exit_status(tmp_path: Path) -> None:
    """A series made under partition_model parts used to audit as a plain PASS, exit 0. Its
    verdict now names the model and exits 6; the same series made under the defaults exits 0."""
    releases = paper_releases(T1_FIG4, T2_FIG4, "register")
    clean = write_workspace(tmp_path / "clean", REGISTER, PAPER_H, releases)
    _edit_manifests(clean, **DEFAULT_MODELS)
    parts = write_workspace(tmp_path / "parts", REGISTER, PAPER_H, releases)
    _edit_manifests(parts, **{**DEFAULT_MODELS, "partition_model": "parts", "accepted_known_breach": ["parts"]})
    result = audit_workspace(parts)
    assert result.known_breach == ["parts"] and result.known_breach_releases == [1, 2]
    assert result.ok and result.verdict.outcome is Outcome.PASS_WITH_KNOWN_BREACH
    assert str(result.verdict) == "PASS, with accepted known breach: parts"
    done = cli("audit", parts)
    assert done.returncode == 6, done.stdout + done.stderr
    assert _one_line(done.stdout).endswith("verdict: PASS, with accepted known breach: parts")
    plain = cli("audit", clean)
    assert plain.returncode == 0 and _one_line(plain.stdout).endswith("verdict: PASS"), plain.stdout
    # a release that records no model was made by the bottom-up search under the paper's model
    old = write_workspace(tmp_path / "old", REGISTER, PAPER_H, releases)
    assert str(audit_workspace(old).verdict) == "PASS, with accepted known breach: parts, paper"


def test_every_verdict_has_its_own_documented_exit_status() -> None:
    """0, 1, 5 and 6, none of them an error's (2-4), each in docs/commands.md's table."""
    statuses = [o.exit_status for o in Outcome]
    assert statuses == [EXIT_STATUS[o] for o in Outcome] and len(set(statuses)) == len(Outcome)
    assert not {EXIT_INPUT, EXIT_VALIDATION, EXIT_ENVIRONMENT} & set(statuses)
    table = (Path(__file__).resolve().parents[1] / "docs" / "commands.md").read_text(encoding="utf-8")
    for outcome in Outcome:
        assert f"| {outcome.exit_status} |" in table and f"`verdict: {outcome}" in table, outcome


def test_the_verdict_is_read_from_the_result_and_an_exact_violation_always_fails() -> None:
    """One typed verdict for the command line, the library and the report: a violation on
    an exact figure fails whatever ``proven_violations`` says; on the upper bound alone it
    is NOT VERIFIABLE; a finding fails even a series with a known breach."""
    exact = AuditResult(dataset="d", releases=[1], ell=2, violations=1)
    assert exact.verdict.outcome is Outcome.FAIL and not exact.ok
    bound = AuditResult(dataset="d", releases=[1, 2], ell=2, violations=1, bound_releases=[2])
    assert bound.verdict.outcome is Outcome.NOT_VERIFIABLE and str(bound.verdict).endswith("(release(s) 2)")
    breach = AuditResult(dataset="d", releases=[1], ell=2, known_breach=["parts"], findings=["release 1: x"])
    assert str(breach.verdict) == "FAIL; accepted known breach: parts" and breach.verdict.exit_status == 1


def test_a_note_repeated_per_release_is_one_line_naming_the_releases() -> None:
    """The audit of a public copy printed the same note once per release (20 times for the
    demo); it is one line naming them, consecutive ones as a range."""
    evidence = "the evidence (report.html) is not in this copy"
    notes = [f"release {n}: {evidence}" for n in (1, 2, 3, 5)] + ["ℓ differs", "release 4: other", "ℓ differs"]
    assert collapse_notes(notes) == [f"releases 1-3, 5: {evidence}", "ℓ differs", "release 4: other"]
    assert collapse_notes(collapse_notes(notes)) == collapse_notes(notes)
    result = AuditResult(dataset="clinic", releases=[1, 2, 3, 4, 5], ell=2, notes=notes)
    lines = format_report(result).splitlines()
    assert sum(evidence in line for line in lines) == 1 and len(lines) == 9


# ----------------------------------------------------------------------------- defects

AGE: Rows = [[str(a), "[30, 34]" if a < 35 else "[35, 39]", "[30, 39]", "*"] for a in range(30, 40)]
AGE_H = {"sex": SEX, "age": AGE}
AGE_COLS = ["sex", "age", "disease"]
AGE_REGISTER = pd.DataFrame(
    {
        "id": [f"p{i}" for i in range(8)],
        "sex": ["M", "M", "M", "M", "F", "F", "F", "F"],
        "age": ["31", "32", "36", "38", "30", "33", "35", "39"],
    }
)


def test_overlapping_regions_are_reported(tmp_path: Path) -> None:
    data = table(
        [
            ("M", "[30, 39]", "flu"),
            ("M", "[30, 39]", "hiv"),
            ("M", "[30, 34]", "flu"),
            ("M", "[30, 34]", "flu"),
            ("F", "[30, 34]", "flu"),
            ("F", "[30, 34]", "hiv"),
        ],
        AGE_COLS,
    )
    rel = [{"data": data, "l": 2, "protected": ["hiv"], "dilution": "register"}]
    result = audit_workspace(write_workspace(tmp_path / "ws", AGE_REGISTER, AGE_H, rel))
    assert result.overlap_pairs == 1
    (ov,) = result.overlaps
    assert ov.release == 1
    assert {ov.first["age"], ov.second["age"]} == {"[30, 39]", "[30, 34]"}
    assert ov.first["sex"] == ov.second["sex"] == "M"
    assert not result.ok
    assert "overlapping group pairs: 1" in format_report(result)


def test_disjoint_boxes_that_are_not_a_cut_pass(tmp_path: Path) -> None:
    # age nodes [30, 39] and [30, 34] both used, but with different sexes: disjoint regions
    data = table(
        [
            ("M", "[30, 39]", "flu"),
            ("M", "[30, 39]", "hiv"),
            ("M", "[30, 39]", "flu"),
            ("F", "[30, 34]", "flu"),
            ("F", "[35, 39]", "hiv"),
        ],
        AGE_COLS,
    )
    rel = [{"data": data, "l": 2, "protected": ["hiv"], "dilution": "register"}]
    result = audit_workspace(write_workspace(tmp_path / "ws", AGE_REGISTER, AGE_H, rel))
    assert result.overlap_pairs == 0
    # F in [35, 39]: two register women (35, 39), one hiv record: p = 1/2, not above 1/2
    assert result.max_p == 0.5 and result.violations == 0
    assert result.ok


def test_numeric_intervals_are_regions(tmp_path: Path) -> None:
    """Intervals that are not nodes of age.csv, on a QI the manifest declares numeric:
    M [31, 32] holds the register men 31 and 32, M [33, 38] the men 36 and 38, F * the four
    women. One hiv record in a region of two: p = 1/2 for both its members."""
    data = table(
        [
            ("M", "[31, 32]", "flu"),
            ("M", "[31, 32]", "hiv"),
            ("M", "[33, 38]", "flu"),
            ("F", "*", "flu"),
            ("F", "*", "flu"),
        ],
        AGE_COLS,
    )
    rel = [{"data": data, "l": 2, "protected": ["hiv"], "dilution": "register", "numeric": ["age"]}]
    result = audit_workspace(write_workspace(tmp_path / "ws", AGE_REGISTER, AGE_H, rel))
    assert result.ok, format_report(result)
    assert result.max_p == 0.5 and result.max_p_individuals == 1
    assert result.max_p_individual in {"p0", "p1"}
    # a third hiv record in [33, 38]: two men, one record -> still 1/2; an interval
    # reaching into [31, 32] would overlap it
    overlapping = table([("M", "[31, 32]", "hiv"), ("M", "[32, 38]", "flu")], AGE_COLS)
    rel = [{"data": overlapping, "l": 2, "protected": ["hiv"], "dilution": "register", "numeric": ["age"]}]
    result = audit_workspace(write_workspace(tmp_path / "ws2", AGE_REGISTER, AGE_H, rel))
    assert not result.ok
    (finding,) = result.findings
    assert "'[32, 38]'" in finding and "closed interval" in finding


def test_intervals_on_a_qi_not_declared_numeric_are_reported(tmp_path: Path) -> None:
    data = table([("M", "[31, 32]", "hiv"), ("M", "[31, 32]", "flu"), ("F", "*", "flu")], AGE_COLS)
    rel = [{"data": data, "l": 2, "protected": ["hiv"], "dilution": "register"}]
    result = audit_workspace(write_workspace(tmp_path / "ws", AGE_REGISTER, AGE_H, rel))
    assert not result.ok
    (finding,) = result.findings
    assert "'[31, 32]'" in finding and "a node of hierarchies/age.csv" in finding


def test_value_outside_the_hierarchy_is_reported(tmp_path: Path) -> None:
    bad = T1_FIG2.copy()
    bad.loc[2, "zipcode"] = "6502*"
    ws = write_workspace(tmp_path / "ws", REGISTER, PAPER_H, paper_releases(bad, T2_FIG2, "presence"))
    result = audit_workspace(ws)
    assert not result.ok
    (finding,) = result.findings
    assert "release 1" in finding and "'zipcode'" in finding and "'6502*'" in finding


def test_tampered_data_file_is_reported(tmp_path: Path) -> None:
    ws = write_workspace(tmp_path / "ws", REGISTER, PAPER_H, paper_releases(T1_FIG4, T2_FIG4, "presence"))
    path = ws / "releases" / "clinic" / "release-0002" / "data.parquet"
    tampered = T2_FIG4.copy()
    tampered.loc[0, "disease"] = "flu"
    tampered.to_parquet(path, index=False)
    result = audit_workspace(ws)
    assert not result.ok
    assert any("release 2" in f and "sha256" in f for f in result.findings)


def test_identifier_column_in_a_release_is_reported(tmp_path: Path) -> None:
    leaky = T1_FIG4.assign(id=["o1", "o2", "o3", "o4"])
    ws = write_workspace(tmp_path / "ws", REGISTER, PAPER_H, paper_releases(leaky, T2_FIG4, "presence"))
    result = audit_workspace(ws)
    assert not result.ok
    (finding,) = result.findings
    assert "release 1" in finding and "column(s) id" in finding


def test_changing_ell_is_noted_and_the_latest_is_used(tmp_path: Path) -> None:
    rels = paper_releases(T1_FIG4, T2_FIG4, "presence")
    rels[1]["l"] = 3
    result = audit_workspace(write_workspace(tmp_path / "ws", REGISTER, PAPER_H, rels))
    assert result.ell == 3
    assert any("ℓ differs" in n for n in result.notes)
    assert result.violations == 5 and not result.ok  # 7/16 > 1/3 for all five covered individuals


def test_hierarchy_changed_after_publishing_is_an_input_error(tmp_path: Path) -> None:
    ws = write_workspace(tmp_path / "ws", REGISTER, PAPER_H, paper_releases(T1_FIG4, T2_FIG4, "presence"))
    with (ws / "hierarchies" / "zipcode.csv").open("a", encoding="utf-8") as f:
        f.write("65099;6509*;*\n")
    with pytest.raises(InputError, match=r"zipcode\.csv: the hierarchy differs from the one release 1"):
        audit_workspace(ws)


def test_register_changed_after_publishing_is_an_input_error(tmp_path: Path) -> None:
    ws = write_workspace(tmp_path / "ws", REGISTER, PAPER_H, paper_releases(T1_FIG4, T2_FIG4, "presence"))
    with (ws / "register.csv").open("a", encoding="utf-8") as f:
        f.write("o9,M,65001\n")
    with pytest.raises(InputError, match=r"register\.csv: the register differs from the one release 1"):
        audit_workspace(ws)


def test_missing_files_and_ambiguous_dataset(tmp_path: Path) -> None:
    ws = write_workspace(tmp_path / "ws", REGISTER, PAPER_H, paper_releases(T1_FIG4, T2_FIG4, "presence"))
    (ws / "releases" / "clinic" / "release-0002" / "manifest.json").unlink()
    with pytest.raises(InputError, match=r"release-0002/manifest\.json: file missing"):
        audit_workspace(ws)
    ws2 = write_workspace(tmp_path / "ws2", REGISTER, PAPER_H, paper_releases(T1_FIG4, T2_FIG4, "presence"))
    (ws2 / "hierarchies" / "sex.csv").unlink()
    with pytest.raises(InputError, match=r"sex\.csv"):
        audit_workspace(ws2)
    (ws2 / "releases" / "other").mkdir()
    with pytest.raises(InputError, match="--dataset"):
        audit_workspace(ws2)
    with pytest.raises(InputError, match="no such dataset"):
        audit_workspace(ws2, dataset="nope")
    with pytest.raises(InputError, match="no release"):
        audit_workspace(ws2, dataset="other")


def test_register_with_an_empty_cell_is_an_input_error(tmp_path: Path) -> None:
    ws = write_workspace(tmp_path / "ws", REGISTER, PAPER_H, paper_releases(T1_FIG4, T2_FIG4, "presence"))
    text = (ws / "register.csv").read_text(encoding="utf-8").replace("o3,F,65014", "o3,,65014")
    (ws / "register.csv").write_text(text, encoding="utf-8")
    for manifest in ws.glob("releases/clinic/*/manifest.json"):  # re-sign so only the empty cell is wrong
        m = json.loads(manifest.read_text(encoding="utf-8"))
        m["sha256"]["register"] = _sha(ws / "register.csv")
        manifest.write_text(json.dumps(m), encoding="utf-8")
    with pytest.raises(InputError, match=r"column 'sex' is empty in data row 3"):
        audit_workspace(ws)


def test_register_value_outside_the_hierarchy_is_an_input_error(tmp_path: Path) -> None:
    reg = REGISTER.copy()
    reg.loc[4, "zipcode"] = "99999"
    ws = write_workspace(tmp_path / "ws", REGISTER, PAPER_H, paper_releases(T1_FIG4, T2_FIG4, "presence"))
    hier = read_hierarchies(ws / "hierarchies", ["sex", "zipcode"])
    manifest = json.loads((ws / "releases" / "clinic" / "release-0001" / "manifest.json").read_text(encoding="utf-8"))
    releases = [(tmp_path / "nowhere", manifest, T1_FIG4)]
    with pytest.raises(InputError, match=r"register: value '99999' of column 'zipcode' \(data row 5\)"):
        audit_releases(reg, "id", hier, releases)
    del manifest["quasi_identifiers"]  # the release contract's parsing (serialpub.io.manifest) refuses it
    with pytest.raises(InputError, match=r"nowhere/manifest\.json: key 'quasi_identifiers' is missing"):
        audit_releases(REGISTER, "id", hier, releases)


# ----------------------------------------------------------------------------- brute force

BF_AGE: Rows = [[str(a), f"[{a - a % 2}, {a - a % 2 + 1}]", "[0, 3]" if a < 4 else "[4, 7]", "*"] for a in range(8)]
BF_ZONE: Rows = [["a", "ab", "*"], ["b", "ab", "*"], ["c", "c", "*"]]  # 'c' is a chain
BF_H = {"age": BF_AGE, "sex": SEX, "zone": BF_ZONE}
BF_VALUES = ["s1", "s2", "s3"]


def _leafsets(rows: Rows) -> dict[str, frozenset[str]]:
    out: dict[str, set[str]] = {}
    for row in rows:
        for label in row:
            out.setdefault(label, set()).add(row[0])
    return {k: frozenset(v) for k, v in out.items()}


LEAFSETS = {q: _leafsets(r) for q, r in BF_H.items()}


def _children(q: str) -> dict[str, list[str]]:
    kids: dict[str, list[str]] = {}
    for row in BF_H[q]:
        path = list(dict.fromkeys(reversed(row)))  # root first, chains collapsed
        for parent, child in itertools.pairwise(path):
            if child not in kids.setdefault(parent, []):
                kids[parent].append(child)
    return kids


CHILDREN = {q: _children(q) for q in BF_H}


def _random_cut(rng: random.Random, q: str, node: str = "*") -> list[str]:
    kids = CHILDREN[q].get(node, [])
    if not kids or rng.random() < 0.35:
        return [node]
    return [n for k in kids for n in _random_cut(rng, q, k)]


def _random_boxes(rng: random.Random, mode: str) -> list[dict[str, str]]:
    qis = list(BF_H)
    if mode == "cut":
        cuts = {q: _random_cut(rng, q) for q in qis}
        return [dict(zip(qis, cell, strict=True)) for cell in itertools.product(*cuts.values())]
    if mode == "tiling":  # split on sex, then independent cuts per part: disjoint, not a cut
        boxes = []
        for sex in _random_cut(rng, "sex"):
            for age, zone in itertools.product(_random_cut(rng, "age"), _random_cut(rng, "zone")):
                boxes.append({"age": age, "sex": sex, "zone": zone})
        return boxes
    labels = {q: sorted(LEAFSETS[q]) for q in qis}  # random boxes, possibly overlapping
    return [{q: rng.choice(labels[q]) for q in qis} for _ in range(rng.randint(1, 5))]


def _inside(box: dict[str, str], person: dict[str, str]) -> bool:
    return all(person[q] in LEAFSETS[q][box[q]] for q in box)


def _random_case(seed: int) -> tuple[pd.DataFrame, list[dict]]:
    rng = random.Random(seed)
    n = rng.randint(3, 25)
    register = pd.DataFrame(
        {
            "id": [f"i{k}" for k in range(n)],
            "age": [str(rng.randrange(8)) for _ in range(n)],
            "sex": [rng.choice("MF") for _ in range(n)],
            "zone": [rng.choice("abc") for _ in range(n)],
        }
    )
    people = register.to_dict("records")
    releases = []
    for _ in range(rng.randint(1, 4)):
        boxes = _random_boxes(rng, rng.choice(["cut", "cut", "tiling", "boxes"]))
        rows = []
        for person in rng.sample(people, rng.randint(1, n)):
            covering = [b for b in boxes if _inside(b, person)]
            if covering and rng.random() > 0.1:
                box = rng.choice(covering)
                rows.append((box["age"], box["sex"], box["zone"], rng.choice(BF_VALUES)))
        rng.shuffle(rows)
        data = pd.DataFrame(rows, columns=["age", "sex", "zone", "disease"])
        if data.empty:
            data = data.astype(str)
        releases.append(
            {
                "data": data,
                "l": rng.choice([2, 3, 1.5]),
                "protected": rng.sample(BF_VALUES[:2], rng.randint(1, 2)),
                "dilution": rng.choice(["register", "presence"]),
            }
        )
    return register, releases


def _brute_force(register: pd.DataFrame, releases: list[dict]) -> dict:
    """Per individual and value, directly from the definitions (docs/design.md section 1)."""
    people = register.to_dict("records")
    values = list(dict.fromkeys(v for r in releases for v in r["protected"]))
    survival = {(p["id"], v): Fraction(1) for p in people for v in values}
    # the links the published files prove: under presence, only a region whose register
    # individuals are no more than its records had all of them present
    proven = dict(survival)
    curve = []
    overlaps = 0
    for rel in releases:
        data = rel["data"]
        groups: dict[tuple[str, ...], list[str]] = {}
        for rec in data.itertuples(index=False):
            groups.setdefault((rec.age, rec.sex, rec.zone), []).append(rec.disease)
        boxes = {key: dict(zip(["age", "sex", "zone"], key, strict=True)) for key in groups}
        for k1, k2 in itertools.combinations(boxes, 2):
            if all(LEAFSETS[q][boxes[k1][q]] & LEAFSETS[q][boxes[k2][q]] for q in BF_H):
                overlaps += 1
        for key, recs in groups.items():
            members = [p for p in people if _inside(boxes[key], p)]
            n = len(members) if rel["dilution"] == "register" else len(recs)
            for v in values:
                n_s = recs.count(v)
                if n_s:
                    for p in members:
                        survival[(p["id"], v)] *= Fraction(n - n_s, n)
                        if rel["dilution"] == "register" or len(members) <= len(recs):
                            proven[(p["id"], v)] *= Fraction(n - n_s, n)
        curve.append(float(1 - min(survival.values())) if survival else 0.0)
    p = {pair: 1 - s for pair, s in survival.items()}
    bound = 1 / Fraction(releases[-1]["l"])
    return {
        "p": p,
        "max_p": max(p.values()) if p else Fraction(0),
        "violations": sum(1 for x in p.values() if x > bound),
        "violating_individuals": len({pid for (pid, _), x in p.items() if x > bound}),
        "proven_violations": sum(1 for x in proven.values() if 1 - x > bound),
        "proven_violating_individuals": len({pid for (pid, _), x in proven.items() if 1 - x > bound}),
        "overlaps": overlaps,
        "curve": curve,
    }


@pytest.mark.parametrize("seed", range(40))
def test_matches_brute_force(tmp_path: Path, seed: int) -> None:
    register, releases = _random_case(seed)
    result = audit_workspace(write_workspace(tmp_path / "ws", register, BF_H, releases))
    expected = _brute_force(register, releases)
    assert result.max_p == pytest.approx(float(expected["max_p"]), abs=1e-12)
    assert result.violations == expected["violations"]
    assert result.violating_individuals == expected["violating_individuals"]
    assert result.proven_violations == expected["proven_violations"]
    assert result.proven_violating_individuals == expected["proven_violating_individuals"]
    assert result.overlap_pairs == expected["overlaps"]
    assert result.max_p_by_release == pytest.approx(expected["curve"], abs=1e-12)
    assert result.findings == []
    if expected["max_p"] > 0:
        assert expected["p"][(result.max_p_individual, result.max_p_value)] == expected["max_p"]


def test_brute_force_cases_cover_every_path() -> None:
    """The random cases include violations, exact ties at 1/ℓ, overlaps and both dilutions,
    and under presence violations the published files prove and ones only the upper bound shows."""
    ties = violations = overlaps = proven = unproven = 0
    for seed in range(40):
        register, releases = _random_case(seed)
        bf = _brute_force(register, releases)
        bound = 1 / Fraction(releases[-1]["l"])
        ties += any(x == bound for x in bf["p"].values())
        violations += bf["violations"] > 0
        overlaps += bf["overlaps"] > 0
        presence = any(r["dilution"] == "presence" for r in releases)
        proven += presence and bf["proven_violations"] > 0
        unproven += bf["violations"] > bf["proven_violations"]
    assert ties and violations and overlaps and proven and unproven


@pytest.mark.slow
def test_register_marginals_are_the_registers_and_a_wrong_one_is_named(published_once: Path) -> None:
    """Every release publishes, per QI, the register's individuals per leaf (the weights of the
    register-weighted query estimator); the audit recounts them from the register."""
    manifest_path = published_once / "releases" / "clinic" / "release-0001" / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    register = pd.read_csv(published_once / "register.csv", dtype=str)
    for q in manifest["quasi_identifiers"]:
        published = {k: v for k, v in manifest["register_marginals"][q].items() if v}
        assert published == register[q].value_counts().to_dict()
    assert audit_workspace(published_once).ok
    q = manifest["quasi_identifiers"][0]
    leaf = next(k for k, v in manifest["register_marginals"][q].items() if v)
    manifest["register_marginals"][q][leaf] += 1
    manifest_path.write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    result = audit_workspace(published_once)
    assert any(
        f.startswith("release 1: register_marginals of") and f"'{q}'" in f and f"{leaf}=" in f for f in result.findings
    )
